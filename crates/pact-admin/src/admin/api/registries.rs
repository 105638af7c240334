//! `/admin/api/v1/registries` and `/agents/block-host`: the trusted
//! registries of personal agents (PACT §3.1's trusted-issuer registry, the
//! `registry` admission policy) and blocked hosts (issue 31). Both concern
//! every brand, so changing them needs a caller limited to no brand. The
//! actions are the ops functions the CLI and console call.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use pact_node::node::Node;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::answer::{Time, time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::fields;
use super::params;
use crate::admin::ops;
use crate::admin::role::Role;

/// A trusted registry of personal agents (PACT §3.1) and what its last
/// fetch did.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Registry)]
pub struct RegistryView {
    pub name: String,
    pub url: String,
    /// The pinned public JWKs its lists are signed with.
    #[schema(value_type = Vec<Object>)]
    pub keys: Value,
    pub refresh_seconds: i32,
    pub created_at: Time,
    pub next_fetch_at: Time,
    pub last_fetched_at: Option<Time>,
    /// Why the last list was refused, if it was.
    pub last_error: Option<String>,
    pub list_issued_at: Option<Time>,
    pub list_expires_at: Option<Time>,
    /// How many agents it lists now.
    pub listed: i32,
}

impl From<pact_db::registries::Registry> for RegistryView {
    fn from(r: pact_db::registries::Registry) -> Self {
        Self {
            name: r.name,
            url: r.url,
            keys: r.keys,
            refresh_seconds: r.refresh_seconds,
            created_at: Time(r.created_at),
            next_fetch_at: Time(r.next_fetch_at),
            last_fetched_at: time(r.last_fetched_at),
            last_error: r.last_error,
            list_issued_at: time(r.list_issued_at),
            list_expires_at: time(r.list_expires_at),
            listed: r.listed,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RegistryList {
    pub items: Vec<RegistryView>,
}

/// What fetching a registry's list now did.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegistryRefreshed {
    pub name: String,
    pub listed: u64,
    pub skipped: u64,
    /// Agents listed before and not any more (their grants were revoked).
    pub delisted: Vec<String>,
    pub revoked_grants: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RegistryRemoved {
    pub name: String,
    pub unlisted_agents: usize,
    pub revoked_grants: u64,
}

/// A host whose agents are refused whatever lists or registers them.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = BlockedHost)]
pub struct BlockedHostView {
    pub host: String,
    pub reason: String,
    pub blocked_at: Time,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BlockedHostList {
    pub items: Vec<BlockedHostView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HostBlocked {
    pub host: String,
    /// The agents on the host this request disabled.
    pub disabled_agents: Vec<String>,
    pub revoked_grants: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HostUnblocked {
    pub host: String,
    pub blocked: bool,
}

/// `GET /registries`: each registry with what its last fetch did (a refused
/// list's reason is `last_error`).
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<RegistryList>, AdminApiError> {
    caller.require(&node, Role::Viewer, "registry.list").await?;
    let items = pact_db::registries::list(&node.db)
        .await?
        .into_iter()
        .map(RegistryView::from)
        .collect();
    caller
        .record(&node.db, "registry.list", None, None, json!({}))
        .await?;
    Ok(Json(RegistryList { items }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRegistry {
    #[schema(schema_with = fields::registry_name)]
    pub name: String,
    #[schema(schema_with = fields::uri)]
    pub url: String,
    /// The pinned public keys: a JWKS, an array of JWKs or one JWK (ES256,
    /// each with a kid).
    #[schema(schema_with = fields::keys)]
    pub keys: Value,
    #[schema(minimum = 60, maximum = 86400)]
    pub refresh_seconds: Option<i32>,
}

/// `POST /registries` `{"name", "url", "keys", "refresh_seconds"?}`.
pub async fn add(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<RegistryView>, AdminApiError> {
    caller.require(&node, Role::Owner, "registry.add").await?;
    caller.require_unlimited(&node, "registry.add").await?;
    let r: NewRegistry = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    let added = ops::registries::add(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &r.name,
        &r.url,
        &r.keys,
        r.refresh_seconds,
        node.config.jwks.allow_loopback,
        node.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(added.into()))
}

/// `POST /registries/{name}/refresh`: fetch and apply the list now. A list
/// refused changes nothing and answers 400 `invalid_request` with the reason.
pub async fn refresh(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<RegistryRefreshed>, AdminApiError> {
    caller
        .require(&node, Role::Operator, "registry.refresh")
        .await?;
    caller.require_unlimited(&node, "registry.refresh").await?;
    let now = node.clock.now();
    let registry = pact_db::registries::claim(&node.db, &name, now)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    // Recorded with its outcome: what the list changed, or why it was refused.
    let refreshed = ops::registries::refresh(
        &node.db,
        &node.config.jwks,
        &caller.actor,
        Some(&caller.ip),
        &registry,
        now,
    )
    .await?
    .map_err(AdminApiError::invalid)?;
    Ok(Json(RegistryRefreshed {
        name,
        listed: refreshed.listed,
        skipped: refreshed.skipped,
        delisted: refreshed.delisted,
        revoked_grants: refreshed.revoked_grants,
    }))
}

/// `POST /registries/{name}/remove`: the agents it listed are no longer admitted
/// and their grants are revoked.
pub async fn remove(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<RegistryRemoved>, AdminApiError> {
    caller
        .require(&node, Role::Owner, "registry.remove")
        .await?;
    caller.require_unlimited(&node, "registry.remove").await?;
    let mut tx = node.db.begin().await?;
    let (agents, grants) = ops::registries::remove(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &name,
        node.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(RegistryRemoved {
        name,
        unlisted_agents: agents,
        revoked_grants: grants,
    }))
}

/// `GET /blocked-hosts`
pub async fn blocked_hosts(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<BlockedHostList>, AdminApiError> {
    caller.require(&node, Role::Viewer, "agent.list").await?;
    let items = pact_db::registries::blocked_hosts(&node.db)
        .await?
        .into_iter()
        .map(|b| BlockedHostView {
            host: b.host,
            reason: b.reason,
            blocked_at: Time(b.blocked_at),
        })
        .collect();
    caller
        .record(
            &node.db,
            "agent.list",
            None,
            None,
            json!({"blocked_hosts": true}),
        )
        .await?;
    Ok(Json(BlockedHostList { items }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HostBlock {
    #[schema(schema_with = fields::host)]
    pub host: String,
    /// Required: `ops::agents::block_host` refuses a block without one.
    #[schema(schema_with = fields::non_blank_reason, required = true)]
    pub reason: Option<String>,
}

/// `POST /agents/block-host` `{"host", "reason"}`
pub async fn block_host(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<HostBlocked>, AdminApiError> {
    caller
        .require(&node, Role::Operator, "agent.block_host")
        .await?;
    caller.require_unlimited(&node, "agent.block_host").await?;
    let b: HostBlock = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    let (host, disabled, revoked) = ops::agents::block_host(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &b.host,
        b.reason.as_deref(),
        node.clock.now(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(HostBlocked {
        host,
        disabled_agents: disabled,
        revoked_grants: revoked,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    #[schema(schema_with = fields::host)]
    pub host: String,
}

/// `POST /agents/unblock-host` `{"host"}`
pub async fn unblock_host(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<HostUnblocked>, AdminApiError> {
    caller
        .require(&node, Role::Operator, "agent.unblock_host")
        .await?;
    caller
        .require_unlimited(&node, "agent.unblock_host")
        .await?;
    let h: Host = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    let host = ops::agents::unblock_host(&mut tx, &caller.actor, Some(&caller.ip), &h.host).await?;
    tx.commit().await?;
    Ok(Json(HostUnblocked {
        host,
        blocked: false,
    }))
}
