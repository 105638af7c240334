//! Receipts (PACT §5.6): a signed record of what the brand's agent did under a
//! delegation token, returned with every reply as `pact.receipt`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_proto::oauth::{Receipt, ReceiptClaims};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};

/// The JOSE `typ` of a receipt (RFC 7515 §4.1.9, RFC 8725 §3.11): distinct
/// from `at+jwt`, so a receipt can never pass as a delegation token.
pub const RECEIPT_TYP: &str = "pact-receipt+jws";

/// Why a receipt did not verify. Carries no part of the receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// The JWS itself failed: form, `alg`, `typ`, `crit`, `kid` or signature.
    #[error("receipt JWS: {0}")]
    Jws(ProviderKeyError),
    /// The signed payload is not JSON receipt claims.
    #[error("receipt payload is not receipt claims")]
    Payload,
    /// The JWS payload and the `claims` beside it differ (PACT §5.6: the
    /// payload must equal `claims`), e.g. `claims` edited after signing.
    #[error("receipt claims differ from the signed payload")]
    ClaimsMismatch,
}

/// Sign `claims` as a receipt (PACT §5.6).
///
/// The claims are serialised once and exactly those bytes are signed, so the
/// `claims` of the returned [`Receipt`] equal its JWS payload.
pub fn sign_receipt(key: &ProviderKey, claims: ReceiptClaims) -> Result<Receipt, ProviderKeyError> {
    let payload = serde_json::to_vec(&claims).map_err(|_| ProviderKeyError::Encode)?;
    let jws = key.sign_compact(RECEIPT_TYP, &payload)?;
    Ok(Receipt { jws, claims })
}

/// Verify a receipt: the JWS is signed by one of `keys` with `typ`
/// `pact-receipt+jws`, and its payload equals `receipt.claims` as JSON values
/// (member order and whitespace aside). Returns the claims from the signed
/// payload — never the unsigned copy beside it.
pub fn verify_receipt(
    receipt: &Receipt,
    keys: &ProviderKeySet,
) -> Result<ReceiptClaims, ReceiptError> {
    let payload = keys
        .verify_compact(&receipt.jws, RECEIPT_TYP)
        .map_err(ReceiptError::Jws)?;
    let signed: Value = serde_json::from_slice(&payload).map_err(|_| ReceiptError::Payload)?;
    let unsigned = serde_json::to_value(&receipt.claims).map_err(|_| ReceiptError::Payload)?;
    if signed != unsigned {
        return Err(ReceiptError::ClaimsMismatch);
    }
    serde_json::from_value(signed).map_err(|_| ReceiptError::Payload)
}

/// The chain link of a receipt: base64url (RFC 4648 §5, no padding) of the
/// SHA-256 of the JWS's ASCII bytes. It is the `prev` of the next receipt of
/// the same grant, so deleting or reordering stored receipts is detectable.
pub fn receipt_hash(jws: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(jws.as_bytes()))
}

/// `argsHash` (PACT §5.6): base64url SHA-256 of the tool arguments as
/// compact JSON (serde_json's serialisation, no whitespace).
///
/// Object members are written in ascending order of their names' code
/// points, recursively. serde_json would otherwise keep insertion order here
/// (its `preserve_order` feature is switched on in this build by josekit), so
/// the same arguments could hash differently depending on how the model
/// ordered them. Sorting matches RFC 8785's member order for names in the
/// Basic Multilingual Plane; numbers and strings are as serde_json writes
/// them, so this is not full JCS. An object with one member — the common
/// case — hashes exactly as `serde_json::to_string` writes it.
pub fn args_hash(args: &Value) -> String {
    let canonical = sorted(args).to_string();
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// A copy of `value` whose objects have their members in sorted order.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut out = Map::with_capacity(members.len());
            for (name, member) in members {
                out.insert(name.clone(), sorted(member));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}
