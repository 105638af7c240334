//! Browser sessions (hashed ids) and WebAuthn ceremony state.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::ids::BrandId;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Session {
    pub id_hash: Vec<u8>,
    pub csrf_token: String,
    pub brand_id: Option<BrandId>,
    pub user_id: Option<Uuid>,
    pub external_sub: Option<String>,
    pub pending_user_id: Option<Uuid>,
    pub mfa_at: Option<OffsetDateTime>,
    pub device_authorization_id: Option<Uuid>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// What a new session starts with (sign-in rotates the id and carries the rest over).
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    pub brand_id: Option<BrandId>,
    pub user_id: Option<Uuid>,
    pub external_sub: Option<String>,
    pub pending_user_id: Option<Uuid>,
    pub mfa_at: Option<OffsetDateTime>,
    pub device_authorization_id: Option<Uuid>,
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    csrf_token: &str,
    state: &SessionState,
    expires_at: OffsetDateTime,
) -> DbResult<Session> {
    sqlx::query_as!(
        Session,
        "insert into sessions (id_hash, csrf_token, brand_id, user_id, external_sub, pending_user_id, mfa_at, \
         device_authorization_id, expires_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id_hash, csrf_token, brand_id as \"brand_id: BrandId\", user_id, external_sub, pending_user_id, mfa_at, \
                    device_authorization_id, created_at, expires_at",
        id_hash,
        csrf_token,
        state.brand_id.as_ref().map(BrandId::as_str),
        state.user_id,
        state.external_sub,
        state.pending_user_id,
        state.mfa_at,
        state.device_authorization_id,
        expires_at,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// A live session by the hash of its cookie value.
pub async fn find_live(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Option<Session>> {
    sqlx::query_as!(
        Session,
        "update sessions set last_seen_at = $2 where id_hash = $1 and expires_at > $2 returning id_hash, csrf_token, brand_id as \"brand_id: BrandId\", user_id, external_sub, pending_user_id, mfa_at, \
                    device_authorization_id, created_at, expires_at",
        id_hash,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// One signed-in browser of a person, for the account page.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SignedIn {
    pub id_hash: Vec<u8>,
    pub created_at: OffsetDateTime,
    pub last_seen_at: OffsetDateTime,
}

/// The live signed-in sessions of a built-in account, most recent first.
pub async fn signed_in_of(
    db: impl PgExecutor<'_>,
    user_id: Uuid,
    now: OffsetDateTime,
) -> DbResult<Vec<SignedIn>> {
    sqlx::query_as!(
        SignedIn,
        "select id_hash, created_at, last_seen_at from sessions \
         where user_id = $1 and expires_at > $2 order by last_seen_at desc limit 50",
        user_id,
        now,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Signs a person out of every browser but `keep`; returns how many.
pub async fn delete_others(db: impl PgExecutor<'_>, user_id: Uuid, keep: &[u8]) -> DbResult<u64> {
    sqlx::query!(
        "delete from sessions where (user_id = $1 or pending_user_id = $1) and id_hash <> $2",
        user_id,
        keep,
    )
    .execute(db)
    .await
    .map(|r| r.rows_affected())
    .map_err(Into::into)
}

pub async fn delete(db: impl PgExecutor<'_>, id_hash: &[u8]) -> DbResult<()> {
    sqlx::query!("delete from sessions where id_hash = $1", id_hash,)
        .execute(db)
        .await
        .map(|_| ())
        .map_err(Into::into)
}

pub async fn set_device_authorization(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    id: Option<Uuid>,
) -> DbResult<()> {
    sqlx::query!(
        "update sessions set device_authorization_id = $2 where id_hash = $1",
        id_hash,
        id,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn set_mfa_at(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "update sessions set mfa_at = $2 where id_hash = $1",
        id_hash,
        at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Removes expired sessions, WebAuthn ceremonies and brand-assertion `jti`s
/// (kept until their assertion's `exp` plus skew, after which a replay fails
/// the expiry check anyway) in one statement.
pub async fn delete_expired(db: impl PgExecutor<'_>, now: OffsetDateTime) -> DbResult<()> {
    sqlx::query!(
        "with c as (delete from webauthn_ceremonies where expires_at <= $1), \
         j as (delete from brand_assertion_jtis where expires_at <= $1) \
         delete from sessions where expires_at <= $1",
        now,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Ceremony {
    pub id: Uuid,
    pub session_hash: Vec<u8>,
    pub kind: String,
    pub user_id: Option<Uuid>,
    pub state: serde_json::Value,
    pub expires_at: OffsetDateTime,
}

pub async fn insert_ceremony(
    db: impl PgExecutor<'_>,
    id: Uuid,
    session_hash: &[u8],
    kind: &str,
    user_id: Option<Uuid>,
    state: &serde_json::Value,
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into webauthn_ceremonies (id, session_hash, kind, user_id, state, expires_at) values ($1, $2, $3, $4, $5, $6)",
        id,
        session_hash,
        kind,
        user_id,
        state,
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Takes a ceremony (single use): deleted as it is read, and only by the
/// session that started it.
pub async fn take_ceremony(
    db: impl PgExecutor<'_>,
    id: Uuid,
    session_hash: &[u8],
    kind: &str,
    now: OffsetDateTime,
) -> DbResult<Option<Ceremony>> {
    sqlx::query_as!(
        Ceremony,
        "delete from webauthn_ceremonies where id = $1 and session_hash = $2 and kind = $3 and expires_at > $4 \
         returning id, session_hash, kind, user_id, state, expires_at",
        id,
        session_hash,
        kind,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Credential {
    pub id: Uuid,
    pub user_id: Uuid,
    pub credential_id: Vec<u8>,
    pub passkey: serde_json::Value,
    pub name: String,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

pub async fn credentials_of(db: impl PgExecutor<'_>, user_id: Uuid) -> DbResult<Vec<Credential>> {
    sqlx::query_as!(
        Credential,
        "select id, user_id, credential_id, passkey, name, created_at, last_used_at from webauthn_credentials \
         where user_id = $1 order by created_at",
        user_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn insert_credential(
    db: impl PgExecutor<'_>,
    user_id: Uuid,
    credential_id: &[u8],
    passkey: &serde_json::Value,
    name: &str,
) -> DbResult<()> {
    sqlx::query!(
        "insert into webauthn_credentials (id, user_id, credential_id, passkey, name) values ($1, $2, $3, $4, $5)",
        Uuid::new_v4(),
        user_id,
        credential_id,
        passkey,
        name,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Stores the passkey's updated counter/state after a successful sign-in.
pub async fn update_credential(
    db: impl PgExecutor<'_>,
    credential_id: &[u8],
    passkey: &serde_json::Value,
) -> DbResult<()> {
    sqlx::query!(
        "update webauthn_credentials set passkey = $2, last_used_at = now() where credential_id = $1",
        credential_id,
        passkey,
    )
        .execute(db)
        .await
        .map(|_| ())
        .map_err(Into::into)
}

pub async fn delete_credential(db: impl PgExecutor<'_>, user_id: Uuid, id: Uuid) -> DbResult<bool> {
    let done = sqlx::query!(
        "delete from webauthn_credentials where user_id = $1 and id = $2",
        user_id,
        id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
