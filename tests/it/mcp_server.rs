//! The merchant's own MCP server behind pactd (docs/mcp.md, "Connect your
//! MCP server"). The journey runs two Node processes written with the
//! official MCP TypeScript SDK: the brand agent of tests/mcp (an MCP client
//! of pactd's per-turn endpoint) and the example MCP server of
//! examples/mcp-server, whose tools pactd imported and calls on the agent's
//! behalf with the person's identity in a signed `pact-context` header. The
//! refusal tests try every way around the checks: a tool nobody mapped,
//! arguments outside the schema or the granted details, an oversized answer,
//! an import from a server that is down, not MCP, listing a bad tool,
//! behind an address the SSRF guard refuses, or refusing pactd's signature.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use pact_db::merchant::BrandTool;
use pact_server::admin::brand_settings::EditError;
use pact_server::merchant::mcp_import::{self, ImportReport};
use pact_server::merchant::signing::WebhookSecret;
use pact_tests::TestApp;
use serde_json::{Value, json};

use crate::journey::{NodeService, grant, ok_json, text, verified_receipt};

const ISS: &str = "https://pa.example/mcp-server";
const SUB: &str = "pa-user-1";
const BOTH: [&str; 2] = ["lookup_orders=orders:read", "cancel_order=orders:cancel"];

fn message(e: EditError) -> String {
    match e {
        EditError::Invalid(m) => m,
        other => format!("{other:?}"),
    }
}

/// `pactd brand tool import-mcp demo --url URL --scope-map …`, as the
/// command runs it, signed with `secrets` (the brand's own when `None`).
async fn import_with(
    app: &TestApp,
    url: &str,
    map: &[&str],
    allow_loopback: bool,
    secrets: Option<Vec<WebhookSecret>>,
) -> Result<ImportReport, String> {
    let now = app.state.clock.now();
    let secrets = match secrets {
        Some(s) => s,
        None => {
            pact_server::merchant::signing_secrets(&app.state, &pact_tests::brand_id("demo"), now)
                .await
                .unwrap()
        }
    };
    let pairs: Vec<String> = map.iter().map(|s| (*s).to_owned()).collect();
    let pairs = mcp_import::parse_scope_map(&pairs).map_err(message)?;
    let http = pact_server::merchant::http::build_client(allow_loopback).unwrap();
    let tools = mcp_import::fetch(
        &http,
        url,
        allow_loopback,
        &secrets,
        &pact_tests::brand_id("demo"),
        now.unix_timestamp(),
        Duration::from_secs(10),
    )
    .await
    .map_err(message)?;
    let mut tx = app.db.begin().await.unwrap();
    let report = mcp_import::apply(&mut tx, &pact_tests::brand_id("demo"), url, &tools, &pairs)
        .await
        .map_err(message)?;
    tx.commit().await.unwrap();
    bind_cancel_order(app).await;
    Ok(report)
}

/// What the merchant does after mapping `cancel_order` to its scope: says
/// which argument the demo type's `order_ids` limits (`tool set-rules`).
async fn bind_cancel_order(app: &TestApp) {
    let mapped = pact_db::merchant::list_tools(&app.db, &pact_tests::brand_id("demo"))
        .await
        .unwrap()
        .into_iter()
        .any(|t| {
            t.name == "cancel_order" && t.mapped && t.scope.as_deref() == Some("orders:cancel")
        });
    if mapped {
        pact_db::merchant::set_tool_rules(
            &app.db,
            &pact_tests::brand_id("demo"),
            "cancel_order",
            &json!(["order_ids=order_id"]),
            None,
        )
        .await
        .unwrap();
    }
    app.settle().await;
}

async fn import(app: &TestApp, url: &str, map: &[&str]) -> Result<ImportReport, String> {
    import_with(app, url, map, true, None).await
}

async fn tools(app: &TestApp) -> Vec<BrandTool> {
    pact_db::merchant::list_tools(&app.db, &pact_tests::brand_id("demo"))
        .await
        .unwrap()
}

/// The demo brand answered by the brand agent, with the example MCP server
/// started on the same webhook secret (nothing imported yet).
struct Shop {
    app: TestApp,
    server: NodeService,
    agent: NodeService,
    url: String,
    pa: pact_tests::TestPa,
    pa_jwt: String,
}

