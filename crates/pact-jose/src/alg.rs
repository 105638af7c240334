//! The closed set of signature algorithms a PA-JWT may use.

use std::fmt;

/// Only these two algs are accepted (PACT §3, RFC 8725 §3.1).
///
/// A closed enum rather than a string: a token's `alg` is attacker-chosen, so
/// everything downstream works on a value that can only be one of the two
/// allowed algorithms. `none`, the HMAC family (the RSA-public-key-as-HMAC-secret
/// confusion, RFC 8725 §2.1) and every other JWA name never get this far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alg {
    /// ECDSA using P-256 and SHA-256 (RFC 7518 §3.4).
    Es256,
    /// RSASSA-PKCS1-v1_5 using SHA-256 (RFC 7518 §3.3).
    Rs256,
}

impl Alg {
    /// The JWA name as it appears in a JOSE header or JWK `alg` member.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Es256 => "ES256",
            Alg::Rs256 => "RS256",
        }
    }

    /// Exact, case-sensitive match on the JWA name: JOSE names are case
    /// sensitive (RFC 7515 §4.1.1), so "None", "es256", … are all refused.
    pub fn from_name(name: &str) -> Option<Alg> {
        match name {
            "ES256" => Some(Alg::Es256),
            "RS256" => Some(Alg::Rs256),
            _ => None,
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Alg;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for alg in [Alg::Es256, Alg::Rs256] {
            assert_eq!(Alg::from_name(alg.name()), Some(alg));
        }
        for bad in [
            "none", "None", "NONE", "", "HS256", "es256", "rs256", "PS256", "ES384", "EdDSA",
        ] {
            assert_eq!(Alg::from_name(bad), None, "{bad}");
        }
    }
}
