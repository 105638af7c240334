//! Parsed PA public keys and key sets (RFC 7517).

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use josekit::jws::{ES256, JwsVerifier, RS256};
use serde_json::{Map, Value};

use crate::alg::Alg;
use crate::error::JwksError;
use crate::signature_memo::{self, KeyIdentity};

/// JWK members that carry private key material (RFC 7518 §6.2.2, §6.3.2,
/// §6.4.1). A public JWKS must not contain them; a key that does is refused
/// rather than used, since its publisher is leaking a secret and we should not
/// depend on it.
const PRIVATE_MEMBERS: [&str; 8] = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/// Smallest RSA modulus accepted (RFC 7518 §3.3: 2048 bits or larger).
const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted: keeps the cost of one verify bounded.
const MAX_RSA_BITS: usize = 8192;
/// Largest RSA public exponent accepted, in bytes (65537 needs 3): a huge
/// exponent would make each verify a full-size modular exponentiation.
const MAX_RSA_EXPONENT_BYTES: usize = 4;
/// P-256 coordinates are exactly 32 bytes (RFC 7518 §6.2.1.2, §6.2.1.3).
const P256_COORDINATE_BYTES: usize = 32;

/// One parsed public key: parsing a JWK costs more than a verify, so keep these
/// (cache them), never re-parse per request.
pub struct VerifyingKey {
    kid: Option<String>,
    alg: Alg,
    verifier: Box<dyn JwsVerifier>,
    /// Its public parameters, hashed: what a remembered verification is bound to.
    identity: KeyIdentity,
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    /// The key's `kid`, if its JWK had one.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The one algorithm this key verifies (RFC 8725 §3.1).
    pub fn alg(&self) -> Alg {
        self.alg
    }

    /// Build a key from one public JWK (RFC 7517 §4), with the same rules as
    /// [`KeySet::from_json`]: EC P-256 → ES256, RSA ≥ 2048 bits → RS256,
    /// `use` absent or "sig", `key_ops` absent or containing "verify", `alg`
    /// absent or agreeing, and no private members.
    pub fn from_jwk(jwk: &Jwk) -> Result<Self, JwksError> {
        let value = serde_json::to_value(jwk)
            .map_err(|_| JwksError::UnusableKey("JWK does not serialise"))?;
        match value {
            Value::Object(map) => Self::from_jwk_map(map),
            _ => Err(JwksError::UnusableKey("JWK is not an object")),
        }
    }

    fn from_jwk_map(map: Map<String, Value>) -> Result<Self, JwksError> {
        if PRIVATE_MEMBERS.iter().any(|m| map.contains_key(*m)) {
            return Err(JwksError::UnusableKey("contains private key material"));
        }
        match map.get("use") {
            None => {}
            Some(Value::String(u)) if u == "sig" => {}
            Some(_) => return Err(JwksError::UnusableKey("use is not sig")),
        }
        match map.get("key_ops") {
            None => {}
            Some(Value::Array(ops)) if ops.iter().any(|op| op == "verify") => {}
            Some(_) => return Err(JwksError::UnusableKey("key_ops lacks verify")),
        }
        let kid = match map.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(JwksError::UnusableKey("kid is not a string")),
        };
        let alg = match map.get("kty") {
            Some(Value::String(kty)) if kty == "EC" => Alg::Es256,
            Some(Value::String(kty)) if kty == "RSA" => Alg::Rs256,
            Some(Value::String(_)) => return Err(JwksError::UnusableKey("unsupported kty")),
            _ => return Err(JwksError::UnusableKey("kty missing")),
        };
        match map.get("alg") {
            None => {}
            Some(Value::String(a)) if a == alg.name() => {}
            Some(_) => return Err(JwksError::UnusableKey("alg disagrees with the key type")),
        }
        match alg {
            Alg::Es256 => check_p256_members(&map)?,
            Alg::Rs256 => check_rsa_members(&map)?,
        }
        let member = |name: &str| match map.get(name) {
            Some(Value::String(s)) => s.as_str(),
            _ => "",
        };
        // The members checked just above: they alone decide what verifies.
        let identity = match alg {
            Alg::Es256 => signature_memo::key_identity("EC", &[member("x"), member("y")]),
            Alg::Rs256 => signature_memo::key_identity("RSA", &[member("n"), member("e")]),
        };

