//! One turn answered by the merchant's agent (the `webhook` brand agent kind).
//!
//! Called with no transaction open and no row locked: the turn was checked
//! and claimed before, and is stored after (see `a2a::send`). The agent gets
//! the turn, who asks, the delegation when there is one (never the PA-JWT or
//! the delegation token itself), and a tools URL with a turn token for the
//! gateway. It answers `200 {"reply": "<text>"}`.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::live_turns::{TurnEnd, TurnSetup};
use super::{HISTORY_TURNS, MAX_AGENT_REPLY_BYTES, TurnFailure, http, signing};
use crate::agent::{Delegation, GateRecord};
use crate::auth::Caller;
use crate::state::AppState;

/// What the server knows about the turn when it calls the agent.
#[derive(Debug)]
pub struct WebhookTurn<'a> {
    pub caller: &'a Caller,
    pub delegation: Option<&'a Delegation>,
    pub conversation_id: Uuid,
    /// The first turn of a new context (PACT §4: no `contextId`): it has no
    /// earlier turns, so there is no history to read.
    pub first: bool,
    pub message_id: &'a str,
    pub text: &'a str,
    pub offered: &'a BTreeSet<String>,
    pub request_id: &'a str,
}

/// The text of a stored A2A reply (a message, or a step-up task's message).
fn reply_text(reply: &Value) -> &str {
    let message = reply
        .get("message")
        .or_else(|| reply.pointer("/task/status/message"));
    message
        .and_then(|m| m.pointer("/parts/0/text"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The turn webhook's body (`pact.turn`, docs/merchant-agent.md), written
/// straight from what the turn holds: borrowed, in the documented order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Payload<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    /// The destination, under the signature (issue 28, finding 5).
    url: &'a str,
    request_id: &'a str,
    brand: &'a str,
    turn: TurnPart<'a>,
    caller: CallerPart<'a>,
    delegation: Option<DelegationPart<'a>>,
    tools: ToolsPart<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnPart<'a> {
    context_id: &'a str,
    message_id: &'a str,
    text: &'a str,
    history: Vec<PastTurn<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PastTurn<'a> {
    message_id: &'a str,
    text: &'a str,
    reply: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallerPart<'a> {
    pa_issuer: &'a str,
    pa_name: &'a str,
    pa_sub: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DelegationPart<'a> {
    grant_id: pact_db::ids::GrantId,
    user_id: &'a str,
    scopes: &'a BTreeSet<String>,
    authorization_details: Option<&'a Value>,
    /// What the grant holds now, as the gateway applies it: each entry's
    /// values, and calls the person allowed once.
    limits: Vec<LimitPart<'a>>,
    approved_once: Vec<OncePart<'a>>,
}

#[derive(Serialize)]
struct LimitPart<'a> {
    #[serde(rename = "type")]
    type_name: &'a str,
    values: &'a Map<String, Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OncePart<'a> {
    tool: &'a str,
    args_hash: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolsPart<'a> {
    url: &'a str,
    mcp_url: &'a str,
    brand_mcp_url: &'a str,
    token: &'a str,
    expires_at: i64,
    /// The brand's mapped tools, written once per load of its setup.
    available: &'a RawValue,
}

/// Runs the turn at the merchant's agent: its reply text and what it did
/// through the gateway.
pub async fn run(
    state: &AppState,
    t: WebhookTurn<'_>,
) -> Result<(String, GateRecord, Option<TurnEnd>), TurnFailure> {
    let brand = &t.caller.brand;
    let now = state.clock.now();
    // The whole turn has to fit in its request's time: the request timeout
    // (request_timeout.rs) cuts it otherwise, and with it the record of what
    // its calls did and its claim, so that the retry would act again.
    let store_by =
        tokio::time::Instant::now() + state.config.request_timeout.saturating_sub(STORE_MARGIN);
    let time_left = || store_by.saturating_duration_since(tokio::time::Instant::now());
    let setup = state
        .config_cache
        .merchant(&state.db, &brand.id)
        .await
        .map_err(|e| TurnFailure::Setup(format!("loading the agent URL and tools: {e}")))?;
    let agent = setup
        .agent
        .clone()
        .ok_or_else(|| TurnFailure::Setup("the brand has no agent URL".to_owned()))?;
    let history = if t.first {
        Vec::new()
    } else {
        pact_db::conversations::history(
            &state.db,
            t.conversation_id,
            HISTORY_TURNS,
            t.delegation.is_some(),
        )
        .await
        .map_err(|e| TurnFailure::Setup(format!("loading history: {e}")))?
    };
    let secrets = super::signing_secrets(state, &brand.id, now).await?;

    // The agent's own time ends by the store deadline too: an agent timeout
    // above the request timeout (25 s may be set against a 20 s request)
    // would otherwise let the request be cut while the agent still works,
    // with what its calls did unrecorded and the retry acting again.
    let timeout = Duration::from_millis(u64::try_from(agent.agent_timeout_ms).unwrap_or(20_000))
        .min(time_left());
    let tool_timeout =
        Duration::from_millis(u64::try_from(agent.tool_timeout_ms).unwrap_or(10_000));
    let context_id = t.conversation_id.to_string();
    let mut live = state
        .live_turns
        .start(
            TurnSetup {
                brand_id: brand.id.clone(),
                // The token dies with the turn: at the latest when we stop waiting.
                expires_at: now + timeout,
                delegation: t.delegation.cloned(),
                offered: t.offered.clone(),
                rules: setup.rules.clone(),
                tools: setup.tools.clone(),
                tool_timeout,
                context_id: context_id.clone(),
                message_id: t.message_id.to_owned(),
                pa_issuer: t.caller.issuer().clone(),
            },
            &state.relaxed_db,
        )
        .ok_or(TurnFailure::Setup(
            "signing the turn token failed".to_owned(),
        ))?;
    let tools_url = format!(
        "{}/turns/{}/tools",
        state.config.interface_url(&brand.id),
        live.turn.id
    );
    let mcp_url = format!(
        "{}/turns/{}/mcp",
        state.config.interface_url(&brand.id),
        live.turn.id
    );
    // The brand's shared MCP endpoint: one session for the agent's life,
    // this turn named by the token on each request (merchant/mcp.rs).
    let brand_mcp_url = format!("{}/mcp", state.config.interface_url(&brand.id));
    let history: Vec<PastTurn<'_>> = history
        .iter()
        .map(|h| PastTurn {
            message_id: &h.message_id,
            text: &h.request_text,
            reply: reply_text(&h.reply),
        })
        .collect();
    let delegation = t.delegation.map(|d| DelegationPart {
        grant_id: d.grant_id,
        user_id: &d.user_sub,
        scopes: &d.scopes,
        authorization_details: d.authorization_details.as_ref(),
        limits: d
            .terms
            .entries
            .iter()
            .map(|e| LimitPart {
                type_name: &e.type_name,
                values: &e.values,
            })
            .collect(),
        approved_once: d
            .terms
            .operations
            .iter()
            .map(|o| OncePart {
                tool: &o.tool,
                args_hash: &o.args_hash,
            })
            .collect(),
    });
    let body = Payload {
        kind: "pact.turn",
        url: &agent.url,
        request_id: t.request_id,
        brand: &brand.id,
        turn: TurnPart {
            context_id: &context_id,
            message_id: t.message_id,
            text: t.text,
            history,
        },
        caller: CallerPart {
            pa_issuer: &t.caller.pa.iss,
            pa_name: &t.caller.agent.name,
            pa_sub: &t.caller.pa.sub,
        },
        delegation,
        tools: ToolsPart {
            url: &tools_url,
            mcp_url: &mcp_url,
            brand_mcp_url: &brand_mcp_url,
            token: &live.token,
            expires_at: (now + timeout).unix_timestamp(),
            available: &setup.available,
        },
    };
    let answered = exchange(state, &body, &secrets, &agent.url, timeout, now).await;
    // End the turn (its token takes no new request), wait for calls still
    // in flight — an agent that replied before its own call returned — and
    // read what it did: every call that was sent is in the receipt. A call
    // is bounded by the tool timeout, so the wait is too. The other nodes
    // learn of the end with the reply's store (`TurnEnd`).
    // This happens whether or not the agent answered: a call it made before
    // it failed (an error status, a timeout, a malformed reply) may have
    // acted at the merchant.
    // The agent's time and the wait for its calls can together exceed the
    // request timeout (by default 20 s + 11 s against 30 s): the wait ends
    // in time to store what the calls did. A call still running then is left
    // out of the receipt (and logged); before, the whole turn was cut, the
    // calls that had acted were forgotten and the retry ran them again.
    let wait = (tool_timeout + std::time::Duration::from_secs(1)).min(time_left());
    let (mut record, mut end) = live.finish(wait).await;
    // A failed turn decides from everything its calls did, on every node:
    // a call that went through another node and acted there makes the
    // failure a stored turn with its receipt, not a retry that acts again.
    // (A turn that answered learns of other nodes' calls when its reply is
    // stored: the store is fenced, then gathers, send.rs.)
    if answered.is_err()
        && let Some(end) = end.take()
    {
        end.gather(&mut record).await;
    }
    match answered {
        Ok(text) => Ok((text, record, end)),
        // Nothing acted: a retryable failure, and the retry runs afresh.
        Err(e) if record.actions.is_empty() => Err(e),
        // Something acted: the turn is stored with a stock reply and its
        // receipt, so the person's agent learns what was done (PACT §5.6:
        // every call that was sent is in the receipt), the budgets it used
        // are accounted for, and a retry with the same messageId gets this
        // stored answer instead of acting a second time.
        Err(e) => {
            tracing::warn!(
                brand = %brand.id,
                cause = %e,
                actions = record.actions.len(),
                "the brand's agent failed after its tools acted; the turn is stored with its receipt"
            );
            Ok((FAILED_AFTER_ACTING.to_owned(), record, end))
        }
    }
}

/// What a turn keeps of its request's time for storing its reply.
const STORE_MARGIN: Duration = Duration::from_secs(1);

/// The reply stored for a turn whose agent failed after a tool acted.
pub const FAILED_AFTER_ACTING: &str = "The business's agent stopped before it could answer. \
     What it did before it stopped is listed in this reply's receipt.";

/// The signed POST of the turn to the merchant's agent, and its reply text.
async fn exchange(
    state: &AppState,
    body: &Payload<'_>,
    secrets: &[super::signing::WebhookSecret],
    url: &str,
    timeout: Duration,
    now: time::OffsetDateTime,
) -> Result<String, TurnFailure> {
    let bytes = serde_json::to_vec(body).map_err(|_| TurnFailure::Malformed("encoding"))?;
    let signed = signing::sign_all(
        secrets,
        &format!("msg_{}", Uuid::new_v4().simple()),
        now.unix_timestamp(),
        &bytes,
    )
    .map_err(|e| TurnFailure::Setup(e.to_string()))?;
    let (status, reply) = http::post_signed(
        &state.outbound,
        url,
        state.config.jwks.allow_loopback,
        bytes,
        &signed,
        timeout,
        MAX_AGENT_REPLY_BYTES,
    )
    .await?;
    if status != reqwest::StatusCode::OK {
        return Err(http::CallError::Status(status.as_u16()).into());
    }
    let reply: Value =
        serde_json::from_slice(&reply).map_err(|_| TurnFailure::Malformed("not JSON"))?;
    let text = reply
        .get("reply")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or(TurnFailure::Malformed("no non-empty \"reply\" string"))?
        .to_owned();
    Ok(text)
}
