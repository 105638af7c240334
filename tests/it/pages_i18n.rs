//! The person's pages in the person's language (issue 9, item 9) and the
//! brand's look on every page that knows its brand, over real HTTP.
//!
//! The language is the switch's cookie, else `Accept-Language` (RFC 9110
//! §12.5.4); the switch is a plain link (`GET /lang/{code}?next=`) that must
//! only ever lead back to our own origin. The browser side (Chromium, no
//! JavaScript, axe-core on the German pages) is in `browser.rs`.

use pact_server::mail::MailSettings;
use pact_server::who;
use pact_tests::TestApp;
use pact_tests::logo_server::BRAND_LOGO;
use pact_tests::pages::{Browser, add_totp, add_user, location, set_cookie, totp_now};
use pact_tests::smtp_sink::SmtpSink;
use reqwest::Response;
use reqwest::header::{ACCEPT_LANGUAGE, HeaderMap, HeaderValue};
use time::{Duration, OffsetDateTime};

const PASSWORD: &str = "correct horse battery staple";

fn header(res: &Response, name: &str) -> String {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A browser that sends `Accept-Language: accept` on every request.
fn browser_speaking(app: &TestApp, accept: &'static str) -> Browser {
    let mut b = Browser::new(app);
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT_LANGUAGE, HeaderValue::from_static(accept));
    b.client = pact_jose::with_shared_tls(reqwest::Client::builder())
        .cookie_provider(b.jar.clone())
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .build()
        .unwrap();
    b
}

async fn lang_of(b: &Browser, path: &str) -> (u16, String, String) {
    let res = b.get(path).await;
    let status = res.status().as_u16();
    let content_language = header(&res, "content-language");
    let html = res.text().await.unwrap();
    let lang = html
        .split("<html lang=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        lang, content_language,
        "{path}: <html lang> and Content-Language"
    );
    (status, lang, html)
}

#[tokio::test]
async fn accept_language_quality_values_choose_the_pages_language() {
    let app = TestApp::spawn().await;
    for (accept, want, heading) in [
        ("de-DE,de;q=0.9,en;q=0.8", "de", "Ihren Agenten verbinden"),
        ("fr, de;q=0.8, en;q=0.5", "de", "Ihren Agenten verbinden"),
        ("en-GB, de;q=0.9", "en", "Connect your agent"),
        ("de;q=0, *", "en", "Connect your agent"),
        ("de;q=0.1, en;q=0.2", "en", "Connect your agent"),
        ("x-klingon, ;;q=, de;q=2", "en", "Connect your agent"),
        ("fr", "en", "Connect your agent"),
    ] {
        let b = browser_speaking(&app, accept);
        let (status, lang, html) = lang_of(&b, "/device").await;
        assert_eq!(status, 200);
        assert_eq!(lang, want, "Accept-Language: {accept}");
        assert!(html.contains(heading), "{accept}: {html}");
    }
    // No header at all: English.
    let (_, lang, _) = lang_of(&Browser::new(&app), "/device").await;
    assert_eq!(lang, "en");
    // The same address answers differently for different browsers.
    let res = Browser::new(&app).get("/device").await;
    assert!(header(&res, "vary").contains("Accept-Language"), "{res:?}");
}

