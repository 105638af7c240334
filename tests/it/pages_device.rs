//! The device pages (RFC 8628 §3.3, PACT §5.2, §7): code entry and its
//! normalisation, clear pages for unknown, expired and used codes, sign-in
//! first, the consent page's content and headers, Approve/Deny through the
//! token endpoint, CSRF/Origin, tampered forms, step-up for `requires_mfa`
//! scopes, the user-code rate limits, and brands' own-login assertions.
//!
//! Browsers are signed in by inserting a session straight into the database
//! (the `/login` page is tested elsewhere).

use std::time::Instant;

use pact_db::sessions::SessionState;
use pact_db::users::User;
use pact_tests::delegation::DeviceAuth;
use pact_tests::pa::{PaKey, b64, compact, now};
use pact_tests::pages::{Browser, add_user, csrf_from, location, set_cookie};
use pact_tests::{TestApp, TestPa};
use reqwest::Response;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

const PA_ISS: &str = "https://pa.example/agents/one";
const PA_SUB: &str = "pa-user-1";
const READ_DESCRIPTION: &str = r#"See <b>your</b> orders & "delivery" status"#;
const LOGIN_URL: &str = "https://login.demo.example/signin";
const LOGIN_ISS: &str = "https://login.demo.example";

struct Setup {
    app: TestApp,
    pa: TestPa,
}

/// pactd whose demo brand offers delegation, one of whose scope descriptions
/// holds HTML, and a registered PA.
async fn setup() -> Setup {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    pact_db::scopes::upsert(
        &app.db,
        &pact_tests::brand_id("demo"),
        "orders:read",
        READ_DESCRIPTION,
        false,
    )
    .await
    .unwrap();
    let pa = app.registered_pa(PA_ISS).await;
    Setup { app, pa }
}

impl Setup {
    async fn authorize(&self) -> DeviceAuth {
        self.app
            .device_authorize(&self.pa, PA_SUB, "orders:read orders:cancel", None)
            .await
    }

    async fn user(&self, email: &str) -> User {
        add_user(&self.app, "demo", email, "correct horse battery").await
    }

    async fn status(&self, auth: &DeviceAuth) -> String {
        sqlx::query_scalar("select status from device_authorizations where user_code = $1")
            .bind(auth.user_code.replace('-', ""))
            .fetch_one(&self.app.db)
            .await
            .unwrap()
    }

    async fn poll(&self, auth: &DeviceAuth) -> (u16, Value) {
        self.app.poll(&self.pa, PA_SUB, &auth.device_code).await
    }
}

/// A browser holding a session made straight in the database; returns the
/// session's id hash too.
async fn browser_with(app: &TestApp, state: SessionState) -> (Browser, Vec<u8>) {
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
    (b, hash)
}

async fn signed_in(app: &TestApp, user: &User) -> (Browser, Vec<u8>) {
    browser_with(
        app,
        SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            user_id: Some(user.id),
            ..SessionState::default()
        },
    )
    .await
}

async fn enter_code(b: &Browser, code: &str) -> Response {
    b.submit("/device", "/device", &[("user_code", code)]).await
}

async fn decide(b: &Browser, fields: &[(&str, &str)]) -> Response {
    b.submit("/device/consent", "/device/consent", fields).await
}

async fn session_authorization(app: &TestApp, hash: &[u8]) -> Option<Uuid> {
    sqlx::query_scalar("select device_authorization_id from sessions where id_hash = $1")
        .bind(hash)
        .fetch_one(&app.db)
        .await
        .unwrap()
}

