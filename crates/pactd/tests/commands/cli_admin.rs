//! `pactd admin ...` as an operator runs it: console accounts (password from
//! standard input), API credentials printed once, listed and revoked, each
//! change in the audit log; the printed secret works against a live pactd's
//! admin API until it is revoked.

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
    // The command wrote behind the node's back: its next request must not be
    // answered from the node's copy of the rows from before (what a
    // separate process's change costs is one notification's delivery).
    app.settle().await;
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

/// What a leaf command of the command tree leaves in the audit log.
enum Audit {
    /// These actions, under the command line's actor (kind `cli`, the
    /// operating-system user, the host as origin).
    Entries(&'static [&'static str]),
    /// Nothing, for the reason given (a read of configuration, not of
    /// customer data; a command that never opens the database).
    Nothing(&'static str),
}

/// Every leaf command of `pactd`, and what it must leave in the audit log.
/// The test below fails on a command missing here, so a new command has to
/// say what it records.
const COMMANDS: &[(&str, Audit)] = &[
    (
        "serve",
        Audit::Nothing(
            "runs the server; a start-up migration is recorded as system `schema.migrate`",
        ),
    ),
    (
        "dev",
        Audit::Nothing("the local development server on its own database"),
    ),
    ("migrate", Audit::Entries(&["schema.migrate"])),
    ("brand add", Audit::Entries(&["brand.add"])),
    ("brand list", Audit::Nothing("configuration read")),
    ("brand scope add", Audit::Entries(&["scope.upsert"])),
    ("brand scope remove", Audit::Entries(&["scope.remove"])),
    ("brand scope list", Audit::Nothing("configuration read")),
    (
        "brand details-type add",
        Audit::Entries(&["details_type.upsert"]),
    ),
    (
        "brand details-type remove",
        Audit::Entries(&["details_type.remove"]),
    ),
    (
        "brand details-type list",
        Audit::Nothing("configuration read"),
    ),
    (
        "brand set",
        Audit::Entries(&[
            "brand.mfa_required",
            "brand.grant_lifetime",
            "brand.accent",
            "brand.logo",
            "brand.login_url",
            "brand.login_oidc",
            "brand.login_oidc_remove",
            "brand.agent_url",
            "webhook_secret.create",
            "brand.agent_timeouts",
            "brand.demo_agent",
        ]),
    ),
    (
        "brand webhook-secret rotate",
        Audit::Entries(&["webhook_secret.rotate"]),
    ),
    ("brand tool add", Audit::Entries(&["tool.upsert"])),
    (
        "brand tool import-mcp",
        Audit::Entries(&["tool.import_mcp"]),
    ),
    ("brand tool set-scope", Audit::Entries(&["tool.set_scope"])),
    ("brand tool set-rules", Audit::Entries(&["tool.set_rules"])),
    ("brand tool list", Audit::Nothing("configuration read")),
    ("brand tool remove", Audit::Entries(&["tool.remove"])),
    (
        "brand credential add",
        Audit::Entries(&["introspection_credential.add"]),
    ),
    (
        "brand credential list",
        Audit::Nothing("configuration read (never a secret)"),
    ),
    (
        "brand credential revoke",
        Audit::Entries(&["introspection_credential.revoke"]),
    ),
    ("agent add", Audit::Entries(&["agent.register"])),
    ("agent limits", Audit::Entries(&["agent.limits"])),
    ("agent disable", Audit::Entries(&["agent.disable"])),
    ("agent enable", Audit::Entries(&["agent.enable"])),
    ("agent verify", Audit::Entries(&["agent.verify"])),
    ("agent forget", Audit::Entries(&["agent.forget"])),
    ("agent list", Audit::Nothing("configuration read")),
    ("agent block-host", Audit::Entries(&["agent.block_host"])),
    (
        "agent unblock-host",
        Audit::Entries(&["agent.unblock_host"]),
    ),
    ("agent blocked-hosts", Audit::Nothing("configuration read")),
    ("registry add", Audit::Entries(&["registry.add"])),
    ("registry list", Audit::Nothing("configuration read")),
    ("registry refresh", Audit::Entries(&["registry.refresh"])),
    ("registry remove", Audit::Entries(&["registry.remove"])),
    ("keys rotate", Audit::Entries(&["key.rotate"])),
    ("keys list", Audit::Nothing("public key schedule")),
    (
        "keys generate-master-key",
        Audit::Nothing("prints a random key; no database"),
    ),
    (
        "keys init-master-key",
        Audit::Nothing("writes a key file before any database is used"),
    ),
    ("keys rewrap", Audit::Entries(&["key.rewrap"])),
    ("grants list", Audit::Entries(&["grant.list"])),
    ("grants revoke", Audit::Entries(&["grant.revoke"])),
    ("grants revoke-user", Audit::Entries(&["grant.revoke_user"])),
    ("receipts verify", Audit::Entries(&["receipt.verify"])),
    ("user add", Audit::Entries(&["customer.add"])),
    ("user list", Audit::Entries(&["customer.list"])),
    (
        "user reset-mfa",
        Audit::Entries(&["customer.reset_second_factors"]),
    ),
    ("user disable", Audit::Entries(&["customer.disable"])),
    ("user enable", Audit::Entries(&["customer.enable"])),
    ("user remove", Audit::Entries(&["customer.remove"])),
    (
        "user set-password",
        Audit::Entries(&["customer.set_password"]),
    ),
    (
        "healthcheck",
        Audit::Nothing("asks a running server's /readyz; no database"),
    ),
    ("admin add", Audit::Entries(&["admin.add"])),
    (
        "admin list",
        Audit::Nothing("staff accounts, no customer data"),
    ),
    ("admin remove", Audit::Entries(&["admin.remove"])),
    (
        "admin reset-factors",
        Audit::Entries(&["admin.reset_factors"]),
    ),
    ("admin credential add", Audit::Entries(&["credential.add"])),
    (
        "admin credential list",
        Audit::Nothing("staff credentials, never a secret"),
    ),
    (
        "admin credential revoke",
        Audit::Entries(&["credential.revoke"]),
    ),
];

