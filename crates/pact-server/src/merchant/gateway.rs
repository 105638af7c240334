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

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{MAX_TOOL_RESPONSE_BYTES, http, signing};
use crate::agent::ToolError;
use crate::agent::tools::check_call;
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
    let Some(tool) = turn.tools.iter().find(|t| t.name == tool_name) else {
        return reply(
            StatusCode::NOT_FOUND,
            &json!({"error": "unknown_tool", "tool": tool_name}),
        );
    };
    let args: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return reply(
                StatusCode::BAD_REQUEST,
                &json!({"error": "invalid_arguments", "error_description": "the body must be a JSON object"}),
            );
        }
    };
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
        let body = match e {
            ToolError::MissingScope(scope) => json!({"error": "missing_scope", "scope": scope}),
            ToolError::NotPermitted => json!({"error": "not_permitted"}),
            _ => json!({"error": "not_available"}),
        };
        return reply(StatusCode::FORBIDDEN, &body);
    }

    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    let forward = json!({
        "type": "pact.tool_call",
        "requestId": request_id,
        "brand": brand_id,
        "tool": tool.name,
        "args": args,
        "userId": delegation.map(|d| d.user_sub.as_str()),
        "grantId": delegation.map(|d| d.grant_id),
        "contextId": turn.context_id,
        "messageId": turn.message_id,
    });
    let failed = |cause: &dyn std::fmt::Display| {
        tracing::warn!(brand = %brand_id, tool = %tool.name, cause = %cause, "merchant tool call failed");
        reply(StatusCode::BAD_GATEWAY, &json!({"error": "tool_failed"}))
    };
    let secrets = match super::signing_secrets(&state, &brand_id, now).await {
        Ok(s) => s,
        Err(e) => return failed(&e),
    };
    let Ok(bytes) = serde_json::to_vec(&forward) else {
        return failed(&"encoding");
    };
    let signed = match signing::sign_all(
        &secrets,
        &format!("msg_{}", Uuid::new_v4().simple()),
        now.unix_timestamp(),
        &bytes,
    ) {
        Ok(s) => s,
        Err(e) => return failed(&e),
    };
    let result = http::post_signed(
        &state.outbound,
        &tool.url,
        state.config.jwks.allow_loopback,
        bytes,
        &signed,
        turn.tool_timeout,
        MAX_TOOL_RESPONSE_BYTES,
    )
    .await;
    let (status, out) = match result {
        Ok(r) => r,
        Err(e) => return failed(&e),
    };
    if !status.is_success() {
        return failed(&http::CallError::Status(status.as_u16()));
    }
    let Ok(out) = serde_json::from_slice::<Value>(&out) else {
        return failed(&"the tool's response is not JSON");
    };
    turn.with_record(|r| r.ran(&tool.name, tool.scope.as_deref(), &args));
    reply(StatusCode::OK, &out)
}
