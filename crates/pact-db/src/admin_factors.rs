//! Staff second factors beyond TOTP (migration 0022): passkeys and
//! single-use recovery codes of console accounts. The TOTP secret and the
//! failure counters are on `admins` itself (admins.rs, sign_in_state.rs).

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// One passkey of a console account.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AdminPasskey {
    pub id: Uuid,
    pub admin_id: Uuid,
    pub credential_id: Vec<u8>,
    /// webauthn-rs's `Passkey`, serialised.
    pub passkey: serde_json::Value,
    pub name: String,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

pub async fn passkeys_of(db: impl PgExecutor<'_>, admin_id: Uuid) -> DbResult<Vec<AdminPasskey>> {
    sqlx::query_as!(
        AdminPasskey,
        "select id, admin_id, credential_id, passkey, name, created_at, last_used_at from admin_passkeys where admin_id = $1 order by created_at, id",
        admin_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn count_passkeys(db: impl PgExecutor<'_>, admin_id: Uuid) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select count(*) as \"n!\" from admin_passkeys where admin_id = $1",
        admin_id,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// A new passkey; a credential id already registered (to anyone) is a
/// unique violation.
pub async fn insert_passkey(
    db: impl PgExecutor<'_>,
    admin_id: Uuid,
    credential_id: &[u8],
    passkey: &serde_json::Value,
    name: &str,
) -> DbResult<AdminPasskey> {
    sqlx::query_as!(
        AdminPasskey,
        "insert into admin_passkeys (id, admin_id, credential_id, passkey, name) \
         values ($1, $2, $3, $4, $5) returning id, admin_id, credential_id, passkey, name, created_at, last_used_at",
        Uuid::new_v4(),
        admin_id,
        credential_id,
        passkey,
        name,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// The passkey's state after a sign-in (signature counter, backup flags),
/// and when it was last used.
pub async fn update_passkey(
    db: impl PgExecutor<'_>,
    admin_id: Uuid,
    credential_id: &[u8],
    passkey: &serde_json::Value,
    now: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "update admin_passkeys set passkey = $3, last_used_at = $4 \
         where admin_id = $1 and credential_id = $2",
        admin_id,
        credential_id,
        passkey,
        now,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Removes one of the account's own passkeys: the name it had, or `None`
/// when the account has no such passkey.
pub async fn delete_passkey(
    db: impl PgExecutor<'_>,
    admin_id: Uuid,
    id: Uuid,
) -> DbResult<Option<String>> {
    sqlx::query_scalar!(
        "delete from admin_passkeys where admin_id = $1 and id = $2 returning name",
        admin_id,
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Replaces the account's recovery codes (the old ones stop working).
pub async fn replace_recovery_codes(
    conn: &mut PgConnection,
    admin_id: Uuid,
    hashes: &[Vec<u8>],
) -> DbResult<()> {
    sqlx::query!(
        "delete from admin_recovery_codes where admin_id = $1",
        admin_id,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "insert into admin_recovery_codes (admin_id, code_hash) \
         select $1, h from unnest($2::bytea[]) as h on conflict do nothing",
        admin_id,
        hashes,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Spends a recovery code stored in any of `forms` (its keyed form, and the
/// plain digest older codes were stored as): false when unknown or already
/// used. One `update`, so two requests racing with the same code cannot both
/// succeed.
pub async fn use_recovery_code(
    db: impl PgExecutor<'_>,
    admin_id: Uuid,
    forms: &[Vec<u8>],
    now: OffsetDateTime,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update admin_recovery_codes set used_at = $3 \
         where admin_id = $1 and code_hash = any($2) and used_at is null",
        admin_id,
        forms,
        now,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() >= 1)
}

pub async fn unused_recovery_codes(db: impl PgExecutor<'_>, admin_id: Uuid) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select count(*) as \"n!\" from admin_recovery_codes where admin_id = $1 and used_at is null",
        admin_id,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}
