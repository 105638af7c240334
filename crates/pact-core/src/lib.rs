//! pactd's rules without HTTP.
//!
//! What a request decides, written so that no handler, router or node state
//! is needed to run it: the domain rules as plain functions of their inputs
//! and `now` (`domain/`), people's accounts (passwords, TOTP, recovery codes,
//! lockout), the brand agent and the tool gate that enforces scopes and the
//! person's limits on every tool call (`agent/`), issuing device
//! authorizations, and every settings type of the server (`config.rs`, with
//! the rate and page limits and mail settings it is made of).
//!
//! Nothing here depends on `pact-node` or `pact-server`; both depend on this.

pub mod accounts;
pub mod agent;
pub mod authorizations;
pub mod config;
pub mod domain;
pub mod mail;
pub mod page_limits;
pub mod rate_limit;

pub use config::Config;
