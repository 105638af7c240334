//! pactd as an MCP client of the merchant's own MCP server (docs/mcp.md,
//! "Connect your MCP server"): `tools/list` when a brand's tools are
//! imported, `tools/call` for each allowed call of a turn.
//!
//! Transport: MCP "Streamable HTTP" (2025-11-25 basic/transports; 2025-06-18
//! and 2025-03-26 servers are spoken to the same way). One session per
//! forwarded call: `initialize` → `notifications/initialized` → the request,
//! then `DELETE` of the session. Simple and stateless on pactd's side, and
//! a session can never outlive the turn that opened it. A response may come
//! as one `application/json` body or as a `text/event-stream` whose events
//! carry JSON-RPC messages; the stream is read only until the response to
//! our request, and every byte read counts against the size cap.
//!
//! Every request carries the `pact-context` header (who the call is for) and
//! the three Standard Webhooks headers signing it, with the brand's webhook
//! secret(s) (`signing.rs`). The signed content is
//! `{webhook-id}.{webhook-timestamp}.{pact-context}`: the header's value is
//! the Standard Webhooks payload. The context names the SHA-256 of the
//! request body (`bodySha256`), which binds the JSON-RPC message (tool name,
//! arguments) to the signature.
//!
//! The same outbound rules as every call to the merchant (`http.rs`): the
//! SSRF check on the URL text and the guarded resolver on every connection,
//! no redirects, no proxy, one deadline for the whole exchange.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Client;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tracing::Instrument;
use uuid::Uuid;

use super::http::{CallError, transport};
use super::signing::{self, WebhookSecret};

/// The revision pactd asks for (MCP lifecycle, version negotiation).
pub const CLIENT_VERSION: &str = "2025-11-25";
/// The revisions pactd accepts in a server's `initialize` answer; any other
/// ends the exchange (the lifecycle: a client that does not support the
/// server's revision disconnects).
pub const ACCEPTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The header that says who a request is for; its value is what the
/// Standard Webhooks signature signs.
pub const CONTEXT_HEADER: &str = "pact-context";
/// `tools/list` pages followed at import, and tools accepted in all.
const MAX_PAGES: usize = 20;
pub const MAX_TOOLS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Call(#[from] CallError),
    #[error("not a usable MCP answer: {0}")]
    Protocol(String),
    #[error("the MCP server answered JSON-RPC error {code}: {message}")]
    Rpc { code: i64, message: String },
    #[error("signing failed")]
    Signing,
}

impl McpError {
    fn protocol(why: impl Into<String>) -> Self {
        Self::Protocol(why.into())
    }
}

/// Signs each request of an exchange: the `pact-context` header from
/// `context` plus the body's hash, signed the Standard Webhooks way.
pub struct Signer<'a> {
    secrets: &'a [WebhookSecret],
    context: Map<String, Value>,
    timestamp: i64,
}

/// The headers of one signed request.
struct Signed {
    context: String,
    id: String,
    timestamp: i64,
    signature: String,
}

impl<'a> Signer<'a> {
    pub fn new(secrets: &'a [WebhookSecret], context: Map<String, Value>, timestamp: i64) -> Self {
        Self {
            secrets,
            context,
            timestamp,
        }
    }

    /// Signs one request to `url`: the context names the endpoint it is
    /// sent to (`url`) and the body's hash, so a signed request captured at
    /// one server cannot be replayed to another (issue 28, finding 5).
    fn sign(&self, url: &url::Url, body: &[u8]) -> Result<Signed, McpError> {
        let mut ctx = self.context.clone();
        ctx.insert("url".to_owned(), json!(url.as_str()));
        ctx.insert(
            "bodySha256".to_owned(),
            json!(URL_SAFE_NO_PAD.encode(Sha256::digest(body))),
        );
        let bytes = serde_json::to_vec(&Value::Object(ctx)).map_err(|_| McpError::Signing)?;
        let context = URL_SAFE_NO_PAD.encode(bytes);
        let id = format!("msg_{}", Uuid::new_v4().simple());
        let signed = signing::sign_all(self.secrets, &id, self.timestamp, context.as_bytes())
            .map_err(|_| McpError::Signing)?;
        Ok(Signed {
            context,
            id,
            timestamp: self.timestamp,
            signature: signed.signature,
        })
    }
}

