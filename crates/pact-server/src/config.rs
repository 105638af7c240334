//! Server settings, resolved by the `pactd` command from flags, env and file.

use std::net::SocketAddr;
use std::time::Duration;

use pact_jose::JwksPolicy;

use crate::rate_limit::RateLimits;

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Base URL people and agents reach us at, without a trailing slash.
    pub public_url: String,
    /// The Provider-wide PA-JWT audience (PACT §3: never per brand).
    pub audience: String,
    /// Shown as `provider.organization` on every card.
    pub provider_name: String,
    pub jwks: JwksPolicy,
    pub request_timeout: Duration,
    pub body_limit: usize,
    pub rate_limits: RateLimits,
}

impl Config {
    /// Defaults for a listen address; `public_url` and `audience` follow it.
    pub fn for_listen(listen: SocketAddr) -> Self {
        let public_url = format!("http://{listen}");
        Self {
            listen,
            audience: default_audience(&public_url),
            public_url,
            provider_name: "pactd".to_owned(),
            jwks: JwksPolicy::default(),
            request_timeout: Duration::from_secs(30),
            body_limit: 64 * 1024,
            rate_limits: RateLimits::default(),
        }
    }

    /// `{public_url}/a2a/{brand_id}` (PACT §1).
    pub fn interface_url(&self, brand_id: &str) -> String {
        format!("{}/a2a/{brand_id}", self.public_url)
    }

    pub fn card_url(&self, brand_id: &str) -> String {
        format!(
            "{}/.well-known/agent-card.json",
            self.interface_url(brand_id)
        )
    }
}

/// The default audience: `{public_url}/a2a`.
pub fn default_audience(public_url: &str) -> String {
    format!("{}/a2a", public_url.trim_end_matches('/'))
}