/// The subcommands clap lists in `pactd <path> --help` ("Commands:"), without `help`.
async fn subcommands(path: &[String]) -> Vec<String> {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let out = Command::new(PACTD)
        .args(&args)
        .env_remove("DATABASE_URL")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "pactd {args:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let Some(section) = text.split("\nCommands:\n").nth(1) else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues further indented.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every leaf of clap's command tree, as "brand scope add".
async fn leaf_commands() -> Vec<String> {
    let mut leaves = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let subs = subcommands(&path).await;
        if subs.is_empty() {
            leaves.push(path.join(" "));
        }
        for s in subs {
            let mut p = path.clone();
            p.push(s);
            todo.push(p);
        }
    }
    leaves.sort();
    leaves
}

/// One command of the scenario below: its arguments, standard input, and
/// the entries it must add (all under the command line's actor).
struct Step<'a> {
    args: Vec<String>,
    input: Option<&'a str>,
    env: Vec<(&'a str, String)>,
    expect: &'a [&'a str],
    /// The command is expected to fail (and still leave its entries).
    fails: bool,
}

fn step<'a>(args: &[&str], expect: &'a [&'a str]) -> Step<'a> {
    Step {
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        input: None,
        env: Vec::new(),
        expect,
        fails: false,
    }
}

/// Runs one step on `db_url` with the master key; its stdout. Asserts
/// success and that exactly the expected actions were added, each under
/// the `cli` actor with the host as its origin.
async fn run_step(db: &sqlx::PgPool, db_url: &str, master: &str, s: Step<'_>) -> String {
    let before: i64 = sqlx::query_scalar("select coalesce(max(id), 0) from audit_log")
        .fetch_one(db)
        .await
        .unwrap();
    let mut cmd = Command::new(PACTD);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PACTD_") {
            cmd.env_remove(&key);
        }
    }
    cmd.args(&s.args)
        .env("DATABASE_URL", db_url)
        .env("PACTD_MASTER_KEY", master)
        .env("USER", "ops-person")
        .env_remove("RUST_LOG")
        .stdin(if s.input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in &s.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = s.input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
        drop(stdin);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.success(),
        !s.fails,
        "pactd {:?}:\n{stdout}\n{}",
        s.args,
        String::from_utf8_lossy(&out.stderr)
    );
    let added: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "select actor_kind, actor, action, client_addr from audit_log where id > $1 order by id",
    )
    .bind(before)
    .fetch_all(db)
    .await
    .unwrap();
    let actions: Vec<&str> = added.iter().map(|(_, _, a, _)| a.as_str()).collect();
    assert_eq!(actions, s.expect, "pactd {:?}", s.args);
    for (kind, actor, action, origin) in &added {
        assert_eq!(
            (kind.as_str(), actor.as_str()),
            ("cli", "ops-person"),
            "{action}"
        );
        assert!(
            origin.as_deref().is_some_and(|o| o.starts_with("host ")),
            "{action}: origin {origin:?}"
        );
    }
    stdout
}

