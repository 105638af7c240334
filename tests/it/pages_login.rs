//! Built-in sign-in (PACT §5.2) over real HTTP: the login page, second
//! factors (TOTP, recovery codes), enrolment, step-up, sign-out, and the
//! safety rules around them (cookies, rotation, CSRF/Origin, identical
//! failures, lockout, rate limits, redirects, headers, rehashing).

use std::time::Instant;

use pact_server::accounts::{password, recovery, totp};
use pact_tests::TestApp;
use pact_tests::pages::{
    Browser, add_totp, add_user, csrf_from, enc, hidden_field, location, next_totp_step, reload,
    require_mfa, secret_from_setup_page, session_of, set_cookie, totp_at, totp_now, without_csrf,
};
use time::OffsetDateTime;

const PW: &str = "correct horse battery staple";
const EMAIL: &str = "ann@example.com";

/// POSTs every form to `path` at once from browser `b` (with its CSRF
/// token and Origin), as a burst of guesses would come; the statuses.
async fn burst(
    b: &Browser,
    path: &str,
    csrf: &str,
    forms: Vec<Vec<(&'static str, String)>>,
) -> Vec<u16> {
    let mut burst = tokio::task::JoinSet::new();
    for mut form in forms {
        form.push(("csrf", csrf.to_owned()));
        let request = b
            .client
            .post(b.url(path))
            .header("origin", b.origin.clone())
            .form(&form);
        burst.spawn(async move { request.send().await.unwrap().status().as_u16() });
    }
    burst.join_all().await
}

async fn body(res: reqwest::Response) -> String {
    res.text().await.unwrap()
}

fn header(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// Signs in a user without a second factor; asserts the redirect to `/account`.
async fn signed_in(app: &TestApp) -> (Browser, pact_db::users::User) {
    let user = add_user(app, "demo", EMAIL, PW).await;
    let b = Browser::new(app);
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(res.status(), 303, "{}", body(res).await);
    assert_eq!(location(&res), "/account");
    (b, user)
}

#[tokio::test(flavor = "multi_thread")]
async fn sign_in_rotates_the_session_into_a_hashed_http_only_lax_cookie() {
    let app = TestApp::spawn().await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    let b = Browser::new(&app);

    let res = b.get("/login?brand=demo&next=/account").await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let page = body(res).await;
    assert!(page.contains("Sign in to Demo Store"), "{page}");
    assert!(page.contains(r#"<label for="email">"#) && page.contains(r#"<label for="password">"#));
    // Showing the form makes no session (nothing is written for a visitor
    // who has done nothing yet); a form-token cookie carries the CSRF token.
    assert!(b.session_cookie().is_none(), "no session for a page view");

    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account");
    let cookie = set_cookie(&res).expect("a new session cookie");
    let parts: Vec<&str> = cookie.split("; ").collect();
    assert!(parts[0].starts_with("pactd_session="), "{cookie}");
    for attr in ["Path=/", "HttpOnly", "SameSite=Lax"] {
        assert!(parts.contains(&attr), "{attr} missing: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain-http public URL: {cookie}"
    );

    let after = b.session_cookie().unwrap();
    let s = session_of(&app, &after).await.expect("the new session");
    assert_eq!(s.user_id, Some(user.id));
    assert_eq!(s.brand_id.as_deref(), Some("demo"));
    assert!(s.mfa_at.is_none() && s.pending_user_id.is_none());
    // Only the hash is stored: no row holds the cookie value itself.
    let raw: i64 = sqlx::query_scalar(
        "select count(*) from sessions where id_hash = convert_to($1, 'UTF8') or csrf_token = $1",
    )
    .bind(&after)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(raw, 0);
    assert_eq!(
        s.id_hash,
        pact_server::domain::secrets::hash(&after),
        "stored as SHA-256"
    );

    // Signed in: /login goes straight on.
    let res = b.get("/login?brand=demo&next=/device").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_an_https_public_url_the_cookie_is_secure_and_host_prefixed() {
    let app =
        TestApp::spawn_with(|c| c.public_url = c.public_url.replace("http://", "https://")).await;
    add_user(&app, "demo", EMAIL, PW).await;
    let origin = app.state.config.public_url.clone();
    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    let res = http
        .get(format!("{}/login?brand=demo", app.base_url))
        .send()
        .await
        .unwrap();
    let first = set_cookie(&res).unwrap();
    assert!(first.starts_with("__Host-pactd_form="), "{first}");
    for attr in ["Path=/", "HttpOnly", "SameSite=Lax", "Secure"] {
        assert!(
            first.split("; ").any(|a| a == attr),
            "{attr} missing: {first}"
        );
    }
    let pair = first.split(';').next().unwrap().to_owned();
    let csrf = csrf_from(&body(res).await).unwrap();

    let res = http
        .post(format!("{}/login", app.base_url))
        .header("cookie", &pair)
        .header("origin", &origin)
        .form(&[
            ("csrf", csrf.as_str()),
            ("brand", "demo"),
            ("next", "/account"),
            ("email", EMAIL),
            ("password", PW),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let signed = set_cookie(&res).unwrap();
    assert!(signed.starts_with("__Host-pactd_session="), "{signed}");
    assert!(signed.split("; ").any(|a| a == "Secure"), "{signed}");
    assert_ne!(signed.split(';').next().unwrap(), pair, "rotated");
}

#[tokio::test(flavor = "multi_thread")]
async fn posts_without_the_csrf_token_or_from_another_origin_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    let (b, user) = signed_in(&app).await;
    let cookie = b.session_cookie().unwrap();
    let (_, page) = b.get_html("/account/totp").await;
    let csrf = csrf_from(&page).unwrap();

    // Every form of the person's pages (web/extract.rs's `SessionForm` and
    // `VisitorForm`): the checks come before anything else the handler
    // does, so a form whose feature is off here (mail for a reset link,
    // passkeys on an address without a host name) is refused the same way.
    let nobody = uuid::Uuid::nil();
    for path in [
        "/login",
        "/login/second-factor",
        "/logout",
        "/login/forgot",
        "/login/reset",
        "/account/totp",
        "/account/recovery-codes",
        "/account/delete",
        "/account/sessions/sign-out-others",
        &format!("/account/grants/{nobody}/revoke"),
        &format!("/account/passkeys/{nobody}/delete"),
        "/device",
        "/device/consent",
        "/device/not-you",
    ] {
        let form = [
            ("brand", "demo"),
            ("email", EMAIL),
            ("password", "wrong password!"),
            ("code", "123456"),
            ("confirm", "yes"),
            ("user_code", "BCDF-GHJK"),
            ("action", "approve"),
        ];
        // No token, a wrong token.
        let res = b.post(path, &form).await;
        assert_eq!(res.status(), 403, "{path} without a token");
        assert!(body(res).await.contains("Go back, reload the page"));
        let mut wrong = form.to_vec();
        wrong.push(("csrf", "not-the-token"));
        let res = b.post(path, &wrong).await;
        assert_eq!(res.status(), 403, "{path} with a wrong token");
        // The right token but another Origin, or no Origin at all.
        let mut right = form.to_vec();
        right.push(("csrf", &csrf));
        for origin in [Some("https://evil.example"), Some("null"), None] {
            let mut req = b.client.post(b.url(path)).form(&right);
            if let Some(o) = origin {
                req = req.header("origin", o);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 403, "{path} from {origin:?}");
            assert!(set_cookie(&res).is_none());
        }
    }
    // Nothing changed: same session, still signed in, no failure counted, no factor set.
    assert_eq!(b.session_cookie().unwrap(), cookie);
    let s = session_of(&app, &cookie).await.unwrap();
    assert_eq!(s.user_id, Some(user.id));
    let now = reload(&app, &user).await;
    assert_eq!(now.failed_logins, 0);
    assert!(now.totp_secret_sealed.is_none());
    assert_eq!(
        pact_db::users::unused_recovery_codes(&app.db, user.id)
            .await
            .unwrap(),
        0
    );

    // A browser with no session at all is refused too.
    let stranger = Browser::new(&app);
    let res = stranger
        .post(
            "/login",
            &[
                ("brand", "demo"),
                ("email", EMAIL),
                ("password", PW),
                ("csrf", ""),
            ],
        )
        .await;
    assert_eq!(res.status(), 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_email_and_a_wrong_password_get_the_same_answer_in_similar_time() {
    let app = TestApp::spawn().await;
    add_user(&app, "demo", EMAIL, PW).await;
    let b = Browser::new(&app);
    let (_, page) = b.get_html("/login?brand=demo").await;
    let csrf = csrf_from(&page).unwrap();
    let attempt = |email: &'static str| {
        let b = &b;
        let csrf = csrf.clone();
        async move {
            let started = Instant::now();
            let res = b
                .post(
                    "/login",
                    &[
                        ("csrf", csrf.as_str()),
                        ("brand", "demo"),
                        ("next", "/account"),
                        ("email", email),
                        ("password", "not the password"),
                    ],
                )
                .await;
            let status = res.status().as_u16();
            let text = body(res).await;
            (started.elapsed(), status, text)
        }
    };
    // Warm up (the dummy hash is computed once per process).
    attempt("warm-up@example.com").await;

    let (mut unknown, mut wrong) = (Vec::new(), Vec::new());
    let mut bodies = Vec::new();
    // Five pairs: a sixth wrong password would lock the account (and answer 429).
    for _ in 0..5 {
        let (t, s, text) = attempt("nobody@example.com").await;
        unknown.push(t);
        bodies.push((s, text));
        let (t, s, text) = attempt(EMAIL).await;
        wrong.push(t);
        bodies.push((s, text));
    }
    let (status, first) = &bodies[0];
    assert_eq!(*status, 400);
    assert!(first.contains("match an account here"), "{first}");
    for (s, text) in &bodies {
        assert_eq!(s, status);
        assert_eq!(without_csrf(text), without_csrf(first), "identical pages");
    }
    unknown.sort();
    wrong.sort();
    let (mu, mw) = (unknown[2], wrong[2]);
    eprintln!("median sign-in POST: unknown email {mu:?}, wrong password {mw:?}");
    // Not a performance assertion: the password hash costs tens of
    // milliseconds and the rest of the request about one, so a path that
    // skipped the dummy hash would be 20x or more faster. A 4x bound catches
    // that while tolerating a loaded machine (tests run side by side on two
    // cores).
    assert!(
        mu < mw * 4 && mw < mu * 4,
        "medians differ by more than 4x: {mu:?} vs {mw:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn five_failures_lock_the_account_even_against_the_right_password_until_the_lock_ends() {
    let app = TestApp::spawn().await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    let b = Browser::new(&app);
    for i in 1..=5 {
        let res = b.sign_in("demo", EMAIL, "wrong password", "/account").await;
        assert_eq!(res.status(), 400, "failure {i}");
    }
    // Counted by (address, email) and by email, not in the account: the same
    // rows exist for an email nobody has.
    let locked: Vec<(i32, Option<OffsetDateTime>)> = sqlx::query_as(
        "select failed, locked_until from sign_in_failures order by locked_until nulls last",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(locked.len(), 2, "{locked:?}");
    assert_eq!(locked[0].0, 5);
    assert!(locked[0].1.unwrap() > OffsetDateTime::now_utc());
    assert_eq!(locked[1], (5, None), "the email alone is not locked yet");

    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(
        res.status(),
        429,
        "the right password is refused while locked"
    );
    let retry: u64 = header(&res, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let text = body(res).await;
    assert!(
        text.contains("Too many attempts. Please wait 1 minute and try again."),
        "{text}"
    );
    assert!(b.session_cookie().is_none(), "no session while locked");

    // The lock always ends (here: moved into the past, as time would).
    sqlx::query("update sign_in_failures set locked_until = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(res.status(), 303);
    let left: i64 = sqlx::query_scalar("select count(*) from sign_in_failures")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 0, "a sign-in clears both counters");
    let cleared = reload(&app, &user).await;
    assert_eq!(cleared.failed_logins, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn too_many_sign_ins_from_one_address_get_429_with_retry_after() {
    // The default burst (20) with a refill slow enough that a loaded machine's
    // argon2 time cannot add a token during the loop.
    let app = TestApp::spawn_with(|c| {
        c.page_limits.sign_in_per_ip = pact_server::web::limits::Rate::new(0.001, 20.0);
    })
    .await;
    let b = Browser::new(&app);
    let (_, page) = b.get_html("/login?brand=demo").await;
    let csrf = csrf_from(&page).unwrap();
    let mut last = None;
    for i in 0..21 {
        let email = format!("guess{i}@example.com");
        let res = b
            .post(
                "/login",
                &[
                    ("csrf", csrf.as_str()),
                    ("brand", "demo"),
                    ("email", email.as_str()),
                    ("password", "a guessed password"),
                ],
            )
            .await;
        if res.status() == 429 {
            last = Some((i, res));
            break;
        }
        assert_eq!(res.status(), 400);
    }
    let (i, res) = last.expect("the per-IP limit applies");
    assert_eq!(i, 20, "20 attempts are allowed first");
    let retry: u64 = header(&res, "retry-after").parse().unwrap();
    assert!(retry >= 1);
    let text = body(res).await;
    assert!(
        text.contains("Too many sign-in attempts from your network."),
        "{text}"
    );
    assert!(text.contains("Please wait"), "{text}");
    assert!(text.contains("Demo Store"));
}

#[tokio::test(flavor = "multi_thread")]
async fn totp_enrolment_shows_a_qr_code_confirms_with_a_code_and_the_code_is_spent() {
    let app = TestApp::spawn().await;
    let (b, user) = signed_in(&app).await;
    let res = b.get("/account/totp").await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let page = body(res).await;
    assert!(page.contains("<svg"), "an inline QR code");
    // And the same URI as a link, for an authenticator app on this very device.
    assert!(page.contains(r#"href="otpauth://totp/"#), "{page}");
    assert!(!page.contains("style="), "no inline style (CSP)");
    assert!(!page.contains("<script"), "no inline script");
    assert!(page.contains("Demo Store"));
    let secret = secret_from_setup_page(&page);
    assert_eq!(secret.len(), totp::SECRET_BYTES);
    let t = next_totp_step(&app);

    // The page's hidden field carries the new secret, sealed.
    let csrf = csrf_from(&page).unwrap();
    let sealed = hidden_field(&page, "sealed").unwrap();

    // A wrong code stores nothing.
    let code = totp_at(&secret, t);
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let res = b
        .post(
            "/account/totp",
            &[
                ("csrf", csrf.as_str()),
                ("sealed", &sealed),
                ("code", wrong),
            ],
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(body(res).await.contains("didn"));
    assert!(reload(&app, &user).await.totp_secret_sealed.is_none());
    // A tampered sealed secret is refused.
    let res = b
        .post(
            "/account/totp",
            &[("csrf", csrf.as_str()), ("sealed", "AAAA"), ("code", &code)],
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(reload(&app, &user).await.totp_secret_sealed.is_none());

    // The right one.
    let before = b.session_cookie().unwrap();
    let res = b
        .post(
            "/account/totp",
            &[
                ("csrf", csrf.as_str()),
                ("sealed", &sealed),
                ("code", &code),
                ("next", "/account"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let shown = body(res).await;
    assert!(shown.contains("Your recovery codes"), "{shown}");
    assert_eq!(shown.matches("<li><code>").count(), recovery::COUNT);
    let stored = reload(&app, &user).await;
    let opened = app
        .master_key
        .open(
            stored.totp_secret_sealed.as_ref().unwrap(),
            user.id.as_bytes(),
        )
        .unwrap();
    assert_eq!(
        opened, secret,
        "sealed with the master key under the user id"
    );
    assert_eq!(
        pact_db::users::unused_recovery_codes(&app.db, user.id)
            .await
            .unwrap(),
        10
    );
    let after = b.session_cookie().unwrap();
    assert_ne!(after, before, "rotated");
    assert!(session_of(&app, &after).await.unwrap().mfa_at.is_some());

    // The confirming code cannot be replayed to sign in.
    b.sign_out().await;
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
    let res = b.second_factor("code", &code, "/account").await;
    assert_eq!(res.status(), 400);
    assert!(body(res).await.contains("already used"));
}

#[tokio::test(flavor = "multi_thread")]
async fn totp_codes_work_once_and_one_step_of_drift_either_way_is_accepted() {
    let app = TestApp::spawn().await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    let secret = add_totp(&app, &user).await;
    let b = Browser::new(&app);
    let t = next_totp_step(&app);

    let res = b.sign_in("demo", EMAIL, PW, "/device").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login/second-factor?next=%2Fdevice");
    let pending = session_of(&app, &b.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(pending.pending_user_id, Some(user.id));
    assert!(
        pending.user_id.is_none(),
        "not signed in before the second factor"
    );
    let (status, page) = b.get_html("/login/second-factor?next=/device").await;
    assert_eq!(status, 200);
    assert!(page.contains("One more step") && page.contains("Demo Store"));

    // One step behind: accepted.
    let res = b
        .second_factor("code", &totp_at(&secret, t - 30), "/device")
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/device");
    let s = session_of(&app, &b.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(s.user_id, Some(user.id));
    assert!(s.pending_user_id.is_none() && s.mfa_at.is_some());

    // The same code again (as a step-up of the signed-in session): refused.
    let res = b
        .second_factor("code", &totp_at(&secret, t - 30), "/device")
        .await;
    assert_eq!(res.status(), 400);
    assert!(body(res).await.contains("already used"));
    // One step ahead: accepted; then the current step (now older) is refused.
    let res = b
        .second_factor("code", &totp_at(&secret, t + 30), "/device")
        .await;
    assert_eq!(res.status(), 303);
    let res = b
        .second_factor("code", &totp_at(&secret, t), "/device")
        .await;
    assert_eq!(res.status(), 400);
    // Two steps away: refused.
    let res = b
        .second_factor("code", &totp_at(&secret, t + 90), "/device")
        .await;
    assert_eq!(res.status(), 400);
    assert!(body(res).await.contains("didn"));
}

#[tokio::test(flavor = "multi_thread")]
async fn too_many_wrong_codes_get_429_with_a_clear_message() {
    let app = TestApp::spawn().await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    add_totp(&app, &user).await;
    let b = Browser::new(&app);
    b.sign_in("demo", EMAIL, PW, "/account").await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        // Never a valid code: 7 digits are refused before any comparison.
        let res = b.second_factor("code", "1234567", "/account").await;
        statuses.push(res.status().as_u16());
        if res.status() == 429 {
            assert!(header(&res, "retry-after").parse::<u64>().unwrap() >= 1);
            let text = body(res).await;
            assert!(
                text.contains("Too many code attempts.")
                    || text.contains("Too many attempts. Please wait"),
                "{text}"
            );
        }
    }
    assert_eq!(statuses, [400, 400, 400, 400, 400, 429]);
    // The wrong codes counted towards the lockout too.
    assert!(reload(&app, &user).await.locked_until.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recovery_code_works_once_and_a_new_set_needs_a_recent_second_factor() {
    let app = TestApp::spawn().await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    add_totp(&app, &user).await;
    let master = app.state.config.master_key.clone();
    let codes = recovery::generate();
    // Stored as codes issued before keyed hashing were (plain SHA-256, the
    // second form): they keep working until the account gets a new set.
    let hashes: Vec<Vec<u8>> = codes
        .iter()
        .map(|c| recovery::stored_forms(&master, user.id, c).unwrap()[1].clone())
        .collect();
    let mut conn = app.db.acquire().await.unwrap();
    pact_db::users::replace_recovery_codes(&mut conn, user.id, &hashes)
        .await
        .unwrap();
    drop(conn);
    let b = Browser::new(&app);

    b.sign_in("demo", EMAIL, PW, "/account").await;
    let res = b
        .second_factor("recovery_code", &codes[0], "/account")
        .await;
    // Signed in, and told a recovery code was used and how many are left.
    assert_eq!(res.status(), 200);
    assert!(set_cookie(&res).is_some());
    let said = body(res).await;
    assert!(said.contains("You used a recovery code"), "{said}");
    assert!(
        said.contains(&format!("You have {} recovery codes left", codes.len() - 1)),
        "{said}"
    );
    assert!(said.contains(r#"href="/account""#));
    let signed = session_of(&app, &b.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(signed.user_id, Some(user.id));
    assert!(signed.mfa_at.is_some());

    b.sign_out().await;
    b.sign_in("demo", EMAIL, PW, "/account").await;
    let res = b
        .second_factor("recovery_code", &codes[0], "/account")
        .await;
    assert_eq!(res.status(), 400, "a recovery code works once");
    // Typed differently (case, no dash) it is still the same code.
    let typed = codes[1].to_uppercase().replace('-', "");
    let res = b.second_factor("recovery_code", &typed, "/account").await;
    assert_eq!(res.status(), 200);

    // A new set, with the second factor just verified.
    let res = b
        .post_with_csrf("/account/recovery-codes", &[("next", "/account")])
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "cache-control"), "no-store");
    let page = body(res).await;
    assert_eq!(page.matches("<li><code>").count(), recovery::COUNT);
    assert!(page.contains("shown only this time"));
    assert_eq!(
        pact_db::users::unused_recovery_codes(&app.db, user.id)
            .await
            .unwrap(),
        10
    );
    let old = recovery::stored_forms(&master, user.id, &codes[2]).unwrap();
    assert!(
        !pact_db::users::use_recovery_code(&app.db, user.id, &old)
            .await
            .unwrap(),
        "old codes are gone"
    );
    // The new set is stored keyed under the master key, bound to the
    // account: a copy of the database cannot be searched for them.
    let stored: Vec<Vec<u8>> =
        sqlx::query_scalar("select code_hash from recovery_codes where user_id = $1")
            .bind(user.id)
            .fetch_all(&app.db)
            .await
            .unwrap();
    let shown: Vec<&str> = page
        .split("<li><code>")
        .skip(1)
        .filter_map(|s| s.split("</code>").next())
        .collect();
    assert_eq!(shown.len(), recovery::COUNT);
    for code in shown {
        let forms = recovery::stored_forms(&master, user.id, code).unwrap();
        assert!(stored.contains(&forms[0]), "{code} stored keyed");
        assert!(!stored.contains(&forms[1]), "{code} not as a plain digest");
    }

    // With the second factor too long ago: sent to confirm it first.
    sqlx::query("update sessions set mfa_at = now() - interval '11 minutes'")
        .execute(&app.db)
        .await
        .unwrap();
    let res = b
        .post_with_csrf("/account/recovery-codes", &[("next", "/account")])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_brand_that_requires_mfa_sends_people_without_a_factor_to_enrolment_first() {
    let app = TestApp::spawn().await;
    require_mfa(&app, "demo", true).await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    let b = Browser::new(&app);

    let res = b.sign_in("demo", EMAIL, PW, "/device").await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/account/totp?next=%2Fdevice");
    let pending = session_of(&app, &b.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(pending.pending_user_id, Some(user.id));
    assert!(pending.user_id.is_none());
    // The second-factor page sends them to enrolment too.
    let res = b.get("/login/second-factor?next=/device").await;
    assert_eq!(location(&res), "/account/totp?next=%2Fdevice");

    let (status, page) = b.get_html("/account/totp?next=/device").await;
    assert_eq!(status, 200);
    assert!(page.contains("<svg") && page.contains("asks every account for a second factor"));
    let secret = secret_from_setup_page(&page);
    let csrf = csrf_from(&page).unwrap();
    let sealed = hidden_field(&page, "sealed").unwrap();
    let res = b
        .post(
            "/account/totp",
            &[
                ("csrf", csrf.as_str()),
                ("sealed", &sealed),
                ("code", &totp_now(&secret)),
                ("next", "/device"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200);
    let page = body(res).await;
    assert!(page.contains("Your authenticator app is set up"));
    assert!(page.contains(r#"href="/device""#), "continues to next");
    let s = session_of(&app, &b.session_cookie().unwrap())
        .await
        .unwrap();
    assert_eq!(s.user_id, Some(user.id), "the sign-in completed");
    assert!(s.pending_user_id.is_none() && s.mfa_at.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn step_up_for_a_signed_in_session_sets_mfa_at_and_rotates() {
    let app = TestApp::spawn().await;
    let (b, user) = signed_in(&app).await;
    let secret = add_totp(&app, &user).await;
    let before = b.session_cookie().unwrap();
    assert!(session_of(&app, &before).await.unwrap().mfa_at.is_none());

    let next = "/device/consent?scopes=a+b";
    let (status, page) = b
        .get_html(&format!("/login/second-factor?next={}", enc(next)))
        .await;
    assert_eq!(status, 200);
    assert!(page.contains("Confirm it"), "{page}");
    let res = b.second_factor("code", &totp_now(&secret), next).await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), next);
    let after = b.session_cookie().unwrap();
    assert_ne!(after, before, "rotated");
    assert!(session_of(&app, &before).await.is_none());
    let s = session_of(&app, &after).await.unwrap();
    assert_eq!(s.user_id, Some(user.id));
    let mfa_at = s.mfa_at.expect("mfa_at set");
    assert!(OffsetDateTime::now_utc() - mfa_at < time::Duration::minutes(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_after_sign_in_stay_on_this_site() {
    let app = TestApp::spawn().await;
    add_user(&app, "demo", EMAIL, PW).await;
    for evil in [
        "//evil.example",
        "https://evil.example",
        "/\\evil",
        "/\\/evil.example",
    ] {
        let b = Browser::new(&app);
        let (_, page) = b
            .get_html(&format!("/login?brand=demo&next={}", enc(evil)))
            .await;
        assert!(page.contains(r#"name="next" value="/account""#), "{evil}");
        let res = b.sign_in("demo", EMAIL, PW, evil).await;
        assert_eq!(res.status(), 303);
        assert_eq!(location(&res), "/account", "{evil}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_carry_the_security_headers_and_personal_pages_are_not_stored() {
    let app = TestApp::spawn().await;
    let (b, _) = signed_in(&app).await;
    for path in ["/login?brand=demo", "/account/totp", "/login/second-factor"] {
        let res = b.get(path).await;
        let csp = header(&res, "content-security-policy");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert_eq!(header(&res, "x-content-type-options"), "nosniff");
        assert_eq!(header(&res, "referrer-policy"), "no-referrer");
        assert_eq!(header(&res, "cache-control"), "no-store", "{path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_out_ends_the_session() {
    let app = TestApp::spawn().await;
    let (b, _) = signed_in(&app).await;
    let old = b.session_cookie().unwrap();
    let res = b.sign_out().await;
    assert_eq!(location(&res), "/login?brand=demo&out=1");
    let new = b.session_cookie().unwrap();
    assert_ne!(new, old);
    assert!(session_of(&app, &old).await.is_none());
    assert!(session_of(&app, &new).await.unwrap().user_id.is_none());
    let (_, page) = b.get_html("/login?brand=demo&out=1").await;
    assert!(page.contains("You are signed out."));

    // The old cookie no longer opens anything.
    let res = app
        .http
        .get(format!("{}/account/totp", app.base_url))
        .header("cookie", format!("pactd_session={old}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert!(location(&res).starts_with("/login"), "{}", location(&res));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_hashed_with_weaker_parameters_is_rehashed_at_sign_in() {
    use argon2::password_hash::rand_core::OsRng;
    use argon2::password_hash::{PasswordHasher, SaltString};
    let app = TestApp::spawn().await;
    let weak = argon2::Argon2::new(
        argon2::Algorithm::Argon2id,
        argon2::Version::V0x13,
        argon2::Params::new(8 * 1024, 1, 1, None).unwrap(),
    )
    .hash_password(PW.as_bytes(), &SaltString::generate(&mut OsRng))
    .unwrap()
    .to_string();
    let user = pact_db::users::insert(
        &app.db,
        uuid::Uuid::new_v4(),
        &pact_tests::brand_id("demo"),
        EMAIL,
        None,
        &weak,
    )
    .await
    .unwrap();
    assert_eq!(
        password::verify(PW, Some(&weak)),
        password::Verified::YesRehash
    );

    let b = Browser::new(&app);
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(res.status(), 303);
    let stored = reload(&app, &user).await.password_hash.unwrap();
    assert_ne!(stored, weak);
    assert!(
        stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{stored}"
    );
    assert_eq!(password::verify(PW, Some(&stored)), password::Verified::Yes);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sign_in_page_needs_a_known_brand() {
    let app = TestApp::spawn().await;
    let b = Browser::new(&app);
    let (status, page) = b.get_html("/login").await;
    assert_eq!(status, 400);
    assert!(page.contains("Open the link"), "{page}");
    let (status, _) = b.get_html("/login?brand=nope").await;
    assert_eq!(status, 404);
    let (status, _) = b.get_html("/login?brand=Not%20A%20Brand").await;
    assert_eq!(status, 404);
}

/// The password step the customers' and the staff sign-in share
/// (accounts/sign_in.rs), on the real counters. Five failures from one
/// address lock that address out, even against the right password; twenty
/// from as many addresses lock the email itself, after which the right
/// password still comes back right but with the lock, for the caller to let
/// it lead only to a second factor. An unknown email counts alike.
#[tokio::test]
async fn the_shared_password_step_locks_by_address_then_by_email() {
    use pact_server::accounts::lockout::FailureKeys;
    use pact_server::accounts::sign_in::{PasswordStep, check_password, passed};

    let app = TestApp::spawn().await;
    let now = OffsetDateTime::now_utc();
    let stored = password::hash(PW).unwrap();
    let account = Some(stored.clone());
    let hash_of = |h: &String| Some(h.clone());
    let step = |keys: FailureKeys, account: Option<String>, attempt: &str| {
        let (db, attempt) = (app.db.clone(), attempt.to_owned());
        async move {
            check_password(&db, &keys, account, hash_of, attempt, now)
                .await
                .unwrap()
        }
    };

    let here = FailureKeys::new("demo", EMAIL, "192.0.2.1");
    for _ in 0..5 {
        let s = step(here.clone(), account.clone(), "wrong password").await;
        assert_eq!(
            s,
            PasswordStep::Wrong {
                account_locked: None
            }
        );
    }
    match step(here.clone(), account.clone(), PW).await {
        PasswordStep::AddressLocked(secs) => assert!((1..=60).contains(&secs), "{secs}"),
        other => panic!("the address is locked out: {other:?}"),
    }

    // Fifteen more from other addresses: the email's twentieth failure locks it.
    for i in 2..=16 {
        let there = FailureKeys::new("demo", EMAIL, &format!("192.0.2.{i}"));
        let s = step(there, account.clone(), "wrong password").await;
        assert!(matches!(s, PasswordStep::Wrong { .. }), "{s:?}");
    }
    let fresh = FailureKeys::new("demo", EMAIL, "198.51.100.7");
    match step(fresh.clone(), account.clone(), PW).await {
        PasswordStep::Right {
            account,
            rehash: false,
            account_locked: Some(secs),
        } => {
            assert_eq!(account, stored);
            assert!(secs >= 1);
        }
        other => panic!("right, with the email's lock: {other:?}"),
    }
    // Going on past the password clears this address's count only.
    passed(&app.db, &fresh).await.unwrap();
    let left: i64 = sqlx::query_scalar("select count(*) from sign_in_failures where key_hash = $1")
        .bind(&fresh.account)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 1, "the email's count stays");

    // An unknown email: checked against a dummy hash, counted, never right.
    let nobody = FailureKeys::new("demo", "nobody@example.com", "192.0.2.1");
    let s = step(nobody.clone(), None, PW).await;
    assert_eq!(
        s,
        PasswordStep::Wrong {
            account_locked: None
        }
    );
    let counted: Vec<i32> =
        sqlx::query_scalar("select failed from sign_in_failures where key_hash = any($1)")
            .bind(vec![nobody.from_address, nobody.account])
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(counted, vec![1, 1]);
}

/// Second-factor codes sent at once are checked one after another under the
/// account's row lock: a burst of 30 wrong codes (the per-account rate limit
/// raised, as with several nodes each keeping its own) gets exactly the five
/// checks the lock allows, and the rest meet the lock. Before, each read the
/// account unlocked before any failure was counted, and every one was checked.
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_codes_gets_no_more_checks_than_the_lock_allows() {
    let app = TestApp::spawn_with(|c| {
        c.page_limits.second_factor_per_user = pact_server::page_limits::Rate::new(1.0, 100.0);
    })
    .await;
    let user = add_user(&app, "demo", EMAIL, PW).await;
    let secret = add_totp(&app, &user).await;
    let t = next_totp_step(&app);
    let valid: Vec<String> = [t - 30, t, t + 30]
        .iter()
        .map(|at| totp_at(&secret, *at))
        .collect();
    let b = Browser::new(&app);
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
    let csrf = b.csrf_token().await;
    let guesses: Vec<String> = (0..40)
        .map(|i| format!("{:06}", 100_003 * i % 1_000_000))
        .filter(|g| !valid.contains(g))
        .take(30)
        .collect();
    let forms = guesses
        .into_iter()
        .map(|guess| vec![("next", "/account".to_owned()), ("code", guess)])
        .collect();
    let statuses = burst(&b, "/login/second-factor", &csrf, forms).await;
    let checked = statuses.iter().filter(|s| **s == 400).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((checked, refused), (5, 25), "{statuses:?}");
    let after = reload(&app, &user).await;
    assert_eq!(after.failed_logins, 5, "each check counted once");
    assert!(after.locked_until.is_some());
}

/// Guesses sent at once are counted before their passwords are checked: a
/// burst of 30 wrong passwords for one email from one address gets no more
/// full checks than the lock allows (five), the rest meet the lock, and every
/// check is counted. Before, all of them read "not locked" before the first
/// failure was counted and each got an argon2 check (only the per-address
/// rate limit, here raised, bounded them).
#[tokio::test(flavor = "multi_thread")]
async fn a_burst_of_guesses_gets_no_more_checks_than_the_lock_allows() {
    let app = TestApp::spawn_with(|c| {
        c.page_limits.sign_in_per_ip = pact_server::page_limits::Rate::new(1.0, 100.0);
    })
    .await;
    add_user(&app, "demo", EMAIL, PW).await;
    let b = Browser::new(&app);
    let (_, html) = b.get_html("/login?brand=demo&next=%2Faccount").await;
    let csrf = pact_tests::pages::csrf_from(&html).unwrap();
    let forms = (0..30)
        .map(|i| {
            vec![
                ("brand", "demo".to_owned()),
                ("next", "/account".to_owned()),
                ("email", EMAIL.to_owned()),
                ("password", format!("wrong password {i}")),
            ]
        })
        .collect();
    let statuses = burst(&b, "/login", &csrf, forms).await;
    let checked = statuses.iter().filter(|s| **s == 400).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(checked + refused, 30, "{statuses:?}");
    assert!(checked <= 5, "{checked} full checks: {statuses:?}");
    let counts: Vec<i32> =
        sqlx::query_scalar("select failed from sign_in_failures order by failed")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(counts, vec![checked as i32; 2], "each check counted once");

    // The right password, once the lock has ended, still signs in.
    sqlx::query("update sign_in_failures set locked_until = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let res = b.sign_in("demo", EMAIL, PW, "/account").await;
    assert_eq!(res.status(), 303);
}