fn header(res: &Response, name: &str) -> String {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

async fn page(res: Response) -> (u16, String) {
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

// ------------------------------------------------------------------ entry

#[tokio::test]
async fn device_page_renders_and_a_prefilled_code_changes_nothing_until_posted() {
    let s = setup().await;
    let auth = s.authorize().await;
    let b = Browser::new(&s.app);
    let res = b.get("/device").await;
    assert_eq!(res.status(), 200);
    assert!(header(&res, "content-security-policy").contains("frame-ancestors 'none'"));
    assert_eq!(header(&res, "cache-control"), "no-store");
    assert!(
        set_cookie(&res).is_some(),
        "an anonymous session carries the CSRF token"
    );
    let html = res.text().await.unwrap();
    assert!(html.contains("pactd"));
    assert!(html.contains(r#"<label for="user_code">"#));
    assert!(csrf_from(&html).is_some());

    // verification_uri_complete: pre-filled (shown normalised), still needs a click.
    let complete = auth.body["verification_uri_complete"].as_str().unwrap();
    let path = complete.strip_prefix(&s.app.base_url).unwrap();
    let (status, html) = b.get_html(path).await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&format!(r#"value="{}""#, auth.user_code)),
        "{html}"
    );
    // Issue 30, item 9: a live code's page names its shop and agent.
    assert!(
        html.contains("Test PA asks to act for you at Demo Store."),
        "{html}"
    );
    assert!(
        html.contains("<title>Enter your code · Demo Store</title>"),
        "{html}"
    );
    let (_, html) = b.get_html("/device?user_code=BCDF-GHJK").await;
    assert!(!html.contains("asks to act for you"), "{html}");
    assert!(
        !html.contains("Demo Store"),
        "an unknown code names nothing"
    );
    let lower = auth.user_code.to_lowercase().replace('-', "");
    let (_, html) = b.get_html(&format!("/device?user_code={lower}")).await;
    assert!(html.contains(&format!(r#"value="{}""#, auth.user_code)));
    let (_, html) = b.get_html("/device?user_code=%3Cscript%3E").await;
    assert!(!html.contains("<script>"));
    assert_eq!(s.status(&auth).await, "pending");
    let sessions: i64 = sqlx::query_scalar(
        "select count(*) from sessions where device_authorization_id is not null",
    )
    .fetch_one(&s.app.db)
    .await
    .unwrap();
    assert_eq!(sessions, 0, "a GET never confirms a code");
}

#[tokio::test]
async fn typed_codes_are_normalised_and_unknown_ones_get_a_clear_page() {
    let s = setup().await;
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let plain = auth.user_code.replace('-', "");
    let spaced = format!(" {} {} ", &plain[..4], &plain[4..]).to_lowercase();
    for typed in [plain.to_lowercase(), spaced] {
        let (b, hash) = signed_in(&s.app, &user).await;
        let res = enter_code(&b, &typed).await;
        assert_eq!(res.status(), 303, "{typed:?}");
        assert_eq!(location(&res), "/device/consent");
        assert!(session_authorization(&s.app, &hash).await.is_some());
    }

    let (b, hash) = signed_in(&s.app, &user).await;
    let unknown = if plain == "BBBBBBBB" {
        "CCCC-CCCC"
    } else {
        "BBBB-BBBB"
    };
    let (status, html) = page(enter_code(&b, unknown).await).await;
    assert_eq!(status, 404);
    assert!(html.contains("know that code"), "{html}");
    assert!(!html.contains("panicked") && !html.contains("sqlx"));
    let (status, html) = page(enter_code(&b, "AEIOU-123").await).await;
    assert_eq!(status, 400);
    assert!(html.contains("Codes are 8 letters"), "{html}");
    assert_eq!(session_authorization(&s.app, &hash).await, None);
    assert_eq!(s.status(&auth).await, "pending");
}

#[tokio::test]
async fn expired_and_used_codes_get_clear_pages() {
    let s = setup().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;

    let expired = s.authorize().await;
    sqlx::query(
        "update device_authorizations set expires_at = now() - interval '1 minute' where user_code = $1",
    )
    .bind(expired.user_code.replace('-', ""))
    .execute(&s.app.db)
    .await
    .unwrap();
    let (status, html) = page(enter_code(&b, &expired.user_code).await).await;
    assert_eq!(status, 410);
    assert!(html.contains("This code has expired"), "{html}");

    let approved = s.authorize().await;
    s.app
        .approve(&approved.user_code, "someone", &["orders:read"])
        .await;
    let (status, html) = page(enter_code(&b, &approved.user_code).await).await;
    assert_eq!(status, 410);
    assert!(html.contains("already been used"), "{html}");

    let (code, _) = s.poll(&approved).await;
    assert_eq!(code, 200);
    let (status, html) = page(enter_code(&b, &approved.user_code).await).await;
    assert_eq!(status, 410, "redeemed");
    assert!(html.contains("already been used"));

    let denied = s.authorize().await;
    s.app.deny(&denied.user_code).await;
    let (status, html) = page(enter_code(&b, &denied.user_code).await).await;
    assert_eq!(status, 410);
    assert!(html.contains("already been used"));
}

#[tokio::test]
async fn signing_in_comes_first() {
    let s = setup().await;
    let auth = s.authorize().await;
    let b = Browser::new(&s.app);
    let res = enter_code(&b, &auth.user_code).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    let res = b.get("/device/consent").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    // The sign-in page says who is asking (issue 30, item 9); for another
    // brand's sign-in, nothing.
    let (_, html) = b.get_html("/login?brand=demo&next=/device/consent").await;
    assert!(
        html.contains("Test PA asks to act for you at Demo Store. Sign in"),
        "{html}"
    );
    s.app.add_brand("other", "Other Shop").await;
    let (_, html) = b.get_html("/login?brand=other&next=/account").await;
    assert!(!html.contains("Test PA"), "{html}");
    // Signed in for another brand is not signed in for this one.
    s.app.add_brand("elsewhere", "Elsewhere").await;
    let (b, _) = browser_with(
        &s.app,
        SessionState {
            brand_id: Some(pact_tests::brand_id("elsewhere")),
            external_sub: Some("x".into()),
            ..SessionState::default()
        },
    )
    .await;
    let res = enter_code(&b, &auth.user_code).await;
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    assert_eq!(s.status(&auth).await, "pending");
}

// ------------------------------------------------------------------ consent

#[tokio::test]
async fn consent_shows_who_asks_what_when_and_from_where() {
    let s = setup().await;
    let details = json!([{"type": "order_cancellation", "order_ids": ["DEMO-1", "DEMO-2"]}]);
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read orders:cancel", Some(&details))
        .await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    assert_eq!(enter_code(&b, &auth.user_code).await.status(), 303);

    let res = b.get("/device/consent").await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "cache-control"), "no-store");
    assert!(header(&res, "content-security-policy").contains("default-src 'none'"));
    assert_eq!(header(&res, "x-frame-options"), "DENY");
    let html = res.text().await.unwrap();
    assert!(html.contains("Test PA"), "agent name");
    assert!(html.contains("https://pa.example<") || html.contains("https://pa.example "));
    assert!(
        !html.contains("/agents/one"),
        "the origin, not the whole issuer"
    );
    assert!(html.contains("Demo Store"));
    assert!(html.contains("just now"));
    assert!(html.contains(" UTC"));
    assert!(html.contains("127.0.0.1"));
    assert!(html.contains(&auth.user_code));
    assert!(html.contains("ann@example.com"));
    // Descriptions verbatim, escaped, never rendered as markup.
    assert!(!html.contains("<b>your</b>"));
    assert!(
        html.contains("&lt;b&gt;your&lt;/b&gt;") || html.contains("&#60;b&#62;your&#60;/b&#62;"),
        "{html}"
    );
    assert!(html.contains("Cancel orders that have not shipped yet"));
    assert_eq!(html.matches(r#"type="checkbox" name="scope""#).count(), 2);
    // Both scopes and both listed orders pre-ticked (the orders can be
    // unticked to allow less, never more).
    assert_eq!(html.matches(" checked").count(), 4, "pre-ticked");
    assert_eq!(html.matches(r#"name="d0.order_ids""#).count(), 2);
    assert!(html.contains("Cancel only these orders: DEMO-1, DEMO-2"));
    assert!(html.contains(r#"value="approve""#) && html.contains(r#"value="deny""#));

    // Render time, measured in this (debug) build: median of 20 GETs.
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let res = b.get("/device/consent").await;
        assert_eq!(res.status(), 200);
        res.bytes().await.unwrap();
        times.push(t.elapsed());
    }
    times.sort();
    eprintln!("consent page: median of 20 GETs = {:?}", times[10]);
}

#[tokio::test]
async fn approving_every_scope_issues_a_token_for_both() {
    let s = setup().await;
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    // Someone who only typed the code (no sign-in needed for that).
    let stranger = Browser::new(&s.app);
    enter_code(&stranger, &auth.user_code).await;
    let (status, _) = s.poll(&auth).await;
    assert_eq!(status, 400, "nothing is approved by viewing");
    let res = decide(
        &b,
        &[
            ("action", "approve"),
            ("scope", "orders:read"),
            ("scope", "orders:cancel"),
        ],
    )
    .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/done");
    let (status, html) = b.get_html("/device/done").await;
    assert_eq!(status, 200);
    assert!(html.contains("go back to your agent"));
    assert!(html.contains("Test PA"));
    assert!(html.contains("It may:"), "{html}");
    // The stranger does not learn what the person allowed.
    let (status, html) = stranger.get_html("/device/done").await;
    assert_eq!(status, 200);
    assert!(!html.contains("It may:"), "{html}");
    // The next poll comes after the 1 s polling interval (RFC 8628 §3.5).
    s.app.clock.advance(std::time::Duration::from_millis(1100));
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "orders:cancel orders:read");
    let sub: String =
        sqlx::query_scalar("select user_sub from grants order by created_at desc limit 1")
            .fetch_one(&s.app.db)
            .await
            .unwrap();
    assert_eq!(user.subject(), sub.as_str());
    // The consent page for a decided request says so.
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 410);
    assert!(html.contains("already been used"));

    // A new request covered by that grant is shown as such, and still waits
    // for a click (PACT §5.2, pactd: never approve without one).
    let again = s.authorize().await;
    assert_eq!(
        location(&enter_code(&b, &again.user_code).await),
        "/device/consent"
    );
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(html.contains("You already allowed this agent"), "{html}");
    let (status, body) = s.poll(&again).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
}

#[tokio::test]
async fn unticking_a_scope_grants_less_and_deny_is_access_denied() {
    let s = setup().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;

    let auth = s.authorize().await;
    enter_code(&b, &auth.user_code).await;
    let res = decide(&b, &[("action", "approve"), ("scope", "orders:read")]).await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "orders:read");

    let other = s.user("bob@example.com").await;
    let (b, _) = signed_in(&s.app, &other).await;
    let auth = s.authorize().await;
    enter_code(&b, &auth.user_code).await;
    let res = decide(&b, &[("action", "deny"), ("scope", "orders:read")]).await;
    assert_eq!(location(&res), "/device/done");
    let (_, html) = b.get_html("/device/done").await;
    assert!(html.contains("You declined"));
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "access_denied");
}

#[tokio::test]
async fn approve_with_nothing_ticked_asks_to_tick_one_or_deny() {
    let s = setup().await;
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let (status, html) = page(decide(&b, &[("action", "approve")]).await).await;
    assert_eq!(status, 400);
    assert!(html.contains("Tick at least one permission to approve, or choose Deny"));
    assert_eq!(
        html.matches(" checked").count(),
        0,
        "the form shows their (empty) choice"
    );
    assert_eq!(s.status(&auth).await, "pending");
}

#[tokio::test]
async fn csrf_and_origin_are_checked_and_failures_change_nothing() {
    let s = setup().await;
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let approve = [("action", "approve"), ("scope", "orders:read")];

    let res = b.post("/device/consent", &approve).await;
    assert_eq!(res.status(), 403, "no CSRF token");
    let mut wrong = approve.to_vec();
    wrong.push(("csrf", "not-the-token"));
    assert_eq!(b.post("/device/consent", &wrong).await.status(), 403);

    let (_, html) = b.get_html("/device/consent").await;
    let csrf = csrf_from(&html).unwrap();
    let mut right = approve.to_vec();
    right.push(("csrf", &csrf));
    let res = b
        .client
        .post(b.url("/device/consent"))
        .header("origin", "https://evil.example")
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "foreign Origin");
    let res = b
        .client
        .post(b.url("/device/consent"))
        .form(&right)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "no Origin and no Sec-Fetch-Site");
    let res = b
        .client
        .post(b.url("/device"))
        .header("origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str()), ("user_code", &auth.user_code)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(s.status(&auth).await, "pending");
    let (status, body) = s.poll(&auth).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
}

#[tokio::test]
async fn scopes_that_were_not_requested_cannot_be_approved() {
    let s = setup().await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let (status, html) = page(
        decide(
            &b,
            &[
                ("action", "approve"),
                ("scope", "orders:read"),
                ("scope", "orders:cancel"),
            ],
        )
        .await,
    )
    .await;
    assert_eq!(status, 400);
    assert!(html.contains("Only the permissions this agent asked for"));
    let res = decide(&b, &[("action", "approve"), ("scope", "admin")]).await;
    assert_eq!(res.status(), 400);
    let res = decide(&b, &[("action", "maybe"), ("scope", "orders:read")]).await;
    assert_eq!(res.status(), 400);
    assert_eq!(s.status(&auth).await, "pending");
    let grants: i64 = sqlx::query_scalar("select count(*) from grants")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(grants, 0);
}

/// Issue 30, item 7: a requested `requires_mfa` scope sends the person to
/// the second factor before the consent page (and back to it with the same
/// ticks), so that one Approve decides; Approve still checks it.
#[tokio::test]
async fn requires_mfa_scopes_need_a_recent_second_factor() {
    let s = setup().await;
    pact_db::scopes::upsert(
        &s.app.db,
        &pact_tests::brand_id("demo"),
        "orders:cancel",
        "Cancel orders that have not shipped yet",
        true,
    )
    .await
    .unwrap();
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let (b, hash) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let res = b.get("/device/consent").await;
    assert_eq!(res.status(), 303);
    let to = location(&res);
    let query = to.strip_prefix("/login/second-factor?").unwrap();
    let next: String = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "next")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    assert_eq!(next, "/device/consent?scopes=orders%3Acancel+orders%3Aread");
    // The second-factor page offers the request without that permission.
    let (_, html) = b.get_html(&to).await;
    assert!(html.contains("href=\"/device/consent?mfa=skip\""), "{html}");
    let (status, html) = b.get_html("/device/consent?mfa=skip").await;
    assert_eq!(status, 200);
    assert!(html.contains("needs a second factor"));
    assert_eq!(html.matches(" checked").count(), 1, "only orders:read");

    // Ticking it again there: Approve still asks for the second factor.
    let both = [
        ("action", "approve"),
        ("scope", "orders:read"),
        ("scope", "orders:cancel"),
    ];
    let res = b
        .submit("/device/consent?mfa=skip", "/device/consent", &both)
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(
        location(&res),
        to,
        "Approve sends to the same second factor"
    );
    assert_eq!(s.status(&auth).await, "pending");

    // A second factor older than ten minutes does not count either.
    sqlx::query("update sessions set mfa_at = now() - interval '11 minutes' where id_hash = $1")
        .bind(&hash)
        .execute(&s.app.db)
        .await
        .unwrap();
    let res = b.get(&next).await;
    assert!(location(&res).starts_with("/login/second-factor?"));
    assert_eq!(s.status(&auth).await, "pending");

    // After the second factor (as /login/second-factor records it), the form
    // comes back with the person's ticks, and one Approve works.
    sqlx::query("update sessions set mfa_at = now() where id_hash = $1")
        .bind(&hash)
        .execute(&s.app.db)
        .await
        .unwrap();
    let (status, html) = b.get_html("/device/consent?scopes=orders%3Acancel").await;
    assert_eq!(status, 200);
    assert_eq!(html.matches(" checked").count(), 1, "their ticks are kept");
    let res = b.submit(&next, "/device/consent", &both).await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "orders:cancel orders:read");

    // Later, a step-up for a scope that needs no second factor: its grant
    // carries orders:cancel on with a new lifetime, so it needs a recent
    // second factor all the same.
    sqlx::query("update sessions set mfa_at = now() - interval '11 minutes' where id_hash = $1")
        .bind(&hash)
        .execute(&s.app.db)
        .await
        .unwrap();
    let again = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    enter_code(&b, &again.user_code).await;
    let res = b
        .submit(
            "/device/consent?mfa=skip",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert!(
        location(&res).starts_with("/login/second-factor?"),
        "{}",
        location(&res)
    );
    assert_eq!(s.status(&again).await, "pending");
}

/// An approval racing the account's deletion (another tab) cannot slip a
/// grant past it: the deletion holds the account's row while it revokes the
/// account's grants and removes it; the approval waits for it, then finds
/// the account gone and approves nothing.
#[tokio::test]
async fn an_approval_racing_the_accounts_deletion_leaves_no_grant() {
    let s = setup().await;
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read", None)
        .await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let (status, _) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    let mut deletion = s.app.db.begin().await.unwrap();
    pact_db::users::lock(&mut *deletion, user.id).await.unwrap();
    let approve = decide(&b, &[("action", "approve"), ("scope", "orders:read")]);
    let delete = async {
        // The approval is on its way and waits for the account's row.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        pact_db::grants::revoke_all_for_user(
            &mut *deletion,
            &pact_tests::brand_id("demo"),
            &user.subject(),
            "account deleted",
        )
        .await
        .unwrap();
        pact_db::users::delete(&mut *deletion, user.id)
            .await
            .unwrap();
        deletion.commit().await.unwrap();
    };
    let (res, ()) = tokio::join!(approve, delete);
    assert_eq!(res.status(), 404, "the account is gone: nothing approved");
    let live: i64 = sqlx::query_scalar("select count(*) from grants where revoked_at is null")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(live, 0);
    assert_eq!(s.status(&auth).await, "pending");
}

#[tokio::test]
async fn unticking_the_mfa_scope_needs_no_second_factor() {
    let s = setup().await;
    pact_db::scopes::upsert(
        &s.app.db,
        &pact_tests::brand_id("demo"),
        "orders:cancel",
        "Cancel",
        true,
    )
    .await
    .unwrap();
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    enter_code(&b, &auth.user_code).await;
    let res = b
        .submit(
            "/device/consent?mfa=skip",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(location(&res), "/device/done");
}

// ------------------------------------------------------------------ rate limits

#[tokio::test]
async fn code_entry_is_rate_limited_per_session() {
    let s = setup().await;
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    for i in 0..5 {
        let res = enter_code(&b, "BBBB-BBBB").await;
        assert_eq!(res.status(), 404, "attempt {i}");
    }
    let res = enter_code(&b, "BBBB-BBBB").await;
    assert_eq!(res.status(), 429);
    let wait: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=11).contains(&wait), "{wait}");
    let html = res.text().await.unwrap();
    assert!(html.contains("Too many codes were tried"));
    // Even the right code waits: the limit is checked before the lookup.
    let auth = s.authorize().await;
    assert_eq!(enter_code(&b, &auth.user_code).await.status(), 429);
    // Another session from the same address still has tokens.
    let (other, _) = signed_in(&s.app, &user).await;
    assert_eq!(enter_code(&other, &auth.user_code).await.status(), 303);
}

#[tokio::test]
async fn code_entry_is_rate_limited_per_ip() {
    let s = setup().await;
    let mut tried = 0;
    let mut limited = None;
    'outer: for _ in 0..4 {
        let b = Browser::new(&s.app);
        for _ in 0..4 {
            let res = enter_code(&b, "BBBB-BBBB").await;
            if res.status() == 429 {
                limited = Some(res);
                break 'outer;
            }
            assert_eq!(res.status(), 404);
            tried += 1;
        }
    }
    assert!(
        (10..=11).contains(&tried),
        "ten attempts per address, then a wait: {tried}"
    );
    let res = limited.unwrap();
    assert!(header(&res, "retry-after").parse::<u64>().unwrap() >= 1);
}

/// A value with a right-to-left override stored before such values were
/// refused is shown on consent with the character made visible, never
/// rendered (which would show the rest of the value reversed).
#[tokio::test]
async fn a_bidi_value_on_the_consent_page_is_shown_visibly() {
    let s = setup().await;
    let details = json!([{"type": "order_cancellation", "order_ids": ["DEMO-1"]}]);
    let auth = s
        .app
        .device_authorize(&s.pa, PA_SUB, "orders:read orders:cancel", Some(&details))
        .await;
    sqlx::query("update device_authorizations set authorization_details = $1 where user_code = $2")
        .bind(json!([{"type": "order_cancellation", "order_ids": ["DEMO-1\u{202E}9"]}]))
        .bind(auth.user_code.replace('-', ""))
        .execute(&s.app.db)
        .await
        .unwrap();
    let user = s.user("ann@example.com").await;
    let (b, _) = signed_in(&s.app, &user).await;
    assert_eq!(enter_code(&b, &auth.user_code).await.status(), 303);
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("DEMO-1[U+202E]9"), "{html}");
    assert!(!html.contains('\u{202E}'));
}