async fn shop() -> Shop {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let whsec = app.new_webhook_secret("demo").await;
    let (server, agent) = tokio::join!(
        NodeService::example_mcp_server(&whsec),
        NodeService::brand_agent(&whsec)
    );
    app.set_agent("demo", &format!("{}/pact", agent.base), None)
        .await;
    let url = format!("{}/mcp", server.base);
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    Shop {
        app,
        server,
        agent,
        url,
        pa,
        pa_jwt,
    }
}

impl Shop {
    async fn grant(&self, scopes: &[&str], details: Option<&Value>) -> String {
        grant(&self.app, &self.pa, SUB, "ann", scopes, details).await
    }

    async fn send(&self, token: &str, id: &str, text: &str, ctx: Option<&str>) -> Value {
        ok_json(
            self.app
                .send_delegated("demo", &self.pa_jwt, token, id, text, ctx)
                .await,
        )
        .await
    }

    /// One turn in which the brand agent calls `tool` with exactly `args`
    /// (its `#call` hook) through the official SDK; the call's MCP result.
    async fn call(&self, token: &str, id: &str, tool: &str, args: &Value) -> (Value, Value) {
        let v = self
            .send(token, id, &format!("#call {tool} {args}"), None)
            .await;
        let seen = self.agent.seen(id).await;
        assert!(seen["error"].is_null(), "{seen}");
        (v, seen["calls"][0]["result"].clone())
    }
}

/// The journey with the tools on the merchant's MCP server: import
/// with a scope per tool; lookup allowed and receipted; cancel refused with
/// an MCP tool error naming the scope and the A2A reply a step-up; after
/// approval the cancel runs exactly once at the MCP server, which learned
/// from pactd's signed header whom it acted for.
#[tokio::test]
async fn the_delegated_journey_reaches_the_merchants_mcp_server() {
    let s = shop().await;
    let report = import(&s.app, &s.url, &BOTH).await.unwrap();
    assert_eq!(
        report.added,
        [
            ("lookup_orders".to_owned(), Some("orders:read".to_owned())),
            ("cancel_order".to_owned(), Some("orders:cancel".to_owned())),
        ]
    );
    assert!(report.unmapped.is_empty());
    let registered = tools(&s.app).await;
    let cancel = registered
        .iter()
        .find(|t| t.name == "cancel_order")
        .unwrap();
    assert_eq!(cancel.kind, "mcp");
    assert_eq!(cancel.remote_name.as_deref(), Some("cancel_order"));
    assert_eq!(cancel.url, s.url);
    // The schema the SDK derived from the server's zod shape, as listed.
    assert_eq!(
        cancel.input_schema.as_ref().unwrap()["properties"]["order_id"]["pattern"],
        "^SHOP-[0-9]+$"
    );
    assert_eq!(cancel.description, "Cancel one order that has not shipped");
    assert_eq!(s.server.stats().await["lists"], 1);

    let read = s.grant(&["orders:read"], None).await;
    let started = Instant::now();
    let v = s.send(&read, "m1", "Show me my orders", None).await;
    let turn_ms = started.elapsed().as_millis();
    let seen = s.agent.seen("m1").await;
    assert!(seen["error"].is_null(), "{seen}");
    assert!(text(&v["message"]).contains("SHOP-1001"), "{v} {seen}");
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let claims = verified_receipt(&s.app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "lookup_orders");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({})).as_str())
    );
    assert_eq!(claims.scopes_used, ["orders:read"]);
    // The MCP server ran it once and knows whom for, from the verified header.
    let stats = s.server.stats().await;
    assert_eq!(stats["tool_calls"], json!({"lookup_orders": 1}), "{stats}");
    let first = &stats["calls"][0];
    let user = first["userId"].as_str().unwrap().to_owned();
    assert!(!user.is_empty());
    assert_eq!(first["paIssuer"], ISS);
    assert_eq!(first["scopes"], json!(["orders:read"]));
    assert!(first["grantId"].as_str().is_some_and(|g| g.len() == 36));
    assert!(first["turnId"].as_str().is_some());
    assert_eq!(stats["refused"], 0);
    eprintln!("turn with one MCP-forwarded lookup: {turn_ms} ms");

    // Cancel without orders:cancel: a tool error naming the scope, nothing forwarded.
    let v = s
        .send(&read, "m2", "Please cancel SHOP-1001", Some(&ctx))
        .await;
    let seen = s.agent.seen("m2").await;
    let call = &seen["calls"][0];
    assert_eq!(call["isError"], true, "{seen}");
    assert_eq!(
        call["result"]["structuredContent"],
        json!({"error": "missing_scope", "scope": "orders:cancel"})
    );
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:cancel"])
    );
    let claims = verified_receipt(&s.app, &task["status"]["message"]).await;
    assert!(claims.actions.is_empty(), "a refused call is no action");
    assert_eq!(
        s.server.stats().await["tool_calls"].get("cancel_order"),
        None
    );

    // Approved for SHOP-1001: the same agent and SDK, now allowed, run once at the server.
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let both = s
        .grant(&["orders:read", "orders:cancel"], Some(&details))
        .await;
    let v = s
        .send(&both, "m3", "Please cancel SHOP-1001", Some(&ctx))
        .await;
    let seen = s.agent.seen("m3").await;
    assert!(
        text(&v["message"]).contains("SHOP-1001 is cancelled"),
        "{v} {seen}"
    );
    let claims = verified_receipt(&s.app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "cancel_order");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({"order_id": "SHOP-1001"})).as_str())
    );
    // A retry of m3 is the stored reply: the cancel is not forwarded again.
    let again = s
        .send(&both, "m3", "Please cancel SHOP-1001", Some(&ctx))
        .await;
    assert_eq!(again["message"], v["message"]);
    let stats = s.server.stats().await;
    assert_eq!(stats["cancellations"], json!({"SHOP-1001": 1}), "{stats}");
    assert_eq!(stats["tool_calls"]["cancel_order"], 1);
    let last = &stats["calls"][1];
    assert_eq!(last["userId"], user.as_str(), "the same person");
    assert_eq!(last["scopes"], json!(["orders:cancel", "orders:read"]));
    assert_ne!(last["grantId"], first["grantId"]);
    assert_eq!(stats["refused"], 0);
    assert!(s.app.state.live_turns.is_empty());
}

