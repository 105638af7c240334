//! Strict JOSE for PACT: PA-JWT verification and the remote JWKS cache.
//!
//! A personal agent (PA) proves who calls with a JWT it signs itself
//! (PACT §3). The server:
//!
//! 1. [`parse_pa_jwt`] — size cap, compact form, `alg` ES256/RS256 only, no
//!    `crit`, and the unverified `iss`/`kid` used only to pick a key;
//! 2. looks up the registered PA for `iss` and asks [`JwksCache::key_for`] for
//!    the key at its jwksUri (cached, single-flight, SSRF-guarded);
//! 3. [`UnverifiedPaJwt::verify`] — signature over the exact signing input,
//!    then strict claims (`aud` a single string, `exp - iat <= 300`, 30 s skew).
//!
//! Keys named by the token (`jku`, `x5u`, `jwk`, `x5c`) are never used
//! (RFC 8725 §3.10). Errors never carry the token.

mod alg;
mod claims;
mod delegation;
mod discovery;
mod error;
mod jwks_cache;
mod jwks_fetch;
mod keys;
mod oidc;
mod pa_jwt;
mod provider_keys;
mod receipt;
mod registry_list;
mod signature_memo;
mod tls_roots;
mod tree_head;
mod uri_guard;

#[cfg(test)]
mod delegation_tests;
#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod pa_jwt_tests;
#[cfg(test)]
mod provider_keys_tests;
#[cfg(test)]
mod receipt_tests;
#[cfg(test)]
mod test_keys;
#[cfg(test)]
mod tree_head_tests;

pub use alg::Alg;
pub use claims::PaClaims;
pub use delegation::{
    DELEGATION_TYP, DelegationError, MAX_DELEGATION_LIFETIME_SECS, MAX_DELEGATION_TOKEN_BYTES,
    sign_delegation_token, verify_delegation_token,
};
pub use discovery::{
    Discovered, IssuerDiscovery, OPENID_CONFIGURATION, check_issuer, discovery_url,
};
pub use error::{JwksError, PaJwtError};
pub use jwks_cache::{JwksCache, JwksPolicy};
pub use keys::{KeySet, VerifyingKey};
pub use oidc::{
    BACKCHANNEL_LOGOUT_EVENT, CLIENT_ASSERTION_ALG, CLIENT_ASSERTION_LIFETIME_SECS,
    CLIENT_ASSERTION_TYPE, ClientAssertion, IdToken, IdTokenExpect, LOGOUT_TOKEN_TYP, LogoutToken,
    MAX_OIDC_TOKEN_BYTES, MAX_TOKEN_AGE_SECS, OIDC_SKEW_SECS, OidcTokenError, parse_oidc_token,
    precheck_logout_token, verify_id_token, verify_logout_token,
};
pub use pa_jwt::{PaJwtRules, UnverifiedPaJwt, parse_pa_jwt};
pub use provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};
pub use receipt::{
    RECEIPT_TYP, ReceiptError, args_hash, receipt_hash, sign_receipt, verify_receipt,
};
pub use registry_list::{
    LIST_SKEW_SECS, ListedAgent, MAX_LIST_LIFETIME_SECS, MAX_LISTED_AGENTS,
    MAX_REGISTRY_LIST_BYTES, REGISTRY_LIST_TYP, RegistryFetcher, RegistryList, RegistryListError,
    check_list, sign_registry_list, verify_registry_list,
};
pub use signature_memo::{SignatureMemoStats, signature_memo_stats};
pub use tls_roots::with_shared_tls;
pub use tree_head::{TREE_HEAD_TYP, TreeHead, TreeHeadError, sign_tree_head, verify_tree_head};
pub use uri_guard::{GuardedResolver, IpClass, check_jwks_uri, classify_ip, ip_allowed};