#[tokio::test]
async fn the_switch_sets_a_cookie_that_wins_and_only_leads_back_to_our_own_pages() {
    let app = TestApp::spawn().await;
    let b = browser_speaking(&app, "en");
    let (_, lang, html) = lang_of(&b, "/device?user_code=BCDF-GHJK").await;
    assert_eq!(lang, "en");
    // The switch is on the page, as a plain link that comes back here.
    let link = r#"<a href="/lang/de?next=%2Fdevice%3Fuser_code%3DBCDF-GHJK" lang="de" hreflang="de">Deutsch</a>"#;
    assert!(html.contains(link), "{html}");
    assert!(html.contains(r#"<span lang="en" aria-current="true">English</span>"#));

    let res = b
        .get("/lang/de?next=%2Fdevice%3Fuser_code%3DBCDF-GHJK")
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device?user_code=BCDF-GHJK");
    let cookie = set_cookie(&res).unwrap();
    // Plain HTTP (development): no `__Host-` prefix, which needs `Secure`.
    assert!(cookie.starts_with("pactd_lang=de;"), "{cookie}");
    for attr in ["Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=31536000"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    // The cookie wins over the browser's English.
    let (_, lang, html) = lang_of(&b, "/device?user_code=BCDF-GHJK").await;
    assert_eq!(lang, "de");
    assert!(
        html.contains("BCDF-GHJK") && html.contains("Weiter"),
        "{html}"
    );
    let (_, lang, _) = lang_of(&b, "/no-such-page").await;
    assert_eq!(lang, "de");
    // And back.
    let res = b.get("/lang/en?next=/device").await;
    assert_eq!(location(&res), "/device");
    let (_, lang, _) = lang_of(&b, "/device").await;
    assert_eq!(lang, "en");

    // Nowhere but our own pages: an open redirect would let any site borrow
    // our address for a phishing link.
    for evil in [
        "https://evil.example/",
        "//evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
        "%0d%0aSet-Cookie:x=y",
    ] {
        let res = b.get(&format!("/lang/de?next={evil}")).await;
        assert_eq!(res.status(), 303, "{evil}");
        assert_eq!(location(&res), "/account", "{evil}");
    }
    // An unknown language sets nothing.
    let res = b.get("/lang/xx?next=/device").await;
    assert_eq!(res.status(), 404);
    assert!(set_cookie(&res).is_none());
    let res = b.get("/lang/de-CH%0d%0aSet-Cookie:%20a=b").await;
    assert_eq!(res.status(), 404);
    assert!(set_cookie(&res).is_none());
    // A forged cookie value is ignored, not echoed.
    let forged = Browser::new(&app);
    let url = reqwest::Url::parse(&app.base_url).unwrap();
    forged.jar.add_cookie_str("pactd_lang=<script>", &url);
    let (_, lang, _) = lang_of(&forged, "/device").await;
    assert_eq!(lang, "en");
}

#[tokio::test]
async fn error_pages_speak_the_language_and_the_staff_console_stays_english() {
    let app = TestApp::spawn().await;
    let b = browser_speaking(&app, "de");
    let (status, lang, html) = lang_of(&b, "/no-such-page").await;
    assert_eq!((status, lang.as_str()), (404, "de"));
    assert!(html.contains("<h1>Nicht gefunden</h1>"), "{html}");
    assert!(html.contains("Unter dieser Adresse gibt es keine Seite."));
    assert!(html.contains(">Code eingeben</a>"));
    // A refused POST (no CSRF token) explains itself in German too.
    let res = b.post("/device", &[("user_code", "BCDF-GHJK")]).await;
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains("Anfrage abgelehnt"));
    // The staff console is English, whatever the browser asks, and offers no switch.
    let res = b.get("/admin/sign-in").await;
    let html = res.text().await.unwrap();
    assert!(html.contains("lang=\"en\""), "{html}");
    assert!(!html.contains("/lang/"), "{html}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reset_mail_is_in_the_language_of_the_page_that_asked_for_it() {
    let mut sink = SmtpSink::start().await;
    let mail = sink.settings();
    let app = TestApp::spawn_with(move |c| {
        c.mail = Some(mail);
    })
    .await;
    add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let b = browser_speaking(&app, "de-AT, en;q=0.5");
    let res = b
        .submit(
            "/login/forgot?brand=demo",
            "/login/forgot",
            &[("brand", "demo"), ("email", "ann@example.com")],
        )
        .await;
    assert_eq!(res.status(), 200);
    let html = res.text().await.unwrap();
    assert!(
        html.contains("haben wir ihm einen Link geschickt"),
        "{html}"
    );
    // The switch on the answer leads back to the form for the same brand.
    assert!(
        html.contains("/lang/en?next=%2Flogin%2Fforgot%3Fbrand%3Ddemo"),
        "{html}"
    );
    let mail = sink.next().await;
    let text = mail.text();
    assert!(
        text.contains("Jemand möchte das Passwort Ihres Kontos bei Demo Store zurücksetzen."),
        "{text}"
    );
    assert!(text.contains("innerhalb von 30 Minuten"), "{text}");
    assert!(mail.data.contains("Subject:"), "{}", mail.data);
}

/// What `pactd brand set demo --logo … --accent #7A1F5C` stores.
async fn brand_look(app: &TestApp) {
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
}

fn has_look(html: &str) -> bool {
    html.contains(r#"<link rel="stylesheet" href="/theme/7a1f5c.css">"#)
        && html.contains(r#"<img class="brand-logo" src="/logos/"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn code_entry_second_factor_reset_and_error_pages_carry_the_brand_look() {
    let app = TestApp::spawn_with(|c| {
        c.mail = Some(MailSettings {
            smtp_url: "smtp://127.0.0.1:9".to_owned(),
            from: "Demo Store <no-reply@shop.example>".to_owned(),
        });
    })
    .await;
    app.enable_demo_delegation().await;
    brand_look(&app).await;
    let user = add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    let secret = add_totp(&app, &user).await;

    // Before any brand is known, code entry is pactd's own.
    let b = Browser::new(&app);
    let (_, html) = b.get_html("/device").await;
    assert!(!has_look(&html), "{html}");

    // The second factor, after the password.
    let res = b
        .sign_in("demo", "ann@example.com", PASSWORD, "/account")
        .await;
    assert_eq!(res.status(), 303);
    let (status, html) = b.get_html(&location(&res)).await;
    assert_eq!(status, 200);
    assert!(html.contains("One more step") && has_look(&html), "{html}");
    // A wrong code: the same page again, still the brand's.
    let res = b
        .submit(
            "/login/second-factor?next=/account",
            "/login/second-factor",
            &[("code", "000000"), ("next", "/account")],
        )
        .await;
    let html = res.text().await.unwrap();
    assert!(html.contains("form-error") && has_look(&html), "{html}");

    // The reset link's page.
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let now = OffsetDateTime::now_utc();
    pact_db::password_resets::insert(
        &app.db,
        &hash,
        user.id,
        now,
        now + Duration::minutes(30),
        None,
    )
    .await
    .unwrap();
    let (status, html) = Browser::new(&app)
        .get_html(&format!("/login/reset?token={raw}"))
        .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("Choose a new password") && has_look(&html),
        "{html}"
    );
    let (_, html) = Browser::new(&app)
        .get_html("/login/forgot?brand=demo")
        .await;
    assert!(has_look(&html), "{html}");

    // An error page about a known brand: a code that has expired.
    let pa = app.registered_pa("https://pa.example").await;
    let auth = app
        .device_authorize(&pa, "pa-user", "orders:read", None)
        .await;
    sqlx::query(
        "update device_authorizations set expires_at = now() - interval '1 minute' where user_code = $1",
    )
    .bind(auth.user_code.replace('-', ""))
    .execute(&app.db)
    .await
    .unwrap();
    let fresh = Browser::new(&app);
    let res = fresh
        .submit("/device", "/device", &[("user_code", &auth.user_code)])
        .await;
    assert_eq!(res.status(), 410);
    let html = res.text().await.unwrap();
    assert!(
        html.contains("This code has expired") && has_look(&html),
        "{html}"
    );
    // An error raised by a handler once it knew the brand (a PageError): a
    // connection that is not on the person's account.
    let res = b
        .second_factor("code", &totp_now(&secret), "/account")
        .await;
    assert_eq!(res.status(), 303, "signed in");
    let (status, html) = b
        .get_html("/account/grants/00000000-0000-0000-0000-000000000000/revoke")
        .await;
    assert_eq!(status, 404);
    assert!(
        html.contains("There is no such connection") && has_look(&html),
        "{html}"
    );
    let res = b
        .submit(
            "/login/forgot?brand=demo",
            "/login/forgot",
            &[("brand", "demo"), ("email", "not an address")],
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(has_look(&res.text().await.unwrap()));
    // And an error page without a brand stays pactd's.
    let (status, html) = Browser::new(&app).get_html("/no-such-page").await;
    assert_eq!(status, 404);
    assert!(!has_look(&html), "{html}");
}
