//! Receipts (PACT §5.6): append-only, chained per grant.

use crate::ids::{BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::ids::GrantId;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredReceipt {
    pub id: i64,
    pub grant_id: GrantId,
    pub seq: i32,
    pub conversation_id: Uuid,
    pub message_id: String,
    pub jws: String,
    pub claims: serde_json::Value,
    pub created_at: OffsetDateTime,
}

/// What the next receipt of a grant chains to (PACT §5.6): the position and
/// the JWS of its newest receipt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainHead {
    pub seq: i32,
    pub jws: String,
}

/// The head of a grant's receipt chain, `None` before its first receipt.
pub async fn head(db: impl PgExecutor<'_>, grant_id: GrantId) -> DbResult<Option<ChainHead>> {
    sqlx::query_as!(
        ChainHead,
        "select seq, jws from receipts where grant_id = $1 order by seq desc limit 1",
        grant_id.as_uuid(),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

#[derive(Clone, Debug)]
pub struct NewReceipt<'a> {
    pub grant_id: GrantId,
    pub seq: i32,
    pub conversation_id: Uuid,
    pub message_id: &'a str,
    pub jws: &'a str,
    pub claims: &'a serde_json::Value,
}

pub async fn insert(db: impl PgExecutor<'_>, r: NewReceipt<'_>) -> DbResult<()> {
    sqlx::query!(
        "insert into receipts (grant_id, seq, conversation_id, message_id, jws, claims) values ($1, $2, $3, $4, $5, $6)",
        r.grant_id.as_uuid(),
        r.seq,
        r.conversation_id,
        r.message_id,
        r.jws,
        r.claims,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// A grant's receipts in chain order; all grants' when `grant_id` is `None`.
pub async fn list(
    db: impl PgExecutor<'_>,
    grant_id: Option<GrantId>,
) -> DbResult<Vec<StoredReceipt>> {
    sqlx::query_as!(
        StoredReceipt,
        "select id, grant_id, seq, conversation_id, message_id, jws, claims, created_at from receipts where ($1::uuid is null or grant_id = $1) order by grant_id, seq",
        grant_id.map(GrantId::as_uuid),
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// The most recent receipts of a user's grants at a brand (for the account page).
pub async fn recent_for_user(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    limit: i64,
) -> DbResult<Vec<StoredReceipt>> {
    sqlx::query_as!(
        StoredReceipt,
        "select r.id, r.grant_id, r.seq, r.conversation_id, r.message_id, r.jws, r.claims, r.created_at \
         from receipts r join grants g on g.id = r.grant_id \
         where g.brand_id = $1 and g.user_sub = $2 order by r.created_at desc limit $3",
        brand_id,
        user_sub,
        limit,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}
