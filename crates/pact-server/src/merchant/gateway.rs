//! `POST {iface}/turns/{turn}/tools/{tool}`: the merchant's agent acting
//! through pactd during a turn.
//!
//! In order, before anything reaches the merchant's API: the turn token
//! (this turn, this brand, not ended, not expired: else 401); the tool
//! exists (404); the scope rule and `authorization_details` of the turn's
//! delegation, by the same function the built-in tools use
//! (`agent::tools::check_call`; 403 `missing_scope`, which also turns the
//! turn's A2A reply into the step-up task, or 403 `not_permitted`). Then the
//! call is forwarded, signed like the turn, and `{tool, argsHash}` recorded
//! for the turn's receipt (PACT §5.6).
//!
//! [`run_call`] is that whole sequence after the token check; the JSON route
//! here and the MCP endpoint (`merchant::mcp`) both call it, so the two
//! interfaces cannot drift apart.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use pact_db::merchant::BrandTool;

use super::live_turns::LiveTurn;
use super::{MAX_TOOL_RESPONSE_BYTES, http, mcp_client, schema, signing};
use crate::agent::tools::check_call;
use crate::agent::{Delegation, ToolError};
use crate::auth::bearer;
use crate::state::AppState;

fn reply(status: StatusCode, body: &Value) -> Response {
    let mut res = crate::oauth::oauth_json(status, body);
    if status == StatusCode::UNAUTHORIZED {
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(r#"Bearer realm="pact-tools", error="invalid_token""#),
        );
    }
    res
}

fn unauthorized() -> Response {
    reply(StatusCode::UNAUTHORIZED, &json!({"error": "invalid_token"}))
}

pub async fn call_tool(
    State(state): State<AppState>,
    Path((brand_id, turn_id, tool_name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = state.clock.now();
    let Some(token) = bearer(&headers, &header::AUTHORIZATION) else {
        return unauthorized();
    };
    let Ok(turn_id) = Uuid::parse_str(&turn_id) else {
        return unauthorized();
    };
    let turn = match state.live_turns.authorize(turn_id, &brand_id, token, now) {
        Ok(t) => t,
        Err(why) => {
            tracing::info!(brand = %brand_id, reason = ?why, "tool call refused: turn token");
            return unauthorized();
        }
    };
    let args: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => Value::Null,
    };
    match run_call(&state, &turn, &tool_name, args, &request_id(&headers), now).await {
        Ok(out) => reply(StatusCode::OK, &out.into_json()),
        Err(CallRefusal::UnknownTool) => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": "unknown_tool", "tool": tool_name}),
        ),
        Err(CallRefusal::InvalidArguments(why)) => reply(
            StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_arguments", "error_description": why}),
        ),
        Err(CallRefusal::Gate(e)) => {
            let body = match e {
                ToolError::MissingScope(scope) => json!({"error": "missing_scope", "scope": scope}),
                ToolError::NotPermitted => json!({"error": "not_permitted"}),
                _ => json!({"error": "not_available"}),
            };
            reply(StatusCode::FORBIDDEN, &body)
        }
        Err(CallRefusal::Failed) => {
            reply(StatusCode::BAD_GATEWAY, &json!({"error": "tool_failed"}))
        }
    }
}

/// The request id to hand on to the merchant (`x-request-id`, set by the layer stack).
pub fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned)
}

/// Why a tool call of a turn did not run.
#[derive(Debug)]
pub enum CallRefusal {
    /// The brand has no tool of that name.
    UnknownTool,
    /// Not a JSON object, or outside the tool's input schema (the text says where).
    InvalidArguments(String),
    /// The gate's refusal: missing scope (the step-up), not permitted by the
    /// `authorization_details`, or a scope the brand does not offer.
    Gate(ToolError),
    /// The merchant's tool failed, timed out, answered too much or not JSON;
    /// logged with the cause, not recorded in the receipt.
    Failed,
}

