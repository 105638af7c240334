//! `POST {iface}/message:send` (PACT §4).
//!
//! One transaction per turn: lock (or create) the conversation, answer a
//! retried `messageId` from storage, otherwise run the brand agent and store
//! the reply. The row lock serialises turns of one context across all nodes,
//! so a retry racing the original waits and then gets the stored reply.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use pact_db::conversations::{self, NewTurn};
use pact_proto::A2aError;
use pact_proto::a2a::{AgentMessage, IncomingMessage, SendMessageResponse, parse_send_message};
use uuid::Uuid;

use crate::agent::{Outcome, Turn};
use crate::auth::Caller;
use crate::error::{ApiError, a2a_json};
use crate::state::AppState;

pub async fn send_message(
    State(state): State<AppState>,
    caller: Caller,
    body: Bytes,
) -> Result<Response, ApiError> {
    let incoming = parse_send_message(&body)?;
    let reply = run_turn(&state, &caller, &incoming).await?;
    Ok(a2a_json(StatusCode::OK, &reply))
}

async fn run_turn(
    state: &AppState,
    caller: &Caller,
    incoming: &IncomingMessage,
) -> Result<serde_json::Value, ApiError> {
    let brand = &caller.brand;
    let (iss, sub) = (caller.pa.iss.as_str(), caller.pa.sub.as_str());
    let mut tx = state.db.begin().await?;

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

    if let Some(seen) =
        conversations::find_message(&mut *tx, conversation.id, &incoming.message_id).await?
    {
        // PACT §4: a retry gets the stored reply, byte for byte; without one, INVALID_PARAMS.
        return match seen.reply {
            Some(reply) => Ok(reply),
            None => Err(A2aError::invalid_params(
                "A reply to this messageId is not available yet; retry later",
            )
            .into()),
        };
    }

    let agent = state.agents.for_brand(brand).ok_or_else(|| {
        ApiError::Internal(format!("no brand agent of kind {:?}", brand.agent_kind).into())
    })?;
    let context_id = conversation.id.to_string();
    let outcome = agent
        .respond(Turn {
            brand,
            pa_issuer: iss,
            pa_sub: sub,
            context_id: &context_id,
            text: &incoming.text,
        })
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;

    let reply_id = Uuid::new_v4().to_string();
    let response = match outcome {
        Outcome::Reply(text) => {
            SendMessageResponse::Message(AgentMessage::new(reply_id.clone(), context_id, text))
        }
    };
    let body = serde_json::to_value(&response).map_err(|e| ApiError::Internal(Box::new(e)))?;
    conversations::insert_turn(
        &mut *tx,
        NewTurn {
            conversation_id: conversation.id,
            message_id: &incoming.message_id,
            request_text: &incoming.text,
            reply_message_id: &reply_id,
            reply: &body,
            grant_id: None,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(body)
}
