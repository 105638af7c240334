//! Tests of the Provider's signing keys, their JWKs and compact JWS.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use josekit::jws::ES256;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};
use pact_crypto::MasterKey;

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn set_of(keys: &[&ProviderKey]) -> ProviderKeySet {
    let jwks: Vec<Value> = keys.iter().map(|k| k.public_jwk()).collect();
    ProviderKeySet::from_public_jwks(&jwks).unwrap()
}

/// Replace one segment of a compact JWS.
fn with_segment(jws: &str, index: usize, segment: &str) -> String {
    let mut parts: Vec<&str> = jws.split('.').collect();
    parts[index] = segment;
    parts.join(".")
}

#[test]
fn kid_is_the_rfc7638_thumbprint() {
    let key = ProviderKey::generate().unwrap();
    let jwk = key.public_jwk();
    let x = jwk["x"].as_str().unwrap();
    let y = jwk["y"].as_str().unwrap();
    assert_eq!(URL_SAFE_NO_PAD.decode(x).unwrap().len(), 32);
    assert_eq!(URL_SAFE_NO_PAD.decode(y).unwrap().len(), 32);

    // Built independently of the implementation: RFC 7638 §3.2 members
    // crv, kty, x, y in lexicographic order, no whitespace.
    let mut canonical = String::from("{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"");
    canonical.push_str(x);
    canonical.push_str("\",\"y\":\"");
    canonical.push_str(y);
    canonical.push_str("\"}");
    let expected = b64(&Sha256::digest(canonical.as_bytes()));

    assert_eq!(key.kid(), expected);
    assert_eq!(jwk["kid"], expected);
}

#[test]
fn public_jwk_has_exactly_the_public_members() {
    let key = ProviderKey::generate().unwrap();
    let jwk = key.public_jwk();
    let mut members: Vec<&str> = jwk
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    members.sort_unstable();
    assert_eq!(members, ["alg", "crv", "kid", "kty", "use", "x", "y"]);
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    assert_eq!(jwk["alg"], "ES256");
    assert_eq!(jwk["use"], "sig");
}

#[test]
fn pkcs8_round_trip_keeps_the_kid_and_key() {
    let key = ProviderKey::generate().unwrap();
    let der = key.private_pkcs8_der();
    let again = ProviderKey::from_pkcs8_der(&der).unwrap();
    assert_eq!(again.kid(), key.kid());
    assert_eq!(again.public_jwk(), key.public_jwk());

    // A token from the reloaded key verifies with the original public key.
    let jws = again.sign_compact("t", b"{}").unwrap();
    assert_eq!(set_of(&[&key]).verify_compact(&jws, "t").unwrap(), b"{}");
}

#[test]
fn sealed_storage_round_trip() {
    let master = MasterKey::generate().unwrap();
    let key = ProviderKey::generate().unwrap();
    let sealed = master
        .seal(&key.private_pkcs8_der(), key.kid().as_bytes())
        .unwrap();
    let opened = master.open(&sealed, key.kid().as_bytes()).unwrap();
    assert_eq!(
        ProviderKey::from_pkcs8_der(&opened).unwrap().kid(),
        key.kid()
    );
}

#[test]
fn bad_private_keys_are_refused() {
    assert!(matches!(
        ProviderKey::from_pkcs8_der(b"not DER"),
        Err(ProviderKeyError::InvalidPrivateKey(_))
    ));
    let der = ProviderKey::generate().unwrap().private_pkcs8_der();
    assert!(matches!(
        ProviderKey::from_pkcs8_der(&der[..der.len() - 1]),
        Err(ProviderKeyError::InvalidPrivateKey(_))
    ));
    // A P-384 key is a valid PKCS#8 EC key, but not one we sign with.
    let group = openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::SECP384R1).unwrap();
    let p384 = openssl::ec::EcKey::generate(&group).unwrap();
    let p384 = openssl::pkey::PKey::from_ec_key(p384)
        .unwrap()
        .private_key_to_pkcs8()
        .unwrap();
    assert_eq!(
        ProviderKey::from_pkcs8_der(&p384).unwrap_err(),
        ProviderKeyError::InvalidPrivateKey("curve is not P-256")
    );
}