/// One tool call of a turn whose token has been checked: the tool exists,
/// the arguments are an object within the tool's input schema, the gate's
/// rule holds (scope and `authorization_details` against these arguments,
/// PACT §5.5, §5.7; a missing scope joins the turn's step-up set); then the
/// call is forwarded signed, its response capped, and recorded for the
/// receipt (PACT §5.6). Nothing reaches the merchant unless every check passed.
pub async fn run_call(
    state: &AppState,
    turn: &LiveTurn,
    tool_name: &str,
    args: Value,
    request_id: &str,
    now: OffsetDateTime,
) -> Result<CallOutput, CallRefusal> {
    let brand_id = turn.brand_id.as_str();
    let Some(tool) = turn.tools.iter().find(|t| t.name == tool_name) else {
        return Err(CallRefusal::UnknownTool);
    };
    // Imported from an MCP server and never given a scope: nobody's call
    // runs until an admin maps it (deny by default).
    if !tool.mapped {
        tracing::info!(brand = %brand_id, tool = %tool.name, "tool call refused: tool not mapped to a scope");
        return Err(CallRefusal::Gate(ToolError::Unavailable));
    }
    // Schema first: the gate's details rule then reads arguments of the declared shape.
    if let Err(why) = schema::validate(tool.input_schema.as_ref(), &args) {
        tracing::info!(brand = %brand_id, tool = %tool.name, "tool call refused: arguments outside the schema");
        return Err(CallRefusal::InvalidArguments(why));
    }
    // A revocation heard of during the turn ends the delegation's authority now.
    let delegation = turn
        .delegation
        .as_ref()
        .filter(|d| !state.revocations.is_revoked(d.grant_id));
    if let Err(e) = check_call(
        &turn.offered,
        delegation,
        &turn.types,
        &tool.name,
        tool.scope.as_deref(),
        &args,
    ) {
        turn.with_record(|r| r.refused(&e));
        tracing::info!(brand = %brand_id, tool = %tool.name, refusal = %e, "tool call refused");
        return Err(CallRefusal::Gate(e));
    }

    let failed = |cause: &dyn std::fmt::Display| {
        tracing::warn!(brand = %brand_id, tool = %tool.name, cause = %cause, "merchant tool call failed");
        CallRefusal::Failed
    };
    let secrets = super::signing_secrets(state, brand_id, now)
        .await
        .map_err(|e| failed(&e))?;
    let out = if tool.is_mcp() {
        CallOutput::Mcp(
            forward_mcp(
                state, turn, tool, delegation, &args, request_id, &secrets, now,
            )
            .await
            .map_err(|e| failed(&e))?,
        )
    } else {
        CallOutput::Json(
            forward_url(
                state, turn, tool, delegation, &args, request_id, &secrets, now,
            )
            .await
            .map_err(|e| failed(&e))?,
        )
    };
    // Recorded once the merchant answered (a tool error of an MCP server
    // included: the call reached it), never for a failure (PACT §5.6).
    turn.with_record(|r| r.ran(&tool.name, tool.scope.as_deref(), &args));
    Ok(out)
}

/// A tool's answer: the JSON of a URL tool, or the `CallToolResult` of a
/// tool on the merchant's MCP server (`content`, `structuredContent`, `isError`).
#[derive(Debug)]
pub enum CallOutput {
    Json(Value),
    Mcp(Value),
}

impl CallOutput {
    /// What the JSON route answers: a URL tool's JSON; for an MCP tool its
    /// `structuredContent` when it has one, else the whole result.
    pub fn into_json(self) -> Value {
        match self {
            Self::Json(v) => v,
            Self::Mcp(mut r) => match r.get_mut("structuredContent").map(Value::take) {
                Some(s) if s.is_object() => s,
                _ => r,
            },
        }
    }
}

