//! Publishing the receipt log's signed tree heads: one of the node's jobs.
//!
//! A stored receipt waits for its place in the log; this job gives pending
//! receipts their log indexes in order (one node at a time, under an
//! advisory lock), keeps this node's copy of the Merkle tree
//! (`receipt_tree.rs`) in step, and signs a tree head when the log grew
//! (RFC 9162's signed tree head, in pact-jose's `tree_head.rs`). pact-server
//! serves the heads and the proofs (`receipt_log.rs`).

use pact_crypto::merkle::{self, Hash};
use pact_db::receipt_log::{self as db_log, StoredTreeHead};
use pact_jose::TreeHead;
use time::OffsetDateTime;

use crate::keys::KeyError;
use crate::node::{Node, NodeInner};

/// How many pending receipts one transaction moves into the log.
const APPEND_BATCH: i64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("database: {0}")]
    Db(#[from] pact_db::Error),
    /// The stored log is not what it must be (a leaf that is not a hash,
    /// fewer entries than a published head).
    #[error("{0}")]
    Broken(&'static str),
    #[error("no signing key: {0}")]
    Key(#[from] KeyError),
    #[error("signing the tree head: {0}")]
    Sign(#[from] pact_jose::ProviderKeyError),
}

impl From<sqlx::Error> for LogError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e.into())
    }
}

/// A stored leaf hash as the tree holds it.
pub fn to_hash(bytes: &[u8]) -> Result<Hash, LogError> {
    bytes
        .try_into()
        .map_err(|_| LogError::Broken("a stored leaf hash is not 32 bytes"))
}

/// A log size as the database stores it.
pub fn as_i64(n: u64) -> Result<i64, LogError> {
    i64::try_from(n).map_err(|_| LogError::Broken("log size out of range"))
}

/// Makes this node's tree hold at least the first `size` leaves.
pub async fn sync_tree(node: &NodeInner, size: u64) -> Result<(), LogError> {
    // Two rounds at most: a concurrent request may extend the copy meanwhile.
    for _ in 0..3 {
        let have = node.receipt_log.with_tree(|t| t.len());
        if have >= size {
            return Ok(());
        }
        let (from, to) = (as_i64(have)?, as_i64(size)?);
        let rows = db_log::leaf_hashes(&node.db, from, to).await?;
        let hashes = rows
            .iter()
            .map(|r| to_hash(r))
            .collect::<Result<Vec<_>, _>>()?;
        node.receipt_log.with_tree(|t| {
            if t.len() == have {
                for h in hashes {
                    t.push(h);
                }
            }
        });
    }
    if node.receipt_log.with_tree(|t| t.len()) >= size {
        Ok(())
    } else {
        Err(LogError::Broken(
            "the receipt log holds fewer entries than a published head",
        ))
    }
}

/// Runs the job every `tree_head_interval`, first one interval after start.
pub async fn run(node: Node) {
    let period = node.config.tree_head_interval;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = publish(&node, node.clock.now()).await {
            tracing::warn!(error = %e, "publishing the receipt tree head failed");
        }
    }
}

/// One pass of the job, public so tests need not wait: gives pending
/// receipts their log indexes, then signs a tree head if the log grew since
/// the newest one. Returns the head it published, if any. Every node runs
/// it; the advisory lock lets one at a time in, and the unique tree size
/// refuses a second head of a size already published.
pub async fn publish(
    node: &NodeInner,
    now: OffsetDateTime,
) -> Result<Option<StoredTreeHead>, LogError> {
    loop {
        let mut tx = node.db.begin().await?;
        db_log::lock(&mut *tx).await?;
        let pending = db_log::pending(&mut *tx, APPEND_BATCH).await?;
        if pending.is_empty() {
            tx.commit().await?;
            break;
        }
        let first = db_log::size(&mut *tx).await?;
        let ids: Vec<i64> = pending.iter().map(|(id, _)| *id).collect();
        let hashes: Vec<Vec<u8>> = pending
            .iter()
            .map(|(_, jws)| merkle::receipt_leaf_hash(jws).to_vec())
            .collect();
        db_log::append(&mut tx, first, &ids, &hashes).await?;
        tx.commit().await?;
        if i64::try_from(pending.len()).unwrap_or(i64::MAX) < APPEND_BATCH {
            break;
        }
    }

    let mut tx = node.db.begin().await?;
    db_log::lock(&mut *tx).await?;
    let size = u64::try_from(db_log::size(&mut *tx).await?).unwrap_or(0);
    let latest = db_log::latest_head(&mut *tx).await?;
    let latest_size = latest
        .as_ref()
        .map_or(0, |h| u64::try_from(h.tree_size).unwrap_or(0));
    if size == 0 || size <= latest_size {
        tx.commit().await?;
        return Ok(None);
    }
    // Entries up to `size` are committed (the first transaction), so the
    // pool sees them.
    sync_tree(node, size).await?;
    let (root, previous_root) = node.receipt_log.with_tree(|t| {
        (
            t.root(size),
            latest.as_ref().and_then(|_| t.root(latest_size)),
        )
    });
    let root = root.ok_or(LogError::Broken("no root for the log size"))?;
    // Never sign a head that does not extend the last one (RFC 9162 §2.1.4):
    // if the stored log no longer reproduces it, the log was tampered with
    // and a new head would only paper over it.
    if let Some(h) = &latest
        && previous_root.map(|r| r.to_vec()) != Some(h.root_hash.clone())
    {
        tracing::error!(
            tree_size = h.tree_size,
            "the receipt log no longer reproduces its newest signed head; not publishing \
             (run `pactd receipts verify`)"
        );
        tx.commit().await?;
        return Ok(None);
    }
    let timestamp_ms = u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    let head = TreeHead::new(size, &root, timestamp_ms);
    let key = node.keys.current().signing_key(now)?;
    let jws = pact_jose::sign_tree_head(&key, &head)?;
    let stored = StoredTreeHead {
        tree_size: as_i64(size)?,
        root_hash: root.to_vec(),
        timestamp_ms: i64::try_from(timestamp_ms).unwrap_or(i64::MAX),
        jws,
        kid: key.kid().to_owned(),
    };
    let inserted = db_log::insert_head(&mut *tx, &stored).await?;
    tx.commit().await?;
    if inserted {
        tracing::info!(tree_size = size, "published a receipt tree head");
        Ok(Some(stored))
    } else {
        Ok(None)
    }
}
