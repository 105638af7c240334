//! `pactd brand set --agent-url`, `brand webhook-secret rotate`, `brand tool`
//! and `brand credential` as an operator runs them, against a live pactd and
//! the example merchant (examples/merchant).

use std::process::Stdio;
use std::time::Duration;

use pact_tests::TestApp;
use pact_tests::merchant::Merchant;
use serde_json::Value;
use tokio::process::Command;

const PACTD: &str = env!("CARGO_BIN_EXE_pactd");

/// Runs `pactd <args>` on the app's database with its master key: (success, stdout, stderr).
async fn pactd(app: &TestApp, args: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new(PACTD);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PACTD_") {
            cmd.env_remove(&key);
        }
    }
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        cmd.args(args)
            .env("DATABASE_URL", &app.db_url)
            .env("PACTD_MASTER_KEY", app.master_key.to_base64())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn ok(app: &TestApp, args: &[&str]) -> String {
    let (success, out, err) = pactd(app, args).await;
    assert!(success, "pactd {args:?} failed:\n{out}\n{err}");
    // The command wrote behind the node's back: its next request must not be
    // answered from the node's copy of the rows from before (what a
    // separate process's change costs is one notification's delivery).
    app.settle().await;
    out
}

async fn refused(app: &TestApp, args: &[&str]) -> String {
    let (success, out, err) = pactd(app, args).await;
    assert!(!success, "pactd {args:?} succeeded:\n{out}");
    err
}

fn whsec(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("whsec_"))
        .unwrap_or_else(|| panic!("no whsec_ in {stdout}"))
        .to_owned()
}

