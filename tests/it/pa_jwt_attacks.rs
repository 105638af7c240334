//! PACT §3 attacks: each must get the bare 401 and change nothing.

use josekit::jwk::KeyPair;
use josekit::jws::{HS256, JwsSigner};
use pact_tests::TestApp;
use pact_tests::pa::{PaKey, TestPa, b64, compact, now};
use serde_json::{Value, json};

use crate::assert_bare_401;

const ISS: &str = "https://pa.example";

async fn setup() -> (TestApp, TestPa) {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    (app, pa)
}

/// Sends "hello" with `token`; asserts the bare 401 and that no conversation was written.
async fn refused(app: &TestApp, token: &str) {
    let res = app
        .send(
            "demo",
            token,
            &uuid::Uuid::new_v4().to_string(),
            "hello",
            None,
        )
        .await;
    assert_bare_401(res).await;
    let n: i64 = sqlx::query_scalar("select count(*) from conversations")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(n, 0, "a refused request wrote a conversation");
}

#[tokio::test]
async fn a_valid_token_is_accepted_as_the_baseline() {
    let (app, pa) = setup().await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m1", "hello", None)
        .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn alg_none_in_any_spelling_is_refused() {
    let (app, pa) = setup().await;
    for alg in ["none", "None", "NONE"] {
        let header = json!({"alg": alg, "typ": "JWT", "kid": "k1"});
        let payload = pa.claims("u1", app.audience());
        let token = format!(
            "{}.{}.",
            b64(header.to_string().as_bytes()),
            b64(payload.to_string().as_bytes())
        );
        refused(&app, &token).await;
    }
}

#[tokio::test]
async fn hs256_signed_with_the_pas_public_key_is_refused() {
    let (app, pa) = setup().await;
    let PaKey::Ec { pair, .. } = pa.current_key() else {
        unreachable!()
    };
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": "k1"});
    let payload = pa.claims("u1", app.audience());
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(payload.to_string().as_bytes())
    );
    for secret in [
        pair.to_pem_public_key(),
        pair.to_der_public_key(),
        pa.current_key().public_jwk().to_string().into_bytes(),
    ] {
        let sig = HS256
            .signer_from_bytes(&secret)
            .unwrap()
            .sign(input.as_bytes())
            .unwrap();
        refused(&app, &format!("{input}.{}", b64(&sig))).await;
    }
}

#[tokio::test]
async fn an_rs256_token_against_the_registered_ec_key_is_refused() {
    let (app, pa) = setup().await;
    let rsa = PaKey::new_rsa("k1"); // same kid as the registered EC key
    let token = compact(
        &json!({"alg": "RS256", "kid": "k1"}),
        &pa.claims("u1", app.audience()),
        &rsa,
    );
    refused(&app, &token).await;
}

#[tokio::test]
async fn an_unknown_kid_signed_with_a_foreign_key_is_refused() {
    let (app, pa) = setup().await;
    let foreign = PaKey::new_ec("evil");
    let token = compact(
        &json!({"alg": "ES256", "kid": "evil"}),
        &pa.claims("u1", app.audience()),
        &foreign,
    );
    refused(&app, &token).await;
    // And a foreign key under the registered kid.
    let foreign = PaKey::new_ec("k1");
    let token = compact(
        &json!({"alg": "ES256", "kid": "k1"}),
        &pa.claims("u1", app.audience()),
        &foreign,
    );
    refused(&app, &token).await;
}

#[tokio::test]
async fn aud_missing_wrong_array_or_the_interface_url_is_refused() {
    let (app, pa) = setup().await;
    let aud = app.audience().to_owned();
    let iface = app.iface("demo");
    type Edit = Box<dyn Fn(&mut Value)>;
    let edits: Vec<Edit> = vec![
        Box::new(|c| {
            c.as_object_mut().unwrap().remove("aud");
        }),
        Box::new(|c| c["aud"] = json!("https://someone-else.example/a2a")),
        Box::new(move |c| c["aud"] = json!([aud.clone()])),
        Box::new(|c| c["aud"] = json!(["https://x.example", "https://y.example"])),
        Box::new(move |c| c["aud"] = json!(iface.clone())),
        Box::new(|c| c["aud"] = json!(null)),
    ];
    for edit in edits {
        refused(&app, &pa.token_with("u1", app.audience(), |_, c| edit(c))).await;
    }
}

