//! `POST {iface}/turns/{turn}/tools/{tool}`: the merchant's agent acting
//! through pactd during a turn.
//!
//! In order, before anything reaches the merchant's API: the turn token
//! (this turn, this brand, not ended, not expired: else 401); the tool
//! exists (404); the arguments fit its schema (400); the scope rule and the
//! limits the person approved, by the same function the built-in tools use
//! (`agent::bounds`; 403 `missing_scope`, which also turns the turn's A2A
//! reply into the step-up task; 403 `beyond_limit`, which makes it a
//! question to the person about this one call; 403 `not_permitted`); a
//! consumed limit is charged. Then the call is forwarded, signed like the
//! turn, with the limits that apply to it, and what became of it recorded
//! for the turn's receipt (PACT §5.6): answered, refused by the merchant
//! (424 `tool_error` with the merchant's status, code and message, which
//! the agent can put in words for the person), or no answer (502/504).
//!
//! [`run_call`] is that whole sequence after the token check; the JSON route
//! here and the MCP endpoint (`merchant::mcp`) both call it, so the two
//! interfaces cannot drift apart.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use pact_node::node::NodeInner;
use pact_proto::oauth::ActionError;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use pact_db::merchant::BrandTool;

use super::live_turns::CallGuard;
use super::{MAX_TOOL_RESPONSE_BYTES, http, mcp_client, signing};
use crate::agent::bounds::{self, Judged};
use crate::agent::{Delegation, Done, ToolError};
use crate::auth::bearer;
use crate::domain::hidden_chars;
use crate::domain::terms::Plan;
use crate::state::AppState;
use crate::tool_schema as schema;

fn reply(status: StatusCode, body: &Value) -> Response {
    let mut res = crate::error::json_no_store(status, body);
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
    let turn = match super::live_turns::authorize(&state, turn_id, &brand_id, token, &headers, now)
        .await
    {
        Ok(t) => t,
        Err(why) => {
            // `?`: the path's brand is unproven text (no forged log lines).
            tracing::info!(brand = ?brand_id, reason = ?why, "tool call refused: turn token");
            return unauthorized();
        }
    };
    let args: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) => Value::Null,
    };
    match run_call(&state, &turn, &tool_name, args, &request_id(&headers), now).await {
        Ok(out) => {
            let (status, body) = out.into_json_reply();
            reply(status, &body)
        }
        Err(refusal) => reply(refusal.http_status(), &refusal.to_json(&tool_name)),
    }
}

/// The request id to hand on to the merchant (`x-request-id`, set by the layer stack).
pub fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned)
}

/// Why a tool call of a turn did not run, or did not succeed.
#[derive(Debug)]
pub enum CallRefusal {
    /// The brand has no tool of that name.
    UnknownTool,
    /// Not a JSON object, or outside the tool's input schema (the text says where).
    InvalidArguments(String),
    /// The gate's refusal: missing scope (the step-up), beyond a limit (a
    /// question to the person), not permitted, or a scope the brand does
    /// not offer.
    Gate(ToolError),
    /// The merchant answered with an error: it says it did not act. Its
    /// status and, when its body says so, its own code and message.
    ToolError {
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    /// No usable answer: unreachable, timed out (`timed_out`: it may have
    /// acted), too large, not JSON. Logged with the cause.
    Failed { timed_out: bool },
    /// The turn ended while the call waited to be sent: never sent.
    TurnEnded,
}

impl CallRefusal {
    /// The JSON route's status for it.
    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::UnknownTool => StatusCode::NOT_FOUND,
            Self::InvalidArguments(_) => StatusCode::BAD_REQUEST,
            Self::Gate(ToolError::DatabaseUnavailable) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Gate(ToolError::Failed(_)) => StatusCode::BAD_GATEWAY,
            Self::Gate(_) => StatusCode::FORBIDDEN,
            // RFC 4918 §11.4: the action depended on another (the
            // merchant's), and that one failed.
            Self::ToolError { .. } => StatusCode::FAILED_DEPENDENCY,
            Self::Failed { timed_out: true } => StatusCode::GATEWAY_TIMEOUT,
            Self::Failed { timed_out: false } => StatusCode::BAD_GATEWAY,
            Self::TurnEnded => StatusCode::CONFLICT,
        }
    }

    /// The body both faces send (the JSON route's body, MCP's
    /// `structuredContent`): `error` is a stable code.
    pub fn to_json(&self, tool: &str) -> Value {
        match self {
            Self::UnknownTool => json!({"error": "unknown_tool", "tool": tool}),
            Self::InvalidArguments(why) => {
                json!({"error": "invalid_arguments", "error_description": why})
            }
            Self::Gate(ToolError::MissingScope(scope)) => {
                json!({"error": "missing_scope", "scope": scope})
            }
            Self::Gate(ToolError::Beyond(b)) => json!({
                "error": "beyond_limit",
                "limit": {
                    "type": b.type_name,
                    "field": b.field,
                    "kind": b.kind.map(crate::domain::limits::FieldKind::name),
                    "limit": b.limit.as_ref().map(crate::domain::limits::Limit::to_json),
                },
                "error_description": crate::web::i18n::with_lang(crate::web::i18n::Lang::En, || {
                    crate::web::limit_words::beyond(b)
                }),
            }),
            Self::Gate(ToolError::NotPermitted(why)) => {
                json!({"error": "not_permitted", "error_description": why})
            }
            Self::Gate(ToolError::Unenforceable(_)) => json!({
                "error": "not_permitted",
                "error_description": "the grant holds limits that cannot be evaluated; the brand's staff were told",
            }),
            Self::Gate(ToolError::DatabaseUnavailable) => {
                json!({"error": "temporarily_unavailable"})
            }
            Self::Gate(ToolError::Failed(_)) => json!({"error": "tool_failed"}),
            Self::Gate(_) => json!({"error": "not_available"}),
            Self::ToolError {
                status,
                code,
                message,
            } => json!({"error": "tool_error", "status": status, "code": code, "message": message}),
            Self::Failed { timed_out: true } => json!({"error": "tool_timeout"}),
            Self::Failed { timed_out: false } => json!({"error": "tool_failed"}),
            Self::TurnEnded => json!({"error": "turn_ended"}),
        }
    }
}

