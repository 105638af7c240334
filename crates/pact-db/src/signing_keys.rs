//! The Provider's signing keys (private parts sealed by the caller).

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SigningKeyRow {
    pub kid: String,
    pub public_jwk: serde_json::Value,
    pub private_sealed: Vec<u8>,
    pub created_at: OffsetDateTime,
    pub activates_at: OffsetDateTime,
    pub retired_at: Option<OffsetDateTime>,
    pub unpublish_at: Option<OffsetDateTime>,
}

/// Serialises the creation of the first key until the transaction ends: nodes
/// starting together on an empty database then make exactly one.
pub async fn lock_creation(db: impl PgExecutor<'_>) -> DbResult<()> {
    sqlx::query!("select pg_advisory_xact_lock(hashtext('pactd:signing_keys'))")
        .execute(db)
        .await?;
    Ok(())
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    kid: &str,
    public_jwk: &serde_json::Value,
    private_sealed: &[u8],
    activates_at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into signing_keys (kid, public_jwk, private_sealed, activates_at) values ($1, $2, $3, $4)",
        kid,
        public_jwk,
        private_sealed,
        activates_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Every key ever made, newest first (receipt verification needs retired keys too).
pub async fn all(db: impl PgExecutor<'_>) -> DbResult<Vec<SigningKeyRow>> {
    sqlx::query_as!(
        SigningKeyRow,
        "select kid, public_jwk, private_sealed, created_at, activates_at, retired_at, unpublish_at from signing_keys order by activates_at desc, created_at desc",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Marks every key that signs before `at` as retired at `at`, to be unpublished at `unpublish_at`.
pub async fn retire_older(
    db: impl PgExecutor<'_>,
    new_kid: &str,
    at: OffsetDateTime,
    unpublish_at: OffsetDateTime,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "update signing_keys set retired_at = $2, unpublish_at = $3 \
         where kid <> $1 and retired_at is null",
        new_kid,
        at,
        unpublish_at,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
