//! OpenID discovery of an unregistered personal agent's keys (PACT §3.1: "An
//! open Provider still verifies §3.2 in full; `jwksUri` MAY then be found
//! through OIDC discovery at `{iss}/.well-known/openid-configuration`").
//!
//! The issuer is an attacker-chosen string, so everything here is bounded the
//! way a registered jwksUri is: the same URI rules (`uri_guard.rs`: https, a
//! public address, checked again on every resolved address), the same client
//! (no redirects, no proxy, one timeout), the same size cap for both
//! documents. How often this may run at all is the caller's budget
//! (`pact-node/src/admission.rs`); this module makes exactly two requests
//! per call, or fewer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::{Client, Url};

use crate::error::JwksError;
use crate::jwks_cache::JwksPolicy;
use crate::jwks_fetch::{build_client, fetch_document, fetch_jwks};
use crate::keys::KeySet;
use crate::uri_guard::check_jwks_uri;

/// The well-known path of OpenID Connect Discovery 1.0 §4.
pub const OPENID_CONFIGURATION: &str = "/.well-known/openid-configuration";

/// What discovery found for an issuer: its jwksUri and the keys there.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub jwks_uri: String,
    pub keys: Arc<KeySet>,
    /// How long the key set may be cached (the JWKS answer's Cache-Control,
    /// clamped as for a registered agent).
    pub ttl: Duration,
    /// What the document says the agent is called and its logo's URL
    /// (`client_name`, `logo_uri`: RFC 7591 §2's names), when given and
    /// sane; claims for staff to weigh, never shown to people as fact.
    pub claimed_name: Option<String>,
    pub claimed_logo_uri: Option<String>,
}

/// The longest claimed name kept.
const MAX_CLAIMED_NAME_CHARS: usize = 100;

/// A claimed name, trimmed, when it is 1–100 characters without control
/// characters; else nothing (a bad claim is dropped, not an error).
fn claimed_name(doc: &serde_json::Value) -> Option<String> {
    let name = doc.get("client_name")?.as_str()?.trim();
    let fine = !name.is_empty()
        && name.chars().count() <= MAX_CLAIMED_NAME_CHARS
        && !name.chars().any(char::is_control);
    fine.then(|| name.to_owned())
}

/// A claimed logo URL, when it is an https URL on a public host (not fetched).
fn claimed_logo_uri(doc: &serde_json::Value, allow_loopback: bool) -> Option<String> {
    let uri = doc.get("logo_uri")?.as_str()?;
    (uri.len() <= 2048 && check_jwks_uri(uri, allow_loopback).is_ok()).then(|| uri.to_owned())
}

/// The fetcher of discovery documents; one per node.
pub struct IssuerDiscovery {
    client: Client,
    policy: JwksPolicy,
    fetches: AtomicU64,
}

impl std::fmt::Debug for IssuerDiscovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuerDiscovery")
            .field("fetches", &self.fetch_count())
            .finish_non_exhaustive()
    }
}

/// Checks that `iss` may be discovered at all, before any network: the jwksUri
/// rules (https, a public host, no userinfo or fragment, loopback only in the
/// test mode), and no query either (OpenID Connect Discovery 1.0 §2: the
/// issuer is a URL "with no query or fragment components").
///
/// The host must also be written as the parser reads it (lower case is not
/// required; percent escapes, non-ASCII letters and a trailing dot are
/// refused): staff block an issuer by its host as written, and the database
/// reads that host from the issuer's text, so `https://evil%2Eexample` or
/// `https://evil.example.` must not be admitted as `evil.example` while a
/// block of `evil.example` misses them.
pub fn check_issuer(iss: &str, allow_loopback: bool) -> Result<Url, JwksError> {
    let url = check_jwks_uri(iss, allow_loopback)?;
    if url.query().is_some() {
        return Err(JwksError::InvalidUri("query not allowed in an issuer"));
    }
    let authority = iss
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .unwrap_or_default();
    let written = match authority.find(']') {
        // An IPv6 literal, read back with its brackets.
        Some(end) if authority.starts_with('[') => &authority[..=end],
        _ => authority.split(':').next().unwrap_or_default(),
    };
    let read = url.host_str().unwrap_or_default();
    if !written.eq_ignore_ascii_case(read) || read.ends_with('.') {
        return Err(JwksError::InvalidUri(
            "the issuer's host is not written as it is read",
        ));
    }
    Ok(url)
}

/// The discovery document's URL: the well-known path appended to the issuer
/// (OpenID Connect Discovery 1.0 §4.1: a trailing `/` of the issuer is
/// removed first).
pub fn discovery_url(iss: &str) -> String {
    format!("{}{OPENID_CONFIGURATION}", iss.trim_end_matches('/'))
}

