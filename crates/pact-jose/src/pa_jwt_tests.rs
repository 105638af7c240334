//! PA-JWT parsing and verification, with the attacks PACT §3 and RFC 8725 warn about.

use josekit::jws::HS256;
use serde_json::{Value, json};

use crate::alg::Alg;
use crate::error::PaJwtError;
use crate::keys::KeySet;
use crate::pa_jwt::{MAX_ISSUER_LEN, PaJwtRules, parse_pa_jwt};
use crate::test_keys::{AUD, ISS, NOW, TestPa, b64, good_claims, sign_with, signing_input};

fn rules() -> PaJwtRules {
    PaJwtRules::new(AUD)
}

/// Parse and verify `token` with `pa`'s registered key.
fn check(pa: &TestPa, token: &str) -> Result<crate::PaClaims, PaJwtError> {
    let parsed = parse_pa_jwt(token, &rules())?;
    parsed.verify(&pa.key(), &rules(), NOW)
}

/// A token from `pa` with one claim replaced (or removed when `value` is null).
fn with_claim(pa: &TestPa, name: &str, value: Value) -> String {
    let mut claims = good_claims();
    if let Value::Object(map) = &mut claims {
        if value.is_null() {
            map.remove(name);
        } else {
            map.insert(name.to_owned(), value);
        }
    }
    pa.token(&pa.header(), &claims)
}

