//! Delegation tokens (PACT §5.4): JWT access tokens in the style of RFC 9068,
//! signed by the Provider and checked again when a PA sends with one (PACT
//! §5.5 step 2).

use pact_proto::oauth::DelegationClaims;
use serde_json::{Map, Value};

use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};

/// The JOSE `typ` of a delegation token (RFC 9068 §2.1).
pub const DELEGATION_TYP: &str = "at+jwt";

/// A delegation token is a few hundred bytes plus `authorization_details`;
/// 8 KiB bounds the work an unauthenticated caller can make us do, and is
/// checked before anything is decoded.
pub const MAX_DELEGATION_TOKEN_BYTES: usize = 8192;

/// PACT §5.4: a delegation token lives at most one hour.
pub const MAX_DELEGATION_LIFETIME_SECS: i64 = 3600;

/// We issue these tokens with our own clock, so no real skew exists; 5 s
/// covers a token minted on one replica and checked on another.
const SKEW_SECS: i64 = 5;

/// Why a delegation token was refused. Every variant maps to the same `401`
/// with `error="invalid_token"` (PACT §5.5); the variants exist for logs.
/// None of them carries the token or any text taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DelegationError {
    /// Larger than [`MAX_DELEGATION_TOKEN_BYTES`]; nothing was decoded.
    #[error("delegation token exceeds the size cap")]
    TooLarge,
    /// The JWS itself failed: form, `alg`, `typ`, `crit`, `kid` or signature.
    #[error("delegation token: {0}")]
    Jws(ProviderKeyError),
    /// A claim is missing or has the wrong JSON type; the text names it.
    #[error("invalid claim: {0}")]
    Claim(&'static str),
    /// `iss` is not this brand's issuer.
    #[error("issuer mismatch")]
    IssuerMismatch,
    /// `aud` is a string but not the interface URL the token was sent to.
    #[error("audience mismatch")]
    AudienceMismatch,
    /// `aud` is an array: PACT §5.4 allows exactly one brand per token.
    #[error("aud is not a single string")]
    AudienceNotSingle,
    /// `client_id` is not the `iss` of the PA-JWT the token came with (PACT §5.5).
    #[error("client_id does not match the PA")]
    ClientIdMismatch,
    /// `exp` has passed (RFC 7519 §4.1.4).
    #[error("expired")]
    Expired,
    /// `iat` is in the future (beyond the replica allowance).
    #[error("issued in the future")]
    IssuedInFuture,
    /// `nbf` is in the future (RFC 7519 §4.1.5). We never set `nbf`, but a
    /// claim that is present is honoured.
    #[error("not yet valid")]
    NotYetValid,
    /// `exp - iat` exceeds one hour (PACT §5.4), or `exp` is not after `iat`.
    #[error("lifetime out of range")]
    LifetimeOutOfRange,
}

/// Sign a delegation token (PACT §5.4) with header
/// `{"alg":"ES256","typ":"at+jwt","kid":...}` (RFC 9068 §2.1).
///
/// The claims are signed as given; choosing `iat`, `exp` (default 15 min,
/// at most 1 h) and a fresh `jti` is the caller's job.
pub fn sign_delegation_token(
    key: &ProviderKey,
    claims: &DelegationClaims,
) -> Result<String, ProviderKeyError> {
    let payload = serde_json::to_vec(claims).map_err(|_| ProviderKeyError::Encode)?;
    key.sign_compact(DELEGATION_TYP, &payload)
}

