//! `{iface}/turns/{turn}/mcp`: the turn's tool gateway as an MCP server, for
//! a merchant's agent that speaks the Model Context Protocol.
//!
//! Transport: MCP 2025-11-25 "Streamable HTTP" (basic/transports). Each
//! JSON-RPC 2.0 message is one POST; a request is answered with one
//! `application/json` JSON-RPC response, a notification or a response with
//! `202 Accepted` and no body. pactd never sends requests of its own, so it
//! offers no SSE stream: GET is `405 Method Not Allowed`, which the
//! transport allows. Batches (JSON arrays) were removed in 2025-06-18 and
//! are refused.
//!
//! Authentication is the turn token as a bearer token, checked by the same
//! `live_turns::authorize` as the JSON gateway (this turn, this brand, still
//! running, not expired: else 401), on whichever node the request reaches.
//! Sessions (`Mcp-Session-Id`, assigned at `initialize`) are signed for
//! their turn and name the negotiated version, so any node can check them
//! and every session dies with its turn; one ended by `DELETE` is ended on
//! that node and on every node but the turn's own, which keeps serving it
//! until the turn ends (asking the database on each of its requests would
//! cost every call a round trip; the session grants nothing without the
//! turn token). After `initialize` every POST must carry its session id (else
//! 400; an unknown one is 404, as the transport's session rules say) and the
//! negotiated `MCP-Protocol-Version` (else 400). A present `Origin` other
//! than pactd's own is refused with 403 (the transport's DNS-rebinding rule).
//!
//! `{iface}/mcp` is the same server for a merchant's agent that keeps one MCP
//! client for its whole life instead of one per turn (a session per turn
//! costs two extra round trips, `initialize` and `notifications/initialized`,
//! on every turn: issue 27). Its sessions are signed for the brand, not a
//! turn, and expire after [`BRAND_SESSION_LIFETIME`]; every request there
//! still carries the token of the turn it acts in, so a session grants
//! nothing by itself and ending one early is not offered (DELETE is `405`,
//! which the transport allows).
//!
//! `tools/list` lists the brand's tools (not those imported from the
//! merchant's MCP server and never mapped to a scope) with their input schemas and, in
//! `_meta["pactd/grant"]`, whether this turn's grant allows each.
//! `tools/call` runs `gateway::run_call`, the very sequence the JSON route
//! runs: schema, scope and `authorization_details` against the real
//! arguments, then the signed forward, the size cap and the receipt record.
//! A refusal is a tool result with `isError: true` (MCP 2025-11-25 "Tools",
//! error handling: execution and input errors go back to the model); a
//! missing scope also makes the turn's A2A reply the step-up task (PACT §5.4).

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use pact_db::ids::BrandId;
use pact_node::node::NodeInner;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::gateway::{self, CallOutput, CallRefusal};
use super::live_turns::{CallGuard, LiveTurn};
use crate::agent::ToolError;
use crate::agent::tools::scope_rule;
use crate::auth::bearer;
use crate::state::AppState;
use crate::tool_schema as schema;

/// The revisions pactd speaks, newest first; `initialize` answers with the
/// client's when listed here, else with the newest (MCP lifecycle, version
/// negotiation).
pub const PROTOCOL_VERSIONS: [&str; 2] = ["2025-11-25", "2025-06-18"];

/// How long a session of the brand's shared endpoint is accepted. It is a
/// record of the negotiated version, never a credential, so it may outlive
/// many turns; a client whose session expired gets `404` and initializes
/// again, as the transport says.
pub const BRAND_SESSION_LIFETIME: time::Duration = time::Duration::hours(12);

/// The endpoint a request reached, and so the sessions it may use.
#[derive(Clone, Copy)]
enum Endpoint<'a> {
    /// `{iface}/turns/{turn}/mcp`: sessions of that turn only.
    Turn,
    /// `{iface}/mcp`: sessions of the brand, any of its turns.
    Brand(&'a BrandId),
}

static SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
static VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");

// JSON-RPC 2.0 §5.1 error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

fn json_response(status: StatusCode, body: &Value) -> Response {
    crate::error::json_no_store(status, body)
}

fn rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response {
    json_response(
        status,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    )
}

fn rpc_result(id: Value, result: Value) -> Response {
    json_response(
        StatusCode::OK,
        &json!({"jsonrpc": "2.0", "id": id, "result": result}),
    )
}

fn empty(status: StatusCode) -> Response {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = status;
    res
}

