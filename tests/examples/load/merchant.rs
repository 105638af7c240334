//! The load example's own merchant: a webhook agent and a tool endpoint on
//! loopback, as fast as a merchant can be, so the merchant phases measure
//! pactd's side of the path (docs/merchant-agent.md has the wire format).
//!
//! Each turn (`POST /agent`, a signed `pact.turn`) is verified the Standard
//! Webhooks way, then the agent calls one tool through pactd's gateway with
//! the turn token and replies. How it calls depends on the turn's text:
//!
//! * `#json` — the JSON route, `POST {tools.url}/{tool}`;
//! * `#mcp` — pactd's MCP face: `initialize`, `notifications/initialized`,
//!   `tools/call`, as an MCP client library does for a new session;
//! * `#mcp-shared` — the brand's shared MCP endpoint (`tools.brandMcpUrl`):
//!   one session for the merchant's whole life, opened on its first turn,
//!   then only `tools/call`, with each turn's token, as a long-running MCP
//!   client does.
//!
//! The tool is `store_hours` (public) in an identity turn and `my_orders`
//! (scope `orders:read`) in a delegated one. The tool endpoint
//! (`POST /tools/{name}`, a signed `pact.tool_call`) checks the signature
//! too and answers at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use pact_server::merchant::signing::WebhookSecret;
use serde_json::{Value, json};

pub struct Merchant {
    http: reqwest::Client,
    secret: WebhookSecret,
    pub turns: AtomicU64,
    pub tool_calls: AtomicU64,
    pub failures: AtomicU64,
    /// Summed over turns: how long the agent held each turn (from the
    /// turn's request read to its reply), and within that how long its
    /// calls through pactd's gateway took, as the merchant sees them.
    pub hold_us: AtomicU64,
    pub gateway_us: AtomicU64,
    /// The session on the brand's shared MCP endpoint, once opened.
    shared_session: tokio::sync::OnceCell<String>,
}

/// What the merchant saw over a span of turns.
#[derive(Clone, Copy, Default)]
pub struct Seen {
    pub turns: u64,
    pub hold_us: u64,
    pub gateway_us: u64,
}

impl Merchant {
    pub fn seen(&self) -> Seen {
        Seen {
            turns: self.turns.load(Ordering::Relaxed),
            hold_us: self.hold_us.load(Ordering::Relaxed),
            gateway_us: self.gateway_us.load(Ordering::Relaxed),
        }
    }
}

impl Seen {
    /// Per turn between two snapshots: (turns, hold µs, gateway µs).
    pub fn per_turn_since(&self, before: &Seen) -> Option<(u64, f64, f64)> {
        let n = self.turns.checked_sub(before.turns).filter(|n| *n > 0)?;
        Some((
            n,
            (self.hold_us - before.hold_us) as f64 / n as f64,
            (self.gateway_us - before.gateway_us) as f64 / n as f64,
        ))
    }
}

