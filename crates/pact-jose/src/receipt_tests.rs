//! Tests of receipts (PACT §5.6): signing, verification, chain hash, argsHash.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(clippy::disallowed_methods)] // tests sign receipts at real times

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_proto::oauth::{Receipt, ReceiptAction, ReceiptClaims};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};
use crate::receipt::{
    RECEIPT_TYP, ReceiptError, args_hash, receipt_hash, sign_receipt, verify_receipt,
};

fn keys_for(key: &ProviderKey) -> ProviderKeySet {
    ProviderKeySet::from_public_jwks(&[key.public_jwk()]).unwrap()
}

fn claims(prev: Option<String>) -> ReceiptClaims {
    ReceiptClaims {
        grant_id: "grant-1".into(),
        user: "user-42".into(),
        pa: "https://pa.example.com".into(),
        brand: "https://shop.example.com/a2a".into(),
        scopes_used: vec!["orders:read".into()],
        actions: vec![ReceiptAction {
            tool: "get_order".into(),
            args_hash: Some(args_hash(&json!({"order_id": "DEMO-1"}))),
            ..Default::default()
        }],
        refused: vec![],
        ts: OffsetDateTime::now_utc().format(&Rfc3339).unwrap(),
        prev,
        extra: Default::default(),
    }
}

#[test]
fn sign_then_verify() {
    let key = ProviderKey::generate().unwrap();
    let c = claims(None);
    let receipt = sign_receipt(&key, c.clone()).unwrap();
    assert_eq!(receipt.claims, c);
    assert_eq!(verify_receipt(&receipt, &keys_for(&key)).unwrap(), c);

    // The payload is byte for byte the serialised claims.
    let payload = URL_SAFE_NO_PAD
        .decode(receipt.jws.split('.').nth(1).unwrap())
        .unwrap();
    assert_eq!(payload, serde_json::to_vec(&c).unwrap());

    // And it survives the trip through the `pact.receipt` metadata JSON.
    let wire = serde_json::to_string(&receipt).unwrap();
    let back: Receipt = serde_json::from_str(&wire).unwrap();
    assert_eq!(verify_receipt(&back, &keys_for(&key)).unwrap(), c);
}

#[test]
fn chained_receipts_verify() {
    let key = ProviderKey::generate().unwrap();
    let first = sign_receipt(&key, claims(None)).unwrap();
    let second = sign_receipt(&key, claims(Some(receipt_hash(&first.jws)))).unwrap();
    let verified = verify_receipt(&second, &keys_for(&key)).unwrap();
    assert_eq!(
        verified.prev.as_deref(),
        Some(receipt_hash(&first.jws).as_str())
    );
}

#[test]
fn claims_edited_after_signing_are_refused() {
    let key = ProviderKey::generate().unwrap();
    let keys = keys_for(&key);
    let receipt = sign_receipt(&key, claims(None)).unwrap();

    let edits: [fn(&mut ReceiptClaims); 5] = [
        |c| c.scopes_used.push("orders:cancel".into()),
        |c| c.actions.clear(),
        |c| c.user = "someone-else".into(),
        |c| c.prev = Some("forged".into()),
        |c| c.actions[0].args_hash = None,
    ];
    for edit in edits {
        let mut edited = receipt.clone();
        edit(&mut edited.claims);
        assert_eq!(
            verify_receipt(&edited, &keys),
            Err(ReceiptError::ClaimsMismatch)
        );
    }
}

#[test]
fn payload_claims_mismatch_is_refused() {
    // A validly signed receipt whose JWS carries other claims than `claims`.
    let key = ProviderKey::generate().unwrap();
    let keys = keys_for(&key);
    let signed = sign_receipt(&key, claims(None)).unwrap();
    let mut other = claims(None);
    other.grant_id = "grant-2".into();
    let swapped = Receipt {
        jws: signed.jws,
        claims: other,
    };
    assert_eq!(
        verify_receipt(&swapped, &keys),
        Err(ReceiptError::ClaimsMismatch)
    );

    // A member a later version signs is kept, so the claims still equal the
    // payload; the same payload shown without it is a mismatch.
    let mut payload = serde_json::to_value(claims(None)).unwrap();
    payload["extra"] = json!(true);
    let c: ReceiptClaims = serde_json::from_value(payload.clone()).unwrap();
    let jws = key
        .sign_compact(RECEIPT_TYP, payload.to_string().as_bytes())
        .unwrap();
    let verified = verify_receipt(
        &Receipt {
            jws: jws.clone(),
            claims: c,
        },
        &keys,
    )
    .unwrap();
    assert_eq!(verified.extra.get("extra"), Some(&json!(true)));
    assert_eq!(
        verify_receipt(
            &Receipt {
                jws,
                claims: claims(None)
            },
            &keys
        ),
        Err(ReceiptError::ClaimsMismatch)
    );

    // A signed payload that is not receipt claims at all.
    let jws = key.sign_compact(RECEIPT_TYP, b"not json").unwrap();
    assert_eq!(
        verify_receipt(
            &Receipt {
                jws,
                claims: claims(None)
            },
            &keys
        ),
        Err(ReceiptError::Payload)
    );
}

