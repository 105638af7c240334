//! A trusted registry's signed list of personal agents (PACT §3.1: "Whether a
//! Provider accepts only personal agents it has allowlisted (a trusted-issuer
//! registry) … is the Provider's policy"; issue 31's `registry` policy).
//!
//! The list is one compact JWS (RFC 7515) signed with ES256 by a key the
//! merchant pinned when adding the registry; its payload is
//!
//! ```json
//! {"iat": 1764700000, "exp": 1764786400,
//!  "agents": [{"issuer": "https://agent.example",
//!              "jwks_uri": "https://agent.example/jwks.json",
//!              "name": "Agent Example",
//!              "logo_uri": "https://agent.example/logo.png"}]}
//! ```
//!
//! What makes a list acceptable, all checked here before anything is stored:
//! the header's `typ` is [`REGISTRY_LIST_TYP`] (RFC 8725 §3.11, so no other
//! JWS signed by the same key passes as a list) and `alg` exactly ES256
//! (RFC 8725 §3.1); the signature verifies with a pinned key, chosen by `kid`;
//! `iat` is not in the future (beyond a small skew), `exp` has not passed, and
//! the list lives at most [`MAX_LIST_LIFETIME_SECS`], so a list captured once
//! cannot be replayed for long; every entry passes the jwksUri rules that a
//! registered agent's do (https, a public host), issuers are unique, and the
//! list is bounded in bytes and entries. The caller refuses a list older than
//! the one in force (no rollback), since that needs what was stored.

use std::collections::HashSet;

use reqwest::Client;
use serde::{Deserialize, Serialize};

use crate::discovery::check_issuer;
use crate::error::JwksError;
use crate::jwks_cache::JwksPolicy;
use crate::jwks_fetch::{build_client, fetch_document};
use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};
use crate::uri_guard::check_jwks_uri;

/// The JWS `typ` of a registry list.
pub const REGISTRY_LIST_TYP: &str = "pact-agent-registry+jwt";
/// The largest list body fetched (a list of 10 000 agents is about 2 MiB at
/// 200 bytes an entry; most are far smaller).
pub const MAX_REGISTRY_LIST_BYTES: usize = 4 << 20;
/// The most agents one list may name.
pub const MAX_LISTED_AGENTS: usize = 10_000;
/// The longest a list may be valid (`exp - iat`): 31 days.
pub const MAX_LIST_LIFETIME_SECS: i64 = 31 * 24 * 3600;
/// Clock skew allowed on `iat`.
pub const LIST_SKEW_SECS: i64 = 60;
/// The longest name shown for a listed agent.
const MAX_NAME_CHARS: usize = 100;

/// One agent of a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListedAgent {
    pub issuer: String,
    pub jwks_uri: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_uri: Option<String>,
}

/// A list's payload (signed fields only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryList {
    pub iat: i64,
    pub exp: i64,
    pub agents: Vec<ListedAgent>,
}

/// Why a list was refused. Says which rule failed, never the list itself.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryListError {
    #[error("signature: {0}")]
    Jws(ProviderKeyError),
    #[error("payload is not a registry list")]
    Payload,
    #[error("list is expired")]
    Expired,
    #[error("list is issued in the future")]
    IssuedInFuture,
    #[error("list lives longer than 31 days")]
    TooLong,
    #[error("list names more than {MAX_LISTED_AGENTS} agents")]
    TooMany,
    #[error("entry {index}: {reason}")]
    Entry { index: usize, reason: &'static str },
    #[error("list is older than the one in force")]
    Rollback,
}

/// Verifies a list against the pinned keys at `now` (Unix seconds) and
/// checks every entry (see the module comment). `allow_loopback` is the
/// JWKS test mode.
pub fn verify_registry_list(
    jws: &str,
    pinned: &ProviderKeySet,
    now: i64,
    allow_loopback: bool,
) -> Result<RegistryList, RegistryListError> {
    let payload = pinned
        .verify_compact(jws.trim(), REGISTRY_LIST_TYP)
        .map_err(RegistryListError::Jws)?;
    let list: RegistryList =
        serde_json::from_slice(&payload).map_err(|_| RegistryListError::Payload)?;
    check_list(&list, now, allow_loopback)?;
    Ok(list)
}

