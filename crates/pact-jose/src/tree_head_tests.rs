//! Tests of signed tree heads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::provider_keys::{ProviderKey, ProviderKeySet};
use crate::receipt::RECEIPT_TYP;
use crate::tree_head::{TreeHead, TreeHeadError, sign_tree_head, verify_tree_head};
use pact_crypto::merkle::{Tree, receipt_leaf_hash};

#[test]
fn sign_then_verify_and_refuse_other_keys_and_types() {
    let key = ProviderKey::generate().unwrap();
    let keys = ProviderKeySet::from_public_jwks(&[key.public_jwk()]).unwrap();
    let tree = Tree::from_leaf_hashes(["a.b.c", "d.e.f"].map(receipt_leaf_hash));
    let head = TreeHead::new(2, &tree.root(2).unwrap(), 1_700_000_000_000);
    let jws = sign_tree_head(&key, &head).unwrap();
    assert_eq!(verify_tree_head(&jws, &keys).unwrap(), head);

    let other = ProviderKey::generate().unwrap();
    let other_keys = ProviderKeySet::from_public_jwks(&[other.public_jwk()]).unwrap();
    assert!(matches!(
        verify_tree_head(&jws, &other_keys),
        Err(TreeHeadError::Jws(_))
    ));
    // A receipt-typed JWS with the same payload is not a tree head.
    let as_receipt = key
        .sign_compact(RECEIPT_TYP, &serde_json::to_vec(&head).unwrap())
        .unwrap();
    assert!(verify_tree_head(&as_receipt, &keys).is_err());
    // A root that is not 32 bytes is refused even when signed.
    let bad = TreeHead {
        root_hash: "AAAA".into(),
        ..head
    };
    let jws = sign_tree_head(&key, &bad).unwrap();
    assert_eq!(verify_tree_head(&jws, &keys), Err(TreeHeadError::Payload));
}
