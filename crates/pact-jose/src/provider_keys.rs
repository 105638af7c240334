//! The Provider's own ES256 keys: signing delegation tokens (PACT §5.4) and
//! receipts (PACT §5.6), and verifying them again.
//!
//! Signing uses OpenSSL directly so that no library call on this path can
//! panic; verification reuses [`VerifyingKey`] and [`KeySet`], the same
//! strict JWK handling as PA keys.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use openssl::bn::{BigNum, BigNumContext};
use openssl::ec::{EcGroup, EcKey};
use openssl::ecdsa::EcdsaSig;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::alg::Alg;
use crate::error::JwksError;
use crate::keys::{KeySet, VerifyingKey};

/// P-256 field elements and scalars are 32 bytes (RFC 7518 §3.4, §6.2.1.2).
const P256_BYTES: usize = 32;
/// An ES256 JWS signature is R || S, 64 bytes (RFC 7518 §3.4).
const ES256_SIGNATURE_BYTES: usize = 2 * P256_BYTES;

/// Why a Provider key could not be made, loaded or used, or why a compact JWS
/// did not verify. Carries neither key material nor the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderKeyError {
    /// OpenSSL failed while generating a key or signing.
    #[error("cryptographic failure: {0}")]
    Crypto(&'static str),
    /// The stored private key is not a usable PKCS#8 P-256 key.
    #[error("invalid private key: {0}")]
    InvalidPrivateKey(&'static str),
    /// A public JWK of the set is not usable; `index` is its position.
    #[error("unusable public JWK #{index}: {reason}")]
    InvalidJwk { index: usize, reason: &'static str },
    /// The set has no key, so nothing could ever verify.
    #[error("no verification keys")]
    NoKeys,
    /// The JWS is not a compact JWS with a JSON-object header (RFC 7515 §7.1).
    #[error("malformed JWS: {0}")]
    Malformed(&'static str),
    /// `alg` is not exactly "ES256" (RFC 8725 §3.1): `none`, HMAC, RSA and
    /// everything else are refused before any key is looked at.
    #[error("alg not allowed")]
    AlgNotAllowed,
    /// `typ` is not the expected one (RFC 8725 §3.11): a receipt cannot be
    /// replayed as a delegation token or the other way round.
    #[error("unexpected typ")]
    WrongTyp,
    /// A `crit` header: we implement no extension (RFC 7515 §4.1.11).
    #[error("crit header not supported")]
    CritHeader,
    /// No key of the set has the header `kid`.
    #[error("unknown kid")]
    UnknownKey,
    /// The signature does not verify over the signing input (RFC 7515 §5.2).
    #[error("signature does not verify")]
    BadSignature,
    /// The payload could not be serialised before signing.
    #[error("cannot serialise the payload")]
    Encode,
}

/// One Provider signing key: a P-256 key pair and its `kid`.
///
/// `Debug` shows only the `kid`; the private key never reaches a log line.
#[derive(Clone)]
pub struct ProviderKey {
    ec: EcKey<Private>,
    /// PKCS#8 DER of the private key, computed once so that exporting cannot fail.
    pkcs8: Vec<u8>,
    x: String,
    y: String,
    kid: String,
}

impl fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderKey")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The protected header of every JWS the Provider signs. A struct rather than
/// a map so the member order, and thus the encoded header, is fixed.
#[derive(Serialize)]
struct Header<'a> {
    alg: &'static str,
    typ: &'a str,
    kid: &'a str,
}

impl ProviderKey {
    /// A fresh P-256 key pair from OpenSSL's CSPRNG.
    pub fn generate() -> Result<Self, ProviderKeyError> {
        let group = p256_group()?;
        let ec = EcKey::generate(&group)
            .map_err(|_| ProviderKeyError::Crypto("EC key generation failed"))?;
        Self::from_ec_key(ec)
    }

    /// Load a key stored by [`ProviderKey::private_pkcs8_der`] (after
    /// opening it with the master key). Only P-256 keys are accepted, and the
    /// key is checked for consistency; the `kid` is recomputed from the public
    /// key rather than stored, so it cannot drift from the key it names.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self, ProviderKeyError> {
        let pkey = PKey::private_key_from_pkcs8(der)
            .map_err(|_| ProviderKeyError::InvalidPrivateKey("not PKCS#8 DER"))?;
        let ec = pkey
            .ec_key()
            .map_err(|_| ProviderKeyError::InvalidPrivateKey("not an EC key"))?;
        if ec.group().curve_name() != Some(Nid::X9_62_PRIME256V1) {
            return Err(ProviderKeyError::InvalidPrivateKey("curve is not P-256"));
        }
        ec.check_key()
            .map_err(|_| ProviderKeyError::InvalidPrivateKey("inconsistent EC key"))?;
        Self::from_ec_key(ec)
    }

    fn from_ec_key(ec: EcKey<Private>) -> Result<Self, ProviderKeyError> {
        let mut ctx =
            BigNumContext::new().map_err(|_| ProviderKeyError::Crypto("BN context failed"))?;
        let mut x = BigNum::new().map_err(|_| ProviderKeyError::Crypto("BN alloc failed"))?;
        let mut y = BigNum::new().map_err(|_| ProviderKeyError::Crypto("BN alloc failed"))?;
        ec.public_key()
            .affine_coordinates(ec.group(), &mut x, &mut y, &mut ctx)
            .map_err(|_| ProviderKeyError::Crypto("cannot read the public point"))?;
        // RFC 7518 §6.2.1.2/§6.2.1.3: coordinates are the full 32 bytes,
        // leading zeros kept, so the thumbprint is well defined.
        let x = coordinate(&x)?;
        let y = coordinate(&y)?;
        let kid = thumbprint(&x, &y);
        let pkcs8 = PKey::from_ec_key(ec.clone())
            .and_then(|pkey| pkey.private_key_to_pkcs8())
            .map_err(|_| ProviderKeyError::Crypto("cannot encode PKCS#8"))?;
        Ok(Self {
            ec,
            pkcs8,
            x,
            y,
            kid,
        })
    }

    /// The key id: the RFC 7638 JWK thumbprint (SHA-256 over
    /// `{"crv","kty","x","y"}` in lexicographic order, no whitespace),
    /// base64url. Deterministic, so a key reloaded from storage keeps its kid.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public JWK (RFC 7517 §4) published at the brand's `jwks_uri`
    /// (PACT §5.4): `{kty, crv, x, y, kid, alg: "ES256", use: "sig"}`.
    pub fn public_jwk(&self) -> Value {
        public_jwk_value(&self.x, &self.y, &self.kid)
    }

    /// PKCS#8 DER of the private key. Secret: seal it with
    /// [`MasterKey::seal`](pact_crypto::MasterKey::seal) before storing it.
    pub fn private_pkcs8_der(&self) -> Vec<u8> {
        self.pkcs8.clone()
    }

    /// Sign `payload` as a compact JWS (RFC 7515 §7.1) with header
    /// `{"alg":"ES256","typ":typ,"kid":kid}`.
    ///
    /// The payload bytes are exactly `payload`: callers serialise once, so a
    /// receipt's `claims` equal its JWS payload byte for byte (PACT §5.6).
    pub fn sign_compact(&self, typ: &str, payload: &[u8]) -> Result<String, ProviderKeyError> {
        let header = serde_json::to_vec(&Header {
            alg: Alg::Es256.name(),
            typ,
            kid: &self.kid,
        })
        .map_err(|_| ProviderKeyError::Encode)?;
        let mut jws = String::with_capacity(
            (header.len() + payload.len() + ES256_SIGNATURE_BYTES) * 4 / 3 + 8,
        );
        URL_SAFE_NO_PAD.encode_string(&header, &mut jws);
        jws.push('.');
        URL_SAFE_NO_PAD.encode_string(payload, &mut jws);

        // RFC 7518 §3.4: ECDSA over SHA-256 of the signing input; the
        // signature is R || S, each left-padded to 32 bytes (not DER).
        let digest = Sha256::digest(jws.as_bytes());
        let sig = EcdsaSig::sign(&digest, &self.ec)
            .map_err(|_| ProviderKeyError::Crypto("ECDSA signing failed"))?;
        let r = sig
            .r()
            .to_vec_padded(P256_BYTES as i32)
            .map_err(|_| ProviderKeyError::Crypto("signature encoding failed"))?;
        let s = sig
            .s()
            .to_vec_padded(P256_BYTES as i32)
            .map_err(|_| ProviderKeyError::Crypto("signature encoding failed"))?;
        let mut signature = [0u8; ES256_SIGNATURE_BYTES];
        signature[..P256_BYTES].copy_from_slice(&r);
        signature[P256_BYTES..].copy_from_slice(&s);

        jws.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut jws);
        Ok(jws)
    }
}

