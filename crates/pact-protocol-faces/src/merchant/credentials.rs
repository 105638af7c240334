//! Brand API credentials: how a merchant's resource servers authenticate to
//! the introspection endpoint (RFC 7662 §2.1, HTTP Basic).
//!
//! The secret is 32 random bytes, so a plain SHA-256 is a sufficient stored
//! form (no password stretching needed for a full-entropy secret); it is shown
//! once, when made.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use sha2::{Digest, Sha256};

/// A new credential: what the operator is shown once, and what is stored.
#[derive(Debug)]
pub struct NewCredential {
    pub client_id: String,
    pub secret: String,
    pub secret_hash: Vec<u8>,
}

fn random_part(n: usize) -> Option<String> {
    let mut bytes = vec![0u8; n];
    openssl::rand::rand_bytes(&mut bytes).ok()?;
    Some(URL_SAFE_NO_PAD.encode(bytes))
}

pub fn generate() -> Option<NewCredential> {
    let client_id = format!("pactc_{}", random_part(12)?);
    let secret = format!("pacts_{}", random_part(32)?);
    let secret_hash = hash_secret(&secret);
    Some(NewCredential {
        client_id,
        secret,
        secret_hash,
    })
}

pub fn hash_secret(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Constant-time comparison of the presented secret with the stored hash.
pub fn secret_matches(secret: &str, stored_hash: &[u8]) -> bool {
    let presented = hash_secret(secret);
    presented.len() == stored_hash.len() && openssl::memcmp::eq(&presented, stored_hash)
}

/// `Authorization: Basic base64(client_id ":" secret)` (RFC 7617). RFC 6749
/// §2.3.1 form-encodes both parts first; our ids and secrets are URL-safe
/// base64, so decoding changes nothing for them and is skipped.
pub fn parse_basic(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    // A client id pactd issued is `pactc_` and URL-safe base64: one with a
    // control character (NUL, which PostgreSQL cannot even compare) names
    // no client, and is refused here as a failed authentication (401).
    if id.chars().any(char::is_control) {
        return None;
    }
    Some((id.to_owned(), secret.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_new_secret_matches_its_hash_and_nothing_else() {
        let c = generate().unwrap();
        assert!(c.client_id.starts_with("pactc_") && c.secret.starts_with("pacts_"));
        assert!(secret_matches(&c.secret, &c.secret_hash));
        assert!(!secret_matches("pacts_wrong", &c.secret_hash));
        assert!(!secret_matches(&c.secret, &[]));
    }

    #[test]
    fn basic_credentials_parse() {
        let v = format!("Basic {}", STANDARD.encode("id:se:cret"));
        assert_eq!(parse_basic(&v), Some(("id".into(), "se:cret".into())));
        assert_eq!(parse_basic("Bearer abc"), None);
        assert_eq!(parse_basic("Basic !!!"), None);
        let nul = format!("Basic {}", STANDARD.encode("pactc_\u{0}x:secret"));
        assert_eq!(parse_basic(&nul), None);
        assert_eq!(
            parse_basic(&format!("Basic {}", STANDARD.encode("nocolon"))),
            None
        );
    }
}