/// The rules on a list's signed fields, apart from the signature.
pub fn check_list(
    list: &RegistryList,
    now: i64,
    allow_loopback: bool,
) -> Result<(), RegistryListError> {
    if list.iat > now.saturating_add(LIST_SKEW_SECS) {
        return Err(RegistryListError::IssuedInFuture);
    }
    if list.exp <= now {
        return Err(RegistryListError::Expired);
    }
    if list.exp.saturating_sub(list.iat) > MAX_LIST_LIFETIME_SECS {
        return Err(RegistryListError::TooLong);
    }
    if list.agents.len() > MAX_LISTED_AGENTS {
        return Err(RegistryListError::TooMany);
    }
    let mut seen = HashSet::with_capacity(list.agents.len());
    for (index, agent) in list.agents.iter().enumerate() {
        let bad = |reason| RegistryListError::Entry { index, reason };
        check_issuer(&agent.issuer, allow_loopback)
            .map_err(|_| bad("issuer is not an https URL on a public host"))?;
        check_jwks_uri(&agent.jwks_uri, allow_loopback)
            .map_err(|_| bad("jwks_uri is not an https URL on a public host"))?;
        if let Some(logo) = &agent.logo_uri {
            check_jwks_uri(logo, allow_loopback)
                .map_err(|_| bad("logo_uri is not an https URL on a public host"))?;
        }
        let name = agent.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(bad("name is empty or longer than 100 characters"));
        }
        if name.chars().any(char::is_control) {
            return Err(bad("name has control characters"));
        }
        if !seen.insert(agent.issuer.as_str()) {
            return Err(bad("issuer listed twice"));
        }
    }
    Ok(())
}

/// Signs a list with a registry's key (for registries run with pactd's own
/// tooling, and for tests).
pub fn sign_registry_list(
    key: &ProviderKey,
    list: &RegistryList,
) -> Result<String, ProviderKeyError> {
    let payload = serde_json::to_vec(list).map_err(|_| ProviderKeyError::Encode)?;
    key.sign_compact(REGISTRY_LIST_TYP, &payload)
}

/// Fetches lists, with the client every remote fetch uses (no redirects, no
/// proxy, the SSRF-guarded resolver) and the JWKS timeout.
pub struct RegistryFetcher {
    client: Client,
    policy: JwksPolicy,
}

impl std::fmt::Debug for RegistryFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryFetcher").finish_non_exhaustive()
    }
}

impl RegistryFetcher {
    pub fn new(policy: JwksPolicy) -> Result<Self, JwksError> {
        Ok(Self {
            client: build_client(&policy)?,
            policy,
        })
    }

