//! The "connected agents" page (`/account`) and passkeys: who sees which
//! grants and receipts, Revoke taking effect on the very next delegated call,
//! the CSRF/Origin rules on every POST, and the WebAuthn endpoints — their
//! guards, single-use session-bound ceremonies, and a whole registration and
//! sign-in made by a software authenticator written here (ES256, "none"
//! attestation), so the server side is exercised end to end.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use josekit::jws::{ES256, JwsSigner};
use pact_db::sessions::SessionState;
use pact_db::users::User;
use pact_tests::TestApp;
use pact_tests::pages::{Browser, add_totp, add_user, location, reload};
use reqwest::Response;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const PA_ISS: &str = "https://pa.example";
const OTHER_PA_ISS: &str = "https://other-pa.example";
const PA_SUB: &str = "pa-user-1";
const PASSWORD: &str = "correct horse battery";

/// pactd whose demo brand offers delegation.
async fn delegated_app() -> TestApp {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    app
}

/// pactd whose public URL is `http://localhost:PORT`, so it is a WebAuthn
/// relying party (an IP-address host is not).
async fn passkey_app() -> TestApp {
    let app = TestApp::spawn_with(|c| {
        c.public_url = c.public_url.replace("127.0.0.1", "localhost");
    })
    .await;
    assert!(app.state.webauthn.is_some());
    app
}

/// A browser holding a session made straight in the database (no `/login`),
/// and that session's CSRF token.
async fn browser_with(app: &TestApp, state: SessionState) -> (Browser, String) {
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let (csrf, _) = pact_server::domain::secrets::new_secret();
    pact_db::sessions::insert(
        &app.db,
        &hash,
        &csrf,
        &state,
        OffsetDateTime::now_utc() + Duration::hours(1),
    )
    .await
    .unwrap();
    let b = Browser::new(app);
    let url = reqwest::Url::parse(&app.base_url).unwrap();
    b.jar.add_cookie_str(&format!("pactd_session={raw}"), &url);
    (b, csrf)
}

/// Signed in to `demo` as `user`; `mfa_at` when a second factor was verified.
async fn signed_in(
    app: &TestApp,
    user: &User,
    mfa_at: Option<OffsetDateTime>,
) -> (Browser, String) {
    browser_with(
        app,
        SessionState {
            brand_id: Some(user.brand_id.clone()),
            user_id: Some(user.id),
            mfa_at,
            ..SessionState::default()
        },
    )
    .await
}

/// An anonymous session (as the login page makes one), with its CSRF token.
async fn anonymous(app: &TestApp) -> (Browser, String) {
    browser_with(app, SessionState::default()).await
}

fn access(tokens: &Value) -> String {
    tokens["access_token"].as_str().unwrap().to_owned()
}

fn grant_of(token: &str) -> Uuid {
    let claims = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
    claims["grant_id"].as_str().unwrap().parse().unwrap()
}

async fn grant(app: &TestApp, id: Uuid) -> pact_db::grants::Grant {
    pact_db::grants::find(&app.db, id.into())
        .await
        .unwrap()
        .unwrap()
}

/// POSTs JSON as the page script does: `Origin` and `X-CSRF-Token`.
async fn post_json(b: &Browser, path: &str, csrf: Option<&str>, body: &Value) -> Response {
    let mut req = b
        .client
        .post(b.url(path))
        .header("origin", &b.origin)
        .json(body);
    if let Some(t) = csrf {
        req = req.header("x-csrf-token", t);
    }
    req.send().await.unwrap()
}

async fn assert_invalid_token(res: Response) {
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer realm="a2a", error="invalid_token""#)
    );
}