/// Where and how: the server, the client, the size cap per response.
struct Session<'a> {
    http: &'a Client,
    url: url::Url,
    signer: &'a Signer<'a>,
    session_id: Option<String>,
    version: Option<String>,
    next_id: i64,
    max: usize,
}

impl Session<'_> {
    /// Sends one JSON-RPC message; for a request (`notify` false), returns
    /// the `result` of its response.
    async fn send(
        &mut self,
        method: &str,
        params: Value,
        notify: bool,
    ) -> Result<Option<Value>, McpError> {
        let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let id = if notify {
            None
        } else {
            self.next_id += 1;
            message["id"] = json!(self.next_id);
            Some(self.next_id)
        };
        let body = serde_json::to_vec(&message).map_err(|_| McpError::protocol("encoding"))?;
        let signed = self.signer.sign(&self.url, &body)?;
        let signature = HeaderValue::from_str(&signed.signature).map_err(|_| McpError::Signing)?;
        let mut req = self
            .http
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            // The transport: the client lists both; the server picks.
            .header(ACCEPT, "application/json, text/event-stream")
            .header("webhook-id", signed.id.as_str())
            .header("webhook-timestamp", signed.timestamp.to_string())
            .header("webhook-signature", signature)
            .header(CONTEXT_HEADER, signed.context.as_str())
            .headers(crate::trace_context::outbound_headers());
        if let Some(s) = &self.session_id {
            req = req.header("mcp-session-id", s.as_str());
        }
        if let Some(v) = &self.version {
            req = req.header("mcp-protocol-version", v.as_str());
        }
        let mut res = req.body(body).send().await.map_err(transport)?;
        let status = res.status();
        let Some(id) = id else {
            // A notification is acknowledged with 202 and no body.
            return if status.is_success() {
                Ok(None)
            } else {
                Err(CallError::Status(status.as_u16()).into())
            };
        };
        if !status.is_success() {
            return Err(CallError::Status(status.as_u16()).into());
        }
        if method == "initialize"
            && let Some(s) = res.headers().get("mcp-session-id")
        {
            // The transport: visible ASCII only; anything else is not a session id.
            let s = s
                .to_str()
                .ok()
                .filter(|s| {
                    !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| (0x21..=0x7e).contains(&b))
                })
                .ok_or_else(|| McpError::protocol("invalid Mcp-Session-Id"))?;
            self.session_id = Some(s.to_owned());
        }
        if res.content_length().is_some_and(|l| l > self.max as u64) {
            return Err(CallError::TooLarge(self.max).into());
        }
        let media = res
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let response = match media.as_str() {
            "application/json" => {
                let bytes = read_capped(&mut res, self.max).await?;
                let v: Value = serde_json::from_slice(&bytes)
                    .map_err(|_| McpError::protocol("the response is not JSON"))?;
                if !is_response_to(&v, id) {
                    return Err(McpError::protocol(
                        "the response does not answer the request",
                    ));
                }
                v
            }
            "text/event-stream" => read_sse_response(&mut res, id, self.max).await?,
            _ => return Err(McpError::protocol("unexpected Content-Type")),
        };
        if let Some(e) = response.get("error") {
            return Err(McpError::Rpc {
                code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: e
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect(),
            });
        }
        response
            .get("result")
            .cloned()
            .map(Some)
            .ok_or_else(|| McpError::protocol("a response without result"))
    }

    /// `initialize`, the version check, `notifications/initialized`.
    async fn open(&mut self) -> Result<(), McpError> {
        let result = self
            .send(
                "initialize",
                json!({
                    "protocolVersion": CLIENT_VERSION,
                    // pactd offers the server nothing to call back (no sampling, roots, elicitation).
                    "capabilities": {},
                    "clientInfo": {"name": "pactd", "version": env!("CARGO_PKG_VERSION")},
                }),
                false,
            )
            .await?
            .unwrap_or(Value::Null);
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| ACCEPTED_VERSIONS.contains(v))
            .ok_or_else(|| McpError::protocol("the server speaks no MCP revision pactd speaks"))?;
        if result.pointer("/capabilities/tools").is_none() {
            return Err(McpError::protocol("the server offers no tools"));
        }
        self.version = Some(version.to_owned());
        self.send("notifications/initialized", json!({}), true)
            .await?;
        Ok(())
    }

    /// Ends the session in the background (best effort): the call's answer
    /// does not wait for it, and a server that ignores it loses nothing.
    fn close(self) {
        let (Some(session), Some(version)) = (self.session_id, self.version) else {
            return;
        };
        let Ok(signed) = self.signer.sign(&self.url, b"") else {
            return;
        };
        let req = self
            .http
            .delete(self.url)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", version)
            .header("webhook-id", signed.id)
            .header("webhook-timestamp", signed.timestamp.to_string())
            .header("webhook-signature", signed.signature)
            .header(CONTEXT_HEADER, signed.context)
            .timeout(Duration::from_secs(5));
        tokio::spawn(async move {
            let _ = req.send().await;
        });
    }
}

