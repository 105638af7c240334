//! "Forgot your password?" over real HTTP and real SMTP: the link arrives by
//! mail, works once, for a while, for that account only; asking tells nobody
//! whether an account exists; a new password signs every browser out and
//! still asks for the second factor.

use pact_tests::TestApp;
use pact_tests::pages::{Browser, add_totp, add_user, location, session_of};
use pact_tests::smtp_sink::{Mail, SmtpSink};

const OLD: &str = "correct horse battery staple";
const NEW: &str = "a brand new long passphrase";
const ANN: &str = "ann@example.com";
const SENT: &str = "If an account at Demo Store has that email, we have sent it a link";

async fn app_with_mail(sink: &SmtpSink) -> TestApp {
    let mail = sink.settings();
    TestApp::spawn_with(move |c| {
        c.mail = Some(mail);
    })
    .await
}

async fn ask_for_link(b: &Browser, email: &str) -> (u16, String) {
    let res = b
        .submit(
            "/login/forgot?brand=demo",
            "/login/forgot",
            &[("brand", "demo"), ("email", email)],
        )
        .await;
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

/// The path and query of the mail's link, checked to point at this app.
fn link_path(app: &TestApp, mail: &Mail) -> String {
    let link = mail.link().expect("the mail carries a link");
    let prefix = format!("{}/login/reset?token=", app.state.config.public_url);
    assert!(link.starts_with(&prefix), "{link}");
    link[app.state.config.public_url.len()..].to_owned()
}

async fn set_new_password(b: &Browser, path: &str, password: &str, confirm: &str) -> (u16, String) {
    let token = path.split_once("token=").unwrap().1;
    let res = b
        .submit(
            path,
            "/login/reset",
            &[
                ("token", token),
                ("password", password),
                ("confirm", confirm),
            ],
        )
        .await;
    let status = res.status().as_u16();
    (status, res.text().await.unwrap())
}

/// POSTs the new password for `token` straight to /login/reset, with a CSRF
/// token of the session (a link whose page is refused shows no form).
async fn post_reset(b: &Browser, token: &str) -> reqwest::Response {
    let csrf =
        pact_tests::pages::csrf_from(&b.get_html("/login/forgot?brand=demo").await.1).unwrap();
    b.post(
        "/login/reset",
        &[
            ("token", token),
            ("password", NEW),
            ("confirm", NEW),
            ("csrf", &csrf),
        ],
    )
    .await
}

async fn password_works(app: &TestApp, email: &str, password: &str) -> bool {
    let res = Browser::new(app)
        .sign_in("demo", email, password, "/account")
        .await;
    res.status() == 303
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forgotten_password_is_replaced_through_a_one_time_link_sent_by_mail() {
    let mut sink = SmtpSink::start().await;
    let app = app_with_mail(&sink).await;
    let user = add_user(&app, "demo", ANN, OLD).await;
    add_totp(&app, &user).await;

    // A browser that is signed in (half-way: password given, second factor
    // pending) with the old password: it must be signed out by the reset.
    let elsewhere = Browser::new(&app);
    let res = elsewhere.sign_in("demo", ANN, OLD, "/account").await;
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
    let elsewhere_cookie = elsewhere.session_cookie().unwrap();
    assert!(session_of(&app, &elsewhere_cookie).await.is_some());

    let b = Browser::new(&app);
    let (_, login) = b.get_html("/login?brand=demo").await;
    assert!(
        login.contains(r#"<a href="/login/forgot?brand=demo">Forgot your password?</a>"#),
        "{login}"
    );
    let (status, page) = ask_for_link(&b, "  Ann@Example.com ").await;
    assert_eq!(status, 200);
    assert!(page.contains(SENT), "{page}");

    let mail = sink.next().await;
    assert_eq!(mail.to, vec![ANN.to_owned()]);
    assert_eq!(mail.from, "no-reply@shop.example");
    assert!(
        mail.data
            .contains("Subject: Reset your password at Demo Store"),
        "{}",
        mail.data
    );
    assert!(mail.text().contains("within 30 minutes"), "{}", mail.text());
    let path = link_path(&app, &mail);

    // The link's page, opened in another browser (the person's phone).
    let phone = Browser::new(&app);
    let (status, form) = phone.get_html(&path).await;
    assert_eq!(status, 200, "{form}");
    assert!(form.contains("Choose a new password"), "{form}");

    // Two different passwords, then one too short: refused, nothing changes.
    let (status, page) = set_new_password(&phone, &path, NEW, "something else entirely").await;
    assert_eq!(status, 400);
    assert!(page.contains("not the same"), "{page}");
    let (status, page) = set_new_password(&phone, &path, "short", "short").await;
    assert_eq!(status, 400);
    assert!(page.contains("at least 8 characters"), "{page}");
    assert!(session_of(&app, &elsewhere_cookie).await.is_some());

    let (status, page) = set_new_password(&phone, &path, NEW, NEW).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Your password is changed"), "{page}");

    // Once only.
    let (status, page) = phone.get_html(&path).await;
    assert_eq!(status, 400);
    assert!(page.contains("expired or was already used"), "{page}");
    // Replaying the POST (with a CSRF token from another page, since the
    // spent link's page shows no form) changes nothing either.
    let token = path.split_once("token=").unwrap().1;
    let res = phone
        .submit(
            "/login/forgot?brand=demo",
            "/login/reset",
            &[("token", token), ("password", OLD), ("confirm", OLD)],
        )
        .await;
    assert_eq!(res.status(), 400);

    // The old password is gone, every browser signed out, and the new
    // password still leads to the second factor.
    assert!(session_of(&app, &elsewhere_cookie).await.is_none());
    assert!(!password_works(&app, ANN, OLD).await);
    let res = Browser::new(&app)
        .sign_in("demo", ANN, NEW, "/account")
        .await;
    assert_eq!(location(&res), "/login/second-factor?next=%2Faccount");
}

#[tokio::test(flavor = "multi_thread")]
async fn asking_tells_nobody_whether_an_account_exists_and_cannot_flood_a_mailbox() {
    let mut sink = SmtpSink::start().await;
    let app = app_with_mail(&sink).await;
    let ann = add_user(&app, "demo", ANN, OLD).await;
    add_user(&app, "demo", "bob@example.com", OLD).await;
    let eve = add_user(&app, "demo", "eve@example.com", OLD).await;
    let mut tx = app.db.begin().await.unwrap();
    pact_db::users::set_disabled(&mut tx, eve.id, Some(time::OffsetDateTime::now_utc()))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let b = Browser::new(&app);

    // Unknown and disabled addresses: the same page as a known one, no mail.
    let (unknown_status, unknown_page) = ask_for_link(&b, "nobody@example.com").await;
    let (disabled_status, disabled_page) = ask_for_link(&b, "eve@example.com").await;
    let (known_status, known_page) = ask_for_link(&b, ANN).await;
    assert_eq!(
        (unknown_status, disabled_status, known_status),
        (200, 200, 200)
    );
    for page in [&unknown_page, &disabled_page, &known_page] {
        assert!(page.contains(SENT), "{page}");
    }
    assert_eq!(sink.next().await.to, vec![ANN.to_owned()]);

    // Three mails an hour per account; the fourth request is answered alike
    // but sends nothing (the next mail to arrive is someone else's).
    for _ in 0..2 {
        ask_for_link(&b, ANN).await;
        assert_eq!(sink.next().await.to, vec![ANN.to_owned()]);
    }
    let (status, page) = ask_for_link(&b, ANN).await;
    assert_eq!(status, 200);
    assert!(page.contains(SENT));
    ask_for_link(&b, "bob@example.com").await;
    assert_eq!(sink.next().await.to, vec!["bob@example.com".to_owned()]);
    let sent: i64 = sqlx::query_scalar("select count(*) from password_resets where user_id = $1")
        .bind(ann.id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sent, 3);

    // Eight requests at once for one account: still three links, three mails
    // (the budget is counted under the account's row lock, not read first).
    let cas = add_user(&app, "demo", "cas@example.com", OLD).await;
    let browsers: Vec<Browser> = (0..8).map(|_| Browser::new(&app)).collect();
    let asked = crate::messages::join_all(
        browsers
            .iter()
            .map(|b| ask_for_link(b, "cas@example.com"))
            .collect(),
    )
    .await;
    assert!(asked.iter().all(|(status, _)| *status == 200));
    for _ in 0..3 {
        assert_eq!(sink.next().await.to, vec!["cas@example.com".to_owned()]);
    }
    // The mails are sent after the page is answered: give the other five
    // time to finish (or to store links they should not).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let sent: i64 = sqlx::query_scalar("select count(*) from password_resets where user_id = $1")
        .bind(cas.id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sent, 3);

    // Not an address at all: said so, nothing sent.
    let (status, page) = ask_for_link(&b, "not an address").await;
    assert_eq!(status, 400);
    assert!(
        page.contains("Enter the email address of your account"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_link_a_forged_one_and_a_post_without_csrf_change_nothing() {
    let mut sink = SmtpSink::start().await;
    let app = app_with_mail(&sink).await;
    add_user(&app, "demo", ANN, OLD).await;
    let b = Browser::new(&app);
    ask_for_link(&b, ANN).await;
    let path = link_path(&app, &sink.next().await);
    let token = path.split_once("token=").unwrap().1.to_owned();

    // Without the form's CSRF token (a cross-site form): refused.
    let res = b
        .post(
            "/login/reset",
            &[("token", &token), ("password", NEW), ("confirm", NEW)],
        )
        .await;
    assert_eq!(res.status(), 403);

    // A made-up token.
    let (status, page) = b
        .get_html("/login/reset?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        .await;
    assert_eq!(status, 400);
    assert!(page.contains("expired or was already used"), "{page}");

    // The real one, once its half hour is over.
    let (status, _) = b.get_html(&path).await;
    assert_eq!(status, 200);
    sqlx::query("update password_resets set expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let (status, page) = b.get_html(&path).await;
    assert_eq!(status, 400);
    assert!(page.contains("expired or was already used"), "{page}");
    let res = post_reset(&b, &token).await;
    assert_eq!(res.status(), 400);
    assert!(password_works(&app, ANN, OLD).await);
    assert!(!password_works(&app, ANN, NEW).await);
}

/// Staff disable an account they fear is taken over: a link mailed before
/// is dead, and stays dead once the account is enabled again.
#[tokio::test(flavor = "multi_thread")]
async fn a_link_sent_before_the_account_was_disabled_never_works_again() {
    let mut sink = SmtpSink::start().await;
    let app = app_with_mail(&sink).await;
    let user = add_user(&app, "demo", ANN, OLD).await;
    let b = Browser::new(&app);
    ask_for_link(&b, ANN).await;
    let path = link_path(&app, &sink.next().await);
    let staff = pact_server::admin::role::Actor {
        kind: "cli",
        name: "desk".into(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    };
    for action in [
        pact_server::admin::ops::customers::Action::Disable,
        pact_server::admin::ops::customers::Action::Enable,
    ] {
        let user = pact_db::users::find(&app.db, user.id)
            .await
            .unwrap()
            .unwrap();
        let mut tx = app.db.begin().await.unwrap();
        pact_server::admin::ops::customers::apply(
            &mut tx,
            &staff,
            None,
            &user,
            action,
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }
    let (status, page) = b.get_html(&path).await;
    assert_eq!(status, 400);
    assert!(page.contains("expired or was already used"), "{page}");
    let token = path.split_once("token=").unwrap().1.to_owned();
    let res = post_reset(&b, &token).await;
    assert_eq!(res.status(), 400);
    assert!(password_works(&app, ANN, OLD).await);
}

/// Asking again ends the earlier link: only the newest one works.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_link_ends_the_earlier_one() {
    let mut sink = SmtpSink::start().await;
    let app = app_with_mail(&sink).await;
    add_user(&app, "demo", ANN, OLD).await;
    let b = Browser::new(&app);
    ask_for_link(&b, ANN).await;
    let first = link_path(&app, &sink.next().await);
    ask_for_link(&b, ANN).await;
    let second = link_path(&app, &sink.next().await);
    assert_ne!(first, second);
    let (status, page) = b.get_html(&first).await;
    assert_eq!(status, 400);
    assert!(page.contains("expired or was already used"), "{page}");
    let (status, _) = set_new_password(&b, &second, NEW, NEW).await;
    assert_eq!(status, 200);
    assert!(password_works(&app, ANN, NEW).await);
}

/// The mail budget is counted per requester too: someone who knows the
/// address and spends three links from their address cannot keep its owner,
/// asking from another, from getting one; ten an hour in all still bound
/// what many addresses together can send.
#[tokio::test(flavor = "multi_thread")]
async fn one_requester_cannot_spend_an_accounts_whole_mail_budget() {
    let mut sink = SmtpSink::start().await;
    let mail = sink.settings();
    let app = TestApp::spawn_with(move |c| {
        c.mail = Some(mail);
        c.trusted_proxies = pact_server::client_ip::TrustedProxies::parse("127.0.0.1").unwrap();
    })
    .await;
    let ann = add_user(&app, "demo", ANN, OLD).await;
    let mallory = Browser::from_address(&app, "198.51.100.7");
    for _ in 0..4 {
        ask_for_link(&mallory, ANN).await;
    }
    for _ in 0..3 {
        assert_eq!(sink.next().await.to, vec![ANN.to_owned()]);
    }
    let owner = Browser::from_address(&app, "203.0.113.9");
    ask_for_link(&owner, ANN).await;
    let path = link_path(&app, &sink.next().await);
    let (status, _) = set_new_password(&owner, &path, NEW, NEW).await;
    assert_eq!(status, 200);
    // Ten in all, from however many addresses.
    for i in 0..8 {
        ask_for_link(&Browser::from_address(&app, &format!("192.0.2.{i}")), ANN).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let sent: i64 = sqlx::query_scalar("select count(*) from password_resets where user_id = $1")
        .bind(ann.id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sent, 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_mail_settings_no_reset_is_offered() {
    let app = TestApp::spawn().await;
    let b = Browser::new(&app);
    let (_, login) = b.get_html("/login?brand=demo").await;
    assert!(!login.contains("Forgot your password?"), "{login}");
    let (status, page) = b.get_html("/login/forgot?brand=demo").await;
    assert_eq!(status, 404);
    assert!(page.contains("not set up here"), "{page}");
}
