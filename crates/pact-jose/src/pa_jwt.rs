//! PA-JWT parsing and signature verification (PACT §3).
//!
//! Parsing and verification are split because the key set is chosen by the
//! token's (unverified) `iss`: the server reads `iss`, looks up the registered
//! PA and its jwksUri, fetches the key for `kid`/`alg`, and only then verifies.
//! Nothing read before verification is trusted for anything but that lookup.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use crate::alg::Alg;
use crate::claims::{PaClaims, check_claims};
use crate::error::PaJwtError;
use crate::keys::VerifyingKey;

/// The longest `iss` read: the agents table's bound on an issuer.
pub const MAX_ISSUER_LEN: usize = 2048;

/// The validation parameters for PA-JWTs (PACT §3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaJwtRules {
    /// The opaque audience the Provider assigned; `aud` must equal it exactly.
    pub audience: String,
    /// Largest allowed `exp - iat`, in seconds (PACT §3: 300).
    pub max_lifetime_secs: i64,
    /// Clock-skew tolerance for `iat`, `exp` and `nbf`, in seconds (PACT §3: 30).
    pub skew_secs: i64,
    /// Largest accepted compact token, in bytes, checked before any decoding.
    pub max_token_bytes: usize,
}

impl PaJwtRules {
    /// PACT §3: tokens live at most 300 s.
    pub const DEFAULT_MAX_LIFETIME_SECS: i64 = 300;
    /// PACT §3: 30 s clock-skew tolerance.
    pub const DEFAULT_SKEW_SECS: i64 = 30;
    /// A PA-JWT is a few hundred bytes; 8 KiB leaves room for long ids while
    /// bounding the work an unauthenticated caller can make us do.
    pub const DEFAULT_MAX_TOKEN_BYTES: usize = 8192;

    /// Rules for `audience` with the PACT §3 defaults.
    pub fn new(audience: impl Into<String>) -> Self {
        Self {
            audience: audience.into(),
            max_lifetime_secs: Self::DEFAULT_MAX_LIFETIME_SECS,
            skew_secs: Self::DEFAULT_SKEW_SECS,
            max_token_bytes: Self::DEFAULT_MAX_TOKEN_BYTES,
        }
    }
}

/// A PA-JWT that is well formed but not yet verified.
///
/// Holds the exact signing input (RFC 7515 §5.2: the signature is over the
/// encoded segments as received, not over a re-serialisation) and the decoded
/// payload, whose claims are checked only after the signature verifies.
pub struct UnverifiedPaJwt {
    signing_input: String,
    signature: Vec<u8>,
    alg: Alg,
    kid: Option<String>,
    issuer: String,
    payload: Map<String, Value>,
}

impl fmt::Debug for UnverifiedPaJwt {
    // Hand-written so that the token and signature never reach a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnverifiedPaJwt")
            .field("issuer", &self.issuer)
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// Parse a compact PA-JWT without verifying it.
///
/// Order matters: the size cap comes first so nothing is decoded for an
/// oversized token; then the compact form (exactly three base64url segments
/// without padding, RFC 7515 §7.1 / §2), the header (a JSON object whose `alg`
/// is ES256 or RS256, with no `crit`, RFC 7515 §4.1.11), the payload (a JSON
/// object with a string `iss`), and the signature segment.
///
/// `jku`, `x5u`, `jwk` and `x5c` are deliberately never read: the keys that
/// verify a PA-JWT come only from the PA's registered jwksUri, never from
/// anything the token names (RFC 8725 §3.10, PACT §3).
pub fn parse_pa_jwt(token: &str, rules: &PaJwtRules) -> Result<UnverifiedPaJwt, PaJwtError> {
    if token.len() > rules.max_token_bytes {
        return Err(PaJwtError::TooLarge);
    }
    let mut segments = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return Err(PaJwtError::Malformed("not three segments"));
    };

    let header = decode_object(
        header_b64,
        "header is not base64url",
        "header is not a JSON object",
    )?;
    let alg = match header.get("alg") {
        Some(Value::String(name)) => Alg::from_name(name).ok_or(PaJwtError::AlgNotAllowed)?,
        Some(_) => return Err(PaJwtError::AlgNotAllowed),
        None => return Err(PaJwtError::Malformed("header has no alg")),
    };
    if header.contains_key("crit") {
        return Err(PaJwtError::CritHeader);
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(PaJwtError::Malformed("kid is not a string")),
    };

