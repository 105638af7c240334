//! KeySet parsing and key selection (RFC 7517 §5, PACT §3).

use josekit::jwk::KeyPair as _;
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use josekit::jwk::alg::rsa::RsaKeyPair;
use serde_json::{Value, json};

use crate::alg::Alg;
use crate::error::JwksError;
use crate::keys::{KeySet, VerifyingKey};
use crate::test_keys::TestPa;

fn jwk_value(pa: &TestPa) -> Value {
    serde_json::to_value(&pa.public_jwk).expect("jwk json")
}

fn with(mut v: Value, name: &str, value: Value) -> Value {
    v[name] = value;
    v
}

fn parse(doc: &Value) -> Result<KeySet, JwksError> {
    KeySet::from_json(doc.to_string().as_bytes())
}

#[test]
fn usable_keys_are_kept_and_others_skipped() {
    let ec = TestPa::es256("ec-1");
    let rsa = TestPa::rs256("rsa-1");
    let ec_private = {
        let pair = EcKeyPair::generate(EcCurve::P256).expect("ec");
        let mut jwk = pair.to_jwk_key_pair();
        jwk.set_key_id("private");
        serde_json::to_value(&jwk).expect("json")
    };
    let p384 = {
        let pair = EcKeyPair::generate(EcCurve::P384).expect("ec");
        let mut jwk = pair.to_jwk_public_key();
        jwk.set_key_id("p384");
        serde_json::to_value(&jwk).expect("json")
    };
    let rsa_1024 = {
        let pair = RsaKeyPair::generate(1024).expect("rsa");
        let mut jwk = pair.to_jwk_public_key();
        jwk.set_key_id("rsa-1024");
        serde_json::to_value(&jwk).expect("json")
    };
    let doc = json!({"keys": [
        jwk_value(&ec),
        with(jwk_value(&rsa), "use", json!("sig")),
        ec_private,
        p384,
        rsa_1024,
        with(with(jwk_value(&ec), "use", json!("enc")), "kid", json!("enc")),
        with(with(jwk_value(&ec), "alg", json!("RS256")), "kid", json!("alg-mismatch")),
        with(with(jwk_value(&rsa), "alg", json!("PS256")), "kid", json!("ps256")),
        with(with(jwk_value(&ec), "key_ops", json!(["sign"])), "kid", json!("ops")),
        with(with(jwk_value(&ec), "x", json!("AAAA")), "kid", json!("short-x")),
        with(with(jwk_value(&ec), "kid", json!(7)), "alg", json!("ES256")),
        {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "ed"},
        {"kty": "oct", "k": "c2VjcmV0", "kid": "oct"},
        {"kid": "no-kty"},
        "not an object",
        42,
        with(jwk_value(&ec), "alg", json!("ES256")),
    ], "extra": true});
    let set = parse(&doc).expect("set");
    let kids: Vec<_> = set
        .iter()
        .map(|k| (k.kid().map(str::to_owned), k.alg()))
        .collect();
    assert_eq!(
        kids,
        vec![
            (Some("ec-1".to_owned()), Alg::Es256),
            (Some("rsa-1".to_owned()), Alg::Rs256),
        ],
        "the duplicate ec-1 is skipped too"
    );
    assert_eq!(set.len(), 2);
    assert!(!set.is_empty());
}

#[test]
fn only_a_json_object_with_a_keys_array_is_a_jwks() {
    for bad in [
        &b"not json"[..],
        b"[]",
        b"{}",
        b"{\"keys\": {}}",
        b"{\"keys\": null}",
        b"",
    ] {
        assert!(
            matches!(KeySet::from_json(bad), Err(JwksError::Malformed(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let empty = KeySet::from_json(b"{\"keys\": []}").expect("empty set");
    assert!(empty.is_empty());
}

#[test]
fn find_by_kid_and_alg() {
    let ec1 = TestPa::es256("k1");
    let ec2 = TestPa::es256("k2");
    let rsa = TestPa::rs256("k1");
    let set = KeySet::from_keys([ec1.key(), ec2.key(), rsa.key()]);
    let found = set.find(Some("k1"), Alg::Es256).expect("k1 EC");
    assert_eq!((found.kid(), found.alg()), (Some("k1"), Alg::Es256));
    let found = set.find(Some("k1"), Alg::Rs256).expect("k1 RSA");
    assert_eq!(found.alg(), Alg::Rs256);
    assert!(set.find(Some("k2"), Alg::Rs256).is_none());
    assert!(set.find(Some("k3"), Alg::Es256).is_none());
    // Without kid: only when exactly one key has the alg.
    assert!(set.find(None, Alg::Es256).is_none());
    let found = set.find(None, Alg::Rs256).expect("only RSA key");
    assert_eq!(found.kid(), Some("k1"));
}

#[test]
fn two_kid_less_keys_of_one_alg_stay_ambiguous() {
    // Neither is dropped as a "duplicate" of the other: a kid-less token
    // could have been signed by either, so none is chosen for it.
    let without_kid = |pa: &TestPa| {
        let mut v = jwk_value(pa);
        v.as_object_mut().expect("object").remove("kid");
        v
    };
    let a = TestPa::es256("a");
    let b = TestPa::es256("b");
    let set = parse(&json!({"keys": [without_kid(&a), without_kid(&b)]})).expect("set");
    assert_eq!(set.len(), 2);
    assert!(set.find(None, Alg::Es256).is_none());
    let one = parse(&json!({"keys": [without_kid(&a)]})).expect("set");
    assert!(one.find(None, Alg::Es256).is_some());
}

#[test]
fn a_set_of_more_than_32_entries_is_refused_whole() {
    let key = jwk_value(&TestPa::es256("k"));
    let entries = |n: usize| {
        (0..n)
            .map(|i| with(key.clone(), "kid", json!(format!("k{i}"))))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        parse(&json!({"keys": entries(32)})).expect("32 keys").len(),
        32
    );
    assert!(matches!(
        parse(&json!({"keys": entries(33)})),
        Err(JwksError::Malformed(_))
    ));
    // Entries count, usable or not: 400 junk entries are not parsed one by one.
    let junk: Vec<Value> = (0..400).map(|i| json!({"kty": "none", "kid": i})).collect();
    assert!(matches!(
        parse(&json!({"keys": junk})),
        Err(JwksError::Malformed(_))
    ));
}

#[test]
fn private_jwk_is_refused_by_from_jwk() {
    let pair = EcKeyPair::generate(EcCurve::P256).expect("ec");
    assert!(matches!(
        VerifyingKey::from_jwk(&pair.to_jwk_key_pair()),
        Err(JwksError::UnusableKey(_))
    ));
    let key = VerifyingKey::from_jwk(&pair.to_jwk_public_key()).expect("public");
    assert_eq!((key.kid(), key.alg()), (None, Alg::Es256));
}

#[test]
fn debug_output_holds_no_key_material() {
    let ec = TestPa::es256("ec-1");
    let set = KeySet::from_keys([ec.key()]);
    let debug = format!("{set:?}");
    assert!(debug.contains("ec-1"));
    let x = ec
        .public_jwk
        .parameter("x")
        .and_then(Value::as_str)
        .expect("x");
    assert!(!debug.contains(x));
}
