//! Signed tree heads (STH) of pactd's receipt log, in the manner of RFC 9162
//! §4.10: the size and root of the Merkle tree over every receipt, at a
//! time, signed with the receipt signing key.

use serde::{Deserialize, Serialize};

use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};
use pact_crypto::merkle::{Hash, decode_hash, encode_hash};

/// The JOSE `typ` of a tree head (RFC 8725 §3.11): distinct from receipts
/// and delegation tokens, so no signed object passes as another kind.
pub const TREE_HEAD_TYP: &str = "pact-sth+jws";

/// The signed fields (RFC 9162 §4.10 `TreeHeadDataV2`, as JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeHead {
    pub tree_size: u64,
    /// base64url (no padding) of the 32-byte root.
    pub root_hash: String,
    /// Milliseconds since the Unix epoch, as in RFC 9162.
    pub timestamp: u64,
}

impl TreeHead {
    pub fn new(tree_size: u64, root: &Hash, timestamp: u64) -> Self {
        Self {
            tree_size,
            root_hash: encode_hash(root),
            timestamp,
        }
    }

    /// The root as bytes; `None` when it is not 32 bytes of base64url.
    pub fn root(&self) -> Option<Hash> {
        decode_hash(&self.root_hash)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TreeHeadError {
    #[error("tree head JWS: {0}")]
    Jws(ProviderKeyError),
    #[error("tree head payload is not a tree head")]
    Payload,
}

/// Signs `head` as a compact JWS with `typ: pact-sth+jws`.
pub fn sign_tree_head(key: &ProviderKey, head: &TreeHead) -> Result<String, ProviderKeyError> {
    let payload = serde_json::to_vec(head).map_err(|_| ProviderKeyError::Encode)?;
    key.sign_compact(TREE_HEAD_TYP, &payload)
}

/// Verifies a tree head JWS against `keys` and returns its signed fields.
pub fn verify_tree_head(jws: &str, keys: &ProviderKeySet) -> Result<TreeHead, TreeHeadError> {
    let payload = keys
        .verify_compact(jws, TREE_HEAD_TYP)
        .map_err(TreeHeadError::Jws)?;
    let head: TreeHead = serde_json::from_slice(&payload).map_err(|_| TreeHeadError::Payload)?;
    if head.root().is_none() {
        return Err(TreeHeadError::Payload);
    }
    Ok(head)
}
