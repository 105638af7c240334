//! The staff console `/admin` over HTTP, as a browser drives it: sign-in with
//! password and TOTP (enrolled at the first sign-in), session rotation,
//! lockout, CSRF and Origin checks, an operator revoking a grant, a viewer
//! with no button and a refused POST, brand limits, the audit log.

use pact_tests::TestApp;
use pact_tests::pages::{Browser, base32_decode, csrf_from, hidden_field, location, totp_at};
use uuid::Uuid;

const ISS: &str = "https://pa.example";
pub(crate) const PASSWORD: &str = "correct horse battery";

pub(crate) async fn add_admin(app: &TestApp, email: &str, role: &str, brands: Option<&[&str]>) {
    let hash = pact_server::accounts::password::hash(PASSWORD).unwrap();
    let brands: Option<Vec<String>> = brands.map(|b| b.iter().map(|s| (*s).to_owned()).collect());
    pact_db::admins::insert(
        &app.db,
        Uuid::new_v4(),
        email,
        &hash,
        pact_db::admins::Role::parse(role).unwrap(),
        brands.as_deref(),
    )
    .await
    .unwrap();
}

fn admin_cookie(b: &Browser) -> Option<String> {
    use reqwest::cookie::CookieStore;
    let url = reqwest::Url::parse(&b.base_url).unwrap();
    let header = b.jar.cookies(&url)?;
    header
        .to_str()
        .unwrap()
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(k, _)| *k == "pactd_admin")
        .map(|(_, v)| v.to_owned())
}

/// Signs in (enrolling TOTP the first time); returns the TOTP secret.
pub(crate) async fn sign_in(app: &TestApp, b: &Browser, email: &str) -> Vec<u8> {
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", email), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/admin/totp-setup");
    let pending = admin_cookie(b).unwrap();
    let (status, html) = b.get_html("/admin/totp-setup").await;
    assert_eq!(status, 200, "{html}");
    let start = html.find("id=\"totp-secret\">").unwrap() + "id=\"totp-secret\">".len();
    let end = start + html[start..].find("</code>").unwrap();
    let secret = base32_decode(&html[start..end].replace(' ', ""));
    let sealed = hidden_field(&html, "sealed").unwrap();
    let csrf = csrf_from(&html).unwrap();
    let now = app.clock.now().unix_timestamp();
    let res = b
        .post(
            "/admin/totp-setup",
            &[
                ("csrf", &csrf),
                ("sealed", &sealed),
                ("code", &totp_at(&secret, now)),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/admin");
    assert_ne!(admin_cookie(b).unwrap(), pending, "the session id rotates");
    let admin = pact_db::admins::find_by_email(&app.db, email)
        .await
        .unwrap()
        .unwrap();
    assert!(admin.has_totp());
    secret
}

async fn grant(app: &TestApp, brand: &str, user: &str) -> Uuid {
    let pa = match pact_db::agents::find(&app.db, ISS).await.unwrap() {
        Some(_) => pact_tests::TestPa::start(ISS).await,
        None => app.registered_pa(ISS).await,
    };
    app.register(&pa).await;
    let tokens = app
        .node_connect(brand, &pa, "pa-sub", user, &["orders:read"], None)
        .await;
    let token = tokens["access_token"].as_str().unwrap();
    use base64::Engine;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&claims).unwrap();
    v["grant_id"].as_str().unwrap().parse().unwrap()
}

async fn app() -> TestApp {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    app
}

