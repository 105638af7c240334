//! One-time password-reset links ("Forgot your password?"), stored by hash.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// Stores a new link's hash for `user_id`, valid until `expires_at`, asked
/// for by `requested_from` (a hash of the requester's address key; `None`
/// for the operator's tools).
pub async fn insert(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
    user_id: Uuid,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
    requested_from: Option<&[u8]>,
) -> DbResult<()> {
    sqlx::query!(
        "insert into password_resets (token_hash, user_id, created_at, expires_at, requested_from) \
         values ($1, $2, $3, $4, $5)",
        token_hash,
        user_id,
        now,
        expires_at,
        requested_from,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// What one requester, and everyone together, may ask for one account in a
/// window: see [`insert_within_budget`].
#[derive(Clone, Copy, Debug)]
pub struct Budget<'a> {
    /// The window's start.
    pub since: OffsetDateTime,
    /// A hash of who asks (their address's rate-limit key).
    pub from: &'a [u8],
    /// Links one requester may have sent in the window.
    pub per_requester: i64,
    /// Links all requesters together may have sent in the window.
    pub per_account: i64,
}

/// Stores a new link's hash for `user_id`, ending its earlier links, unless
/// the budget is spent (false then): `per_requester` links from this
/// requester, or `per_account` from anyone, since `since`. Counted per
/// requester so that someone who knows the address cannot spend the
/// account's budget and keep its owner from resetting. The account's row is
/// locked for the transaction first, so that concurrent requests for one
/// account count one after the other: read-then-insert would let a burst of
/// parallel requests each see the budget unspent and all send a mail.
pub async fn insert_within_budget(
    conn: &mut PgConnection,
    token_hash: &[u8],
    user_id: Uuid,
    now: OffsetDateTime,
    expires_at: OffsetDateTime,
    budget: Budget<'_>,
) -> DbResult<bool> {
    if crate::users::lock(&mut *conn, user_id).await?.is_none() {
        return Ok(false);
    }
    let sent = sqlx::query!(
        "select count(*) filter (where requested_from = $3) as \"mine!\", count(*) as \"all!\" \
         from password_resets where user_id = $1 and created_at >= $2",
        user_id,
        budget.since,
        budget.from,
    )
    .fetch_one(&mut *conn)
    .await?;
    if sent.mine >= budget.per_requester || sent.all >= budget.per_account {
        return Ok(false);
    }
    // The newest link is the only one that works: a mailbox read by someone
    // else (a forwarded mail, an old device) holds no other live link.
    end_all_for(&mut *conn, user_id, now).await?;
    insert(
        &mut *conn,
        token_hash,
        user_id,
        now,
        expires_at,
        Some(budget.from),
    )
    .await?;
    Ok(true)
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
