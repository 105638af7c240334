//! Standard Webhooks signatures (standard-webhooks.md, "Signature scheme" and
//! "Webhook headers"): the merchant verifies every call pactd makes to its
//! agent and tools with an off-the-shelf library.
//!
//! * secret: 32 random bytes, shown as `whsec_<base64>`; the HMAC key is the
//!   decoded bytes (the spec asks for 24–64);
//! * signed content: `{webhook-id}.{webhook-timestamp}.{body}`;
//! * `webhook-signature: v1,<base64 HMAC-SHA256>`, space-separated when a
//!   rotated-out secret is still in its grace period (zero-downtime rotation).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use pact_crypto::{MasterKey, SealError};
use pact_db::ids::BrandId;
use sha2::Sha256;
use uuid::Uuid;

pub const SECRET_PREFIX: &str = "whsec_";
const SECRET_BYTES: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("cryptographic failure")]
    Crypto,
    #[error("webhook secret does not open: {0}")]
    Seal(#[from] SealError),
}

/// A webhook signing secret (the raw HMAC key). Never `Display`ed; `Debug` hides it.
/// A webhook signing secret, with its HMAC key schedule done once: a turn
/// and each of its tool calls are signed with it, and keying HMAC-SHA256
/// anew (two SHA-256 blocks, and through OpenSSL an `EVP_PKEY` and a digest
/// context each time) was a measurable part of a webhook turn's CPU.
#[derive(Clone)]
pub struct WebhookSecret {
    key: Vec<u8>,
    /// `None` only if the HMAC crate refused the key, which RFC 2104 §2
    /// never does: signing then fails instead of panicking.
    mac: Option<Hmac<Sha256>>,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl WebhookSecret {
    pub fn generate() -> Result<Self, SigningError> {
        let mut key = vec![0u8; SECRET_BYTES];
        openssl::rand::rand_bytes(&mut key).map_err(|_| SigningError::Crypto)?;
        Ok(Self::from_bytes(key))
    }

    pub fn from_bytes(key: Vec<u8>) -> Self {
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).ok();
        Self { key, mac }
    }

    /// `whsec_<base64>`, the form merchants paste into their verifier.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }

    /// Sealed for `brand_webhook_secrets.sealed`, bound to its row.
    pub fn seal(
        &self,
        master: &MasterKey,
        brand_id: &BrandId,
        id: Uuid,
    ) -> Result<Vec<u8>, SealError> {
        master.seal(&self.key, &aad(brand_id, id))
    }

    pub fn open(
        master: &MasterKey,
        sealed: &[u8],
        brand_id: &BrandId,
        id: Uuid,
    ) -> Result<Self, SealError> {
        master
            .open(sealed, &aad(brand_id, id))
            .map(Self::from_bytes)
    }

    /// `v1,<base64 HMAC-SHA256("{id}.{timestamp}.{body}")>`.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, SigningError> {
        let mut mac = self.mac.clone().ok_or(SigningError::Crypto)?;
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        Ok(format!(
            "v1,{}",
            STANDARD.encode(mac.finalize().into_bytes())
        ))
    }
}

/// The node's opened webhook secrets, by row: opening one (AES-256-GCM under
/// the master key) for every turn and every tool call was a measurable part
/// of a webhook turn's CPU. An entry is used only for the very sealed bytes
/// it was opened from and for its own brand (the seal's AAD), so a rotated, rewrapped or replaced row is opened
/// again; which secrets sign is still decided by the caller from the rows.
/// Bounded: past `OPENED_MAX` rows (far more than brands × secrets in grace)
/// it starts again empty.
#[derive(Default)]
pub struct OpenedSecrets {
    by_row: Mutex<HashMap<Uuid, Kept>>,
}

/// An opened secret with what it was opened for: its sealed bytes and brand.
struct Kept {
    sealed: Vec<u8>,
    brand_id: BrandId,
    secret: WebhookSecret,
}

const OPENED_MAX: usize = 4096;

impl std::fmt::Debug for OpenedSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenedSecrets(..)")
    }
}

impl OpenedSecrets {
    pub fn open(
        &self,
        master: &MasterKey,
        sealed: &[u8],
        brand_id: &BrandId,
        id: Uuid,
    ) -> Result<WebhookSecret, SealError> {
        let mut map = self
            .by_row
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(kept) = map.get(&id)
            && kept.sealed == sealed
            && kept.brand_id == *brand_id
        {
            return Ok(kept.secret.clone());
        }
        drop(map);
        // Opened outside the lock; the AAD binds it to its brand and row.
        let secret = WebhookSecret::open(master, sealed, brand_id, id)?;
        map = self
            .by_row
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= OPENED_MAX {
            map.clear();
        }
        map.insert(
            id,
            Kept {
                sealed: sealed.to_vec(),
                brand_id: brand_id.clone(),
                secret: secret.clone(),
            },
        );
        Ok(secret)
    }
}

