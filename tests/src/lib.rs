//! The integration-test harness: a real PostgreSQL (one fresh database per
//! test), pactd on a real loopback port, and test personal agents whose JWKS
//! is served over real HTTP.
#![allow(clippy::disallowed_methods)] // test set-up writes rows at real times
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod app;
pub mod booking;
pub mod browser;
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

/// `id` as a brand id (a test's own brand names are well formed).
pub fn brand_id(id: &str) -> pact_db::ids::BrandId {
    pact_db::ids::BrandId::parse(id).unwrap_or_else(|_| panic!("not a brand id: {id:?}"))
}

/// A new HTTP client on the process's shared TLS connector
/// (`pact_jose::with_shared_tls`): building a client is then cheap, so a test
/// may build one per simulated browser or per poll.
pub fn http_client() -> reqwest::Client {
    pact_jose::with_shared_tls(reqwest::Client::builder())
        .build()
        .expect("build an HTTP client")
}

/// `reqwest::get` on [`http_client`]: the same one-off GET without parsing the
/// system's CA bundle again.
pub async fn http_get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    http_client().get(url).send().await
}

/// Says that the calling test is skipped, and why, on the process's real
/// standard error: libtest captures `eprintln!` of a passing test, so a skip
/// written that way would be silent and look like a pass. `.ci/run` lists the
/// `SKIPPED:` lines after the tests.
pub fn skip(why: &str) {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
}
