//! `pactd admin ...` as an operator runs it: console accounts (password from
//! standard input), API credentials printed once, listed and revoked, each
//! change in the audit log; the printed secret works against a live pactd's
//! admin API until it is revoked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use pact_tests::TestApp;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

const PACTD: &str = env!("CARGO_BIN_EXE_pactd");

/// Runs `pactd <args>` on the app's database with `input` on standard input
/// (none when `None`): (success, stdout, stderr).
async fn pactd(app: &TestApp, args: &[&str], input: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new(PACTD);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PACTD_") {
            cmd.env_remove(&key);
        }
    }
    cmd.args(args)
        .env("DATABASE_URL", &app.db_url)
        .env("USER", "ops-person")
        .env_remove("RUST_LOG")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
        drop(stdin);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn ok(app: &TestApp, args: &[&str], input: Option<&str>) -> String {
    let (success, out, err) = pactd(app, args, input).await;
    assert!(success, "pactd {args:?} failed:\n{out}\n{err}");
    out
}

async fn refused(app: &TestApp, args: &[&str], input: Option<&str>) -> String {
    let (success, out, err) = pactd(app, args, input).await;
    assert!(!success, "pactd {args:?} succeeded:\n{out}");
    err
}

#[tokio::test]
async fn admins_are_added_from_stdin_listed_and_removed() {
    let app = TestApp::spawn().await;
    app.add_brand("shop", "Shop").await;

    let out = ok(
        &app,
        &["admin", "add", "Root@Example.com", "--role", "owner"],
        Some("correct horse battery\n"),
    )
    .await;
    assert!(
        out.contains("added admin root@example.com (owner, all-brands)"),
        "{out}"
    );
    assert!(
        !out.contains("correct horse"),
        "a piped password is never printed"
    );
    let admin = pact_db::admins::find_by_email(&app.db, "root@example.com")
        .await
        .unwrap()
        .unwrap();
    assert!(admin.password_hash.starts_with("$argon2id$"));
    assert_eq!(
        pact_server::accounts::password::verify(
            "correct horse battery",
            Some(&admin.password_hash)
        ),
        pact_server::accounts::password::Verified::Yes
    );
    assert!(!admin.has_totp());

    ok(
        &app,
        &[
            "admin",
            "add",
            "desk@example.com",
            "--role",
            "viewer",
            "--brand",
            "shop",
        ],
        Some("another good password"),
    )
    .await;
    let err = refused(
        &app,
        &["admin", "add", "root@example.com", "--role", "viewer"],
        Some("correct horse battery"),
    )
    .await;
    assert!(err.contains("already an admin"), "{err}");
    let err = refused(
        &app,
        &[
            "admin",
            "add",
            "x@example.com",
            "--role",
            "viewer",
            "--brand",
            "nope",
        ],
        Some("correct horse battery"),
    )
    .await;
    assert!(err.contains("no brand \"nope\""), "{err}");
    let err = refused(
        &app,
        &["admin", "add", "x@example.com", "--role", "boss"],
        None,
    )
    .await;
    assert!(err.contains("boss"), "{err}");
    let err = refused(
        &app,
        &["admin", "add", "x@example.com", "--role", "viewer"],
        Some("short"),
    )
    .await;
    assert!(err.contains("cannot use that password"), "{err}");

    let list = ok(&app, &["admin", "list"], None).await;
    assert_eq!(
        list.lines().collect::<Vec<_>>(),
        vec![
            "desk@example.com\tviewer\tshop\tno-totp-yet\t-",
            "root@example.com\towner\tall-brands\tno-totp-yet\t-",
        ]
    );
    ok(&app, &["admin", "remove", "desk@example.com"], None).await;
    let err = refused(&app, &["admin", "remove", "desk@example.com"], None).await;
    assert!(err.contains("no admin"), "{err}");

    let actions: Vec<(String, String, String)> =
        sqlx::query_as("select actor_kind, actor, action from audit_log order by id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(
        actions,
        vec![
            ("cli".into(), "ops-person".into(), "admin.add".into()),
            ("cli".into(), "ops-person".into(), "admin.add".into()),
            ("cli".into(), "ops-person".into(), "admin.remove".into()),
        ]
    );
}