#[test]
fn member_order_in_the_payload_does_not_matter() {
    let key = ProviderKey::generate().unwrap();
    let c = claims(None);
    let v = serde_json::to_value(&c).unwrap();
    // Same claims, members in reverse order.
    let mut reversed = serde_json::Map::new();
    for (name, value) in v.as_object().unwrap().iter().rev() {
        reversed.insert(name.clone(), value.clone());
    }
    let jws = key
        .sign_compact(RECEIPT_TYP, Value::Object(reversed).to_string().as_bytes())
        .unwrap();
    assert_eq!(
        verify_receipt(
            &Receipt {
                jws,
                claims: c.clone()
            },
            &keys_for(&key)
        )
        .unwrap(),
        c
    );
}

#[test]
fn wrong_key_or_typ_is_refused() {
    let key = ProviderKey::generate().unwrap();
    let other = ProviderKey::generate().unwrap();
    let receipt = sign_receipt(&key, claims(None)).unwrap();
    assert_eq!(
        verify_receipt(&receipt, &keys_for(&other)),
        Err(ReceiptError::Jws(ProviderKeyError::UnknownKey))
    );

    let c = claims(None);
    let jws = key
        .sign_compact("at+jwt", &serde_json::to_vec(&c).unwrap())
        .unwrap();
    assert_eq!(
        verify_receipt(&Receipt { jws, claims: c }, &keys_for(&key)),
        Err(ReceiptError::Jws(ProviderKeyError::WrongTyp))
    );

    let mut tampered = receipt.clone();
    tampered.jws.push('A');
    assert!(matches!(
        verify_receipt(&tampered, &keys_for(&key)),
        Err(ReceiptError::Jws(_))
    ));
}

#[test]
fn receipt_hash_is_stable_sha256_of_the_jws() {
    let jws = "eyJhbGciOiJFUzI1NiJ9.e30.c2ln";
    let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(jws.as_bytes()));
    assert_eq!(receipt_hash(jws), expected);
    assert_eq!(receipt_hash(jws), receipt_hash(jws));
    assert_eq!(receipt_hash(jws).len(), 43);
    assert_ne!(
        receipt_hash(jws),
        receipt_hash("eyJhbGciOiJFUzI1NiJ9.e30.c2lo")
    );
    // SHA-256 of the empty string (FIPS 180-4 test vector), base64url.
    assert_eq!(
        receipt_hash(""),
        "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    );
}

#[test]
fn args_hash_is_sha256_of_the_serde_json_serialisation() {
    let args = json!({"order_id": "DEMO-1"});
    let serialised = serde_json::to_string(&args).unwrap();
    assert_eq!(serialised, r#"{"order_id":"DEMO-1"}"#);
    let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(serialised.as_bytes()));
    assert_eq!(args_hash(&args), expected);
}

#[test]
fn args_hash_does_not_depend_on_member_order() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[{"d":1,"c":2}],"x":null}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[{"c":2,"d":1}]},"b":1}"#).unwrap();
    assert_eq!(args_hash(&a), args_hash(&b));
    let sorted = r#"{"a":{"x":null,"y":[{"c":2,"d":1}]},"b":1}"#;
    assert_eq!(
        args_hash(&a),
        URL_SAFE_NO_PAD.encode(Sha256::digest(sorted.as_bytes()))
    );
    // Array order is meaning, and is kept.
    assert_ne!(args_hash(&json!([1, 2])), args_hash(&json!([2, 1])));
}
