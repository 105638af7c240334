//! The staff console in a real browser (headless Debian Chromium driven by
//! playwright-core from `tests/browser/admin.mjs`): an owner signs in and
//! enrols TOTP; an operator finds a person's grant and revokes it, and the
//! agent's next delegated call is refused on a second node; the audit log
//! shows it; a viewer has no button and its POST is refused.
//!
//! Staff second factors: an admin adds a passkey (Chromium's virtual
//! authenticator) and signs in with it instead of TOTP; recovery codes work
//! once; a viewer's session cannot add a credential to another admin.
//!
//! Screenshots of every page land in `target/browser-screenshots/admin-<journey>/`.

use pact_tests::TestApp;
use serde_json::{Value, json};
use uuid::Uuid;

const ISS: &str = "https://pa.example";
const PASSWORD: &str = "correct horse battery staple";

async fn run_journey(journey: &str, input: &Value) -> Value {
    pact_tests::browser::run(
        "admin.mjs",
        journey,
        &format!("admin-{journey}"),
        input.clone(),
    )
    .await
}

/// Every page the journey measured (tests/browser/admin.mjs `measure`), and
/// at least `pages`, fits 390 px and 1280 px: no sideways scrolling, no text
/// squeezed to a letter per line, no word broken in a header or the title,
/// controls of 16 px text and 40 px height, no axe-core finding.
fn assert_fits<'a>(out: &'a Value, pages: &[&str]) -> &'a Vec<Value> {
    let layout = out["layout"].as_array().unwrap();
    let measured: std::collections::BTreeSet<&str> =
        layout.iter().filter_map(|m| m["page"].as_str()).collect();
    for p in pages {
        assert!(measured.contains(p), "{p} was not measured: {measured:?}");
    }
    let bad: Vec<&Value> = layout
        .iter()
        .filter(|m| {
            m["overflow"].as_f64().unwrap() > 0.0
                || ["narrow", "broken", "small", "axe"]
                    .iter()
                    .any(|k| !m[*k].as_array().unwrap().is_empty())
        })
        .collect();
    assert!(
        bad.is_empty(),
        "pages that do not fit:\n{}",
        serde_json::to_string_pretty(&bad).unwrap()
    );
    layout
}

/// `2026-12-02 14:02 UTC`: no seconds, no microseconds.
/// The minutes a console "how long ago" word says: "just now" is 0, "3 min
/// ago" is 3; anything else is not a recent time.
fn minutes_ago(word: &str) -> u64 {
    if word == "just now" {
        return 0;
    }
    word.strip_suffix(" min ago")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a recent time: {word:?}"))
}

fn assert_minute(v: &Value) {
    let t = v.as_str().unwrap_or_default().trim();
    let digits_at = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15];
    assert!(
        t.len() == 20
            && t.ends_with(" UTC")
            && digits_at.iter().all(|i| t.as_bytes()[*i].is_ascii_digit()),
        "not a time to the minute: {t:?}"
    );
}

/// A console account; with `totp`, an authenticator already enrolled
/// (sealed as the console seals it); returns its secret in hex.
async fn add_admin(app: &TestApp, email: &str, role: &str, totp: bool) -> String {
    let hash = pact_server::accounts::password::hash(PASSWORD).unwrap();
    let role = pact_db::admins::Role::parse(role).unwrap();
    let admin = pact_db::admins::insert(&app.db, Uuid::new_v4(), email, &hash, role, None)
        .await
        .unwrap();
    if !totp {
        return String::new();
    }
    let secret = pact_server::accounts::totp::new_secret().unwrap();
    let sealed = app
        .master_key
        .seal(
            &secret,
            &pact_server::admin::console::signin::stored_aad(&admin),
        )
        .unwrap();
    pact_db::admins::set_totp(&app.db, admin.id, Some(&sealed))
        .await
        .unwrap();
    secret.iter().map(|b| format!("{b:02x}")).collect()
}

