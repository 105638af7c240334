//! The integration-test harness: a real PostgreSQL (one fresh database per
//! test), pactd on a real loopback port, and test personal agents whose JWKS
//! is served over real HTTP.
#![allow(clippy::disallowed_methods)] // test set-up writes rows at real times
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod app;
pub mod booking;
pub mod db;
pub mod delegation;
pub mod held;
pub mod logo_server;
pub mod merchant;
pub mod node;
pub mod pa;
pub mod pages;
pub mod smtp_sink;
pub mod tcp_proxy;

pub use app::TestApp;
pub use pa::TestPa;