impl IssuerDiscovery {
    /// The client is built exactly as the JWKS cache's (`jwks_fetch.rs`).
    pub fn new(policy: JwksPolicy) -> Result<Self, JwksError> {
        Ok(Self {
            client: build_client(&policy)?,
            policy,
            fetches: AtomicU64::new(0),
        })
    }

    /// Requests made so far (discovery documents and key sets alike).
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Discovers `iss`: its configuration (which must name the same `issuer`,
    /// OpenID Connect Discovery 1.0 §4.3, and a `jwks_uri` that passes the
    /// jwksUri rules), then its key set. At most two requests.
    pub async fn discover(&self, iss: &str) -> Result<Discovered, JwksError> {
        check_issuer(iss, self.policy.allow_loopback)?;
        let url = check_jwks_uri(&discovery_url(iss), self.policy.allow_loopback)?;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let (_, body) = fetch_document(
            &self.client,
            url,
            "application/json",
            self.policy.max_bytes,
            self.policy.fetch_timeout,
        )
        .await?;
        let doc: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| JwksError::Discovery("not JSON"))?;
        if doc.get("issuer").and_then(|v| v.as_str()) != Some(iss) {
            return Err(JwksError::Discovery("issuer differs from iss"));
        }
        let jwks_uri = doc
            .get("jwks_uri")
            .and_then(|v| v.as_str())
            .ok_or(JwksError::Discovery("no jwks_uri"))?;
        let jwks_url = check_jwks_uri(jwks_uri, self.policy.allow_loopback)?;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fetched = fetch_jwks(&self.client, jwks_url, &self.policy).await?;
        Ok(Discovered {
            jwks_uri: jwks_uri.to_owned(),
            keys: Arc::new(fetched.keys),
            ttl: fetched.ttl,
            claimed_name: claimed_name(&doc),
            claimed_logo_uri: claimed_logo_uri(&doc, self.policy.allow_loopback),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issuer_is_an_https_url_on_a_public_host_without_query() {
        assert!(check_issuer("https://agent.example", false).is_ok());
        assert!(check_issuer("https://agent.example/tenant", false).is_ok());
        for bad in [
            "http://agent.example",
            "https://agent.example?x=1",
            "https://agent.example#f",
            "https://10.0.0.1",
            "https://127.0.0.1",
            "https://localhost",
            "agent.example",
            "https://user@agent.example",
        ] {
            assert!(check_issuer(bad, false).is_err(), "{bad}");
        }
        // A host written otherwise than it is read would dodge a block of
        // the host it is read as.
        for dodge in [
            "https://evil%2Eexample",
            "https://evil.example.",
            "https://evil.example.:443/x",
            "https://b\u{fc}cher.example",
            "https://%65vil.example",
        ] {
            assert!(check_issuer(dodge, false).is_err(), "{dodge}");
        }
        assert!(check_issuer("https://Agent.Example:8443/t", false).is_ok());
        // The test mode admits loopback over http, and nothing else over http.
        assert!(check_issuer("http://127.0.0.1:8080", true).is_ok());
        assert!(check_issuer("http://agent.example", true).is_err());
    }

    #[test]
    fn claims_of_name_and_logo_are_kept_only_when_sane() {
        let doc = serde_json::json!({"client_name": "  Ada's Agent ", "logo_uri": "https://a.example/l.png"});
        assert_eq!(claimed_name(&doc).as_deref(), Some("Ada's Agent"));
        assert_eq!(
            claimed_logo_uri(&doc, false).as_deref(),
            Some("https://a.example/l.png")
        );
        for bad in [
            serde_json::json!({"client_name": "", "logo_uri": "http://a.example/l.png"}),
            serde_json::json!({"client_name": "a\u{1b}[31m", "logo_uri": "https://10.0.0.1/l.png"}),
            serde_json::json!({"client_name": "x".repeat(101), "logo_uri": 7}),
            serde_json::json!({}),
        ] {
            assert_eq!(claimed_name(&bad), None, "{bad}");
            assert_eq!(claimed_logo_uri(&bad, false), None, "{bad}");
        }
    }

    #[test]
    fn the_well_known_path_follows_the_issuer() {
        assert_eq!(
            discovery_url("https://a.example"),
            "https://a.example/.well-known/openid-configuration"
        );
        assert_eq!(
            discovery_url("https://a.example/t/"),
            "https://a.example/t/.well-known/openid-configuration"
        );
    }
}
