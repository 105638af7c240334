//! PA-JWT claim checks (PACT §3, RFC 7519 §4.1), done by hand on the JSON
//! payload because generic JWT validators are too lenient for PACT: they let an
//! absent `aud` or `exp` pass and accept `aud` arrays (RFC 7519 §4.1.3 allows
//! arrays; PACT §3 demands exactly one string).

use serde_json::{Map, Value};

use crate::error::PaJwtError;
use crate::pa_jwt::PaJwtRules;

/// The claims of a verified PA-JWT. The caller is `(iss, sub)` (PACT §3); the
/// server still has to check that `iss` is a registered, enabled PA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaClaims {
    /// The PA's issuer, exactly as in the token.
    pub iss: String,
    /// The PA's opaque, stable id for the User.
    pub sub: String,
    /// Issued-at, unix seconds.
    pub iat: i64,
    /// Expiry, unix seconds.
    pub exp: i64,
    /// The token id, when the PA sent one (PACT §3: optional, no replay tracking).
    pub jti: Option<String>,
}

/// Check the claims of a payload whose signature already verified.
///
/// Rules (PACT §3): `sub` a non-empty string; `aud` a single string equal to
/// the assigned audience; `iat` and `exp` required integers with
/// `iat <= now + skew`, `exp > now - skew`, `iat < exp <= iat + max_lifetime`;
/// `nbf`, if present, an integer `<= now + skew`; `jti`, if present, a string.
/// Arithmetic is done in i128 so extreme values cannot overflow into a pass.
pub(crate) fn check_claims(
    iss: &str,
    payload: &Map<String, Value>,
    rules: &PaJwtRules,
    now: i64,
) -> Result<PaClaims, PaJwtError> {
    let sub = match payload.get("sub") {
        // No control character: a platform's user id is text it shows and
        // pactd stores (PostgreSQL refuses NUL), so such a token fails as a
        // bad claim (401), not later as a bad request.
        Some(Value::String(sub)) if sub.chars().any(char::is_control) => {
            return Err(PaJwtError::Claim("sub has a control character"));
        }
        Some(Value::String(sub)) if !sub.is_empty() => sub.clone(),
        Some(Value::String(_)) => return Err(PaJwtError::Claim("sub is empty")),
        Some(_) => return Err(PaJwtError::Claim("sub is not a string")),
        None => return Err(PaJwtError::Claim("sub is missing")),
    };

    match payload.get("aud") {
        // An unset (empty) audience matches nothing, so a misconfigured
        // server cannot accept tokens minted for no one in particular.
        Some(Value::String(aud)) if !rules.audience.is_empty() && *aud == rules.audience => {}
        Some(Value::String(_)) => return Err(PaJwtError::AudienceMismatch),
        Some(_) => return Err(PaJwtError::Claim("aud is not a single string")),
        None => return Err(PaJwtError::Claim("aud is missing")),
    }

    let iat = integer_claim(payload, "iat", "iat is not an integer")?
        .ok_or(PaJwtError::Claim("iat is missing"))?;
    let exp = integer_claim(payload, "exp", "exp is not an integer")?
        .ok_or(PaJwtError::Claim("exp is missing"))?;
    let nbf = integer_claim(payload, "nbf", "nbf is not an integer")?;

    let (now, skew, iat128, exp128) = (
        i128::from(now),
        i128::from(rules.skew_secs),
        i128::from(iat),
        i128::from(exp),
    );
    if exp128 <= iat128 {
        return Err(PaJwtError::Claim("exp is not after iat"));
    }
    if exp128 - iat128 > i128::from(rules.max_lifetime_secs) {
        return Err(PaJwtError::LifetimeTooLong);
    }
    if iat128 > now + skew {
        return Err(PaJwtError::IssuedInFuture);
    }
    if exp128 <= now - skew {
        return Err(PaJwtError::Expired);
    }
    if let Some(nbf) = nbf
        && i128::from(nbf) > now + skew
    {
        return Err(PaJwtError::NotYetValid);
    }

    let jti = match payload.get("jti") {
        None => None,
        Some(Value::String(jti)) => Some(jti.clone()),
        Some(_) => return Err(PaJwtError::Claim("jti is not a string")),
    };

    Ok(PaClaims {
        iss: iss.to_owned(),
        sub,
        iat,
        exp,
        jti,
    })
}

/// A NumericDate claim (RFC 7519 §2) restricted to integers in i64 range:
/// PACT tokens use whole seconds, and refusing fractions and huge values keeps
/// the comparisons exact.
fn integer_claim(
    payload: &Map<String, Value>,
    name: &str,
    not_integer: &'static str,
) -> Result<Option<i64>, PaJwtError> {
    match payload.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or(PaJwtError::Claim(not_integer)),
        Some(_) => Err(PaJwtError::Claim(not_integer)),
    }
}