fn unauthorized() -> Response {
    let mut res = json_response(
        StatusCode::UNAUTHORIZED,
        &json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": INVALID_REQUEST, "message": "invalid turn token"}}),
    );
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Bearer realm="pact-tools", error="invalid_token""#),
    );
    res
}

/// GET would open a server-to-client SSE stream; pactd has nothing to send
/// on one, and the transport lets a server answer 405.
pub async fn get_not_offered() -> Response {
    let mut res = empty(StatusCode::METHOD_NOT_ALLOWED);
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    res
}

/// The brand's shared endpoint offers neither the SSE stream (GET) nor an
/// explicit end of session (DELETE): its sessions carry no authority and
/// expire on their own, and the transport lets a server answer 405 to both.
pub async fn brand_not_offered() -> Response {
    let mut res = empty(StatusCode::METHOD_NOT_ALLOWED);
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    res
}

/// The transport's DNS-rebinding rule: a request that names an `Origin` must
/// name pactd's own (a browser page elsewhere must not drive a turn).
fn origin_ok(node: &NodeInner, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let ours = url::Url::parse(&node.config.public_url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default();
    origin.to_str().is_ok_and(|o| !ours.is_empty() && o == ours)
}

/// Origin, then the turn token: the turn this request may act in (on this
/// node or another: `live_turns::authorize`). The turn is the path's, or on
/// the brand's shared endpoint (`turn_id` `None`) the one the token was
/// signed for.
async fn admit(
    state: &AppState,
    brand_id: &str,
    turn_id: Option<&str>,
    headers: &HeaderMap,
    now: OffsetDateTime,
) -> Result<CallGuard, Box<Response>> {
    if !origin_ok(state, headers) {
        // `?`: the path's brand is anyone's text here (a newline in it would
        // forge a log line in the text format).
        tracing::info!(brand = ?brand_id, "MCP request refused: foreign Origin");
        return Err(Box::new(rpc_error(
            StatusCode::FORBIDDEN,
            Value::Null,
            INVALID_REQUEST,
            "Origin not allowed",
        )));
    }
    let token = bearer(headers, &header::AUTHORIZATION).ok_or_else(|| Box::new(unauthorized()))?;
    let admitted = match turn_id {
        Some(id) => match Uuid::parse_str(id) {
            Ok(turn_id) => {
                super::live_turns::authorize(state, turn_id, brand_id, token, headers, now).await
            }
            Err(_) => {
                crate::trace_context::start_turn_call_span(None);
                Err(super::live_turns::TokenRefusal::WrongToken)
            }
        },
        None => super::live_turns::authorize_token(state, brand_id, token, headers, now).await,
    };
    admitted.map_err(|why| {
        tracing::info!(brand = ?brand_id, reason = ?why, "MCP request refused: turn token");
        Box::new(unauthorized())
    })
}

fn header_str<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The session a POST after `initialize` belongs to: its id must be one
/// pactd signed for this turn (any node checks that) and not ended on any
/// node, or on the shared endpoint one signed for this brand and not
/// expired; and the protocol version header the one negotiated.
async fn session(
    state: &AppState,
    endpoint: Endpoint<'_>,
    turn: &CallGuard,
    headers: &HeaderMap,
    now: OffsetDateTime,
) -> Result<(), Box<Response>> {
    let Some(id) = header_str(headers, &SESSION_HEADER) else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "Mcp-Session-Id header required (send initialize first)",
        )));
    };
    let unknown = || {
        Box::new(rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            INVALID_REQUEST,
            "unknown or ended session",
        ))
    };
    let version = match endpoint {
        Endpoint::Brand(brand) => {
            state
                .live_turns
                .key()
                .brand_session_version(brand, id, now.unix_timestamp())
        }
        Endpoint::Turn => state.live_turns.key().session_version(turn.id, id),
    };
    let Some(version) = version else {
        return Err(unknown());
    };
    // A turn's session may have been ended (DELETE); a brand's cannot be.
    if matches!(endpoint, Endpoint::Turn) {
        let closed_here = turn
            .closed_sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(id);
        // Another node's turn: a session ended anywhere is ended (the fence).
        let closed_elsewhere = turn.is_remote()
            && pact_db::turn_fences::status(&state.relaxed_db, turn.id, id)
                .await
                .map(|(_, closed)| closed)
                .unwrap_or(true);
        if closed_here || closed_elsewhere {
            return Err(unknown());
        }
    }
    if header_str(headers, &VERSION_HEADER) != Some(version.as_str()) {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "MCP-Protocol-Version header missing or not the negotiated version",
        )));
    }
    Ok(())
}

