//! The turn's tool gateway over MCP (docs/mcp.md). The journey runs a brand
//! agent (tests/mcp/brand-agent.mjs, a real Node process) that uses the
//! official MCP TypeScript SDK unchanged against pactd's per-turn endpoint,
//! with the example merchant's order API (examples/merchant) behind it. The
//! refusal tests speak raw Streamable HTTP to a turn held open, to try every
//! way around the checks: tokens outside their turn, other brands, foreign
//! origins, sessions and protocol versions that were never negotiated,
//! arguments outside the schema or the granted details, oversized answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use pact_db::merchant::BrandTool;
use pact_tests::TestApp;
use reqwest::Response;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use crate::journey::{NodeService, grant, ok_json, text, verified_receipt};

const ISS: &str = "https://pa.example/mcp";
const SUB: &str = "pa-user-1";
const VERSION: &str = "2025-11-25";

/// The entry of a tools list with this name.
fn named(tools: &Value, name: &str) -> Value {
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in {tools}"))
        .clone()
}

/// The demo brand answered by the example MCP agent
/// (`tests/mcp/brand-agent.mjs`), its order API the test merchant's, and a
/// registered PA holding ann's `orders:read` grant.
struct AgentShop {
    app: TestApp,
    m: pact_tests::merchant::Merchant,
    agent: NodeService,
    pa: pact_tests::TestPa,
    pa_jwt: String,
    read: String,
}

async fn agent_shop() -> AgentShop {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let m = app.merchant_brand("demo").await;
    let agent = NodeService::brand_agent(&m.secret).await;
    app.set_agent("demo", &format!("{}/pact", agent.base), None)
        .await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let read = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;
    AgentShop {
        app,
        m,
        agent,
        pa,
        pa_jwt,
        read,
    }
}

/// The journey through an off-the-shelf MCP client: lookup allowed
/// and receipted; cancel refused with an MCP tool error naming the scope and
/// the A2A reply a step-up; after approval the cancel reaches the merchant's
/// API exactly once.
#[tokio::test]
async fn an_official_mcp_client_runs_the_delegated_journey() {
    let AgentShop {
        app,
        m,
        agent,
        pa,
        pa_jwt,
        read,
    } = agent_shop().await;

    let v = ok_json(
        app.send_delegated("demo", &pa_jwt, &read, "m1", "Show me my orders", None)
            .await,
    )
    .await;
    let seen = agent.seen("m1").await;
    assert!(seen["error"].is_null(), "{seen}");
    assert!(text(&v["message"]).contains("SHOP-1001"), "{v} {seen}");
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    // The SDK negotiated the current revision and got a session.
    assert_eq!(seen["protocolVersion"], VERSION);
    assert!(seen["sessionId"].as_str().is_some_and(|s| s.len() >= 32));
    // tools/list says per tool what this turn's grant allows.
    assert_eq!(seen["tools"].as_array().unwrap().len(), 2, "{seen}");
    assert_eq!(
        named(&seen["tools"], "lookup_orders")["grant"],
        json!({"allowed": true, "reason": "granted",
               "scope": "orders:read", "limitedByAuthorizationDetails": false})
    );
    assert_eq!(
        named(&seen["tools"], "cancel_order")["grant"],
        json!({"allowed": false, "reason": "missing_scope",
               "scope": "orders:cancel", "limitedByAuthorizationDetails": false})
    );
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "lookup_orders");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({})).as_str())
    );
    assert_eq!(claims.scopes_used, ["orders:read"]);
    assert_eq!(m.stats().await["tool_calls"], json!({"lookup_orders": 1}));

    // Cancel without orders:cancel: an MCP tool error naming the scope, nothing forwarded.
    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &read,
            "m2",
            "Please cancel SHOP-1001",
            Some(&ctx),
        )
        .await,
    )
    .await;
    let seen = agent.seen("m2").await;
    let call = &seen["calls"][0];
    assert_eq!(call["isError"], true, "{seen}");
    assert_eq!(
        call["result"]["structuredContent"],
        json!({"error": "missing_scope", "scope": "orders:cancel"})
    );
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("orders:cancel")
    );
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:cancel"])
    );
    let claims = verified_receipt(&app, &task["status"]["message"]).await;
    assert!(claims.actions.is_empty(), "a refused call is no action");
    let stats = m.stats().await;
    assert_eq!(stats["tool_calls"].get("cancel_order"), None, "{stats}");

    // The person approves cancelling SHOP-1001; the same agent, the same SDK, now allowed.
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let both = grant(
        &app,
        &pa,
        SUB,
        "ann",
        &["orders:read", "orders:cancel"],
        Some(&details),
    )
    .await;
    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &both,
            "m3",
            "Please cancel SHOP-1001",
            Some(&ctx),
        )
        .await,
    )
    .await;
    let seen = agent.seen("m3").await;
    assert!(
        text(&v["message"]).contains("SHOP-1001 is cancelled"),
        "{v} {seen}"
    );
    let cancel = named(&seen["tools"], "cancel_order");
    assert_eq!(cancel["grant"]["allowed"], true);
    assert_eq!(cancel["grant"]["limitedByAuthorizationDetails"], true);
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "cancel_order");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({"order_id": "SHOP-1001"})).as_str())
    );
    let stats = m.stats().await;
    assert_eq!(stats["cancellations"], json!({"SHOP-1001": 1}), "{stats}");
    assert_eq!(stats["tool_calls"]["cancel_order"], 1);
    // Every session ended with its turn.
    assert!(app.state.live_turns.is_empty());
}

