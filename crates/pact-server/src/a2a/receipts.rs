//! Building, chaining and storing the receipt of a delegated turn (PACT §5.6).

use pact_proto::oauth::{Receipt, ReceiptClaims};
use sqlx::PgConnection;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::agent::{Delegation, GateRecord};
use crate::error::ApiError;
use crate::state::AppState;

fn internal(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::Internal(Box::new(e))
}

/// Where a receipt belongs.
pub struct TurnRef<'a> {
    pub pa_issuer: &'a str,
    pub brand_id: &'a str,
    pub conversation_id: Uuid,
    /// The user's `messageId` the receipt answers.
    pub message_id: &'a str,
}

/// Signs the receipt and appends it to the grant's chain. Call with the grant
/// row locked, so the chain has no forks.
pub async fn issue(
    state: &AppState,
    tx: &mut PgConnection,
    delegation: &Delegation,
    turn: TurnRef<'_>,
    record: &GateRecord,
    now: OffsetDateTime,
) -> Result<Receipt, ApiError> {
    let TurnRef {
        pa_issuer,
        brand_id,
        conversation_id,
        message_id,
    } = turn;
    let head = pact_db::receipts::head(&mut *tx, delegation.grant_id).await?;
    let claims = ReceiptClaims {
        grant_id: delegation.grant_id.to_string(),
        user: delegation.user_sub.clone(),
        pa: pa_issuer.to_owned(),
        brand: state.config.interface_url(brand_id),
        scopes_used: record.used_scopes.iter().cloned().collect(),
        actions: record.actions.clone(),
        ts: now.format(&Rfc3339).map_err(internal)?,
        prev: head.as_ref().map(|h| pact_jose::receipt_hash(&h.jws)),
    };
    let key = state.keys.current().signing_key(now).map_err(internal)?;
    let receipt = pact_jose::sign_receipt(&key, claims).map_err(internal)?;
    let claims_json = serde_json::to_value(&receipt.claims).map_err(internal)?;
    pact_db::receipts::insert(
        &mut *tx,
        pact_db::receipts::NewReceipt {
            grant_id: delegation.grant_id,
            seq: head.map_or(1, |h| h.seq + 1),
            conversation_id,
            message_id,
            jws: &receipt.jws,
            claims: &claims_json,
        },
    )
    .await?;
    Ok(receipt)
}