/// Verify a delegation token (PACT §5.5 step 2) and return its claims.
///
/// In order: the size cap; the JWS (`alg` ES256, `typ` exactly `at+jwt`, a
/// `kid` of `keys`, no `crit`, a valid signature — see
/// [`ProviderKeySet::verify_compact`]); then the claims, strictly:
///
/// * `iss` equals `expected_iss` (the brand's OAuth issuer);
/// * `aud` is a single string equal to `expected_aud`, the interface URL
///   (one brand per token; an array is refused even if it contains it);
/// * `client_id` equals `expected_client_id`, the `iss` of the PA-JWT the
///   token travels with, so a token stolen from one PA is useless to another;
/// * `exp` and `iat` are integers, `exp + 5 > now`, `iat <= now + 5`,
///   `0 < exp - iat <= 3600`; `nbf`, if present, `<= now + 5`;
/// * `sub`, `grant_id` and `jti` are non-empty strings, `scope` a string.
///
/// Revocation of `grant_id` is the caller's check.
pub fn verify_delegation_token(
    token: &str,
    keys: &ProviderKeySet,
    expected_iss: &str,
    expected_aud: &str,
    expected_client_id: &str,
    now: i64,
) -> Result<DelegationClaims, DelegationError> {
    if token.len() > MAX_DELEGATION_TOKEN_BYTES {
        return Err(DelegationError::TooLarge);
    }
    let payload = keys
        .verify_compact(token, DELEGATION_TYP)
        .map_err(DelegationError::Jws)?;
    let Ok(Value::Object(claims)) = serde_json::from_slice::<Value>(&payload) else {
        return Err(DelegationError::Claim("payload is not a JSON object"));
    };

    if string_claim(&claims, "iss", "iss is not a string")? != expected_iss {
        return Err(DelegationError::IssuerMismatch);
    }
    match claims.get("aud") {
        Some(Value::String(aud)) if aud == expected_aud => {}
        Some(Value::String(_)) => return Err(DelegationError::AudienceMismatch),
        Some(Value::Array(_)) => return Err(DelegationError::AudienceNotSingle),
        _ => return Err(DelegationError::Claim("aud is not a string")),
    }
    if string_claim(&claims, "client_id", "client_id is not a string")? != expected_client_id {
        return Err(DelegationError::ClientIdMismatch);
    }

    let exp = integer_claim(&claims, "exp", "exp is not an integer")?;
    let iat = integer_claim(&claims, "iat", "iat is not an integer")?;
    if exp.saturating_add(SKEW_SECS) <= now {
        return Err(DelegationError::Expired);
    }
    if iat > now.saturating_add(SKEW_SECS) {
        return Err(DelegationError::IssuedInFuture);
    }
    if claims.contains_key("nbf") {
        let nbf = integer_claim(&claims, "nbf", "nbf is not an integer")?;
        if nbf > now.saturating_add(SKEW_SECS) {
            return Err(DelegationError::NotYetValid);
        }
    }
    match exp.checked_sub(iat) {
        Some(lifetime) if lifetime > 0 && lifetime <= MAX_DELEGATION_LIFETIME_SECS => {}
        _ => return Err(DelegationError::LifetimeOutOfRange),
    }

    for (name, bad) in [
        ("sub", "sub is not a non-empty string"),
        ("grant_id", "grant_id is not a non-empty string"),
        ("jti", "jti is not a non-empty string"),
    ] {
        if string_claim(&claims, name, bad)?.is_empty() {
            return Err(DelegationError::Claim(bad));
        }
    }
    string_claim(&claims, "scope", "scope is not a string")?;

    serde_json::from_value(Value::Object(claims))
        .map_err(|_| DelegationError::Claim("claims do not match the delegation schema"))
}

fn string_claim<'a>(
    claims: &'a Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<&'a str, DelegationError> {
    match claims.get(name) {
        Some(Value::String(value)) => Ok(value),
        _ => Err(DelegationError::Claim(bad)),
    }
}

/// NumericDate (RFC 7519 §2) restricted to integers: we only ever issue
/// whole seconds, and [`DelegationClaims`] holds `i64`.
fn integer_claim(
    claims: &Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<i64, DelegationError> {
    claims
        .get(name)
        .and_then(Value::as_i64)
        .ok_or(DelegationError::Claim(bad))
}