/// One tool call of a turn whose token has been checked: the tool exists,
/// the arguments are an object within the tool's input schema, the gate's
/// rule holds (scope and the granted limits against these arguments, PACT
/// §5.5, §5.7; a missing scope joins the turn's step-up set, a call beyond a
/// limit the operations to ask the person about); a consumed limit is
/// charged; then the call is forwarded signed, its response capped, and
/// what became of it recorded for the receipt (PACT §5.6). Nothing reaches
/// the merchant unless every check passed.
pub async fn run_call(
    state: &AppState,
    turn: &CallGuard,
    tool_name: &str,
    args: Value,
    request_id: &str,
    now: OffsetDateTime,
) -> Result<CallOutput, CallRefusal> {
    let brand_id = &turn.brand_id;
    let Some(tool) = turn.tools.iter().find(|t| t.name == tool_name) else {
        return Err(CallRefusal::UnknownTool);
    };
    // Imported from an MCP server and never given a scope: nobody's call
    // runs until an admin maps it (deny by default).
    if !tool.mapped {
        tracing::info!(brand = %brand_id, tool = %tool.name, "tool call refused: tool not mapped to a scope");
        return Err(CallRefusal::Gate(ToolError::Unavailable));
    }
    // Schema first: the limits then read arguments of the declared shape.
    if let Err(why) = schema::validate(tool.input_schema.as_ref(), &args) {
        tracing::info!(brand = %brand_id, tool = %tool.name, "tool call refused: arguments outside the schema");
        return Err(CallRefusal::InvalidArguments(why));
    }
    // A revocation heard of during the turn ends the delegation's authority
    // now; while this node cannot prove it hears every revocation (its change
    // feed is not alive), the grant is read again instead.
    let mut delegation = turn
        .delegation
        .as_ref()
        .filter(|d| !state.revocations.is_revoked(d.grant_id));
    if let Some(d) = delegation
        && !state.feed.is_live()
        && !grant_still_active(state, d, now).await
    {
        delegation = None;
    }
    let args_hash = pact_jose::args_hash(&args);
    let call = bounds::Call {
        tool: &tool.name,
        scope: tool.scope.as_deref(),
        args: &args,
        args_hash: &args_hash,
        summary: &tool.summary,
        description: &tool.description,
        rules: &turn.rules,
    };
    let plan = match admit(state, turn, delegation, &call).await {
        Ok(plan) => plan,
        Err(e) => {
            turn.with_record(|r| r.refused(&call, delegation, &e));
            tracing::info!(brand = %brand_id, tool = %tool.name, refusal = %e, "tool call refused");
            return Err(CallRefusal::Gate(e));
        }
    };
    if !turn.may_forward() {
        release(state, plan.as_ref()).await;
        return Err(CallRefusal::TurnEnded);
    }

    let failed = |cause: &dyn std::fmt::Display| {
        tracing::warn!(brand = %brand_id, tool = %tool.name, cause = %cause, "merchant tool call failed");
    };
    let secrets = match super::signing_secrets(state, brand_id, now).await {
        Ok(s) => s,
        Err(e) => {
            failed(&e);
            release(state, plan.as_ref()).await;
            return Err(CallRefusal::Failed { timed_out: false });
        }
    };
    let limits = plan.as_ref().map(bounds::applied_json).unwrap_or_default();
    let forwarded = if tool.is_mcp() {
        forward_mcp(
            state, turn, tool, delegation, &args, &limits, request_id, &secrets, now,
        )
        .await
    } else {
        forward_url(
            state, turn, tool, delegation, &args, &limits, request_id, &secrets, now,
        )
        .await
    };
    let record = |done: Done| {
        turn.with_record(|r| {
            r.ran(
                &tool.name,
                tool.scope.as_deref(),
                &args_hash,
                plan.as_ref(),
                done,
            )
        });
    };
    match forwarded {
        Forwarded::Answer(out) => {
            let answer = out.answer();
            let mut done = Done::ok();
            if let Some(effect) = crate::domain::terms::effect_amount(answer) {
                done.effect = answer.get("pactEffect").cloned();
                done.beyond_limit = match effect {
                    Ok(amount) => match state.db.acquire().await {
                        Ok(mut conn) => {
                            bounds::settle_effect(&mut conn, plan.as_ref(), amount).await
                        }
                        // Not settled: it cannot be shown to be within the
                        // limits, so it is reported as beyond them.
                        Err(e) => {
                            tracing::warn!(error = %e, "could not settle a declared effect");
                            plan.is_some()
                        }
                    },
                    // An effect pactd cannot read cannot be shown to be within the limits.
                    Err(()) => plan.is_some(),
                };
                if done.beyond_limit {
                    effect_beyond_limit(state, turn, tool, delegation, answer).await;
                }
            }
            // Recorded once the merchant answered (a tool error of an MCP
            // server included: the call reached it), PACT §5.6.
            if out.is_mcp_error() {
                // It says it failed, as a URL tool's 4xx does: what was
                // charged is given back, unless it declared what it did
                // (a declined payment's 0.00, a fee kept): then the charge
                // was already settled to that, and giving it back too would
                // refund the call twice.
                if done.effect.is_none() {
                    release(state, plan.as_ref()).await;
                }
                done.outcome = "failed";
                done.error = Some(ActionError {
                    code: None,
                    message: out.mcp_error_text(),
                });
            }
            record(done);
            Ok(out)
        }
        Forwarded::Refused {
            status,
            code,
            message,
        } => {
            // A 4xx says the merchant refused and did not act: what was
            // charged is given back. A 5xx says only that something went
            // wrong, possibly after it acted (or a proxy's 502/504 in front
            // of a tool that did): the charge stands and the outcome is
            // unknown, as for a call that timed out, so that a failing tool
            // cannot be made to spend a person's budget twice.
            let may_have_acted = status >= 500;
            if !may_have_acted {
                release(state, plan.as_ref()).await;
            }
            record(Done {
                outcome: if may_have_acted { "unknown" } else { "failed" },
                status: Some(status),
                error: Some(ActionError {
                    code: code.clone(),
                    message: message.clone(),
                }),
                ..Done::default()
            });
            Err(CallRefusal::ToolError {
                status,
                code,
                message,
            })
        }
        Forwarded::NoAnswer {
            cause,
            sent,
            timed_out,
        } => {
            failed(&cause);
            if sent {
                // It reached the merchant and may have acted: kept charged,
                // and in the receipt with an unknown outcome.
                record(Done {
                    outcome: "unknown",
                    error: Some(ActionError {
                        code: Some(if timed_out { "timeout" } else { "bad_answer" }.to_owned()),
                        message: None,
                    }),
                    ..Done::default()
                });
            } else {
                release(state, plan.as_ref()).await;
            }
            Err(CallRefusal::Failed { timed_out })
        }
    }
}

