//! One node: what it holds in memory and what its background jobs work on.
//!
//! The clock, the configuration, the two database pools and the node's views
//! of shared state, built together (`Node::new`) and shared by reference
//! count. The HTTP faces hold a `Node` inside their own state (pact-server's
//! `AppState`) and add what only requests need; the node's jobs (the change
//! listener, housekeeping, the heartbeat, the database probe) take a `Node`
//! and nothing of HTTP, so they live here, below every face.

use std::sync::Arc;

use pact_core::config::Config;
use pact_db::PgPool;

use crate::config_cache::ConfigCache;
use crate::db_health::DbHealth;
use crate::feed::ChangeFeed;
use crate::keys::{KeyError, KeyStore};
use crate::node_identity::NodeIdentity;
use crate::pending_polls::PendingPolls;
use crate::receipt_tree::LogCache;
use crate::revocation::RevocationView;

/// A node, cheap to clone.
#[derive(Clone)]
pub struct Node(Arc<NodeInner>);

pub struct NodeInner {
    /// The node's one time source: handlers and jobs read it once and pass
    /// `now` down.
    pub clock: pact_clock::Clock,
    pub config: Config,
    pub db: PgPool,
    /// The same database, committing without waiting for the WAL flush: only
    /// for writes a crash may lose without harm (`pact_db::relaxed_pool`).
    pub relaxed_db: PgPool,
    pub keys: KeyStore,
    pub revocations: RevocationView,
    /// Whether the change listener's feed is proven alive by its heartbeat
    /// (`feed.rs`): the memory views below answer only while it is.
    pub feed: Arc<ChangeFeed>,
    /// Agents, brands, scopes and merchant settings, kept while the change
    /// listener is connected (`config_cache.rs`).
    pub config_cache: ConfigCache,
    /// Device authorizations seen pending, answered from memory while the
    /// change listener is connected (`pending_polls.rs`).
    pub pending_polls: PendingPolls,
    pub db_health: DbHealth,
    /// This node's copy of the receipt log's Merkle tree.
    pub receipt_log: LogCache,
    /// This process in the `nodes` table (its heartbeat).
    pub identity: NodeIdentity,
}

impl std::ops::Deref for Node {
    type Target = NodeInner;
    fn deref(&self) -> &NodeInner {
        &self.0
    }
}

impl Node {
    /// Builds the node's memory; loads (or creates) the signing keys.
    pub async fn new(
        config: Config,
        db: PgPool,
        clock: pact_clock::Clock,
    ) -> Result<Self, KeyError> {
        let keys = KeyStore::load(&db, config.master_key.clone(), clock.now()).await?;
        let feed = Arc::new(ChangeFeed::new(&config.listener));
        Ok(Self(Arc::new(NodeInner {
            identity: NodeIdentity::new(clock.now()),
            clock,
            relaxed_db: pact_db::relaxed_pool(&db),
            db,
            keys,
            revocations: RevocationView::default(),
            config_cache: ConfigCache::new(feed.clone()),
            pending_polls: PendingPolls::new(feed.clone()),
            feed,
            db_health: DbHealth::default(),
            receipt_log: LogCache::default(),
            config,
        })))
    }
}