    let payload = decode_object(
        payload_b64,
        "payload is not base64url",
        "payload is not a JSON object",
    )?;
    let issuer = match payload.get("iss") {
        // A control character (NUL above all, which PostgreSQL cannot store)
        // names no agent anyone could register: a 401 like any unknown
        // issuer, before the agent is looked up (PACT §3).
        Some(Value::String(iss)) if iss.chars().any(char::is_control) => {
            return Err(PaJwtError::Claim("iss has a control character"));
        }
        // No issuer is longer than the agents table holds (2048 bytes); a
        // longer one names no agent, and must not be remembered as absent.
        Some(Value::String(iss)) if iss.len() > MAX_ISSUER_LEN => {
            return Err(PaJwtError::Claim("iss is too long"));
        }
        Some(Value::String(iss)) if !iss.is_empty() => iss.clone(),
        Some(_) => return Err(PaJwtError::Claim("iss is not a non-empty string")),
        None => return Err(PaJwtError::Claim("iss is missing")),
    };

    let signature = URL_SAFE_NO_PAD
        .decode(signature_b64)
        .map_err(|_| PaJwtError::Malformed("signature is not base64url"))?;
    if signature.is_empty() {
        return Err(PaJwtError::Malformed("signature is empty"));
    }

    // header_b64 and payload_b64 are the first two segments, so the signing
    // input is exactly the token up to the second dot.
    let signing_input_len = header_b64.len() + 1 + payload_b64.len();
    let signing_input = token
        .get(..signing_input_len)
        .ok_or(PaJwtError::Malformed("not three segments"))?
        .to_owned();

    Ok(UnverifiedPaJwt {
        signing_input,
        signature,
        alg,
        kid,
        issuer,
        payload,
    })
}

/// Decode one base64url segment holding a JSON object. The `URL_SAFE_NO_PAD`
/// engine refuses padding, the standard alphabet and non-canonical trailing
/// bits, so one token has exactly one encoding (RFC 7515 §2).
fn decode_object(
    segment: &str,
    not_base64: &'static str,
    not_object: &'static str,
) -> Result<Map<String, Value>, PaJwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| PaJwtError::Malformed(not_base64))?;
    // serde_json keeps the last of duplicate members, which RFC 7515 §5.2 allows.
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(PaJwtError::Malformed(not_object)),
    }
}

impl UnverifiedPaJwt {
    /// The unverified `iss`: use it only to choose the PA's key set.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The unverified header `kid`, if any: use it only to choose the key.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The header `alg`, already restricted to ES256/RS256.
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// Verify the signature with `key`, then the claims, with `now` in unix seconds.
    ///
    /// The key's algorithm must equal the header `alg` (RFC 8725 §3.1), and
    /// when both name a `kid` they must agree. The signature is checked over
    /// the exact signing input (RFC 7515 §5.2) before any claim is trusted;
    /// the claims are then checked strictly per PACT §3 (see `check_claims`).
    pub fn verify(
        &self,
        key: &VerifyingKey,
        rules: &PaJwtRules,
        now: i64,
    ) -> Result<PaClaims, PaJwtError> {
        self.verify_signature(key)?;
        check_claims(&self.issuer, &self.payload, rules, now)
    }

    /// The signature checks of [`UnverifiedPaJwt::verify`] alone, for tokens
    /// whose claims follow other rules (OpenID Connect ID and logout tokens):
    /// on success the payload is trusted to come from the key's owner.
    pub(crate) fn verify_signature(
        &self,
        key: &VerifyingKey,
    ) -> Result<&Map<String, Value>, PaJwtError> {
        if key.alg() != self.alg {
            return Err(PaJwtError::KeyAlgMismatch);
        }
        if let (Some(token_kid), Some(key_kid)) = (self.kid(), key.kid())
            && token_kid != key_kid
        {
            return Err(PaJwtError::KidMismatch);
        }
        if !key.verify_signature(self.signing_input.as_bytes(), &self.signature) {
            return Err(PaJwtError::BadSignature);
        }
        Ok(&self.payload)
    }

    /// The payload before any signature check: only for refusing a token
    /// early on claims it could never pass with (nothing read here is
    /// trusted; [`Self::verify_signature`] must still succeed).
    pub(crate) fn unverified_payload(&self) -> &Map<String, Value> {
        &self.payload
    }

    /// The header segment as received, for the `typ` check of token kinds
    /// that have one (the signature covers it).
    pub(crate) fn header_segment(&self) -> &str {
        self.signing_input.split('.').next().unwrap_or("")
    }
}
