//! The layer under pactd's faces (A2A, OAuth, the merchant gateway and MCP,
//! the people's pages, the admin API and console): what all of them share
//! and nothing that is one of them, so an import can only point down.
//!
//! - `state`: `AppState`, the node (`pact-node`) plus what only requests need;
//! - `error`: the API errors and their one mapping to the wire;
//! - `client_ip`, `auth`: who is calling (the address behind trusted proxies,
//!   the PA-JWT of PACT §3);
//! - `consent`: the person's decision on a device authorization (PACT §5.2);
//! - `who`: who is asking, as consent shows it (RFC 7591 client metadata);
//! - `receipt_log`: the receipt log's public endpoints;
//! - `accept`, `trace_context`, `health`, `tool_schema`: the accept loop, W3C
//!   trace context, liveness, a tool's input schema.

pub mod accept;
pub mod auth;
pub mod client_ip;
pub mod consent;
pub mod error;
pub mod health;
pub mod receipt_log;
pub mod state;
pub mod tool_schema;
pub mod trace_context;
pub mod who;

// The layers below, under the names the modules have always used
// (`crate::domain::…`, `crate::keys::…`).
pub use pact_core::{agent, config, domain, mail, page_limits, rate_limit};
pub use pact_node::{admission, keys, oidc_discovery};

pub use state::AppState;
