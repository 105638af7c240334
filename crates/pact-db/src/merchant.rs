//! A merchant's own agent and systems: the brand's agent URL, its webhook
//! signing secrets, its tools, and its API credentials.

use crate::ids::BrandId;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BrandAgent {
    pub brand_id: BrandId,
    pub url: String,
    pub agent_timeout_ms: i32,
    pub tool_timeout_ms: i32,
}

pub async fn find_agent(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
) -> DbResult<Option<BrandAgent>> {
    sqlx::query_as!(
        BrandAgent,
        "select brand_id, url, agent_timeout_ms, tool_timeout_ms from brand_agents where brand_id = $1",
        brand_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Points the brand at its agent and switches it to the webhook kind.
/// Timeouts left `None` keep their current (or default) value.
pub async fn set_agent(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    url: &str,
    agent_timeout_ms: Option<i32>,
    tool_timeout_ms: Option<i32>,
) -> DbResult<()> {
    sqlx::query!(
        "with kind as (update brands set agent_kind = 'webhook' where id = $1) \
         insert into brand_agents (brand_id, url, agent_timeout_ms, tool_timeout_ms) \
         values ($1, $2, coalesce($3, 20000), coalesce($4, 10000)) \
         on conflict (brand_id) do update set url = excluded.url, \
           agent_timeout_ms = coalesce($3, brand_agents.agent_timeout_ms), \
           tool_timeout_ms = coalesce($4, brand_agents.tool_timeout_ms), updated_at = now()",
        brand_id,
        url,
        agent_timeout_ms,
        tool_timeout_ms,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Changes only the timeouts of a brand that already has an agent URL.
pub async fn set_timeouts(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    agent_timeout_ms: Option<i32>,
    tool_timeout_ms: Option<i32>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brand_agents set agent_timeout_ms = coalesce($2, agent_timeout_ms), \
         tool_timeout_ms = coalesce($3, tool_timeout_ms), updated_at = now() where brand_id = $1",
        brand_id,
        agent_timeout_ms,
        tool_timeout_ms,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Back to the built-in demo agent (the URL and secrets are kept).
pub async fn use_demo_agent(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brands set agent_kind = 'demo' where id = $1",
        brand_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookSecret {
    pub id: Uuid,
    pub brand_id: BrandId,
    pub sealed: Vec<u8>,
    pub created_at: OffsetDateTime,
    pub retired_at: Option<OffsetDateTime>,
}

/// The secrets that sign now: the current one and those still in their grace.
pub async fn signing_secrets(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    now: OffsetDateTime,
) -> DbResult<Vec<WebhookSecret>> {
    sqlx::query_as!(
        WebhookSecret,
        "select id, brand_id, sealed, created_at, retired_at from brand_webhook_secrets \
         where brand_id = $1 and (retired_at is null or retired_at > $2) \
         order by retired_at is not null, created_at desc",
        brand_id,
        now,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn has_current_secret(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<bool> {
    sqlx::query_scalar!(
        "select exists (select 1 from brand_webhook_secrets where brand_id = $1 and retired_at is null) \
         as \"exists!\"",
        brand_id,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Retires the current secret at `retire_at` (its grace end), and brings
/// forward the end of any older secret still in a longer grace, so a rotation
/// with no grace (after a leak) stops every old secret at once. Call in the
/// transaction that inserts the new one.
pub async fn retire_current_secret(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    retire_at: OffsetDateTime,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "update brand_webhook_secrets set retired_at = $2 \
         where brand_id = $1 and (retired_at is null or retired_at > $2)",
        brand_id,
        retire_at,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

pub async fn insert_secret(
    db: impl PgExecutor<'_>,
    id: Uuid,
    brand_id: &BrandId,
    sealed: &[u8],
) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_webhook_secrets (id, brand_id, sealed) values ($1, $2, $3)",
        id,
        brand_id,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// How pactd reaches a tool (`brand_tools.kind`).
pub const TOOL_KIND_URL: &str = "url";
/// A tool on the merchant's MCP server: `url` is the server, `remote_name` the tool there.
pub const TOOL_KIND_MCP: &str = "mcp";

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BrandTool {
    pub brand_id: BrandId,
    pub name: String,
    pub scope: Option<String>,
    pub url: String,
    pub description: String,
    pub enforce: serde_json::Value,
    pub input_schema: Option<serde_json::Value>,
    /// [`TOOL_KIND_URL`] or [`TOOL_KIND_MCP`].
    pub kind: String,
    /// The tool's name at the merchant's MCP server (kind `mcp` only).
    pub remote_name: Option<String>,
    /// False for an imported tool no one has given a scope yet: refused for
    /// everyone (deny by default, migration 0020).
    pub mapped: bool,
    /// How one call reads to a person asked to approve it on its own, with
    /// `{arg}` placeholders (migration 0025); empty: the description and
    /// the arguments.
    pub summary: String,
}

impl BrandTool {
    /// A tool pactd reaches by POSTing the signed `pact.tool_call` to `url`.
    pub fn at_url(brand_id: &BrandId, name: &str, scope: Option<&str>, url: &str) -> Self {
        Self {
            brand_id: brand_id.to_owned(),
            name: name.to_owned(),
            scope: scope.map(str::to_owned),
            url: url.to_owned(),
            description: String::new(),
            enforce: serde_json::json!([]),
            input_schema: None,
            kind: TOOL_KIND_URL.to_owned(),
            remote_name: None,
            mapped: true,
            summary: String::new(),
        }
    }

    pub fn is_mcp(&self) -> bool {
        self.kind == TOOL_KIND_MCP
    }
}

pub async fn upsert_tool(db: impl PgExecutor<'_>, t: &BrandTool) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_tools (brand_id, name, scope, url, description, enforce, input_schema, \
         kind, remote_name, mapped, summary) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) on conflict (brand_id, name) do update set \
         scope = excluded.scope, url = excluded.url, description = excluded.description, \
         enforce = excluded.enforce, input_schema = excluded.input_schema, kind = excluded.kind, \
         remote_name = excluded.remote_name, mapped = excluded.mapped, summary = excluded.summary",
        t.brand_id.as_str(),
        t.name,
        t.scope,
        t.url,
        t.description,
        t.enforce,
        t.input_schema,
        t.kind,
        t.remote_name,
        t.mapped,
        t.summary,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Gives a tool its scope (`None`: public) and makes it usable; false when
/// the brand has no such tool.
pub async fn set_tool_scope(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    name: &str,
    scope: Option<&str>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brand_tools set scope = $3, mapped = true where brand_id = $1 and name = $2",
        brand_id,
        name,
        scope,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Sets a tool's limit rules (as written) and summary; false when the brand
/// has no such tool.
pub async fn set_tool_rules(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    name: &str,
    enforce: &serde_json::Value,
    summary: Option<&str>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brand_tools set enforce = $3, summary = coalesce($4, summary) \
         where brand_id = $1 and name = $2",
        brand_id,
        name,
        enforce,
        summary,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn list_tools(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<Vec<BrandTool>> {
    sqlx::query_as!(
        BrandTool,
        "select brand_id, name, scope, url, description, enforce, input_schema, kind, remote_name, \
         mapped, summary from brand_tools where brand_id = $1 order by name",
        brand_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn remove_tool(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    name: &str,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "delete from brand_tools where brand_id = $1 and name = $2",
        brand_id,
        name,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApiCredential {
    pub client_id: String,
    pub brand_id: BrandId,
    pub name: String,
    pub secret_hash: Vec<u8>,
    pub created_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
}

pub async fn insert_credential(
    db: impl PgExecutor<'_>,
    client_id: &str,
    brand_id: &BrandId,
    name: &str,
    secret_hash: &[u8],
) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_api_credentials (client_id, brand_id, name, secret_hash) values ($1, $2, $3, $4)",
        client_id,
        brand_id,
        name,
        secret_hash,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn find_credential(
    db: impl PgExecutor<'_>,
    client_id: &str,
) -> DbResult<Option<ApiCredential>> {
    sqlx::query_as!(
        ApiCredential,
        "select client_id, brand_id, name, secret_hash, created_at, revoked_at from brand_api_credentials where client_id = $1",
        client_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list_credentials(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
) -> DbResult<Vec<ApiCredential>> {
    sqlx::query_as!(
        ApiCredential,
        "select client_id, brand_id, name, secret_hash, created_at, revoked_at from brand_api_credentials where brand_id = $1 order by created_at",
        brand_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn revoke_credential(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    client_id: &str,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brand_api_credentials set revoked_at = now() \
         where brand_id = $1 and client_id = $2 and revoked_at is null",
        brand_id,
        client_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