#[tokio::test]
async fn an_owner_signs_in_with_totp_and_nothing_opens_without_both_factors() {
    let app = app().await;
    add_admin(&app, "root@example.com", "owner", None).await;
    let b = Browser::new(&app);

    // Nothing opens without a session.
    let res = b.get("/admin").await;
    assert_eq!(location(&res), "/admin/sign-in");
    let (status, html) = b.get_html("/admin/sign-in").await;
    assert_eq!(status, 200);
    assert!(!html.contains("<script"), "no inline script");
    let res = b.get("/admin/sign-in").await;
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe-inline"));

    // A wrong password and an unknown email get the same answer.
    let wrong = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[
                ("email", "root@example.com"),
                ("password", "wrong password"),
            ],
        )
        .await;
    assert_eq!(wrong.status(), 401);
    let unknown = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[
                ("email", "nobody@example.com"),
                ("password", "wrong password"),
            ],
        )
        .await;
    assert_eq!(unknown.status(), 401);
    let (wrong, unknown) = (wrong.text().await.unwrap(), unknown.text().await.unwrap());
    assert!(wrong.contains("match a staff account"));
    assert_eq!(
        wrong.replace("root@example.com", "EMAIL"),
        unknown.replace("nobody@example.com", "EMAIL"),
        "an unknown email and a wrong password look the same"
    );

    // Password accepted: still nothing but the second factor. The enrolment
    // and the replay below must fall in one 30-second TOTP step.
    pact_tests::pages::next_totp_step(&app);
    let secret = sign_in(&app, &b, "root@example.com").await;
    let (status, html) = b.get_html("/admin").await;
    assert_eq!(status, 200);
    assert!(html.contains("root@example.com (owner)"));

    // Sign out, sign in again: the code is asked for, a replayed one refused.
    let csrf = csrf_from(&html).unwrap();
    let res = b.post("/admin/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(location(&res), "/admin/sign-in");
    assert_eq!(location(&b.get("/admin").await), "/admin/sign-in");
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "root@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(location(&res), "/admin/second-factor");
    assert_eq!(
        location(&b.get("/admin").await),
        "/admin/sign-in",
        "half signed in opens nothing"
    );
    let now = app.clock.now().unix_timestamp();
    let replay = b
        .submit(
            "/admin/second-factor",
            "/admin/second-factor",
            &[("code", &totp_at(&secret, now))],
        )
        .await;
    assert_eq!(
        replay.status(),
        401,
        "a code is usable once (RFC 6238 §5.2)"
    );
    let res = b
        .submit(
            "/admin/second-factor",
            "/admin/second-factor",
            &[("code", &totp_at(&secret, now + 30))],
        )
        .await;
    assert_eq!(location(&res), "/admin");

    let actions: Vec<String> =
        sqlx::query_scalar("select action from audit_log where actor in ('root@example.com', 'nobody@example.com') order by id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(
        actions,
        vec![
            "admin.sign_in_failed",
            "admin.sign_in_failed",
            "admin.totp_enrolled",
            "admin.sign_in",
            "admin.sign_out",
            "admin.sign_in_failed",
            "admin.sign_in",
        ]
    );
}

#[tokio::test]
async fn repeated_wrong_passwords_lock_the_account() {
    let app = app().await;
    add_admin(&app, "root@example.com", "owner", None).await;
    let b = Browser::new(&app);
    for _ in 0..5 {
        let res = b
            .submit(
                "/admin/sign-in",
                "/admin/sign-in",
                &[
                    ("email", "root@example.com"),
                    ("password", "wrong password"),
                ],
            )
            .await;
        assert_eq!(res.status(), 401);
    }
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "root@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(res.status(), 429, "locked even with the right password");
    assert!(admin_cookie(&b).is_none());
    // An unknown email meets the same counters and the same lock: the
    // answers do not tell whether a staff account exists.
    for _ in 0..5 {
        let res = b
            .submit(
                "/admin/sign-in",
                "/admin/sign-in",
                &[
                    ("email", "nobody@example.com"),
                    ("password", "wrong password"),
                ],
            )
            .await;
        assert_eq!(res.status(), 401);
    }
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "nobody@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(res.status(), 429);
}