#[test]
fn debug_redacts_the_private_key() {
    let key = ProviderKey::generate().unwrap();
    let shown = format!("{key:?}");
    assert!(shown.contains(key.kid()));
    assert!(!shown.contains("pkcs8"));
    assert!(!shown.contains(&format!("{:?}", key.private_pkcs8_der())));
}

#[test]
fn signed_jws_has_the_documented_header_and_exact_payload() {
    let key = ProviderKey::generate().unwrap();
    let payload = br#"{"b":1,  "a":2}"#;
    let jws = key.sign_compact("at+jwt", payload).unwrap();
    let parts: Vec<&str> = jws.split('.').collect();
    assert_eq!(parts.len(), 3);
    let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
    assert_eq!(
        String::from_utf8(header).unwrap(),
        format!(r#"{{"alg":"ES256","typ":"at+jwt","kid":"{}"}}"#, key.kid())
    );
    assert_eq!(URL_SAFE_NO_PAD.decode(parts[1]).unwrap(), payload);
    assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 64);
}

#[test]
fn signed_jws_verifies_with_the_set_and_with_josekit() {
    let key = ProviderKey::generate().unwrap();
    let payload = br#"{"hello":"world"}"#;
    let jws = key.sign_compact("pact-receipt+jws", payload).unwrap();

    let set = set_of(&[&key]);
    assert_eq!(
        set.verify_compact(&jws, "pact-receipt+jws").unwrap(),
        payload
    );

    let Value::Object(map) = key.public_jwk() else {
        panic!("JWK is an object");
    };
    let verifier = ES256
        .verifier_from_jwk(&Jwk::from_map(map).unwrap())
        .unwrap();
    let (decoded, header) = josekit::jws::deserialize_compact(&jws, &verifier).unwrap();
    assert_eq!(decoded, payload);
    assert_eq!(header.token_type(), Some("pact-receipt+jws"));
    assert_eq!(header.key_id(), Some(key.kid()));
}

#[test]
fn verify_refuses_wrong_typ_and_unknown_key() {
    let key = ProviderKey::generate().unwrap();
    let other = ProviderKey::generate().unwrap();
    let set = set_of(&[&key]);

    let jws = key.sign_compact("at+jwt", b"{}").unwrap();
    assert_eq!(
        set.verify_compact(&jws, "pact-receipt+jws"),
        Err(ProviderKeyError::WrongTyp)
    );
    assert_eq!(
        set.verify_compact(&jws, "AT+JWT"),
        Err(ProviderKeyError::WrongTyp)
    );

    let foreign = other.sign_compact("at+jwt", b"{}").unwrap();
    assert_eq!(
        set.verify_compact(&foreign, "at+jwt"),
        Err(ProviderKeyError::UnknownKey)
    );

    // Another key claiming our kid: found, but the signature fails.
    let header = json!({"alg": "ES256", "typ": "at+jwt", "kid": key.kid()});
    let impostor = with_segment(&foreign, 0, &b64(header.to_string().as_bytes()));
    assert_eq!(
        set.verify_compact(&impostor, "at+jwt"),
        Err(ProviderKeyError::BadSignature)
    );
}

#[test]
fn verify_refuses_hostile_headers() {
    let key = ProviderKey::generate().unwrap();
    let set = set_of(&[&key]);
    let jws = key.sign_compact("at+jwt", b"{}").unwrap();
    let kid = key.kid();
    let cases = [
        (
            json!({"alg": "none", "typ": "at+jwt", "kid": kid}),
            ProviderKeyError::AlgNotAllowed,
        ),
        (
            json!({"alg": "HS256", "typ": "at+jwt", "kid": kid}),
            ProviderKeyError::AlgNotAllowed,
        ),
        (
            json!({"alg": "es256", "typ": "at+jwt", "kid": kid}),
            ProviderKeyError::AlgNotAllowed,
        ),
        (
            json!({"alg": "RS256", "typ": "at+jwt", "kid": kid}),
            ProviderKeyError::AlgNotAllowed,
        ),
        (
            json!({"alg": "ES256", "typ": "at+jwt", "kid": kid, "crit": ["exp"]}),
            ProviderKeyError::CritHeader,
        ),
        (
            json!({"alg": "ES256", "kid": kid}),
            ProviderKeyError::WrongTyp,
        ),
        (
            json!({"alg": "ES256", "typ": "at+jwt"}),
            ProviderKeyError::Malformed("header has no kid"),
        ),
        (
            json!({"alg": "ES256", "typ": "at+jwt", "kid": 7}),
            ProviderKeyError::Malformed("kid is not a string"),
        ),
        (
            json!({"typ": "at+jwt", "kid": kid}),
            ProviderKeyError::Malformed("header has no alg"),
        ),
    ];
    for (header, expected) in cases {
        let token = with_segment(&jws, 0, &b64(header.to_string().as_bytes()));
        assert_eq!(
            set.verify_compact(&token, "at+jwt"),
            Err(expected),
            "{header}"
        );
    }
    // alg none with an empty signature, the classic forgery.
    let none = json!({"alg": "none", "typ": "at+jwt", "kid": kid});
    let token = format!("{}.{}.", b64(none.to_string().as_bytes()), b64(b"{}"));
    assert_eq!(
        set.verify_compact(&token, "at+jwt"),
        Err(ProviderKeyError::AlgNotAllowed)
    );
}

