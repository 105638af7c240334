//! Sign-in through the brand's OpenID provider (web/oidc_login.rs).
//!
//! Two providers:
//! * a real one, node-oidc-provider (tests/oidc/provider.mjs, installed with
//!   `npm ci`), whose login form the tests fill in: the journeys a person
//!   makes (approve with a scope unticked, step-up with and without a
//!   second factor, a state replayed or carried to another browser,
//!   back-channel logout);
//! * a provider the test controls (discovery, JWKS and a token endpoint that
//!   answers with whatever ID token the test signed), for the tokens a real
//!   provider would never send: forged, expired, for another audience, with
//!   another nonce.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use pact_agent::conformance;
use pact_tests::pa::{PaKey, compact, now};
use pact_tests::pages::{Browser, location, set_cookie};
use pact_tests::{TestApp, TestPa};
use reqwest::Response;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

const PA_ISS: &str = "https://pa.example/agents/oidc";
const PA_SUB: &str = "pa-user-oidc";
const CLIENT_ID: &str = "pactd-test-client";
const CLIENT_SECRET: &str = "test-client-secret-3c0d9a1f5e7b2468ac";
/// The provider's second client for pactd, authenticating with private_key_jwt.
const JWT_CLIENT_ID: &str = "pactd-jwt-client";

struct Setup {
    app: TestApp,
    pa: TestPa,
}

async fn setup() -> Setup {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(PA_ISS).await;
    Setup { app, pa }
}

/// Puts the demo brand in OpenID mode, the secret sealed as `pactd brand set` seals it.
async fn configure(app: &TestApp, issuer: &str, user_claim: &str, mfa_acr: &[&str]) {
    configure_auth(app, issuer, user_claim, mfa_acr, None).await;
}

/// … with `private_key_jwt` as the client `JWT_CLIENT_ID` when `jwt_aud`
/// names the assertion's audience (`token_endpoint` or `issuer`).
async fn configure_auth(
    app: &TestApp,
    issuer: &str,
    user_claim: &str,
    mfa_acr: &[&str],
    jwt_aud: Option<&str>,
) {
    use pact_db::brand_oidc::{assertion_aud, client_auth};
    let sealed = app
        .master_key
        .seal(
            CLIENT_SECRET.as_bytes(),
            &pact_db::brand_oidc::client_secret_aad(&pact_tests::brand_id("demo")),
        )
        .unwrap();
    let mfa_acr: Vec<String> = mfa_acr.iter().map(|s| (*s).to_owned()).collect();
    let (client_id, secret, method, aud) = match jwt_aud {
        None => (
            CLIENT_ID,
            Some(sealed.as_slice()),
            client_auth::CLIENT_SECRET_BASIC,
            assertion_aud::TOKEN_ENDPOINT,
        ),
        Some(aud) => (JWT_CLIENT_ID, None, client_auth::PRIVATE_KEY_JWT, aud),
    };
    pact_db::brand_oidc::upsert(
        &app.db,
        &pact_db::brand_oidc::NewBrandOidc {
            brand_id: &pact_tests::brand_id("demo"),
            issuer,
            client_id,
            client_secret_sealed: secret,
            client_auth: method,
            assertion_aud: aud,
            scope: "openid email",
            user_claim,
            mfa_acr: &mfa_acr,
        },
    )
    .await
    .unwrap();
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `npm ci` once per test run when oidc-provider is not installed yet.
fn ensure_provider_installed() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let dir = workspace().join("tests/oidc");
        if dir.join("node_modules/oidc-provider").exists() {
            return;
        }
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm is needed for the OpenID provider tests");
        assert!(status.success(), "npm ci failed in tests/oidc");
    });
}

/// node-oidc-provider, configured for pactd's demo brand, on a free port.
struct NodeProvider {
    issuer: String,
    _child: tokio::process::Child,
}