#[test]
fn valid_es256_token_passes() {
    let pa = TestPa::es256("ec-1");
    let token = pa.token(&pa.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(parsed.issuer(), ISS);
    assert_eq!(parsed.kid(), Some("ec-1"));
    assert_eq!(parsed.alg(), Alg::Es256);
    let claims = parsed.verify(&pa.key(), &rules(), NOW).expect("verify");
    assert_eq!(claims.iss, ISS);
    assert_eq!(claims.sub, "user-123");
    assert_eq!(claims.iat, NOW);
    assert_eq!(claims.exp, NOW + 300);
    assert_eq!(claims.jti.as_deref(), Some("j-1"));
}

#[test]
fn valid_rs256_token_passes() {
    let pa = TestPa::rs256("rsa-1");
    let token = pa.token(&pa.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(parsed.alg(), Alg::Rs256);
    let claims = parsed.verify(&pa.key(), &rules(), NOW).expect("verify");
    assert_eq!(claims.sub, "user-123");
}

#[test]
fn token_without_kid_or_jti_passes() {
    let pa = TestPa::es256("ec-1");
    let mut claims = good_claims();
    if let Value::Object(map) = &mut claims {
        map.remove("jti");
    }
    let token = pa.token(&json!({"alg": "ES256", "typ": "JWT"}), &claims);
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(parsed.kid(), None);
    let claims = parsed.verify(&pa.key(), &rules(), NOW).expect("verify");
    assert_eq!(claims.jti, None);
}

#[test]
fn alg_none_is_rejected() {
    for alg in ["none", "None", "NONE"] {
        let token = format!("{}.", signing_input(&json!({"alg": alg}), &good_claims()));
        assert_eq!(
            parse_pa_jwt(&token, &rules()).err(),
            Some(PaJwtError::AlgNotAllowed),
            "{alg}"
        );
    }
}

#[test]
fn other_algs_and_bad_alg_types_are_rejected() {
    let pa = TestPa::es256("ec-1");
    for header in [
        json!({"alg": "ES384"}),
        json!({"alg": "PS256"}),
        json!({"alg": "es256"}),
        json!({"alg": "EdDSA"}),
        json!({"alg": ["ES256"]}),
        json!({"alg": null}),
    ] {
        let token = pa.token(&header, &good_claims());
        assert_eq!(
            parse_pa_jwt(&token, &rules()).err(),
            Some(PaJwtError::AlgNotAllowed),
            "{header}"
        );
    }
    let token = pa.token(&json!({"kid": "ec-1"}), &good_claims());
    assert!(matches!(
        parse_pa_jwt(&token, &rules()),
        Err(PaJwtError::Malformed(_))
    ));
}

#[test]
fn hs256_signed_with_the_public_key_is_rejected() {
    // The classic key-confusion attack (RFC 8725 §2.1): HMAC keyed with the
    // PA's public key, which anyone can download.
    for pa in [TestPa::rs256("rsa-1"), TestPa::es256("ec-1")] {
        for secret in [
            pa.public_pem.clone(),
            pa.public_jwk.to_string().into_bytes(),
        ] {
            let hmac = HS256.signer_from_bytes(&secret).expect("hmac signer");
            let token = sign_with(
                &hmac,
                &json!({"alg": "HS256", "kid": pa.public_jwk.key_id()}),
                &good_claims(),
            );
            assert_eq!(
                parse_pa_jwt(&token, &rules()).err(),
                Some(PaJwtError::AlgNotAllowed)
            );
        }
    }
}

#[test]
fn rs256_token_against_ec_key_fails() {
    let rsa = TestPa::rs256("k");
    let ec = TestPa::es256("k");
    let token = rsa.token(&rsa.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(
        parsed.verify(&ec.key(), &rules(), NOW).err(),
        Some(PaJwtError::KeyAlgMismatch)
    );
    // And the other way round.
    let token = ec.token(&ec.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(
        parsed.verify(&rsa.key(), &rules(), NOW).err(),
        Some(PaJwtError::KeyAlgMismatch)
    );
}

#[test]
fn unknown_kid_finds_no_key() {
    let pa = TestPa::es256("ec-1");
    let set = KeySet::from_keys([pa.key()]);
    let token = pa.token(&json!({"alg": "ES256", "kid": "ec-2"}), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert!(set.find(parsed.kid(), parsed.alg()).is_none());
    // Verifying against a key with another kid is refused too.
    assert_eq!(
        parsed.verify(&pa.key(), &rules(), NOW).err(),
        Some(PaJwtError::KidMismatch)
    );
}

#[test]
fn audience_rules() {
    let pa = TestPa::es256("ec-1");
    let cases = [
        (Value::Null, PaJwtError::Claim("aud is missing")),
        (json!("someone-else"), PaJwtError::AudienceMismatch),
        (json!(""), PaJwtError::AudienceMismatch),
        (
            json!([AUD, "other"]),
            PaJwtError::Claim("aud is not a single string"),
        ),
        (
            json!([AUD]),
            PaJwtError::Claim("aud is not a single string"),
        ),
        (
            json!({"aud": AUD}),
            PaJwtError::Claim("aud is not a single string"),
        ),
    ];
    for (aud, want) in cases {
        let token = with_claim(&pa, "aud", aud.clone());
        assert_eq!(check(&pa, &token).err(), Some(want), "aud {aud}");
    }
}

#[test]
fn an_empty_configured_audience_matches_nothing() {
    let pa = TestPa::es256("ec-1");
    let token = with_claim(&pa, "aud", json!(""));
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    assert_eq!(
        parsed.verify(&pa.key(), &PaJwtRules::new(""), NOW).err(),
        Some(PaJwtError::AudienceMismatch)
    );
}

#[test]
fn iat_in_the_future_beyond_skew_is_rejected() {
    let pa = TestPa::es256("ec-1");
    let at = |iat: i64| {
        let mut claims = good_claims();
        claims["iat"] = json!(iat);
        claims["exp"] = json!(iat + 300);
        pa.token(&pa.header(), &claims)
    };
    assert!(check(&pa, &at(NOW + 30)).is_ok());
    assert_eq!(
        check(&pa, &at(NOW + 31)).err(),
        Some(PaJwtError::IssuedInFuture)
    );
}

#[test]
fn expiry_rules() {
    let pa = TestPa::es256("ec-1");
    let token = |iat: i64, exp: i64| {
        let mut claims = good_claims();
        claims["iat"] = json!(iat);
        claims["exp"] = json!(exp);
        pa.token(&pa.header(), &claims)
    };
    // Expired beyond skew.
    assert_eq!(
        check(&pa, &token(NOW - 400, NOW - 100)).err(),
        Some(PaJwtError::Expired)
    );
    assert_eq!(
        check(&pa, &token(NOW - 300, NOW - 30)).err(),
        Some(PaJwtError::Expired)
    );
    // Expired, but within skew.
    assert!(check(&pa, &token(NOW - 300, NOW - 29)).is_ok());
    // Lifetime.
    assert!(check(&pa, &token(NOW, NOW + 300)).is_ok());
    assert_eq!(
        check(&pa, &token(NOW, NOW + 301)).err(),
        Some(PaJwtError::LifetimeTooLong)
    );
    assert_eq!(
        check(&pa, &token(NOW, NOW)).err(),
        Some(PaJwtError::Claim("exp is not after iat"))
    );
    assert_eq!(
        check(&pa, &token(NOW, NOW - 10)).err(),
        Some(PaJwtError::Claim("exp is not after iat"))
    );
    // Extreme values cannot overflow into a pass.
    assert_eq!(
        check(&pa, &token(i64::MIN, i64::MAX)).err(),
        Some(PaJwtError::LifetimeTooLong)
    );
}

#[test]
fn time_claims_must_be_present_integers() {
    let pa = TestPa::es256("ec-1");
    let cases = [
        ("iat", Value::Null, "iat is missing"),
        ("exp", Value::Null, "exp is missing"),
        ("iat", json!("1750000000"), "iat is not an integer"),
        ("exp", json!(1_750_000_100.5), "exp is not an integer"),
        ("exp", json!(u64::MAX), "exp is not an integer"),
        ("nbf", json!("now"), "nbf is not an integer"),
    ];
    for (name, value, why) in cases {
        let token = with_claim(&pa, name, value);
        assert_eq!(
            check(&pa, &token).err(),
            Some(PaJwtError::Claim(why)),
            "{why}"
        );
    }
}

#[test]
fn nbf_rules() {
    let pa = TestPa::es256("ec-1");
    assert!(check(&pa, &with_claim(&pa, "nbf", json!(NOW + 30))).is_ok());
    assert_eq!(
        check(&pa, &with_claim(&pa, "nbf", json!(NOW + 31))).err(),
        Some(PaJwtError::NotYetValid)
    );
}

#[test]
fn subject_rules() {
    let pa = TestPa::es256("ec-1");
    let cases = [
        (Value::Null, "sub is missing"),
        (json!(""), "sub is empty"),
        (json!(42), "sub is not a string"),
        (json!("u\u{0}"), "sub has a control character"),
        (json!("u\n1"), "sub has a control character"),
    ];
    for (sub, why) in cases {
        let token = with_claim(&pa, "sub", sub);
        assert_eq!(
            check(&pa, &token).err(),
            Some(PaJwtError::Claim(why)),
            "{why}"
        );
    }
}

#[test]
fn issuer_and_jti_rules() {
    let pa = TestPa::es256("ec-1");
    let cases = [
        (Value::Null, PaJwtError::Claim("iss is missing")),
        (
            json!(""),
            PaJwtError::Claim("iss is not a non-empty string"),
        ),
        (
            json!(["a"]),
            PaJwtError::Claim("iss is not a non-empty string"),
        ),
        (
            json!("https://pa.example/\u{0}"),
            PaJwtError::Claim("iss has a control character"),
        ),
        (
            json!(format!("https://pa.example/{}", "a".repeat(2048))),
            PaJwtError::Claim("iss is too long"),
        ),
    ];
    for (iss, want) in cases {
        let token = with_claim(&pa, "iss", iss);
        assert_eq!(parse_pa_jwt(&token, &rules()).err(), Some(want));
    }
    // The longest issuer the agents table holds is read.
    let longest = format!("https://pa.example/{}", "a".repeat(2048 - 19));
    assert_eq!(longest.len(), MAX_ISSUER_LEN);
    let token = with_claim(&pa, "iss", json!(longest));
    assert!(parse_pa_jwt(&token, &rules()).is_ok());
    let token = with_claim(&pa, "jti", json!(7));
    assert_eq!(
        check(&pa, &token).err(),
        Some(PaJwtError::Claim("jti is not a string"))
    );
}

#[test]
fn oversized_token_is_rejected_before_decoding() {
    let pa = TestPa::es256("ec-1");
    let mut claims = good_claims();
    claims["pad"] = json!("x".repeat(9000));
    let token = pa.token(&pa.header(), &claims);
    assert_eq!(
        parse_pa_jwt(&token, &rules()).err(),
        Some(PaJwtError::TooLarge)
    );
    // The cap is checked on raw length: even garbage is refused as too large.
    let garbage = "!".repeat(8193);
    assert_eq!(
        parse_pa_jwt(&garbage, &rules()).err(),
        Some(PaJwtError::TooLarge)
    );
    // A token exactly at the cap is accepted.
    let small = pa.token(&pa.header(), &good_claims());
    let mut exact = rules();
    exact.max_token_bytes = small.len();
    assert!(parse_pa_jwt(&small, &exact).is_ok());
    exact.max_token_bytes = small.len() - 1;
    assert_eq!(
        parse_pa_jwt(&small, &exact).err(),
        Some(PaJwtError::TooLarge)
    );
}

#[test]
fn tampered_signature_fails() {
    for pa in [TestPa::es256("ec-1"), TestPa::rs256("rsa-1")] {
        let token = pa.token(&pa.header(), &good_claims());
        let (input, sig) = token.rsplit_once('.').expect("three segments");
        let mut raw =
            base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, sig)
                .expect("sig");
        raw[5] ^= 0x01;
        let tampered = format!("{input}.{}", b64(&raw));
        assert_eq!(check(&pa, &tampered).err(), Some(PaJwtError::BadSignature));
        // A truncated signature is a bad signature too.
        let short = format!("{input}.{}", b64(&raw[..raw.len() - 1]));
        assert_eq!(check(&pa, &short).err(), Some(PaJwtError::BadSignature));
    }
}

#[test]
fn tampered_payload_fails() {
    let pa = TestPa::es256("ec-1");
    let token = pa.token(&pa.header(), &good_claims());
    let sig = token.rsplit('.').next().expect("sig");
    let mut claims = good_claims();
    claims["sub"] = json!("someone-else");
    let forged = format!("{}.{sig}", signing_input(&pa.header(), &claims));
    assert_eq!(check(&pa, &forged).err(), Some(PaJwtError::BadSignature));
}

#[test]
fn token_named_keys_are_ignored() {
    // jku/x5u/jwk/x5c point at an attacker's key: the token still verifies
    // only with the registered key.
    let registered = TestPa::es256("ec-1");
    let attacker = TestPa::es256("ec-1");
    let header = json!({
        "alg": "ES256",
        "kid": "ec-1",
        "jku": "https://evil.example/jwks.json",
        "x5u": "https://evil.example/cert.pem",
        "jwk": attacker.public_jwk,
    });
    let forged = attacker.token(&header, &good_claims());
    assert_eq!(
        check(&registered, &forged).err(),
        Some(PaJwtError::BadSignature)
    );
    // Signed by the registered key, the same header verifies: jku is inert.
    let genuine = registered.token(&header, &good_claims());
    assert!(check(&registered, &genuine).is_ok());
}

#[test]
fn crit_header_is_rejected() {
    let pa = TestPa::es256("ec-1");
    for crit in [json!(["exp"]), json!([]), json!("b64")] {
        let mut header = pa.header();
        header["crit"] = crit;
        header["exp"] = json!(1);
        let token = pa.token(&header, &good_claims());
        assert_eq!(
            parse_pa_jwt(&token, &rules()).err(),
            Some(PaJwtError::CritHeader)
        );
    }
}

#[test]
fn malformed_compact_forms_are_rejected() {
    let pa = TestPa::es256("ec-1");
    let good = pa.token(&pa.header(), &good_claims());
    let (input, sig) = good.rsplit_once('.').expect("three segments");
    let payload_b64 = b64(good_claims().to_string().as_bytes());
    let cases: Vec<String> = vec![
        String::new(),
        "abc".to_owned(),
        input.to_owned(),
        format!("{good}.{sig}"),
        format!("{good}."),
        format!("{input}.{sig}.x.y"),
        format!("{input}."),
        format!("{input}.{sig}="),
        // Standard-alphabet characters (RFC 4648 §4) are not base64url.
        format!("{input}.+{}", &sig[1..]),
        format!("{input}./{}", &sig[1..]),
        format!("{}.{payload_b64}.{sig}", b64(b"[]")),
        format!("{}.{payload_b64}.{sig}", b64(b"\"ES256\"")),
        format!("{}.{payload_b64}.{sig}", b64(b"{not json")),
        format!(
            "{}=.{payload_b64}.{sig}",
            b64(pa.header().to_string().as_bytes())
        ),
        format!(" {good}"),
        format!(
            "{}.{}.{sig}",
            b64(pa.header().to_string().as_bytes()),
            b64(b"[1]")
        ),
        format!(
            "{}.{}.{sig}",
            b64(pa.header().to_string().as_bytes()),
            b64(b"null")
        ),
    ];
    for token in &cases {
        let got = parse_pa_jwt(token, &rules());
        assert!(
            matches!(got, Err(PaJwtError::Malformed(_))),
            "{token:?}: {got:?}"
        );
    }
    let token = pa.token(&json!({"alg": "ES256", "kid": 5}), &good_claims());
    assert_eq!(
        parse_pa_jwt(&token, &rules()).err(),
        Some(PaJwtError::Malformed("kid is not a string"))
    );
}

#[test]
fn errors_and_debug_never_show_the_token() {
    let pa = TestPa::es256("ec-1");
    let token = pa.token(&pa.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    let sig = token.rsplit('.').next().expect("sig");
    let debug = format!("{parsed:?}");
    assert!(!debug.contains(sig));
    assert!(!debug.contains(&token[..20]));
    let err = parse_pa_jwt(&format!("{token}.x"), &rules()).expect_err("malformed");
    assert!(!err.to_string().contains(sig));
}

/// A verification is remembered (`signature_memo`), but only as "these bytes
/// verify under this key": the claims are checked again at every use, another
/// key with the same `kid` does not inherit it, and a changed signature is
/// verified afresh.
#[test]
fn a_remembered_verification_is_bound_to_its_key_and_rechecks_the_claims() {
    let pa = TestPa::es256("ec-memo");
    let token = pa.token(&pa.header(), &good_claims());
    let parsed = parse_pa_jwt(&token, &rules()).expect("parse");
    parsed.verify(&pa.key(), &rules(), NOW).expect("first use");
    parsed.verify(&pa.key(), &rules(), NOW).expect("second use");

    // Later than exp + skew: the remembered signature does not make it valid.
    assert_eq!(
        parsed.verify(&pa.key(), &rules(), NOW + 300 + 31).err(),
        Some(PaJwtError::Expired)
    );
    // Another key under the same kid (a rotated or forged JWKS entry).
    let other = TestPa::es256("ec-memo");
    assert_eq!(
        parsed.verify(&other.key(), &rules(), NOW).err(),
        Some(PaJwtError::BadSignature)
    );
    // ECDSA signatures are malleable: any other signature bytes are checked.
    let (head, sig) = token.rsplit_once('.').expect("three segments");
    let mut raw = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, sig)
        .expect("base64");
    raw[40] ^= 1;
    let tampered = format!("{head}.{}", b64(&raw));
    let parsed = parse_pa_jwt(&tampered, &rules()).expect("parse");
    assert_eq!(
        parsed.verify(&pa.key(), &rules(), NOW).err(),
        Some(PaJwtError::BadSignature)
    );
}
