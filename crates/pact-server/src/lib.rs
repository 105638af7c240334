//! The pactd HTTP application as a library.
//!
//! `router(state)` is the whole app; `serve` binds it with graceful shutdown.
//! Handlers parse input, load through `pact-db`, call plain domain functions,
//! persist and respond. Every error leaves through one mapping in `error.rs`.

pub mod a2a;
pub mod accounts;
pub mod admin;
pub mod admission;
pub mod agent;
pub mod auth;
pub mod authorizations;
pub mod background;
pub mod client_ip;
pub mod config;
pub mod config_cache;
pub mod consent;
pub mod db_health;
pub mod domain;
pub mod error;
pub mod feed;
pub mod health;
pub mod housekeeping;
pub mod jobs;
pub mod keys;
pub mod listener;
pub mod mail;
pub mod merchant;
pub mod nodes;
pub mod oauth;
pub mod oidc_discovery;
pub mod operations;
pub mod page_limits;
pub mod pending_polls;
pub mod rate_limit;
pub mod receipt_log;
pub mod registry;
pub mod request_timeout;
pub mod revocation;
pub mod router;
pub mod serve;
pub mod state;
pub mod telemetry;
pub mod trace_context;
pub mod web;
pub mod who;

pub use config::Config;
pub use router::router;
pub use serve::{serve, shutdown_signal};
pub use state::AppState;
