//! `/admin/api/v1/agents`: registered personal-agent platforms (PACT §3):
//! list, register, disable (revoking every grant it holds) and enable.
//! Platforms serve every brand, so changing one needs a caller limited to no
//! brand; a brand-limited caller sees counts for its brands only.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::{self, rfc3339};
use crate::admin::ops;
use crate::admin::role::Role;
use crate::state::AppState;
use crate::who;

pub fn agent_json(a: &pact_db::agents::Agent, grants: i64, people: i64) -> Value {
    json!({
        "issuer": a.issuer,
        "jwks_uri": a.jwks_uri,
        "name": a.name,
        "enabled": a.enabled,
        "verified": a.verified,
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
    let now = state.clock.now();
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
    /// RFC 7591 §2 client metadata shown on consent (`pactd agent add
    /// --homepage --logo-uri --policy-uri --tos-uri`): absent keeps what is
    /// stored, `""` removes it.
    pub homepage: Option<String>,
    pub logo_uri: Option<String>,
    pub policy_uri: Option<String>,
    pub tos_uri: Option<String>,
}

/// The JSON / form field names of the links, in [`who::LinkFlags::check_named`] order.
pub const LINK_FIELDS: [&str; 4] = ["homepage", "logo_uri", "policy_uri", "tos_uri"];

/// Checks the links and fetches the logo before anything is written (a
/// refused logo leaves the registration as it was), as `pactd agent add`
/// does; from the network, loopback only with `--allow-loopback-jwks`.
pub async fn prepare_links(
    state: &AppState,
    links: &who::LinkFlags,
) -> Result<Option<pact_node::logo_fetch::Logo>, String> {
    links.check_named(LINK_FIELDS)?;
    match links.logo_to_fetch() {
        Some(uri) => who::fetch_for_remote_registration(
            uri,
            state.config.jwks.allow_loopback,
            LINK_FIELDS[1],
        )
        .await
        .map(Some),
        None => Ok(None),
    }
}

/// Registers with the same function as `pactd agent add`, audited as
/// `agent.register` in the same transaction (shared with the console).
pub async fn register_with_links(
    state: &AppState,
    actor: &crate::admin::role::Actor,
    ip: &str,
    issuer: &str,
    jwks_uri: &str,
    name: &str,
    links: &who::LinkFlags,
) -> Result<
    (
        pact_db::agents::Agent,
        Option<pact_db::agents::AgentMetadata>,
    ),
    AdminApiError,
> {
    let logo = prepare_links(state, links)
        .await
        .map_err(AdminApiError::invalid)?;
    let mut tx = state.db.begin().await?;
    let registration = ops::agents::Registration {
        issuer,
        jwks_uri,
        name,
        links,
        logo: logo.as_ref(),
        pa_limit: None,
        user_limit: None,
    };
    let now = state.clock.now();
    let done = ops::agents::register(&mut tx, actor, Some(ip), &registration, now).await?;
    tx.commit().await?;
    Ok(done)
}

/// The one check of a registration (shared with the console and the CLI).
pub use crate::admin::ops::agents::check_registration;

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
    let links = who::LinkFlags {
        homepage: r.homepage,
        logo: r.logo_uri,
        policy: r.policy_uri,
        tos: r.tos_uri,
    };
    let (a, meta) = register_with_links(
        &state,
        &caller.actor,
        &caller.ip,
        &r.issuer,
        &r.jwks_uri,
        &name,
        &links,
    )
    .await?;
    let mut v = agent_json(&a, 0, 0);
    if let Some(m) = meta {
        v["homepage"] = json!(m.homepage_uri);
        v["logo_uri"] = json!(m.logo_uri);
        v["policy_uri"] = json!(m.policy_uri);
        v["tos_uri"] = json!(m.tos_uri);
        v["logo"] = json!(m.logo_sha256.map(|h| format!("/logos/{h}")));
    }
    Ok(Json(v))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Toggle {
    pub issuer: String,
    pub reason: Option<String>,
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
    let mut tx = state.db.begin().await?;
    let revoked = crate::admin::ops::agents::set_enabled(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &t.issuer,
        enabled,
        t.reason.as_deref(),
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

/// `GET /agents/seen`: the agents admitted under the open policy (PACT §3.1),
/// most recently seen first, with their tier, requests and live grants.
pub async fn seen(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Viewer, "agent.list").await?;
    let items: Vec<Value> = pact_db::agents::sightings(&state.db, 500)
        .await?
        .iter()
        .map(|s| {
            json!({
                "issuer": s.issuer,
                "name": s.name,
                "jwks_uri": s.jwks_uri,
                "verified": s.verified,
                "enabled": s.enabled,
                "first_seen_at": rfc3339(s.first_seen_at),
                "last_seen_at": rfc3339(s.last_seen_at),
                "requests": s.requests,
                "active_grants": s.grants,
                "claimed_name": s.claimed_name,
                "claimed_logo_uri": s.claimed_logo_uri,
            })
        })
        .collect();
    caller
        .record(&state.db, "agent.list", None, None, json!({"seen": true}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Issuer {
    pub issuer: String,
}

/// `POST /agents/verify` `{"issuer"}`: an agent admitted under `open` joins
/// the verified tier.
pub async fn verify(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Owner, "agent.verify").await?;
    caller.require_unlimited(&state, "agent.verify").await?;
    let t: Issuer = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    crate::admin::ops::agents::verify(&mut tx, &caller.actor, Some(&caller.ip), &t.issuer).await?;
    tx.commit().await?;
    state.door.forget(&t.issuer);
    Ok(Json(json!({ "issuer": t.issuer, "verified": true })))
}

/// `POST /agents/forget` `{"issuer"}`: an unverified agent is dropped with
/// its conversations and grants.
pub async fn forget(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Operator, "agent.forget")
        .await?;
    caller.require_unlimited(&state, "agent.forget").await?;
    let t: Issuer = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    crate::admin::ops::agents::forget(&mut tx, &caller.actor, Some(&caller.ip), &t.issuer).await?;
    tx.commit().await?;
    state.door.forget(&t.issuer);
    Ok(Json(json!({ "issuer": t.issuer, "forgotten": true })))
}
