//! The merchant's own agent and systems behind pactd.
//!
//! A brand with `agent_kind = 'webhook'` is answered by the merchant's agent:
//! pactd checks the turn (PA-JWT, delegation, context), POSTs it to the
//! agent signed the Standard Webhooks way ([`turn`]), and the agent reaches
//! the merchant's systems only through the tool gateway ([`gateway`]), which
//! applies the same scope and `authorization_details` rule as the built-in
//! tools before forwarding. Resource servers check delegation tokens by RFC
//! 7662 introspection (`oauth::introspect`) with a brand API credential.

pub mod credentials;
pub mod gateway;
pub mod http;
pub mod live_turns;
pub mod mcp;
pub mod mcp_client;
pub mod mcp_import;
pub use pact_node::turn_token;
pub use pact_node::webhook_signing as signing;
pub mod turn;

use pact_db::ids::BrandId;
use time::OffsetDateTime;

use crate::state::AppState;
use signing::{SigningError, WebhookSecret};

/// Agent replies above this are refused (a reply is text for a person).
pub const MAX_AGENT_REPLY_BYTES: usize = 64 * 1024;
/// Tool responses above this are refused.
pub const MAX_TOOL_RESPONSE_BYTES: usize = 256 * 1024;
/// Earlier turns sent with a turn, newest kept.
pub const HISTORY_TURNS: i64 = 20;

/// The card's skills for a brand answered by its own agent: one general
/// skill in the brand's words (the agent's real abilities are the merchant's).
pub fn skills(brand: &pact_db::brands::Brand) -> Vec<pact_proto::card::AgentSkill> {
    if brand.agent() != pact_db::brands::AgentKind::Webhook {
        return Vec::new();
    }
    vec![pact_proto::card::AgentSkill {
        id: "assistant".to_owned(),
        name: format!("{} assistant", brand.name),
        description: if brand.description.is_empty() {
            format!("Questions and requests for {}.", brand.name)
        } else {
            brand.description.clone()
        },
        tags: vec!["support".to_owned()],
    }]
}

/// The brand's signing secrets, opened: the current one first, then any
/// rotated-out one still in its grace period. From the node's copy
/// (`config_cache`) while it hears changes; a copy in which none signs any
/// more (a grace period that ended before the rotation was heard) is not
/// trusted, and the database is asked.
pub async fn signing_secrets(
    state: &AppState,
    brand_id: &BrandId,
    now: OffsetDateTime,
) -> Result<Vec<WebhookSecret>, TurnFailure> {
    let loading = |e: pact_db::Error| TurnFailure::Setup(format!("loading webhook secrets: {e}"));
    let kept = state
        .config_cache
        .webhook_secrets(&state.db, brand_id, now)
        .await
        .map_err(loading)?;
    let signs = |r: &&pact_db::merchant::WebhookSecret| r.retired_at.is_none_or(|t| t > now);
    let read;
    let rows: Vec<&pact_db::merchant::WebhookSecret> = if kept.iter().any(|r| signs(&r)) {
        kept.iter().filter(signs).collect()
    } else {
        read = pact_db::merchant::signing_secrets(&state.db, brand_id, now)
            .await
            .map_err(loading)?;
        read.iter().collect()
    };
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(
            state
                .opened_secrets
                .open(&state.config.master_key, &r.sealed, brand_id, r.id)
                .map_err(|e| TurnFailure::Setup(SigningError::from(e).to_string()))?,
        );
    }
    if out.is_empty() {
        return Err(TurnFailure::Setup(
            "the brand has no webhook secret".to_owned(),
        ));
    }
    Ok(out)
}

/// Why a call to the merchant failed; logged with the brand, never shown
/// to the PA, and never carrying a secret or a token.
#[derive(Debug, thiserror::Error)]
pub enum TurnFailure {
    #[error("not set up: {0}")]
    Setup(String),
    #[error("{0}")]
    Call(#[from] http::CallError),
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
}
