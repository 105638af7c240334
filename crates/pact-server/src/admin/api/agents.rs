//! `/admin/api/v1/agents`: registered personal-agent platforms (PACT §3):
//! list, register, disable (revoking every grant it holds) and enable.
//! Platforms serve every brand, so changing one needs a caller limited to no
//! brand; a brand-limited caller sees counts for its brands only.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::{self, rfc3339};
use crate::admin::role::Role;
use crate::state::AppState;

pub fn agent_json(a: &pact_db::agents::Agent, grants: i64, people: i64) -> Value {
    json!({
        "issuer": a.issuer,
        "jwks_uri": a.jwks_uri,
        "name": a.name,
        "enabled": a.enabled,
        "created_at": rfc3339(a.created_at),
        "updated_at": rfc3339(a.updated_at),
        "active_grants": grants,
        "people": people,
    })
}

/// `GET /agents`
pub async fn list(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    let now = OffsetDateTime::now_utc();
    let mut items = Vec::new();
    for a in pact_db::agents::list(&state.db).await? {
        let (grants, people) = pact_db::admin_search::active_for_agent(
            &state.db,
            caller.actor.within(),
            &a.issuer,
            now,
        )
        .await?;
        items.push(agent_json(&a, grants, people));
    }
    caller
        .record(&state.db, "agent.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registration {
    pub issuer: String,
    pub jwks_uri: String,
    pub name: Option<String>,
}

/// Checks a registration (shared with the console); returns the display
/// name (the issuer when none is given).
pub fn check_registration(
    issuer: &str,
    jwks_uri: &str,
    name: Option<&str>,
) -> Result<String, String> {
    if issuer.trim().is_empty()
        || issuer.trim() != issuer
        || issuer.len() > 512
        || issuer.chars().any(char::is_control)
    {
        return Err(
            "issuer: a non-empty string without surrounding spaces (it is compared exactly, PACT §3)"
                .into(),
        );
    }
    // Loopback URIs are accepted at registration (as `pactd agent add` does);
    // the server fetches them only with --allow-loopback-jwks.
    pact_jose::check_jwks_uri(jwks_uri, true).map_err(|e| format!("jwks_uri: {e}"))?;
    match name.map(str::trim) {
        Some(n) if n.is_empty() || n.chars().count() > 200 || n.chars().any(char::is_control) => {
            Err("name: 1–200 characters, no control characters".into())
        }
        Some(n) => Ok(n.to_owned()),
        None => Ok(issuer.to_owned()),
    }
}

/// `POST /agents` `{"issuer", "jwks_uri", "name"}`: register, or move a
/// known issuer to a new JWKS URI.
pub async fn register(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Owner, "agent.register")
        .await?;
    caller.require_unlimited(&state, "agent.register").await?;
    let r: Registration = params::body(&body)?;
    let name = check_registration(&r.issuer, &r.jwks_uri, r.name.as_deref())
        .map_err(AdminApiError::invalid)?;
    let mut tx = state.db.begin().await?;
    let a = pact_db::agents::upsert(&mut *tx, &r.issuer, &r.jwks_uri, &name).await?;
    caller
        .record(
            &mut *tx,
            "agent.register",
            Some(&a.issuer),
            None,
            json!({"jwks_uri": a.jwks_uri, "name": a.name}),
        )
        .await?;
    tx.commit().await?;
    Ok(Json(agent_json(&a, 0, 0)))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toggle {
    pub issuer: String,
    pub reason: Option<String>,
}

/// Disables (revoking every grant of the platform, in one transaction with
/// the change) or enables a platform. Shared with the console.
pub async fn set_enabled(
    tx: &mut sqlx::PgConnection,
    issuer: &str,
    enabled: bool,
    reason: &str,
) -> Result<Option<u64>, AdminApiError> {
    if !pact_db::agents::set_enabled(&mut *tx, issuer, enabled).await? {
        return Ok(None);
    }
    if enabled {
        return Ok(Some(0));
    }
    let revoked = pact_db::grants::revoke_all_for_agent(
        &mut *tx,
        issuer,
        &pact_db::grants::reason::by_admin(reason),
    )
    .await?;
    Ok(Some(revoked))
}

async fn toggle(
    state: AppState,
    caller: ApiCaller,
    body: Bytes,
    enabled: bool,
) -> Result<Json<Value>, AdminApiError> {
    let action = if enabled {
        "agent.enable"
    } else {
        "agent.disable"
    };
    caller.require(&state, Role::Operator, action).await?;
    caller.require_unlimited(&state, action).await?;
    let t: Toggle = params::body(&body)?;
    let why = params::reason(t.reason.as_deref())?;
    if !enabled && why.is_none() {
        return Err(AdminApiError::invalid(
            "reason is required: it is stored with every grant this revokes",
        ));
    }
    let mut tx = state.db.begin().await?;
    let stored = why.clone().unwrap_or_else(|| "enabled".into());
    let Some(revoked) = set_enabled(&mut tx, &t.issuer, enabled, &stored).await? else {
        return Err(AdminApiError::NotFound);
    };
    caller
        .record(
            &mut *tx,
            action,
            Some(&t.issuer),
            None,
            json!({"reason": why, "revoked_grants": revoked}),
        )
        .await?;
    tx.commit().await?;
    Ok(Json(json!({
        "issuer": t.issuer,
        "enabled": enabled,
        "revoked_grants": revoked,
    })))
}

/// `POST /agents/disable` `{"issuer", "reason"}`
pub async fn disable(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    toggle(state, caller, body, false).await
}

/// `POST /agents/enable` `{"issuer", "reason"}` (revoked grants stay revoked).
pub async fn enable(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    toggle(state, caller, body, true).await
}
