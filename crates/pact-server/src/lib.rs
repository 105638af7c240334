//! The pactd HTTP application as a library: the thin top over the faces.
//!
//! `router(state)` is the whole app, one route table over every face;
//! `serve` binds it with graceful shutdown and runs the node's jobs beside
//! it. The faces live in the crates below (the protocol faces, the admin
//! faces, the pages, and pact-app under them); they are re-exported here
//! under the paths they have always had (`pact_server::a2a`, …). Handlers
//! parse input, load through `pact-db`, call plain domain functions, persist
//! and respond. Every error leaves through one mapping in `pact_app::error`.

pub mod body_limit;
pub mod db_health;
pub mod request_timeout;
pub mod router;
pub mod serve;
pub mod telemetry;

// The protocol faces: A2A, OAuth, the merchant's agent (gateway and MCP).
pub use pact_protocol_faces::{a2a, merchant, oauth};

// The staff faces, below the protocol faces, which read a brand's settings
// from them.
pub use pact_admin::admin;

// The people's pages, below the other faces, which borrow their words.
pub use pact_pages::web;

// The layer the faces stand on (pact-app), under the paths the modules of
// this crate and the tests have always used (`crate::state::AppState`).
pub use pact_app::{
    accept, auth, client_ip, consent, error, health, receipt_log, state, tool_schema,
    trace_context, who,
};

// The layers below, under the names the modules of this crate and the tests
// have always used (`crate::domain::…`, `pact_server::config::…`).
pub use pact_core::{
    accounts, agent, authorizations, config, domain, mail, page_limits, rate_limit,
};
pub use pact_node::{
    admission, background, config_cache, feed, housekeeping, jobs, keys, listener, logo_fetch,
    nodes, oidc_discovery, pending_polls, registry, revocation,
};

pub use config::Config;
pub use router::router;
pub use serve::{serve, shutdown_signal};
pub use state::AppState;
