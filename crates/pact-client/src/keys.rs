//! The agent's signing key: ES256 on P-256 (PACT §3 allows ES256 and RS256;
//! we make ES256 keys), published as a JWK whose `kid` is its RFC 7638
//! thumbprint.

use std::fmt;

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openssl::bn::{BigNum, BigNumContext, BigNumRef};
use openssl::ec::{EcGroup, EcKey};
use openssl::ecdsa::EcdsaSig;
use openssl::hash::{MessageDigest, hash};
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use serde_json::{Value, json};

/// P-256 coordinates and scalars are 32 bytes (RFC 7518 §6.2.1.2).
const P256_BYTES: usize = 32;

/// A P-256 key pair. `Debug` shows the `kid` only: the private key never
/// reaches a log line.
#[derive(Clone)]
pub struct AgentKey {
    ec: EcKey<Private>,
    x: String,
    y: String,
    kid: String,
}

impl fmt::Debug for AgentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

fn p256() -> Result<EcGroup> {
    EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).context("P-256 is not available")
}

fn coordinate(n: &BigNumRef) -> Result<String> {
    let bytes = n
        .to_vec_padded(P256_BYTES as i32)
        .context("cannot encode a coordinate")?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// RFC 7638 §3.2: SHA-256 over the required members in lexicographic order,
/// no whitespace, base64url.
pub fn ec_thumbprint(x: &str, y: &str) -> Result<String> {
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    let digest = hash(MessageDigest::sha256(), canonical.as_bytes()).context("SHA-256")?;
    Ok(URL_SAFE_NO_PAD.encode(digest))
}

impl AgentKey {
    /// A fresh key from OpenSSL's CSPRNG.
    pub fn generate() -> Result<Self> {
        let group = p256()?;
        let ec = EcKey::generate(&group).context("EC key generation failed")?;
        Self::from_ec(ec)
    }

    /// Load a PKCS#8 (or SEC1) PEM private key; only P-256 is accepted.
    pub fn from_pem(pem: &[u8]) -> Result<Self> {
        let pkey = PKey::private_key_from_pem(pem).context("the key file is not a PEM key")?;
        let ec = pkey.ec_key().context("the key is not an EC key")?;
        if ec.group().curve_name() != Some(Nid::X9_62_PRIME256V1) {
            bail!("the key is not on P-256");
        }
        ec.check_key().context("the EC key is inconsistent")?;
        Self::from_ec(ec)
    }

    fn from_ec(ec: EcKey<Private>) -> Result<Self> {
        let mut ctx = BigNumContext::new().context("BN context")?;
        let mut x = BigNum::new().context("BN")?;
        let mut y = BigNum::new().context("BN")?;
        ec.public_key()
            .affine_coordinates(ec.group(), &mut x, &mut y, &mut ctx)
            .context("cannot read the public point")?;
        let x = coordinate(&x)?;
        let y = coordinate(&y)?;
        let kid = ec_thumbprint(&x, &y)?;
        Ok(Self { ec, x, y, kid })
    }

    /// The private key as PKCS#8 PEM. Secret: store it with mode 0600.
    pub fn to_pem(&self) -> Result<Vec<u8>> {
        PKey::from_ec_key(self.ec.clone())
            .and_then(|k| k.private_key_to_pem_pkcs8())
            .context("cannot encode the private key")
    }

    /// The public key as SPKI PEM (used by the HS256 key-confusion check).
    pub fn public_pem(&self) -> Result<Vec<u8>> {
        PKey::from_ec_key(self.ec.clone())
            .and_then(|k| k.public_key_to_pem())
            .context("cannot encode the public key")
    }

    /// The public key as SPKI DER (used by the HS256 key-confusion check).
    pub fn public_der(&self) -> Result<Vec<u8>> {
        PKey::from_ec_key(self.ec.clone())
            .and_then(|k| k.public_key_to_der())
            .context("cannot encode the public key")
    }

    /// The RFC 7638 thumbprint, used as `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public JWK: `{kty, crv, x, y, kid, alg: "ES256", use: "sig"}`.
    pub fn public_jwk(&self) -> Value {
        json!({"kty": "EC", "crv": "P-256", "x": self.x, "y": self.y, "kid": self.kid,
               "alg": "ES256", "use": "sig"})
    }

    /// The JWKS document the PA publishes at its registered `jwksUri` (PACT §3).
    pub fn jwks(&self) -> Value {
        json!({ "keys": [self.public_jwk()] })
    }

    /// ES256 (RFC 7518 §3.4): ECDSA over SHA-256, signature R || S, 64 bytes.
    pub fn sign(&self, input: &[u8]) -> Result<Vec<u8>> {
        let digest = hash(MessageDigest::sha256(), input).context("SHA-256")?;
        let sig = EcdsaSig::sign(&digest, &self.ec).context("ECDSA signing failed")?;
        let mut out = sig
            .r()
            .to_vec_padded(P256_BYTES as i32)
            .context("signature encoding")?;
        out.extend(
            sig.s()
                .to_vec_padded(P256_BYTES as i32)
                .context("signature encoding")?,
        );
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_key_survives_pem_and_keeps_its_thumbprint_kid() {
        let key = AgentKey::generate().unwrap();
        let again = AgentKey::from_pem(&key.to_pem().unwrap()).unwrap();
        assert_eq!(key.kid(), again.kid());
        assert_eq!(key.kid().len(), 43, "base64url of 32 bytes");
        let jwk = key.public_jwk();
        assert_eq!(
            ec_thumbprint(jwk["x"].as_str().unwrap(), jwk["y"].as_str().unwrap()).unwrap(),
            key.kid()
        );
    }

    #[test]
    fn rfc7638_example_thumbprint_shape_is_stable() {
        // The thumbprint depends only on x and y.
        let a = ec_thumbprint("AAAA", "BBBB").unwrap();
        let b = ec_thumbprint("AAAA", "BBBB").unwrap();
        assert_eq!(a, b);
        assert_ne!(a, ec_thumbprint("AAAA", "BBBC").unwrap());
    }

    #[test]
    fn signatures_verify_with_the_published_jwk() {
        let key = AgentKey::generate().unwrap();
        let jwk: josekit_free::Jwk = josekit_free::Jwk(key.public_jwk());
        let sig = key.sign(b"hello").unwrap();
        assert_eq!(sig.len(), 64);
        assert!(jwk.verify(b"hello", &sig));
        assert!(!jwk.verify(b"hellp", &sig));
    }

    /// A minimal verifier from the JWK members, independent of the signer.
    mod josekit_free {
        use base64::Engine as _;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use openssl::bn::BigNum;
        use openssl::ec::{EcGroup, EcKey};
        use openssl::ecdsa::EcdsaSig;
        use openssl::hash::{MessageDigest, hash};
        use openssl::nid::Nid;

        pub struct Jwk(pub serde_json::Value);
        impl Jwk {
            pub fn verify(&self, input: &[u8], sig: &[u8]) -> bool {
                let x = URL_SAFE_NO_PAD
                    .decode(self.0["x"].as_str().unwrap())
                    .unwrap();
                let y = URL_SAFE_NO_PAD
                    .decode(self.0["y"].as_str().unwrap())
                    .unwrap();
                let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
                let key = EcKey::from_public_key_affine_coordinates(
                    &group,
                    &BigNum::from_slice(&x).unwrap(),
                    &BigNum::from_slice(&y).unwrap(),
                )
                .unwrap();
                let sig = EcdsaSig::from_private_components(
                    BigNum::from_slice(&sig[..32]).unwrap(),
                    BigNum::from_slice(&sig[32..]).unwrap(),
                )
                .unwrap();
                let digest = hash(MessageDigest::sha256(), input).unwrap();
                sig.verify(&digest, &key).unwrap()
            }
        }
    }
}