#[test]
fn verify_refuses_malformed_compact_forms() {
    let key = ProviderKey::generate().unwrap();
    let set = set_of(&[&key]);
    let jws = key.sign_compact("at+jwt", b"{}").unwrap();
    let parts: Vec<&str> = jws.split('.').collect();
    let padded_sig = format!("{}.{}.{}=", parts[0], parts[1], parts[2]);
    let cases = [
        String::new(),
        "a.b".to_owned(),
        format!("{jws}.extra"),
        format!("{}=.{}.{}", parts[0], parts[1], parts[2]),
        with_segment(&jws, 0, &b64(b"[1,2]")),
        with_segment(&jws, 0, &b64(b"not json")),
        padded_sig,
    ];
    for token in cases {
        assert!(
            matches!(
                set.verify_compact(&token, "at+jwt"),
                Err(ProviderKeyError::Malformed(_))
            ),
            "{token}"
        );
    }
    // Wrong signature length, or an all-zero signature, never verifies.
    for sig in [b64(&[0u8; 63]), b64(&[0u8; 64]), b64(&[0u8; 65])] {
        let token = with_segment(&jws, 2, &sig);
        assert_eq!(
            set.verify_compact(&token, "at+jwt"),
            Err(ProviderKeyError::BadSignature)
        );
    }
}

#[test]
fn key_set_publishes_only_public_members_and_rejects_bad_jwks() {
    let a = ProviderKey::generate().unwrap();
    let b = ProviderKey::generate().unwrap();
    let mut extra = a.public_jwk();
    extra["x5u"] = json!("https://attacker.example/cert");
    let set = ProviderKeySet::from_public_jwks(&[extra, b.public_jwk()]).unwrap();
    assert_eq!(
        set.jwks_document(),
        json!({"keys": [a.public_jwk(), b.public_jwk()]})
    );

    // Tokens of both keys verify: an old key still published keeps working.
    for key in [&a, &b] {
        let jws = key.sign_compact("t", b"1").unwrap();
        assert_eq!(set.verify_compact(&jws, "t").unwrap(), b"1");
    }

    assert_eq!(
        ProviderKeySet::from_public_jwks(&[]).unwrap_err(),
        ProviderKeyError::NoKeys
    );
    let mut no_kid = a.public_jwk();
    no_kid.as_object_mut().unwrap().remove("kid");
    let mut private = a.public_jwk();
    private["d"] = json!(b64(&[1u8; 32]));
    let mut p384 = a.public_jwk();
    p384["crv"] = json!("P-384");
    let mut encryption = a.public_jwk();
    encryption["use"] = json!("enc");
    let cases = [
        (vec![json!("not an object")], 0),
        (vec![no_kid], 0),
        (vec![b.public_jwk(), private], 1),
        (vec![p384], 0),
        (vec![encryption], 0),
        (vec![a.public_jwk(), a.public_jwk()], 1),
    ];
    for (jwks, bad_index) in cases {
        match ProviderKeySet::from_public_jwks(&jwks) {
            Err(ProviderKeyError::InvalidJwk { index, .. }) => assert_eq!(index, bad_index),
            other => panic!("expected InvalidJwk for {jwks:?}, got {other:?}"),
        }
    }
}
