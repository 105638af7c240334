//! `POST {iface}/message:send` (PACT §4, §5.5).
//!
//! Checks in protocol order — PA-JWT (the `Caller` extractor), then the
//! delegation token, then the body — and runs the turn in one transaction:
//! lock the grant (if delegated) and the conversation, answer a retried
//! `messageId` from storage, otherwise run the brand agent behind the tool
//! gate and store the reply with its receipt. The row locks serialise turns
//! of one context (and receipts of one grant) across all nodes, so a retry
//! racing the original waits and then gets the stored reply.

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use pact_db::conversations::{self, NewTurn};
use pact_proto::A2aError;
use pact_proto::a2a::{
    AgentMessage, IncomingMessage, SendMessageResponse, TASK_STATE_AUTH_REQUIRED, Task, TaskStatus,
    parse_send_message,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use super::delegation::{self, Presented};
use crate::agent::{GateRecord, Outcome, ToolGate, Turn};
use crate::auth::Caller;
use crate::error::{ApiError, a2a_json};
use crate::state::AppState;

pub async fn send_message(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let presented = delegation::check(&state, &caller, &headers)?;
    let incoming = parse_send_message(&body)?;
    let reply = run_turn(&state, &caller, presented.as_ref(), &incoming).await?;
    Ok(a2a_json(StatusCode::OK, &reply))
}

fn internal(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::Internal(Box::new(e))
}

async fn run_turn(
    state: &AppState,
    caller: &Caller,
    presented: Option<&Presented>,
    incoming: &IncomingMessage,
) -> Result<Value, ApiError> {
    let brand = &caller.brand;
    let (iss, sub) = (caller.pa.iss.as_str(), caller.pa.sub.as_str());
    let now = OffsetDateTime::now_utc();
    let mut tx = state.db.begin().await?;

    // The database is the truth about the grant: re-check it under lock (this
    // also orders the grant's receipt chain).
    let delegation = match presented {
        None => None,
        Some(p) => {
            let d = &p.delegation;
            let grant = pact_db::grants::lock(&mut *tx, d.grant_id).await?;
            let valid = grant.as_ref().is_some_and(|g| {
                g.is_active(now)
                    && g.brand_id == brand.id
                    && g.pa_issuer == iss
                    && g.user_sub == d.user_sub
            });
            if !valid {
                tracing::info!(grant = %d.grant_id, "delegation token rejected: grant revoked, expired or mismatched");
                return Err(ApiError::InvalidDelegation);
            }
            Some(d)
        }
    };

    let conversation = match &incoming.context_id {
        Some(raw) => {
            // An id we could never have minted is just as unknown as a foreign one.
            let id = Uuid::parse_str(raw).map_err(|_| A2aError::unknown_context())?;
            conversations::lock_owned(&mut *tx, id, &brand.id, iss, sub)
                .await?
                .ok_or_else(A2aError::unknown_context)?
        }
        None => conversations::create(&mut *tx, Uuid::new_v4(), &brand.id, iss, sub).await?,
    };
    if conversation.closed {
        return Err(A2aError::unsupported("This conversation is closed").into());
    }

    // PACT §5.5: a context that has run as one user refuses another — checked
    // before the retry lookup, so a stored reply made for one user is never
    // handed out under another user's token.
    if let (Some(d), Some(bound)) = (delegation, &conversation.user_sub)
        && bound != &d.user_sub
    {
        return Err(A2aError::invalid_params("This context belongs to another user").into());
    }

    if let Some(seen) =
        conversations::find_message(&mut *tx, conversation.id, &incoming.message_id).await?
    {
        // PACT §4: a retry gets the stored reply (same receipt); without one, INVALID_PARAMS.
        return match seen.reply {
            Some(reply) => Ok(reply),
            None => Err(A2aError::invalid_params(
                "A reply to this messageId is not available yet; retry later",
            )
            .into()),
        };
    }

    // The first delegated turn binds the context to its user.
    if let Some(d) = delegation
        && conversation.user_sub.is_none()
    {
        conversations::bind_user(&mut *tx, conversation.id, &d.user_sub).await?;
    }

    let agent = state.agents.for_brand(brand).ok_or_else(|| {
        ApiError::Internal(format!("no brand agent of kind {:?}", brand.agent_kind).into())
    })?;
    let scope_rows = pact_db::scopes::list(&mut *tx, &brand.id).await?;
    let offered: BTreeSet<String> = scope_rows.iter().map(|s| s.scope_id.clone()).collect();
    let context_id = conversation.id.to_string();
    let (outcome, record) = {
        let mut gate = ToolGate::new(&mut tx, brand, &offered, delegation);
        let turn = Turn {
            brand,
            pa_issuer: iss,
            pa_sub: sub,
            context_id: &context_id,
            text: &incoming.text,
        };
        let outcome = agent.respond(turn, &mut gate).await.map_err(internal)?;
        (outcome, gate.into_record())
    };
    let Outcome::Reply(text) = outcome;

    let reply_id = Uuid::new_v4().to_string();
    let mut message = AgentMessage::new(reply_id.clone(), context_id.clone(), text);
    let step_up = if record.missing.is_empty() {
        None
    } else {
        Some(step_up(state, caller, &record, &scope_rows).await?)
    };
    if let Some(d) = delegation {
        let receipt = super::receipts::issue(
            state,
            &mut tx,
            d,
            super::receipts::TurnRef {
                pa_issuer: iss,
                brand_id: &brand.id,
                conversation_id: conversation.id,
                message_id: &incoming.message_id,
            },
            &record,
            now,
        )
        .await?;
        let mut metadata = Map::new();
        metadata.insert(
            "pact.receipt".to_owned(),
            serde_json::to_value(receipt).map_err(internal)?,
        );
        message.metadata = Some(metadata);
        pact_db::grants::touch(&mut *tx, d.grant_id).await?;
    }
    let response = match step_up {
        None => SendMessageResponse::Message(message),
        Some((link, text)) => {
            message.parts[0].text = text;
            let mut metadata = Map::new();
            metadata.insert("pact.missingScopes".to_owned(), json!(record.missing));
            metadata.insert("pact.verificationUriComplete".to_owned(), json!(link));
            SendMessageResponse::Task(Task {
                id: Uuid::new_v4().to_string(),
                context_id,
                status: TaskStatus {
                    state: TASK_STATE_AUTH_REQUIRED.to_owned(),
                    message: Some(message),
                },
                metadata: Some(metadata),
            })
        }
    };
    let body = serde_json::to_value(&response).map_err(internal)?;
    conversations::insert_turn(
        &mut *tx,
        NewTurn {
            conversation_id: conversation.id,
            message_id: &incoming.message_id,
            request_text: &incoming.text,
            reply_message_id: &reply_id,
            reply: &body,
            grant_id: delegation.map(|d| d.grant_id),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(body)
}

/// PACT §5.5 step-up: a fresh device authorization for the missing scopes,
/// created for this PA and its user, and a message saying what is needed.
async fn step_up(
    state: &AppState,
    caller: &Caller,
    record: &GateRecord,
    scope_rows: &[pact_db::scopes::BrandScope],
) -> Result<(String, String), ApiError> {
    let created = crate::oauth::device_authorization::create(
        state,
        caller,
        &record.missing,
        None,
        crate::oauth::device_authorization::Origin::StepUp,
    )
    .await
    .map_err(|e| ApiError::Internal(format!("step-up authorization failed: {e:?}").into()))?;
    let wanted: Vec<&str> = scope_rows
        .iter()
        .filter(|s| record.missing.contains(&s.scope_id))
        .map(|s| s.description.as_str())
        .collect();
    let text = format!(
        "I need your permission first: {}. Open {} to approve (code {}), then ask again.",
        wanted.join("; "),
        created.verification_uri_complete,
        created.user_code
    );
    Ok((created.verification_uri_complete, text))
}
