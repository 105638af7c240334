//! The brands' OpenID providers' discovery documents (OpenID Connect
//! Discovery 1.0 §4) as last read, for `web/oidc_login.rs`.

use std::time::Duration;

use url::Url;

/// The provider endpoints pactd uses, from its discovery document.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: String,
    pub jwks_uri: String,
    /// `token_endpoint_auth_methods_supported` (Discovery §3: when absent,
    /// only `client_secret_basic`).
    pub token_endpoint_auth_methods: Vec<String>,
    /// `token_endpoint_auth_signing_alg_values_supported`, when listed.
    pub token_endpoint_auth_signing_algs: Option<Vec<String>>,
}

/// How long a discovery document read for a back-channel logout is used.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(10 * 60);
/// How long after a failed discovery a logout waits before trying again.
pub const DISCOVERY_RETRY: Duration = Duration::from_secs(10);

/// The providers' discovery documents as last read, per issuer. The
/// back-channel logout endpoint is open to anyone, so it reads the
/// document from here: however many requests arrive, the provider is asked
/// at most once per [`DISCOVERY_TTL`] (or [`DISCOVERY_RETRY`] after a
/// failure), issue 28, finding 7. The sign-in page always reads it afresh
/// (the endpoints are kept with the trip) and refreshes this copy. Issuers
/// come from the brands' configuration, never from a request, so the map
/// stays as small as the number of providers.
#[derive(Debug, Default)]
pub struct DiscoveryCache(std::sync::Mutex<std::collections::HashMap<String, CachedDiscovery>>);

#[derive(Debug)]
struct CachedDiscovery {
    at: std::time::Instant,
    found: Result<Discovered, String>,
}

impl DiscoveryCache {
    /// The document (or the failure) last read for `issuer`, while fresh.
    pub fn get(&self, issuer: &str) -> Option<Result<Discovered, String>> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = map.get(issuer)?;
        let ttl = if c.found.is_ok() {
            DISCOVERY_TTL
        } else {
            DISCOVERY_RETRY
        };
        (c.at.elapsed() < ttl).then(|| c.found.clone())
    }

    /// What a read of `issuer`'s document just found.
    pub fn put(&self, issuer: &str, found: Result<Discovered, String>) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(
            issuer.to_owned(),
            CachedDiscovery {
                at: std::time::Instant::now(),
                found,
            },
        );
    }
}
