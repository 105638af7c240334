//! Admin API credential secrets: `pactd_admin_` and 256 random bits
//! (base64url). The prefix lets secret scanners recognise a leaked one; only
//! the SHA-256 is stored (the secret has full entropy, so a plain hash is
//! enough and a lookup by hash needs no per-row salt).

use crate::domain::secrets;

pub const PREFIX: &str = "pactd_admin_";

/// A new secret (shown once) and the hash to store.
pub fn new_secret() -> (String, Vec<u8>) {
    let (raw, _) = secrets::new_secret();
    let secret = format!("{PREFIX}{raw}");
    let hash = secrets::hash(&secret);
    (secret, hash)
}

/// The stored form of a presented secret, if it has the shape of one (so a
/// malformed bearer costs no database lookup).
pub fn hash_presented(presented: &str) -> Option<Vec<u8>> {
    let raw = presented.strip_prefix(PREFIX)?;
    let well_formed = raw.len() == 43
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    well_formed.then(|| secrets::hash(presented))
}

/// A credential name: 1–64 of a-z, 0-9, '-', '_', '.', as it appears in the
/// audit log.
pub fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_hash_back_and_malformed_ones_are_not_looked_up() {
        let (secret, hash) = new_secret();
        assert!(secret.starts_with(PREFIX));
        assert_eq!(hash_presented(&secret), Some(hash));
        assert_eq!(hash_presented(&secret[PREFIX.len()..]), None);
        assert_eq!(hash_presented(&format!("{secret}x")), None);
        assert_eq!(hash_presented("pactd_admin_short"), None);
    }

    #[test]
    fn names_are_plain() {
        assert!(is_valid_name("ci"));
        assert!(is_valid_name("support-desk.2"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("CI"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name(&"a".repeat(65)));
    }
}