/// `Accept` must allow a JSON answer (clients list `application/json` and
/// `text/event-stream`; pactd always answers JSON).
fn accepts_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    values.filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').any(|item| {
            let media = item.split(';').next().unwrap_or("").trim();
            media.eq_ignore_ascii_case("application/json")
                || media.eq_ignore_ascii_case("application/*")
                || media == "*/*"
        })
    })
}

fn is_json_content(headers: &HeaderMap) -> bool {
    header_str(headers, &header::CONTENT_TYPE).is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// POST to a turn's own endpoint.
pub async fn post(
    State(state): State<AppState>,
    Path((brand_id, turn_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = state.clock.now();
    let turn = match admit(&state, &brand_id, Some(&turn_id), &headers, now).await {
        Ok(t) => t,
        Err(res) => return *res,
    };
    message(&state, Endpoint::Turn, &turn, &headers, &body, now).await
}

/// POST to the brand's shared endpoint: the turn is the token's.
pub async fn post_brand(
    State(state): State<AppState>,
    Path(brand_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = state.clock.now();
    let turn = match admit(&state, &brand_id, None, &headers, now).await {
        Ok(t) => t,
        Err(res) => return *res,
    };
    message(
        &state,
        // The token's turn is of the path's brand (`admit`).
        Endpoint::Brand(&turn.brand_id),
        &turn,
        &headers,
        &body,
        now,
    )
    .await
}

/// One JSON-RPC message of an admitted request.
async fn message(
    state: &AppState,
    endpoint: Endpoint<'_>,
    turn: &CallGuard,
    headers: &HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Response {
    if !is_json_content(headers) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Value::Null,
            INVALID_REQUEST,
            "Content-Type must be application/json",
        );
    }
    if !accepts_json(headers) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            Value::Null,
            INVALID_REQUEST,
            "Accept must allow application/json",
        );
    }
    let message: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                PARSE_ERROR,
                "Parse error",
            );
        }
    };
    let Value::Object(message) = message else {
        // Arrays too: JSON-RPC batching is not part of MCP since 2025-06-18.
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "one JSON-RPC message object per POST",
        );
    };
    let is_jsonrpc = message.get("jsonrpc").and_then(Value::as_str) == Some("2.0");
    // A response (JSON-RPC 2.0 §5: `result` or `error`, no `method`, and an
    // id, null for an error about a request it could not read): pactd sends
    // no requests, so there is nothing to match it with. Accepted with 202
    // once the session checks pass, as a notification is (MCP transports:
    // a POSTed response or notification gets 202 and no body).
    if is_jsonrpc
        && !message.contains_key("method")
        && message.contains_key("id")
        && (message.contains_key("result") != message.contains_key("error"))
    {
        return match session(state, endpoint, turn, headers, now).await {
            Ok(()) => empty(StatusCode::ACCEPTED),
            Err(res) => *res,
        };
    }
    let id = message.get("id").cloned();
    // MCP: a request id is a string or an integer, never null.
    let id_ok = match &id {
        None => true,
        Some(Value::String(_)) => true,
        Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
        Some(_) => false,
    };
    if !is_jsonrpc || !id_ok {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "Invalid Request",
        );
    }
    let method = message.get("method").and_then(Value::as_str);
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let (method, id) = match (method, id) {
        (Some("initialize"), Some(id)) => {
            return initialize(state, endpoint, turn, id, &params, now);
        }
        (Some(m), Some(id)) => (m, id),
        // A notification (no id): accepted with 202 once the session checks
        // pass (responses were answered above).
        (Some(_), None) => {
            return match session(state, endpoint, turn, headers, now).await {
                Ok(()) => empty(StatusCode::ACCEPTED),
                Err(res) => *res,
            };
        }
        _ => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request",
            );
        }
    };
    if let Err(res) = session(state, endpoint, turn, headers, now).await {
        return *res;
    }
    match method {
        "ping" => rpc_result(id, json!({})),
        "tools/list" => rpc_result(id, tools_list(state, turn)),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return rpc_error(StatusCode::OK, id, INVALID_PARAMS, "params.name required");
            };
            let args = params
                .get("arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let request_id = gateway::request_id(headers);
            match gateway::run_call(state, turn, name, args, &request_id, now).await {
                Ok(CallOutput::Json(out)) => rpc_result(id, tool_result(out)),
                // A tool on the merchant's MCP server: its own result, as it sent it.
                Ok(CallOutput::Mcp(result)) => rpc_result(id, result),
                Err(CallRefusal::UnknownTool) => rpc_error(
                    StatusCode::OK,
                    id,
                    INVALID_PARAMS,
                    &format!("Unknown tool: {name}"),
                ),
                Err(refusal) => rpc_result(id, tool_error(&refusal, name)),
            }
        }
        _ => rpc_error(StatusCode::OK, id, METHOD_NOT_FOUND, "Method not found"),
    }
}

