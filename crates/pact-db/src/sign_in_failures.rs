//! Failed password sign-ins by key hash (see migration 0005).

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::DbResult;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Failures {
    pub key_hash: Vec<u8>,
    pub failed: i32,
    pub locked_until: Option<OffsetDateTime>,
}

/// The rows for these keys (missing keys have no failures).
pub async fn find(db: impl PgExecutor<'_>, keys: &[Vec<u8>]) -> DbResult<Vec<Failures>> {
    sqlx::query_as!(
        Failures,
        "select key_hash, failed, locked_until from sign_in_failures where key_hash = any($1)",
        keys,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Counts one more failure for `key_hash` and returns the new count; the
/// increment happens in the database, so concurrent failures on any node all
/// count.
pub async fn increment(
    db: impl PgExecutor<'_>,
    key_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<i32> {
    sqlx::query_scalar!(
        "insert into sign_in_failures (key_hash, failed, updated_at) values ($1, 1, $2) \
         on conflict (key_hash) do update set failed = sign_in_failures.failed + 1, updated_at = $2 \
         returning failed",
        key_hash,
        now,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn lock_until(
    db: impl PgExecutor<'_>,
    key_hash: &[u8],
    until: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "update sign_in_failures set locked_until = $2 where key_hash = $1",
        key_hash,
        until,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn clear(db: impl PgExecutor<'_>, keys: &[Vec<u8>]) -> DbResult<()> {
    sqlx::query!(
        "delete from sign_in_failures where key_hash = any($1)",
        keys,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Housekeeping: forgets failures nobody has added to for a day.
pub async fn sweep(db: impl PgExecutor<'_>, older_than: OffsetDateTime) -> DbResult<u64> {
    sqlx::query!(
        "delete from sign_in_failures where updated_at < $1 and (locked_until is null or locked_until < $1)",
        older_than,
    )
        .execute(db)
        .await
        .map(|r| r.rows_affected())
        .map_err(Into::into)
}
