//! Building, chaining and storing the receipt of a delegated turn (PACT §5.6).

use pact_db::ids::BrandId;
use pact_db::receipts::ChainHead;
use pact_node::node::NodeInner;
use pact_proto::oauth::{Receipt, ReceiptClaims};
use sqlx::PgConnection;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::agent::{Delegation, GateRecord};
use crate::error::ApiError;

/// Where a receipt belongs.
pub struct TurnRef<'a> {
    pub pa_issuer: &'a pact_db::ids::AgentIssuer,
    pub brand_id: &'a BrandId,
    pub conversation_id: Uuid,
    /// The user's `messageId` the receipt answers.
    pub message_id: &'a str,
}

/// A signed receipt and the row that appends it to its grant's chain.
pub struct ChainedReceipt {
    grant_id: pact_db::ids::GrantId,
    seq: i32,
    conversation_id: Uuid,
    message_id: String,
    jws: String,
    claims: serde_json::Value,
}

impl ChainedReceipt {
    pub fn as_new(&self) -> pact_db::receipts::NewReceipt<'_> {
        pact_db::receipts::NewReceipt {
            grant_id: self.grant_id,
            seq: self.seq,
            conversation_id: self.conversation_id,
            message_id: &self.message_id,
            jws: &self.jws,
            claims: &self.claims,
        }
    }
}

/// The chain head a receipt follows.
pub enum Head {
    /// As read with the grant when the turn began (`grants::for_turn`).
    Read(Option<ChainHead>),
    /// Not known (yet, or any longer): read it when the receipt is built.
    ReadAgain,
}

/// Signs the receipt that follows the grant's chain `head` (PACT §5.6:
/// `prev` is the hash of the previous receipt). It is appended with the
/// turn's reply; that append is refused by the chain's unique position when
/// another receipt took it meanwhile, so the chain never forks, and the
/// caller builds again with [`Head::ReadAgain`].
pub async fn build(
    node: &NodeInner,
    conn: &mut PgConnection,
    delegation: &Delegation,
    turn: TurnRef<'_>,
    head: Head,
    record: &GateRecord,
    now: OffsetDateTime,
) -> Result<(Receipt, ChainedReceipt), ApiError> {
    let TurnRef {
        pa_issuer,
        brand_id,
        conversation_id,
        message_id,
    } = turn;
    let head = match head {
        Head::Read(head) => head,
        Head::ReadAgain => pact_db::receipts::head(&mut *conn, delegation.grant_id).await?,
    };
    let claims = ReceiptClaims {
        grant_id: delegation.grant_id.to_string(),
        user: delegation.user_sub.to_string(),
        pa: pa_issuer.to_string(),
        brand: node.config.interface_url(brand_id),
        scopes_used: record.used_scopes.iter().cloned().collect(),
        actions: record.actions.clone(),
        refused: record.refused.clone(),
        ts: now.format(&Rfc3339).map_err(ApiError::internal)?,
        prev: head.as_ref().map(|h| pact_jose::receipt_hash(&h.jws)),
        extra: Default::default(),
    };
    let key = node
        .keys
        .current()
        .signing_key(now)
        .map_err(ApiError::internal)?;
    let receipt = pact_jose::sign_receipt(&key, claims).map_err(ApiError::internal)?;
    let claims_json = serde_json::to_value(&receipt.claims).map_err(ApiError::internal)?;
    let row = ChainedReceipt {
        grant_id: delegation.grant_id,
        seq: head.map_or(1, |h| h.seq + 1),
        conversation_id,
        message_id: message_id.to_owned(),
        jws: receipt.jws.clone(),
        claims: claims_json,
    };
    Ok((receipt, row))
}
