//! The receipt log (migration 0018): log indexes of receipts, their leaf
//! hashes, and the signed tree heads (RFC 9162 §2.1, §4.10).

use sqlx::PgExecutor;

use crate::DbResult;

/// Serialises the tree-head job across nodes (taken with
/// `pg_advisory_xact_lock`, released at commit).
pub async fn lock(db: impl PgExecutor<'_>) -> DbResult<()> {
    sqlx::query!("select pg_advisory_xact_lock(hashtext('pactd:receipt_log'))",)
        .execute(db)
        .await
        .map(|_| ())
        .map_err(Into::into)
}

/// Receipts waiting for a log index, in id order: `(receipt id, jws)`.
pub async fn pending(db: impl PgExecutor<'_>, limit: i64) -> DbResult<Vec<(i64, String)>> {
    let rows = sqlx::query!(
        "select r.id, r.jws from receipt_log_pending p join receipts r on r.id = p.receipt_id \
         order by p.receipt_id limit $1",
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.jws)).collect())
}

/// The number of log entries (the next log index). Entries are gap-free by
/// construction, so this is `max(log_index) + 1`.
pub async fn size(db: impl PgExecutor<'_>) -> DbResult<i64> {
    sqlx::query_scalar!("select coalesce(max(log_index) + 1, 0) as \"size!\" from receipt_log",)
        .fetch_one(db)
        .await
        .map_err(Into::into)
}

/// Appends entries starting at `first_index` and clears them from pending.
/// Call under [`lock`], in one transaction.
pub async fn append(
    db: &mut sqlx::PgConnection,
    first_index: i64,
    receipt_ids: &[i64],
    leaf_hashes: &[Vec<u8>],
) -> DbResult<()> {
    sqlx::query!(
        "insert into receipt_log (log_index, receipt_id, leaf_hash) \
         select $1 + t.ord - 1, t.id, t.h from unnest($2::bigint[], $3::bytea[]) \
         with ordinality as t(id, h, ord)",
        first_index,
        receipt_ids,
        leaf_hashes,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "delete from receipt_log_pending where receipt_id = any($1)",
        receipt_ids,
    )
    .execute(&mut *db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Leaf hashes with `from <= log_index < to`, in index order.
pub async fn leaf_hashes(db: impl PgExecutor<'_>, from: i64, to: i64) -> DbResult<Vec<Vec<u8>>> {
    sqlx::query_scalar!(
        "select leaf_hash from receipt_log where log_index >= $1 and log_index < $2 \
         order by log_index",
        from,
        to,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// A log entry with its receipt's JWS when the receipt is still stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Entry {
    pub log_index: i64,
    pub receipt_id: i64,
    pub leaf_hash: Vec<u8>,
    pub jws: Option<String>,
}

/// Every log entry in index order, joined to its receipt (for the audit).
pub async fn entries(db: impl PgExecutor<'_>) -> DbResult<Vec<Entry>> {
    sqlx::query_as!(
        Entry,
        "select l.log_index, l.receipt_id, l.leaf_hash, r.jws as \"jws?\" \
         from receipt_log l left join receipts r on r.id = l.receipt_id order by l.log_index",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// The log index of a receipt, by receipt id or by leaf hash.
pub async fn find(
    db: impl PgExecutor<'_>,
    receipt_id: Option<i64>,
    leaf_hash: Option<&[u8]>,
) -> DbResult<Option<(i64, i64, Vec<u8>)>> {
    let row = sqlx::query!(
        "select log_index, receipt_id, leaf_hash from receipt_log \
         where ($1::bigint is null or receipt_id = $1) and ($2::bytea is null or leaf_hash = $2) \
         order by log_index limit 1",
        receipt_id,
        leaf_hash,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.log_index, r.receipt_id, r.leaf_hash)))
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredTreeHead {
    pub tree_size: i64,
    pub root_hash: Vec<u8>,
    pub timestamp_ms: i64,
    pub jws: String,
    pub kid: String,
}

pub async fn latest_head(db: impl PgExecutor<'_>) -> DbResult<Option<StoredTreeHead>> {
    sqlx::query_as!(
        StoredTreeHead,
        "select tree_size, root_hash, timestamp_ms, jws, kid from receipt_tree_heads order by tree_size desc limit 1",
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn head_of_size(db: impl PgExecutor<'_>, size: i64) -> DbResult<Option<StoredTreeHead>> {
    sqlx::query_as!(
        StoredTreeHead,
        "select tree_size, root_hash, timestamp_ms, jws, kid from receipt_tree_heads where tree_size = $1",
        size,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn heads(db: impl PgExecutor<'_>) -> DbResult<Vec<StoredTreeHead>> {
    sqlx::query_as!(
        StoredTreeHead,
        "select tree_size, root_hash, timestamp_ms, jws, kid from receipt_tree_heads order by tree_size",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Stores a head; `false` when one of that size exists already (another node
/// published it first), which is not an error.
pub async fn insert_head(db: impl PgExecutor<'_>, head: &StoredTreeHead) -> DbResult<bool> {
    let done = sqlx::query!(
        "insert into receipt_tree_heads (tree_size, root_hash, timestamp_ms, jws, kid) \
         values ($1, $2, $3, $4, $5) on conflict (tree_size) do nothing",
        head.tree_size,
        &head.root_hash,
        head.timestamp_ms,
        &head.jws,
        &head.kid,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Receipts that are neither logged nor waiting to be: only possible when
/// the pending marker was removed behind pactd's back.
pub async fn unlogged(db: impl PgExecutor<'_>) -> DbResult<Vec<i64>> {
    sqlx::query_scalar!(
        "select r.id from receipts r \
         where not exists (select 1 from receipt_log l where l.receipt_id = r.id) \
         and not exists (select 1 from receipt_log_pending p where p.receipt_id = r.id) \
         order by r.id",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}
