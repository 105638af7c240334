//! The faces personal agents and merchants' agents talk to:
//!
//! - `a2a`: A2A 1.0 with PACT's profiles: the Agent Card (§2), identity and
//!   delegated `message:send` (§4, §5.4), tasks and step-ups, receipts (§5.6);
//! - `oauth`: the RFC 8628 device flow (§5.1–5.3), token and refresh,
//!   revocation (RFC 7009), introspection (RFC 7662), metadata (RFC 8414);
//! - `merchant`: the merchant's own agent: signed webhook turns, the per-turn
//!   tool gateway, the same gateway as an MCP server, and pactd as MCP client.
//!
//! They stand on the admin faces (the brand's owner-edited settings), the
//! pages (the words for limits and operations) and pact-app.

pub mod a2a;
pub mod merchant;
pub mod oauth;

// The layers below, under the paths the modules have always used
// (`crate::state::AppState`, `crate::auth::Caller`, `crate::domain::…`).
pub use pact_admin::admin;
pub use pact_app::{auth, client_ip, error, state, tool_schema, trace_context};
pub use pact_core::{agent, authorizations, domain};
pub use pact_node::{admission, keys, pending_polls};
pub use pact_pages::web;
