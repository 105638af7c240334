//! Real-browser journeys (headless Debian Chromium, driven by playwright-core
//! from `tests/browser/journeys.mjs`): device link → sign-in → consent →
//! token, with password + TOTP and with a passkey (Chromium's virtual
//! authenticator), unticking a scope, and revoking on /account.
//!
//! Screenshots of every page land in `target/browser-screenshots/<journey>/`.

use pact_tests::TestApp;
use pact_tests::pages::{add_totp, add_user};
use serde_json::{Value, json};

const ISS: &str = "https://pa.example";
const PASSWORD: &str = "correct horse battery staple";

/// Runs one journey of `journeys.mjs`; panics with the script's stderr
/// unless it succeeds.
pub(crate) async fn journey(name: &str, input: Value) -> Value {
    let shots = input["shots_name"].as_str().unwrap_or(name).to_owned();
    pact_tests::browser::run("journeys.mjs", name, &shots, input).await
}

/// pactd on `http://localhost:PORT` (a WebAuthn relying party needs a domain
/// name), with the demo brand offering delegation.
pub(crate) async fn app() -> TestApp {
    let app = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
    })
    .await;
    app.enable_demo_delegation().await;
    app
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Person {
    email: String,
    subject: String,
    totp_hex: String,
}

async fn person(app: &TestApp, email: &str) -> Person {
    let user = add_user(app, "demo", email, PASSWORD).await;
    let secret = add_totp(app, &user).await;
    Person {
        email: email.to_owned(),
        subject: user.subject().into(),
        totp_hex: hex(&secret),
    }
}

