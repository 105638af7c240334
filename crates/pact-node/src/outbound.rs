//! The HTTP client for a node's calls to merchants (their agents, tools and
//! MCP servers): no redirects, no retries, no proxy, HTTPS only unless
//! loopback is allowed, and every address checked by the SSRF guard.

use reqwest::Client;

/// Builds that client, on the process's one TLS connector.
pub fn build_client(allow_loopback: bool) -> Result<Client, reqwest::Error> {
    pact_jose::with_shared_tls(Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .https_only(!allow_loopback)
        .dns_resolver(pact_jose::GuardedResolver::new(allow_loopback))
        .user_agent(concat!("pactd/", env!("CARGO_PKG_VERSION")))
        .build()
}
