//! One-time password-reset links ("Forgot your password?"), stored by hash.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// Stores a new link's hash for `user_id`, valid until `expires_at`.
pub async fn insert(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
    user_id: Uuid,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into password_resets (token_hash, user_id, created_at, expires_at) \
         values ($1, $2, $3, $4)",
        token_hash,
        user_id,
        now,
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Stores a new link's hash for `user_id`, ending its earlier links, unless
/// `max` links were already made for it since `since`; false when the
/// budget is spent. The account's
/// row is locked for the transaction first, so that concurrent requests for
/// one account count one after the other: read-then-insert would let a burst
/// of parallel requests each see the budget unspent and all send a mail.
pub async fn insert_within_budget(
    conn: &mut PgConnection,
    token_hash: &[u8],
    user_id: Uuid,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
    since: OffsetDateTime,
    max: i64,
) -> DbResult<bool> {
    if crate::users::lock(&mut *conn, user_id).await?.is_none() {
        return Ok(false);
    }
    if sent_since(&mut *conn, user_id, since).await? >= max {
        return Ok(false);
    }
    // The newest link is the only one that works: a mailbox read by someone
    // else (a forwarded mail, an old device) holds no other live link.
    end_all_for(&mut *conn, user_id, now).await?;
    insert(&mut *conn, token_hash, user_id, now, expires_at).await?;
    Ok(true)
}

/// Links sent to this account since `since` (used or not): the mail budget.
pub async fn sent_since(
    db: impl PgExecutor<'_>,
    user_id: Uuid,
    since: OffsetDateTime,
) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select count(*) as \"n!\" from password_resets where user_id = $1 and created_at >= $2",
        user_id,
        since,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// The account a live link (unused, unexpired) belongs to.
pub async fn live_user(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Option<Uuid>> {
    sqlx::query_scalar!(
        "select user_id from password_resets \
         where token_hash = $1 and used_at is null and expires_at > $2",
        token_hash,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Marks a live link used, atomically: of two concurrent uses exactly one
/// gets the account back.
pub async fn consume(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
    now: OffsetDateTime,
) -> DbResult<Option<Uuid>> {
    sqlx::query_scalar!(
        "update password_resets set used_at = $2 \
         where token_hash = $1 and used_at is null and expires_at > $2 \
         returning user_id",
        token_hash,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Every other link of the account dies once a new password is set.
pub async fn end_all_for(
    db: impl PgExecutor<'_>,
    user_id: Uuid,
    now: OffsetDateTime,
) -> DbResult<u64> {
    sqlx::query!(
        "update password_resets set used_at = $2 where user_id = $1 and used_at is null",
        user_id,
        now,
    )
    .execute(db)
    .await
    .map(|r| r.rows_affected())
    .map_err(Into::into)
}

/// Housekeeping: links that expired a day ago are of no use, even as a count.
pub async fn sweep(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    sqlx::query!("delete from password_resets where expires_at < $1", before,)
        .execute(db)
        .await
        .map(|r| r.rows_affected())
        .map_err(Into::into)
}