        let jwk = Jwk::from_map(map).map_err(|_| JwksError::UnusableKey("invalid JWK"))?;
        let verifier: Box<dyn JwsVerifier> = match alg {
            Alg::Es256 => Box::new(
                ES256
                    .verifier_from_jwk(&jwk)
                    .map_err(|_| JwksError::UnusableKey("invalid EC public key"))?,
            ),
            Alg::Rs256 => Box::new(
                RS256
                    .verifier_from_jwk(&jwk)
                    .map_err(|_| JwksError::UnusableKey("invalid RSA public key"))?,
            ),
        };
        Ok(Self {
            kid,
            alg,
            verifier,
            identity,
        })
    }

    /// `true` when `signature` is a valid signature of `message` with this key
    /// (verified once per distinct token: see `signature_memo`).
    pub(crate) fn verify_signature(&self, message: &[u8], signature: &[u8]) -> bool {
        signature_memo::verify_once(&self.identity, message, signature, || {
            self.verifier.verify(message, signature).is_ok()
        })
    }
}

/// EC keys: only P-256 (ES256), with full-size coordinates. OpenSSL then checks
/// that the point is on the curve when the key is loaded.
fn check_p256_members(map: &Map<String, Value>) -> Result<(), JwksError> {
    match map.get("crv") {
        Some(Value::String(crv)) if crv == "P-256" => {}
        _ => return Err(JwksError::UnusableKey("EC curve is not P-256")),
    }
    for (member, bad) in [("x", "x is not 32 bytes"), ("y", "y is not 32 bytes")] {
        if decoded_len(map, member) != Some(P256_COORDINATE_BYTES) {
            return Err(JwksError::UnusableKey(bad));
        }
    }
    Ok(())
}

/// RSA keys: 2048 to 8192-bit modulus and a small public exponent.
fn check_rsa_members(map: &Map<String, Value>) -> Result<(), JwksError> {
    let n = decoded(map, "n").ok_or(JwksError::UnusableKey("n is not base64url"))?;
    let bits = significant_bits(&n);
    if bits < MIN_RSA_BITS {
        return Err(JwksError::UnusableKey("RSA modulus shorter than 2048 bits"));
    }
    if bits > MAX_RSA_BITS {
        return Err(JwksError::UnusableKey("RSA modulus longer than 8192 bits"));
    }
    let e = decoded(map, "e").ok_or(JwksError::UnusableKey("e is not base64url"))?;
    let e_bytes = e.iter().skip_while(|b| **b == 0).count();
    if e_bytes == 0 || e_bytes > MAX_RSA_EXPONENT_BYTES {
        return Err(JwksError::UnusableKey("RSA exponent out of range"));
    }
    Ok(())
}

fn decoded(map: &Map<String, Value>, member: &str) -> Option<Vec<u8>> {
    match map.get(member) {
        Some(Value::String(s)) => URL_SAFE_NO_PAD.decode(s).ok(),
        _ => None,
    }
}

fn decoded_len(map: &Map<String, Value>, member: &str) -> Option<usize> {
    decoded(map, member).map(|v| v.len())
}

/// Bit length of a big-endian unsigned integer.
fn significant_bits(be: &[u8]) -> usize {
    let mut bytes = be.iter().skip_while(|b| **b == 0);
    match bytes.next() {
        None => 0,
        Some(first) => {
            let rest = bytes.count();
            rest * 8 + (8 - first.leading_zeros() as usize)
        }
    }
}

