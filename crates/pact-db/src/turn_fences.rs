//! What the nodes share about a running turn (migration 0026): calls made
//! on other nodes than the turn's own, the turn's end, ended MCP sessions.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// A call on another node enters the turn: false once the turn has ended
/// (the call is refused, nothing is sent).
pub async fn enter(
    db: impl PgExecutor<'_>,
    turn_id: Uuid,
    expires_at: OffsetDateTime,
) -> DbResult<bool> {
    let row = sqlx::query_scalar!(
        "insert into turn_fences (turn_id, in_flight, expires_at) values ($1, 1, $2) \
         on conflict (turn_id) do update set in_flight = turn_fences.in_flight + 1 \
         where not turn_fences.ended returning in_flight",
        turn_id,
        expires_at,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.is_some())
}

/// The call leaves the turn with what it did (a JSON record for the receipt).
pub async fn leave(
    db: impl PgExecutor<'_>,
    turn_id: Uuid,
    record: &serde_json::Value,
) -> DbResult<()> {
    sqlx::query!(
        "update turn_fences set in_flight = greatest(in_flight - 1, 0), \
         records = records || jsonb_build_array($2::jsonb) where turn_id = $1",
        turn_id,
        record,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// What the calls on other nodes left, and how many are still in flight.
#[derive(Clone, Debug)]
pub struct Fence {
    pub in_flight: i32,
    pub records: serde_json::Value,
}

/// The turn's own node ends the turn: no call enters any more.
pub async fn end(
    db: impl PgExecutor<'_>,
    turn_id: Uuid,
    expires_at: OffsetDateTime,
) -> DbResult<Fence> {
    sqlx::query_as!(
        Fence,
        "insert into turn_fences (turn_id, ended, expires_at) values ($1, true, $2) \
         on conflict (turn_id) do update set ended = true returning in_flight, records",
        turn_id,
        expires_at,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// The fence as it stands (while the ended turn waits for its calls).
pub async fn read(db: impl PgExecutor<'_>, turn_id: Uuid) -> DbResult<Option<Fence>> {
    sqlx::query_as!(
        Fence,
        "select in_flight, records from turn_fences where turn_id = $1",
        turn_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Whether an MCP session of the turn was ended on some node, and whether
/// the turn has ended.
pub async fn status(
    db: impl PgExecutor<'_>,
    turn_id: Uuid,
    session: &str,
) -> DbResult<(bool, bool)> {
    let row = sqlx::query!(
        "select ended, $2 = any(closed_sessions) as \"closed!\" from turn_fences where turn_id = $1",
        turn_id,
        session,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map_or((false, false), |r| (r.ended, r.closed)))
}

/// Ends one MCP session of the turn for every node.
pub async fn close_session(
    db: impl PgExecutor<'_>,
    turn_id: Uuid,
    session: &str,
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into turn_fences (turn_id, closed_sessions, expires_at) values ($1, array[$2], $3) \
         on conflict (turn_id) do update set closed_sessions = \
           array_append(turn_fences.closed_sessions, $2)",
        turn_id,
        session,
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Removes the fences of turns whose tokens expired before `before`.
pub async fn sweep(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query!("delete from turn_fences where expires_at < $1", before)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
