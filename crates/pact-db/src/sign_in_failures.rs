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

/// The row of `key_hash`, made when missing, locked until the transaction
/// ends: attempts on one key are counted one after the other, each seeing
/// what the one before it counted (and locked).
pub async fn lock_row(
    db: impl PgExecutor<'_>,
    key_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Failures> {
    sqlx::query_as!(
        Failures,
        "insert into sign_in_failures (key_hash, failed, updated_at) values ($1, 0, $2) \
         on conflict (key_hash) do update set updated_at = sign_in_failures.updated_at \
         returning key_hash, failed, locked_until",
        key_hash,
        now,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Sets the count of `key_hash` and, when `lock` is given, its lock.
pub async fn set_count(
    db: impl PgExecutor<'_>,
    key_hash: &[u8],
    failed: i32,
    lock: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "update sign_in_failures set failed = $2, locked_until = coalesce($3, locked_until), \
         updated_at = $4 where key_hash = $1",
        key_hash,
        failed,
        lock,
        now,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Gives back one attempt counted ahead that proved right; a lock stays only
/// while the count without it still reaches `free` (the failures before it
/// would have set it too).
pub async fn give_back(db: impl PgExecutor<'_>, key_hash: &[u8], free: i32) -> DbResult<()> {
    sqlx::query!(
        "update sign_in_failures set failed = greatest(failed - 1, 0), \
         locked_until = case when failed - 1 >= $2 then locked_until end where key_hash = $1",
        key_hash,
        free,
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
