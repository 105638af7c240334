//! Password hashing with Argon2id at the OWASP Password Storage Cheat Sheet's
//! parameters (m = 19 MiB, t = 2, p = 1). Hashes made with other parameters
//! still verify and are flagged for rehashing at the next sign-in.

use std::sync::OnceLock;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

pub const M_COST_KIB: u32 = 19 * 1024;
pub const T_COST: u32 = 2;
pub const P_COST: u32 = 1;

/// Shortest password accepted when one is set (NIST SP 800-63B §5.1.1.2: at least 8).
pub const MIN_LEN: usize = 8;
/// Longest accepted, to bound hashing work per request.
pub const MAX_LEN: usize = 1024;

fn hasher() -> Result<Argon2<'static>, argon2::Error> {
    let params = Params::new(M_COST_KIB, T_COST, P_COST, None)?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("passwords must be {MIN_LEN} to {MAX_LEN} characters")]
    Length,
    #[error("hashing failed")]
    Hash,
}

pub fn hash(password: &str) -> Result<String, PasswordError> {
    let len = password.chars().count();
    if !(MIN_LEN..=MAX_LEN).contains(&len) {
        return Err(PasswordError::Length);
    }
    let salt = SaltString::generate(&mut OsRng);
    hasher()
        .map_err(|_| PasswordError::Hash)?
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|_| PasswordError::Hash)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verified {
    No,
    Yes,
    /// Correct, but hashed with other parameters: store a fresh hash.
    YesRehash,
}

/// Verifies against a stored hash; `None` (unknown account or no password)
/// verifies against a fixed dummy hash so the work — and the time — is the
/// same as for a wrong password.
pub fn verify(password: &str, stored: Option<&str>) -> Verified {
    if password.len() > MAX_LEN * 4 {
        return Verified::No;
    }
    let real = stored.and_then(|s| PasswordHash::new(s).ok());
    let Some(parsed) = real.or_else(|| dummy_hash().and_then(|d| PasswordHash::new(d).ok())) else {
        return Verified::No;
    };
    let Ok(argon) = hasher() else {
        return Verified::No;
    };
    let ok = argon.verify_password(password.as_bytes(), &parsed).is_ok();
    match (ok, stored.is_some()) {
        (true, true) if needs_rehash(&parsed) => Verified::YesRehash,
        (true, true) => Verified::Yes,
        _ => Verified::No,
    }
}

fn needs_rehash(h: &PasswordHash<'_>) -> bool {
    let Ok(params) = Params::try_from(h) else {
        return true;
    };
    h.algorithm.as_str() != "argon2id"
        || params.m_cost() != M_COST_KIB
        || params.t_cost() != T_COST
        || params.p_cost() != P_COST
}

fn dummy_hash() -> Option<&'static str> {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    DUMMY
        .get_or_init(|| hash("dummy password for timing equality").ok())
        .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert_eq!(verify("correct horse battery", Some(&h)), Verified::Yes);
        assert_eq!(verify("wrong horse battery", Some(&h)), Verified::No);
        assert_eq!(verify("correct horse battery", None), Verified::No);
    }

    #[test]
    fn hashes_with_old_parameters_are_flagged_for_rehash() {
        let weak = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8 * 1024, 1, 1, None).unwrap(),
        );
        let salt = SaltString::generate(&mut OsRng);
        let old = weak
            .hash_password(b"correct horse battery", &salt)
            .unwrap()
            .to_string();
        assert_eq!(
            verify("correct horse battery", Some(&old)),
            Verified::YesRehash
        );
    }

    #[test]
    fn too_short_passwords_are_refused() {
        assert!(matches!(hash("short"), Err(PasswordError::Length)));
    }
}
