//! Forged and malformed PA-JWTs (PACT §3, RFC 8725): each must get the
//! bare 401.

use anyhow::{Context as _, Result};
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::sign::Signer as OsslSigner;
use pact_client::jwt::b64;
use serde_json::Value;

/// `header.payload` as base64url segments.
pub fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

/// `alg: none` style: the signature segment is empty (RFC 7519 §6.1).
pub fn unsigned(header: &Value, claims: &Value) -> String {
    format!("{}.", signing_input(header, claims))
}

/// HMAC-SHA256 with `secret` (the key-confusion attack, RFC 8725 §2.1:
/// the PA's *public* key used as an HMAC secret).
pub fn hs256(header: &Value, claims: &Value, secret: &[u8]) -> Result<String> {
    let input = signing_input(header, claims);
    let key = PKey::hmac(secret).context("HMAC key")?;
    let mut signer = OsslSigner::new(MessageDigest::sha256(), &key).context("HMAC signer")?;
    let sig = signer
        .sign_oneshot_to_vec(input.as_bytes())
        .context("HMAC")?;
    Ok(format!("{input}.{}", b64(&sig)))
}

/// A fresh 2048-bit RSA key (for RS256 against an EC key).
pub fn rsa_key() -> Result<PKey<Private>> {
    let rsa = Rsa::generate(2048).context("RSA key generation")?;
    PKey::from_rsa(rsa).context("RSA key")
}

/// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) with `key`.
pub fn rs256(header: &Value, claims: &Value, key: &PKey<Private>) -> Result<String> {
    let input = signing_input(header, claims);
    let mut signer = OsslSigner::new(MessageDigest::sha256(), key).context("RSA signer")?;
    let sig = signer
        .sign_oneshot_to_vec(input.as_bytes())
        .context("RSA signing")?;
    Ok(format!("{input}.{}", b64(&sig)))
}

/// The token with one bit of its signature flipped.
pub fn flip_signature_bit(token: &str) -> Option<String> {
    let (input, sig) = token.rsplit_once('.')?;
    let mut bytes = pact_client::jwt::b64_decode(sig)?;
    let i = bytes.len() / 3;
    *bytes.get_mut(i)? ^= 0x01;
    Some(format!("{input}.{}", b64(&bytes)))
}

/// The token with its payload replaced, signature kept.
pub fn swap_payload(token: &str, claims: &Value) -> Option<String> {
    let mut parts = token.split('.');
    let (Some(h), Some(_), Some(s)) = (parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    Some(format!("{h}.{}.{s}", b64(claims.to_string().as_bytes())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn forgeries_have_the_intended_form() {
        let h = json!({"alg": "none"});
        let c = json!({"sub": "x"});
        let t = unsigned(&h, &c);
        assert_eq!(t.matches('.').count(), 2);
        assert!(t.ends_with('.'));
        let t = hs256(&json!({"alg": "HS256"}), &c, b"public key").unwrap();
        let flipped = flip_signature_bit(&t).unwrap();
        assert_ne!(t, flipped);
        assert_eq!(t.len(), flipped.len());
        let swapped = swap_payload(&t, &json!({"sub": "y"})).unwrap();
        assert_eq!(t.split('.').nth(2), swapped.split('.').nth(2));
    }
}
