//! Every value stored sealed with the master key, read and rewritten row by
//! row for `pactd keys rewrap`. A new sealed column belongs in
//! [`SEALED_COLUMNS`] and here; a test compares that list with the schema, so a
//! column cannot be forgotten by the rewrap.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::DbResult;

/// (table, column) of every sealed value. By convention the column name
/// contains `sealed`, which is what the schema test looks for.
pub const SEALED_COLUMNS: &[(&str, &str)] = &[
    ("signing_keys", "private_sealed"),
    ("users", "totp_secret_sealed"),
    ("brand_webhook_secrets", "sealed"),
    ("admins", "totp_secret_sealed"),
    ("brand_oidc", "client_secret_sealed"),
];

/// The sealing context (AEAD associated data) of a console account's TOTP
/// secret at rest: defined once, for the console that seals it and the rewrap
/// that re-seals it.
pub fn admin_totp_aad(admin_id: Uuid) -> Vec<u8> {
    format!("pactd admin totp\n{admin_id}").into_bytes()
}

/// Every signing key's sealed private part, locked until the transaction ends.
pub async fn lock_signing_keys(db: &mut PgConnection) -> DbResult<Vec<(String, Vec<u8>)>> {
    let rows = sqlx::query!("select kid, private_sealed from signing_keys order by kid for update")
        .fetch_all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.kid, r.private_sealed))
        .collect())
}

pub async fn set_signing_key(db: &mut PgConnection, kid: &str, sealed: &[u8]) -> DbResult<()> {
    sqlx::query!(
        "update signing_keys set private_sealed = $2 where kid = $1",
        kid,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Every user's sealed TOTP secret, locked until the transaction ends.
pub async fn lock_totp_secrets(db: &mut PgConnection) -> DbResult<Vec<(Uuid, Vec<u8>)>> {
    let rows = sqlx::query!(
        "select id, totp_secret_sealed as \"totp_secret_sealed!\" from users \
         where totp_secret_sealed is not null order by id for update",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.totp_secret_sealed))
        .collect())
}

/// Replaces the sealed form only; unlike `users::set_totp` it keeps the last
/// accepted step, so a re-sealed secret still refuses a replayed code.
pub async fn set_totp_secret(db: &mut PgConnection, id: Uuid, sealed: &[u8]) -> DbResult<()> {
    sqlx::query!(
        "update users set totp_secret_sealed = $2 where id = $1",
        id,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Every webhook secret (current, in grace and retired), locked until the transaction ends.
pub async fn lock_webhook_secrets(
    db: &mut PgConnection,
) -> DbResult<Vec<(Uuid, crate::ids::BrandId, Vec<u8>)>> {
    let rows = sqlx::query!(
        "select id, brand_id, sealed from brand_webhook_secrets order by id for update"
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.brand_id.into(), r.sealed))
        .collect())
}

pub async fn set_webhook_secret(db: &mut PgConnection, id: Uuid, sealed: &[u8]) -> DbResult<()> {
    sqlx::query!(
        "update brand_webhook_secrets set sealed = $2 where id = $1",
        id,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Every console account's sealed TOTP secret, locked until the transaction ends.
pub async fn lock_admin_totp_secrets(db: &mut PgConnection) -> DbResult<Vec<(Uuid, Vec<u8>)>> {
    let rows = sqlx::query!(
        "select id, totp_secret_sealed as \"totp_secret_sealed!\" from admins \
         where totp_secret_sealed is not null order by id for update",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.totp_secret_sealed))
        .collect())
}

/// Replaces the sealed form only, keeping the last accepted step (replays stay refused).
pub async fn set_admin_totp_secret(db: &mut PgConnection, id: Uuid, sealed: &[u8]) -> DbResult<()> {
    sqlx::query!(
        "update admins set totp_secret_sealed = $2 where id = $1",
        id,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Unused recovery codes, people's and staff's: they are keyed by the master
/// key (an HMAC), so a rewrap cannot carry them over (`pactd keys rewrap`).
pub async fn unused_recovery_codes(conn: &mut PgConnection) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select (select count(*) from recovery_codes where used_at is null) \
              + (select count(*) from admin_recovery_codes where used_at is null) as \"n!\""
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(Into::into)
}

/// Deletes every unused recovery code (a rewrap the operator allowed to).
pub async fn forget_unused_recovery_codes(conn: &mut PgConnection) -> DbResult<()> {
    sqlx::query!("delete from recovery_codes where used_at is null")
        .execute(&mut *conn)
        .await?;
    sqlx::query!("delete from admin_recovery_codes where used_at is null")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// One stored signing key (its kid and sealed private key), to check that a
/// master key is this database's before anything is sealed with it.
pub async fn any_signing_key(db: impl sqlx::PgExecutor<'_>) -> DbResult<Option<(String, Vec<u8>)>> {
    let row = sqlx::query!("select kid, private_sealed from signing_keys order by kid limit 1")
        .fetch_optional(db)
        .await?;
    Ok(row.map(|r| (r.kid, r.private_sealed)))
}
