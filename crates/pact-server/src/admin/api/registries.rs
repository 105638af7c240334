//! `/admin/api/v1/registries` and `/agents/block-host`: the trusted
//! registries of personal agents (PACT §3.1's trusted-issuer registry, the
//! `registry` admission policy) and blocked hosts (issue 31). Both concern
//! every brand, so changing them needs a caller limited to no brand. The
//! actions are the ops functions the CLI and console call.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::{self, rfc3339};
use crate::admin::ops;
use crate::admin::role::Role;
use crate::state::AppState;

fn registry_json(r: &pact_db::registries::Registry) -> Value {
    json!({
        "name": r.name,
        "url": r.url,
        "keys": r.keys,
        "refresh_seconds": r.refresh_seconds,
        "created_at": rfc3339(r.created_at),
        "next_fetch_at": rfc3339(r.next_fetch_at),
        "last_fetched_at": r.last_fetched_at.map(rfc3339),
        "last_error": r.last_error,
        "list_issued_at": r.list_issued_at.map(rfc3339),
        "list_expires_at": r.list_expires_at.map(rfc3339),
        "listed": r.listed,
    })
}

/// `GET /registries`: each registry with what its last fetch did (a refused
/// list's reason is `last_error`).
pub async fn list(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Viewer, "registry.list")
        .await?;
    let items: Vec<Value> = pact_db::registries::list(&state.db)
        .await?
        .iter()
        .map(registry_json)
        .collect();
    caller
        .record(&state.db, "registry.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewRegistry {
    pub name: String,
    pub url: String,
    pub keys: Value,
    pub refresh_seconds: Option<i32>,
}

/// `POST /registries` `{"name", "url", "keys", "refresh_seconds"?}`.
pub async fn add(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Owner, "registry.add").await?;
    caller.require_unlimited(&state, "registry.add").await?;
    let r: NewRegistry = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    let added = ops::registries::add(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &r.name,
        &r.url,
        &r.keys,
        r.refresh_seconds,
        state.config.jwks.allow_loopback,
        state.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(registry_json(&added)))
}

/// `POST /registries/{name}/refresh`: fetch and apply the list now. A list
/// refused changes nothing and answers 422 with the reason.
pub async fn refresh(
    State(state): State<AppState>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Operator, "registry.refresh")
        .await?;
    caller.require_unlimited(&state, "registry.refresh").await?;
    let now = state.clock.now();
    let registry = pact_db::registries::claim(&state.db, &name, now)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    caller
        .record(&state.db, "registry.refresh", Some(&name), None, json!({}))
        .await?;
    match crate::registry::refresh(&state.db, &state.config.jwks, &registry, now).await {
        Ok(applied) => Ok(Json(json!({
            "name": name,
            "listed": applied.listed,
            "skipped": applied.skipped,
            "delisted": applied.delisted,
            "revoked_grants": applied.revoked_grants,
        }))),
        Err(crate::registry::RefreshError::Db(e)) => Err(e.into()),
        Err(e) => Err(AdminApiError::invalid(format!("{e}; nothing changed"))),
    }
}

/// `POST /registries/{name}/remove`: the agents it listed are no longer admitted
/// and their grants are revoked.
pub async fn remove(
    State(state): State<AppState>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Owner, "registry.remove")
        .await?;
    caller.require_unlimited(&state, "registry.remove").await?;
    let mut tx = state.db.begin().await?;
    let (agents, grants) = ops::registries::remove(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &name,
        state.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(json!({
        "name": name,
        "unlisted_agents": agents,
        "revoked_grants": grants,
    })))
}

/// `GET /blocked-hosts`
pub async fn blocked_hosts(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Viewer, "agent.list").await?;
    let items: Vec<Value> = pact_db::registries::blocked_hosts(&state.db)
        .await?
        .iter()
        .map(|b| json!({"host": b.host, "reason": b.reason, "blocked_at": rfc3339(b.blocked_at)}))
        .collect();
    caller
        .record(
            &state.db,
            "agent.list",
            None,
            None,
            json!({"blocked_hosts": true}),
        )
        .await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostBlock {
    pub host: String,
    pub reason: Option<String>,
}

/// `POST /agents/block-host` `{"host", "reason"}`
pub async fn block_host(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Operator, "agent.block_host")
        .await?;
    caller.require_unlimited(&state, "agent.block_host").await?;
    let b: HostBlock = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    let (host, disabled, revoked) = ops::agents::block_host(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &b.host,
        b.reason.as_deref(),
        state.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(json!({
        "host": host,
        "disabled_agents": disabled,
        "revoked_grants": revoked,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub host: String,
}

/// `POST /agents/unblock-host` `{"host"}`
pub async fn unblock_host(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Operator, "agent.unblock_host")
        .await?;
    caller
        .require_unlimited(&state, "agent.unblock_host")
        .await?;
    let h: Host = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    let host = ops::agents::unblock_host(&mut tx, &caller.actor, Some(&caller.ip), &h.host).await?;
    tx.commit().await?;
    Ok(Json(json!({ "host": host, "blocked": false })))
}