/// Ends one session of the turn (the transport's explicit termination), on
/// every node.
pub async fn delete(
    State(state): State<AppState>,
    Path((brand_id, turn_id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let now = state.clock.now();
    let turn = match admit(&state, &brand_id, Some(&turn_id), &headers, now).await {
        Ok(t) => t,
        Err(res) => return *res,
    };
    if header_str(&headers, &SESSION_HEADER).is_none() {
        return empty(StatusCode::BAD_REQUEST);
    }
    if let Err(res) = session(
        &state,
        Endpoint::Turn,
        &turn,
        &headers_without_version(&headers),
        now,
    )
    .await
    {
        return if res.status() == StatusCode::NOT_FOUND {
            empty(StatusCode::NOT_FOUND)
        } else {
            *res
        };
    }
    let Some(id) = header_str(&headers, &SESSION_HEADER) else {
        return empty(StatusCode::BAD_REQUEST);
    };
    turn.closed_sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(id.to_owned());
    if let Err(e) =
        pact_db::turn_fences::close_session(&state.relaxed_db, turn.id, id, turn.expires_at).await
    {
        tracing::warn!(error = %e, "could not end an MCP session on every node");
    }
    empty(StatusCode::NO_CONTENT)
}

/// A DELETE need not carry the protocol version: the session check, without it.
fn headers_without_version(headers: &HeaderMap) -> HeaderMap {
    let mut h = headers.clone();
    if h.get(&VERSION_HEADER).is_none()
        && let Some(id) = header_str(headers, &SESSION_HEADER)
        && let Some((head, _)) = id.rsplit_once('.')
        && let Some((_, version)) = head.split_once('.')
        && let Ok(v) = HeaderValue::from_str(version)
    {
        h.insert(VERSION_HEADER.clone(), v);
    }
    h
}

fn initialize(
    state: &AppState,
    endpoint: Endpoint<'_>,
    turn: &LiveTurn,
    id: Value,
    params: &Value,
    now: OffsetDateTime,
) -> Response {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0])
        .to_owned();
    // Signed, so any node can check it: a session needs no memory anywhere.
    let key = state.live_turns.key();
    let session_id = match endpoint {
        Endpoint::Turn => key.session_id(turn.id, &version),
        Endpoint::Brand(brand) => key.brand_session_id(
            brand,
            &version,
            (now + BRAND_SESSION_LIFETIME).unix_timestamp(),
        ),
    };
    let Some(session_id) = session_id else {
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            id,
            -32603,
            "Internal error",
        );
    };
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {
            "name": "pactd",
            "title": format!("{} tools (pactd)", turn.brand_id),
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": format!("{} A call the person has not allowed is refused with \
            isError; a missing scope makes your reply a request for the person's approval, so \
            tell them you need their permission.", match endpoint {
                Endpoint::Turn => "The tools of this brand for one turn.",
                Endpoint::Brand(_) => "The tools of this brand; each request acts in the turn \
                    whose token it carries.",
            }),
    });
    let mut res = rpc_result(id, result);
    if let Ok(v) = HeaderValue::from_str(&session_id) {
        res.headers_mut().insert(SESSION_HEADER.clone(), v);
    }
    res
}

/// The brand's tools, each with whether this turn's grant allows it.
fn tools_list(node: &NodeInner, turn: &LiveTurn) -> Value {
    let delegation = turn
        .delegation
        .as_ref()
        .filter(|d| !node.revocations.is_revoked(d.grant_id));
    // A tool imported without a scope is callable by nobody: not listed (deny by default).
    let tools: Vec<Value> = turn
        .tools
        .iter()
        .filter(|tool| tool.mapped)
        .map(|tool| {
            let (allowed, reason) =
                match scope_rule(&turn.offered, delegation, tool.scope.as_deref()) {
                    Ok(None) => (true, "public"),
                    Ok(Some(_)) => (true, "granted"),
                    Err(ToolError::MissingScope(_)) => (false, "missing_scope"),
                    Err(_) => (false, "unavailable"),
                };
            let mut entry = Map::new();
            entry.insert("name".into(), json!(tool.name));
            if !tool.description.is_empty() {
                entry.insert("description".into(), json!(tool.description));
            }
            entry.insert(
                "inputSchema".into(),
                schema::or_any_object(tool.input_schema.as_ref()),
            );
            entry.insert(
                "_meta".into(),
                json!({"pactd/grant": {
                    "allowed": allowed,
                    "reason": reason,
                    "scope": tool.scope,
                    // Held scopes may still be limited to particular arguments (PACT §5.7).
                    "limitedByAuthorizationDetails": allowed
                        && delegation.is_some_and(|d| !d.terms.is_empty())
                        && tool.scope.is_some(),
                }}),
            );
            Value::Object(entry)
        })
        .collect();
    json!({"tools": tools})
}

