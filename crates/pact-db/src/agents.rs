//! Registered personal-agent platforms (PACT §3: issuer, jwksUri, enabled).

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Agent {
    pub issuer: String,
    pub jwks_uri: String,
    pub name: String,
    pub enabled: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Registers a PA, or updates its JWKS URI and name when the issuer is known
/// (re-registering is how an operator moves a PA to a new JWKS URI).
pub async fn upsert(
    db: impl PgExecutor<'_>,
    issuer: &str,
    jwks_uri: &str,
    name: &str,
) -> DbResult<Agent> {
    sqlx::query_as(
        "insert into agents (issuer, jwks_uri, name) values ($1, $2, $3) \
         on conflict (issuer) do update set jwks_uri = excluded.jwks_uri, name = excluded.name, \
         updated_at = now() returning issuer, jwks_uri, name, enabled, created_at, updated_at",
    )
    .bind(issuer)
    .bind(jwks_uri)
    .bind(name)
    .fetch_one(db)
    .await
}

pub async fn find(db: impl PgExecutor<'_>, issuer: &str) -> DbResult<Option<Agent>> {
    sqlx::query_as(
        "select issuer, jwks_uri, name, enabled, created_at, updated_at from agents where issuer = $1",
    )
    .bind(issuer)
    .fetch_optional(db)
    .await
}

pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<Agent>> {
    sqlx::query_as(
        "select issuer, jwks_uri, name, enabled, created_at, updated_at from agents order by issuer",
    )
    .fetch_all(db)
    .await
}

/// Enables or disables a PA; false when the issuer is unknown. The table
/// trigger announces the change so every node drops its cached view at once.
pub async fn set_enabled(db: impl PgExecutor<'_>, issuer: &str, enabled: bool) -> DbResult<bool> {
    let done = sqlx::query("update agents set enabled = $2, updated_at = now() where issuer = $1")
        .bind(issuer)
        .bind(enabled)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The registered PA and the addressed brand, fetched together in one round
/// trip because every authenticated A2A request needs both. The caller still
/// decides in protocol order: 401 for the PA first, 404 for the brand after.
#[derive(Clone, Debug, Default)]
pub struct AgentAndBrand {
    pub agent: Option<Agent>,
    pub brand: Option<crate::brands::Brand>,
}

#[derive(sqlx::FromRow)]
struct AgentAndBrandRow {
    issuer: Option<String>,
    jwks_uri: Option<String>,
    agent_name: Option<String>,
    enabled: Option<bool>,
    agent_created_at: Option<OffsetDateTime>,
    agent_updated_at: Option<OffsetDateTime>,
    brand_id: Option<String>,
    brand_name: Option<String>,
    description: Option<String>,
    agent_kind: Option<String>,
    settings: Option<serde_json::Value>,
    brand_created_at: Option<OffsetDateTime>,
}

pub async fn find_with_brand(
    db: impl PgExecutor<'_>,
    issuer: &str,
    brand_id: &str,
) -> DbResult<AgentAndBrand> {
    let row: AgentAndBrandRow = sqlx::query_as(
        "select a.issuer, a.jwks_uri, a.name as agent_name, a.enabled, \
                a.created_at as agent_created_at, a.updated_at as agent_updated_at, \
                b.id as brand_id, b.name as brand_name, b.description, b.agent_kind, b.settings, \
                b.created_at as brand_created_at \
         from (select 1) as one \
         left join agents a on a.issuer = $1 \
         left join brands b on b.id = $2",
    )
    .bind(issuer)
    .bind(brand_id)
    .fetch_one(db)
    .await?;
    let agent = match (
        row.issuer,
        row.jwks_uri,
        row.agent_name,
        row.enabled,
        row.agent_created_at,
        row.agent_updated_at,
    ) {
        (
            Some(issuer),
            Some(jwks_uri),
            Some(name),
            Some(enabled),
            Some(created_at),
            Some(updated_at),
        ) => Some(Agent {
            issuer,
            jwks_uri,
            name,
            enabled,
            created_at,
            updated_at,
        }),
        _ => None,
    };
    let brand = match (
        row.brand_id,
        row.brand_name,
        row.description,
        row.agent_kind,
        row.settings,
        row.brand_created_at,
    ) {
        (
            Some(id),
            Some(name),
            Some(description),
            Some(agent_kind),
            Some(settings),
            Some(created_at),
        ) => Some(crate::brands::Brand {
            id,
            name,
            description,
            agent_kind,
            settings,
            created_at,
        }),
        _ => None,
    };
    Ok(AgentAndBrand { agent, brand })
}