#[tokio::test]
async fn account_needs_a_session_and_a_known_brand() {
    let app = TestApp::spawn().await;
    let b = Browser::new(&app);
    let res = b.get("/account?brand=demo").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?brand=demo&next=/account");

    // No session and no brand: there is no way to know whose sign-in to show.
    let (status, html) = b.get_html("/account").await;
    assert_eq!(status, 400);
    assert!(html.contains("link on your store"), "{html}");
    let (status, _) = b.get_html("/account?brand=nope").await;
    assert_eq!(status, 404);
    let (status, _) = b.get_html("/account?brand=Bad%2Fid").await;
    assert_eq!(status, 404);

    // A session that is not signed in (anonymous, or only the password so far).
    let (anon, _) = anonymous(&app).await;
    let res = anon.get("/account?brand=demo").await;
    assert_eq!(location(&res), "/login?brand=demo&next=/account");
    let user = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let (pending, _) = browser_with(
        &app,
        SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            pending_user_id: Some(user.id),
            ..SessionState::default()
        },
    )
    .await;
    let res = pending.get("/account?brand=demo").await;
    assert_eq!(res.status(), 303);

    // Signed in to one brand, asking for another: sign in there.
    app.add_brand("other", "Other Shop").await;
    let (b, _) = signed_in(&app, &user, None).await;
    let res = b.get("/account?brand=other").await;
    assert_eq!(location(&res), "/login?brand=other&next=/account");
    let (status, _) = b.get_html("/account?brand=demo").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn account_lists_only_the_persons_grants_and_receipts() {
    let app = delegated_app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let other_pa = app.registered_pa(OTHER_PA_ISS).await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let bob = add_user(&app, "demo", "bob@example.com", PASSWORD).await;

    let ann_token = access(
        &app.connect(&pa, PA_SUB, &ann.subject(), &["orders:read"])
            .await,
    );
    let ann_grant = grant_of(&ann_token);
    // A second, revoked grant of Ann's (another PA), to be listed as such, after the active one.
    let old = access(
        &app.connect(&other_pa, PA_SUB, &ann.subject(), &["orders:cancel"])
            .await,
    );
    let old_grant = grant_of(&old);
    pact_db::grants::revoke(&app.db, old_grant.into(), "test")
        .await
        .unwrap();
    let bob_token = access(
        &app.connect(&pa, "pa-user-2", &bob.subject(), &["orders:read"])
            .await,
    );
    let bob_grant = grant_of(&bob_token);

    let res = app
        .send_delegated(
            "demo",
            &pa.token(PA_SUB, app.audience()),
            &ann_token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let receipts = pact_db::receipts::list(&app.db, Some(ann_grant.into()))
        .await
        .unwrap();
    let tool = receipts[0].claims["actions"][0]["tool"]
        .as_str()
        .unwrap()
        .to_owned();

    let (b, _) = signed_in(&app, &ann, None).await;
    let res = b.get("/account").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let html = res.text().await.unwrap();
    assert!(html.contains("Test PA"), "{html}");
    assert!(html.contains(PA_ISS));
    assert!(html.contains("See your orders and their delivery status"));
    assert!(html.contains("Cancel orders that have not shipped yet"));
    assert!(html.contains(&format!("/account/grants/{ann_grant}/revoke")));
    // The revoked grant is listed under "ended", after the active one, without a button.
    let active_at = html.find(&format!("grant-{ann_grant}")).unwrap();
    let ended_at = html.find("Access that has ended").unwrap();
    assert!(active_at < ended_at);
    assert!(html[ended_at..].contains("Access ended on"), "{html}");
    assert!(!html.contains(&format!("/account/grants/{old_grant}/revoke")));
    // What the agent did, in words.
    let did = pact_server::web::account::action_in_words(&tool);
    assert!(html.contains("Recent activity"));
    assert!(html.contains(&did), "{did} not in {html}");
    assert!(!html.contains(&format!("Did: {tool}")));
    // Never someone else's.
    assert!(!html.contains(&bob_grant.to_string()));
    // MFA management and sign-out for a built-in account; no passkey UI on an IP host.
    assert!(html.contains("/account/totp"));
    assert!(html.contains(r#"action="/account/recovery-codes""#));
    assert!(html.contains(r#"action="/logout""#));
    assert!(html.contains(r#"<meta name="csrf-token""#));
    assert!(!html.contains("passkey-register"));
    assert!(!html.contains("webauthn.js"));
    assert!(!html.contains("<script>"));

    // Bob sees his own grant and no receipts.
    let (b, _) = signed_in(&app, &bob, None).await;
    let html = b.get("/account").await.text().await.unwrap();
    assert!(html.contains(&bob_grant.to_string()));
    assert!(!html.contains(&ann_grant.to_string()));
    assert!(!html.contains(&did));
}

#[tokio::test]
async fn a_brands_own_login_sees_its_subjects_grants_without_mfa_management() {
    let app = delegated_app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let token = access(
        &app.connect(&pa, PA_SUB, "shop-user-7", &["orders:read"])
            .await,
    );
    let (b, _) = browser_with(
        &app,
        SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            external_sub: Some("shop-user-7".into()),
            ..SessionState::default()
        },
    )
    .await;
    let (status, html) = b.get_html("/account?brand=demo").await;
    assert_eq!(status, 200);
    assert!(html.contains(&grant_of(&token).to_string()));
    assert!(!html.contains("/account/totp"));
    assert!(!html.contains("recovery-codes"));
    assert!(html.contains(r#"action="/logout""#));
}

#[tokio::test]
async fn revoke_takes_effect_on_the_very_next_delegated_call() {
    let app = delegated_app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let token = access(
        &app.connect(&pa, PA_SUB, &ann.subject(), &["orders:read"])
            .await,
    );
    let id = grant_of(&token);
    let pa_jwt = pa.token(PA_SUB, app.audience());
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    assert_eq!(res.status(), 200);

    let (b, csrf) = signed_in(&app, &ann, None).await;
    // The account page's button only asks; nothing is revoked on one click.
    let path = format!("/account/grants/{id}/revoke");
    let res = b.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), path);
    assert!(grant(&app, id).await.revoked_at.is_none());
    let (status, confirm) = b.get_html(&path).await;
    assert_eq!(status, 200);
    assert!(confirm.contains("Yes, remove access"), "{confirm}");
    assert!(confirm.contains("See your orders and their delivery status"));
    let res = b.submit(&path, &path, &[("confirm", "yes")]).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account?done=revoked");
    assert!(grant(&app, id).await.revoked_at.is_some());
    assert!(app.state.revocations.is_revoked(id.into()));

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m2", "show my orders", None)
        .await;
    assert_invalid_token(res).await;

    let html = b.get("/account?done=revoked").await.text().await.unwrap();
    assert!(html.contains("Access removed"));
    assert!(html.contains("You removed its access on"), "{html}");
    // Revoking again is harmless.
    let res = b
        .post(
            &format!("/account/grants/{id}/revoke"),
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(res.status(), 303);
}

#[tokio::test]
async fn nobody_can_revoke_someone_elses_grant() {
    let app = delegated_app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let bob = add_user(&app, "demo", "bob@example.com", PASSWORD).await;
    let bob_token = access(
        &app.connect(&pa, "pa-user-2", &bob.subject(), &["orders:read"])
            .await,
    );
    let bob_grant = grant_of(&bob_token);

    let (b, csrf) = signed_in(&app, &ann, None).await;
    for id in [
        bob_grant.to_string(),
        Uuid::new_v4().to_string(),
        "not-a-uuid".to_owned(),
    ] {
        let res = b
            .post(
                &format!("/account/grants/{id}/revoke"),
                &[("csrf", &csrf), ("confirm", "yes")],
            )
            .await;
        assert_eq!(res.status(), 404, "{id}");
    }
    assert!(grant(&app, bob_grant).await.revoked_at.is_none());
    assert!(!app.state.revocations.is_revoked(bob_grant.into()));
    let res = app
        .send_delegated(
            "demo",
            &pa.token("pa-user-2", app.audience()),
            &bob_token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn revoke_needs_the_csrf_token_and_our_origin() {
    let app = delegated_app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let token = access(
        &app.connect(&pa, PA_SUB, &ann.subject(), &["orders:read"])
            .await,
    );
    let id = grant_of(&token);
    let path = format!("/account/grants/{id}/revoke");
    let (b, csrf) = signed_in(&app, &ann, None).await;

    // No token, a wrong one.
    let res = b.post(&path, &[]).await;
    assert_eq!(res.status(), 403);
    let res = b.post(&path, &[("csrf", "x".repeat(43).as_str())]).await;
    assert_eq!(res.status(), 403);
    // The right token from another site, or with no Origin at all.
    let url = b.url(&path);
    for origin in [Some("https://evil.example"), Some("null"), None] {
        let mut req = b.client.post(&url).form(&[("csrf", &csrf)]);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 403, "{origin:?}");
        assert!(res.text().await.unwrap().contains("refused"));
    }
    // Another session's token.
    let (other, other_csrf) = signed_in(&app, &ann, None).await;
    drop(other);
    let res = b.post(&path, &[("csrf", &other_csrf)]).await;
    assert_eq!(res.status(), 403);
    // No session at all.
    let res = Browser::new(&app).post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 403);

    assert!(grant(&app, id).await.revoked_at.is_none());
    let res = app
        .send_delegated(
            "demo",
            &pa.token(PA_SUB, app.audience()),
            &token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn passkeys_are_not_offered_without_a_relying_party() {
    let app = TestApp::spawn().await;
    assert!(app.state.webauthn.is_none());
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let (b, csrf) = signed_in(&app, &ann, Some(OffsetDateTime::now_utc())).await;
    for path in [
        "/passkeys/register/start",
        "/passkeys/register/finish",
        "/passkeys/login/start?brand=demo",
        "/passkeys/login/finish",
    ] {
        let res = post_json(&b, path, Some(&csrf), &json!({})).await;
        assert_eq!(res.status(), 404, "{path}");
    }
    let res = b
        .post(
            &format!("/account/passkeys/{}/delete", Uuid::new_v4()),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn passkey_registration_needs_sign_in_csrf_origin_and_step_up() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let start = "/passkeys/register/start";

    let (anon, anon_csrf) = anonymous(&app).await;
    let res = post_json(&anon, start, Some(&anon_csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
    let res = post_json(&Browser::new(&app), start, Some(&anon_csrf), &json!({})).await;
    assert_eq!(res.status(), 403);

    let (b, csrf) = signed_in(&app, &ann, None).await;
    let res = post_json(&b, start, None, &json!({})).await;
    assert_eq!(res.status(), 403);
    let res = post_json(&b, start, Some(&anon_csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
    let res = b
        .client
        .post(b.url(start))
        .header("origin", "https://evil.example")
        .header("x-csrf-token", &csrf)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(ceremonies(&app).await, 0);

    let res = post_json(&b, start, Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    let pk = &body["publicKey"];
    assert_eq!(pk["rp"]["id"], "localhost");
    assert_eq!(pk["user"]["id"], URL_SAFE_NO_PAD.encode(ann.id.as_bytes()));
    assert_eq!(pk["user"]["name"], "ann@example.com");
    assert_eq!(pk["authenticatorSelection"]["residentKey"], "required");
    assert_eq!(pk["authenticatorSelection"]["userVerification"], "required");
    assert!(body["ceremonyId"].as_str().unwrap().parse::<Uuid>().is_ok());
    assert_eq!(ceremonies(&app).await, 1);

    // Once the account has a second factor, changing passkeys needs it again.
    add_totp(&app, &ann).await;
    let res = post_json(&b, start, Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
    let (b, csrf) = signed_in(
        &app,
        &ann,
        Some(OffsetDateTime::now_utc() - Duration::minutes(30)),
    )
    .await;
    let res = post_json(&b, start, Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
    let (b, csrf) = signed_in(&app, &ann, Some(OffsetDateTime::now_utc())).await;
    let res = post_json(&b, start, Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 200);

    // A brand's own login has no built-in account to attach passkeys to.
    let (ext, ext_csrf) = browser_with(
        &app,
        SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            external_sub: Some("shop-user-7".into()),
            mfa_at: Some(OffsetDateTime::now_utc()),
            ..SessionState::default()
        },
    )
    .await;
    let res = post_json(&ext, start, Some(&ext_csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
}

async fn ceremonies(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from webauthn_ceremonies")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// A syntactically fine assertion that names `user` but proves nothing.
fn bogus_assertion(user: Uuid) -> Value {
    json!({
        "id": "AAAA",
        "rawId": "AAAA",
        "type": "public-key",
        "response": {
            "authenticatorData": "AAAA",
            "clientDataJSON": "AAAA",
            "signature": "AAAA",
            "userHandle": URL_SAFE_NO_PAD.encode(user.as_bytes()),
        },
    })
}

async fn login_start(b: &Browser, csrf: &str) -> Uuid {
    let res = post_json(
        b,
        "/passkeys/login/start?brand=demo",
        Some(csrf),
        &json!({}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert!(body.get("mediation").is_none(), "a modal request: {body}");
    assert_eq!(body["publicKey"]["allowCredentials"], json!([]));
    body["ceremonyId"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn passkey_sign_in_ceremonies_are_single_use_session_bound_and_short_lived() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let finish = "/passkeys/login/finish";

    // Start needs the CSRF token of a session, and a known brand.
    let (a, a_csrf) = anonymous(&app).await;
    let res = post_json(&a, "/passkeys/login/start?brand=demo", None, &json!({})).await;
    assert_eq!(res.status(), 403);
    let res = post_json(&a, "/passkeys/login/start", Some(&a_csrf), &json!({})).await;
    assert_eq!(res.status(), 400);
    let res = post_json(
        &a,
        "/passkeys/login/start?brand=nope",
        Some(&a_csrf),
        &json!({}),
    )
    .await;
    assert_eq!(res.status(), 404);

    let ceremony = login_start(&a, &a_csrf).await;
    let body = json!({"ceremonyId": ceremony, "credential": bogus_assertion(ann.id)});

    // Another browser session cannot finish it (and does not use it up).
    let (other, other_csrf) = anonymous(&app).await;
    let res = post_json(&other, finish, Some(&other_csrf), &body).await;
    assert_eq!(res.status(), 400);
    // Nor without the token.
    let res = post_json(&a, finish, None, &body).await;
    assert_eq!(res.status(), 403);
    // Its own session can: the assertion proves nothing, so it is refused …
    let res = post_json(&a, finish, Some(&a_csrf), &body).await;
    assert_eq!(res.status(), 401);
    // … and the ceremony is gone: a retry is refused as used.
    let res = post_json(&a, finish, Some(&a_csrf), &body).await;
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("expired or was already used")
    );

    // An expired ceremony.
    let ceremony = login_start(&a, &a_csrf).await;
    sqlx::query(
        "update webauthn_ceremonies set expires_at = now() - interval '1 second' where id = $1",
    )
    .bind(ceremony)
    .execute(&app.db)
    .await
    .unwrap();
    let body = json!({"ceremonyId": ceremony, "credential": bogus_assertion(ann.id)});
    let res = post_json(&a, finish, Some(&a_csrf), &body).await;
    assert_eq!(res.status(), 400);
    // An unknown one; a registration ceremony is not a sign-in ceremony.
    let body = json!({"ceremonyId": Uuid::new_v4(), "credential": bogus_assertion(ann.id)});
    let res = post_json(&a, finish, Some(&a_csrf), &body).await;
    assert_eq!(res.status(), 400);

    // Nobody got signed in along the way.
    let res = a.get("/account?brand=demo").await;
    assert_eq!(res.status(), 303);
    let res = other.get("/account?brand=demo").await;
    assert_eq!(res.status(), 303);
}

// ---------------------------------------------------------------------------
// A software authenticator: ES256, "none" attestation, user verified.
// ---------------------------------------------------------------------------

struct SoftAuthenticator {
    key: EcKeyPair,
    credential_id: Vec<u8>,
    counter: u32,
    origin: String,
    rp_id: String,
}

fn cbor_head(major: u8, len: usize) -> Vec<u8> {
    let m = major << 5;
    match len {
        0..=23 => vec![m | u8::try_from(len).unwrap()],
        24..=255 => vec![m | 24, u8::try_from(len).unwrap()],
        _ => {
            let mut v = vec![m | 25];
            v.extend_from_slice(&u16::try_from(len).unwrap().to_be_bytes());
            v
        }
    }
}

fn cbor_text(s: &str) -> Vec<u8> {
    let mut v = cbor_head(3, s.len());
    v.extend_from_slice(s.as_bytes());
    v
}

fn cbor_bytes(b: &[u8]) -> Vec<u8> {
    let mut v = cbor_head(2, b.len());
    v.extend_from_slice(b);
    v
}

/// An ECDSA signature as r ‖ s (JWS) → ASN.1 DER (WebAuthn).
fn der_signature(raw: &[u8]) -> Vec<u8> {
    let int = |x: &[u8]| {
        let mut x = x.to_vec();
        while x.len() > 1 && x[0] == 0 && x[1] & 0x80 == 0 {
            x.remove(0);
        }
        if x[0] & 0x80 != 0 {
            x.insert(0, 0);
        }
        let mut v = vec![0x02, u8::try_from(x.len()).unwrap()];
        v.extend_from_slice(&x);
        v
    };
    let (r, s) = raw.split_at(raw.len() / 2);
    let body = [int(r), int(s)].concat();
    let mut v = vec![0x30, u8::try_from(body.len()).unwrap()];
    v.extend_from_slice(&body);
    v
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    pact_server::domain::secrets::hash(std::str::from_utf8(bytes).unwrap())
}

impl SoftAuthenticator {
    fn new(app: &TestApp) -> Self {
        Self {
            key: EcKeyPair::generate(EcCurve::P256).unwrap(),
            credential_id: Uuid::new_v4().as_bytes().to_vec(),
            counter: 0,
            origin: pact_server::web::security::origin_of(&app.state.config.public_url),
            rp_id: "localhost".into(),
        }
    }

    fn client_data(&self, kind: &str, challenge: &str) -> String {
        json!({"type": kind, "challenge": challenge, "origin": self.origin, "crossOrigin": false})
            .to_string()
    }

    fn auth_data(&mut self, attested: bool) -> Vec<u8> {
        self.counter += 1;
        let mut d = sha256(self.rp_id.as_bytes());
        // UP | UV, plus AT when a credential is attached.
        d.push(if attested { 0x45 } else { 0x05 });
        d.extend_from_slice(&self.counter.to_be_bytes());
        if attested {
            let jwk = self.key.to_jwk_public_key();
            let coord = |name: &str| {
                URL_SAFE_NO_PAD
                    .decode(jwk.parameter(name).unwrap().as_str().unwrap())
                    .unwrap()
            };
            d.extend_from_slice(&[0u8; 16]);
            d.extend_from_slice(
                &u16::try_from(self.credential_id.len())
                    .unwrap()
                    .to_be_bytes(),
            );
            d.extend_from_slice(&self.credential_id);
            // COSE_Key {1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}
            d.extend_from_slice(&[0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21]);
            d.extend_from_slice(&cbor_bytes(&coord("x")));
            d.push(0x22);
            d.extend_from_slice(&cbor_bytes(&coord("y")));
        }
        d
    }

    /// `navigator.credentials.create` for the server's options.
    fn create(&mut self, options: &Value) -> Value {
        let pk = &options["publicKey"];
        assert_eq!(pk["rp"]["id"], self.rp_id.as_str());
        let client_data = self.client_data("webauthn.create", pk["challenge"].as_str().unwrap());
        let auth_data = self.auth_data(true);
        let mut att = vec![0xa3];
        att.extend(cbor_text("fmt"));
        att.extend(cbor_text("none"));
        att.extend(cbor_text("attStmt"));
        att.push(0xa0);
        att.extend(cbor_text("authData"));
        att.extend(cbor_bytes(&auth_data));
        let id = URL_SAFE_NO_PAD.encode(&self.credential_id);
        json!({
            "id": id,
            "rawId": id,
            "type": "public-key",
            "response": {
                "attestationObject": URL_SAFE_NO_PAD.encode(&att),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data.as_bytes()),
                "transports": ["internal"],
            },
            "extensions": {"credProps": {"rk": true}},
        })
    }

    /// `navigator.credentials.get` (discoverable) for the server's options.
    fn get(&mut self, options: &Value, user_handle: &[u8]) -> Value {
        let pk = &options["publicKey"];
        assert_eq!(pk["rpId"], self.rp_id.as_str());
        let client_data = self.client_data("webauthn.get", pk["challenge"].as_str().unwrap());
        let auth_data = self.auth_data(false);
        let mut signed = auth_data.clone();
        signed.extend(sha256(client_data.as_bytes()));
        let raw = ES256
            .signer_from_jwk(&self.key.to_jwk_private_key())
            .unwrap()
            .sign(&signed)
            .unwrap();
        let id = URL_SAFE_NO_PAD.encode(&self.credential_id);
        json!({
            "id": id,
            "rawId": id,
            "type": "public-key",
            "response": {
                "authenticatorData": URL_SAFE_NO_PAD.encode(&auth_data),
                "clientDataJSON": URL_SAFE_NO_PAD.encode(client_data.as_bytes()),
                "signature": URL_SAFE_NO_PAD.encode(der_signature(&raw)),
                "userHandle": URL_SAFE_NO_PAD.encode(user_handle),
            },
            "extensions": {},
        })
    }
}

async fn register(
    b: &Browser,
    csrf: &str,
    authenticator: &mut SoftAuthenticator,
    name: &str,
) -> Response {
    let res = post_json(b, "/passkeys/register/start", Some(csrf), &json!({})).await;
    assert_eq!(res.status(), 200);
    let options: Value = res.json().await.unwrap();
    let credential = authenticator.create(&options);
    post_json(
        b,
        "/passkeys/register/finish",
        Some(csrf),
        &json!({"ceremonyId": options["ceremonyId"], "name": name, "credential": credential}),
    )
    .await
}

async fn sign_in_with_passkey(
    app: &TestApp,
    authenticator: &mut SoftAuthenticator,
    user_handle: &[u8],
    next: &str,
) -> (Browser, Response) {
    let (b, csrf) = anonymous(app).await;
    let res = post_json(
        &b,
        &format!(
            "/passkeys/login/start?brand=demo&next={}",
            pact_tests::pages::enc(next)
        ),
        Some(&csrf),
        &json!({}),
    )
    .await;
    assert_eq!(res.status(), 200);
    let options: Value = res.json().await.unwrap();
    let credential = authenticator.get(&options, user_handle);
    let res = post_json(
        &b,
        "/passkeys/login/finish",
        Some(&csrf),
        &json!({"ceremonyId": options["ceremonyId"], "credential": credential}),
    )
    .await;
    (b, res)
}

#[tokio::test]
async fn a_passkey_registers_signs_in_and_is_removed() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let bob = add_user(&app, "demo", "bob@example.com", PASSWORD).await;
    let mut key = SoftAuthenticator::new(&app);

    // Ann adds a passkey from her account page.
    let (b, csrf) = signed_in(&app, &ann, None).await;
    let html = b.get("/account").await.text().await.unwrap();
    assert!(html.contains(r#"<script src="/static/webauthn.js" defer></script>"#));
    assert!(html.contains(r#"id="passkey-register""#));
    let res = register(&b, &csrf, &mut key, "  Laptop ").await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["redirect"], "/account?done=passkey-added");
    let stored = pact_db::sessions::credentials_of(&app.db, ann.id)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].name, "Laptop");
    assert_eq!(stored[0].credential_id, key.credential_id);
    assert_eq!(ceremonies(&app).await, 0, "the ceremony is used up");
    let html = b.get("/account").await.text().await.unwrap();
    assert!(html.contains("Laptop"));

    // The same credential cannot be registered twice (here: by Bob).
    let (bob_b, bob_csrf) = signed_in(&app, &bob, None).await;
    let res = register(&bob_b, &bob_csrf, &mut key, "").await;
    assert_eq!(res.status(), 409);

    // Sign-in with it: a new session, signed in with a verified factor.
    let (browser, res) =
        sign_in_with_passkey(&app, &mut key, ann.id.as_bytes(), "/device/consent").await;
    assert_eq!(res.status(), 200);
    let cookie = pact_tests::pages::set_cookie(&res).unwrap();
    assert!(cookie.starts_with("pactd_session="));
    assert!(cookie.contains("HttpOnly"));
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["redirect"], "/device/consent");
    let session_hash = pact_server::domain::secrets::hash(&browser.session_cookie().unwrap());
    let session = pact_db::sessions::find_live(&app.db, &session_hash, OffsetDateTime::now_utc())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.user_id, Some(ann.id));
    assert_eq!(session.brand_id.as_deref(), Some("demo"));
    assert!(session.mfa_at.is_some());
    let stored = pact_db::sessions::credentials_of(&app.db, ann.id)
        .await
        .unwrap();
    assert!(stored[0].last_used_at.is_some());
    assert_eq!(stored[0].passkey["cred"]["counter"], key.counter);
    let (status, html) = browser.get_html("/account").await;
    assert_eq!(status, 200);
    assert!(html.contains("ann@example.com"));

    // An unsafe `next` is not followed.
    let (_, res) = sign_in_with_passkey(&app, &mut key, ann.id.as_bytes(), "//evil.example").await;
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["redirect"], "/account");

    // The passkey under another account's user handle is not that account's.
    let (b2, res) = sign_in_with_passkey(&app, &mut key, bob.id.as_bytes(), "/account").await;
    assert_eq!(res.status(), 401);
    assert_eq!(b2.get("/account?brand=demo").await.status(), 303);

    // A replayed (cloned) authenticator state: the counter does not grow.
    key.counter = 1;
    let (_, res) = sign_in_with_passkey(&app, &mut key, ann.id.as_bytes(), "/account").await;
    assert_eq!(res.status(), 401);
    key.counter = 10;

    // Removing it: not with a password-only session (step-up), not by Bob,
    // but with a fresh second factor.
    let id = stored[0].id;
    let path = format!("/account/passkeys/{id}/delete");
    let res = b.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 403);
    let res = bob_b.post(&path, &[("csrf", &bob_csrf)]).await;
    assert_eq!(res.status(), 404);
    let res = browser.post(&path, &[]).await;
    assert_eq!(res.status(), 403);
    let html = browser.get("/account").await.text().await.unwrap();
    let fresh_csrf = pact_tests::pages::csrf_from(&html).unwrap();
    let res = browser.post(&path, &[("csrf", &fresh_csrf)]).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account?done=passkey-removed");
    assert!(
        pact_db::sessions::credentials_of(&app.db, ann.id)
            .await
            .unwrap()
            .is_empty()
    );
    let (_, res) = sign_in_with_passkey(&app, &mut key, ann.id.as_bytes(), "/account").await;
    assert_eq!(res.status(), 401);
}

/// PACT §5.2: password + MFA. A passkey is a second factor as much as an
/// app is, so an account that has one (and no app) is not signed in by its
/// password alone, nor can a password-only session add an app to get around
/// it: the second-factor page asks for the passkey.
#[tokio::test]
async fn a_passkey_account_is_not_signed_in_by_its_password_alone() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let mut key = SoftAuthenticator::new(&app);
    let (b, csrf) = signed_in(&app, &ann, None).await;
    assert_eq!(register(&b, &csrf, &mut key, "Laptop").await.status(), 200);

    // The right password: only half signed in, sent to the second factor.
    let attacker = Browser::new(&app);
    let res = attacker
        .sign_in("demo", "ann@example.com", PASSWORD, "/account")
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
    let session = pact_tests::pages::session_of(&app, &attacker.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(session.user_id, None);
    assert_eq!(session.pending_user_id, Some(ann.id));
    assert!(
        session.expires_at <= app.clock.now() + Duration::minutes(16),
        "a half-finished sign-in lives briefly: {}",
        session.expires_at
    );
    let res = attacker.get("/account?brand=demo").await;
    assert_eq!(res.status(), 303, "not signed in");

    // The page offers the passkey (no app to enter a code from).
    let (status, html) = attacker
        .get_html("/login/second-factor?next=%2Faccount")
        .await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"id="passkey-signin""#), "{html}");
    assert!(!html.contains(r#"name="code""#));
    assert!(!html.contains("/account/totp"), "no way round it: {html}");

    // Enrolling an app first is not a way round it, and posting a code
    // goes back to the page.
    let res = attacker.get("/account/totp?next=%2Faccount").await;
    assert_eq!(res.status(), 303);
    assert!(
        location(&res).starts_with("/login/second-factor"),
        "{}",
        location(&res)
    );
    let res = attacker
        .post_with_csrf(
            "/login/second-factor",
            &[("code", "123456"), ("next", "/account")],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert!(location(&res).starts_with("/login/second-factor"));
    assert!(!reload(&app, &ann).await.has_totp());

    // Nor does an earlier password-only session (made before the passkey
    // was a factor) let an app be added without the passkey first.
    let res = b.get("/account/totp?next=%2Faccount").await;
    assert_eq!(res.status(), 303);
    assert!(location(&res).starts_with("/login/second-factor"));

    // The passkey finishes the sign-in, with a verified factor.
    let (browser, res) = sign_in_with_passkey(&app, &mut key, ann.id.as_bytes(), "/account").await;
    assert_eq!(res.status(), 200);
    let (status, html) = browser.get_html("/account").await;
    assert_eq!(status, 200);
    assert!(html.contains("ann@example.com"));

    // An account with no factor at all still signs in with its password
    // where the brand does not require one.
    add_user(&app, "demo", "bob@example.com", PASSWORD).await;
    let res = Browser::new(&app)
        .sign_in("demo", "bob@example.com", PASSWORD, "/account")
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account");
}

/// Deleting an account asks for the password again; each wrong one counts
/// against the sign-in's own locks, so a browser left signed in is no
/// unlimited password oracle, and once locked even the right password
/// erases nothing until the lock ends.
#[tokio::test]
async fn wrong_passwords_on_account_deletion_lock_as_at_sign_in() {
    let app = TestApp::spawn().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let (b, _) = signed_in(&app, &ann, None).await;
    let delete = |password: &'static str| {
        let b = &b;
        async move {
            b.submit(
                "/account/delete",
                "/account/delete",
                &[("confirm", "yes"), ("password", password)],
            )
            .await
        }
    };
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(delete("not her password").await.status().as_u16());
    }
    assert_eq!(statuses[0], 403, "{statuses:?}");
    assert_eq!(statuses[7], 429, "{statuses:?}");
    let res = delete(PASSWORD).await;
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    assert!(
        pact_db::users::find(&app.db, ann.id)
            .await
            .unwrap()
            .is_some()
    );
    // The same counters as sign-in's.
    let res = Browser::new(&app)
        .sign_in("demo", "ann@example.com", PASSWORD, "/account")
        .await;
    assert_eq!(res.status(), 429);
}

#[tokio::test]
async fn the_script_and_the_sign_in_partial_are_served_without_inline_code() {
    let app = TestApp::spawn().await;
    let res = Browser::new(&app).get("/static/webauthn.js").await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    let js = res.text().await.unwrap();
    for needle in [
        "/passkeys/register/start",
        "/passkeys/register/finish",
        "/passkeys/login/start",
        "/passkeys/login/finish",
        "X-CSRF-Token",
    ] {
        assert!(js.contains(needle), "{needle}");
    }
    let partial = include_str!("../../templates/passkey_signin.html");
    assert!(!partial.contains("style="));
    assert!(!partial.contains("onclick"));

    // The login page offers a passkey only where the server is a relying party.
    let (status, html) = Browser::new(&app)
        .get_html("/login?brand=demo&next=/account")
        .await;
    assert_eq!(status, 200);
    assert!(!html.contains("passkey-signin"));
    assert!(!html.contains("webauthn.js"));
    let app = passkey_app().await;
    let (status, html) = Browser::new(&app)
        .get_html("/login?brand=demo&next=/account")
        .await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"id="passkey-signin-button""#));
    assert!(html.contains(r#"<script src="/static/webauthn.js" defer></script>"#));
    assert!(html.contains(r#"aria-live="polite""#));
    assert!(html.contains(r#"data-brand="demo""#));
    let csrf = pact_tests::pages::csrf_from(&html).unwrap();
    assert!(html.contains(&format!(r#"data-csrf="{csrf}""#)));
    assert!(!html.contains("<script>"));
}

#[tokio::test]
async fn a_person_sees_where_they_are_signed_in_and_signs_out_everywhere_else() {
    let app = delegated_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let bob = add_user(&app, "demo", "bob@example.com", PASSWORD).await;
    let (laptop, csrf) = signed_in(&app, &ann, None).await;
    let (phone, _) = signed_in(&app, &ann, None).await;
    let (bobs, _) = signed_in(&app, &bob, None).await;

    let html = laptop.get("/account").await.text().await.unwrap();
    assert!(html.contains("Where you are signed in"), "{html}");
    assert_eq!(html.matches("This browser").count(), 1);
    assert_eq!(html.matches("Another browser").count(), 1);
    assert!(html.contains("Sign out everywhere else"));

    // Needs the CSRF token like every other form.
    let res = laptop
        .post("/account/sessions/sign-out-others", &[("csrf", "nope")])
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(phone.get("/account").await.status(), 200);

    let res = laptop
        .post("/account/sessions/sign-out-others", &[("csrf", &csrf)])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account?done=signed-out-others");
    let html = laptop
        .get("/account?done=signed-out-others")
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains("signed out everywhere else"), "{html}");
    assert!(!html.contains("Another browser"));
    // The phone is signed out; Bob is not touched.
    assert_ne!(phone.get("/account").await.status(), 200);
    assert_eq!(bobs.get("/account").await.status(), 200);
}

/// NIST SP 800-63B §6.1.2.1: an account's first second factor is bound only
/// by a recent sign-in. A browser left signed in (here: 11 minutes on) can add
/// neither a passkey nor an authenticator app: the factor would outlive a
/// password reset and lock the owner out. Signing in again can.
#[tokio::test]
async fn a_first_second_factor_needs_a_recent_sign_in() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let (b, csrf) = signed_in(&app, &ann, None).await;
    sqlx::query("update sessions set created_at = created_at - interval '11 minutes'")
        .execute(&app.db)
        .await
        .unwrap();
    let res = post_json(&b, "/passkeys/register/start", Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 403);
    assert_eq!(ceremonies(&app).await, 0);
    let (status, html) = b.get_html("/account/totp").await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("sign in again"), "{html}");
    let factors: i64 = sqlx::query_scalar(
        "select (select count(*) from webauthn_credentials) \
         + (select count(*) from users where totp_secret_sealed is not null)",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(factors, 0);

    // Signed in again: both are offered.
    let (b, csrf) = signed_in(&app, &ann, None).await;
    let res = post_json(&b, "/passkeys/register/start", Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 200);
    let (status, html) = b.get_html("/account/totp").await;
    assert_eq!(status, 200, "{html}");
}

/// What starting a passkey checks is checked again when it finishes: a
/// ceremony started from a recent sign-in and finished after the ten minutes
/// adds nothing (before, the finish checked only its ceremony).
#[tokio::test]
async fn a_passkey_ceremony_is_checked_again_when_it_finishes() {
    let app = passkey_app().await;
    let ann = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let (b, csrf) = signed_in(&app, &ann, None).await;
    let mut key = SoftAuthenticator::new(&app);
    let res = post_json(&b, "/passkeys/register/start", Some(&csrf), &json!({})).await;
    assert_eq!(res.status(), 200);
    let options: Value = res.json().await.unwrap();
    sqlx::query("update sessions set created_at = created_at - interval '11 minutes'")
        .execute(&app.db)
        .await
        .unwrap();
    let credential = key.create(&options);
    let res = post_json(
        &b,
        "/passkeys/register/finish",
        Some(&csrf),
        &json!({"ceremonyId": options["ceremonyId"], "name": "Key", "credential": credential}),
    )
    .await;
    assert_eq!(res.status(), 403);
    let stored: i64 = sqlx::query_scalar("select count(*) from webauthn_credentials")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}