async fn say(app: &TestApp, pa: &pact_tests::TestPa, message_id: &str, text: &str) -> Value {
    let res = app
        .send(
            "demo",
            &pa.token("u1", app.audience()),
            message_id,
            text,
            None,
        )
        .await;
    let status = res.status();
    let v: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_puts_the_example_merchant_behind_a_brand() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example/cli").await;

    // URLs the SSRF guard refuses, and plain http to a public name.
    for bad in [
        "http://shop.example/pact",
        "https://10.0.0.1/pact",
        "https://169.254.169.254/latest",
        "https://user:pw@shop.example/pact",
    ] {
        let err = refused(&app, &["brand", "set", "demo", "--agent-url", bad]).await;
        assert!(err.contains("invalid --agent-url"), "{bad}: {err}");
    }

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let out = ok(
        &app,
        &[
            "brand",
            "set",
            "demo",
            "--agent-url",
            &format!("{base}/pact"),
        ],
    )
    .await;
    let first = whsec(&out);
    // Setting the URL again keeps the secret (nothing printed).
    let again = ok(
        &app,
        &[
            "brand",
            "set",
            "demo",
            "--agent-url",
            &format!("{base}/pact"),
            "--agent-timeout-ms",
            "15000",
        ],
    )
    .await;
    assert!(!again.contains("whsec_"), "{again}");
    let m = Merchant::start_on(port, &first).await;

    ok(
        &app,
        &[
            "brand",
            "tool",
            "add",
            "demo",
            "lookup_orders",
            "--scope",
            "orders:read",
            "--url",
            &format!("{base}/tools/lookup-orders"),
        ],
    )
    .await;
    ok(
        &app,
        &[
            "brand",
            "tool",
            "add",
            "demo",
            "cancel_order",
            "--scope",
            "orders:cancel",
            "--url",
            &format!("{base}/tools/cancel-order"),
            "--enforce",
            "order_ids=order_id",
        ],
    )
    .await;
    let err = refused(
        &app,
        &[
            "brand",
            "tool",
            "add",
            "demo",
            "x",
            "--scope",
            "orders:read",
            "--url",
            &format!("{base}/x"),
            "--enforce",
            "nope=order_id",
        ],
    )
    .await;
    assert!(err.contains("no authorization_details type"), "{err}");
    // An input schema must be a JSON Schema for an object that compiles without
    // fetching anything (a remote $ref would make pactd call out).
    for (schema, why) in [
        (r#"{"type":"string"}"#, "\"type\": \"object\""),
        (
            r#"{"type":"object","properties":{"a":{"type":"nope"}}}"#,
            "JSON Schema",
        ),
        (
            r#"{"type":"object","properties":{"a":{"$ref":"http://169.254.169.254/x"}}}"#,
            "JSON Schema",
        ),
    ] {
        let err = refused(
            &app,
            &[
                "brand",
                "tool",
                "add",
                "demo",
                "x",
                "--url",
                &format!("{base}/x"),
                "--input-schema",
                schema,
            ],
        )
        .await;
        assert!(
            err.contains("invalid --input-schema") && err.contains(why),
            "{err}"
        );
    }
    let list = ok(&app, &["brand", "tool", "list", "demo"]).await;
    assert!(list.contains("cancel_order\torders:cancel"), "{list}");
    assert!(list.contains("lookup_orders\torders:read"), "{list}");

    // The brand answers from the example.
    let v = say(&app, &pa, "m1", "When are you open?").await;
    assert!(v.to_string().contains("Example Shop"), "{v}");

    // Rotation with a grace: the example, still on the first secret, keeps working.
    let out = ok(
        &app,
        &["brand", "webhook-secret", "rotate", "demo", "--grace", "1h"],
    )
    .await;
    let second = whsec(&out);
    assert_ne!(first, second);
    say(&app, &pa, "m2", "When are you open?").await;
    assert_eq!(m.stats().await["refused_signatures"], 0);
    // A rotation without grace: the first secret stops signing at once.
    ok(
        &app,
        &["brand", "webhook-secret", "rotate", "demo", "--grace", "0s"],
    )
    .await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m3", "hi", None)
        .await;
    assert_eq!(res.status(), 503);

    // Credentials: shown once, listed, revoked.
    let out = ok(
        &app,
        &["brand", "credential", "add", "demo", "--name", "orders API"],
    )
    .await;
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    let (client_id, secret) = (field("client_id:"), field("client_secret:"));
    let list = ok(&app, &["brand", "credential", "list", "demo"]).await;
    assert!(
        list.contains(&client_id) && list.contains("active"),
        "{list}"
    );
    assert!(!list.contains(&secret), "the secret is never shown again");
    let introspect = |id: String, s: String| {
        let http = app.http.clone();
        let url = app.oauth("demo", "introspect");
        async move {
            http.post(url)
                .basic_auth(id, Some(s))
                .form(&[("token", "x")])
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(introspect(client_id.clone(), secret.clone()).await, 200);
    ok(&app, &["brand", "credential", "revoke", "demo", &client_id]).await;
    assert_eq!(introspect(client_id.clone(), secret.clone()).await, 401);

    // Removing a tool removes its enforcement rule too; back to the demo agent.
    ok(&app, &["brand", "tool", "remove", "demo", "cancel_order"]).await;
    let brand = pact_db::brands::find(&app.db, "demo")
        .await
        .unwrap()
        .unwrap();
    assert!(!brand.settings.to_string().contains("cancel_order"));
    let err = refused(&app, &["brand", "tool", "remove", "demo", "cancel_order"]).await;
    assert!(err.contains("has no tool"), "{err}");
    // The same edits as the console's and the API's, with their audit entries;
    // a refused one leaves none.
    let audited: Vec<(String, String, String)> = sqlx::query_as(
        "select actor_kind, action, target from audit_log \
         where brand_id = 'demo' and action like 'tool.%' order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        audited,
        [
            ("cli", "tool.upsert", "lookup_orders"),
            ("cli", "tool.upsert", "cancel_order"),
            ("cli", "tool.remove", "cancel_order"),
        ]
        .map(|(k, a, t)| (k.to_owned(), a.to_owned(), t.to_owned()))
    );
    ok(&app, &["brand", "set", "demo", "--demo-agent"]).await;
    let v = say(&app, &pa, "m4", "When are you open?").await;
    assert!(
        v.to_string().contains("Saturday"),
        "the demo agent again: {v}"
    );
}

/// `brand tool import-mcp` against the example MCP server (examples/mcp-server):
/// refused without `--allow-loopback` and when the server is down (nothing
/// registered); then the tools are registered, the unmapped one is named
/// with the command that maps it, `set-scope` maps it, and both changes are
/// in the audit log.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_imports_the_tools_of_an_mcp_server() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let out = ok(
        &app,
        &[
            "brand",
            "set",
            "demo",
            "--agent-url",
            "http://127.0.0.1:9/pact",
        ],
    )
    .await;
    let server = pact_tests::node::NodeService::example_mcp_server(&whsec(&out)).await;
    let url = format!("{}/mcp", server.base);
    let import = ["brand", "tool", "import-mcp", "demo", "--url", url.as_str()];

    // Issue 30, item 10: the refusal names the MCP server URL and the flag,
    // not the shared guard's "jwksUri".
    let err = refused(&app, &import).await;
    assert!(err.contains("the MCP server URL"), "{err}");
    assert!(err.contains("--allow-loopback"), "{err}");
    assert!(!err.contains("jwksUri"), "{err}");
    let err = refused(
        &app,
        &[
            "brand",
            "tool",
            "import-mcp",
            "demo",
            "--url",
            "http://127.0.0.1:1/mcp",
            "--allow-loopback",
        ],
    )
    .await;
    assert!(err.contains("unreachable"), "{err}");
    assert_eq!(server.stats().await["lists"], 0);
    assert_eq!(ok(&app, &["brand", "tool", "list", "demo"]).await, "");

    let mut args = import.to_vec();
    args.extend([
        "--allow-loopback",
        "--scope-map",
        "lookup_orders=orders:read",
    ]);
    let out = ok(&app, &args).await;
    assert!(out.contains("added lookup_orders: orders:read"), "{out}");
    assert!(out.contains("added cancel_order: UNMAPPED"), "{out}");
    assert!(
        out.contains("pactd brand tool set-scope demo cancel_order SCOPE"),
        "{out}"
    );
    let list = ok(&app, &["brand", "tool", "list", "demo"]).await;
    assert!(
        list.contains(&format!("cancel_order\tUNMAPPED\tmcp:cancel_order@{url}")),
        "{list}"
    );

    let err = refused(
        &app,
        &[
            "brand",
            "tool",
            "set-scope",
            "demo",
            "cancel_order",
            "orders:nope",
        ],
    )
    .await;
    assert!(err.contains("no scope"), "{err}");
    // The same one check as the API's and the import's: a text that is no
    // scope-token is refused as such before any lookup.
    let err = refused(
        &app,
        &[
            "brand",
            "tool",
            "set-scope",
            "demo",
            "cancel_order",
            "two words",
        ],
    )
    .await;
    assert!(err.contains("is not a scope"), "{err}");
    refused(
        &app,
        &["brand", "tool", "set-scope", "demo", "cancel_order"],
    )
    .await;
    let out = ok(
        &app,
        &[
            "brand",
            "tool",
            "set-scope",
            "demo",
            "cancel_order",
            "orders:cancel",
        ],
    )
    .await;
    assert!(out.contains("orders:cancel"), "{out}");
    let list = ok(&app, &["brand", "tool", "list", "demo"]).await;
    assert!(list.contains("cancel_order\torders:cancel\tmcp:"), "{list}");

    let actions: Vec<String> = sqlx::query_scalar(
        "select action from audit_log where brand_id = 'demo' and action like 'tool.%' order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(actions, ["tool.import_mcp", "tool.set_scope"]);
}
