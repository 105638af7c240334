//! Brands: the businesses hosted on this Provider.

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::DbResult;
use crate::ids::BrandId;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Brand {
    pub id: BrandId,
    pub name: String,
    pub description: String,
    pub agent_kind: String,
    pub settings: serde_json::Value,
    pub created_at: OffsetDateTime,
}

/// Who answers a brand's turns, as `brands.agent_kind` says: the merchant's
/// own agent behind signed webhooks (`merchant::set_agent` writes `webhook`),
/// or a built-in agent registered under its kind (`demo`, or a test's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentKind<'a> {
    Webhook,
    BuiltIn(&'a str),
}

/// The `agent_kind` value of a brand answered by the merchant's own agent.
pub const WEBHOOK_AGENT_KIND: &str = "webhook";

impl Brand {
    /// Who answers this brand's turns.
    pub fn agent(&self) -> AgentKind<'_> {
        if self.agent_kind == WEBHOOK_AGENT_KIND {
            AgentKind::Webhook
        } else {
            AgentKind::BuiltIn(&self.agent_kind)
        }
    }
}

/// Brand ids appear in URLs (`/a2a/{brand_id}`), so they are restricted to a
/// URL-safe lower-case alphabet; the table has the same check.
pub fn is_valid_brand_id(id: &str) -> bool {
    crate::ids::BrandId::is_valid(id)
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: &BrandId,
    name: &str,
    description: &str,
) -> DbResult<Brand> {
    sqlx::query_as!(
        Brand,
        "insert into brands (id, name, description) values ($1, $2, $3) \
         returning id, name, description, agent_kind, settings, created_at",
        id,
        name,
        description,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Inserts the brand unless it exists; true when it was created.
///
/// Looked up first: the table's change trigger is per statement
/// (migrations/0010), so even an insert that does nothing would tell every
/// node to drop its cached brands, at each start of a node that seeds one.
/// Two nodes seeding at once both insert; the conflict makes one of them a
/// no-op.
pub async fn insert_if_missing(
    db: &sqlx::PgPool,
    id: &BrandId,
    name: &str,
    description: &str,
) -> DbResult<bool> {
    if find(db, id).await?.is_some() {
        return Ok(false);
    }
    let done = sqlx::query!(
        "insert into brands (id, name, description) values ($1, $2, $3) on conflict (id) do nothing",
        id,
        name,
        description,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The brand named `id`. Any text may be looked up (a request's path
/// segment, a form field): one that is no brand id finds no brand, and the
/// brand found carries its id as a [`BrandId`].
pub async fn find(db: impl PgExecutor<'_>, id: &str) -> DbResult<Option<Brand>> {
    sqlx::query_as!(
        Brand,
        "select id, name, description, agent_kind, settings, created_at from brands where id = $1",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<Brand>> {
    sqlx::query_as!(
        Brand,
        "select id, name, description, agent_kind, settings, created_at from brands order by id",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Sets what the brand's Agent Card says of it (its `name` and `description`);
/// false when the brand is unknown.
pub async fn set_card_text(
    db: impl PgExecutor<'_>,
    id: &BrandId,
    name: &str,
    description: &str,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brands set name = $2, description = $3 where id = $1",
        id,
        name,
        description,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The brand's settings, its row locked until the transaction ends: for an
/// edit that reads a setting and writes it back (the `authorization_details`
/// types), so that two edits at once apply one after the other instead of
/// the second overwriting the first with what it read before. `None`: no
/// such brand.
pub async fn lock_settings(
    conn: &mut sqlx::PgConnection,
    id: &BrandId,
) -> DbResult<Option<serde_json::Value>> {
    sqlx::query_scalar!("select settings from brands where id = $1 for update", id)
        .fetch_optional(conn)
        .await
        .map_err(Into::into)
}

/// Replaces one top-level key of the brand's settings; false when the brand is unknown.
pub async fn set_setting(
    db: impl PgExecutor<'_>,
    id: &BrandId,
    key: &str,
    value: &serde_json::Value,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brands set settings = jsonb_set(settings, array[$2], $3, true) where id = $1",
        id,
        key,
        value,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::is_valid_brand_id;

    #[test]
    fn brand_ids_are_url_safe() {
        for ok in ["demo", "acme-store", "a", "shop_2"] {
            assert!(is_valid_brand_id(ok), "{ok}");
        }
        for bad in ["", "Demo", "-x", "a/b", "a b", "é", &"x".repeat(64)] {
            assert!(!is_valid_brand_id(bad), "{bad}");
        }
    }
}
