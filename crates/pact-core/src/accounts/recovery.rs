//! Single-use recovery codes: 10 codes of 10 characters from an unambiguous
//! alphabet (~50 bits each), shown once, stored as SHA-256.

use rand::Rng;
use sha2::{Digest, Sha256};

pub const COUNT: usize = 10;
const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";

pub fn generate() -> Vec<String> {
    let mut rng = rand::rng();
    (0..COUNT)
        .map(|_| {
            let raw: String = (0..10)
                .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
                .collect();
            format!("{}-{}", &raw[..5], &raw[5..])
        })
        .collect()
}

/// Normalises what a person typed (case, dashes, spaces) and hashes it.
pub fn hash(code: &str) -> Vec<u8> {
    let normal: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Sha256::digest(normal.as_bytes()).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_hash_the_same_however_typed() {
        let codes = generate();
        assert_eq!(codes.len(), COUNT);
        let set: std::collections::HashSet<_> = codes.iter().collect();
        assert_eq!(set.len(), COUNT);
        let c = &codes[0];
        assert_eq!(hash(c), hash(&c.to_uppercase().replace('-', " ")));
    }
}
