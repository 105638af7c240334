//! "Who is asking" (issue 9, item 8): the platform's links and logo on the
//! consent page (RFC 7591 §2 client metadata: client_uri, logo_uri,
//! policy_uri, tos_uri), the logo fetched by pactd under the SSRF guard and
//! served from pactd's own origin, "Not you?" back to the same request, and
//! the brand's logo and accent on its pages.
//!
//! Registration goes through the same `pact_server::who` functions, in the
//! same order, as `pactd agent add` / `pactd brand set`.

use pact_db::sessions::SessionState;
use pact_server::who::{self, LinkFlags};
use pact_tests::logo_server::{BRAND_LOGO, LogoServer, PA_LOGO};
use pact_tests::pages::{Browser, add_user, location};
use pact_tests::{TestApp, TestPa};
use reqwest::Response;
use time::{Duration, OffsetDateTime};

const PA_ISS: &str = "https://pa.example/agents/one";
const PA_SUB: &str = "pa-user-1";
const PASSWORD: &str = "correct horse battery";

fn header(res: &Response, name: &str) -> String {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// What `pactd agent add … --logo-uri … --homepage …` does after its
/// registration: check every link, fetch the logo, store both together.
async fn register_links(app: &TestApp, issuer: &str, flags: &LinkFlags) -> Result<(), String> {
    flags.check()?;
    let logo = match flags.logo_to_fetch() {
        Some(uri) => Some(who::fetch_for_registration(uri, true).await?),
        None => None,
    };
    let mut tx = app.db.begin().await.unwrap();
    who::store_links(
        &mut tx,
        issuer,
        flags,
        logo.as_ref(),
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    app.settle().await;
    Ok(())
}

fn links(logo: Option<String>) -> LinkFlags {
    LinkFlags {
        homepage: Some("https://pa.example/".into()),
        logo,
        policy: Some("https://legal.pa.example/privacy".into()),
        tos: Some("https://legal.pa.example/terms".into()),
    }
}

async fn logo_count(app: &TestApp) -> i64 {
    pact_db::logos::count(&app.db).await.unwrap()
}

/// Every `src="…"` in a page: each must be on pactd's own origin.
fn sources(html: &str) -> Vec<String> {
    html.split("src=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

#[tokio::test]
async fn registration_refuses_bad_links_and_colours() {
    for (flag, bad) in [
        ("--homepage", "http://pa.example/"),
        ("--homepage", "javascript:alert(1)"),
        ("--policy-uri", "https://user:pw@pa.example/privacy"),
        ("--tos-uri", "https://pa.example/terms#top"),
        ("--logo-uri", "https://169.254.169.254/latest/meta-data"),
        ("--logo-uri", "https://[fd00::1]/logo.png"),
        ("--logo-uri", "data:image/png;base64,iVBORw0KGgo="),
        ("--homepage", "https://pa.example/\u{202e}fdp.exe"),
        ("--homepage", "https://pa.example/\u{200b}"),
    ] {
        let mut flags = LinkFlags::default();
        match flag {
            "--homepage" => flags.homepage = Some(bad.into()),
            "--policy-uri" => flags.policy = Some(bad.into()),
            "--tos-uri" => flags.tos = Some(bad.into()),
            _ => flags.logo = Some(bad.into()),
        }
        let err = flags.check().expect_err(bad);
        assert!(err.starts_with(flag), "{bad}: {err}");
    }
    assert!(
        links(Some("https://pa.example/logo.png".into()))
            .check()
            .is_ok()
    );
    // http only for loopback (local development), as for a jwksUri.
    assert!(
        LinkFlags {
            homepage: Some("http://127.0.0.1:9000/".into()),
            ..LinkFlags::default()
        }
        .check()
        .is_ok()
    );

    for bad in ["0b5cad", "#0b5cadff", "#0b5", "blue", "#12345g"] {
        let err = who::check_accent(bad).expect_err(bad);
        assert!(err.contains("#0b5cad"), "{err}");
    }
    // Buttons draw white text on the accent: it needs 4.5:1 against white.
    let err = who::check_accent("#ffcc00").unwrap_err();
    assert!(err.contains("4.5:1") && err.contains("darker"), "{err}");
    assert_eq!(who::check_accent("#7A1F5C").unwrap(), "#7a1f5c");

    assert_eq!(who::check_brand_logo(BRAND_LOGO).unwrap(), "image/png");
    assert!(who::check_brand_logo(pact_tests::logo_server::EVIL_SVG).is_err());
    assert!(
        who::check_brand_logo(b"GIF89a....").is_err(),
        "not GIF for brands"
    );
    let mut big = BRAND_LOGO.to_vec();
    big.resize(256 * 1024 + 1, 0);
    assert!(who::check_brand_logo(&big).unwrap_err().contains("256 KiB"));
}

#[tokio::test]
async fn the_logo_is_fetched_by_pactd_and_served_from_its_origin() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(PA_ISS).await;
    let platform = LogoServer::start().await;
    register_links(&app, &pa.issuer, &links(Some(platform.url("/logo.png"))))
        .await
        .unwrap();
    assert_eq!(platform.hits(), 1, "fetched once, at registration");

    let meta = pact_db::agents::metadata(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    let name = meta.logo_sha256.clone().unwrap();
    assert_eq!(name, who::sha256_hex(PA_LOGO));
    assert_eq!(meta.homepage_uri.as_deref(), Some("https://pa.example/"));
    assert!(meta.logo_fetched_at.is_some());

    let res = app
        .http
        .get(format!("{}/logos/{name}", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "content-type"), "image/png");
    assert_eq!(header(&res, "x-content-type-options"), "nosniff");
    assert!(header(&res, "content-security-policy").starts_with("default-src 'none'"));
    assert!(header(&res, "cache-control").contains("max-age=31536000"));
    assert_eq!(res.bytes().await.unwrap().as_ref(), PA_LOGO);

    for missing in [
        "0".repeat(64),
        "../../etc/passwd".into(),
        name.to_uppercase(),
        "x".into(),
    ] {
        let res = app
            .http
            .get(format!("{}/logos/{missing}", app.base_url))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{missing}");
    }

    // Re-registering without the flags keeps the links; "" removes one.
    register_links(
        &app,
        &pa.issuer,
        &LinkFlags {
            tos: Some(String::new()),
            ..LinkFlags::default()
        },
    )
    .await
    .unwrap();
    let meta = pact_db::agents::metadata(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert!(meta.tos_uri.is_none());
    assert_eq!(meta.logo_sha256.as_deref(), Some(name.as_str()));
    assert_eq!(platform.hits(), 1);
}

#[tokio::test]
async fn svg_html_oversized_and_redirected_logos_are_refused_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(PA_ISS).await;
    let platform = LogoServer::start().await;
    for (path, why) in [
        (platform.url("/logo.svg"), "not a PNG"),
        (platform.url("/logo.html"), "not a PNG"),
        (platform.url("/big.png"), "larger than"),
        (platform.endless_url(), "larger than"),
        (platform.url("/redirect.png"), "HTTP 302"),
        (platform.url("/missing.png"), "HTTP 404"),
    ] {
        let err = register_links(&app, &pa.issuer, &links(Some(path.clone())))
            .await
            .expect_err(&path);
        assert!(
            err.contains("--logo-uri") && err.contains(why),
            "{path}: {err}"
        );
    }
    assert_eq!(logo_count(&app).await, 0);
    let meta = pact_db::agents::metadata(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert!(
        meta.logo_uri.is_none() && meta.homepage_uri.is_none(),
        "nothing stored"
    );

    // A node that does not allow loopback (production) refuses loopback
    // names and addresses before any connection.
    let hits = platform.hits();
    for uri in [
        platform.url("/logo.png"),
        format!("https://localhost:{}/logo.png", platform.addr.port()),
        format!("https://127.0.0.1:{}/logo.png", platform.addr.port()),
    ] {
        let err = pact_server::logo_fetch::fetch_logo(&uri, false)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                pact_server::logo_fetch::LogoError::ForbiddenAddress
                    | pact_server::logo_fetch::LogoError::InvalidUri(_)
            ),
            "{uri}: {err}"
        );
    }
    assert_eq!(platform.hits(), hits);

    // The background refresh applies the same rules: a platform that starts
    // serving SVG keeps its old logo, and nothing new is stored.
    register_links(&app, &pa.issuer, &links(Some(platform.url("/logo.png"))))
        .await
        .unwrap();
    sqlx::query(
        "update agents set logo_uri = $2, logo_fetched_at = now() - interval '2 days' \
         where issuer = $1",
    )
    .bind(&pa.issuer)
    .bind(platform.url("/logo.svg"))
    .execute(&app.db)
    .await
    .unwrap();
    let now = OffsetDateTime::now_utc();
    let err = who::refresh(&app.state, &pa.issuer, now).await.unwrap_err();
    assert!(err.contains("not a PNG"), "{err}");
    assert_eq!(logo_count(&app).await, 1);
    let meta = pact_db::agents::metadata(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.logo_sha256, Some(who::sha256_hex(PA_LOGO)));
    // The failed attempt counts: the next page does not try again at once.
    assert!(
        who::refresh(&app.state, &pa.issuer, now + Duration::minutes(1))
            .await
            .is_ok()
    );
}

/// A browser signed in as `email` at the demo brand, with the device code
/// entered, on the consent page.
async fn on_consent(app: &TestApp, pa: &TestPa, email: &str) -> (Browser, String) {
    let user = add_user(app, "demo", email, PASSWORD).await;
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let (csrf, _) = pact_server::domain::secrets::new_secret();
    pact_db::sessions::insert(
        &app.db,
        &hash,
        &csrf,
        &SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            user_id: Some(user.id),
            ..SessionState::default()
        },
        OffsetDateTime::now_utc() + Duration::hours(1),
    )
    .await
    .unwrap();
    let b = Browser::new(app);
    let url = reqwest::Url::parse(&app.base_url).unwrap();
    b.jar.add_cookie_str(&format!("pactd_session={raw}"), &url);
    let auth = app
        .device_authorize(pa, PA_SUB, "orders:read orders:cancel", None)
        .await;
    let res = b
        .submit("/device", "/device", &[("user_code", &auth.user_code)])
        .await;
    assert_eq!(location(&res), "/device/consent");
    (b, auth.user_code)
}

#[tokio::test]
async fn consent_shows_the_platform_from_our_origin_and_not_you_returns_to_the_request() {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(PA_ISS).await;
    let platform = LogoServer::start().await;
    // Registered with links and a logo URI, but not fetched yet (as after an
    // upgrade): the first consent page shows the initial and fetches it.
    sqlx::query(
        "update agents set logo_uri = $2, homepage_uri = 'https://pa.example/', \
         policy_uri = 'https://legal.pa.example/privacy', tos_uri = 'https://legal.pa.example/terms?v=2&lang=en' \
         where issuer = $1",
    )
    .bind(&pa.issuer)
    .bind(platform.url("/logo.png"))
    .execute(&app.db)
    .await
    .unwrap();
    app.settle().await;

    let (b, user_code) = on_consent(&app, &pa, "ann@example.com").await;
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(
        html.contains(r#"class="agent-logo agent-initial""#),
        "{html}"
    );
    assert!(html.contains(">T</span>"), "the initial of Test PA");
    for (label, href, host) in [
        ("Website", "https://pa.example/", "pa.example"),
        (
            "Privacy policy",
            "https://legal.pa.example/privacy",
            "legal.pa.example",
        ),
        (
            "Terms of service",
            "https://legal.pa.example/terms?v=2&#38;lang=en",
            "legal.pa.example",
        ),
    ] {
        let link = format!(
            r#"<a href="{href}" rel="noopener noreferrer" target="_blank">{label}<span class="visually-hidden"> (opens in a new tab)</span></a> <span class="muted">({host})</span>"#
        );
        assert!(html.contains(&link), "{link}\n{html}");
    }
    assert!(html.contains(r#"action="/device/not-you""#));
    assert!(html.contains("Not you? Sign out"));

    // The refresh runs in the background; the page did not wait for it.
    let want = who::sha256_hex(PA_LOGO);
    for _ in 0..200 {
        let meta = pact_db::agents::metadata(&app.db, &pa.issuer)
            .await
            .unwrap()
            .unwrap();
        if meta.logo_sha256.as_deref() == Some(want.as_str()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let res = b.get("/device/consent").await;
    let csp = header(&res, "content-security-policy");
    assert!(csp.contains("img-src 'self' data:;"), "{csp}");
    assert!(csp.contains("style-src 'self';"), "{csp}");
    let html = res.text().await.unwrap();
    let srcs = sources(&html);
    assert_eq!(srcs, vec![format!("/logos/{want}")], "only our own logo");
    assert!(
        srcs.iter()
            .all(|s| s.starts_with('/') && !s.starts_with("//"))
    );
    assert!(
        !html.contains(&platform.addr.to_string()),
        "never hot-linked"
    );
    let hits = platform.hits();
    assert_eq!(hits, 1, "pactd fetched it once");

    // "Not you?": signed out, the same request kept, sign-in asked again.
    let old_cookie = b.session_cookie().unwrap();
    let res = b.submit("/device/consent", "/device/not-you", &[]).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    let new_cookie = b.session_cookie().unwrap();
    assert_ne!(old_cookie, new_cookie, "a new session id");
    assert!(
        pact_tests::pages::session_of(&app, &old_cookie)
            .await
            .is_none(),
        "the old session is gone"
    );
    let session = pact_tests::pages::session_of(&app, &new_cookie)
        .await
        .unwrap();
    assert!(session.user_id.is_none() && session.brand_id.is_none());
    assert!(session.device_authorization_id.is_some());

    let res = b.get("/device/consent").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    add_user(&app, "demo", "bob@example.com", PASSWORD).await;
    let res = b
        .sign_in("demo", "bob@example.com", PASSWORD, "/device/consent")
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device/consent");
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(html.contains("as bob@example.com"), "{html}");
    assert!(html.contains(&user_code), "the same request");
    assert_eq!(
        platform.hits(),
        hits,
        "the browser never reached the platform"
    );

    // Without a CSRF token or from another site, "Not you?" is refused.
    let res = b.post("/device/not-you", &[("authorization", "x")]).await;
    assert_eq!(res.status(), 403);
    let res = b
        .client
        .post(b.url("/device/not-you"))
        .header("origin", "https://evil.example")
        .form(&[("csrf", b.csrf_token().await.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200, "still signed in as bob");
    assert!(html.contains("as bob@example.com"));
}

#[tokio::test]
async fn the_brand_logo_and_accent_appear_on_its_pages() {
    let app = TestApp::spawn().await;
    // What `pactd brand set demo --logo brand.png --accent #7A1F5C` stores.
    let accent = who::check_accent("#7A1F5C").unwrap();
    let content_type = who::check_brand_logo(BRAND_LOGO).unwrap();
    let name = who::sha256_hex(BRAND_LOGO);
    pact_db::logos::put(&app.db, &name, content_type, BRAND_LOGO)
        .await
        .unwrap();
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        who::LOGO_KEY,
        &serde_json::json!(name),
    )
    .await
    .unwrap();
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        who::ACCENT_KEY,
        &serde_json::json!(accent),
    )
    .await
    .unwrap();
    app.settle().await;

    let b = Browser::new(&app);
    let res = b.get("/login?brand=demo").await;
    assert_eq!(res.status(), 200);
    assert!(header(&res, "content-security-policy").contains("style-src 'self';"));
    let html = res.text().await.unwrap();
    assert!(
        html.contains(r#"<link rel="stylesheet" href="/theme/7a1f5c.css">"#),
        "{html}"
    );
    assert!(html.contains(&format!(r#"<img class="brand-logo" src="/logos/{name}""#)));
    assert!(!html.contains("style=\""), "no inline style");
    assert!(sources(&html).iter().all(|s| s.starts_with("/logos/")));

    let res = b.get("/theme/7a1f5c.css").await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "content-type"), "text/css; charset=utf-8");
    assert!(header(&res, "content-security-policy").starts_with("default-src 'none'"));
    let css = res.text().await.unwrap();
    assert!(css.contains("--accent: #7a1f5c;"), "{css}");
    assert!(css.contains("--accent-ink: #ffffff;"));
    // Nothing but a checked colour becomes a stylesheet.
    for bad in ["ffcc00.css", "7a1f5c", "7a1f5c;}x{.css", "zzzzzz.css"] {
        assert_eq!(b.get(&format!("/theme/{bad}")).await.status(), 404, "{bad}");
    }
    let res = b.get(&format!("/logos/{name}")).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().as_ref(), BRAND_LOGO);

    // The account page (signed in) carries them too.
    let user = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let res = b.sign_in("demo", &user.email, PASSWORD, "/account").await;
    assert_eq!(location(&res), "/account");
    let (status, html) = b.get_html("/account").await;
    assert_eq!(status, 200);
    assert!(html.contains("/theme/7a1f5c.css") && html.contains(&format!("/logos/{name}")));
}

#[tokio::test]
async fn logos_nothing_shows_are_swept_after_a_day() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(PA_ISS).await;
    let platform = LogoServer::start().await;
    register_links(&app, &pa.issuer, &links(Some(platform.url("/logo.png"))))
        .await
        .unwrap();
    let brand_logo = who::sha256_hex(BRAND_LOGO);
    pact_db::logos::put(&app.db, &brand_logo, "image/png", BRAND_LOGO)
        .await
        .unwrap();
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        who::LOGO_KEY,
        &serde_json::json!(brand_logo),
    )
    .await
    .unwrap();
    // A platform's earlier logo, replaced since.
    let gif = b"GIF89a\x01\x00\x01\x00";
    pact_db::logos::put(&app.db, &who::sha256_hex(gif), "image/gif", gif)
        .await
        .unwrap();

    let now = OffsetDateTime::now_utc();
    pact_server::housekeeping::sweep(&app.state.node, now).await;
    assert_eq!(logo_count(&app).await, 3, "a day of grace");
    pact_server::housekeeping::sweep(&app.state.node, now + Duration::days(2)).await;
    assert_eq!(
        logo_count(&app).await,
        2,
        "the platform's and the brand's stay"
    );
    assert!(
        pact_db::logos::get(&app.db, &who::sha256_hex(gif))
            .await
            .unwrap()
            .is_none()
    );
}
