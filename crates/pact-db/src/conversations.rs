//! Conversations (A2A contexts) and their messages (PACT §4).

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Conversation {
    pub id: Uuid,
    pub brand_id: String,
    pub pa_issuer: String,
    pub pa_sub: String,
    pub user_sub: Option<String>,
    pub closed: bool,
}

pub async fn create(
    db: impl PgExecutor<'_>,
    id: Uuid,
    brand_id: &str,
    pa_issuer: &str,
    pa_sub: &str,
) -> DbResult<Conversation> {
    sqlx::query_as(
        "insert into conversations (id, brand_id, pa_issuer, pa_sub) values ($1, $2, $3, $4) \
         returning id, brand_id, pa_issuer, pa_sub, user_sub, closed",
    )
    .bind(id)
    .bind(brand_id)
    .bind(pa_issuer)
    .bind(pa_sub)
    .fetch_one(db)
    .await
}

/// Locks the conversation for this turn, but only when it belongs to this
/// exact (brand, PA issuer, PA sub): anyone else's context reads as absent, so
/// the caller answers `Unknown contextId` for both (PACT §4). The row lock
/// serialises turns in one context across nodes, which is what makes retries
/// by `messageId` idempotent.
pub async fn lock_owned(
    db: impl PgExecutor<'_>,
    id: Uuid,
    brand_id: &str,
    pa_issuer: &str,
    pa_sub: &str,
) -> DbResult<Option<Conversation>> {
    sqlx::query_as(
        "select id, brand_id, pa_issuer, pa_sub, user_sub, closed from conversations \
         where id = $1 and brand_id = $2 and pa_issuer = $3 and pa_sub = $4 for update",
    )
    .bind(id)
    .bind(brand_id)
    .bind(pa_issuer)
    .bind(pa_sub)
    .fetch_optional(db)
    .await
}

/// Closes a conversation; later turns get `UNSUPPORTED_OPERATION`.
pub async fn close(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<bool> {
    let done =
        sqlx::query("update conversations set closed = true, updated_at = now() where id = $1")
            .bind(id)
            .execute(db)
            .await?;
    Ok(done.rows_affected() == 1)
}

/// A message already seen in a context: its stored reply, if the turn finished.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SeenMessage {
    pub reply: Option<serde_json::Value>,
}

pub async fn find_message(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
) -> DbResult<Option<SeenMessage>> {
    sqlx::query_as("select reply from messages where conversation_id = $1 and message_id = $2")
        .bind(conversation_id)
        .bind(message_id)
        .fetch_optional(db)
        .await
}

/// What one finished turn stores.
#[derive(Clone, Debug)]
pub struct NewTurn<'a> {
    pub conversation_id: Uuid,
    pub message_id: &'a str,
    pub request_text: &'a str,
    pub reply_message_id: &'a str,
    /// The response body exactly as sent, replayed verbatim on a retry.
    pub reply: &'a serde_json::Value,
    pub grant_id: Option<Uuid>,
}

pub async fn insert_turn(db: impl PgExecutor<'_>, turn: NewTurn<'_>) -> DbResult<()> {
    sqlx::query(
        "with touched as (update conversations set updated_at = now() where id = $1) \
         insert into messages (conversation_id, message_id, request_text, reply_message_id, reply, grant_id, replied_at) \
         values ($1, $2, $3, $4, $5, $6, now())",
    )
    .bind(turn.conversation_id)
    .bind(turn.message_id)
    .bind(turn.request_text)
    .bind(turn.reply_message_id)
    .bind(turn.reply)
    .bind(turn.grant_id)
    .execute(db)
    .await
    .map(|_| ())
}

/// Binds the context to the brand user it first ran as under delegation (PACT §5.5).
pub async fn bind_user(db: impl PgExecutor<'_>, id: Uuid, user_sub: &str) -> DbResult<()> {
    sqlx::query("update conversations set user_sub = $2 where id = $1 and user_sub is null")
        .bind(id)
        .bind(user_sub)
        .execute(db)
        .await
        .map(|_| ())
}