fn grant_of(tokens: &Value) -> Uuid {
    use base64::Engine;
    let token = tokens["access_token"].as_str().unwrap();
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap();
    let v: Value = serde_json::from_slice(&claims).unwrap();
    v["grant_id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_revokes_a_persons_grant_in_the_console_and_the_agent_is_cut_off() {
    let a = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
        c.audience = format!("http://localhost:{}/a2a", c.listen.port());
    })
    .await;
    a.enable_demo_delegation().await;
    let (public_url, audience) = (
        a.state.config.public_url.clone(),
        a.state.config.audience.clone(),
    );
    let b = a
        .spawn_peer(|c| {
            c.public_url = public_url.clone();
            c.audience = audience.clone();
        })
        .await;
    add_admin(&a, "owner@example.com", "owner", false).await;
    let operator_totp = add_admin(&a, "ops@example.com", "operator", true).await;
    let viewer_totp = add_admin(&a, "desk@example.com", "viewer", true).await;
    let pa = a.registered_pa(ISS).await;
    let tokens = a
        .node_connect("demo", &pa, "pa-ada", "ada", &["orders:read"], None)
        .await;
    let grant = grant_of(&tokens);
    // The grant was approved now; the journey may wait for a browser, so
    // its pages may say some minutes ago, but never more than have passed.
    let approved_at = std::time::Instant::now();
    let other = grant_of(
        &a.node_connect("demo", &pa, "pa-bob", "bob", &["orders:read"], None)
            .await,
    );
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let pa_jwt = pa.token("pa-ada", a.audience());
    let before = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&format!("Bearer {access}")),
            "m1",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(before.status(), 200);

    // A customer account to find, and a type and a tool on the brand, for the
    // owner's pages.
    // Its external id is the grant's subject, so the console can name her.
    let hash = pact_server::accounts::password::hash(PASSWORD).unwrap();
    pact_db::users::insert(
        &a.db,
        Uuid::new_v4(),
        &pact_tests::brand_id("demo"),
        "ada@example.com",
        Some("ada"),
        &hash,
    )
    .await
    .unwrap();
    let setup = pact_server::admin::role::Actor {
        kind: "cli",
        name: "setup".into(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    };
    let demo = pact_db::brands::find(&a.db, "demo").await.unwrap().unwrap();
    let mut tx = a.db.begin().await.unwrap();
    pact_server::admin::brand_settings::upsert_details_type(
        &mut tx,
        &setup,
        None,
        &demo,
        "order_view",
        serde_json::from_value(
            json!({"scope": "orders:read", "description": "Orders {ids}",
            "fields": {"ids": {"type": "string_array", "required": true}}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let demo = pact_db::brands::find(&a.db, "demo").await.unwrap().unwrap();
    let mut tx = a.db.begin().await.unwrap();
    pact_server::admin::brand_settings::upsert_tool(
        &mut tx,
        &setup,
        None,
        &demo,
        serde_json::from_value(json!({"name": "get_order", "scope": "orders:read",
            "url": "https://shop.example/tools/get_order", "description": "One order",
            "enforce": ["ids=order_id"]}))
        .unwrap(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let input = json!({
        "base": a.state.config.public_url,
        "password": PASSWORD,
        "issuer": ISS,
        "customer_email": "ada@example.com",
        "owner": "owner@example.com",
        "operator": "ops@example.com",
        "operator_totp_hex": operator_totp,
        "viewer": "desk@example.com",
        "viewer_totp_hex": viewer_totp,
        "customer": "ada",
        "grant_id": grant.to_string(),
        "other_grant_id": other.to_string(),
        "new_issuer": "https://new-agent.example",
        "agent_name": "Test PA",
    });
    let out = run_journey("console", &input).await;

    // The agent's next delegated call, on the other node, is refused.
    let after = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&format!("Bearer {access}")),
            "m2",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(after.status(), 401);
    // Every console page fits 390 px and 1280 px: no sideways scrolling, no
    // text squeezed to a letter per line, no header word broken, controls of
    // normal size (issue 30, item 3).
    let layout = assert_fits(
        &out,
        &[
            "sign-in",
            "overview",
            "agents",
            "agent-disable",
            "customers",
            "brands",
            "brand",
            "keys",
            "grants",
            "grant",
            "grant-revoke-confirm",
            "audit",
            "audit-record-open",
        ],
    );
    // The measurements saw the tables they judge.
    let grants_at_390 = layout
        .iter()
        .find(|m| m["page"] == "grants" && m["width"] == 390)
        .unwrap();
    assert!(
        grants_at_390["cells"].as_u64().unwrap() >= 7,
        "{grants_at_390}"
    );
    assert!(
        grants_at_390["headers"].as_u64().unwrap() >= 7,
        "{grants_at_390}"
    );
    // Item 2: the customer's email and the platform's name beside the ids;
    // the agent filter is a pick-list by name that filters.
    let listed = out["grants_text"].as_str().unwrap();
    assert!(listed.contains("ada@example.com"), "{listed}");
    assert!(listed.contains("Test PA"), "{listed}");
    assert_eq!(out["agent_filter_rows"]["Test PA"], 2, "{out}");
    assert_eq!(out["agent_filter_rows"]["New Agent"], 0, "{out}");
    assert_eq!(out["agent_filter_selected"], ISS, "{out}");
    let customer = out["grant_customer"].as_str().unwrap();
    assert!(
        customer.contains("ada@example.com") && customer.contains("ada"),
        "{customer}"
    );
    let agent = out["grant_agent"].as_str().unwrap();
    assert!(agent.contains("Test PA") && agent.contains(ISS), "{agent}");
    // Times to the minute in UTC, how long ago beside or over them.
    let passed = approved_at.elapsed().as_secs() / 60;
    let approved = out["grant_approved"].as_str().unwrap();
    let (time, word) = approved.split_once(" (").unwrap();
    assert_minute(&json!(time));
    let word = word.strip_suffix(')').unwrap();
    assert!(minutes_ago(word) <= passed, "{approved} after {passed} min");
    assert_minute(&out["audit_time"]["text"]);
    let title = out["audit_time"]["title"].as_str().unwrap();
    assert!(minutes_ago(title) <= passed, "{title} after {passed} min");
    // The grant page checked its receipt's signature and chain.
    assert!(
        out["chain_text"]
            .as_str()
            .unwrap()
            .contains("Every receipt's signature and the chain verify"),
        "{out}"
    );
    // Revoking asked first, saying what the customer will read, then said it was done.
    let confirm = out["confirm_text"].as_str().unwrap();
    assert!(confirm.contains("customer asked by phone"), "{confirm}");
    let notice = out["notice_text"].as_str().unwrap();
    assert!(notice.starts_with("Revoked"), "{notice}");
    // The audit log page showed the operator's revocation.
    let audit = out["audit_text"].as_str().unwrap();
    assert!(audit.contains("grant.revoke"), "{audit}");
    // ...as a sentence naming the platform and the customer, the raw record
    // one click away (issue 30, item 6).
    assert!(
        audit.contains("ops@example.com revoked Test PA's access for ada@example.com."),
        "{audit}"
    );
    assert_eq!(out["audit_raw_hidden"], true, "{out}");
    assert_eq!(out["audit_raw_shown"], true, "{out}");
    assert!(audit.contains("ops@example.com (admin)"), "{audit}");
    assert!(audit.contains(&grant.to_string()), "{audit}");
    // The owner registered a platform in the console, and the log shows it.
    let new = pact_db::agents::find(&a.db, "https://new-agent.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(new.name, "New Agent");
    assert!(audit.contains("agent.register"), "{audit}");
    assert!(audit.contains("owner@example.com (admin)"), "{audit}");
    // The viewer had no button, and its POST was refused and changed nothing.
    assert_eq!(out["viewer_buttons"], 0);
    assert_eq!(out["viewer_post_status"], 403);
    assert!(
        pact_db::grants::find(&a.db, other.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    let owner = pact_db::admins::find_by_email(&a.db, "owner@example.com")
        .await
        .unwrap()
        .unwrap();
    assert!(
        owner.has_totp(),
        "the owner enrolled an authenticator in the browser"
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_signs_in_with_a_passkey_and_a_recovery_code_works_once() {
    // A WebAuthn relying party needs a domain name: localhost.
    let app = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
    })
    .await;
    let admin_totp = add_admin(&app, "ops@example.com", "operator", true).await;
    let viewer_totp = add_admin(&app, "desk@example.com", "viewer", true).await;
    let admin = pact_db::admins::find_by_email(&app.db, "ops@example.com")
        .await
        .unwrap()
        .unwrap();
    let viewer = pact_db::admins::find_by_email(&app.db, "desk@example.com")
        .await
        .unwrap()
        .unwrap();
    let input = json!({
        "base": app.state.config.public_url,
        "password": PASSWORD,
        "admin": "ops@example.com",
        "admin_id": admin.id.to_string(),
        "admin_totp_hex": admin_totp,
        "viewer": "desk@example.com",
        "viewer_totp_hex": viewer_totp,
    });
    let out = run_journey("factors", &input).await;
    assert_fits(&out, &["recovery-codes", "account", "second-factor"]);

    // The passkey is the admin's, and it signed the admin in.
    let passkeys = pact_db::admin_factors::passkeys_of(&app.db, admin.id)
        .await
        .unwrap();
    assert_eq!(passkeys.len(), 1, "{out}");
    assert_eq!(passkeys[0].name, "Work laptop");
    assert!(passkeys[0].last_used_at.is_some(), "the passkey was used");

    // Ten codes shown once; the first worked once, then was refused.
    let codes: Vec<String> = serde_json::from_value(out["codes"].clone()).unwrap();
    assert_eq!(codes.len(), 10);
    let after = out["after_recovery"].as_str().unwrap();
    assert!(
        after.contains("You signed in with a recovery code"),
        "{after}"
    );
    assert!(after.contains("9 unused recovery code(s)"), "{after}");
    assert!(
        out["reuse_error"]
            .as_str()
            .unwrap()
            .contains("That recovery code didn't work"),
        "{out}"
    );
    assert_eq!(
        pact_db::admin_factors::unused_recovery_codes(&app.db, admin.id)
            .await
            .unwrap(),
        9
    );

    // The viewer: no CSRF token, refused; its options name itself, not the
    // admin the body named; the admin's ceremony cannot be finished from its
    // session; the passkey it made is its own; the admin's cannot be removed.
    let v = &out["viewer"];
    assert_eq!(v["no_csrf"], 403, "{out}");
    assert_eq!(v["start_status"], 200, "{out}");
    assert_eq!(v["user_name"], "desk@example.com", "{out}");
    assert_eq!(v["finish_other"], 400, "{out}");
    assert_eq!(v["finish_own"], 200, "{out}");
    assert_eq!(v["delete_other"], 404, "{out}");
    let admins_passkeys = pact_db::admin_factors::passkeys_of(&app.db, admin.id)
        .await
        .unwrap();
    assert_eq!(admins_passkeys.len(), 1, "nothing was added to the admin");
    assert_eq!(admins_passkeys[0].id, passkeys[0].id, "nor removed");
    assert_eq!(
        pact_db::admin_factors::passkeys_of(&app.db, viewer.id)
            .await
            .unwrap()
            .len(),
        1
    );

    // The audit log has each step, and never a code.
    let rows: Vec<(String, String, serde_json::Value)> = sqlx::query_as(
        "select actor, action, detail from audit_log where actor = 'ops@example.com' order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let actions: Vec<(&str, String)> = rows
        .iter()
        .map(|(_, a, d)| (a.as_str(), d.to_string()))
        .collect();
    let has = |action: &str, detail: &str| {
        actions
            .iter()
            .any(|(a, d)| *a == action && d.contains(detail))
    };
    assert!(has("admin.sign_in", r#""factor":"totp""#), "{actions:?}");
    assert!(has("admin.passkey_add", "Work laptop"), "{actions:?}");
    assert!(
        has("admin.recovery_codes_new", r#""count":10"#),
        "{actions:?}"
    );
    assert!(has("admin.sign_in", r#""factor":"passkey""#), "{actions:?}");
    assert!(
        has("admin.recovery_code_used", r#""left":9"#),
        "{actions:?}"
    );
    assert!(
        has("admin.sign_in", r#""factor":"recovery code""#),
        "{actions:?}"
    );
    assert!(
        has("admin.sign_in_failed", r#""step":"recovery code""#),
        "{actions:?}"
    );
    let whole: String = sqlx::query_scalar(
        "select string_agg(detail::text || coalesce(target, ''), ' ') from audit_log",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    for c in &codes {
        assert!(
            !whole.contains(c.as_str()),
            "a recovery code in the audit log"
        );
        assert!(!whole.contains(&c.replace('-', "")));
    }
}
