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
    let sealed = app
        .master_key
        .seal(
            CLIENT_SECRET.as_bytes(),
            &pact_db::brand_oidc::client_secret_aad("demo"),
        )
        .unwrap();
    let mfa_acr: Vec<String> = mfa_acr.iter().map(|s| (*s).to_owned()).collect();
    pact_db::brand_oidc::upsert(
        &app.db,
        &pact_db::brand_oidc::NewBrandOidc {
            brand_id: "demo",
            issuer,
            client_id: CLIENT_ID,
            client_secret_sealed: &sealed,
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
            pact_server::web::oidc_login::redirect_uri(public, "demo"),
        )
        .env(
            "OIDC_BACKCHANNEL_URI",
            pact_server::web::oidc_login::backchannel_logout_uri(public, "demo"),
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
    let mut url = url.to_owned();
    for _ in 0..20 {
        if url.starts_with(&app.base_url) {
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
    pact_db::scopes::upsert(&s.app.db, "demo", "orders:cancel", "Cancel orders", true)
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
    next: Arc<Mutex<Option<String>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    _server: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct FakeState {
    issuer: String,
    jwk: Value,
    lie: Arc<Mutex<bool>>,
    next: Arc<Mutex<Option<String>>>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

async fn fake_provider() -> FakeProvider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let key = PaKey::new_rsa("fake-1");
    let state = FakeState {
        issuer: issuer.clone(),
        jwk: serde_json::from_str(&key.public_jwk().to_string()).unwrap(),
        lie: Arc::default(),
        next: Arc::default(),
        seen: Arc::default(),
    };
    let app = Router::new()
        .route(
            "/.well-known/openid-configuration",
            get(|State(s): State<FakeState>| async move {
                let named = if *s.lie.lock().unwrap() {
                    "https://another-issuer.example".to_owned()
                } else {
                    s.issuer.clone()
                };
                axum::Json(json!({
                    "issuer": named,
                    "authorization_endpoint": format!("{}/authorize", s.issuer),
                    "token_endpoint": format!("{}/token", s.issuer),
                    "jwks_uri": format!("{}/jwks", s.issuer),
                    "code_challenge_methods_supported": ["S256"],
                }))
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
        next: state.next,
        seen: state.seen,
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
    pact_db::brands::insert(&s.app.db, "other", "Other", "")
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