/// A stand-in agent that hands each turn to the test and answers when told,
/// so the test can act inside a running turn.
struct Capture {
    turns: mpsc::UnboundedSender<Value>,
    release: Semaphore,
}

async fn capture_turn(State(c): State<Arc<Capture>>, body: Bytes) -> String {
    c.turns
        .send(serde_json::from_slice(&body).unwrap())
        .unwrap();
    c.release.acquire().await.unwrap().forget();
    json!({"reply": "done"}).to_string()
}

async fn start_capture() -> (String, Arc<Capture>, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let c = Arc::new(Capture {
        turns: tx,
        release: Semaphore::new(0),
    });
    let router = axum::Router::new()
        .route("/pact", post(capture_turn))
        .with_state(c.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pact", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router).await.ok();
    });
    (url, c, rx)
}

/// A raw Streamable HTTP client, to send what no SDK would.
struct Raw<'a> {
    app: &'a TestApp,
    url: String,
    token: String,
    session: Option<String>,
}

impl<'a> Raw<'a> {
    fn of(app: &'a TestApp, turn: &Value) -> Self {
        Self {
            app,
            url: turn["tools"]["mcpUrl"].as_str().unwrap().to_owned(),
            token: turn["tools"]["token"].as_str().unwrap().to_owned(),
            session: None,
        }
    }

    fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut req = self
            .app
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(s) = &self.session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", VERSION);
        }
        req
    }

    async fn initialize(&mut self) -> Value {
        let res = self
            .request(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": VERSION, "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        self.session = Some(res.headers()["mcp-session-id"].to_str().unwrap().to_owned());
        res.json().await.unwrap()
    }

    async fn rpc(&self, method: &str, params: Value) -> (u16, Value) {
        let res = self
            .request(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn call(&self, tool: &str, args: Value) -> Value {
        let (status, body) = self
            .rpc("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// Two turns held open at the `demo` brand (a second brand, `acme`, beside
/// it): `t1` delegated with `orders:read`, `t2` without delegation.
struct HeldTurns {
    app: Arc<TestApp>,
    /// The merchant's order API behind the tools; stopped when dropped.
    _merchant: pact_tests::merchant::Merchant,
    pa: pact_tests::pa::TestPa,
    capture: Arc<Capture>,
    turns: mpsc::UnboundedReceiver<Value>,
    t1: Value,
    t2: Value,
    first: tokio::task::JoinHandle<reqwest::StatusCode>,
    second: tokio::task::JoinHandle<reqwest::StatusCode>,
}

async fn held_turns() -> HeldTurns {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let merchant = app.merchant_brand("demo").await;
    app.add_brand("acme", "Acme").await;
    let (agent_url, capture, mut turns) = start_capture().await;
    app.set_agent("demo", &agent_url, None).await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let delegation = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;

    let app = Arc::new(app);
    let (a1, a2) = (app.clone(), app.clone());
    let (j1, d1) = (pa_jwt.clone(), delegation.clone());
    let first = tokio::spawn(async move {
        a1.send_delegated("demo", &j1, &d1, "m1", "show my orders", None)
            .await
            .status()
    });
    let t1 = turns.recv().await.unwrap();
    let j2 = pa_jwt.clone();
    let second =
        tokio::spawn(async move { a2.send("demo", &j2, "m2", "hello", None).await.status() });
    let t2 = turns.recv().await.unwrap();
    HeldTurns {
        app,
        _merchant: merchant,
        pa,
        capture,
        turns,
        t1,
        t2,
        first,
        second,
    }
}

/// The endpoint admits only its own turn's token, at its own brand, while
/// the turn runs, from no foreign origin; and only sessions it issued, at the
/// version it negotiated. When the turn ends, its sessions end with it.
#[tokio::test]
async fn the_mcp_endpoint_refuses_everything_outside_its_turn() {
    let HeldTurns {
        app,
        _merchant,
        pa: _,
        capture,
        turns: _,
        t1,
        t2,
        first,
        second,
    } = held_turns().await;
    let url1 = t1["tools"]["mcpUrl"].as_str().unwrap().to_owned();
    assert!(
        url1.starts_with(&format!("{}/turns/", app.iface("demo"))),
        "{url1}"
    );
    assert!(url1.ends_with("/mcp"));

    let mut own = Raw::of(&app, &t1);
    // An unknown revision asked for: pactd answers with the one it speaks.
    let res = own
        .request(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "1999-01-01", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], VERSION, "{body}");
    let init = own.initialize().await;
    assert_eq!(
        init["result"]["capabilities"]["tools"],
        json!({"listChanged": false})
    );
    let (status, list) = own.rpc("tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    let tools = &list["result"]["tools"];
    assert_eq!(tools.as_array().unwrap().len(), 2);
    let lookup = named(tools, "lookup_orders");
    assert_eq!(lookup["inputSchema"], json!({"type": "object"}));
    assert_eq!(lookup["_meta"]["pactd/grant"]["allowed"], true);
    assert_eq!(
        named(tools, "cancel_order")["_meta"]["pactd/grant"]["allowed"],
        false
    );
    assert_eq!(
        own.rpc("ping", json!({})).await,
        (200, json!({"jsonrpc": "2.0", "id": 7, "result": {}}))
    );
    let (_, body) = own.rpc("resources/list", json!({})).await;
    assert_eq!(body["error"]["code"], -32601);

    // Tokens outside their turn, guessed, missing, or at another brand: 401.
    let assert_401 = |res: Response| {
        assert_eq!(res.status(), 401);
        assert!(
            res.headers()["www-authenticate"]
                .to_str()
                .unwrap()
                .contains("invalid_token")
        );
    };
    let mut other = Raw::of(&app, &t2);
    other.url.clone_from(&url1);
    assert_401(
        other
            .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap(),
    );
    let mut guessed = Raw::of(&app, &t1);
    guessed.token = "ptt_guessed".to_owned();
    assert_401(
        guessed
            .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap(),
    );
    let mut acme = Raw::of(&app, &t1);
    acme.url = url1.replace("/a2a/demo/", "/a2a/acme/");
    acme.session.clone_from(&own.session);
    assert_401(
        acme.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap(),
    );
    assert_401(
        app.http
            .post(&url1)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap(),
    );
    // The second turn's session is not the first's: a session id travels with its token only.
    let mut second_turn = Raw::of(&app, &t2);
    second_turn.session.clone_from(&own.session);
    let (status, _) = second_turn.rpc("ping", json!({})).await;
    assert_eq!(status, 404);

    // A foreign Origin (DNS rebinding): 403; pactd's own origin is fine.
    let res = own
        .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = own
        .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .header("origin", app.base_url.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // Sessions and versions that were never negotiated.
    let mut no_session = Raw::of(&app, &t1);
    assert_eq!(no_session.rpc("tools/list", json!({})).await.0, 400);
    no_session.session = Some("made-up".to_owned());
    assert_eq!(no_session.rpc("tools/list", json!({})).await.0, 404);
    let res = app
        .http
        .post(&url1)
        .bearer_auth(&own.token)
        .header("mcp-session-id", own.session.as_deref().unwrap())
        .header("mcp-protocol-version", "2025-03-26")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    // Not JSON-RPC, a batch, not JSON, no JSON accepted.
    let (status, body) = (
        own.request(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
            .send()
            .await
            .unwrap()
            .status(),
        (),
    );
    assert_eq!(status, 400, "{body:?}");
    let res = own
        .request(&json!({"id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let res = app
        .http
        .post(&url1)
        .bearer_auth(&own.token)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.json::<Value>().await.unwrap()["error"]["code"], -32700);
    let res = app
        .http
        .post(&url1)
        .bearer_auth(&own.token)
        .header("mcp-session-id", own.session.as_deref().unwrap())
        .header("mcp-protocol-version", VERSION)
        .header("accept", "text/html")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 406);
    // A notification is accepted without a body.
    let res = own
        .request(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    // So is a response (JSON-RPC 2.0 §5: it always has an id, null for an
    // error about an unreadable request); one with neither result nor
    // error, or without an id, is no response.
    for (message, status) in [
        (json!({"jsonrpc": "2.0", "id": 5, "result": {}}), 202),
        (
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}}),
            202,
        ),
        (json!({"jsonrpc": "2.0", "id": 5}), 400),
        (json!({"jsonrpc": "2.0", "result": {}}), 400),
        (
            json!({"jsonrpc": "2.0", "id": 5, "result": {}, "error": {"code": 1, "message": "x"}}),
            400,
        ),
    ] {
        let res = own.request(&message).send().await.unwrap();
        assert_eq!(res.status(), status, "{message}");
    }
    // No SSE stream is offered: GET is 405.
    let res = app
        .http
        .get(&url1)
        .bearer_auth(&own.token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "POST, DELETE");

    // The second turn has no delegation: the lookup is a missing-scope tool error.
    other = Raw::of(&app, &t2);
    other.initialize().await;
    let body = other.call("lookup_orders", json!({})).await;
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["structuredContent"]["scope"], "orders:read");

    // A deleted session is gone; the turn still runs, so a new one can start.
    let mut ended = Raw::of(&app, &t1);
    ended.initialize().await;
    let res = app
        .http
        .delete(&url1)
        .bearer_auth(&ended.token)
        .header("mcp-session-id", ended.session.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(ended.rpc("ping", json!({})).await.0, 404);

    capture.release.add_permits(2);
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
    // The turns ended: their tokens and sessions are dead.
    let res = own
        .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_401(res);
    let res = other
        .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_401(res);
}

/// A report API that answers 300 KiB, counting its calls.
async fn start_big_tool() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let router = axum::Router::new().route(
        "/report",
        post(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                json!({"report": "x".repeat(300 * 1024)}).to_string()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/report", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router).await.ok();
    });
    (url, hits)
}

/// Arguments outside the tool's input schema or the granted details reach
/// nothing; an oversized answer is refused and not receipted; only the call
/// that passes every check is forwarded and recorded. The JSON route applies
/// the same schema (one implementation behind both).
#[tokio::test]
async fn mcp_calls_outside_the_schema_the_details_or_the_size_limit_reach_nothing() {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let m = app.merchant_brand("demo").await;
    let (big_url, big_hits) = start_big_tool().await;
    let cancel_schema = json!({
        "type": "object",
        "properties": {"order_id": {"type": "string", "pattern": "^SHOP-[0-9]+$"}},
        "required": ["order_id"],
        "additionalProperties": false
    });
    for (name, scope, url, schema) in [
        (
            "cancel_order",
            "orders:cancel",
            format!("{}/tools/cancel-order", m.base),
            Some(cancel_schema.clone()),
        ),
        ("order_report", "orders:read", big_url, None),
    ] {
        pact_db::merchant::upsert_tool(
            &app.db,
            &BrandTool {
                brand_id: pact_tests::brand_id("demo"),
                name: name.to_owned(),
                scope: Some(scope.to_owned()),
                url,
                description: format!("{name} for tests"),
                enforce: if name == "cancel_order" {
                    json!(["order_ids=order_id"])
                } else {
                    json!([])
                },
                input_schema: schema,
                kind: pact_db::merchant::TOOL_KIND_URL.to_owned(),
                remote_name: None,
                mapped: true,
                summary: String::new(),
            },
        )
        .await
        .unwrap();
    }
    app.settle().await;
    let (agent_url, capture, mut turns) = start_capture().await;
    app.set_agent("demo", &agent_url, None).await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1002"]}]);
    let token = grant(
        &app,
        &pa,
        SUB,
        "ann",
        &["orders:read", "orders:cancel"],
        Some(&details),
    )
    .await;

    let app = Arc::new(app);
    let a1 = app.clone();
    let turn = tokio::spawn(async move {
        a1.send_delegated("demo", &pa_jwt, &token, "m1", "cancel things", None)
            .await
    });
    let t = turns.recv().await.unwrap();
    let mut mcp = Raw::of(&app, &t);
    mcp.initialize().await;
    let (_, list) = mcp.rpc("tools/list", json!({})).await;
    let cancel = named(&list["result"]["tools"], "cancel_order");
    assert_eq!(cancel["inputSchema"], cancel_schema);
    assert_eq!(cancel["description"], "cancel_order for tests");

    let refused = |body: &Value, error: &str| {
        assert_eq!(body["result"]["isError"], true, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["error"], error,
            "{body}"
        );
    };
    // Outside the schema: wrong type, unknown member, pattern, missing, not an object.
    for args in [
        json!({"order_id": 1002}),
        json!({"order_id": "SHOP-1002", "refund": true}),
        json!({"order_id": "SHOP-1002' OR 1=1"}),
        json!({}),
        json!(["SHOP-1002"]),
    ] {
        refused(&mcp.call("cancel_order", args).await, "invalid_arguments");
    }
    // Within the schema, beyond the granted details: the person will be asked.
    refused(
        &mcp.call("cancel_order", json!({"order_id": "SHOP-1001"}))
            .await,
        "beyond_limit",
    );
    // Unknown tool: a JSON-RPC error, not a tool result.
    let body = mcp.call("refund_order", json!({})).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    // The JSON route refuses the same schema violation the same way.
    let res = app
        .http
        .post(format!(
            "{}/cancel_order",
            t["tools"]["url"].as_str().unwrap()
        ))
        .bearer_auth(t["tools"]["token"].as_str().unwrap())
        .json(&json!({"order_id": 1002}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(
        res.json::<Value>().await.unwrap()["error"],
        "invalid_arguments"
    );
    assert_eq!(
        m.stats().await["tool_calls"],
        json!({}),
        "nothing forwarded"
    );

    // Oversized answer: the tool ran, pactd refuses its answer; the receipt
    // says it was sent and its outcome is unknown.
    refused(&mcp.call("order_report", json!({})).await, "tool_failed");
    assert_eq!(big_hits.load(Ordering::SeqCst), 1);

    // The one call that passes every check.
    let body = mcp
        .call("cancel_order", json!({"order_id": "SHOP-1002"}))
        .await;
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(body["result"]["structuredContent"]["cancelled"], true);
    let text: Value =
        serde_json::from_str(body["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["order_id"], "SHOP-1002");

    capture.release.add_permits(1);
    let v = ok_json(turn.await.unwrap()).await;
    // The call beyond the details makes the reply a question to the person.
    crate::journey::beyond_task(&v, "cancel_order", &json!({"order_id": "SHOP-1001"}));
    let claims = verified_receipt(&app, &v["task"]["status"]["message"]).await;
    let tools: Vec<(&str, Option<&str>)> = claims
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.outcome.as_deref()))
        .collect();
    assert_eq!(
        tools,
        [
            ("order_report", Some("unknown")),
            ("cancel_order", Some("done"))
        ],
        "every forwarded call, with what became of it"
    );
    let reasons: Vec<&str> = claims.refused.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["beyond_limit"],
        "schema refusals are no call of the person's"
    );
    assert_eq!(m.stats().await["cancellations"], json!({"SHOP-1002": 1}));
}

/// A long-running agent keeps one MCP client for all its turns, on the
/// brand's shared endpoint: the official SDK, connected once, each request
/// carrying the token of the turn it serves. Every turn still sees only its
/// own grant, and its calls land in its own receipt.
#[tokio::test]
async fn one_official_mcp_client_serves_many_turns_on_the_brand_endpoint() {
    let AgentShop {
        app,
        m,
        agent,
        pa: _pa, // its JWKS stays served for the whole test
        pa_jwt,
        read,
    } = agent_shop().await;

    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &read,
            "m1",
            "Show me my orders #shared",
            None,
        )
        .await,
    )
    .await;
    let first = agent.seen("m1").await;
    assert!(first["error"].is_null(), "{first}");
    assert!(text(&v["message"]).contains("SHOP-1001"), "{v} {first}");
    let session = first["sessionId"].as_str().unwrap().to_owned();
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "lookup_orders");

    // Another turn, without delegation, on the same session: it sees its own grant (none).
    let v = ok_json(
        app.send("demo", &pa_jwt, "m2", "Show me my orders #shared", None)
            .await,
    )
    .await;
    let second = agent.seen("m2").await;
    assert!(second["error"].is_null(), "{second}");
    assert_eq!(
        second["sessionId"],
        session.as_str(),
        "one session for both"
    );
    assert_eq!(
        named(&second["tools"], "lookup_orders")["grant"]["allowed"],
        false
    );
    assert_eq!(second["calls"][0]["isError"], true, "{second}");
    // The refused call made this turn's reply the step-up (PACT §5.4).
    assert_eq!(
        v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{v}"
    );

    // And a delegated one again: allowed, receipted under its own turn.
    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &read,
            "m3",
            "Show me my orders #shared",
            None,
        )
        .await,
    )
    .await;
    let third = agent.seen("m3").await;
    assert_eq!(third["sessionId"], session.as_str());
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(m.stats().await["tool_calls"], json!({"lookup_orders": 2}));
    assert!(app.state.live_turns.is_empty());
}

/// The brand's shared endpoint: a session there is signed for the brand and
/// carries no authority. Every request is admitted by its own turn's token,
/// at its own brand, while the turn runs; sessions of one endpoint never pass
/// at another, and they expire.
#[tokio::test]
async fn the_brand_mcp_endpoint_admits_each_request_by_its_own_turn_token() {
    let HeldTurns {
        app,
        _merchant,
        pa,
        capture,
        mut turns,
        t1,
        t2,
        first,
        second,
    } = held_turns().await;
    let shared_url = t1["tools"]["brandMcpUrl"].as_str().unwrap().to_owned();
    assert_eq!(shared_url, format!("{}/mcp", app.iface("demo")));
    assert_eq!(t2["tools"]["brandMcpUrl"], shared_url.as_str());

    // Opened with the first turn's token, used with the second's.
    let mut one = Raw::of(&app, &t1);
    one.url.clone_from(&shared_url);
    let init = one.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], VERSION);
    let mut two = Raw::of(&app, &t2);
    two.url.clone_from(&shared_url);
    two.session.clone_from(&one.session);
    let (status, list) = two.rpc("tools/list", json!({})).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        named(&list["result"]["tools"], "lookup_orders")["_meta"]["pactd/grant"]["allowed"],
        false,
        "the second turn has no delegation"
    );
    let body = two.call("lookup_orders", json!({})).await;
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(body["result"]["structuredContent"]["scope"], "orders:read");
    let body = one.call("lookup_orders", json!({})).await;
    assert_eq!(body["result"]["isError"], false, "{body}");

    // No token, a guessed one, a token at another brand's endpoint: 401.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let res = app.http.post(&shared_url).json(&ping).send().await.unwrap();
    assert_eq!(res.status(), 401);
    let mut guessed = Raw::of(&app, &t1);
    guessed.url.clone_from(&shared_url);
    guessed.session.clone_from(&one.session);
    guessed.token = format!("{}x", one.token);
    assert_eq!(guessed.rpc("ping", json!({})).await.0, 401);
    let mut acme = Raw::of(&app, &t1);
    acme.url = shared_url.replace("/a2a/demo/", "/a2a/acme/");
    acme.session.clone_from(&one.session);
    assert_eq!(acme.rpc("ping", json!({})).await.0, 401);

    // Sessions never cross endpoints: the shared one at a turn's own endpoint,
    // a turn's own at the shared endpoint.
    let mut own = Raw::of(&app, &t1);
    own.session.clone_from(&one.session);
    assert_eq!(own.rpc("ping", json!({})).await.0, 404);
    let mut turn_session = Raw::of(&app, &t1);
    turn_session.initialize().await;
    turn_session.url.clone_from(&shared_url);
    assert_eq!(turn_session.rpc("ping", json!({})).await.0, 404);
    // None, made up, or the wrong version.
    let mut none = Raw::of(&app, &t1);
    none.url.clone_from(&shared_url);
    assert_eq!(none.rpc("tools/list", json!({})).await.0, 400);
    none.session = Some("4102444800-AAAAAAAAAAAAAAAA.2025-11-25.AAAAAAAAAAAAAAAAAAAAAA".to_owned());
    assert_eq!(none.rpc("tools/list", json!({})).await.0, 404);
    let res = app
        .http
        .post(&shared_url)
        .bearer_auth(&one.token)
        .header("mcp-session-id", one.session.as_deref().unwrap())
        .header("mcp-protocol-version", "2025-06-18")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    // Neither a stream nor an explicit end is offered there.
    for res in [
        app.http
            .get(&shared_url)
            .bearer_auth(&one.token)
            .send()
            .await
            .unwrap(),
        app.http
            .delete(&shared_url)
            .bearer_auth(&one.token)
            .header("mcp-session-id", one.session.as_deref().unwrap())
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(res.status(), 405);
        assert_eq!(res.headers()["allow"], "POST");
    }

    // The turns end: their tokens open nothing, the session notwithstanding.
    capture.release.add_permits(2);
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
    assert_eq!(one.rpc("ping", json!({})).await.0, 401);
    assert_eq!(two.rpc("ping", json!({})).await.0, 401);

    // Half a day later the session has expired: a new turn's token gets 404, then a new session.
    app.clock
        .advance(std::time::Duration::from_secs(12 * 3600 + 60));
    let at = app.clock.now().unix_timestamp();
    let late_jwt = pa.token_with(SUB, app.audience(), |_, claims| {
        claims["iat"] = json!(at);
        claims["exp"] = json!(at + 120);
    });
    let a3 = app.clone();
    let third = tokio::spawn(async move {
        a3.send("demo", &late_jwt, "m3", "hello", None)
            .await
            .status()
    });
    let t3 = turns.recv().await.unwrap();
    let mut late = Raw::of(&app, &t3);
    late.url.clone_from(&shared_url);
    late.session.clone_from(&one.session);
    assert_eq!(late.rpc("ping", json!({})).await.0, 404);
    late.initialize().await;
    assert_eq!(late.rpc("ping", json!({})).await.0, 200);
    capture.release.add_permits(1);
    assert_eq!(third.await.unwrap(), 200);
}