fn is_response_to(v: &Value, id: i64) -> bool {
    v.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && v.get("id").and_then(Value::as_i64) == Some(id)
        && (v.get("result").is_some() || v.get("error").is_some())
}

async fn read_capped(res: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, McpError> {
    let mut out = Vec::new();
    while let Some(chunk) = res.chunk().await.map_err(transport)? {
        if out.len() + chunk.len() > max {
            return Err(CallError::TooLarge(max).into());
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Server-sent events (HTML Living Standard, "Server-sent events": `data:`
/// fields joined by newlines, an empty line ends an event), fed chunk by
/// chunk: each complete event's data. Lines end in LF or CRLF; a lone CR,
/// which the format also allows, is not split on (an answer in that form
/// fails as "ended without the response", never as a wrong one).
#[derive(Debug, Default)]
struct SseEvents {
    pending: Vec<u8>,
    data: String,
}

impl SseEvents {
    /// Feeds a chunk; the data of every event it completes.
    fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    events.push(std::mem::take(&mut self.data));
                }
            } else if let Some(value) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
            // `event:`, `id:`, `retry:` and `:` comments carry nothing pactd needs.
        }
        events
    }
}

/// Reads the event stream until an event carries the response to request
/// `id`; other messages (progress, logging) are skipped, and every byte read
/// counts against `max`.
async fn read_sse_response(
    res: &mut reqwest::Response,
    id: i64,
    max: usize,
) -> Result<Value, McpError> {
    let mut read = 0usize;
    let mut events = SseEvents::default();
    while let Some(chunk) = res.chunk().await.map_err(transport)? {
        read += chunk.len();
        if read > max {
            return Err(CallError::TooLarge(max).into());
        }
        for data in events.feed(&chunk) {
            if let Ok(v) = serde_json::from_str::<Value>(&data)
                && is_response_to(&v, id)
            {
                return Ok(v);
            }
        }
    }
    Err(McpError::protocol(
        "the event stream ended without the response",
    ))
}

/// A merchant's MCP server and the limits of one exchange with it.
#[derive(Clone, Copy, Debug)]
pub struct Server<'a> {
    /// pactd's outbound client (`http::build_client`: the guarded resolver).
    pub http: &'a Client,
    pub url: &'a str,
    pub allow_loopback: bool,
    /// The whole exchange, `initialize` to the answer.
    pub timeout: Duration,
    /// Bytes read per response.
    pub max: usize,
}

impl<'a> Server<'a> {
    /// The checked URL and a session for it.
    fn session(&self, signer: &'a Signer<'a>) -> Result<Session<'a>, McpError> {
        let url = pact_jose::check_jwks_uri(self.url, self.allow_loopback)
            .map_err(|e| CallError::Refused(e.to_string()))?;
        Ok(Session {
            http: self.http,
            url,
            signer,
            session_id: None,
            version: None,
            next_id: 0,
            max: self.max,
        })
    }
}