#[tokio::test]
async fn a_credential_is_printed_once_works_and_stops_working_when_revoked() {
    let app = TestApp::spawn().await;
    app.add_brand("shop", "Shop").await;
    let out = ok(
        &app,
        &[
            "admin",
            "credential",
            "add",
            "--role",
            "operator",
            "--name",
            "ci",
            "--brand",
            "shop",
        ],
        None,
    )
    .await;
    let secret = out
        .lines()
        .find(|l| l.starts_with("pactd_admin_"))
        .unwrap()
        .to_owned();
    let stored: Vec<u8> =
        sqlx::query_scalar("select secret_hash from admin_credentials where name = 'ci'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_ne!(stored, secret.as_bytes(), "only a hash is stored");

    let me = |secret: String| {
        let app = &app;
        async move {
            app.http
                .get(format!("{}/admin/api/v1/me", app.base_url))
                .bearer_auth(secret)
                .send()
                .await
                .unwrap()
        }
    };
    let res = me(secret.clone()).await;
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["name"], "ci");
    assert_eq!(v["role"], "operator");
    assert_eq!(v["brands"], serde_json::json!(["shop"]));

    let err = refused(
        &app,
        &[
            "admin",
            "credential",
            "add",
            "--role",
            "viewer",
            "--name",
            "ci",
        ],
        None,
    )
    .await;
    assert!(err.contains("already a credential"), "{err}");
    let err = refused(
        &app,
        &[
            "admin",
            "credential",
            "add",
            "--role",
            "viewer",
            "--name",
            "Bad Name",
        ],
        None,
    )
    .await;
    assert!(err.contains("invalid --name"), "{err}");

    let list = ok(&app, &["admin", "credential", "list"], None).await;
    let line = list.lines().next().unwrap();
    assert!(
        line.starts_with("ci\toperator\tshop\tactive\tlast-used 20"),
        "{line}"
    );
    assert!(!list.contains(&secret));

    ok(&app, &["admin", "credential", "revoke", "ci"], None).await;
    assert_eq!(me(secret).await.status(), 401);
    let err = refused(&app, &["admin", "credential", "revoke", "ci"], None).await;
    assert!(err.contains("no active credential"), "{err}");
    let list = ok(&app, &["admin", "credential", "list"], None).await;
    assert!(list.contains("\trevoked 20"), "{list}");
}

/// The other staff commands leave their trace in the audit log too.
#[tokio::test]
async fn revoking_a_grant_and_disabling_an_agent_from_the_command_line_are_audited() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example").await;
    app.node_connect("demo", &pa, "pa-sub", "alice", &["orders:read"], None)
        .await;
    let grant = pact_db::grants::list(&app.db, Default::default())
        .await
        .unwrap()[0]
        .id;
    ok(&app, &["grants", "revoke", &grant.to_string()], None).await;
    refused(&app, &["grants", "revoke", &grant.to_string()], None).await;
    ok(
        &app,
        &["agent", "disable", "--issuer", "https://pa.example"],
        None,
    )
    .await;
    let rows: Vec<(String, String, String, Option<String>)> =
        sqlx::query_as("select actor_kind, action, target, brand_id from audit_log order by id")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(
        rows,
        vec![
            (
                "cli".into(),
                "grant.revoke".into(),
                grant.to_string(),
                Some("demo".into())
            ),
            (
                "cli".into(),
                "agent.disable".into(),
                "https://pa.example".into(),
                None
            ),
        ]
    );
}

