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
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;
use pact_jose::{MasterKey, SealError};
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
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl WebhookSecret {
    pub fn generate() -> Result<Self, SigningError> {
        let mut key = vec![0u8; SECRET_BYTES];
        openssl::rand::rand_bytes(&mut key).map_err(|_| SigningError::Crypto)?;
        Ok(Self(key))
    }

    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// `whsec_<base64>`, the form merchants paste into their verifier.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// Sealed for `brand_webhook_secrets.sealed`, bound to its row.
    pub fn seal(&self, master: &MasterKey, brand_id: &str, id: Uuid) -> Result<Vec<u8>, SealError> {
        master.seal(&self.0, &aad(brand_id, id))
    }

    pub fn open(
        master: &MasterKey,
        sealed: &[u8],
        brand_id: &str,
        id: Uuid,
    ) -> Result<Self, SealError> {
        master.open(sealed, &aad(brand_id, id)).map(Self)
    }

    /// `v1,<base64 HMAC-SHA256("{id}.{timestamp}.{body}")>`.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> Result<String, SigningError> {
        let key = PKey::hmac(&self.0).map_err(|_| SigningError::Crypto)?;
        let mut signer =
            Signer::new(MessageDigest::sha256(), &key).map_err(|_| SigningError::Crypto)?;
        let mut content = Vec::with_capacity(msg_id.len() + 24 + body.len());
        content.extend_from_slice(msg_id.as_bytes());
        content.push(b'.');
        content.extend_from_slice(timestamp.to_string().as_bytes());
        content.push(b'.');
        content.extend_from_slice(body);
        signer.update(&content).map_err(|_| SigningError::Crypto)?;
        let mac = signer.sign_to_vec().map_err(|_| SigningError::Crypto)?;
        Ok(format!("v1,{}", STANDARD.encode(mac)))
    }
}

/// The row a sealed secret belongs to: copying it to another brand or row
/// makes it unopenable.
fn aad(brand_id: &str, id: Uuid) -> Vec<u8> {
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
        let sealed = s.seal(&master, "shop", id).unwrap();
        let opened = WebhookSecret::open(&master, &sealed, "shop", id).unwrap();
        assert_eq!(opened.to_whsec(), shown);
        assert!(WebhookSecret::open(&master, &sealed, "other", id).is_err());
    }
}
