//! The nodes' heartbeats: which pactd processes run, and whether each one's
//! change listener is subscribed.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct NodeRow {
    pub id: Uuid,
    pub hostname: String,
    pub version: String,
    pub started_at: OffsetDateTime,
    pub last_seen: OffsetDateTime,
    pub listening: bool,
}

/// Writes (or refreshes) this node's row.
pub async fn heartbeat(db: impl PgExecutor<'_>, n: &NodeRow) -> DbResult<()> {
    sqlx::query!(
        "insert into nodes (id, hostname, version, started_at, last_seen, listening) \
         values ($1, $2, $3, $4, $5, $6) \
         on conflict (id) do update set last_seen = excluded.last_seen, \
         listening = excluded.listening, hostname = excluded.hostname, version = excluded.version",
        n.id,
        &n.hostname,
        &n.version,
        n.started_at,
        n.last_seen,
        n.listening,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Every node row, oldest start first.
pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<NodeRow>> {
    sqlx::query_as!(
        NodeRow,
        "select id, hostname, version, started_at, last_seen, listening from nodes \
         order by started_at, id",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Removes this node's row (a clean shutdown).
pub async fn remove(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<()> {
    sqlx::query!("delete from nodes where id = $1", id,)
        .execute(db)
        .await
        .map(|_| ())
        .map_err(Into::into)
}

/// Removes the rows not refreshed since `before`.
pub async fn sweep(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query!("delete from nodes where last_seen < $1", before,)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
