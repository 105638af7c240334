//! Single-use recovery codes: 10 codes of 10 characters from an unambiguous
//! alphabet (~50 bits each), shown once, stored keyed under the master key.
//!
//! About 50 bits is enough against guessing online (the sign-in's limits and
//! locks), not against a copy of the database: stored as plain SHA-256, one
//! pass over all 31^10 codes would open every account's at once. So a code is
//! stored as an HMAC under the master key (which a database copy does not
//! hold, as for the sealed TOTP secrets), over its account's id and the code
//! (RFC 2104; the key is the master key's `derive`, a PRF). Codes issued
//! before were stored as plain SHA-256; they are still accepted until the
//! account's codes are issued again.

use pact_crypto::{MasterKey, SealError};
use rand::Rng;
use sha2::{Digest, Sha256};
use uuid::Uuid;

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

/// What a person typed, normalised (case, dashes and spaces do not matter).
fn normal(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// How a code of `owner` (a customer's or a staff account's id) is stored.
pub fn hash(master: &MasterKey, owner: Uuid, code: &str) -> Result<Vec<u8>, SealError> {
    let label = format!("pactd recovery code v1\n{owner}\n{}", normal(code));
    master.derive(label.as_bytes()).map(|h| h.to_vec())
}

/// How a new set of `owner`'s codes is stored.
pub fn hash_all(
    master: &MasterKey,
    owner: Uuid,
    codes: &[String],
) -> Result<Vec<Vec<u8>>, SealError> {
    codes.iter().map(|c| hash(master, owner, c)).collect()
}

/// Every form a typed code of `owner` may be stored in: as [`hash`] stores
/// it, and as codes issued before were stored (plain SHA-256).
pub fn stored_forms(
    master: &MasterKey,
    owner: Uuid,
    code: &str,
) -> Result<Vec<Vec<u8>>, SealError> {
    let legacy = Sha256::digest(normal(code).as_bytes()).to_vec();
    Ok(vec![hash(master, owner, code)?, legacy])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_hash_the_same_however_typed() {
        let master = MasterKey::generate().unwrap();
        let owner = Uuid::new_v4();
        let codes = generate();
        assert_eq!(codes.len(), COUNT);
        let set: std::collections::HashSet<_> = codes.iter().collect();
        assert_eq!(set.len(), COUNT);
        let c = &codes[0];
        assert_eq!(
            hash(&master, owner, c).unwrap(),
            hash(&master, owner, &c.to_uppercase().replace('-', " ")).unwrap()
        );
    }

    #[test]
    fn a_stored_code_is_keyed_and_bound_to_its_account() {
        let master = MasterKey::generate().unwrap();
        let (ann, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let code = "abcde-fghjk";
        let stored = hash(&master, ann, code).unwrap();
        // Not the plain digest a copy of the database could be searched with.
        assert_ne!(stored, Sha256::digest(normal(code).as_bytes()).to_vec());
        assert_ne!(stored, hash(&master, bob, code).unwrap());
        let other = MasterKey::generate().unwrap();
        assert_ne!(stored, hash(&other, ann, code).unwrap());
        // Codes stored before are still found.
        let forms = stored_forms(&master, ann, "ABCDE FGHJK").unwrap();
        assert_eq!(forms[0], stored);
        assert_eq!(forms[1], Sha256::digest(b"abcdefghjk").to_vec());
    }
}