fn p256_group() -> Result<EcGroup, ProviderKeyError> {
    EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)
        .map_err(|_| ProviderKeyError::Crypto("P-256 group unavailable"))
}

fn coordinate(n: &openssl::bn::BigNumRef) -> Result<String, ProviderKeyError> {
    let bytes = n
        .to_vec_padded(P256_BYTES as i32)
        .map_err(|_| ProviderKeyError::Crypto("coordinate encoding failed"))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// RFC 7638 §3.2: the required members of an EC key in lexicographic order,
/// no whitespace. `x` and `y` are base64url, so they need no JSON escaping.
fn thumbprint(x: &str, y: &str) -> String {
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

fn public_jwk_value(x: &str, y: &str, kid: &str) -> Value {
    json!({
        "kty": "EC",
        "crv": "P-256",
        "x": x,
        "y": y,
        "kid": kid,
        "alg": Alg::Es256.name(),
        "use": "sig",
    })
}

/// The Provider's verification keys: the current signing key and older ones
/// still published so that tokens and receipts they signed keep verifying
/// through a key rotation (RFC 7517 §5).
#[derive(Clone)]
pub struct ProviderKeySet {
    keys: KeySet,
    /// The published form of each key, rebuilt from the validated members only.
    jwks: Vec<Value>,
}

impl fmt::Debug for ProviderKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderKeySet")
            .field("keys", &self.keys)
            .finish()
    }
}