/// Whether the turn's grant is still active, as the database says (a grant
/// that cannot be read counts as ended: fail closed).
async fn grant_still_active(node: &NodeInner, d: &Delegation, now: OffsetDateTime) -> bool {
    match pact_db::grants::for_turn(&node.db, d.grant_id).await {
        Ok(Some(g)) => g.is_active(now),
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, grant = %d.grant_id, "could not re-read a grant for a tool call");
            false
        }
    }
}

/// Gives back what a call that did not happen was charged.
async fn release(node: &NodeInner, plan: Option<&Plan>) {
    if let Some(p) = plan.filter(|p| !p.charges.is_empty()) {
        match node.db.acquire().await {
            Ok(mut conn) => bounds::release(&mut conn, p).await,
            Err(e) => {
                tracing::warn!(error = %e, "could not give back what a refused call was charged")
            }
        }
    }
}

/// The gate's rule (`agent::bounds`), with a connection only when a limit
/// must be charged or staff told.
async fn admit(
    node: &NodeInner,
    turn: &CallGuard,
    delegation: Option<&Delegation>,
    call: &bounds::Call<'_>,
) -> Result<Option<Plan>, ToolError> {
    let db_error = |e: sqlx::Error| {
        if pact_db::classify(&pact_db::Error::from(e)) == pact_db::Failure::Unavailable {
            ToolError::DatabaseUnavailable
        } else {
            ToolError::Failed("database".to_owned())
        }
    };
    match bounds::judge_call(&turn.offered, delegation, call) {
        Ok(Judged::Free(plan)) => Ok(plan),
        Ok(Judged::Charge { plans, exhausted }) => {
            let mut conn = node.db.acquire().await.map_err(db_error)?;
            bounds::charge(&mut conn, plans, exhausted).await.map(Some)
        }
        Err(ToolError::Unenforceable(why)) => {
            if let (Some(d), Ok(mut conn)) = (delegation, node.db.acquire().await) {
                bounds::report_unenforceable(
                    &mut conn,
                    &turn.brand_id,
                    d.grant_id,
                    call.tool,
                    &why,
                )
                .await;
            }
            Err(ToolError::Unenforceable(why))
        }
        Err(e) => Err(e),
    }
}