/// The server's tools, every page of `tools/list` (at most [`MAX_TOOLS`]).
pub async fn list_tools(server: Server<'_>, signer: &Signer<'_>) -> Result<Vec<Value>, McpError> {
    let mut s = server.session(signer)?;
    let exchange = async {
        s.open().await?;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = s
                .send("tools/list", params, false)
                .await?
                .unwrap_or(Value::Null);
            let items = page
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| McpError::protocol("tools/list without a tools array"))?;
            tools.extend(items.iter().cloned());
            if tools.len() > MAX_TOOLS {
                return Err(McpError::protocol(format!(
                    "the server lists more than {MAX_TOOLS} tools"
                )));
            }
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        Err(McpError::protocol("tools/list pages do not end"))
    };
    let out = tokio::time::timeout(server.timeout, exchange)
        .await
        .map_err(|_| CallError::Timeout)?;
    s.close();
    out
}

/// Calls `name` at the server; the `CallToolResult` as pactd hands it on:
/// `content`, `structuredContent` when it is an object, and `isError`.
pub async fn call_tool(
    server: Server<'_>,
    signer: &Signer<'_>,
    name: &str,
    args: &Value,
) -> Result<Value, McpError> {
    let mut s = server.session(signer)?;
    // The host only, as for URL tools: a merchant may put a credential in its URL's path or query.
    let span = tracing::debug_span!(
        "merchant.mcp_call",
        otel.kind = "client",
        server.address = s.url.host_str().unwrap_or(""),
    );
    let exchange = async {
        s.open().await?;
        s.send(
            "tools/call",
            json!({"name": name, "arguments": args}),
            false,
        )
        .await
    }
    .instrument(span);
    let out = tokio::time::timeout(server.timeout, exchange)
        .await
        .map_err(|_| CallError::Timeout);
    s.close();
    let result = out??.unwrap_or(Value::Null);
    let Some(content) = result.get("content").and_then(Value::as_array) else {
        return Err(McpError::protocol("tools/call result without content"));
    };
    let mut out = json!({
        "content": content,
        "isError": result.get("isError").and_then(Value::as_bool).unwrap_or(false),
    });
    if let Some(structured) = result.get("structuredContent").filter(|v| v.is_object()) {
        out["structuredContent"] = structured.clone();
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_context_header_is_what_is_signed_and_names_the_body_hash() {
        let secret = WebhookSecret::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec());
        let secrets = [secret.clone()];
        let mut ctx = Map::new();
        ctx.insert("brand".into(), json!("shop"));
        let signer = Signer::new(&secrets, ctx, 1_700_000_000);
        let url = url::Url::parse("https://shop.example/mcp").unwrap();
        let s = signer.sign(&url, b"{\"a\":1}").unwrap();
        assert_eq!(
            s.signature,
            secret
                .sign(&s.id, 1_700_000_000, s.context.as_bytes())
                .unwrap()
        );
        let decoded: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&s.context).unwrap()).unwrap();
        assert_eq!(decoded["brand"], "shop");
        // The destination is signed too: the same call for another server
        // has another context (issue 28, finding 5).
        assert_eq!(decoded["url"], "https://shop.example/mcp");
        let elsewhere = url::Url::parse("https://other.example/mcp").unwrap();
        assert_ne!(
            signer.sign(&elsewhere, b"{\"a\":1}").unwrap().context,
            s.context
        );
        assert_eq!(
            decoded["bodySha256"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(b"{\"a\":1}"))
        );
        // Another body, another context: the signature covers the body through its hash.
        assert_ne!(signer.sign(&url, b"{\"a\":2}").unwrap().context, s.context);
    }

    #[test]
    fn events_are_split_across_chunks_and_line_endings() {
        let mut sse = SseEvents::default();
        assert!(sse.feed(b"event: message\r\nda").is_empty());
        assert!(sse.feed(b"ta: {\"a\":\r\ndata:1}\r\n").is_empty());
        assert_eq!(sse.feed(b"\r\n: comment\n\ndata: x\n"), ["{\"a\":\n1}"]);
        assert_eq!(sse.feed(b"\n"), ["x"]);
    }

    #[test]
    fn responses_match_only_their_request() {
        assert!(is_response_to(
            &json!({"jsonrpc": "2.0", "id": 2, "result": {}}),
            2
        ));
        assert!(!is_response_to(
            &json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            2
        ));
        assert!(!is_response_to(
            &json!({"jsonrpc": "2.0", "method": "x"}),
            2
        ));
        assert!(!is_response_to(&json!({"id": 2, "result": {}}), 2));
    }
}
