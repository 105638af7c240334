//! Cost of the PA-JWT hot path, and of parsing a JWKS — the reason parsed
//! keys are cached rather than rebuilt per request. A token's first use is
//! verified in full; a later use of the same bytes is found in the memo of
//! verified signatures (`signature_memo.rs`), so both are measured.

#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use josekit::jwk::alg::rsa::RsaKeyPair;
use josekit::jwk::{Jwk, KeyPair as _};
use josekit::jws::{ES256, JwsSigner, RS256};
use pact_jose::{Alg, KeySet, PaJwtRules, VerifyingKey, parse_pa_jwt};
use serde_json::json;

const AUD: &str = "pactd-audience";
const NOW: i64 = 1_750_000_000;

fn token(signer: &dyn JwsSigner, alg: &str, kid: &str) -> String {
    token_with_jti(signer, alg, kid, "0f6c2b8e-2a55-4a11-9d1e-6b0c3f7a9e42")
}

fn token_with_jti(signer: &dyn JwsSigner, alg: &str, kid: &str, jti: &str) -> String {
    let header = json!({"alg": alg, "kid": kid, "typ": "JWT"});
    let claims = json!({
        "iss": "https://pa.example.com",
        "sub": "user-8d1c6f0e",
        "aud": AUD,
        "iat": NOW,
        "exp": NOW + 300,
        "jti": jti,
    });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = signer.sign(input.as_bytes()).expect("sign");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

fn with_kid(mut jwk: Jwk, kid: &str) -> Jwk {
    jwk.set_key_id(kid);
    jwk
}

fn bench(c: &mut Criterion) {
    let rules = PaJwtRules::new(AUD);

    let ec = EcKeyPair::generate(EcCurve::P256).expect("ec");
    let ec_signer = ES256
        .signer_from_jwk(&with_kid(ec.to_jwk_key_pair(), "ec-1"))
        .expect("ec signer");
    let ec_public = with_kid(ec.to_jwk_public_key(), "ec-1");
    let rsa = RsaKeyPair::generate(2048).expect("rsa");
    let rsa_signer = RS256
        .signer_from_jwk(&with_kid(rsa.to_jwk_key_pair(), "rsa-1"))
        .expect("rsa signer");
    let rsa_public = with_kid(rsa.to_jwk_public_key(), "rsa-1");

    let jwks = json!({"keys": [ec_public, rsa_public]}).to_string();
    let set = KeySet::from_json(jwks.as_bytes()).expect("jwks");
    let ec_key: Arc<VerifyingKey> = set.find(Some("ec-1"), Alg::Es256).expect("ec key");
    let rsa_key: Arc<VerifyingKey> = set.find(Some("rsa-1"), Alg::Rs256).expect("rsa key");
    let ec_token = token(&ec_signer, "ES256", "ec-1");
    let rsa_token = token(&rsa_signer, "RS256", "rsa-1");

    // A fresh token per iteration (signed outside the timing): a full verify.
    let mut n = 0u64;
    let mut fresh = |signer: &dyn JwsSigner, alg: &str, kid: &str| {
        n += 1;
        token_with_jti(signer, alg, kid, &format!("bench-{n}"))
    };
    c.bench_function("es256 parse+verify, first use (cached key)", |b| {
        b.iter_batched(
            || fresh(&ec_signer, "ES256", "ec-1"),
            |t| {
                let parsed = parse_pa_jwt(black_box(&t), &rules).expect("parse");
                parsed.verify(&ec_key, &rules, NOW).expect("verify")
            },
            BatchSize::SmallInput,
        )
    });
    c.bench_function("rs256 parse+verify, first use (cached key)", |b| {
        b.iter_batched(
            || fresh(&rsa_signer, "RS256", "rsa-1"),
            |t| {
                let parsed = parse_pa_jwt(black_box(&t), &rules).expect("parse");
                parsed.verify(&rsa_key, &rules, NOW).expect("verify")
            },
            BatchSize::SmallInput,
        )
    });
    // The same token again: the signature is found in the memo.
    c.bench_function("es256 parse+verify, seen before", |b| {
        b.iter(|| {
            let parsed = parse_pa_jwt(black_box(&ec_token), &rules).expect("parse");
            parsed.verify(&ec_key, &rules, NOW).expect("verify")
        })
    });
    c.bench_function("rs256 parse+verify, seen before", |b| {
        b.iter(|| {
            let parsed = parse_pa_jwt(black_box(&rsa_token), &rules).expect("parse");
            parsed.verify(&rsa_key, &rules, NOW).expect("verify")
        })
    });
    c.bench_function("KeySet::from_json (EC + RSA JWKS)", |b| {
        b.iter(|| KeySet::from_json(black_box(jwks.as_bytes())).expect("jwks"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