/// A declared effect beyond a limit: an audit entry and a metric; the
/// receipt says so too, and the person's account page shows it.
async fn effect_beyond_limit(
    node: &NodeInner,
    turn: &CallGuard,
    tool: &BrandTool,
    delegation: Option<&Delegation>,
    answer: &Value,
) {
    metrics::counter!("pactd_tool_effects_beyond_limit_total").increment(1);
    let grant = delegation.map(|d| d.grant_id.to_string());
    tracing::warn!(brand = %turn.brand_id, tool = %tool.name, grant = ?grant, "the merchant declared an effect beyond the granted limit");
    let entry = pact_db::audit::NewEntry {
        actor_kind: "system",
        actor: "pactd",
        action: "grant.effect_beyond_limit",
        target: grant.as_deref(),
        brand_id: Some(&turn.brand_id),
        detail: json!({"tool": tool.name, "effect": answer.get("pactEffect")}),
        client_addr: None,
    };
    if let Err(e) = pact_db::audit::record(&node.db, &entry).await {
        tracing::warn!(error = %e, "could not record an effect beyond a limit in the audit log");
    }
}

/// What the merchant did with a forwarded call.
enum Forwarded {
    Answer(CallOutput),
    /// An error status: the merchant refused (it says it did not act).
    Refused {
        status: u16,
        code: Option<String>,
        message: Option<String>,
    },
    /// No usable answer; `sent`: the request reached the merchant (it may
    /// have acted), `timed_out`: it did not answer in time.
    NoAnswer {
        cause: String,
        sent: bool,
        timed_out: bool,
    },
}

/// Most of a merchant's own error text that reaches the agent and the
/// receipt: enough to say why, too little to smuggle a document through.
const MAX_MERCHANT_TEXT: usize = 200;

fn merchant_text(v: Option<&Value>) -> Option<String> {
    let s = v?.as_str()?;
    let cleaned: String = s
        .chars()
        .filter(|c| !hidden_chars::is_hidden(*c))
        .take(MAX_MERCHANT_TEXT)
        .collect();
    let cleaned = cleaned.trim().to_owned();
    (!cleaned.is_empty()).then_some(cleaned)
}

