//! Opaque bearer secrets (device codes, refresh tokens): 32 random bytes,
//! base64url, stored only as their SHA-256, so a database leak yields no usable secret.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A new secret and its hash.
pub fn new_secret() -> (String, Vec<u8>) {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = URL_SAFE_NO_PAD.encode(bytes);
    let hash = hash(&secret);
    (secret, hash)
}

/// The stored form of a presented secret. A plain hash suffices: the secret
/// has 256 bits of entropy, so there is nothing to brute-force.
pub fn hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_unique_and_hash_stably() {
        let (a, ha) = new_secret();
        let (b, _) = new_secret();
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(hash(&a), ha);
    }
}
