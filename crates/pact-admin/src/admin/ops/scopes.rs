//! Staff defining a brand's scopes (PACT §5.2: what an agent may ask for and
//! a person approves, one checkbox each). Removing a scope stops offering it;
//! grants that hold it keep it until they end or are revoked, as the person
//! approved it.

use pact_db::ids::BrandId;
use serde::Deserialize;
use serde_json::json;
use sqlx::PgConnection;

use super::{OpsError, audit};
use crate::admin::role::Actor;

/// One scope as staff define it (the admin API's request body too).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeDefinition {
    #[schema(schema_with = crate::admin::api::fields::scope_id)]
    pub scope_id: String,
    #[schema(schema_with = crate::admin::api::fields::scope_description)]
    pub description: String,
    #[serde(default)]
    pub requires_mfa: bool,
    /// Agents admitted under the open policy, not yet verified by staff, may
    /// request it.
    #[serde(default)]
    pub unverified_allowed: bool,
}

/// Adds or changes one scope of `brand_id` with `scope.upsert`.
pub async fn upsert(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand_id: &BrandId,
    def: &ScopeDefinition,
) -> Result<(), OpsError> {
    crate::domain::scopes::check_definition(&def.scope_id, &def.description)
        .map_err(OpsError::Invalid)?;
    pact_db::scopes::upsert(
        &mut *tx,
        brand_id,
        &def.scope_id,
        &def.description,
        def.requires_mfa,
    )
    .await?;
    pact_db::scopes::set_unverified_allowed(
        &mut *tx,
        brand_id,
        &def.scope_id,
        def.unverified_allowed,
    )
    .await?;
    audit(
        tx,
        actor,
        ip,
        "scope.upsert",
        &def.scope_id,
        Some(brand_id),
        json!({"description": def.description, "requires_mfa": def.requires_mfa,
               "unverified_allowed": def.unverified_allowed}),
    )
    .await?;
    Ok(())
}

/// Removes one scope of `brand_id` with `scope.remove`; false (nothing
/// recorded) when the brand has no such scope.
pub async fn remove(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand_id: &BrandId,
    scope_id: &str,
) -> Result<bool, OpsError> {
    if !pact_db::scopes::remove(&mut *tx, brand_id, scope_id).await? {
        return Ok(false);
    }
    audit(
        tx,
        actor,
        ip,
        "scope.remove",
        scope_id,
        Some(brand_id),
        json!({}),
    )
    .await?;
    Ok(true)
}