/// The merchant's own words in an error body: `{"error": "already_shipped",
/// "message": "…"}` (or `error_description`, or `{"error": {"code",
/// "message"}}`); a bare string `error` is taken as the message when it
/// has spaces.
fn merchant_error(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return (None, None);
    };
    let err = v.get("error");
    if let Some(obj) = err.filter(|e| e.is_object()) {
        return (
            merchant_text(obj.get("code")),
            merchant_text(obj.get("message")),
        );
    }
    let message = merchant_text(v.get("message").or_else(|| v.get("error_description")));
    match merchant_text(err) {
        Some(e) if message.is_none() && e.contains(' ') => (None, Some(e)),
        code => (code, message),
    }
}

/// A tool's answer: the JSON of a URL tool, or the `CallToolResult` of a
/// tool on the merchant's MCP server (`content`, `structuredContent`, `isError`).
#[derive(Debug)]
pub enum CallOutput {
    Json(Value),
    Mcp(Value),
}

impl CallOutput {
    /// The merchant's own answer, where a declared effect is looked for: a
    /// URL tool's JSON, an MCP tool's `structuredContent`.
    fn answer(&self) -> &Value {
        match self {
            Self::Json(v) => v,
            Self::Mcp(r) => r.get("structuredContent").unwrap_or(&Value::Null),
        }
    }

    /// An MCP tool that reported an error (`isError`): it answered, and
    /// says it failed.
    fn is_mcp_error(&self) -> bool {
        matches!(self, Self::Mcp(r) if r.get("isError").and_then(Value::as_bool) == Some(true))
    }

    fn mcp_error_text(&self) -> Option<String> {
        match self {
            Self::Mcp(r) => merchant_text(r.pointer("/content/0/text")),
            Self::Json(_) => None,
        }
    }

    /// What the JSON route answers, with its status: an MCP tool's own
    /// error (`isError`) is a refusal there, as a URL tool's error status
    /// is (424 `tool_error` with its code and text), never a 200 that an
    /// agent would read as done; anything else is 200 with [`Self::into_json`].
    pub fn into_json_reply(self) -> (StatusCode, Value) {
        if self.is_mcp_error() {
            let body = json!({"error": "tool_error", "status": null,
                              "code": merchant_text(self.answer().get("error")),
                              "message": self.mcp_error_text()});
            return (StatusCode::FAILED_DEPENDENCY, body);
        }
        (StatusCode::OK, self.into_json())
    }

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

/// The body of `pact.tool_call` (docs/merchant-agent.md), written straight
/// from the call: borrowed, in the documented order.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCallPayload<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    request_id: &'a str,
    brand: &'a str,
    tool: &'a str,
    /// The destination, under the signature: a call captured at one tool
    /// cannot be replayed to another endpoint (issue 28, finding 5).
    url: &'a str,
    args: &'a Value,
    user_id: Option<&'a str>,
    grant_id: Option<pact_db::ids::GrantId>,
    context_id: &'a str,
    message_id: &'a str,
    /// The limits the person set that apply to this call (PACT §5.7): the
    /// merchant's own system may refuse to go beyond them.
    limits: &'a [Value],
}

/// The signed `pact.tool_call` POSTed to a URL tool; what it answered.
#[allow(clippy::too_many_arguments)]
async fn forward_url(
    state: &AppState,
    turn: &CallGuard,
    tool: &BrandTool,
    delegation: Option<&Delegation>,
    args: &Value,
    limits: &[Value],
    request_id: &str,
    secrets: &[signing::WebhookSecret],
    now: OffsetDateTime,
) -> Forwarded {
    let forward = ToolCallPayload {
        kind: "pact.tool_call",
        request_id,
        brand: &turn.brand_id,
        tool: &tool.name,
        url: &tool.url,
        args,
        user_id: delegation.map(|d| d.user_sub.as_str()),
        grant_id: delegation.map(|d| d.grant_id),
        context_id: &turn.context_id,
        message_id: &turn.message_id,
        limits,
    };
    let not_sent = |cause: String| Forwarded::NoAnswer {
        cause,
        sent: false,
        timed_out: false,
    };
    let Ok(bytes) = serde_json::to_vec(&forward) else {
        return not_sent("encoding".to_owned());
    };
    let signed = match signing::sign_all(
        secrets,
        &format!("msg_{}", Uuid::new_v4().simple()),
        now.unix_timestamp(),
        &bytes,
    ) {
        Ok(s) => s,
        Err(e) => return not_sent(e.to_string()),
    };
    let (status, out) = match http::post_signed(
        &state.outbound,
        &tool.url,
        state.config.jwks.allow_loopback,
        bytes,
        &signed,
        turn.tool_timeout,
        MAX_TOOL_RESPONSE_BYTES,
    )
    .await
    {
        Ok(answer) => answer,
        Err(e) => return no_answer_of(&e),
    };
    if !status.is_success() {
        let (code, message) = merchant_error(&out);
        return Forwarded::Refused {
            status: status.as_u16(),
            code,
            message,
        };
    }
    match serde_json::from_slice::<Value>(&out) {
        Ok(v) => Forwarded::Answer(CallOutput::Json(v)),
        Err(_) => Forwarded::NoAnswer {
            cause: "the tool's response is not JSON".to_owned(),
            sent: true,
            timed_out: false,
        },
    }
}

