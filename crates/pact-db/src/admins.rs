//! The merchant's staff: console accounts, admin API credentials and console
//! sessions (migration 0012). Staff are not brand customers (`users`).

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::sign_in_state::{self, Accounts};

/// A staff account's or API credential's role, the text of the `role` columns
/// (their CHECK constraints, migrations/0012, allow exactly these three).
/// Ordered: each role may do everything the ones before it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, sqlx::Type, serde::Serialize)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything within its brands.
    Viewer,
    /// Also revokes grants, disables agents, unlocks customers and resets
    /// their second factors.
    Operator,
    /// Also registers agents and manages admins and credentials.
    Owner,
}

impl Role {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "viewer" => Some(Self::Viewer),
            "operator" => Some(Self::Operator),
            "owner" => Some(Self::Owner),
            _ => None,
        }
    }

    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Owner => "owner",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One staff account of the console.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Admin {
    pub id: Uuid,
    pub email: String,
    pub password_hash: String,
    pub totp_secret_sealed: Option<Vec<u8>>,
    pub totp_last_step: Option<i64>,
    pub role: Role,
    /// `None`: every brand.
    pub brands: Option<Vec<String>>,
    pub failed_logins: i32,
    pub locked_until: Option<OffsetDateTime>,
    pub disabled_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

impl Admin {
    pub fn has_totp(&self) -> bool {
        self.totp_secret_sealed.is_some()
    }
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    email: &str,
    password_hash: &str,
    role: Role,
    brands: Option<&[String]>,
) -> DbResult<Admin> {
    sqlx::query_as!(
        Admin,
        "insert into admins (id, email, password_hash, role, brands) values ($1, $2, $3, $4, $5) \
         returning id, email, password_hash, totp_secret_sealed, totp_last_step, role as \"role: Role\", brands, \
                          failed_logins, locked_until, disabled_at, created_at",
        id,
        email,
        password_hash,
        role as Role,
        brands,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn find(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<Admin>> {
    sqlx::query_as!(
        Admin,
        "select id, email, password_hash, totp_secret_sealed, totp_last_step, role as \"role: Role\", brands, \
                          failed_logins, locked_until, disabled_at, created_at from admins where id = $1",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// The account as it is now, its row locked until the transaction ends: for
/// a change that must see the account's factors as they are (not removing
/// the last one while another request removes the other).
pub async fn lock(conn: &mut sqlx::PgConnection, id: Uuid) -> DbResult<Option<Admin>> {
    sqlx::query_as!(
        Admin,
        "select id, email, password_hash, totp_secret_sealed, totp_last_step, role as \"role: Role\", brands, \
                          failed_logins, locked_until, disabled_at, created_at from admins where id = $1 for update",
        id,
    )
    .fetch_optional(conn)
    .await
    .map_err(Into::into)
}

pub async fn find_by_email(db: impl PgExecutor<'_>, email: &str) -> DbResult<Option<Admin>> {
    sqlx::query_as!(
        Admin,
        "select id, email, password_hash, totp_secret_sealed, totp_last_step, role as \"role: Role\", brands, \
                          failed_logins, locked_until, disabled_at, created_at from admins where email = $1",
        email,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<Admin>> {
    sqlx::query_as!(
        Admin,
        "select id, email, password_hash, totp_secret_sealed, totp_last_step, role as \"role: Role\", brands, \
                          failed_logins, locked_until, disabled_at, created_at from admins order by email",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Removes an account; its sessions go with it (foreign-key cascade).
pub async fn delete(db: impl PgExecutor<'_>, email: &str) -> DbResult<bool> {
    let done = sqlx::query!("delete from admins where email = $1", email,)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

// Failed attempts and TOTP: the same columns and rules as the other kind
// of account (sign_in_state.rs).

/// A failed sign-in: the new count and, when the rule says so, a lock.
/// One more failed sign-in, counted in the row (so parallel ones all
/// count); the new count, `None` when the account is gone.
pub async fn count_failure(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<i32>> {
    sign_in_state::count_failure(db, Accounts::Admins, id).await
}

pub async fn lock_until(db: impl PgExecutor<'_>, id: Uuid, until: OffsetDateTime) -> DbResult<()> {
    sign_in_state::lock_until(db, Accounts::Admins, id, until).await
}

pub async fn clear_failures(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<()> {
    sign_in_state::clear_failures(db, Accounts::Admins, id).await
}

pub async fn set_totp(db: impl PgExecutor<'_>, id: Uuid, sealed: Option<&[u8]>) -> DbResult<()> {
    sign_in_state::set_totp(db, Accounts::Admins, id, sealed).await
}

/// Records the accepted time step if newer than the last: false means the
/// code was already used (RFC 6238 §5.2).
pub async fn advance_totp_step(db: impl PgExecutor<'_>, id: Uuid, step: i64) -> DbResult<bool> {
    sign_in_state::advance_totp_step(db, Accounts::Admins, id, step).await
}

// ---------------------------------------------------------------------------
// API credentials
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Credential {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub brands: Option<Vec<String>>,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

pub async fn insert_credential(
    db: impl PgExecutor<'_>,
    id: Uuid,
    name: &str,
    role: Role,
    brands: Option<&[String]>,
    secret_hash: &[u8],
) -> DbResult<Credential> {
    sqlx::query_as!(
        Credential,
        "insert into admin_credentials (id, name, role, brands, secret_hash) values ($1, $2, $3, $4, $5) \
         returning id, name, role as \"role: Role\", brands, created_at, last_used_at, revoked_at",
        id,
        name,
        role as Role,
        brands,
        secret_hash,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// The live credential whose secret hashes to `secret_hash`, marking it used.
pub async fn use_credential(
    db: impl PgExecutor<'_>,
    secret_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Option<Credential>> {
    sqlx::query_as!(
        Credential,
        "update admin_credentials set last_used_at = $2 where secret_hash = $1 and revoked_at is null \
         returning id, name, role as \"role: Role\", brands, created_at, last_used_at, revoked_at",
        secret_hash,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list_credentials(db: impl PgExecutor<'_>) -> DbResult<Vec<Credential>> {
    sqlx::query_as!(
        Credential,
        "select id, name, role as \"role: Role\", brands, created_at, last_used_at, revoked_at from admin_credentials order by name",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Refuses the credential from the next request on; false when unknown or
/// already revoked.
pub async fn revoke_credential(db: impl PgExecutor<'_>, name: &str) -> DbResult<bool> {
    let done = sqlx::query!(
        "update admin_credentials set revoked_at = now() where name = $1 and revoked_at is null",
        name,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

// ---------------------------------------------------------------------------
// Console sessions
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AdminSession {
    pub id_hash: Vec<u8>,
    pub csrf_token: String,
    pub admin_id: Option<Uuid>,
    pub pending_admin_id: Option<Uuid>,
    pub mfa_at: Option<OffsetDateTime>,
    pub expires_at: OffsetDateTime,
}

#[allow(clippy::too_many_arguments)]
pub async fn insert_session(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    csrf_token: &str,
    admin_id: Option<Uuid>,
    pending_admin_id: Option<Uuid>,
    mfa_at: Option<OffsetDateTime>,
    expires_at: OffsetDateTime,
) -> DbResult<AdminSession> {
    sqlx::query_as!(
        AdminSession,
        "insert into admin_sessions (id_hash, csrf_token, admin_id, pending_admin_id, mfa_at, expires_at) \
         values ($1, $2, $3, $4, $5, $6) returning id_hash, csrf_token, admin_id, pending_admin_id, mfa_at, expires_at",
        id_hash,
        csrf_token,
        admin_id,
        pending_admin_id,
        mfa_at,
        expires_at,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn find_session(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Option<AdminSession>> {
    sqlx::query_as!(
        AdminSession,
        "select id_hash, csrf_token, admin_id, pending_admin_id, mfa_at, expires_at from admin_sessions where id_hash = $1 and expires_at > $2",
        id_hash,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn delete_session(db: impl PgExecutor<'_>, id_hash: &[u8]) -> DbResult<()> {
    sqlx::query!("delete from admin_sessions where id_hash = $1", id_hash,)
        .execute(db)
        .await
        .map(|_| ())
        .map_err(Into::into)
}

/// Ends every console session of an account (disabled, removed, new factor).
pub async fn delete_sessions_of(db: impl PgExecutor<'_>, admin_id: Uuid) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from admin_sessions where admin_id = $1 or pending_admin_id = $1",
        admin_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Removes console sessions that have ended (done whenever one starts, so
/// the table holds only live ones and a few stragglers).
pub async fn delete_expired_sessions(
    db: impl PgExecutor<'_>,
    now: OffsetDateTime,
) -> DbResult<u64> {
    let done = sqlx::query!("delete from admin_sessions where expires_at <= $1", now,)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
