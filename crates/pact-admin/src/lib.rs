//! The staff faces (`admin`): the admin API and its OpenAPI document, the
//! console, and each staff action written once (`admin::ops`), which the
//! API, the console and the `pactd` commands all call, so an action exists
//! once and audits itself.
//!
//! It stands on the pages (the console reuses their passkey ceremonies and
//! page errors) and on pact-app. The protocol faces read two things from it:
//! the brand's settings its owner edits (`admin::brand_settings`: the A2A
//! card's skills) and the error an edit gives (an MCP import reports its
//! refusals the same way).

pub mod admin;

// The layers below, under the paths the modules have always used
// (`crate::state::AppState`, `crate::web::…`, `crate::domain::…`).
pub use pact_app::{client_ip, consent, error, state, tool_schema, who};
pub use pact_core::{accounts, agent, config, domain};
pub use pact_node::{admission, keys, nodes, registry};
pub use pact_pages::web;