/// A tool imported without a scope is callable by nobody, not even a turn
/// holding every scope, and is not listed; an admin's mapping makes it
/// usable. A re-import refreshes the tools but never changes a scope unless
/// a mapping says so.
#[tokio::test]
async fn an_unmapped_tool_is_refused_for_everyone_until_mapped() {
    let s = shop().await;
    let report = import(&s.app, &s.url, &["lookup_orders=orders:read"])
        .await
        .unwrap();
    assert_eq!(report.unmapped, ["cancel_order"]);
    assert!(report.added.contains(&("cancel_order".to_owned(), None)));
    let cancel = tools(&s.app)
        .await
        .into_iter()
        .find(|t| t.name == "cancel_order")
        .unwrap();
    assert!(!cancel.mapped);
    assert_eq!(cancel.scope, None);

    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let both = s
        .grant(&["orders:read", "orders:cancel"], Some(&details))
        .await;
    let args = json!({"order_id": "SHOP-1001"});
    let (v, result) = s.call(&both, "m1", "cancel_order", &args).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["error"], "not_available");
    assert!(v.get("task").is_none(), "no scope to step up to: {v}");
    let seen = s.agent.seen("m1").await;
    let listed: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["lookup_orders"], "not listed as callable");
    assert!(
        verified_receipt(&s.app, &v["message"])
            .await
            .actions
            .is_empty()
    );
    assert_eq!(s.server.stats().await["tool_calls"], json!({}));

    // Re-import without a mapping: refreshed, still unmapped (no silent change).
    let again = import(&s.app, &s.url, &[]).await.unwrap();
    assert!(again.added.is_empty());
    assert_eq!(again.updated.len(), 2);
    assert!(again.rescoped.is_empty());
    assert_eq!(again.unmapped, ["cancel_order"]);

    // The admin maps it: now the same call runs.
    assert!(
        pact_db::merchant::set_tool_scope(
            &s.app.db,
            &pact_tests::brand_id("demo"),
            "cancel_order",
            Some("orders:cancel")
        )
        .await
        .unwrap()
    );
    bind_cancel_order(&s.app).await;
    let (_, result) = s.call(&both, "m2", "cancel_order", &args).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["cancelled"], true);
    assert_eq!(
        s.server.stats().await["cancellations"],
        json!({"SHOP-1001": 1})
    );

    // A re-import keeps that scope; only an explicit mapping changes it, and says so.
    let kept = import(&s.app, &s.url, &[]).await.unwrap();
    assert!(kept.rescoped.is_empty() && kept.unmapped.is_empty());
    let changed = import(&s.app, &s.url, &["cancel_order=orders:read"])
        .await
        .unwrap();
    assert_eq!(
        changed.rescoped,
        [(
            "cancel_order".to_owned(),
            Some("orders:cancel".to_owned()),
            "orders:read".to_owned()
        )]
    );
}