/// `pactd keys rotate` leaves the same trace as the console's and the admin
/// API's rotation: `key.rotate` with the new kid, committed with the key.
/// A refused rotation (no master key) rotates nothing and logs nothing.
#[tokio::test]
async fn rotating_the_signing_key_from_the_command_line_is_audited() {
    let app = TestApp::spawn().await;
    let keys_before = pact_db::signing_keys::all(&app.db).await.unwrap().len();
    refused(&app, &["keys", "rotate"], None).await;
    let entries: i64 = sqlx::query_scalar("select count(*) from audit_log")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(entries, 0);
    assert_eq!(
        pact_db::signing_keys::all(&app.db).await.unwrap().len(),
        keys_before
    );

    let mut cmd = Command::new(PACTD);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PACTD_") {
            cmd.env_remove(&key);
        }
    }
    let out = cmd
        .args(["keys", "rotate", "--overlap-secs", "0"])
        .env("DATABASE_URL", &app.db_url)
        .env("PACTD_MASTER_KEY", app.master_key.to_base64())
        .env("USER", "ops-person")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kid = stdout
        .strip_prefix("new signing key ")
        .and_then(|rest| rest.split(':').next())
        .unwrap()
        .to_owned();
    let rows: Vec<(String, String, String, Option<String>, serde_json::Value)> = sqlx::query_as(
        "select actor_kind, actor, action, target, detail from audit_log order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (kind, actor, action, target, detail) = &rows[0];
    assert_eq!(
        (kind.as_str(), actor.as_str(), action.as_str()),
        ("cli", "ops-person", "key.rotate")
    );
    assert_eq!(target.as_deref(), Some(kid.as_str()));
    assert!(detail["signs_from"].is_string(), "{detail}");
    // The audited kid is the key that was made.
    assert!(
        pact_db::signing_keys::all(&app.db)
            .await
            .unwrap()
            .iter()
            .any(|k| k.kid == kid)
    );
}

#[tokio::test]
async fn resetting_an_admins_factors_removes_every_factor_and_session_and_is_audited() {
    let app = TestApp::spawn().await;
    ok(
        &app,
        &["admin", "add", "ana@example.com", "--role", "owner"],
        Some("correct horse battery"),
    )
    .await;
    ok(
        &app,
        &["admin", "add", "bo@example.com", "--role", "viewer"],
        Some("another good password"),
    )
    .await;
    let ana = pact_db::admins::find_by_email(&app.db, "ana@example.com")
        .await
        .unwrap()
        .unwrap();
    let bo = pact_db::admins::find_by_email(&app.db, "bo@example.com")
        .await
        .unwrap()
        .unwrap();
    // Both have every kind of factor and a signed-in session.
    for (admin, n) in [(&ana, 1u8), (&bo, 2u8)] {
        pact_db::admins::set_totp(&app.db, admin.id, Some(&[n; 40]))
            .await
            .unwrap();
        pact_db::admin_factors::insert_passkey(
            &app.db,
            admin.id,
            &[n; 16],
            &serde_json::json!({}),
            "laptop",
        )
        .await
        .unwrap();
        let mut conn = app.db.acquire().await.unwrap();
        pact_db::admin_factors::replace_recovery_codes(&mut conn, admin.id, &[vec![n; 32]])
            .await
            .unwrap();
        pact_db::admins::insert_session(
            &app.db,
            &[n; 32],
            "csrf",
            Some(admin.id),
            None,
            Some(time::OffsetDateTime::now_utc()),
            time::OffsetDateTime::now_utc() + time::Duration::hours(1),
        )
        .await
        .unwrap();
    }

    let out = ok(&app, &["admin", "reset-factors", "Ana@Example.com"], None).await;
    assert!(
        out.contains("removed the second factors of ana@example.com"),
        "{out}"
    );
    let err = refused(
        &app,
        &["admin", "reset-factors", "nobody@example.com"],
        None,
    )
    .await;
    assert!(err.contains("no admin"), "{err}");

    let count = |table: &'static str, id| {
        let db = app.db.clone();
        async move {
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "select count(*) from {table} where admin_id = $1"
            )))
            .bind(id)
            .fetch_one(&db)
            .await
            .unwrap();
            n
        }
    };
    let ana = pact_db::admins::find(&app.db, ana.id)
        .await
        .unwrap()
        .unwrap();
    assert!(!ana.has_totp());
    for table in ["admin_passkeys", "admin_recovery_codes", "admin_sessions"] {
        assert_eq!(count(table, ana.id).await, 0, "{table} of the reset admin");
        // Another admin keeps everything.
        assert_eq!(count(table, bo.id).await, 1, "{table} of another admin");
    }
    let bo = pact_db::admins::find(&app.db, bo.id)
        .await
        .unwrap()
        .unwrap();
    assert!(bo.has_totp());

    let (actor, target, detail): (String, String, serde_json::Value) = sqlx::query_as(
        "select actor, target, detail from audit_log where action = 'admin.reset_factors'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        (actor.as_str(), target.as_str()),
        ("ops-person", "ana@example.com")
    );
    assert_eq!(detail, serde_json::json!({ "passkeys": 1, "sessions": 1 }));
}