/// Starts the merchant on loopback `port`. `whsec`
/// is the brand's webhook secret as `brand set --agent-url` printed it.
pub async fn start(whsec: &str, port: u16) -> anyhow::Result<Arc<Merchant>> {
    let raw = whsec
        .trim()
        .strip_prefix("whsec_")
        .ok_or_else(|| anyhow::anyhow!("not a whsec_ secret"))?;
    let secret = WebhookSecret::from_bytes(STANDARD.decode(raw)?);
    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .no_proxy()
        .timeout(std::time::Duration::from_secs(30))
        .pool_max_idle_per_host(256)
        .build()?;
    let merchant = Arc::new(Merchant {
        http,
        secret,
        turns: AtomicU64::new(0),
        tool_calls: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        hold_us: AtomicU64::new(0),
        gateway_us: AtomicU64::new(0),
        shared_session: tokio::sync::OnceCell::new(),
    });
    let app = Router::new()
        .route("/agent", post(agent))
        .route("/tools/{name}", post(tool))
        .with_state(merchant.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(merchant)
}

/// The Standard Webhooks check: one of the space-separated `v1,` signatures
/// is ours over `{id}.{timestamp}.{body}`.
fn verified(m: &Merchant, headers: &HeaderMap, body: &[u8]) -> bool {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    let (Some(id), Some(ts), Some(sigs)) = (
        get("webhook-id"),
        get("webhook-timestamp").and_then(|t| t.parse::<i64>().ok()),
        get("webhook-signature"),
    ) else {
        return false;
    };
    let Ok(ours) = m.secret.sign(id, ts, body) else {
        return false;
    };
    sigs.split(' ').any(|s| s == ours)
}

fn fail(m: &Merchant, why: String) -> Response {
    m.failures.fetch_add(1, Ordering::Relaxed);
    (StatusCode::INTERNAL_SERVER_ERROR, why).into_response()
}

async fn tool(State(m): State<Arc<Merchant>>, headers: HeaderMap, body: Bytes) -> Response {
    if !verified(&m, &headers, &body) {
        return fail(&m, "bad signature on a tool call".to_owned());
    }
    m.tool_calls.fetch_add(1, Ordering::Relaxed);
    axum::Json(
        json!({"open": "9:00-18:00", "orders": [{"order_id": "SHOP-1001", "status": "shipped"}]}),
    )
    .into_response()
}

async fn agent(State(m): State<Arc<Merchant>>, headers: HeaderMap, body: Bytes) -> Response {
    let held = Instant::now();
    if !verified(&m, &headers, &body) {
        return fail(&m, "bad signature on a turn".to_owned());
    }
    m.turns.fetch_add(1, Ordering::Relaxed);
    let turn: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return fail(&m, format!("turn not JSON: {e}")),
    };
    let text = turn["turn"]["text"].as_str().unwrap_or("");
    let tool = if text.contains("#counted") {
        "counted_orders"
    } else if turn["delegation"].is_object() {
        "my_orders"
    } else {
        "store_hours"
    };
    let tools = &turn["tools"];
    let token = tools["token"].as_str().unwrap_or("");
    let calling = Instant::now();
    let answer = if text.contains("#mcp-shared") {
        mcp_shared_call(&m, tools["brandMcpUrl"].as_str().unwrap_or(""), token, tool).await
    } else if text.contains("#mcp") {
        mcp_call(&m, tools["mcpUrl"].as_str().unwrap_or(""), token, tool).await
    } else {
        json_call(&m, tools["url"].as_str().unwrap_or(""), token, tool).await
    };
    let us = |t: Instant| u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
    m.gateway_us.fetch_add(us(calling), Ordering::Relaxed);
    m.hold_us.fetch_add(us(held), Ordering::Relaxed);
    match answer {
        Ok(v) => axum::Json(json!({"reply": format!("{tool}: {v}")})).into_response(),
        Err(e) => fail(&m, e),
    }
}

async fn json_call(m: &Merchant, url: &str, token: &str, tool: &str) -> Result<Value, String> {
    let res = m
        .http
        .post(format!("{url}/{tool}"))
        .bearer_auth(token)
        .json(&json!({}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status();
    let bytes = res.bytes().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!(
            "gateway answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

async fn rpc(
    m: &Merchant,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: &Value,
) -> Result<(Option<String>, Value), String> {
    let mut req = m
        .http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let res = req.send().await.map_err(|e| e.to_string())?;
    let status = res.status();
    let session = res
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = res.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "MCP face answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        ));
    }
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).map_err(|e| e.to_string())?
    };
    Ok((session, v))
}

/// `initialize` and `notifications/initialized`: a new session's id.
async fn mcp_open(m: &Merchant, url: &str, token: &str) -> Result<String, String> {
    let (session, _) = rpc(
        m,
        url,
        token,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "pactd-load", "version": "1"}}}),
    )
    .await?;
    let session = session.ok_or("no Mcp-Session-Id from initialize")?;
    rpc(
        m,
        url,
        token,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await?;
    Ok(session)
}

async fn mcp_call(m: &Merchant, url: &str, token: &str, tool: &str) -> Result<Value, String> {
    let session = mcp_open(m, url, token).await?;
    mcp_tool(m, url, token, &session, tool).await
}

async fn mcp_shared_call(
    m: &Merchant,
    url: &str,
    token: &str,
    tool: &str,
) -> Result<Value, String> {
    let session = m
        .shared_session
        .get_or_try_init(|| mcp_open(m, url, token))
        .await?;
    mcp_tool(m, url, token, session, tool).await
}

async fn mcp_tool(
    m: &Merchant,
    url: &str,
    token: &str,
    session: &str,
    tool: &str,
) -> Result<Value, String> {
    let (_, v) = rpc(
        m,
        url,
        token,
        Some(session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": {}}}),
    )
    .await?;
    if v["result"]["isError"] != json!(false) {
        return Err(format!("tools/call failed: {v}"));
    }
    Ok(v["result"]["structuredContent"].clone())
}
