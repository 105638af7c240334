//! The remote JWKS cache seen from outside: warm cache, rotation, SSRF guard.

use std::time::Duration;

use pact_tests::TestApp;
use pact_tests::pa::PaKey;

use crate::assert_bare_401;

#[tokio::test]
async fn a_warm_cache_does_not_refetch_per_request() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    for i in 0..20 {
        let res = app
            .send(
                "demo",
                &pa.token("u1", app.audience()),
                &format!("m{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    assert_eq!(pa.jwks_hits(), 1);
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_without_a_restart() {
    let app =
        TestApp::spawn_with(|c| c.jwks.unknown_kid_cooldown = Duration::from_millis(300)).await;
    let pa = app.registered_pa("https://pa.example").await;
    let old = pa.token("u1", app.audience());
    assert_eq!(app.send("demo", &old, "m1", "hi", None).await.status(), 200);
    assert_eq!(pa.jwks_hits(), 1);

    pa.rotate_to(PaKey::new_ec("k2"));
    // Past the unknown-kid cooldown on the node's clock.
    app.clock.advance(Duration::from_millis(350));
    let new = pa.token("u1", app.audience());
    assert_eq!(app.send("demo", &new, "m2", "hi", None).await.status(), 200);
    assert_eq!(pa.jwks_hits(), 2, "one refetch for the new kid");
    // Both keys now verify from the cache, with no more fetches.
    for i in 0..10 {
        assert_eq!(
            app.send("demo", &new, &format!("n{i}"), "hi", None)
                .await
                .status(),
            200
        );
        assert_eq!(
            app.send("demo", &old, &format!("o{i}"), "hi", None)
                .await
                .status(),
            200
        );
    }
    assert_eq!(pa.jwks_hits(), 2);
}

#[tokio::test]
async fn unknown_kids_cannot_make_pactd_hammer_the_pas_jwks() {
    let app = TestApp::spawn().await; // default cooldown: 60 s
    let pa = app.registered_pa("https://pa.example").await;
    assert_eq!(
        app.send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
            .await
            .status(),
        200
    );
    for i in 0..20 {
        let token = pa.token_with("u1", app.audience(), |h, _| {
            h["kid"] = serde_json::json!(format!("random-{i}"))
        });
        assert_bare_401(app.send("demo", &token, &format!("x{i}"), "hi", None).await).await;
    }
    assert!(pa.jwks_hits() <= 2, "fetched {} times", pa.jwks_hits());
}

#[tokio::test]
async fn without_loopback_mode_a_loopback_jwks_uri_is_never_fetched() {
    let app = TestApp::spawn_with(|c| c.jwks.allow_loopback = false).await;
    let pa = app.registered_pa("https://pa.example").await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
        .await;
    assert_bare_401(res).await;
    assert_eq!(pa.jwks_hits(), 0);
}
