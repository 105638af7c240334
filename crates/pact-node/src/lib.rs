//! What one pactd node holds in memory and runs in the background.
//!
//! The node's views of shared state: the signing-key snapshot chosen by
//! `now` (`keys.rs`), the revocation view, the copy of rarely-changing rows
//! (`config_cache.rs`) and the device codes seen pending (`pending_polls.rs`),
//! the last two used only while the change feed is proven alive (`feed.rs`);
//! the brands' OpenID discovery documents as last read; the webhook turns
//! running here (`live_turns.rs`, `turn_token.rs`), the webhook secrets
//! already opened (`webhook_signing.rs`) and the client that calls merchants
//! (`outbound.rs`); agent platforms' logos fetched under the SSRF guard
//! (`logo_fetch.rs`); the receipt log's tree (`receipt_tree.rs`); whether the
//! database answers (`db_health.rs`); the door for agents nobody registered
//! (`admission.rs`, PACT §3.1); who this process is
//! (`node_identity.rs`); and the supervisor that runs the node's background
//! jobs and restarts them (`jobs.rs`).
//!
//! All of it is held together by [`node::Node`], which the node's background jobs take: the change
//! listener that feeds the views (`listener.rs`), housekeeping (`housekeeping.rs`), the heartbeat
//! row (`nodes.rs`), the trusted registries' refresh (`registry.rs`), the
//! database probe (`db_health.rs`) and the receipt log's signed tree heads
//! (`tree_heads.rs`), all started by `background.rs`.
//!
//! It builds on `pact-core` and serves no HTTP (it only makes outbound calls): `pact-server` holds a
//! `Node` inside its state and adds what only requests need.

pub mod admission;
pub mod background;
pub mod config_cache;
pub mod db_health;
pub mod feed;
pub mod housekeeping;
pub mod jobs;
pub mod keys;
pub mod listener;
pub mod live_turns;
pub mod logo_fetch;
pub mod node;
pub mod node_identity;
pub mod nodes;
pub mod oidc_discovery;
pub mod outbound;
pub mod pending_polls;
pub mod receipt_tree;
pub mod registry;
pub mod revocation;
pub mod tree_heads;
pub mod turn_token;
pub mod webhook_signing;