async fn node_provider(app: &TestApp) -> NodeProvider {
    ensure_provider_installed();
    let public = &app.state.config.public_url;
    let mut child = tokio::process::Command::new("node")
        .arg("provider.mjs")
        .current_dir(workspace().join("tests/oidc"))
        .env("OIDC_CLIENT_ID", CLIENT_ID)
        .env("OIDC_CLIENT_SECRET", CLIENT_SECRET)
        .env(
            "OIDC_REDIRECT_URI",
            pact_server::web::oidc_login::redirect_uri(public, &pact_tests::brand_id("demo")),
        )
        .env(
            "OIDC_BACKCHANNEL_URI",
            pact_server::web::oidc_login::backchannel_logout_uri(
                public,
                &pact_tests::brand_id("demo"),
            ),
        )
        .env("OIDC_JWT_CLIENT_ID", JWT_CLIENT_ID)
        .env(
            "OIDC_JWT_JWKS_URI",
            format!("{}/a2a/demo/oauth/jwks.json", public.trim_end_matches('/')),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node is needed for the OpenID provider tests");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .expect("the provider did not start in 60 s")
        .unwrap()
        .expect("the provider exited before it was ready");
    let ready: Value = serde_json::from_str(&first).unwrap();
    NodeProvider {
        issuer: ready["issuer"].as_str().unwrap().to_owned(),
        _child: child,
    }
}

async fn enter_code(b: &Browser, code: &str) -> Response {
    b.submit("/device", "/device", &[("user_code", code)]).await
}

async fn page(res: Response) -> (u16, String) {
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

/// The link to the provider on a "Sign in at …" page, unescaped.
fn provider_link(html: &str, issuer: &str) -> String {
    let marker = format!(r#"href="{issuer}"#);
    let at = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no link to {issuer} on the page:\n{html}"));
    let rest = &html[at + 6..];
    rest[..rest.find('"').unwrap()]
        .replace("&amp;", "&")
        .replace("&#38;", "&")
}

fn query_value(url: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).unwrap();
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn absolute(base: &str, to: &str) -> String {
    reqwest::Url::parse(base)
        .unwrap()
        .join(to)
        .unwrap()
        .to_string()
}

/// Follows the provider's redirects from `url` until the provider sends the
/// browser back to pactd; returns that callback URL, not yet visited. On the
/// provider's login form, signs in as `login` (with the one-time code when
/// `otp`).
async fn through_provider(b: &Browser, app: &TestApp, url: &str, login: &str, otp: bool) -> String {
    back_from_provider(b, &app.base_url, url, login, otp).await
}

/// [`through_provider`] for pactd at `base_url`.
async fn back_from_provider(
    b: &Browser,
    base_url: &str,
    url: &str,
    login: &str,
    otp: bool,
) -> String {
    let mut url = url.to_owned();
    for _ in 0..20 {
        if url.starts_with(base_url) {
            return url;
        }
        let res = b.client.get(&url).send().await.unwrap();
        let status = res.status().as_u16();
        if (300..400).contains(&status) {
            url = absolute(&url, &location(&res));
            continue;
        }
        let html = res.text().await.unwrap();
        assert_eq!(status, 200, "provider at {url}: {html}");
        let at = html.find(r#"action=""#).expect("a login form") + 8;
        let action = absolute(&url, &html[at..at + html[at..].find('"').unwrap()]);
        let password = format!("{login}-password");
        let mut form = vec![("login", login), ("password", password.as_str())];
        if otp {
            form.push(("otp", "123456"));
        }
        let res = b.client.post(&action).form(&form).send().await.unwrap();
        assert!(
            res.status().is_redirection(),
            "login at the provider failed"
        );
        url = absolute(&action, &location(&res));
    }
    panic!("the provider never sent the browser back");
}

async fn grant_subs(app: &TestApp) -> Vec<(String, Vec<String>)> {
    sqlx::query_as("select user_sub, scopes from grants order by created_at")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

async fn status_of(app: &TestApp, user_code: &str) -> String {
    sqlx::query_scalar("select status from device_authorizations where user_code = $1")
        .bind(user_code.replace('-', ""))
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The delegation token's payload from a successful poll.
fn token_payload(body: &Value) -> Value {
    let token = body["access_token"].as_str().unwrap();
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

async fn signed_in_sessions(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from sessions where external_sub is not null")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

// ------------------------------------------------------------------ the real provider

/// Code → provider → back → consent with one scope unticked: the grant and
/// the delegation token carry the chosen claim (here the verified e-mail).
#[tokio::test]
async fn a_person_signs_in_at_the_provider_and_approves_one_of_two_scopes() {
    let s = setup().await;
    let op = node_provider(&s.app).await;
    configure(&s.app, &op.issuer, "email", &[]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read orders:cancel", None)
        .await;

    let b = Browser::new(&s.app);
    let (status, html) = page(enter_code(&b, &auth.user_code).await).await;
    assert_eq!(status, 200, "{html}");
    let link = provider_link(&html, &op.issuer);
    assert_eq!(
        query_value(&link, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert_eq!(query_value(&link, "client_id").as_deref(), Some(CLIENT_ID));
    assert_eq!(query_value(&link, "scope").as_deref(), Some("openid email"));
    assert!(query_value(&link, "prompt").is_none());
    let before = b.session_cookie().unwrap();

    let callback = through_provider(&b, &s.app, &link, "ann", false).await;
    assert!(callback.starts_with(&format!("{}/oidc/demo/callback?", s.app.base_url)));
    let res = b.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    assert_ne!(
        b.session_cookie().unwrap(),
        before,
        "the session id rotates"
    );

    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("ann@shop.example"), "{html}");
    let res = b
        .submit(
            "/device/consent",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.app.poll(&s.pa, PA_SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(token_payload(&body)["sub"], "ann@shop.example");
    assert_eq!(
        grant_subs(&s.app).await,
        [(
            "ann@shop.example".to_owned(),
            vec!["orders:read".to_owned()]
        )]
    );
}

/// A scope that needs a second factor: a sign-in without one is sent back
/// to the provider (prompt=login, max_age=0, acr_values); if the provider
/// still reports none, a page says so and nothing is approved; with `amr`
/// holding `otp` the approval goes through.
#[tokio::test]
async fn a_scope_that_needs_a_second_factor_asks_the_provider_again() {
    let s = setup().await;
    pact_db::scopes::upsert(
        &s.app.db,
        &pact_tests::brand_id("demo"),
        "orders:cancel",
        "Cancel orders",
        true,
    )
    .await
    .unwrap();
    s.app.settle().await;
    let op = node_provider(&s.app).await;
    configure(&s.app, &op.issuer, "sub", &["urn:shop:mfa"]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read orders:cancel", None)
        .await;
    let b = Browser::new(&s.app);
    let (_, html) = page(enter_code(&b, &auth.user_code).await).await;
    let callback =
        through_provider(&b, &s.app, &provider_link(&html, &op.issuer), "ann", false).await;
    assert_eq!(b.client.get(&callback).send().await.unwrap().status(), 303);

    let both = [
        ("action", "approve"),
        ("scope", "orders:read"),
        ("scope", "orders:cancel"),
    ];
    // No second factor yet: back to the provider, asking for one.
    let (status, html) = page(b.submit("/device/consent", "/device/consent", &both).await).await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("needs a second factor"), "{html}");
    let again = provider_link(&html, &op.issuer);
    assert_eq!(query_value(&again, "prompt").as_deref(), Some("login"));
    assert_eq!(query_value(&again, "max_age").as_deref(), Some("0"));
    assert_eq!(
        query_value(&again, "acr_values").as_deref(),
        Some("urn:shop:mfa")
    );
    assert_eq!(status_of(&s.app, &auth.user_code).await, "pending");

    // The provider signs the person in again, still without a second factor.
    let callback = through_provider(&b, &s.app, &again, "ann", false).await;
    let (status, html) = page(b.client.get(&callback).send().await.unwrap()).await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("did not include a second factor"), "{html}");
    assert_eq!(status_of(&s.app, &auth.user_code).await, "pending");
    assert!(grant_subs(&s.app).await.is_empty());

    // Once more, with the one-time code: amr ["pwd", "otp"].
    let (status, html) = page(b.submit("/device/consent", "/device/consent", &both).await).await;
    assert_eq!(status, 403);
    let again = provider_link(&html, &op.issuer);
    let callback = through_provider(&b, &s.app, &again, "ann", true).await;
    let res = b.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    let back = location(&res);
    assert!(back.starts_with("/device/consent?scopes="), "{back}");
    let (status, html) = b.get_html(&back).await;
    assert_eq!(status, 200, "{html}");
    let res = b.submit(&back, "/device/consent", &both).await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.app.poll(&s.pa, PA_SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(token_payload(&body)["sub"], "ann-7f3a");
}

/// Login CSRF cannot happen: a callback carried to another browser (with or
/// without a session of its own) is refused and signs no one in; the right
/// browser's callback works once, and a replay is refused.
#[tokio::test]
async fn a_state_from_another_browser_or_replayed_is_refused() {
    let s = setup().await;
    let op = node_provider(&s.app).await;
    configure(&s.app, &op.issuer, "sub", &[]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let attacker = Browser::new(&s.app);
    let (_, html) = page(enter_code(&attacker, &auth.user_code).await).await;
    let callback = through_provider(
        &attacker,
        &s.app,
        &provider_link(&html, &op.issuer),
        "bob",
        false,
    )
    .await;

    // The victim's browsers: one that never came here, one deciding its own request.
    let fresh = Browser::new(&s.app);
    let (status, html) = page(fresh.client.get(&callback).send().await.unwrap()).await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("not started in this browser"), "{html}");
    let victim = Browser::new(&s.app);
    let own = s
        .app
        .device_authorize(&s.pa, "someone-else", "orders:read", None)
        .await;
    let (status, _) = page(enter_code(&victim, &own.user_code).await).await;
    assert_eq!(status, 200);
    let victim_cookie = victim.session_cookie().unwrap();
    let res = victim.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 403);
    assert!(set_cookie(&res).is_none(), "no session was made or changed");
    assert_eq!(victim.session_cookie().unwrap(), victim_cookie);
    assert_eq!(signed_in_sessions(&s.app).await, 0);

    // The browser that went to the provider: accepted once.
    let res = attacker.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    let signed_in = attacker.session_cookie().unwrap();
    assert_eq!(signed_in_sessions(&s.app).await, 1);
    // Replayed: refused, and the session is left as it was.
    let res = attacker.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 400);
    assert!(set_cookie(&res).is_none());
    assert_eq!(attacker.session_cookie().unwrap(), signed_in);
    assert_eq!(status_of(&s.app, &auth.user_code).await, "pending");
}

/// Back-Channel Logout: signing out at the provider ends the pactd session
/// that came from it, and a forged logout token ends nothing.
#[tokio::test]
async fn back_channel_logout_from_the_provider_ends_the_session() {
    let s = setup().await;
    let op = node_provider(&s.app).await;
    configure(&s.app, &op.issuer, "sub", &[]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let b = Browser::new(&s.app);
    let (_, html) = page(enter_code(&b, &auth.user_code).await).await;
    let callback =
        through_provider(&b, &s.app, &provider_link(&html, &op.issuer), "ann", false).await;
    assert_eq!(b.client.get(&callback).send().await.unwrap().status(), 303);
    assert_eq!(b.get_html("/device/consent").await.0, 200);
    assert_eq!(signed_in_sessions(&s.app).await, 1);

    // A logout token pactd cannot verify: refused, nothing ends.
    let forged = compact(
        &json!({"alg": "ES256", "kid": "nope", "typ": "logout+jwt"}),
        &json!({"iss": op.issuer, "aud": CLIENT_ID, "sub": "ann-7f3a", "jti": "x",
                "iat": now(), "exp": now() + 60,
                "events": {"http://schemas.openid.net/event/backchannel-logout": {}}}),
        &PaKey::new_ec("nope"),
    );
    let res = s
        .app
        .http
        .post(format!("{}/oidc/demo/backchannel-logout", s.app.base_url))
        .form(&[("logout_token", forged.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(signed_in_sessions(&s.app).await, 1);

    // Sign out at the provider (RP-initiated logout's confirmation form).
    let end = format!("{}/session/end", op.issuer);
    let html = b
        .client
        .get(&end)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let at = html.find(r#"name="xsrf" value=""#).expect("the xsrf field") + 19;
    let xsrf = &html[at..at + html[at..].find('"').unwrap()];
    let res = b
        .client
        .post(format!("{end}/confirm"))
        .form(&[("xsrf", xsrf), ("logout", "yes")])
        .send()
        .await
        .unwrap();
    assert!(res.status().is_redirection() || res.status().is_success());
    // The provider has called pactd's back-channel endpoint before answering.
    assert_eq!(signed_in_sessions(&s.app).await, 0);
    let res = b.get("/device/consent").await;
    assert_eq!(res.status(), 303, "signed out: back to code entry");
}

/// Issue 28, finding 7: the back-channel logout endpoint is open to anyone,
/// so everything checkable without the provider's keys is checked before
/// anything is fetched: junk makes pactd fetch nothing from the provider.
/// Tokens that pass those checks but are forged (signed with a key the
/// provider never had) cost at most one discovery fetch, then the cache
/// answers; a real logout token still works.
#[tokio::test]
async fn junk_logout_requests_make_no_fetch_at_the_provider() {
    let s = setup().await;
    let op = fake_provider().await;
    configure(&s.app, &op.issuer, "sub", &[]).await;
    let post = |token: String| {
        s.app
            .http
            .post(format!("{}/oidc/demo/backchannel-logout", s.app.base_url))
            .form(&[("logout_token", token)])
            .send()
    };
    let event = json!({"http://schemas.openid.net/event/backchannel-logout": {}});
    let claims = |edit: &dyn Fn(&mut Value)| {
        let t = now();
        let mut c = json!({"iss": op.issuer, "aud": CLIENT_ID, "sub": "fake-user-1",
                           "jti": uuid::Uuid::new_v4().to_string(), "iat": t, "exp": t + 120,
                           "events": event});
        edit(&mut c);
        c
    };
    let forger = PaKey::new_rsa(op.key.kid());
    let signed = |c: &Value| {
        compact(
            &json!({"alg": "RS256", "kid": op.key.kid(), "typ": "logout+jwt"}),
            c,
            &forger,
        )
    };
    let junk: Vec<String> = vec![
        "not-a-jwt".into(),
        "a.b.c".into(),
        signed(&claims(&|c| c["iss"] = json!("https://evil.example"))),
        signed(&claims(&|c| c["aud"] = json!("someone-else"))),
        signed(&claims(&|c| c["exp"] = json!(now() - 3600))),
        signed(&claims(&|c| {
            c.as_object_mut().unwrap().remove("events");
        })),
        signed(&claims(&|c| c["nonce"] = json!("n"))),
        signed(&claims(&|c| {
            let o = c.as_object_mut().unwrap();
            o.remove("sub");
        })),
        signed(&claims(&|c| {
            c.as_object_mut().unwrap().remove("jti");
        })),
        signed(&claims(&|c| c["iat"] = json!(now() + 3600))),
    ];
    assert_eq!(junk.len(), 10);
    for token in junk {
        assert_eq!(post(token).await.unwrap().status(), 400);
    }
    assert_eq!(
        op.discoveries.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "ten junk requests, no fetch at the provider"
    );
    // Well-formed forgeries: refused on the signature; one discovery fetch.
    for _ in 0..10 {
        assert_eq!(post(signed(&claims(&|_| {}))).await.unwrap().status(), 400);
    }
    assert_eq!(
        op.discoveries.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "discovery is cached"
    );
    // The provider's own token still ends sessions (none here): 200.
    let real = compact(
        &json!({"alg": "RS256", "kid": op.key.kid(), "typ": "logout+jwt"}),
        &claims(&|_| {}),
        &op.key,
    );
    assert_eq!(post(real).await.unwrap().status(), 200);
}

/// Makes pactd sign with a key it does not publish: a new key that is
/// already active but whose `unpublish_at` has passed. Returns its kid.
async fn sign_with_an_unpublished_key(app: &TestApp) -> String {
    let key = pact_jose::ProviderKey::generate().unwrap();
    let sealed = app
        .master_key
        .seal(&key.private_pkcs8_der(), key.kid().as_bytes())
        .unwrap();
    // The node's first key activated when the app started, on the wall clock;
    // a second later on the node's clock the new key is unambiguously the newest.
    app.clock.advance(std::time::Duration::from_secs(2));
    let now = app.state.clock.now();
    pact_db::signing_keys::insert(
        &app.db,
        key.kid(),
        &key.public_jwk(),
        &sealed,
        now - time::Duration::seconds(1),
    )
    .await
    .unwrap();
    sqlx::query("update signing_keys set unpublish_at = $2 where kid = $1")
        .bind(key.kid())
        .bind(now - time::Duration::seconds(1))
        .execute(&app.db)
        .await
        .unwrap();
    app.state.keys.refresh(&app.db, now).await.unwrap();
    let snapshot = app.state.keys.current();
    assert_eq!(snapshot.signing_key(now).unwrap().kid(), key.kid());
    assert!(
        !snapshot
            .published(now)
            .jwks_document()
            .to_string()
            .contains(key.kid())
    );
    key.kid().to_owned()
}

/// `private_key_jwt` at node-oidc-provider, whose client for pactd has
/// pactd's published JWKS as its `jwks_uri` and no secret: while pactd signs
/// with a key it does not publish, the provider refuses the code exchange
/// and no one is signed in; with the published key the whole approval goes
/// through.
#[tokio::test]
async fn private_key_jwt_signs_the_person_in_only_with_a_published_key() {
    let s = setup().await;
    let op = node_provider(&s.app).await;
    configure_auth(&s.app, &op.issuer, "sub", &[], Some("token_endpoint")).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let b = Browser::new(&s.app);
    let (status, html) = page(enter_code(&b, &auth.user_code).await).await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(
        query_value(&provider_link(&html, &op.issuer), "client_id").as_deref(),
        Some(JWT_CLIENT_ID)
    );

    let rogue = sign_with_an_unpublished_key(&s.app).await;
    let callback =
        through_provider(&b, &s.app, &provider_link(&html, &op.issuer), "ann", false).await;
    let res = b.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 401, "the provider refused the assertion");
    assert!(set_cookie(&res).is_none());
    assert_eq!(signed_in_sessions(&s.app).await, 0);
    assert_eq!(status_of(&s.app, &auth.user_code).await, "pending");

    // pactd signs with its published key again: the same person gets through.
    sqlx::query("delete from signing_keys where kid = $1")
        .bind(&rogue)
        .execute(&s.app.db)
        .await
        .unwrap();
    s.app
        .state
        .keys
        .refresh(&s.app.db, s.app.state.clock.now())
        .await
        .unwrap();
    let link = fresh_link(&b, &op.issuer).await;
    let callback = through_provider(&b, &s.app, &link, "ann", false).await;
    let res = b.client.get(&callback).send().await.unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    let res = b
        .submit(
            "/device/consent",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.app.poll(&s.pa, PA_SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(token_payload(&body)["sub"], "ann-7f3a");
}

/// The same journey in Chromium: pactd on `localhost`, the provider on
/// `127.0.0.1`, so the trip out and back is cross-site as in production
/// (the session cookie is `SameSite=Lax`, sent on the provider's redirect
/// back because it is a top-level GET).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_at_the_provider_in_a_real_browser() {
    let app = crate::browser::app().await;
    let pa = app.registered_pa(PA_ISS).await;
    let op = node_provider(&app).await;
    configure(&app, &op.issuer, "email", &[]).await;
    let auth = app
        .device_authorize(&pa, PA_SUB, "orders:read orders:cancel", None)
        .await;
    let out = crate::browser::journey(
        "oidc",
        json!({
            "base": app.state.config.public_url,
            "link": auth.body["verification_uri_complete"],
            "user_code": auth.user_code,
            "login": "ann",
            "password": "ann-password",
            "untick": ["Cancel orders that have not shipped yet"],
            "expect_on_consent": ["ann@shop.example"],
        }),
    )
    .await;
    assert!(
        out["url"].as_str().unwrap().ends_with("/device/done"),
        "{out}"
    );
    let (status, body) = app.poll(&pa, PA_SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(token_payload(&body)["sub"], "ann@shop.example");
    assert_eq!(body["scope"], "orders:read");
}

// ------------------------------------------------------------------ a provider the test controls

/// Discovery, JWKS and a token endpoint that answers with the ID token the
/// test put in `next`. It records the token request for the PKCE and client
/// authentication checks.
struct FakeProvider {
    issuer: String,
    key: PaKey,
    /// When set, the discovery document names another issuer.
    lie: Arc<Mutex<bool>>,
    /// More members of the discovery document.
    extra: Arc<Mutex<Value>>,
    next: Arc<Mutex<Option<String>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    /// How many times its discovery document was fetched.
    discoveries: Arc<std::sync::atomic::AtomicUsize>,
    _server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct FakeState {
    issuer: String,
    jwk: Value,
    lie: Arc<Mutex<bool>>,
    extra: Arc<Mutex<Value>>,
    next: Arc<Mutex<Option<String>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    discoveries: Arc<std::sync::atomic::AtomicUsize>,
}

async fn fake_provider() -> FakeProvider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let key = PaKey::new_rsa("fake-1");
    let state = FakeState {
        issuer: issuer.clone(),
        jwk: serde_json::from_str(&key.public_jwk().to_string()).unwrap(),
        lie: Arc::default(),
        extra: Arc::new(Mutex::new(json!({}))),
        next: Arc::default(),
        seen: Arc::default(),
        discoveries: Arc::default(),
    };
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(|State(s): State<FakeState>| async move {
                s.discoveries
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let named = if *s.lie.lock().unwrap() {
                    "https://another-issuer.example".to_owned()
                } else {
                    s.issuer.clone()
                };
                let mut doc = json!({
                    "issuer": named,
                    "authorization_endpoint": format!("{}/authorize", s.issuer),
                    "token_endpoint": format!("{}/token", s.issuer),
                    "jwks_uri": format!("{}/jwks", s.issuer),
                    "code_challenge_methods_supported": ["S256"],
                });
                for (k, v) in s.extra.lock().unwrap().as_object().unwrap() {
                    doc[k] = v.clone();
                }
                axum::Json(doc)
            }),
        )
        .route(
            "/jwks",
            get(|State(s): State<FakeState>| async move { axum::Json(json!({"keys": [s.jwk]})) }),
        )
        .route(
            "/token",
            post(
                |State(s): State<FakeState>, headers: HeaderMap, body: String| async move {
                    let auth = headers
                        .get("authorization")
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default();
                    s.seen.lock().unwrap().push((auth, body));
                    let token = s.next.lock().unwrap().take().unwrap_or_default();
                    axum::Json(
                        json!({"access_token": "at", "token_type": "Bearer", "id_token": token}),
                    )
                },
            ),
        )
        .with_state(state.clone());
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    FakeProvider {
        issuer,
        key,
        lie: state.lie,
        extra: state.extra,
        next: state.next,
        seen: state.seen,
        discoveries: state.discoveries,
        _server: server,
    }
}

impl FakeProvider {
    fn claims(&self, nonce: &str) -> Value {
        let t = now();
        json!({"iss": self.issuer, "aud": CLIENT_ID, "sub": "fake-user-1", "nonce": nonce,
               "iat": t, "exp": t + 300, "sid": "fake-sid-1"})
    }

    fn sign(&self, claims: &Value) -> String {
        compact(
            &json!({"alg": "RS256", "kid": self.key.kid()}),
            claims,
            &self.key,
        )
    }
}

/// The trip's link from a fresh "Sign in at …" page (the consent page sends
/// a browser that is not signed in there).
async fn fresh_link(b: &Browser, issuer: &str) -> String {
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200, "{html}");
    provider_link(&html, issuer)
}

#[tokio::test]
async fn bad_id_tokens_are_refused_and_sign_no_one_in() {
    let s = setup().await;
    let op = fake_provider().await;
    configure(&s.app, &op.issuer, "sub", &[]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let b = Browser::new(&s.app);
    assert_eq!(enter_code(&b, &auth.user_code).await.status(), 200);
    let forger = PaKey::new_rsa("fake-1");

    type Edit = Box<dyn Fn(&FakeProvider, &str) -> String>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "forged: another key under the provider's kid",
            Box::new(move |op: &FakeProvider, nonce: &str| {
                compact(
                    &json!({"alg": "RS256", "kid": "fake-1"}),
                    &op.claims(nonce),
                    &forger,
                )
            }),
        ),
        (
            "expired",
            Box::new(|op: &FakeProvider, nonce: &str| {
                let mut c = op.claims(nonce);
                c["iat"] = json!(now() - 500);
                c["exp"] = json!(now() - 120);
                op.sign(&c)
            }),
        ),
        (
            "for another audience",
            Box::new(|op: &FakeProvider, nonce: &str| {
                let mut c = op.claims(nonce);
                c["aud"] = json!("another-client");
                op.sign(&c)
            }),
        ),
        (
            "another nonce",
            Box::new(|op: &FakeProvider, _: &str| {
                op.sign(&op.claims("a-nonce-from-another-request"))
            }),
        ),
        (
            "no nonce",
            Box::new(|op: &FakeProvider, nonce: &str| {
                let mut c = op.claims(nonce);
                c.as_object_mut().unwrap().remove("nonce");
                op.sign(&c)
            }),
        ),
        (
            "another issuer",
            Box::new(|op: &FakeProvider, nonce: &str| {
                let mut c = op.claims(nonce);
                c["iss"] = json!("https://evil.example");
                op.sign(&c)
            }),
        ),
        (
            "alg none",
            Box::new(|op: &FakeProvider, nonce: &str| {
                let body = URL_SAFE_NO_PAD.encode(op.claims(nonce).to_string());
                format!("{}.{body}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#))
            }),
        ),
    ];
    for (name, make) in &cases {
        let link = fresh_link(&b, &op.issuer).await;
        let state = query_value(&link, "state").unwrap();
        let nonce = query_value(&link, "nonce").unwrap();
        *op.next.lock().unwrap() = Some(make(&op, &nonce));
        let before = b.session_cookie().unwrap();
        let res = b
            .get(&format!("/oidc/demo/callback?code=c-1&state={state}"))
            .await;
        assert_eq!(res.status(), 401, "{name}");
        assert!(set_cookie(&res).is_none(), "{name}: no session");
        assert_eq!(b.session_cookie().unwrap(), before, "{name}");
        assert_eq!(signed_in_sessions(&s.app).await, 0, "{name}");
        assert_eq!(
            status_of(&s.app, &auth.user_code).await,
            "pending",
            "{name}"
        );
    }

    // RFC 9207: an `iss` on the callback that is not this provider's.
    let link = fresh_link(&b, &op.issuer).await;
    let state = query_value(&link, "state").unwrap();
    let nonce = query_value(&link, "nonce").unwrap();
    *op.next.lock().unwrap() = Some(op.sign(&op.claims(&nonce)));
    let res = b
        .get(&format!(
            "/oidc/demo/callback?code=c-1&state={state}&iss=https%3A%2F%2Fevil.example"
        ))
        .await;
    assert_eq!(res.status(), 401);
    assert!(
        op.next.lock().unwrap().is_some(),
        "the code was never redeemed"
    );
    // A trip for the demo brand returning through another brand's callback.
    pact_db::brands::insert(&s.app.db, &pact_tests::brand_id("other"), "Other", "")
        .await
        .unwrap();
    let link = fresh_link(&b, &op.issuer).await;
    let state = query_value(&link, "state").unwrap();
    let res = b
        .get(&format!("/oidc/other/callback?code=c-1&state={state}"))
        .await;
    assert_eq!(res.status(), 400);
    // A state made before the browser entered another code is void.
    let link = fresh_link(&b, &op.issuer).await;
    let old_state = query_value(&link, "state").unwrap();
    let other = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    assert_eq!(enter_code(&b, &other.user_code).await.status(), 200);
    let res = b
        .get(&format!("/oidc/demo/callback?code=c-1&state={old_state}"))
        .await;
    assert_eq!(res.status(), 400);
    assert_eq!(signed_in_sessions(&s.app).await, 0);
    // A discovery document that speaks for another issuer: nowhere to go.
    *op.lie.lock().unwrap() = true;
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 502, "{html}");
    assert!(!html.contains(&op.issuer), "no link to the provider");
    *op.lie.lock().unwrap() = false;

    // An error from the provider: a clear page naming its code.
    let link = fresh_link(&b, &op.issuer).await;
    let state = query_value(&link, "state").unwrap();
    let (status, html) = b
        .get_html(&format!(
            "/oidc/demo/callback?error=access_denied&state={state}"
        ))
        .await;
    assert_eq!(status, 400);
    assert!(html.contains("access_denied"), "{html}");

    // The same provider with a good token signs the person in, which shows
    // the refusals above were the tokens' doing. PKCE and client auth are
    // checked on the way.
    let link = fresh_link(&b, &op.issuer).await;
    let state = query_value(&link, "state").unwrap();
    let nonce = query_value(&link, "nonce").unwrap();
    let challenge = query_value(&link, "code_challenge").unwrap();
    *op.next.lock().unwrap() = Some(op.sign(&op.claims(&nonce)));
    let res = b
        .get(&format!(
            "/oidc/demo/callback?code=c-good&state={state}&iss={}",
            op.issuer
        ))
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(signed_in_sessions(&s.app).await, 1);
    let (auth_header, body) = op.seen.lock().unwrap().last().cloned().unwrap();
    let expected = format!(
        "Basic {}",
        STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    assert_eq!(auth_header, expected);
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let field = |n: &str| {
        form.iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(field("grant_type"), "authorization_code");
    assert_eq!(field("code"), "c-good");
    assert_eq!(
        field("redirect_uri"),
        format!("{}/oidc/demo/callback", s.app.base_url)
    );
    let verifier = field("code_verifier");
    // RFC 7636 §4.6, computed by the function whose RFC test vector is a unit test.
    assert_eq!(
        pact_server::web::oidc_login::s256_challenge(&verifier),
        challenge
    );

    // A logout token from this provider for that provider session ends it;
    // the same token again is a replay.
    let t = now();
    let logout = compact(
        &json!({"alg": "RS256", "kid": op.key.kid(), "typ": "logout+jwt"}),
        &json!({"iss": op.issuer, "aud": CLIENT_ID, "sid": "fake-sid-1", "jti": "l-1",
                "iat": t, "exp": t + 120,
                "events": {"http://schemas.openid.net/event/backchannel-logout": {}}}),
        &op.key,
    );
    let post = |token: String| {
        s.app
            .http
            .post(format!("{}/oidc/demo/backchannel-logout", s.app.base_url))
            .form(&[("logout_token", token)])
            .send()
    };
    // An ID token is not a logout token.
    assert_eq!(
        post(op.sign(&op.claims(&nonce))).await.unwrap().status(),
        400
    );
    assert_eq!(signed_in_sessions(&s.app).await, 1);
    assert_eq!(post(logout.clone()).await.unwrap().status(), 200);
    assert_eq!(signed_in_sessions(&s.app).await, 0);
    assert_eq!(post(logout).await.unwrap().status(), 400);
}

/// The client assertion pactd sends (OpenID Connect Core §9, RFC 7523 §3):
/// in the form with its type and no `Authorization` header; ES256 under a
/// kid of pactd's published JWKS, whose key verifies it; iss = sub = the
/// client id; one aud, the token endpoint or, when chosen, the issuer; a
/// fresh jti each time; a minute to live. A provider that does not offer
/// private_key_jwt, or ES256 for it, gets no one sent to it.
#[tokio::test]
async fn the_client_assertion_is_fresh_signed_by_a_published_key_and_names_the_provider() {
    let s = setup().await;
    let op = fake_provider().await;
    *op.extra.lock().unwrap() = json!({
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "private_key_jwt"],
        "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
    });
    let jwks: Value = s
        .app
        .http
        .get(format!("{}/a2a/demo/oauth/jwks.json", s.app.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let published =
        pact_jose::ProviderKeySet::from_public_jwks(jwks["keys"].as_array().unwrap()).unwrap();

    let mut jtis = Vec::new();
    for (aud_mode, aud) in [
        ("token_endpoint", format!("{}/token", op.issuer)),
        ("issuer", op.issuer.clone()),
    ] {
        configure_auth(&s.app, &op.issuer, "sub", &[], Some(aud_mode)).await;
        let auth = s
            .app
            .device_authorize(&s.pa, PA_SUB, "orders:read", None)
            .await;
        let b = Browser::new(&s.app);
        assert_eq!(enter_code(&b, &auth.user_code).await.status(), 200);
        let link = fresh_link(&b, &op.issuer).await;
        let state = query_value(&link, "state").unwrap();
        let nonce = query_value(&link, "nonce").unwrap();
        let mut claims = op.claims(&nonce);
        claims["aud"] = json!(JWT_CLIENT_ID);
        *op.next.lock().unwrap() = Some(op.sign(&claims));
        let res = b
            .get(&format!("/oidc/demo/callback?code=c-1&state={state}"))
            .await;
        assert_eq!(res.status(), 303, "{aud_mode}");

        let (auth_header, body) = op.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(auth_header, "", "no client secret is sent");
        let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect();
        let field = |n: &str| {
            let found: Vec<&String> = form
                .iter()
                .filter(|(k, _)| k == n)
                .map(|(_, v)| v)
                .collect();
            assert_eq!(found.len(), 1, "{n} once");
            found[0].clone()
        };
        assert_eq!(
            field("client_assertion_type"),
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        );
        assert_eq!(field("client_id"), JWT_CLIENT_ID);
        let assertion = field("client_assertion");
        let part = |i: usize| -> Value {
            serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(assertion.split('.').nth(i).unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        let header = part(0);
        assert_eq!(header["alg"], "ES256");
        let payload = published.verify_compact(&assertion, "JWT").unwrap();
        let claims: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(claims, part(1));
        assert_eq!(claims["iss"], JWT_CLIENT_ID);
        assert_eq!(claims["sub"], JWT_CLIENT_ID);
        assert_eq!(claims["aud"], json!(aud), "{aud_mode}");
        let iat = claims["iat"].as_i64().unwrap();
        assert!((iat - now()).abs() <= 5);
        assert_eq!(claims["exp"].as_i64().unwrap() - iat, 60);
        let jti = claims["jti"].as_str().unwrap().to_owned();
        assert!(jti.len() >= 43, "256 random bits");
        jtis.push(jti);
    }
    assert_ne!(jtis[0], jtis[1], "a new jti for every assertion");

    // Providers that cannot take pactd's assertion: nobody is sent there.
    for extra in [
        json!({"token_endpoint_auth_methods_supported": ["client_secret_basic"]}),
        json!({}),
        json!({
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "PS256"],
        }),
    ] {
        *op.extra.lock().unwrap() = extra.clone();
        let auth = s
            .app
            .device_authorize(&s.pa, PA_SUB, "orders:read", None)
            .await;
        let b = Browser::new(&s.app);
        let (status, html) = page(enter_code(&b, &auth.user_code).await).await;
        assert_eq!(status, 502, "{extra}: {html}");
        assert!(
            !html.contains(&op.issuer),
            "{extra}: no link to the provider"
        );
    }
}

/// The OpenID sign-in's refusals speak the person's language: a replayed
/// callback in a browser set to German (the switch's cookie), and an unknown
/// state for one that asks for German in `Accept-Language`.
#[tokio::test]
async fn a_german_browser_gets_the_openid_refusals_in_german() {
    let s = setup().await;
    let op = fake_provider().await;
    configure(&s.app, &op.issuer, "sub", &[]).await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let b = Browser::new(&s.app);
    let base = reqwest::Url::parse(&s.app.base_url).unwrap();
    b.jar.add_cookie_str("pactd_lang=de; Path=/", &base);
    let (status, html) = page(enter_code(&b, &auth.user_code).await).await;
    assert_eq!(status, 200);
    assert!(html.contains("<html lang=\"de\""), "{html}");
    let link = provider_link(&html, &op.issuer);
    let state = query_value(&link, "state").unwrap();
    let nonce = query_value(&link, "nonce").unwrap();
    *op.next.lock().unwrap() = Some(op.sign(&op.claims(&nonce)));
    let callback = format!("/oidc/demo/callback?code=c-1&state={state}");
    assert_eq!(b.get(&callback).await.status(), 303);
    let res = b.get(&callback).await;
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["content-language"], "de");
    let html = res.text().await.unwrap();
    assert!(html.contains("Anmeldung nicht angenommen"), "{html}");
    assert!(
        html.contains("Diese Anmeldung wurde bereits verwendet"),
        "{html}"
    );
    assert!(!html.contains("Sign-in not accepted"), "{html}");

    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "accept-language",
        reqwest::header::HeaderValue::from_static("de-CH, en;q=0.5"),
    );
    let german = pact_jose::with_shared_tls(reqwest::Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap();
    let res = german
        .get(format!("{}{callback}", s.app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let html = res.text().await.unwrap();
    assert!(html.contains("nie hier begonnen"), "{html}");
    // The provider's own error, in German, quoting its code.
    let res = german
        .get(format!(
            "{}/oidc/demo/callback?error=access_denied",
            s.app.base_url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let html = res.text().await.unwrap();
    assert!(html.contains("Anmeldung nicht angenommen"), "{html}");
}

// ------------------------------------------------------------------ the conformance suite

/// Decides the conformance runner's device authorizations the way a person
/// at a brand in OpenID mode does: enters the code at pactd, signs in at
/// node-oidc-provider (its login form; ann for the primary account, bob for
/// the secondary), comes back, and ticks exactly the scopes the runner
/// asks for, or denies. A permission that needs a second factor sends the
/// browser back to the provider, where it signs in with the one-time code
/// (the delegated profile itself never approves such a permission at the
/// demo brand: its grants are `orders:read`).
/// Each account keeps its own browser (cookies at pactd and at the provider).
struct OidcApprover {
    base_url: String,
    issuer: String,
    primary: tokio::sync::Mutex<Browser>,
    secondary: tokio::sync::Mutex<Browser>,
}

impl OidcApprover {
    fn new(app: &TestApp, issuer: &str) -> Self {
        Self {
            base_url: app.base_url.clone(),
            issuer: issuer.to_owned(),
            primary: tokio::sync::Mutex::new(Browser::new(app)),
            secondary: tokio::sync::Mutex::new(Browser::new(app)),
        }
    }

    async fn decide(&self, r: &conformance::ApprovalRequest) -> Result<(), String> {
        let (browser, login) = match r.account {
            conformance::Account::Primary => (&self.primary, "ann"),
            conformance::Account::Secondary => (&self.secondary, "bob"),
        };
        let b = browser.lock().await;
        // The link the agent shows: pactd's code entry, the code confirmed.
        let res = b
            .submit("/device", "/device", &[("user_code", r.user_code.as_str())])
            .await;
        let status = res.status().as_u16();
        if status == 200 {
            // Not signed in for the brand yet: the page links to the provider.
            let html = res.text().await.map_err(|e| e.to_string())?;
            self.sign_in(&b, &html, login, false).await?;
        } else if status != 303 {
            return Err(format!(
                "code entry answered {status}: {}",
                res.text().await.unwrap_or_default()
            ));
        }
        let mut fields: Vec<(&str, &str)> = Vec::new();
        match &r.decision {
            conformance::Decision::Approve { scopes } => {
                fields.push(("action", "approve"));
                fields.extend(scopes.iter().map(|s| ("scope", s.as_str())));
            }
            conformance::Decision::Deny => fields.push(("action", "deny")),
        }
        let mut page = "/device/consent".to_owned();
        for _ in 0..3 {
            let (status, html) = b.get_html(&page).await;
            if status != 200 {
                return Err(format!("consent page {page} answered {status}: {html}"));
            }
            let wanted = r.user_code.replace('-', "");
            if !html.replace('-', "").contains(&wanted) {
                return Err(format!("the consent page is not for {}", r.user_code));
            }
            let res = b.submit(&page, "/device/consent", &fields).await;
            match res.status().as_u16() {
                303 if location(&res) == "/device/done" => return Ok(()),
                403 => {
                    // A permission needs a second factor: sign in again with it.
                    let html = res.text().await.map_err(|e| e.to_string())?;
                    page = self.sign_in(&b, &html, login, true).await?;
                }
                other => {
                    return Err(format!(
                        "the decision answered {other}: {}",
                        res.text().await.unwrap_or_default()
                    ));
                }
            }
        }
        Err("pactd kept asking for a second factor".to_owned())
    }

    /// From a page linking to the provider, through its login, back to
    /// pactd's callback; returns where pactd sends the browser next.
    async fn sign_in(
        &self,
        b: &Browser,
        html: &str,
        login: &str,
        otp: bool,
    ) -> Result<String, String> {
        let link = provider_link(html, &self.issuer);
        let callback = back_from_provider(b, &self.base_url, &link, login, otp).await;
        let res = b
            .client
            .get(&callback)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if res.status() != 303 {
            return Err(format!(
                "the callback answered {}: {}",
                res.status(),
                res.text().await.unwrap_or_default()
            ));
        }
        Ok(location(&res))
    }
}

impl conformance::Approver for OidcApprover {
    fn approve<'a>(
        &'a self,
        r: &'a conformance::ApprovalRequest,
    ) -> conformance::BoxFuture<'a, conformance::ApprovalStatus> {
        Box::pin(async move {
            match self.decide(r).await {
                Ok(()) => conformance::ApprovalStatus::Done,
                Err(why) => conformance::ApprovalStatus::Failed(why),
            }
        })
    }
}

/// `pact-agent conformance`'s delegated profile against a brand whose
/// customers sign in at the merchant's OpenID provider (node-oidc-provider,
/// pactd authenticating with private_key_jwt): every check passes, as it
/// does with pactd's own accounts, and the grants went to the provider's
/// two accounts.
#[tokio::test]
async fn the_conformance_delegated_profile_passes_against_a_brand_in_oidc_mode() {
    let (app, home, identity, _jwks) = crate::conformance::pactd_with_agent().await;
    let op = node_provider(&app).await;
    configure_auth(&app, &op.issuer, "sub", &[], Some("token_endpoint")).await;
    let approver = OidcApprover::new(&app, &op.issuer);
    let started = std::time::Instant::now();
    let report = conformance::run(
        crate::conformance::pactd_config(&app, &identity, conformance::Profile::Delegated),
        &approver,
    )
    .await;
    println!(
        "delegated profile, OpenID mode: {:.1} s, {}",
        started.elapsed().as_secs_f64(),
        report.summary()
    );
    crate::conformance::assert_passes(&report, &crate::conformance::UNEXERCISABLE);
    for name in [
        "§5.3.access-denied",
        "§5.3.scope-may-be-less",
        "§5.5.context-other-user",
        "§5.3.expired-token",
    ] {
        assert_eq!(
            report.get(name).unwrap().outcome,
            conformance::Outcome::Pass,
            "{name}"
        );
    }
    let users: Vec<String> = sqlx::query_scalar("select distinct user_sub from grants order by 1")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(users, ["ann-7f3a", "bob-91c2"]);
    std::fs::remove_dir_all(home.dir()).ok();
}