/// The signed `pact.tool_call` POSTed to a URL tool; its JSON answer.
#[allow(clippy::too_many_arguments)]
async fn forward_url(
    state: &AppState,
    turn: &LiveTurn,
    tool: &BrandTool,
    delegation: Option<&Delegation>,
    args: &Value,
    request_id: &str,
    secrets: &[signing::WebhookSecret],
    now: OffsetDateTime,
) -> Result<Value, String> {
    let forward = json!({
        "type": "pact.tool_call",
        "requestId": request_id,
        "brand": turn.brand_id,
        "tool": tool.name,
        // The destination, under the signature: a call captured at one tool
        // cannot be replayed to another endpoint (issue 28, finding 5).
        "url": tool.url,
        "args": args,
        "userId": delegation.map(|d| d.user_sub.as_str()),
        "grantId": delegation.map(|d| d.grant_id),
        "contextId": turn.context_id,
        "messageId": turn.message_id,
    });
    let bytes = serde_json::to_vec(&forward).map_err(|_| "encoding".to_owned())?;
    let signed = signing::sign_all(
        secrets,
        &format!("msg_{}", Uuid::new_v4().simple()),
        now.unix_timestamp(),
        &bytes,
    )
    .map_err(|e| e.to_string())?;
    let (status, out) = http::post_signed(
        &state.outbound,
        &tool.url,
        state.config.jwks.allow_loopback,
        bytes,
        &signed,
        turn.tool_timeout,
        MAX_TOOL_RESPONSE_BYTES,
    )
    .await
    .map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(http::CallError::Status(status.as_u16()).to_string());
    }
    serde_json::from_slice::<Value>(&out).map_err(|_| "the tool's response is not JSON".to_owned())
}

/// The call at the merchant's MCP server (`mcp_client`), with who it is for
/// in the signed `pact-context` header (docs/mcp.md lists every member).
#[allow(clippy::too_many_arguments)]
async fn forward_mcp(
    state: &AppState,
    turn: &LiveTurn,
    tool: &BrandTool,
    delegation: Option<&Delegation>,
    args: &Value,
    request_id: &str,
    secrets: &[signing::WebhookSecret],
    now: OffsetDateTime,
) -> Result<Value, String> {
    let remote = tool
        .remote_name
        .as_deref()
        .ok_or_else(|| "an MCP tool without its remote name".to_owned())?;
    let context = json!({
        "type": "pact.mcp_call",
        "requestId": request_id,
        "brand": turn.brand_id,
        "turnId": turn.id,
        "tool": tool.name,
        "remoteTool": remote,
        "scope": tool.scope,
        "paIssuer": turn.pa_issuer,
        "userId": delegation.map(|d| d.user_sub.as_str()),
        "grantId": delegation.map(|d| d.grant_id),
        "scopes": delegation.map(|d| &d.scopes),
        "authorizationDetails": delegation.and_then(|d| d.authorization_details.as_ref()),
        "contextId": turn.context_id,
        "messageId": turn.message_id,
    });
    let Value::Object(context) = context else {
        return Err("encoding".to_owned());
    };
    let signer = mcp_client::Signer::new(secrets, context, now.unix_timestamp());
    let server = mcp_client::Server {
        http: &state.outbound,
        url: &tool.url,
        allow_loopback: state.config.jwks.allow_loopback,
        timeout: turn.tool_timeout,
        max: MAX_TOOL_RESPONSE_BYTES,
    };
    mcp_client::call_tool(server, &signer, remote, args)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_route_answers_an_mcp_tools_structured_content_or_its_whole_result() {
        let structured =
            json!({"content": [], "structuredContent": {"ok": true}, "isError": false});
        assert_eq!(CallOutput::Mcp(structured).into_json(), json!({"ok": true}));
        let text_only = json!({"content": [{"type": "text", "text": "hi"}], "isError": false});
        assert_eq!(CallOutput::Mcp(text_only.clone()).into_json(), text_only);
        assert_eq!(CallOutput::Json(json!([1])).into_json(), json!([1]));
    }
}