/// Arguments outside the imported schema or the granted details reach
/// nothing at the merchant's server; nothing is receipted.
#[tokio::test]
async fn arguments_outside_the_schema_or_the_details_never_reach_the_mcp_server() {
    let s = shop().await;
    import(&s.app, &s.url, &BOTH).await.unwrap();
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let both = s
        .grant(&["orders:read", "orders:cancel"], Some(&details))
        .await;
    for (i, (args, error, word)) in [
        (
            json!({"order_id": "SHOP-1' OR 1=1"}),
            "invalid_arguments",
            "pattern",
        ),
        (json!({"order_id": 1001}), "invalid_arguments", "type"),
        (json!({}), "invalid_arguments", "required"),
        // Beyond the details: the person is asked (the reply is the task).
        (json!({"order_id": "SHOP-1002"}), "beyond_limit", "beyond"),
    ]
    .into_iter()
    .enumerate()
    {
        let (v, result) = s.call(&both, &format!("m{i}"), "cancel_order", &args).await;
        assert_eq!(result["isError"], true, "{args}: {result}");
        assert_eq!(result["structuredContent"]["error"], error, "{result}");
        let why = result["structuredContent"]["error_description"]
            .as_str()
            .unwrap_or("");
        assert!(why.contains(word), "{why}");
        assert!(!why.contains("OR 1=1"), "values are never echoed");
        let reply = if v.get("task").is_some() {
            &v["task"]["status"]["message"]
        } else {
            &v["message"]
        };
        assert!(verified_receipt(&s.app, reply).await.actions.is_empty());
    }
    let stats = s.server.stats().await;
    assert_eq!(stats["tool_calls"], json!({}), "nothing forwarded: {stats}");
}

/// A hand-written MCP server that answers `application/json` without
/// sessions: `tools/list` lists `tools`; `tools/call` answers `answer_bytes`
/// of text, counted; with `html` it answers every POST with a web page.
struct Fake {
    tools: Value,
    answer_bytes: usize,
    html: bool,
    calls: AtomicUsize,
}

async fn fake_mcp(State(f): State<Arc<Fake>>, body: Bytes) -> axum::response::Response {
    if f.html {
        return ([(header::CONTENT_TYPE, "text/html")], "<html>shop</html>").into_response();
    }
    let msg: Value = serde_json::from_slice(&body).unwrap();
    let result = match msg["method"].as_str().unwrap_or("") {
        "initialize" => json!({"protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "0"}}),
        "tools/list" => json!({"tools": f.tools}),
        "tools/call" => {
            f.calls.fetch_add(1, Ordering::SeqCst);
            json!({"content": [{"type": "text", "text": "x".repeat(f.answer_bytes)}]})
        }
        _ => return StatusCode::ACCEPTED.into_response(),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": msg["id"], "result": result})).into_response()
}

async fn start_fake(tools: Value, answer_bytes: usize, html: bool) -> (String, Arc<Fake>) {
    let f = Arc::new(Fake {
        tools,
        answer_bytes,
        html,
        calls: AtomicUsize::new(0),
    });
    let router = axum::Router::new()
        .route("/mcp", post(fake_mcp))
        .with_state(f.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router).await.ok();
    });
    (url, f)
}

/// An answer over the size limit from the merchant's MCP server is refused:
/// the tool ran once, the agent gets `tool_failed`, nothing is receipted.
#[tokio::test]
async fn an_oversized_answer_from_the_mcp_server_is_refused() {
    let s = shop().await;
    let (url, fake) = start_fake(
        json!([{"name": "order_report", "inputSchema": {"type": "object"}}]),
        300 * 1024,
        false,
    )
    .await;
    import(&s.app, &url, &["order_report=orders:read"])
        .await
        .unwrap();
    let read = s.grant(&["orders:read"], None).await;
    let (v, result) = s.call(&read, "m1", "order_report", &json!({})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["error"], "tool_failed");
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    // It reached the server (and may have acted): in the receipt, outcome unknown.
    let actions = verified_receipt(&s.app, &v["message"]).await.actions;
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0].outcome.as_deref(), Some("unknown"));
    assert!(
        actions[0]
            .error
            .as_ref()
            .is_some_and(|e| e.code.as_deref() == Some("bad_answer"))
    );
}