// ------------------------------------------------------------------ brand login

/// Gives `brand` its own login, with `signer`'s JWKS.
async fn brand_login(app: &TestApp, brand: &str, url: &str, signer: &TestPa) {
    for (k, v) in [
        ("login_url", url),
        ("login_jwks_uri", signer.jwks_uri.as_str()),
    ] {
        pact_db::brands::set_setting(&app.db, &pact_tests::brand_id(brand), k, &json!(v))
            .await
            .unwrap();
    }
    app.settle().await;
}

fn assertion_claims(app: &TestApp, user_code: &str, state: &str) -> Value {
    let t = now();
    json!({
        "iss": LOGIN_ISS,
        "aud": format!("{}/device/assertion", app.state.config.public_url),
        "sub": "brand-user-42",
        "user_code": user_code,
        "state": state,
        "jti": Uuid::new_v4().to_string(),
        "iat": t,
        "exp": t + 120,
    })
}

fn sign(signer: &TestPa, claims: &Value) -> String {
    compact(&signer.header(), claims, &signer.current_key())
}

/// The `state` of the brand-login link on a page (what the brand must echo).
fn link_state(html: &str) -> String {
    let at = html
        .find("state=")
        .unwrap_or_else(|| panic!("no brand-login link with a state:\n{html}"));
    html[at + 6..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// Enters `code` and leaves for the brand's login as the person would;
/// returns the link's `state`.
async fn leave_for_brand_login(b: &Browser, code: &str) -> String {
    let (status, html) = page(enter_code(b, code).await).await;
    assert_eq!(status, 200, "{html}");
    link_state(&html)
}

/// POSTs an assertion as the brand's login page would: cross-site.
async fn post_assertion(b: &Browser, assertion: &str) -> Response {
    b.client
        .post(b.url("/device/assertion"))
        .header("origin", LOGIN_ISS)
        .form(&[("assertion", assertion)])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_brand_login_assertion_signs_the_person_in_for_consent() {
    let s = setup().await;
    let signer = TestPa::start(LOGIN_ISS).await;
    brand_login(&s.app, "demo", LOGIN_URL, &signer).await;
    let auth = s.authorize().await;

    let b = Browser::new(&s.app);
    let (status, html) = page(enter_code(&b, &auth.user_code).await).await;
    assert_eq!(status, 200);
    let state = link_state(&html);
    let return_to = pact_tests::pages::enc(&format!("{}/device/assertion", s.app.base_url));
    let link = format!(
        "{LOGIN_URL}?user_code={}&amp;state={state}&amp;return_to={return_to}",
        auth.user_code
    );
    let link_alt = link.replace("&amp;", "&#38;");
    assert!(html.contains(&link) || html.contains(&link_alt), "{html}");
    let before = b.session_cookie().unwrap();

    let token = sign(&signer, &assertion_claims(&s.app, &auth.user_code, &state));
    let res = post_assertion(&b, &token).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    let after = b.session_cookie().unwrap();
    assert_ne!(before, after, "the session id rotates");
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(html.contains("brand-user-42"));

    // Replay: refused (the hand-off cookie was spent with it), and the
    // session stays as it was.
    let res = post_assertion(&b, &token).await;
    assert_eq!(res.status(), 403);
    assert!(set_cookie(&res).is_none());
    assert_eq!(b.session_cookie().unwrap(), after);

    let res = decide(&b, &[("action", "approve"), ("scope", "orders:read")]).await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 200, "{body}");
    let sub: String = sqlx::query_scalar("select user_sub from grants")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(sub, "brand-user-42");
}

#[tokio::test]
async fn an_assertion_with_amr_mfa_satisfies_step_up() {
    let s = setup().await;
    pact_db::scopes::upsert(
        &s.app.db,
        &pact_tests::brand_id("demo"),
        "orders:cancel",
        "Cancel",
        true,
    )
    .await
    .unwrap();
    let signer = TestPa::start(LOGIN_ISS).await;
    brand_login(&s.app, "demo", LOGIN_URL, &signer).await;
    let both = [
        ("action", "approve"),
        ("scope", "orders:read"),
        ("scope", "orders:cancel"),
    ];

    let auth = s.authorize().await;
    let b = Browser::new(&s.app);
    let state = leave_for_brand_login(&b, &auth.user_code).await;
    let token = sign(&signer, &assertion_claims(&s.app, &auth.user_code, &state));
    assert_eq!(post_assertion(&b, &token).await.status(), 303);
    let (status, html) = page(decide(&b, &both).await).await;
    assert_eq!(status, 403, "the brand did not vouch for a second factor");
    assert!(html.contains("needs a second factor"));
    assert_eq!(s.status(&auth).await, "pending");
    // The way back to the brand's login binds this browser again.
    let state = link_state(&html);

    let mut claims = assertion_claims(&s.app, &auth.user_code, &state);
    claims["amr"] = json!(["pwd", "mfa"]);
    assert_eq!(
        post_assertion(&b, &sign(&signer, &claims)).await.status(),
        303
    );
    assert_eq!(location(&decide(&b, &both).await), "/device/done");
}

#[tokio::test]
async fn bad_brand_login_assertions_are_refused_and_change_nothing() {
    let s = setup().await;
    let signer = TestPa::start(LOGIN_ISS).await;
    brand_login(&s.app, "demo", LOGIN_URL, &signer).await;
    let auth = s.authorize().await;

    // A live code of another brand with its own login.
    s.app.add_brand("other", "Other Shop").await;
    pact_db::scopes::upsert(
        &s.app.db,
        &pact_tests::brand_id("other"),
        "orders:read",
        "Read",
        false,
    )
    .await
    .unwrap();
    let other_signer = TestPa::start("https://login.other.example").await;
    brand_login(
        &s.app,
        "other",
        "https://login.other.example/in",
        &other_signer,
    )
    .await;
    let res = s
        .app
        .http
        .post(format!(
            "{}/oauth/device_authorization",
            s.app.iface("other")
        ))
        .bearer_auth(s.pa.token(PA_SUB, s.app.audience()))
        .form(&[("client_id", PA_ISS), ("scope", "orders:read")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let other_code = res.json::<Value>().await.unwrap()["user_code"]
        .as_str()
        .unwrap()
        .to_owned();

    // A browser that entered the code (which gives it a session) and left for
    // the brand's login page.
    let b = Browser::new(&s.app);
    let state = leave_for_brand_login(&b, &auth.user_code).await;
    let good = assertion_claims(&s.app, &auth.user_code, &state);
    let edited = |edit: &dyn Fn(&mut Value)| {
        let mut c = good.clone();
        c["jti"] = json!(Uuid::new_v4().to_string());
        edit(&mut c);
        sign(&signer, &c)
    };
    let stranger = PaKey::new_ec("k1");
    let mut cases: Vec<(&str, String)> = vec![
        (
            "wrong audience",
            edited(&|c| c["aud"] = json!("https://elsewhere.example/device/assertion")),
        ),
        (
            "audience array",
            edited(&|c| {
                let aud = c["aud"].clone();
                c["aud"] = json!([aud]);
            }),
        ),
        (
            "expired",
            edited(&|c| {
                c["iat"] = json!(now() - 400);
                c["exp"] = json!(now() - 100);
            }),
        ),
        ("too long-lived", edited(&|c| c["exp"] = json!(now() + 600))),
        (
            "issued in the future",
            edited(&|c| {
                c["iat"] = json!(now() + 200);
                c["exp"] = json!(now() + 300);
            }),
        ),
        (
            "another brand's code",
            edited(&|c| c["user_code"] = json!(other_code)),
        ),
        (
            "unknown code",
            edited(&|c| c["user_code"] = json!("BBBB-BBBB")),
        ),
        (
            "no code",
            edited(&|c| {
                c.as_object_mut().unwrap().remove("user_code");
            }),
        ),
        (
            "no jti",
            edited(&|c| {
                c.as_object_mut().unwrap().remove("jti");
            }),
        ),
        (
            "wrong issuer",
            edited(&|c| c["iss"] = json!("https://login.evil.example")),
        ),
        (
            "no sub",
            edited(&|c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
        ),
        ("other key", compact(&signer.header(), &good, &stranger)),
        (
            "alg none",
            format!(
                "{}.{}.",
                b64(json!({"alg": "none", "typ": "JWT"}).to_string().as_bytes()),
                b64(good.to_string().as_bytes())
            ),
        ),
        (
            "alg HS256",
            format!(
                "{}.{}.{}",
                b64(json!({"alg": "HS256", "kid": "k1"}).to_string().as_bytes()),
                b64(good.to_string().as_bytes()),
                b64(b"forged")
            ),
        ),
        ("garbage", "not-a-jwt".to_owned()),
        ("empty", String::new()),
    ];
    // The other brand's own valid assertion for its code is no key to ours.
    let mut theirs = good.clone();
    theirs["iss"] = json!("https://login.other.example");
    theirs["user_code"] = json!(auth.user_code);
    cases.push(("other brand's signer", sign(&other_signer, &theirs)));
    cases.push((
        "no state",
        edited(&|c| {
            c.as_object_mut().unwrap().remove("state");
        }),
    ));
    cases.push(("empty state", edited(&|c| c["state"] = json!(""))));
    let other_browser = Browser::new(&s.app);
    let other_state = leave_for_brand_login(&other_browser, &auth.user_code).await;
    assert_ne!(other_state, state);
    cases.push((
        "another browser's state",
        edited(&|c| c["state"] = json!(other_state)),
    ));

    let cookie = b.session_cookie().unwrap();
    for (what, token) in &cases {
        let res = post_assertion(&b, token).await;
        let status = res.status().as_u16();
        assert!(
            status == 400 || status == 401 || status == 403,
            "{what}: {status}"
        );
        assert!(set_cookie(&res).is_none(), "{what}");
        let html = res.text().await.unwrap();
        assert!(html.contains("Sign-in not accepted"), "{what}");
        assert!(!html.contains(token.as_str()) || token.is_empty(), "{what}");
    }
    assert_eq!(b.session_cookie().unwrap(), cookie);
    assert_eq!(s.status(&auth).await, "pending");
    let jtis: i64 = sqlx::query_scalar("select count(*) from brand_assertion_jtis")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(jtis, 0);
    let sessions: i64 =
        sqlx::query_scalar("select count(*) from sessions where external_sub is not null")
            .fetch_one(&s.app.db)
            .await
            .unwrap();
    assert_eq!(sessions, 0);

    // The good one still works after all that.
    assert_eq!(
        post_assertion(&b, &sign(&signer, &good)).await.status(),
        303
    );
}

/// Login CSRF through the brand's own login: an attacker who completed the
/// brand's login for their own account makes a victim's browser post that
/// genuine assertion (an auto-submitting form on any site). The victim's
/// browser never left for the brand's login with that state, so it is
/// refused and the victim stays who they were.
#[tokio::test]
async fn an_assertion_posted_from_another_browser_is_refused_and_the_victim_is_unchanged() {
    let s = setup().await;
    let signer = TestPa::start(LOGIN_ISS).await;
    brand_login(&s.app, "demo", LOGIN_URL, &signer).await;

    // The attacker's own trip: their code, their browser, their account.
    let attacker_auth = s.authorize().await;
    let attacker = Browser::new(&s.app);
    let attacker_state = leave_for_brand_login(&attacker, &attacker_auth.user_code).await;
    let mut claims = assertion_claims(&s.app, &attacker_auth.user_code, &attacker_state);
    claims["sub"] = json!("attacker-7");
    let planted = sign(&signer, &claims);

    // The victim, on their way to the brand's login for their own agent: their
    // browser holds a session and its own hand-off cookie, and this client
    // sends every cookie, cross-site or not (the worst case for us).
    let victim_auth = s.authorize().await;
    let victim = Browser::new(&s.app);
    let victim_state = leave_for_brand_login(&victim, &victim_auth.user_code).await;
    let victim_cookie = victim.session_cookie().unwrap();

    let res = post_assertion(&victim, &planted).await;
    assert!(set_cookie(&res).is_none());
    let (status, html) = page(res).await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("not started in this browser"), "{html}");
    assert_eq!(victim.session_cookie().unwrap(), victim_cookie);
    let (sub, on): (Option<String>, Option<Uuid>) = sqlx::query_as(
        "select external_sub, device_authorization_id from sessions where id_hash = $1",
    )
    .bind(pact_server::domain::secrets::hash(&victim_cookie))
    .fetch_one(&s.app.db)
    .await
    .unwrap();
    assert_eq!(sub, None, "the victim was not signed in as anyone");
    let victim_auth_id: Uuid =
        sqlx::query_scalar("select id from device_authorizations where user_code = $1")
            .bind(victim_auth.user_code.replace('-', ""))
            .fetch_one(&s.app.db)
            .await
            .unwrap();
    assert_eq!(
        on,
        Some(victim_auth_id),
        "still on the victim's own request"
    );

    // A browser that never went anywhere (no cookies at all) is refused too.
    let fresh = Browser::new(&s.app);
    let (status, _) = page(post_assertion(&fresh, &planted).await).await;
    assert_eq!(status, 403);
    assert!(fresh.session_cookie().is_none());
    let attacker_sessions: i64 =
        sqlx::query_scalar("select count(*) from sessions where external_sub = 'attacker-7'")
            .fetch_one(&s.app.db)
            .await
            .unwrap();
    assert_eq!(attacker_sessions, 0);

    // The refusals spent nothing: the attacker's own browser still can use it,
    // and the victim's next genuine sign-in works.
    assert_eq!(post_assertion(&attacker, &planted).await.status(), 303);
    let own = assertion_claims(&s.app, &victim_auth.user_code, &victim_state);
    assert_eq!(
        post_assertion(&victim, &sign(&signer, &own)).await.status(),
        303
    );
    let (status, html) = victim.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(html.contains("brand-user-42"), "{html}");
    assert!(!html.contains("attacker-7"));
}

#[tokio::test]
async fn the_whole_flow_through_the_real_sign_in_page() {
    let s = setup().await;
    let auth = s.authorize().await;
    let user = s.user("ann@example.com").await;
    let b = Browser::new(&s.app);
    let res = enter_code(&b, &auth.user_code).await;
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    let res = b
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/device/consent",
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("ann@example.com"));
    let res = decide(&b, &[("action", "approve"), ("scope", "orders:read")]).await;
    assert_eq!(location(&res), "/device/done");
    let (status, body) = s.poll(&auth).await;
    assert_eq!(status, 200, "{body}");
    let sub: String = sqlx::query_scalar("select user_sub from grants")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(user.subject(), sub.as_str());
}