/// The row a sealed secret belongs to: copying it to another brand or row
/// makes it unopenable.
fn aad(brand_id: &BrandId, id: Uuid) -> Vec<u8> {
    format!("webhook-secret\n{brand_id}\n{id}").into_bytes()
}

/// The three Standard Webhooks headers for one request.
#[derive(Clone, Debug)]
pub struct SignedHeaders {
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
}

/// Signs `body` with every secret (current first), as one header value.
pub fn sign_all(
    secrets: &[WebhookSecret],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<SignedHeaders, SigningError> {
    let mut sigs = Vec::with_capacity(secrets.len());
    for s in secrets {
        sigs.push(s.sign(msg_id, timestamp, body)?);
    }
    Ok(SignedHeaders {
        id: msg_id.to_owned(),
        timestamp,
        signature: sigs.join(" "),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn brand(id: &str) -> BrandId {
        BrandId::parse(id).unwrap()
    }

    /// The example from the standard-webhooks reference libraries' test suite
    /// shape: a known key, id, timestamp and body give a fixed signature
    /// (checked against Python's `hmac`/`base64`, see examples/merchant).
    #[test]
    fn signature_is_hmac_sha256_over_id_timestamp_body() {
        let secret = WebhookSecret::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec());
        let sig = secret.sign("msg_1", 1_674_087_231, b"{\"a\":1}").unwrap();
        assert!(sig.starts_with("v1,"));
        // Same inputs, same signature; any change, another one.
        assert_eq!(
            sig,
            secret.sign("msg_1", 1_674_087_231, b"{\"a\":1}").unwrap()
        );
        assert_ne!(
            sig,
            secret.sign("msg_2", 1_674_087_231, b"{\"a\":1}").unwrap()
        );
        assert_ne!(
            sig,
            secret.sign("msg_1", 1_674_087_232, b"{\"a\":1}").unwrap()
        );
        assert_ne!(
            sig,
            secret.sign("msg_1", 1_674_087_231, b"{\"a\":2}").unwrap()
        );
        let mac = STANDARD.decode(&sig[3..]).unwrap();
        assert_eq!(mac.len(), 32);
    }

    /// A known answer, computed independently (Python:
    /// `base64.b64encode(hmac.new(key, b"msg_1.1674087231.{\"a\":1}", "sha256").digest())`).
    #[test]
    fn signature_matches_an_independent_hmac_sha256() {
        let secret = WebhookSecret::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec());
        let sig = secret.sign("msg_1", 1_674_087_231, b"{\"a\":1}").unwrap();
        assert_eq!(sig, "v1,c9lhjcxcymv8/2VlKN9YRwiXq2vINjMBBrf/LxiKlvQ=");
    }

    #[test]
    fn an_opened_secret_is_kept_only_for_the_bytes_it_was_opened_from() {
        let master = MasterKey::generate().unwrap();
        let opened = OpenedSecrets::default();
        let id = Uuid::new_v4();
        let (a, b) = (
            WebhookSecret::generate().unwrap(),
            WebhookSecret::generate().unwrap(),
        );
        let sealed_a = a.seal(&master, &brand("shop"), id).unwrap();
        let got = opened.open(&master, &sealed_a, &brand("shop"), id).unwrap();
        assert_eq!(got.to_whsec(), a.to_whsec());
        // The same row re-sealed with another secret: opened again.
        let sealed_b = b.seal(&master, &brand("shop"), id).unwrap();
        let got = opened.open(&master, &sealed_b, &brand("shop"), id).unwrap();
        assert_eq!(got.to_whsec(), b.to_whsec());
        // Bound to its brand whether kept or not.
        assert!(
            opened
                .open(&master, &sealed_b, &brand("other"), id)
                .is_err()
        );
    }

    #[test]
    fn rotation_sends_both_signatures_space_separated() {
        let a = WebhookSecret::generate().unwrap();
        let b = WebhookSecret::generate().unwrap();
        let h = sign_all(&[a.clone(), b.clone()], "m", 1, b"x").unwrap();
        let parts: Vec<&str> = h.signature.split(' ').collect();
        assert_eq!(
            parts,
            [a.sign("m", 1, b"x").unwrap(), b.sign("m", 1, b"x").unwrap()]
        );
    }

    #[test]
    fn whsec_form_and_sealing_round_trip() {
        let s = WebhookSecret::generate().unwrap();
        let shown = s.to_whsec();
        assert!(shown.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&shown[6..]).unwrap().len(), 32);
        assert!(!format!("{s:?}").contains(&shown[6..]));
        let master = MasterKey::generate().unwrap();
        let id = Uuid::new_v4();
        let sealed = s.seal(&master, &brand("shop"), id).unwrap();
        let opened = WebhookSecret::open(&master, &sealed, &brand("shop"), id).unwrap();
        assert_eq!(opened.to_whsec(), shown);
        assert!(WebhookSecret::open(&master, &sealed, &brand("other"), id).is_err());
    }
}
