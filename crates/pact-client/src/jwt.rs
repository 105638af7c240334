//! PA-JWTs (PACT §3): the short JWT the agent signs for every request.

use std::sync::Arc;

use anyhow::Result;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::keys::AgentKey;

/// Lifetime of the PA-JWTs we sign (PACT §3 allows at most 300 s).
pub const PA_JWT_LIFETIME_SECS: i64 = 120;

/// base64url without padding (RFC 7515 §2).
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes base64url without padding; `None` when it is not.
pub fn b64_decode(s: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(s).ok()
}

/// Unix seconds now.
#[allow(clippy::disallowed_methods)] // the personal agent stamps its tokens with its own wall clock
pub fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// A compact JWS of `header` and `claims`, signed ES256 with `key` over the
/// exact encoded segments (RFC 7515 §5.1).
pub fn compact_es256(header: &Value, claims: &Value, key: &AgentKey) -> Result<String> {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let sig = key.sign(input.as_bytes())?;
    Ok(format!("{input}.{}", b64(&sig)))
}

/// The header and claims of a compact JWT, not verified. For display and
/// for reading what a provider sent; never for trusting it.
pub fn decode_unverified(token: &str) -> Option<(Value, Value)> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let header = serde_json::from_slice(&b64_decode(h)?).ok()?;
    let claims = serde_json::from_slice(&b64_decode(p)?).ok()?;
    Some((header, claims))
}

/// Signs PA-JWTs for one registered identity at one Provider audience.
#[derive(Clone, Debug)]
pub struct Signer {
    pub issuer: String,
    pub audience: String,
    pub key: Arc<AgentKey>,
}

impl Signer {
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>, key: Arc<AgentKey>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            key,
        }
    }

    /// `{"alg":"ES256","typ":"JWT","kid":<thumbprint>}`.
    pub fn header(&self) -> Value {
        json!({"alg": "ES256", "typ": "JWT", "kid": self.key.kid()})
    }

    /// PACT §3 claims: `iss`, `sub`, `aud` (the one assigned string),
    /// `iat`, `exp` = `iat` + 120 s, and a fresh `jti`.
    pub fn claims(&self, sub: &str) -> Value {
        let now = unix_now();
        json!({"iss": self.issuer, "sub": sub, "aud": self.audience, "iat": now,
               "exp": now + PA_JWT_LIFETIME_SECS, "jti": uuid::Uuid::new_v4().to_string()})
    }

    /// A valid PA-JWT for `sub`.
    pub fn token(&self, sub: &str) -> Result<String> {
        compact_es256(&self.header(), &self.claims(sub), &self.key)
    }

    /// A PA-JWT from an edited header and claims, signed with the agent's key.
    pub fn token_with(
        &self,
        sub: &str,
        edit: impl FnOnce(&mut Value, &mut Value),
    ) -> Result<String> {
        let mut header = self.header();
        let mut claims = self.claims(sub);
        edit(&mut header, &mut claims);
        compact_es256(&header, &claims, &self.key)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tokens_verify_under_the_providers_own_rules() {
        let key = Arc::new(AgentKey::generate().unwrap());
        let signer = Signer::new("https://pa.example", "https://p.example/a2a", key.clone());
        let token = signer.token("u1").unwrap();
        let keys = pact_jose::KeySet::from_json(key.jwks().to_string().as_bytes()).unwrap();
        let rules = pact_jose::PaJwtRules::new("https://p.example/a2a");
        let parsed = pact_jose::parse_pa_jwt(&token, &rules).unwrap();
        let vk = keys.find(parsed.kid(), parsed.alg()).unwrap();
        let claims = parsed.verify(&vk, &rules, unix_now()).unwrap();
        assert_eq!(claims.iss, "https://pa.example");
        assert_eq!(claims.sub, "u1");

        let (header, body) = decode_unverified(&token).unwrap();
        assert_eq!(header["kid"], key.kid());
        assert_eq!(
            body["exp"].as_i64().unwrap() - body["iat"].as_i64().unwrap(),
            PA_JWT_LIFETIME_SECS
        );
        let other = signer.token("u1").unwrap();
        let (_, body2) = decode_unverified(&other).unwrap();
        assert_ne!(body["jti"], body2["jti"], "a fresh jti per token");
    }
}