/// A failed exchange: whether the request may have reached the merchant.
fn no_answer_of(e: &http::CallError) -> Forwarded {
    use http::CallError as E;
    Forwarded::NoAnswer {
        cause: e.to_string(),
        // Refused by the SSRF guard or no connection: never sent.
        sent: !matches!(e, E::Refused(_) | E::Connect(_)),
        timed_out: matches!(e, E::Timeout),
    }
}

/// The call at the merchant's MCP server (`mcp_client`), with who it is for
/// in the signed `pact-context` header (docs/mcp.md lists every member).
#[allow(clippy::too_many_arguments)]
async fn forward_mcp(
    state: &AppState,
    turn: &CallGuard,
    tool: &BrandTool,
    delegation: Option<&Delegation>,
    args: &Value,
    limits: &[Value],
    request_id: &str,
    secrets: &[signing::WebhookSecret],
    now: OffsetDateTime,
) -> Forwarded {
    let Some(remote) = tool.remote_name.as_deref() else {
        return Forwarded::NoAnswer {
            cause: "an MCP tool without its remote name".to_owned(),
            sent: false,
            timed_out: false,
        };
    };
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
        "limits": limits,
    });
    let Value::Object(context) = context else {
        return Forwarded::NoAnswer {
            cause: "encoding".to_owned(),
            sent: false,
            timed_out: false,
        };
    };
    let signer = mcp_client::Signer::new(secrets, context, now.unix_timestamp());
    let server = mcp_client::Server {
        http: &state.outbound,
        url: &tool.url,
        allow_loopback: state.config.jwks.allow_loopback,
        timeout: turn.tool_timeout,
        max: MAX_TOOL_RESPONSE_BYTES,
    };
    match mcp_client::call_tool(server, &signer, remote, args).await {
        Ok(result) => Forwarded::Answer(CallOutput::Mcp(result)),
        Err(mcp_client::McpError::Call(e)) => no_answer_of(&e),
        // A protocol error or a JSON-RPC error answer: the server was reached.
        Err(e) => Forwarded::NoAnswer {
            cause: e.to_string(),
            sent: !matches!(e, mcp_client::McpError::Signing),
            timed_out: false,
        },
    }
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
        // An MCP tool's own error is a refusal on the JSON route, not a 200.
        let refused = json!({"isError": true,
                             "content": [{"type": "text", "text": "Order SHOP-1002 has shipped"}],
                             "structuredContent": {"error": "already_shipped"}});
        assert_eq!(
            CallOutput::Mcp(refused).into_json_reply(),
            (
                StatusCode::FAILED_DEPENDENCY,
                json!({"error": "tool_error", "status": null, "code": "already_shipped",
                       "message": "Order SHOP-1002 has shipped"})
            )
        );
        let fine = json!({"isError": false, "structuredContent": {"ok": true}});
        assert_eq!(
            CallOutput::Mcp(fine).into_json_reply(),
            (StatusCode::OK, json!({"ok": true}))
        );
    }

    #[test]
    fn a_merchants_refusal_is_read_in_its_own_words_and_kept_short() {
        assert_eq!(
            merchant_error(
                br#"{"error":"already_shipped","message":"Order SHOP-1002 has shipped"}"#
            ),
            (
                Some("already_shipped".into()),
                Some("Order SHOP-1002 has shipped".into())
            )
        );
        assert_eq!(
            merchant_error(br#"{"error":"already shipped"}"#),
            (None, Some("already shipped".into()))
        );
        assert_eq!(
            merchant_error(br#"{"error":{"code":"E42","message":"no"}}"#),
            (Some("E42".into()), Some("no".into()))
        );
        assert_eq!(merchant_error(b"<html>"), (None, None));
        let (_, long) =
            merchant_error(format!("{{\"message\":\"{}\u{202e}\"}}", "x".repeat(500)).as_bytes());
        assert_eq!(long.unwrap().len(), MAX_MERCHANT_TEXT);
    }
}