/// Issue 28, finding 3: every command of clap's command tree is classified
/// in [`COMMANDS`], and each one that changes something, or reads customer
/// data, leaves its entries when run: a new command without an audit entry
/// fails here. `brand set` is run with each of its settings.
#[tokio::test(flavor = "multi_thread")]
async fn every_command_that_changes_something_or_reads_customer_data_is_audited() {
    let leaves = leaf_commands().await;
    let classified: Vec<String> = {
        let mut c: Vec<String> = COMMANDS.iter().map(|(p, _)| (*p).to_owned()).collect();
        c.sort();
        c
    };
    assert_eq!(
        leaves, classified,
        "every pactd command says what it leaves in the audit log (COMMANDS)"
    );

    // `migrate` on an empty database: the schema change, once it has the log.
    let empty = pact_tests::db::empty_database().await;
    let key = pact_crypto::MasterKey::generate().unwrap().to_base64();
    let empty_pool = pact_db::connect(&empty, 2).await.unwrap();
    // No audit_log yet: the runner's "before" needs the table, so count after.
    let mut cmd = Command::new(PACTD);
    let out = cmd
        .args(["migrate"])
        .env("DATABASE_URL", &empty)
        .env("USER", "ops-person")
        .env_remove("PACTD_DATA_DIR")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let migrated: Vec<(String, String)> =
        sqlx::query_as("select actor_kind, action from audit_log order by id")
            .fetch_all(&empty_pool)
            .await
            .unwrap();
    assert_eq!(migrated, [("cli".to_owned(), "schema.migrate".to_owned())]);
    // Nothing pending: nothing changed, nothing recorded.
    let again = run_step(&empty_pool, &empty, &key, step(&["migrate"], &[])).await;
    assert!(again.contains("migrations applied"), "{again}");
    empty_pool.close().await;

    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let master = app.master_key.to_base64();
    let pa = app.registered_pa("https://pa.example").await;
    let tokens = app
        .node_connect("demo", &pa, "pa-sub", "alice", &["orders:read"], None)
        .await;
    assert!(tokens["access_token"].is_string());
    let grant = pact_db::grants::list(&app.db, Default::default())
        .await
        .unwrap()[0]
        .id
        .to_string();
    let dir = std::env::temp_dir().join(format!("pactd-audit-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let (db, url) = (&app.db, app.db_url.as_str());
    let run = |s: Step<'static>| run_step(db, url, &master, s);

    run(step(
        &["brand", "add", "audited", "--name", "Audited"],
        &["brand.add"],
    ))
    .await;
    run(step(&["brand", "list"], &[])).await;
    let scope = |id: &'static str| -> Vec<&'static str> {
        vec!["brand", "scope", "add", "audited", id, "A permission"]
    };
    run(step(&scope("orders:read"), &["scope.upsert"])).await;
    run(step(&scope("orders:cancel"), &["scope.upsert"])).await;
    run(step(&["brand", "scope", "list", "audited"], &[])).await;
    run(step(
        &["brand", "scope", "remove", "audited", "orders:cancel"],
        &["scope.remove"],
    ))
    .await;
    let declaration = r#"{"scope":"orders:read","description":"Orders {ids}","fields":{"ids":{"type":"string_array","required":true}}}"#;
    run(step(
        &[
            "brand",
            "details-type",
            "add",
            "audited",
            "order_view",
            "--json",
            declaration,
        ],
        &["details_type.upsert"],
    ))
    .await;
    run(step(&["brand", "details-type", "list", "audited"], &[])).await;
    run(step(
        &["brand", "details-type", "remove", "audited", "order_view"],
        &["details_type.remove"],
    ))
    .await;
    // `brand set`, setting by setting (the gaps the issue names first).
    let set = |extra: &[&'static str], expect: &'static [&'static str]| {
        let mut args = vec!["brand", "set", "audited"];
        args.extend_from_slice(extra);
        step(&args, expect)
    };
    run(set(&["--mfa-required", "false"], &["brand.mfa_required"])).await;
    run(set(
        &["--grant-ttl-days", "14", "--accent", "#1a5fb4"],
        &["brand.accent", "brand.grant_lifetime"],
    ))
    .await;
    let logo = dir.join("logo.png");
    std::fs::write(&logo, pact_tests::logo_server::BRAND_LOGO).unwrap();
    let logo = logo.to_str().unwrap().to_owned();
    run(Step {
        args: ["brand", "set", "audited", "--logo", &logo]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        input: None,
        env: Vec::new(),
        expect: &["brand.logo"],
        fails: false,
    })
    .await;
    run(set(&["--no-logo"], &["brand.logo"])).await;
    run(set(
        &[
            "--login-url",
            "https://login.audited.example/",
            "--login-jwks-uri",
            "https://login.audited.example/jwks.json",
        ],
        &["brand.login_url"],
    ))
    .await;
    run(set(
        &[
            "--login-oidc-issuer",
            "https://idp.audited.example",
            "--login-oidc-client-id",
            "pactd",
            "--login-oidc-client-auth",
            "private_key_jwt",
            "--user-claim",
            "sub",
        ],
        &["brand.login_oidc"],
    ))
    .await;
    run(set(
        &["--no-external-login"],
        &["brand.login_oidc_remove", "brand.login_url"],
    ))
    .await;
    let out = run(set(
        &["--agent-url", "http://127.0.0.1:9/pact"],
        &["brand.agent_url", "webhook_secret.create"],
    ))
    .await;
    assert!(out.contains("whsec_"), "{out}");
    run(set(
        &["--agent-timeout-ms", "5000"],
        &["brand.agent_timeouts"],
    ))
    .await;
    run(set(&["--demo-agent"], &["brand.demo_agent"])).await;
    let out = run(step(
        &[
            "brand",
            "webhook-secret",
            "rotate",
            "audited",
            "--grace",
            "0s",
        ],
        &["webhook_secret.rotate"],
    ))
    .await;
    let whsec = out
        .lines()
        .find(|l| l.starts_with("whsec_"))
        .unwrap()
        .to_owned();
    run(step(
        &[
            "brand",
            "tool",
            "add",
            "audited",
            "lookup",
            "--scope",
            "orders:read",
            "--url",
            "https://shop.audited.example/tools/lookup",
        ],
        &["tool.upsert"],
    ))
    .await;
    run(step(&["brand", "tool", "list", "audited"], &[])).await;
    let mcp = pact_tests::node::NodeService::example_mcp_server(&whsec).await;
    let mcp_url = format!("{}/mcp", mcp.base);
    run(Step {
        args: [
            "brand",
            "tool",
            "import-mcp",
            "audited",
            "--url",
            &mcp_url,
            "--allow-loopback",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect(),
        input: None,
        env: Vec::new(),
        expect: &["tool.import_mcp"],
        fails: false,
    })
    .await;
    run(step(
        &[
            "brand",
            "tool",
            "set-scope",
            "audited",
            "lookup",
            "--public",
        ],
        &["tool.set_scope"],
    ))
    .await;
    run(step(
        &[
            "brand",
            "tool",
            "set-rules",
            "audited",
            "lookup",
            "--summary",
            "Look up orders",
        ],
        &["tool.set_rules"],
    ))
    .await;
    run(step(
        &["brand", "tool", "remove", "audited", "lookup"],
        &["tool.remove"],
    ))
    .await;
    let out = run(step(
        &["brand", "credential", "add", "audited", "--name", "orders"],
        &["introspection_credential.add"],
    ))
    .await;
    let client_id = out
        .lines()
        .find_map(|l| l.strip_prefix("client_id: "))
        .unwrap()
        .to_owned();
    run(step(&["brand", "credential", "list", "audited"], &[])).await;
    run(Step {
        args: ["brand", "credential", "revoke", "audited", &client_id]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        input: None,
        env: Vec::new(),
        expect: &["introspection_credential.revoke"],
        fails: false,
    })
    .await;

    let cli_pa = ["--issuer", "https://cli-pa.example"];
    run(step(
        &[
            "agent",
            "add",
            cli_pa[0],
            cli_pa[1],
            "--jwks-uri",
            "https://cli-pa.example/jwks.json",
        ],
        &["agent.register"],
    ))
    .await;
    run(step(
        &[
            "agent",
            "limits",
            cli_pa[0],
            cli_pa[1],
            "--rate-limit-pa",
            "5,10",
        ],
        &["agent.limits"],
    ))
    .await;
    run(step(&["agent", "list"], &[])).await;
    run(step(
        &["agent", "disable", cli_pa[0], cli_pa[1]],
        &["agent.disable"],
    ))
    .await;
    run(step(
        &["agent", "enable", cli_pa[0], cli_pa[1]],
        &["agent.enable"],
    ))
    .await;
    run(step(
        &["agent", "verify", cli_pa[0], cli_pa[1]],
        &["agent.verify"],
    ))
    .await;
    // An agent the open policy let in (PACT §3.1), forgotten by staff.
    pact_db::agents::insert_admitted(
        &app.db,
        "https://knock.example",
        "https://knock.example/jwks.json",
        "knock.example",
        pact_db::agents::Claimed::default(),
        time::OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
    run(step(
        &["agent", "forget", "--issuer", "https://knock.example"],
        &["agent.forget"],
    ))
    .await;
    // Issue 31: blocking a host, and a trusted registry (PACT §3.1).
    run(step(
        &[
            "agent",
            "block-host",
            "--host",
            "spam.example",
            "--reason",
            "spam",
        ],
        &["agent.block_host"],
    ))
    .await;
    run(step(&["agent", "blocked-hosts"], &[])).await;
    run(step(
        &["agent", "unblock-host", "--host", "spam.example"],
        &["agent.unblock_host"],
    ))
    .await;
    let registry_key = pact_jose::ProviderKey::generate().unwrap();
    let keys_file = dir.join("registry-keys.json");
    std::fs::write(&keys_file, registry_key.public_jwk().to_string()).unwrap();
    run(step(
        &[
            "registry",
            "add",
            "trusted",
            "--url",
            "https://registry.example/agents.jwt",
            "--keys",
            keys_file.to_str().unwrap(),
        ],
        &["registry.add"],
    ))
    .await;
    run(step(&["registry", "list"], &[])).await;
    // A refresh is recorded with its outcome, here a list that cannot be
    // fetched (nothing changed), as the admin API records it.
    run(Step {
        fails: true,
        ..step(&["registry", "refresh", "trusted"], &["registry.refresh"])
    })
    .await;
    run(step(
        &["registry", "remove", "trusted"],
        &["registry.remove"],
    ))
    .await;
    run(step(
        &["keys", "rotate", "--overlap-secs", "0"],
        &["key.rotate"],
    ))
    .await;
    run(step(&["keys", "list"], &[])).await;
    run(step(&["keys", "generate-master-key"], &[])).await;
    run(Step {
        args: vec!["keys".into(), "init-master-key".into()],
        input: None,
        env: vec![(
            "PACTD_MASTER_KEY_FILE",
            dir.join("master.key").to_str().unwrap().to_owned(),
        )],
        expect: &[],
        fails: false,
    })
    .await;

    let pw = Some("correct horse battery\n");
    let user = |args: &[&str], expect: &'static [&'static str]| {
        let mut s = step(args, expect);
        s.input = pw;
        s
    };
    run(user(
        &["user", "add", "audited", "ann@example.com"],
        &["customer.add"],
    ))
    .await;
    run(step(
        &["user", "list", "--brand", "audited"],
        &["customer.list"],
    ))
    .await;
    run(user(
        &["user", "set-password", "audited", "ann@example.com"],
        &["customer.set_password"],
    ))
    .await;
    let ann = ["audited", "ann@example.com"];
    run(step(
        &["user", "reset-mfa", ann[0], ann[1]],
        &["customer.reset_second_factors"],
    ))
    .await;
    run(step(
        &["user", "disable", ann[0], ann[1]],
        &["customer.disable"],
    ))
    .await;
    run(step(
        &["user", "enable", ann[0], ann[1]],
        &["customer.enable"],
    ))
    .await;
    run(step(
        &["user", "remove", ann[0], ann[1]],
        &["customer.remove"],
    ))
    .await;
    run(step(&["grants", "list"], &["grant.list"])).await;
    run(Step {
        args: vec!["grants".into(), "revoke".into(), grant.clone()],
        input: None,
        env: Vec::new(),
        expect: &["grant.revoke"],
        fails: false,
    })
    .await;
    run(step(
        &["grants", "revoke-user", "demo", "alice"],
        &["grant.revoke_user"],
    ))
    .await;
    run(step(&["receipts", "verify"], &["receipt.verify"])).await;
    run(user(
        &["admin", "add", "desk@example.com", "--role", "viewer"],
        &["admin.add"],
    ))
    .await;
    run(step(&["admin", "list"], &[])).await;
    run(step(
        &["admin", "reset-factors", "desk@example.com"],
        &["admin.reset_factors"],
    ))
    .await;
    run(step(
        &["admin", "remove", "desk@example.com"],
        &["admin.remove"],
    ))
    .await;
    run(step(
        &[
            "admin",
            "credential",
            "add",
            "--name",
            "ci",
            "--role",
            "viewer",
        ],
        &["credential.add"],
    ))
    .await;
    run(step(&["admin", "credential", "list"], &[])).await;
    run(step(
        &["admin", "credential", "revoke", "ci"],
        &["credential.revoke"],
    ))
    .await;
    // Last: from here on the secrets open only with the new key.
    let new_key = dir.join("new.key");
    std::fs::write(
        &new_key,
        pact_crypto::MasterKey::generate().unwrap().to_base64(),
    )
    .unwrap();
    run(Step {
        args: vec![
            "keys".into(),
            "rewrap".into(),
            "--new-master-key-file".into(),
            new_key.to_str().unwrap().to_owned(),
        ],
        input: None,
        env: Vec::new(),
        expect: &["key.rewrap"],
        fails: false,
    })
    .await;

    // Every command classified as recording something was run above; the
    // coverage list, as the test run shows it.
    let ran: Vec<String> = sqlx::query_scalar("select distinct action from audit_log")
        .fetch_all(&app.db)
        .await
        .unwrap();
    for (path, audit) in COMMANDS {
        match audit {
            Audit::Entries(actions) => {
                for a in *actions {
                    assert!(
                        ran.iter().any(|r| r == a) || *a == "schema.migrate",
                        "{path}: {a} never recorded"
                    );
                }
                println!("pactd {path}: {}", actions.join(", "));
            }
            Audit::Nothing(why) => println!("pactd {path}: nothing ({why})"),
        }
    }
    // The log is append-only, in the database itself.
    for sql in [
        "update audit_log set actor = 'someone else'",
        "delete from audit_log",
        "truncate audit_log",
    ] {
        let e = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&app.db)
            .await
            .expect_err(sql);
        assert!(e.to_string().contains("append-only"), "{sql}: {e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