/// A tool's JSON answer as an MCP result: the JSON as text (what every client
/// shows the model) and, for an object, as `structuredContent` too.
fn tool_result(out: Value) -> Value {
    let text = out.to_string();
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if out.is_object() {
        result["structuredContent"] = out;
    }
    result
}

/// A refusal as an MCP tool error (MCP "Tools", error handling: it goes
/// back to the model), with the JSON route's body as `structuredContent`
/// and its meaning in words for the model to pass on.
fn tool_error(refusal: &CallRefusal, tool: &str) -> Value {
    let detail = refusal.to_json(tool);
    let text = match refusal {
        CallRefusal::Gate(ToolError::MissingScope(scope)) => format!(
            "missing scope {scope}: the person has not allowed this yet; your reply to \
             this turn becomes a request for their approval"
        ),
        CallRefusal::Gate(ToolError::Beyond(_)) => format!(
            "beyond what the person allowed ({}); nothing was done. Your reply to this turn \
             becomes a request for their approval of exactly this call: tell them, and call \
             again with the same arguments once they have approved",
            detail["error_description"].as_str().unwrap_or("a limit")
        ),
        CallRefusal::Gate(ToolError::NotPermitted(why)) => {
            format!("not permitted: the person's approval does not cover this call ({why})")
        }
        CallRefusal::Gate(ToolError::Unenforceable(_)) => {
            "not permitted: the person's approval cannot be checked for this call".to_owned()
        }
        // Said as what it is, so the model neither retries a tool that is not
        // there nor tells the person a tool is missing while it is only down.
        CallRefusal::Gate(ToolError::DatabaseUnavailable) => {
            "temporarily unavailable; nothing was done; try again in a moment".to_owned()
        }
        CallRefusal::Gate(ToolError::Failed(_)) => {
            "the tool failed at pactd before it was sent; nothing was done".to_owned()
        }
        CallRefusal::Gate(ToolError::BadArguments(why)) => format!("invalid arguments: {why}"),
        CallRefusal::Gate(ToolError::Unavailable) => "not available at this brand".to_owned(),
        CallRefusal::InvalidArguments(why) => format!("invalid arguments: {why}"),
        CallRefusal::ToolError {
            status,
            code,
            message,
        } => format!(
            "the business refused ({status}{}): {}",
            code.as_deref()
                .map(|c| format!(", {c}"))
                .unwrap_or_default(),
            message.as_deref().unwrap_or("no reason given")
        ),
        CallRefusal::Failed { timed_out: true } => {
            "the tool did not answer in time; it may or may not have acted".to_owned()
        }
        CallRefusal::Failed { timed_out: false } | CallRefusal::UnknownTool => {
            "the tool failed".to_owned()
        }
        CallRefusal::TurnEnded => "the turn has ended; nothing was done".to_owned(),
    };
    json!({"content": [{"type": "text", "text": text}], "structuredContent": detail, "isError": true})
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn text_of(refusal: CallRefusal) -> String {
        let answer = tool_error(&refusal, "pay");
        assert_eq!(answer["isError"], true);
        answer["content"][0]["text"].as_str().unwrap().to_owned()
    }

    /// A refusal by the gate is told to the model as what it is: an outage
    /// is worth a retry, a tool that is not there is not (before, every one
    /// of these was "not available at this brand").
    #[test]
    fn a_gate_refusal_tells_the_model_what_it_is() {
        let down = text_of(CallRefusal::Gate(ToolError::DatabaseUnavailable));
        assert!(
            down.contains("temporarily unavailable") && down.contains("try again"),
            "{down}"
        );
        let failed = text_of(CallRefusal::Gate(ToolError::Failed("x".to_owned())));
        assert!(failed.contains("nothing was done"), "{failed}");
        assert!(!failed.contains("not available"), "{failed}");
        let bad = text_of(CallRefusal::Gate(ToolError::BadArguments(
            "amount".to_owned(),
        )));
        assert_eq!(bad, "invalid arguments: amount");
        let absent = text_of(CallRefusal::Gate(ToolError::Unavailable));
        assert_eq!(absent, "not available at this brand");
    }
}