    /// GETs the list at `url` (which must pass the jwksUri rules) as text.
    pub async fn fetch(&self, url: &str) -> Result<String, JwksError> {
        let url = check_jwks_uri(url, self.policy.allow_loopback)?;
        let (_, body) = fetch_document(
            &self.client,
            url,
            "application/jwt",
            MAX_REGISTRY_LIST_BYTES,
            self.policy.fetch_timeout,
        )
        .await?;
        String::from_utf8(body).map_err(|_| JwksError::Discovery("registry list is not text"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(issuer: &str) -> ListedAgent {
        ListedAgent {
            issuer: issuer.to_owned(),
            jwks_uri: format!("{issuer}/jwks.json"),
            name: "An agent".to_owned(),
            logo_uri: None,
        }
    }

    fn keys() -> (ProviderKey, ProviderKeySet) {
        let key = ProviderKey::generate().unwrap();
        let set = ProviderKeySet::from_public_jwks(&[key.public_jwk()]).unwrap();
        (key, set)
    }

    const NOW: i64 = 1_800_000_000;

    fn list(agents: Vec<ListedAgent>) -> RegistryList {
        RegistryList {
            iat: NOW - 10,
            exp: NOW + 3600,
            agents,
        }
    }

    #[test]
    fn a_signed_list_verifies_with_the_pinned_key_only() {
        let (key, pinned) = keys();
        let jws = sign_registry_list(&key, &list(vec![agent("https://a.example")])).unwrap();
        let got = verify_registry_list(&jws, &pinned, NOW, false).unwrap();
        assert_eq!(got.agents[0].issuer, "https://a.example");

        let (_, other) = keys();
        assert!(matches!(
            verify_registry_list(&jws, &other, NOW, false),
            Err(RegistryListError::Jws(ProviderKeyError::UnknownKey))
        ));
        // A flipped payload byte breaks the signature.
        let mut parts: Vec<String> = jws.split('.').map(str::to_owned).collect();
        let forged = list(vec![agent("https://evil.example")]);
        parts[1] = base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            serde_json::to_vec(&forged).unwrap(),
        );
        assert_eq!(
            verify_registry_list(&parts.join("."), &pinned, NOW, false),
            Err(RegistryListError::Jws(ProviderKeyError::BadSignature))
        );
    }

    #[test]
    fn another_typ_signed_by_the_same_key_is_not_a_list() {
        let (key, pinned) = keys();
        let payload = serde_json::to_vec(&list(vec![])).unwrap();
        let jws = key.sign_compact("pact-receipt+jwt", &payload).unwrap();
        assert_eq!(
            verify_registry_list(&jws, &pinned, NOW, false),
            Err(RegistryListError::Jws(ProviderKeyError::WrongTyp))
        );
    }

    #[test]
    fn time_rules() {
        let mut l = list(vec![]);
        l.exp = NOW;
        assert_eq!(check_list(&l, NOW, false), Err(RegistryListError::Expired));
        let mut l = list(vec![]);
        l.iat = NOW + LIST_SKEW_SECS + 1;
        l.exp = NOW + 7200;
        assert_eq!(
            check_list(&l, NOW, false),
            Err(RegistryListError::IssuedInFuture)
        );
        let mut l = list(vec![]);
        l.exp = l.iat + MAX_LIST_LIFETIME_SECS + 1;
        assert_eq!(check_list(&l, NOW, false), Err(RegistryListError::TooLong));
        assert_eq!(check_list(&list(vec![]), NOW, false), Ok(()));
    }

    #[test]
    fn entries_follow_the_registered_agents_rules() {
        for (bad, reason) in [
            (agent("http://a.example"), "issuer"),
            (agent("https://10.0.0.1"), "issuer"),
            (
                ListedAgent {
                    jwks_uri: "http://a.example/jwks".into(),
                    ..agent("https://a.example")
                },
                "jwks_uri",
            ),
            (
                ListedAgent {
                    name: " ".into(),
                    ..agent("https://a.example")
                },
                "name",
            ),
            (
                ListedAgent {
                    name: "a\u{7}b".into(),
                    ..agent("https://a.example")
                },
                "name",
            ),
        ] {
            match check_list(&list(vec![bad]), NOW, false) {
                Err(RegistryListError::Entry {
                    index: 0,
                    reason: r,
                }) => {
                    assert!(r.starts_with(reason), "{r}")
                }
                other => panic!("{reason}: {other:?}"),
            }
        }
        let twice = list(vec![agent("https://a.example"), agent("https://a.example")]);
        assert!(matches!(
            check_list(&twice, NOW, false),
            Err(RegistryListError::Entry { index: 1, .. })
        ));
        // Unknown members of an entry are refused, not ignored.
        let (key, pinned) = keys();
        let payload = serde_json::json!({"iat": NOW, "exp": NOW + 60,
            "agents": [{"issuer": "https://a.example", "jwks_uri": "https://a.example/j",
                        "name": "A", "scopes": ["all"]}]});
        let jws = key
            .sign_compact(REGISTRY_LIST_TYP, &serde_json::to_vec(&payload).unwrap())
            .unwrap();
        assert_eq!(
            verify_registry_list(&jws, &pinned, NOW, false),
            Err(RegistryListError::Payload)
        );
    }
}