/// Second-factor codes sent at once all count: each wrong one is counted
/// in the account's row (not from a count read earlier), and codes are
/// limited per account, so parallel guesses neither share one failure nor
/// outrun the lock. They are checked one after another under the row lock:
/// with three failures already counted, a burst gets exactly the two checks
/// left before the lock (before, each read the account unlocked, and as many
/// as the per-account limit let through were checked).
#[tokio::test]
async fn wrong_second_factor_codes_sent_at_once_all_count() {
    let app = app().await;
    add_admin(&app, "root@example.com", "owner", None).await;
    let b = std::sync::Arc::new(Browser::new(&app));
    sign_in(&app, &b, "root@example.com").await;
    let (_, html) = b.get_html("/admin").await;
    let csrf = csrf_from(&html).unwrap();
    b.post("/admin/sign-out", &[("csrf", &csrf)]).await;
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "root@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(location(&res), "/admin/second-factor");
    let (_, html) = b.get_html("/admin/second-factor").await;
    let csrf = csrf_from(&html).unwrap();
    sqlx::query("update admins set failed_logins = 3 where email = 'root@example.com'")
        .execute(&app.db)
        .await
        .unwrap();

    let mut guesses = tokio::task::JoinSet::new();
    for i in 0..12 {
        let (b, csrf) = (b.clone(), csrf.clone());
        guesses.spawn(async move {
            let code = format!("{:06}", 999_000 + i);
            let res = b
                .post("/admin/second-factor", &[("csrf", &csrf), ("code", &code)])
                .await;
            res.status().as_u16()
        });
    }
    let statuses = guesses.join_all().await;
    let wrong = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(wrong + limited, 12, "{statuses:?}");
    assert!(limited > 0, "codes are limited per account: {statuses:?}");
    let failed: i32 =
        sqlx::query_scalar("select failed_logins from admins where email = 'root@example.com'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(wrong, 2, "{statuses:?}");
    assert_eq!(usize::try_from(failed).unwrap(), 3 + wrong, "{statuses:?}");
}

/// Verifying a platform the open policy let in lifts its tier's limits at
/// every brand: the owner's decision in the console as in the API. An
/// operator may forget one, not verify it.
#[tokio::test]
async fn verifying_a_platform_in_the_console_needs_the_owner() {
    let app = app().await;
    app.registered_pa("https://knock.example").await;
    sqlx::query("update agents set verified = false where issuer = 'https://knock.example'")
        .execute(&app.db)
        .await
        .unwrap();
    add_admin(&app, "op@example.com", "operator", None).await;
    let b = Browser::new(&app);
    sign_in(&app, &b, "op@example.com").await;
    let (status, html) = b.get_html("/admin/agents").await;
    assert_eq!(status, 200);
    assert!(!html.contains("/admin/agents/verify"), "{html}");
    assert!(html.contains("/admin/agents/forget"), "{html}");
    let csrf = csrf_from(&html).unwrap();
    let res = b
        .post(
            "/admin/agents/verify",
            &[("csrf", &csrf), ("issuer", "https://knock.example")],
        )
        .await;
    assert_eq!(res.status(), 403);
    let verified: bool =
        sqlx::query_scalar("select verified from agents where issuer = 'https://knock.example'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(!verified);
    let denied: i64 =
        sqlx::query_scalar("select count(*) from audit_log where action = 'agent.verify.denied'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(denied, 1);
}

#[tokio::test]
async fn an_operator_revokes_a_grant_and_a_viewer_cannot() {
    let app = app().await;
    app.add_brand("shop", "Shop").await;
    for (id, d) in pact_server::agent::demo_tools::DEMO_SCOPES {
        pact_db::scopes::upsert(&app.db, &pact_tests::brand_id("shop"), id, d, false)
            .await
            .unwrap();
    }
    add_admin(&app, "ops@example.com", "operator", None).await;
    add_admin(&app, "desk@example.com", "viewer", None).await;
    add_admin(&app, "shopops@example.com", "operator", Some(&["shop"])).await;
    let g = grant(&app, "demo", "alice").await;

    // The viewer sees the grant but no button, and its POST is refused.
    let viewer = Browser::new(&app);
    sign_in(&app, &viewer, "desk@example.com").await;
    let (status, html) = viewer.get_html(&format!("/admin/grants/{g}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("alice"));
    assert!(!html.contains("Revoke this grant"));
    let csrf = csrf_from(&html).unwrap();
    // Reading includes the receipts download (a file, never cached); without
    // a console session there is none.
    let res = viewer
        .get(&format!("/admin/grants/{g}/receipts.json"))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-disposition"],
        format!("attachment; filename=\"receipts-{g}.json\"").as_str()
    );
    assert_eq!(res.headers()["cache-control"], "no-store");
    let file: serde_json::Value = res.json().await.unwrap();
    assert!(file.is_array(), "{file}");
    let res = Browser::new(&app)
        .get(&format!("/admin/grants/{g}/receipts.json"))
        .await;
    assert_ne!(res.status(), 200);
    let res = viewer
        .post(&format!("/admin/grants/{g}/revoke"), &[("csrf", &csrf)])
        .await;
    assert_eq!(res.status(), 403);
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );

    // A brand-limited operator: the demo grant does not exist for it.
    let limited = Browser::new(&app);
    sign_in(&app, &limited, "shopops@example.com").await;
    let (status, _) = limited.get_html(&format!("/admin/grants/{g}")).await;
    assert_eq!(status, 404);
    let (status, _) = limited
        .get_html(&format!("/admin/grants/{g}/receipts.json"))
        .await;
    assert_eq!(status, 404, "nor its receipts");
    let (_, html) = limited.get_html("/admin/grants").await;
    assert!(!html.contains(&g.to_string()));

    // The operator: CSRF and Origin are checked, then the grant is revoked.
    let ops = Browser::new(&app);
    sign_in(&app, &ops, "ops@example.com").await;
    let (_, html) = ops.get_html(&format!("/admin/grants/{g}")).await;
    assert!(html.contains("Revoke this grant"));
    let csrf = csrf_from(&html).unwrap();
    let res = ops
        .post(&format!("/admin/grants/{g}/revoke"), &[("csrf", "wrong")])
        .await;
    assert_eq!(res.status(), 403);
    let res = ops
        .client
        .post(ops.url(&format!("/admin/grants/{g}/revoke")))
        .header("origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    // A reason beyond 200 characters is refused, never cut short.
    let long = "x".repeat(201);
    let res = ops
        .post(
            &format!("/admin/grants/{g}/revoke"),
            &[("csrf", &csrf), ("reason", &long)],
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    // Revoking asks first, saying what the customer will read.
    let (status, html) = ops
        .post_html(
            &format!("/admin/grants/{g}/revoke"),
            &[("csrf", &csrf), ("reason", "customer called")],
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("The customer will see this reason: “customer called”"),
        "{html}"
    );
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    let res = ops
        .post(
            &format!("/admin/grants/{g}/revoke"),
            &[
                ("csrf", &csrf),
                ("reason", "customer called"),
                ("confirm", "yes"),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(
        res.headers()["location"].to_str().unwrap(),
        format!("/admin/grants/{g}?done=revoked")
    );
    let (_, html) = ops
        .get_html(&format!("/admin/grants/{g}?done=revoked"))
        .await;
    assert!(html.contains("Revoked: the agent"), "{html}");
    let row = pact_db::grants::find(&app.db, g.into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.revoked_reason.as_deref(),
        Some("revoked by an administrator: customer called")
    );
    // Without a reason the grant (whose page the customer sees) never names
    // the staff member: the audit log does.
    let g2 = grant(&app, "demo", "bob").await;
    let res = ops
        .post(
            &format!("/admin/grants/{g2}/revoke"),
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(res.status(), 303);
    let row = pact_db::grants::find(&app.db, g2.into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.revoked_reason.as_deref(),
        Some(pact_db::grants::reason::BY_ADMIN)
    );
    let (_, html) = ops.get_html(&format!("/admin/grants/{g}")).await;
    assert!(html.contains("revoked"));

    let (_, html) = viewer.get_html("/admin/audit?action=grant.").await;
    assert!(html.contains("ops@example.com (admin)"));
    assert!(html.contains("grant.revoke.denied"));
    let (_, html) = ops.get_html("/admin/audit?action=grant.revoke").await;
    assert!(html.contains(&g.to_string()));
}

#[tokio::test]
async fn disabling_an_agent_names_how_many_people_it_affects() {
    let app = app().await;
    add_admin(&app, "ops@example.com", "operator", None).await;
    grant(&app, "demo", "alice").await;
    grant(&app, "demo", "bob").await;
    let b = Browser::new(&app);
    sign_in(&app, &b, "ops@example.com").await;
    let (status, html) = b
        .get_html(&format!(
            "/admin/agents/disable?issuer={}",
            pact_tests::pages::enc(ISS)
        ))
        .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("revokes 2 active grant(s) given by 2 people"),
        "{html}"
    );
    let csrf = csrf_from(&html).unwrap();
    let res = b
        .post("/admin/agents/disable", &[("csrf", &csrf), ("issuer", ISS)])
        .await;
    assert_eq!(res.status(), 400, "a reason is required");
    let res = b
        .post(
            "/admin/agents/disable",
            &[("csrf", &csrf), ("issuer", ISS), ("reason", "compromised")],
        )
        .await;
    assert_eq!(location(&res), "/admin/agents");
    assert!(
        !pact_db::agents::find(&app.db, ISS)
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
    let (_, html) = b.get_html("/admin/audit").await;
    assert!(html.contains("agent.disable"));
    assert!(html.contains("&#34;revoked_grants&#34;:2"), "{html}");
}

#[tokio::test]
async fn an_operator_finds_a_customer_and_unlocks_signs_out_and_revokes_all_their_grants() {
    let app = app().await;
    add_admin(&app, "ops@example.com", "operator", None).await;
    add_admin(&app, "desk@example.com", "viewer", None).await;
    let user = pact_tests::pages::add_user(&app, "demo", "ann@example.com", PASSWORD).await;
    pact_db::users::record_failure(
        &app.db,
        user.id,
        9,
        Some(time::OffsetDateTime::now_utc() + time::Duration::minutes(5)),
    )
    .await
    .unwrap();
    let g = grant(&app, "demo", &user.subject()).await;

    let viewer = Browser::new(&app);
    sign_in(&app, &viewer, "desk@example.com").await;
    let (_, html) = viewer
        .get_html("/admin/customers?q=ann%40example.com")
        .await;
    assert!(html.contains("ann@example.com") && !html.contains("not locked"));
    assert!(!html.contains("Unlock"), "a viewer has no buttons");
    let csrf = csrf_from(&html).unwrap();
    let res = viewer
        .post(
            &format!("/admin/customers/{}/unlock", user.id),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(res.status(), 403);

    let ops = Browser::new(&app);
    sign_in(&app, &ops, "ops@example.com").await;
    let (_, html) = ops.get_html("/admin/customers?q=ann%40example.com").await;
    let csrf = csrf_from(&html).unwrap();
    // "Revoke all their grants" asks first and changes nothing until confirmed.
    let (status, html) = ops
        .post_html(
            &format!("/admin/customers/{}/revoke-grants", user.id),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        html.contains("Revoke every grant ann@example.com gave?"),
        "{html}"
    );
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    for (action, confirm) in [("unlock", ""), ("sign-out", ""), ("revoke-grants", "yes")] {
        let res = ops
            .post(
                &format!("/admin/customers/{}/{action}", user.id),
                &[("csrf", &csrf), ("confirm", confirm)],
            )
            .await;
        assert_eq!(res.status(), 303, "{action}");
    }
    let u = pact_tests::pages::reload(&app, &user).await;
    assert!(u.locked_until.is_none());
    assert!(
        pact_db::grants::find(&app.db, g.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_some()
    );
    let actions: Vec<String> = sqlx::query_scalar(
        "select action from audit_log where actor = 'ops@example.com' and target = $1 order by id",
    )
    .bind(user.id.to_string())
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        actions,
        vec![
            "customer.unlock",
            "customer.sign_out",
            "customer.revoke_grants"
        ]
    );
}

/// An account whose second factor is a passkey cannot skip it: setting up an
/// authenticator app completes a sign-in, so the set-up page (GET and POST)
/// is closed to an account that has a factor, and sends it to the second
/// factor instead. A wrong recovery code counts towards the lock.
#[tokio::test]
async fn a_passkey_account_cannot_set_up_an_app_to_skip_its_passkey() {
    // A relying party needs a domain name (passkeys are not offered on an IP address).
    let app = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
    })
    .await;
    add_admin(&app, "key@example.com", "owner", None).await;
    let admin = pact_db::admins::find_by_email(&app.db, "key@example.com")
        .await
        .unwrap()
        .unwrap();
    pact_db::admin_factors::insert_passkey(
        &app.db,
        admin.id,
        b"credential-1",
        &serde_json::json!({}),
        "Key",
    )
    .await
    .unwrap();
    let b = Browser::new(&app);
    let res = b
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "key@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(location(&res), "/admin/second-factor");
    let (status, html) = b.get_html("/admin/second-factor").await;
    assert_eq!(status, 200);
    assert!(html.contains("Sign in with a passkey"), "{html}");
    assert!(
        !html.contains("name=\"code\""),
        "no TOTP form without an app"
    );
    // The page's only token is the passkey script's (no form: no app, no codes).
    let start = html.find("data-csrf=\"").unwrap() + "data-csrf=\"".len();
    let csrf = html[start..start + html[start..].find('"').unwrap()].to_owned();

    let res = b.get("/admin/totp-setup").await;
    assert_eq!(location(&res), "/admin/second-factor");
    let res = b
        .post(
            "/admin/totp-setup",
            &[("csrf", &csrf), ("sealed", "x"), ("code", "123456")],
        )
        .await;
    assert_eq!(location(&res), "/admin/second-factor");
    // A TOTP code without an app is refused, and so is a made-up recovery code.
    let res = b
        .post(
            "/admin/second-factor",
            &[("csrf", &csrf), ("code", "123456")],
        )
        .await;
    assert_eq!(res.status(), 400);
    let res = b
        .post(
            "/admin/second-factor",
            &[("csrf", &csrf), ("recovery_code", "abcde-fghjk")],
        )
        .await;
    assert_eq!(res.status(), 401);
    let res = b.get("/admin").await;
    assert_eq!(location(&res), "/admin/sign-in", "still not signed in");
    let after = pact_db::admins::find(&app.db, admin.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!after.has_totp(), "no app was set up");
    assert_eq!(after.failed_logins, 1, "the wrong recovery code counted");
}

/// An account's last second factor is never removed, even by two removals
/// sent at once (each of which saw the other passkey); each removal is in
/// the audit log with the change it made.
#[tokio::test]
async fn two_passkeys_removed_at_once_leave_the_last_one() {
    let app = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
    })
    .await;
    add_admin(&app, "key@example.com", "owner", None).await;
    let b = Browser::new(&app);
    sign_in(&app, &b, "key@example.com").await;
    let admin = pact_db::admins::find_by_email(&app.db, "key@example.com")
        .await
        .unwrap()
        .unwrap();
    let mut ids = Vec::new();
    for (cred, name) in [(b"credential-1", "One"), (b"credential-2", "Two")] {
        let row = pact_db::admin_factors::insert_passkey(
            &app.db,
            admin.id,
            cred,
            &serde_json::json!({}),
            name,
        )
        .await
        .unwrap();
        ids.push(row.id);
    }
    // The app is gone (as an operator's reset would leave it): the two
    // passkeys are the account's only second factors.
    pact_db::admins::set_totp(&app.db, admin.id, None)
        .await
        .unwrap();
    let (status, html) = b.get_html("/admin/account").await;
    assert_eq!(status, 200, "{html}");
    let csrf = csrf_from(&html).unwrap();
    let paths: Vec<String> = ids
        .iter()
        .map(|id| format!("/admin/passkeys/{id}/delete"))
        .collect();
    let form = [("csrf", csrf.as_str())];
    let answers = crate::messages::join_all(paths.iter().map(|p| b.post(p, &form)).collect()).await;
    let mut statuses: Vec<u16> = answers.iter().map(|r| r.status().as_u16()).collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [303, 400]);
    let left = pact_db::admin_factors::passkeys_of(&app.db, admin.id)
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    let removed: i64 =
        sqlx::query_scalar("select count(*) from audit_log where action = 'admin.passkey_remove'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(removed, 1);
}

/// The audit log's newest id and the grants' revocations, to see that a
/// refused POST changed nothing.
async fn footprint(app: &TestApp) -> (i64, i64) {
    sqlx::query_as(
        "select (select coalesce(max(id), 0) from audit_log), \
                (select count(*) from grants where revoked_at is not null)",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// Every form of the console's one route table (`ROUTES`), posted by a
/// signed-in owner with a wrong CSRF token, with the right one from another
/// origin, and with the right one and no session at all: each is refused
/// with 403 before it acts, and nothing is recorded or changed. A new form
/// is covered without being named here.
#[tokio::test]
async fn every_console_form_refuses_a_forged_post_and_changes_nothing() {
    // On a host name, so that the passkey forms are open too.
    let app = TestApp::spawn_with(|c| {
        c.public_url = format!("http://localhost:{}", c.listen.port());
    })
    .await;
    app.enable_demo_delegation().await;
    add_admin(&app, "root@example.com", "owner", None).await;
    let g = grant(&app, "demo", "ann").await.to_string();
    let owner = Browser::new(&app);
    sign_in(&app, &owner, "root@example.com").await;
    let (_, html) = owner.get_html("/admin").await;
    let csrf = csrf_from(&html).unwrap();
    let signed_out = Browser::new(&app);
    let before = footprint(&app).await;

    let forms: Vec<&str> = pact_server::admin::console::ROUTES
        .iter()
        .filter(|r| r.method == "post")
        .map(|r| r.path)
        .collect();
    assert!(forms.len() > 20, "{forms:?}");
    for route in forms {
        let path = route.replace("{id}", &g).replace("{action}", "unlock");
        let fields = [
            ("csrf", csrf.as_str()),
            ("reason", "forged"),
            ("issuer", ISS),
        ];
        let wrong_token = owner
            .post(&path, &[("csrf", "not the token"), ("issuer", ISS)])
            .await;
        assert_eq!(wrong_token.status(), 403, "{route}: a wrong CSRF token");
        let elsewhere = owner
            .client
            .post(owner.url(&path))
            .header("origin", "https://evil.example")
            .header("x-csrf-token", csrf.as_str())
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_eq!(elsewhere.status(), 403, "{route}: another origin");
        let no_session = signed_out.post(&path, &fields).await;
        assert_eq!(no_session.status(), 403, "{route}: no session");
        assert_eq!(footprint(&app).await, before, "{route}: nothing changed");
    }
    // The same token, from the page's own origin, still works.
    let res = owner
        .post(
            &format!("/admin/grants/{g}/revoke"),
            &[("csrf", &csrf), ("confirm", "yes")],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_ne!(footprint(&app).await, before);
}