/// The most entries a JWKS may hold. A signer rotating keys publishes two or
/// three at a time; real providers publish under a dozen.
pub const MAX_KEYS: usize = 32;
// The refusal below names the number: they change together.
const _: () = assert!(MAX_KEYS == 32);

/// The usable verification keys of one PA (RFC 7517 §5).
#[derive(Clone, Default)]
pub struct KeySet {
    keys: Vec<Arc<VerifyingKey>>,
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.keys.iter()).finish()
    }
}

impl KeySet {
    /// Parse a JWKS document (RFC 7517 §5). Keep usable keys only: kty EC crv
    /// P-256 → ES256; kty RSA (modulus ≥ 2048 bits) → RS256. Keys with a `use`
    /// other than "sig", a disagreeing `alg`, private members, or an unknown
    /// kty are skipped, as are later duplicates of an earlier (kid, alg).
    /// Keys without a `kid` are all kept, so that two of one alg stay
    /// ambiguous and [`KeySet::find`] refuses a kid-less token for them.
    ///
    /// A set of more than [`MAX_KEYS`] entries is refused whole: under open
    /// admission anyone can publish a set, and each parsed key is held in
    /// memory by every node for as long as the set is cached.
    ///
    /// One bad key never fails the whole set (RFC 7517 §5: implementations
    /// should ignore JWKs they do not understand), so a PA adding a key type
    /// we don't support does not lock its users out. Fails only when the
    /// document is not a JSON object with a `keys` array.
    pub fn from_json(bytes: &[u8]) -> Result<KeySet, JwksError> {
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|_| JwksError::Malformed("not JSON"))?;
        let Value::Object(mut doc) = doc else {
            return Err(JwksError::Malformed("not a JSON object"));
        };
        let Some(Value::Array(entries)) = doc.remove("keys") else {
            return Err(JwksError::Malformed("no keys array"));
        };
        if entries.len() > MAX_KEYS {
            return Err(JwksError::Malformed("more than 32 keys"));
        }
        let mut set = KeySet::default();
        for (index, entry) in entries.into_iter().enumerate() {
            let Value::Object(map) = entry else {
                tracing::debug!(index, "JWKS entry is not an object; skipped");
                continue;
            };
            match VerifyingKey::from_jwk_map(map) {
                Ok(key) => {
                    if key.kid().is_some() && set.has(key.kid(), key.alg()) {
                        tracing::debug!(index, "duplicate JWK kid and alg; skipped");
                    } else {
                        set.keys.push(Arc::new(key));
                    }
                }
                Err(reason) => tracing::debug!(index, %reason, "JWK skipped"),
            }
        }
        Ok(set)
    }

    /// A set made of already parsed keys (e.g. from configuration).
    pub fn from_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> KeySet {
        KeySet {
            keys: keys.into_iter().map(Arc::new).collect(),
        }
    }

    fn has(&self, kid: Option<&str>, alg: Alg) -> bool {
        self.keys.iter().any(|k| k.kid() == kid && k.alg() == alg)
    }

    /// The key for a token: with a kid, the key with that kid and the same alg;
    /// without kid, the only key of that alg (if exactly one). Never "try every
    /// key": a kid-less token is accepted only when the choice is unambiguous.
    pub fn find(&self, kid: Option<&str>, alg: Alg) -> Option<Arc<VerifyingKey>> {
        match kid {
            Some(kid) => self
                .keys
                .iter()
                .find(|k| k.alg() == alg && k.kid() == Some(kid))
                .cloned(),
            None => {
                let mut same_alg = self.keys.iter().filter(|k| k.alg() == alg);
                match (same_alg.next(), same_alg.next()) {
                    (Some(only), None) => Some(Arc::clone(only)),
                    _ => None,
                }
            }
        }
    }

    /// Number of usable keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// `true` when no key was usable.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The usable keys, in document order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<VerifyingKey>> {
        self.keys.iter()
    }
}