impl ProviderKeySet {
    /// Build the set from public JWKs such as [`ProviderKey::public_jwk`].
    ///
    /// Unlike a PA's JWKS, where unusable keys are skipped, every key here is
    /// our own: one that does not parse is a configuration or storage bug and
    /// fails the whole set. Each key must be EC P-256 (ES256) with a `kid`
    /// unique within the set, and no private members (RFC 7517 §9.2).
    pub fn from_public_jwks(jwks: &[Value]) -> Result<Self, ProviderKeyError> {
        if jwks.is_empty() {
            return Err(ProviderKeyError::NoKeys);
        }
        let mut keys = Vec::with_capacity(jwks.len());
        let mut published = Vec::with_capacity(jwks.len());
        let mut kids = HashSet::with_capacity(jwks.len());
        for (index, value) in jwks.iter().enumerate() {
            let invalid = |reason| ProviderKeyError::InvalidJwk { index, reason };
            let Value::Object(map) = value else {
                return Err(invalid("not a JSON object"));
            };
            let key = parse_public_jwk(map).map_err(invalid)?;
            if key.alg() != Alg::Es256 {
                return Err(invalid("not an ES256 key"));
            }
            let Some(kid) = key.kid() else {
                return Err(invalid("kid missing"));
            };
            if !kids.insert(kid.to_owned()) {
                return Err(invalid("duplicate kid"));
            }
            let (Some(Value::String(x)), Some(Value::String(y))) = (map.get("x"), map.get("y"))
            else {
                return Err(invalid("x or y missing"));
            };
            published.push(public_jwk_value(x, y, kid));
            keys.push(key);
        }
        Ok(Self {
            keys: KeySet::from_keys(keys),
            jwks: published,
        })
    }