/// An import that cannot complete registers nothing and says why: a server
/// that is down, that is not MCP, that lists one unusable tool, that refuses
/// pactd's signature, an address the SSRF guard refuses, a mapping to a tool
/// or scope that does not exist, a name already taken by a URL tool.
#[tokio::test]
async fn a_failed_import_says_why_and_registers_nothing() {
    let s = shop().await;
    let app = &s.app;
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", l.local_addr().unwrap())
    };
    let e = import(app, &down, &[]).await.unwrap_err();
    assert!(e.contains("unreachable"), "{e}");

    let (html, _) = start_fake(json!([]), 0, true).await;
    let e = import(app, &html, &[]).await.unwrap_err();
    assert!(e.contains("not a usable MCP answer"), "{e}");

    let (one_bad, _) = start_fake(
        json!([{"name": "good", "inputSchema": {"type": "object"}},
               {"name": "bad", "inputSchema": {"type": "string"}}]),
        0,
        false,
    )
    .await;
    let e = import(app, &one_bad, &["good=orders:read"])
        .await
        .unwrap_err();
    assert!(e.contains("\"bad\"") && e.contains("inputSchema"), "{e}");

    // Signed with a secret that is not the brand's: the server refuses (401).
    let e = import_with(
        app,
        &s.url,
        &[],
        true,
        Some(vec![WebhookSecret::generate().unwrap()]),
    )
    .await
    .unwrap_err();
    assert!(e.contains("HTTP 401"), "{e}");
    assert_eq!(s.server.stats().await["refused"], 1);

    // Issue 28, finding 5: the signed context names the endpoint it was
    // sent to. The same server reached under another address (a forwarder,
    // as a request replayed from another server would arrive) refuses it.
    let forwarder = pact_tests::tcp_proxy::TcpProxy::start(
        url::Url::parse(&s.url)
            .unwrap()
            .socket_addrs(|| None)
            .unwrap()[0]
            .to_string(),
    )
    .await;
    let e = import(app, &forwarder.url_for(&s.url), &[])
        .await
        .unwrap_err();
    assert!(e.contains("HTTP 401"), "{e}");
    let stats = s.server.stats().await;
    assert_eq!(stats["refused"], 2);
    assert_eq!(stats["misdirected"], 1);

    // The SSRF guard of every merchant URL: private and metadata addresses
    // always; loopback only when the node allows it.
    for url in [
        "https://10.0.0.7/mcp",
        "https://169.254.169.254/latest/mcp",
        "https://user:pw@mcp.shop.example/mcp",
        "ftp://mcp.shop.example/mcp",
    ] {
        let e = import(app, url, &[]).await.unwrap_err();
        // Issue 30, item 10: in the import's words, not the guard's "jwksUri".
        assert!(
            e.contains("SSRF guard") || e.contains("the MCP server URL"),
            "{url}: {e}"
        );
        assert!(!e.contains("jwksUri"), "{url}: {e}");
    }
    let e = import_with(app, &s.url, &[], false, None)
        .await
        .unwrap_err();
    assert!(e.contains("SSRF guard"), "{e}");
    assert!(
        e.contains("the MCP server URL") && e.contains("--allow-loopback"),
        "{e}"
    );
    assert_eq!(s.server.stats().await["lists"], 0, "nothing reached it");

    let e = import(app, &s.url, &["refund_order=orders:read"])
        .await
        .unwrap_err();
    assert!(e.contains("refund_order"), "{e}");
    let e = import(app, &s.url, &["cancel_order=orders:everything"])
        .await
        .unwrap_err();
    assert!(e.contains("orders:everything"), "{e}");
    assert!(tools(app).await.is_empty(), "nothing registered");

    // A name already used by a URL tool: refused, the URL tool unchanged.
    pact_db::merchant::upsert_tool(
        &app.db,
        &BrandTool::at_url(
            &pact_tests::brand_id("demo"),
            "lookup_orders",
            Some("orders:read"),
            "https://api.shop.example/lookup",
        ),
    )
    .await
    .unwrap();
    let e = import(app, &s.url, &BOTH).await.unwrap_err();
    assert!(e.contains("lookup_orders") && e.contains("URL tool"), "{e}");
    let after = tools(app).await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].kind, "url");
}
