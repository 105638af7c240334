//! Cost of the Provider's own signatures on the request path: minting a
//! delegation token (PACT §5.3), checking one on every delegated send (PACT
//! §5.5), and signing the receipt of every delegated reply (PACT §5.6).

#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use pact_crypto::MasterKey;
use pact_jose::{
    ProviderKey, ProviderKeySet, args_hash, sign_delegation_token, sign_receipt,
    verify_delegation_token, verify_receipt,
};
use pact_proto::oauth::{DelegationClaims, ReceiptAction, ReceiptClaims};
use serde_json::json;

const ISS: &str = "https://shop.example.com";
const AUD: &str = "https://shop.example.com/a2a";
const PA: &str = "https://pa.example.com";
const NOW: i64 = 1_750_000_000;

fn delegation_claims() -> DelegationClaims {
    DelegationClaims {
        iss: ISS.into(),
        aud: AUD.into(),
        sub: "user-8d1c6f0e".into(),
        client_id: PA.into(),
        scope: "orders:read orders:cancel".into(),
        grant_id: "5b0f3e0c-9a8e-4f43-9d55-0e7b1c2d3a4f".into(),
        iat: NOW,
        exp: NOW + 900,
        jti: "0f6c2b8e-2a55-4a11-9d1e-6b0c3f7a9e42".into(),
        authorization_details: None,
    }
}

fn receipt_claims() -> ReceiptClaims {
    ReceiptClaims {
        grant_id: "5b0f3e0c-9a8e-4f43-9d55-0e7b1c2d3a4f".into(),
        user: "user-8d1c6f0e".into(),
        pa: PA.into(),
        brand: AUD.into(),
        scopes_used: vec!["orders:read".into()],
        actions: vec![ReceiptAction {
            tool: "get_order".into(),
            args_hash: Some(args_hash(&json!({"order_id": "DEMO-1"}))),
            ..Default::default()
        }],
        refused: vec![],
        ts: "2026-01-01T00:00:00Z".into(),
        prev: Some("47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU".into()),
        extra: Default::default(),
    }
}

fn bench(c: &mut Criterion) {
    let key = ProviderKey::generate().expect("key");
    let old = ProviderKey::generate().expect("old key");
    // Two published keys, as during a rotation.
    let keys =
        ProviderKeySet::from_public_jwks(&[old.public_jwk(), key.public_jwk()]).expect("key set");
    let claims = delegation_claims();
    let token = sign_delegation_token(&key, &claims).expect("token");
    verify_delegation_token(&token, &keys, ISS, AUD, PA, NOW).expect("token verifies");

    c.bench_function("sign_delegation_token", |b| {
        b.iter(|| sign_delegation_token(black_box(&key), black_box(&claims)))
    });
    // First use: a token signed outside the timing, verified in full.
    let mut n = 0u64;
    c.bench_function("verify_delegation_token, first use", |b| {
        b.iter_batched(
            || {
                n += 1;
                let mut claims = claims.clone();
                claims.jti = format!("bench-{n}");
                sign_delegation_token(&key, &claims).expect("token")
            },
            |t| verify_delegation_token(black_box(&t), &keys, ISS, AUD, PA, NOW),
            BatchSize::SmallInput,
        )
    });
    // The same token on every turn: found in the memo of verified signatures.
    c.bench_function("verify_delegation_token, seen before", |b| {
        b.iter(|| verify_delegation_token(black_box(&token), &keys, ISS, AUD, PA, NOW))
    });

    let rc = receipt_claims();
    c.bench_function("sign_receipt", |b| {
        b.iter(|| sign_receipt(black_box(&key), black_box(rc.clone())))
    });
    let receipt = sign_receipt(&key, rc.clone()).expect("receipt");
    // The same receipt each time: after the first, a memo hit.
    c.bench_function("verify_receipt, seen before", |b| {
        b.iter(|| verify_receipt(black_box(&receipt), &keys))
    });

    // Loading a stored signing key at start-up or rotation: open + parse.
    let master = MasterKey::generate().expect("master key");
    let sealed = master
        .seal(&key.private_pkcs8_der(), key.kid().as_bytes())
        .expect("seal");
    c.bench_function("open_and_load_provider_key", |b| {
        b.iter(|| {
            let der = master
                .open(black_box(&sealed), key.kid().as_bytes())
                .expect("open");
            ProviderKey::from_pkcs8_der(&der)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