    /// `{"keys": [...]}` for the brand's `jwks_uri` (RFC 7517 §5, PACT §5.4).
    pub fn jwks_document(&self) -> Value {
        json!({ "keys": self.jwks })
    }

    /// Verify a compact JWS signed by one of these keys and return its
    /// payload bytes.
    ///
    /// The header must be a JSON object with `alg` exactly "ES256" (RFC 8725
    /// §3.1), `typ` exactly `expected_typ` (RFC 8725 §3.11: explicit typing
    /// keeps our token kinds apart; we only accept the exact value we emit),
    /// a `kid` naming a key of the set, and no `crit` (RFC 7515 §4.1.11).
    /// `jku`, `jwk`, `x5u` and `x5c` are never read (RFC 8725 §3.10). The
    /// signature is checked over the exact signing input as received (RFC
    /// 7515 §5.2) before the payload is decoded. Callers cap the size first.
    pub fn verify_compact(
        &self,
        jws: &str,
        expected_typ: &str,
    ) -> Result<Vec<u8>, ProviderKeyError> {
        let mut segments = jws.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) = (
            segments.next(),
            segments.next(),
            segments.next(),
            segments.next(),
        ) else {
            return Err(ProviderKeyError::Malformed("not three segments"));
        };

        // URL_SAFE_NO_PAD refuses padding, '+', '/' and non-canonical
        // trailing bits, so each token has exactly one encoding (RFC 7515 §2).
        let header_bytes = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| ProviderKeyError::Malformed("header is not base64url"))?;
        let Ok(Value::Object(header)) = serde_json::from_slice::<Value>(&header_bytes) else {
            return Err(ProviderKeyError::Malformed("header is not a JSON object"));
        };
        match header.get("alg") {
            Some(Value::String(alg)) if Alg::from_name(alg) == Some(Alg::Es256) => {}
            Some(_) => return Err(ProviderKeyError::AlgNotAllowed),
            None => return Err(ProviderKeyError::Malformed("header has no alg")),
        }
        if header.contains_key("crit") {
            return Err(ProviderKeyError::CritHeader);
        }
        match header.get("typ") {
            Some(Value::String(typ)) if typ == expected_typ => {}
            _ => return Err(ProviderKeyError::WrongTyp),
        }
        let kid = match header.get("kid") {
            Some(Value::String(kid)) => kid.as_str(),
            Some(_) => return Err(ProviderKeyError::Malformed("kid is not a string")),
            None => return Err(ProviderKeyError::Malformed("header has no kid")),
        };
        // With a kid, `find` returns only the key with that kid: never "try
        // every key".
        let key: Arc<VerifyingKey> = self
            .keys
            .find(Some(kid), Alg::Es256)
            .ok_or(ProviderKeyError::UnknownKey)?;

        let signature = URL_SAFE_NO_PAD
            .decode(signature_b64)
            .map_err(|_| ProviderKeyError::Malformed("signature is not base64url"))?;
        if signature.len() != ES256_SIGNATURE_BYTES {
            return Err(ProviderKeyError::BadSignature);
        }
        let signing_input_len = header_b64.len() + 1 + payload_b64.len();
        let signing_input = jws
            .get(..signing_input_len)
            .ok_or(ProviderKeyError::Malformed("not three segments"))?;
        if !key.verify_signature(signing_input.as_bytes(), &signature) {
            return Err(ProviderKeyError::BadSignature);
        }

        URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| ProviderKeyError::Malformed("payload is not base64url"))
    }
}

/// Parse one public JWK with the shared rules of [`VerifyingKey::from_jwk`].
fn parse_public_jwk(map: &Map<String, Value>) -> Result<VerifyingKey, &'static str> {
    let jwk = Jwk::from_map(map.clone()).map_err(|_| "invalid JWK")?;
    VerifyingKey::from_jwk(&jwk).map_err(|err| match err {
        JwksError::UnusableKey(reason) => reason,
        _ => "unusable JWK",
    })
}