fn input(app: &TestApp, p: &Person, auth: Option<&pact_tests::delegation::DeviceAuth>) -> Value {
    json!({
        "base": app.state.config.public_url,
        "brand": "demo",
        "email": p.email,
        "password": PASSWORD,
        "totp_secret_hex": p.totp_hex,
        "link": auth.map(|a| a.body["verification_uri_complete"].clone()),
        "user_code": auth.map(|a| a.user_code.clone()),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_an_agent_with_password_and_totp_in_a_real_browser() {
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let p = person(&app, "ada@example.com").await;
    let auth = app
        .device_authorize(&pa, "pa-ada", "orders:read orders:cancel", None)
        .await;
    let mut inp = input(&app, &p, Some(&auth));
    inp["expect_on_consent"] = json!([
        "Test PA",
        "https://pa.example",
        "Demo Store",
        "See your orders and their delivery status",
        "Cancel orders that have not shipped yet"
    ]);
    journey("password-totp", inp).await;
    let (status, tokens) = app.poll(&pa, "pa-ada", &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["scope"], "orders:cancel orders:read");
    // The grant is bound to the signed-in person.
    let grants = pact_db::grants::list(&app.db, Default::default())
        .await
        .unwrap();
    assert_eq!(grants[0].user_sub, p.subject.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unticking_a_scope_in_the_browser_yields_a_token_with_fewer_scopes() {
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let p = person(&app, "grace@example.com").await;
    let auth = app
        .device_authorize(&pa, "pa-grace", "orders:read orders:cancel", None)
        .await;
    let mut inp = input(&app, &p, Some(&auth));
    inp["untick"] = json!(["Cancel orders that have not shipped yet"]);
    journey("untick", inp.clone()).await.to_string();
    let (status, tokens) = app.poll(&pa, "pa-grace", &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["scope"], "orders:read");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_with_a_passkey_instead_of_password_and_totp() {
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let p = person(&app, "linus@example.com").await;
    let auth = app
        .device_authorize(&pa, "pa-linus", "orders:read", None)
        .await;
    journey("passkey", input(&app, &p, Some(&auth))).await;
    let (status, tokens) = app.poll(&pa, "pa-linus", &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    let used: i64 = sqlx::query_scalar(
        "select count(*) from webauthn_credentials where last_used_at is not null",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(used, 1, "the passkey signed the person in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_on_the_account_page_cuts_the_agent_off_at_once() {
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let p = person(&app, "barbara@example.com").await;
    let tokens = app
        .connect(&pa, "pa-barbara", &p.subject, &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let pa_jwt = pa.token("pa-barbara", app.audience());
    let before = app
        .send_delegated("demo", &pa_jwt, &access, "m1", "Show me my orders", None)
        .await;
    assert_eq!(before.status(), 200);
    journey("revoke", input(&app, &p, None)).await;
    let after = app
        .send_delegated("demo", &pa_jwt, &access, "m2", "Show me my orders", None)
        .await;
    assert_eq!(after.status(), 401);
    assert_eq!(
        after.headers()["www-authenticate"],
        r#"Bearer realm="a2a", error="invalid_token""#
    );
}

/// Issue 9 (items 5 and 6): every page a person meets passes axe-core with no
/// violation of any impact (issue 30), in light and dark, at a phone's and a
/// laptop's width, and a long unbroken word in a brand name or a scope
/// description wraps instead of widening the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_passes_axe_and_fits_the_window_in_light_and_dark() {
    for width in [390, 1280] {
        axe_audit(width, "en").await;
    }
}

/// The same audit with the browser asking for German (Accept-Language from
/// Chromium's locale): every page must be German (`<html lang="de">`), pass
/// axe-core and still fit 390 px with German's longer words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn german_pages_by_accept_language_pass_axe_and_fit_the_window() {
    axe_audit(390, "de").await;
}

/// What `pactd brand set demo --logo … --accent #7a1f5c` stores.
async fn brand_look(app: &TestApp) {
    use pact_server::who;
    use pact_tests::logo_server::BRAND_LOGO;
    let name = who::sha256_hex(BRAND_LOGO);
    pact_db::logos::put(&app.db, &name, "image/png", BRAND_LOGO)
        .await
        .unwrap();
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        who::LOGO_KEY,
        &json!(name),
    )
    .await
    .unwrap();
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        who::ACCENT_KEY,
        &json!("#7a1f5c"),
    )
    .await
    .unwrap();
    app.settle().await;
}

async fn axe_audit(width: u32, lang: &str) {
    {
        // Mail settings so that "Forgot your password?" is offered (the mail
        // itself goes nowhere: nothing listens on port 9, and it is sent in
        // the background, so the page does not wait for it).
        let app = TestApp::spawn_with(|c| {
            c.public_url = format!("http://localhost:{}", c.listen.port());
            c.mail = Some(pact_server::mail::MailSettings {
                smtp_url: "smtp://127.0.0.1:9".to_owned(),
                from: "Demo Store <no-reply@shop.example>".to_owned(),
            });
        })
        .await;
        app.enable_demo_delegation().await;
        sqlx::query("update brands set name = $1 where id = 'demo'")
            .bind("Supercalifragilisticexpialidociousandthensomemore Store")
            .execute(&app.db)
            .await
            .unwrap();
        pact_db::scopes::upsert(
            &app.db,
            &pact_tests::brand_id("demo"),
            "orders:read",
            "See your orders at https://orders.example/a/very/long/path/that/never/breaks/anywhere/at/all",
            false,
        )
        .await
        .unwrap();
        // The brand's logo and accent, so that the audit also covers the
        // pages that carry them (the accent must keep its contrast).
        brand_look(&app).await;
        let pa = app.registered_pa(ISS).await;
        let p = person(&app, &format!("axe{width}{lang}@example.com")).await;
        let auth = app
            .device_authorize(&pa, "pa-axe", "orders:read orders:cancel", None)
            .await;
        let mut inp = input(&app, &p, Some(&auth));
        inp["width"] = json!(width);
        inp["lang"] = json!(lang);
        inp["locale"] = json!(if lang == "de" { "de-DE" } else { "en-US" });
        inp["shots_name"] = json!(if lang == "en" {
            format!("a11y-{width}")
        } else {
            format!("a11y-{lang}-{width}")
        });
        let out = journey("a11y", inp).await;
        let skip = if lang == "de" {
            "Zum Inhalt springen"
        } else {
            "Skip to content"
        };
        assert_eq!(out["first_focus"], skip, "{out}");
        let report = out["report"].as_array().unwrap();
        assert_eq!(report.len(), 22, "{out}");
        let mut problems = Vec::new();
        for entry in report {
            // Issue 30: nothing of any impact, not only serious or critical.
            for v in entry["violations"].as_array().unwrap() {
                problems.push(format!(
                    "{width}px {} {}: {v}",
                    entry["page"], entry["scheme"]
                ));
            }
            if entry["lang"] != lang {
                problems.push(format!(
                    "{width}px {} {}: <html lang={}>, not {lang}",
                    entry["page"], entry["scheme"], entry["lang"]
                ));
            }
            if entry["overflow"].as_i64().unwrap() > 0 {
                problems.push(format!(
                    "{width}px {} {}: wider than the window by {} px",
                    entry["page"], entry["scheme"], entry["overflow"]
                ));
            }
            for b in entry["broken"].as_array().unwrap() {
                problems.push(format!(
                    "{width}px {} {}: a word broken inside: {b}",
                    entry["page"], entry["scheme"]
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// The language switch without JavaScript: the browser asks for German, the
/// footer's plain link turns the pages English (the code stays pre-filled),
/// the choice holds on the next page, and switches back; the cookie is
/// HttpOnly and SameSite=Lax.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_language_switch_works_without_javascript() {
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let p = person(&app, "switch@example.com").await;
    let auth = app
        .device_authorize(&pa, "pa-switch", "orders:read", None)
        .await;
    let mut inp = input(&app, &p, Some(&auth));
    inp["locale"] = json!("de-DE");
    inp["javascript"] = json!(false);
    let out = journey("language-switch", inp).await;
    assert_eq!(out["first_lang"], "de", "{out}");
    assert_eq!(out["after_switch_lang"], "en", "{out}");
    assert_eq!(
        out["code_kept"].as_str().unwrap().replace('-', ""),
        auth.user_code.replace('-', ""),
        "{out}"
    );
    assert_eq!(out["next_page_lang"], "en", "the choice holds: {out}");
    assert_eq!(out["back_lang"], "de", "{out}");
    assert!(
        out["sign_in_heading"].as_str().unwrap().starts_with("Bei "),
        "{out}"
    );
    assert_eq!(out["cookie"]["value"], "de", "{out}");
    assert_eq!(out["cookie"]["httpOnly"], true, "{out}");
    assert_eq!(out["cookie"]["sameSite"], "Lax", "{out}");
}

/// Login CSRF through the brand's own login, in Chromium: the victim is on
/// their way to the brand's login for their own code when another site
/// auto-submits the attacker's genuine assertion (made for the attacker's
/// own trip). pactd refuses it and the victim's session stays as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_auto_submitted_assertion_is_refused_in_a_real_browser() {
    use pact_tests::pa::{compact, now};
    let app = app().await;
    let pa = app.registered_pa(ISS).await;
    let login_iss = "https://login.demo.example";
    let signer = pact_tests::TestPa::start(login_iss).await;
    for (k, v) in [
        ("login_url", "https://login.demo.example/signin"),
        ("login_jwks_uri", signer.jwks_uri.as_str()),
    ] {
        pact_db::brands::set_setting(&app.db, &pact_tests::brand_id("demo"), k, &json!(v))
            .await
            .unwrap();
    }

    // The attacker's own trip to the brand's login, with their own browser.
    let attacker_auth = app
        .device_authorize(&pa, "pa-mallory", "orders:read", None)
        .await;
    let attacker = pact_tests::pages::Browser::new(&app);
    let html = attacker
        .submit(
            "/device",
            "/device",
            &[("user_code", &attacker_auth.user_code)],
        )
        .await
        .text()
        .await
        .unwrap();
    let at = html
        .find("state=")
        .expect("a brand-login link with a state");
    let state: String = html[at + 6..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    let t = now();
    let planted = compact(
        &signer.header(),
        &json!({
            "iss": login_iss,
            "aud": format!("{}/device/assertion", app.state.config.public_url),
            "sub": "attacker-7",
            "user_code": attacker_auth.user_code,
            "state": state,
            "jti": uuid::Uuid::new_v4().to_string(),
            "iat": t,
            "exp": t + 120,
        }),
        &signer.current_key(),
    );

    let victim_auth = app
        .device_authorize(&pa, "pa-victim", "orders:read", None)
        .await;
    let mut inp = json!({
        "base": app.state.config.public_url,
        "link": victim_auth.body["verification_uri_complete"].clone(),
        "user_code": victim_auth.user_code,
    });
    inp["planted"] = json!(planted);
    let out = journey("login-csrf", inp).await;
    assert_eq!(out["same_session"], true, "{out}");
    assert!(
        out["text"]
            .as_str()
            .unwrap()
            .contains("not started in this browser"),
        "{out}"
    );
    let signed_in_as_attacker: i64 =
        sqlx::query_scalar("select count(*) from sessions where external_sub is not null")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(signed_in_as_attacker, 0);
}

/// Issue 9, item 8 ("Who is asking"), in Chromium: the platform's logo is
/// shown from pactd's own origin (the browser requests nothing elsewhere),
/// its links are there, the brand's accent colours the buttons, and "Not
/// you?" signs out and brings the person back to the same request. Screenshots
/// of the consent page at a phone's and a laptop's width
/// (`target/browser-screenshots/who-<width>/`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn who_is_asking_shows_the_platform_and_not_you_returns_to_the_request() {
    use pact_server::who;
    use pact_tests::logo_server::{BRAND_LOGO, LogoServer};
    let platform = LogoServer::start().await;
    for width in [390, 1280] {
        let app = app().await;
        let pa = app.registered_pa(ISS).await;
        let flags = who::LinkFlags {
            homepage: Some("https://pa.example/".into()),
            logo: Some(platform.url("/logo.png")),
            policy: Some("https://pa.example/privacy".into()),
            tos: Some("https://pa.example/terms".into()),
        };
        flags.check().unwrap();
        let logo = who::fetch_for_registration(&platform.url("/logo.png"), true)
            .await
            .unwrap();
        let mut tx = app.db.begin().await.unwrap();
        who::store_links(
            &mut tx,
            ISS,
            &flags,
            Some(&logo),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        let name = who::sha256_hex(BRAND_LOGO);
        pact_db::logos::put(&app.db, &name, "image/png", BRAND_LOGO)
            .await
            .unwrap();
        pact_db::brands::set_setting(
            &app.db,
            &pact_tests::brand_id("demo"),
            who::LOGO_KEY,
            &json!(name),
        )
        .await
        .unwrap();
        pact_db::brands::set_setting(
            &app.db,
            &pact_tests::brand_id("demo"),
            who::ACCENT_KEY,
            &json!("#7a1f5c"),
        )
        .await
        .unwrap();
        app.settle().await;
        let hits = platform.hits();

        let p = person(&app, &format!("ann{width}@example.com")).await;
        add_user(&app, "demo", &format!("bob{width}@example.com"), PASSWORD).await;
        let auth = app
            .device_authorize(&pa, "pa-who", "orders:read", None)
            .await;
        let mut inp = input(&app, &p, Some(&auth));
        inp["width"] = json!(width);
        inp["shots_name"] = json!(format!("who-{width}"));
        inp["other_email"] = json!(format!("bob{width}@example.com"));
        let out = journey("who-is-asking", inp).await;
        assert_eq!(out["elsewhere"], json!([]), "{out}");
        assert_eq!(out["logo_width"], 64, "{out}");
        assert_eq!(out["brand_logo_width"], 64, "{out}");
        assert!(out["logo_src"].as_str().unwrap().starts_with("/logos/"));
        assert_eq!(out["approve_background"], "rgb(122, 31, 92)", "{out}");
        assert_eq!(out["links"].as_array().unwrap().len(), 3, "{out}");
        assert_eq!(out["links"][1]["rel"], "noopener noreferrer");
        let after = out["consent_after"].as_str().unwrap();
        assert!(after.contains(&format!("bob{width}@example.com")), "{out}");
        assert!(after.contains(&auth.user_code), "the same request: {out}");
        assert_eq!(platform.hits(), hits, "pactd served the logo itself");
        let (status, tokens) = app.poll(&pa, "pa-who", &auth.device_code).await;
        assert_eq!(status, 200, "{tokens}");
    }
}

/// Issue 30, items 7 to 9, in Chromium at a phone's width: the README's
/// `pact-agent send` path, a step-up link for a permission that needs a
/// second factor, followed by a person who has none yet. The first page
/// names the shop and the agent, sign-in says who is asking, the
/// authenticator is set up and the recovery codes copied and downloaded
/// before the consent page, and that page, approved with one click, says
/// what the agent may already do and what it asks in addition, without the
/// first connection's "just now" warning or "an unknown address", its code
/// on one line. axe-core finds nothing of any impact on any of these pages,
/// light or dark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_up_that_needs_a_second_factor_is_approved_with_one_click() {
    use pact_server::agent::demo_tools::seed_orders;
    let app = app().await;
    pact_db::scopes::upsert(
        &app.db,
        &pact_tests::brand_id("demo"),
        "orders:cancel",
        "Cancel orders that have not shipped yet",
        true,
    )
    .await
    .unwrap();
    app.settle().await;
    let pa = app.registered_pa(ISS).await;
    let email = "nell@example.com";
    let user = add_user(&app, "demo", email, PASSWORD).await;
    let tokens = app
        .connect(&pa, "pa-nell", &user.subject(), &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap();
    let pa_jwt = pa.token("pa-nell", app.audience());
    let order = seed_orders(&pact_tests::brand_id("demo"), &user.subject())[0]
        .order_id
        .clone();
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            access,
            "m1",
            &format!("cancel {order}"),
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(
        v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{v}"
    );
    let link = v["task"]["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap()
        .to_owned();
    let inp = json!({
        "base": app.state.config.public_url,
        "email": email,
        "password": PASSWORD,
        "link": link,
        "width": 390,
        "shots_name": "step-up-mfa",
    });
    let out = journey("step-up-mfa", inp).await;
    assert_eq!(out["approve_clicks"], 1, "{out}");
    let device = out["device"].as_str().unwrap();
    assert!(
        device.contains("Test PA asks to act for you at Demo Store"),
        "{out}"
    );
    assert_eq!(out["device_brand"], "Demo Store", "{out}");
    assert!(
        out["sign_in"].as_str().unwrap().contains("Test PA asks"),
        "{out}"
    );
    let consent = out["consent"].as_str().unwrap();
    for expected in [
        "You already allowed this agent to:",
        "See your orders and their delivery status",
        "It now also asks to",
        "Cancel orders that have not shipped yet",
        "by the agent itself",
    ] {
        assert!(consent.contains(expected), "{expected:?} missing: {out}");
    }
    for gone in ["unknown address", "connect just now"] {
        assert!(!consent.contains(gone), "{gone:?} still shown: {out}");
    }
    assert_eq!(out["code_lines"], 1, "the code on one line: {out}");
    // axe-core: nothing of any impact on these pages, light or dark.
    assert_eq!(out["axe"], json!([]), "{out}");
    assert_eq!(out["overflow"], 0, "{out}");
    // The codes copied and downloaded are the ones shown.
    let codes: Vec<String> = out["codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(codes.len(), 10, "{out}");
    assert_eq!(out["copied"], format!("{}\n", codes.join("\n")), "{out}");
    let downloaded = out["downloaded"].as_str().unwrap();
    assert!(downloaded.contains(email), "{out}");
    assert!(
        downloaded.ends_with(&format!("\n\n{}\n", codes.join("\n"))),
        "{out}"
    );
    assert_eq!(out["download_name"], "demo-store-recovery-codes.txt");
    // The new grant carries both permissions (PACT §5.5, the union; the
    // older one is superseded once the agent redeems the new token).
    let grants = pact_db::grants::active_for(
        &app.db,
        pact_db::parties::Connection {
            brand_id: &pact_tests::brand_id("demo"),
            pa_issuer: &ISS.into(),
            user_sub: &user.subject(),
        },
        time::OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
    let newest = grants.iter().max_by_key(|g| g.created_at).expect("a grant");
    let mut scopes = newest.scopes.clone();
    scopes.sort();
    assert_eq!(scopes, ["orders:cancel", "orders:read"], "{grants:?}");
}