#[tokio::test]
async fn time_claims_are_enforced_with_30_seconds_of_skew() {
    let (app, pa) = setup().await;
    let t = now();
    // iat 40 s ahead (beyond the 30 s skew with room for a slow machine:
    // the server reads its clock after this test read `t`)
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c["iat"] = json!(t + 40);
            c["exp"] = json!(t + 120);
        }),
    )
    .await;
    // exp in the past (beyond skew)
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c["iat"] = json!(t - 200);
            c["exp"] = json!(t - 35);
        }),
    )
    .await;
    // exp − iat > 300
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c["iat"] = json!(t);
            c["exp"] = json!(t + 301);
        }),
    )
    .await;
    // missing iat, missing exp
    for field in ["iat", "exp"] {
        refused(
            &app,
            &pa.token_with("u1", app.audience(), |_, c| {
                c.as_object_mut().unwrap().remove(field);
            }),
        )
        .await;
    }
    // Within the skew is accepted: iat 25 s ahead.
    let ok = pa.token_with("u1", app.audience(), |_, c| {
        c["iat"] = json!(t + 25);
        c["exp"] = json!(t + 200);
    });
    assert_eq!(
        app.send("demo", &ok, "m-ok", "hi", None).await.status(),
        200
    );
}

#[tokio::test]
async fn a_missing_or_empty_sub_is_refused() {
    let (app, pa) = setup().await;
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c.as_object_mut().unwrap().remove("sub");
        }),
    )
    .await;
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| c["sub"] = json!("")),
    )
    .await;
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| c["sub"] = json!(42)),
    )
    .await;
}

#[tokio::test]
async fn unknown_and_disabled_issuers_are_refused() {
    let (app, pa) = setup().await;
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c["iss"] = json!("https://unknown.example")
        }),
    )
    .await;
    // Near-misses of the registered issuer are different issuers (exact string match).
    refused(
        &app,
        &pa.token_with("u1", app.audience(), |_, c| {
            c["iss"] = json!("https://pa.example/")
        }),
    )
    .await;
    assert_eq!(
        app.send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
            .await
            .status(),
        200
    );
    pact_db::agents::set_enabled(&app.db, ISS, false)
        .await
        .unwrap();
    app.settle().await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m2", "hi", None)
        .await;
    assert_bare_401(res).await;
}

#[tokio::test]
async fn a_jku_header_is_never_fetched_or_trusted() {
    let (app, pa) = setup().await;
    // The attacker's own JWKS, served and counting.
    let attacker = TestPa::start_with_key("https://attacker.example", PaKey::new_ec("att")).await;
    let key = attacker.current_key();
    let header = json!({"alg": "ES256", "kid": "att", "jku": attacker.jwks_uri, "x5u": attacker.jwks_uri,
                        "jwk": serde_json::from_str::<Value>(&key.public_jwk().to_string()).unwrap()});
    let token = compact(&header, &pa.claims("u1", app.audience()), &key);
    refused(&app, &token).await;
    assert_eq!(
        attacker.jwks_hits(),
        0,
        "pactd fetched a URL named by the token"
    );
}

#[tokio::test]
async fn an_oversized_token_is_refused() {
    let (app, pa) = setup().await;
    let token = pa.token_with("u1", app.audience(), |_, c| {
        c["pad"] = json!("x".repeat(10_000))
    });
    refused(&app, &token).await;
}

#[tokio::test]
async fn a_tampered_signature_or_payload_is_refused() {
    let (app, pa) = setup().await;
    let token = pa.token("u1", app.audience());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    // Flip one signature byte.
    let mut sig = base64_decode(&parts[2]);
    sig[10] ^= 0x01;
    let tampered_sig = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
    refused(&app, &tampered_sig).await;
    // Change the subject, keep the signature.
    let mut claims: Value = serde_json::from_slice(&base64_decode(&parts[1])).unwrap();
    claims["sub"] = json!("someone-else");
    parts[1] = b64(claims.to_string().as_bytes());
    refused(&app, &parts.join(".")).await;
    // Garbage in every shape.
    for junk in [
        "",
        "a.b",
        "a.b.c.d",
        "....",
        "not-a-jwt",
        &format!("{token}."),
    ] {
        refused(&app, junk).await;
    }
}

#[tokio::test]
async fn rs256_pas_are_accepted_too() {
    let app = TestApp::spawn().await;
    let pa = TestPa::start_with_key("https://rsa-pa.example", PaKey::new_rsa("r1")).await;
    app.register(&pa).await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m1", "hello", None)
        .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn one_token_without_jti_works_on_two_brands() {
    let (app, pa) = setup().await;
    app.add_brand("acme", "Acme").await;
    let token = pa.token_with("u1", app.audience(), |_, c| {
        c.as_object_mut().unwrap().remove("jti");
    });
    assert_eq!(
        app.send("demo", &token, "m1", "hello", None).await.status(),
        200
    );
    assert_eq!(
        app.send("acme", &token, "m1", "hello", None).await.status(),
        200
    );
    // Replaying it is allowed too (PACT §3: replay tracking is not required).
    assert_eq!(
        app.send("demo", &token, "m2", "hello", None).await.status(),
        200
    );
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap()
}
