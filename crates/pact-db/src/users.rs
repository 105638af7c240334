//! Brand customers' accounts (built-in login), their recovery codes, and the
//! lockout counters that must hold across nodes.

use crate::ids::{BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::sign_in_state::{self, Accounts};

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct User {
    pub id: Uuid,
    pub brand_id: BrandId,
    pub email: String,
    pub external_id: Option<String>,
    pub password_hash: Option<String>,
    pub totp_secret_sealed: Option<Vec<u8>>,
    pub totp_last_step: Option<i64>,
    pub failed_logins: i32,
    pub locked_until: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    /// Disabled by an operator: no sign-in at all.
    pub disabled_at: Option<OffsetDateTime>,
}

impl User {
    /// The user's id at the brand, as delegation tokens carry it: the brand's
    /// own id when known, otherwise a stable opaque id.
    pub fn subject(&self) -> UserSub {
        UserSub::from(
            self.external_id
                .clone()
                .unwrap_or_else(|| self.id.to_string()),
        )
    }

    pub fn has_totp(&self) -> bool {
        self.totp_secret_sealed.is_some()
    }

    pub fn is_disabled(&self) -> bool {
        self.disabled_at.is_some()
    }
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    brand_id: &BrandId,
    email: &str,
    external_id: Option<&str>,
    password_hash: &str,
) -> DbResult<User> {
    sqlx::query_as!(
        User,
        "insert into users (id, brand_id, email, external_id, password_hash) values ($1, $2, $3, $4, $5) \
         returning id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                    failed_logins, locked_until, created_at, disabled_at",
        id,
        brand_id,
        email,
        external_id,
        password_hash,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn find(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<User>> {
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                    failed_logins, locked_until, created_at, disabled_at from users where id = $1",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn lock(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<User>> {
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                    failed_logins, locked_until, created_at, disabled_at from users where id = $1 for update",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn find_by_email(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    email: &str,
) -> DbResult<Option<User>> {
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                    failed_logins, locked_until, created_at, disabled_at from users where brand_id = $1 and email = $2",
        brand_id,
        email,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list(db: impl PgExecutor<'_>, brand_id: Option<&str>) -> DbResult<Vec<User>> {
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                    failed_logins, locked_until, created_at, disabled_at from users where ($1::text is null or brand_id = $1) order by brand_id, email",
        brand_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn set_password_hash(db: impl PgExecutor<'_>, id: Uuid, hash: &str) -> DbResult<()> {
    sqlx::query!(
        "update users set password_hash = $2 where id = $1",
        id,
        hash,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

// Failed attempts and TOTP: the same columns and rules as the other kind
// of account (sign_in_state.rs).

/// A failed sign-in: the new count and, when the rule says so, a lock.
pub async fn record_failure(
    db: impl PgExecutor<'_>,
    id: Uuid,
    failed_logins: i32,
    locked_until: Option<OffsetDateTime>,
) -> DbResult<()> {
    sign_in_state::record_failure(db, Accounts::Users, id, failed_logins, locked_until).await
}

pub async fn clear_failures(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<()> {
    sign_in_state::clear_failures(db, Accounts::Users, id).await
}

pub async fn set_totp(db: impl PgExecutor<'_>, id: Uuid, sealed: Option<&[u8]>) -> DbResult<()> {
    sign_in_state::set_totp(db, Accounts::Users, id, sealed).await
}

/// Records the accepted time step if newer than the last: false means the
/// code was already used (RFC 6238 §5.2).
pub async fn advance_totp_step(db: impl PgExecutor<'_>, id: Uuid, step: i64) -> DbResult<bool> {
    sign_in_state::advance_totp_step(db, Accounts::Users, id, step).await
}

/// Removes every second factor (admin reset): TOTP, passkeys, recovery codes —
/// and signs the user out everywhere, since a reset usually means a factor
/// was lost or stolen.
pub async fn reset_mfa(db: &mut sqlx::PgConnection, id: Uuid) -> DbResult<()> {
    sqlx::query!(
        "delete from sessions where user_id = $1 or pending_user_id = $1",
        id,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "update users set totp_secret_sealed = null, totp_last_step = null where id = $1",
        id,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!("delete from webauthn_credentials where user_id = $1", id,)
        .execute(&mut *db)
        .await?;
    sqlx::query!("delete from recovery_codes where user_id = $1", id,)
        .execute(&mut *db)
        .await?;
    Ok(())
}

/// Replaces the user's recovery codes.
pub async fn replace_recovery_codes(
    db: &mut sqlx::PgConnection,
    id: Uuid,
    hashes: &[Vec<u8>],
) -> DbResult<()> {
    sqlx::query!("delete from recovery_codes where user_id = $1", id,)
        .execute(&mut *db)
        .await?;
    for h in hashes {
        sqlx::query!(
            "insert into recovery_codes (user_id, code_hash) values ($1, $2)",
            id,
            h,
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// Spends a recovery code stored in any of `forms` (its keyed form, and the
/// plain digest older codes were stored as): false when unknown or already
/// used. One `update`, so two requests racing with one code cannot both
/// succeed.
pub async fn use_recovery_code(
    db: impl PgExecutor<'_>,
    id: Uuid,
    forms: &[Vec<u8>],
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update recovery_codes set used_at = now() where user_id = $1 and code_hash = any($2) and used_at is null",
        id,
        forms,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() >= 1)
}

pub async fn unused_recovery_codes(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select count(*) as \"n!\" from recovery_codes where user_id = $1 and used_at is null",
        id,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Remembers a brand login assertion's `jti`; false when it was seen before (replay).
pub async fn claim_assertion_jti(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    jti: &str,
    expires_at: OffsetDateTime,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "insert into brand_assertion_jtis (brand_id, jti, expires_at) values ($1, $2, $3) on conflict do nothing",
        brand_id,
        jti,
        expires_at,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Disables (or enables again) an account; disabling also ends its sessions.
/// Its grants are revoked by the caller in the same transaction.
pub async fn set_disabled(
    db: &mut sqlx::PgConnection,
    id: Uuid,
    disabled_at: Option<OffsetDateTime>,
) -> DbResult<()> {
    sqlx::query!(
        "update users set disabled_at = $2 where id = $1",
        id,
        disabled_at,
    )
    .execute(&mut *db)
    .await?;
    if disabled_at.is_some() {
        sqlx::query!(
            "delete from sessions where user_id = $1 or pending_user_id = $1",
            id,
        )
        .execute(&mut *db)
        .await?;
    }
    Ok(())
}

/// Removes an account and, by the foreign keys' cascades, its second
/// factors, recovery codes, sessions and ceremonies. Grants and receipts name
/// only the opaque brand user id and are kept (revoked) as evidence.
pub async fn delete(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<bool> {
    let done = sqlx::query!("delete from users where id = $1", id,)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}
