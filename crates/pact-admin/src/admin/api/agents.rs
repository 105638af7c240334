//! `/admin/api/v1/agents`: registered personal-agent platforms (PACT §3):
//! list, register, disable (revoking every grant it holds) and enable.
//! Platforms serve every brand, so changing one needs a caller limited to no
//! brand; a brand-limited caller sees counts for its brands only.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use pact_node::node::{Node, NodeInner};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use super::answer::Time;
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::fields;
use super::params;
use crate::admin::ops;
use crate::admin::role::Role;
use crate::state::AppState;
use crate::who;

/// A registered personal-agent platform (PACT §3) and its live grants
/// within the caller's brands.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Agent)]
pub struct AgentView {
    pub issuer: String,
    pub jwks_uri: String,
    pub name: String,
    pub enabled: bool,
    /// Staff vouched for it (always so for an agent staff registered).
    pub verified: bool,
    pub created_at: Time,
    pub updated_at: Time,
    pub active_grants: i64,
    /// How many people those grants belong to.
    pub people: i64,
}

/// The agent as registered, with the links consent shows.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredAgent {
    #[serde(flatten)]
    pub agent: AgentView,
    #[serde(flatten)]
    pub links: AgentLinks,
}

/// RFC 7591 §2 client metadata shown on consent, as stored (`null`: none).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct AgentLinks {
    pub homepage: Option<String>,
    pub logo_uri: Option<String>,
    pub policy_uri: Option<String>,
    pub tos_uri: Option<String>,
    /// pactd's own copy of the logo, served from its origin.
    pub logo: Option<String>,
}

impl AgentView {
    pub fn of(a: &pact_db::agents::Agent, grants: i64, people: i64) -> Self {
        Self {
            issuer: a.issuer.to_string(),
            jwks_uri: a.jwks_uri.clone(),
            name: a.name.clone(),
            enabled: a.enabled,
            verified: a.verified,
            created_at: Time(a.created_at),
            updated_at: Time(a.updated_at),
            active_grants: grants,
            people,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    pub items: Vec<AgentView>,
}

/// An agent disabled or enabled by this request.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentToggled {
    pub issuer: String,
    pub enabled: bool,
    /// Grants of the agent this request revoked (disabling revokes them all).
    pub revoked_grants: u64,
}

/// An agent admitted under the open policy (PACT §3.1).
#[derive(Debug, Serialize, ToSchema)]
pub struct SeenAgent {
    pub issuer: String,
    pub name: String,
    pub jwks_uri: String,
    pub verified: bool,
    pub enabled: bool,
    pub first_seen_at: Time,
    pub last_seen_at: Time,
    pub requests: i64,
    pub active_grants: i64,
    /// What the agent says of itself, not checked by staff.
    pub claimed_name: Option<String>,
    pub claimed_logo_uri: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SeenAgentList {
    pub items: Vec<SeenAgent>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentVerified {
    pub issuer: String,
    pub verified: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentForgotten {
    pub issuer: String,
    pub forgotten: bool,
}

/// `GET /agents`
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<AgentList>, AdminApiError> {
    let now = node.clock.now();
    let mut items = Vec::new();
    for a in pact_db::agents::list(&node.db).await? {
        let (grants, people) = pact_db::admin_search::active_for_agent(
            &node.db,
            caller.actor.within(),
            &a.issuer,
            now,
        )
        .await?;
        items.push(AgentView::of(&a, grants, people));
    }
    caller
        .record(&node.db, "agent.list", None, None, json!({}))
        .await?;
    Ok(Json(AgentList { items }))
}

/// Registers a platform or changes its registration. The RFC 7591 §2
/// client metadata shown on consent (`pactd agent add
/// --homepage --logo-uri --policy-uri --tos-uri`): absent keeps what is
/// stored, `""` removes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AgentRegistration)]
pub struct Registration {
    #[schema(schema_with = fields::issuer)]
    pub issuer: String,
    #[schema(schema_with = fields::uri)]
    pub jwks_uri: String,
    #[schema(schema_with = fields::display_name)]
    pub name: Option<String>,
    /// RFC 7591 client_uri, shown on consent; "" removes it.
    #[schema(schema_with = fields::link)]
    pub homepage: Option<String>,
    /// Fetched once now and served from pactd's origin (PNG, JPEG, GIF or
    /// WebP); "" removes it.
    #[schema(schema_with = fields::link)]
    pub logo_uri: Option<String>,
    /// RFC 7591 policy_uri; "" removes it.
    #[schema(schema_with = fields::link)]
    pub policy_uri: Option<String>,
    /// RFC 7591 tos_uri; "" removes it.
    #[schema(schema_with = fields::link)]
    pub tos_uri: Option<String>,
}

/// The JSON / form field names of the links, in [`who::LinkFlags::check_named`] order.
pub const LINK_FIELDS: [&str; 4] = ["homepage", "logo_uri", "policy_uri", "tos_uri"];

/// Checks the links and fetches the logo before anything is written (a
/// refused logo leaves the registration as it was), as `pactd agent add`
/// does; from the network, loopback only with `--allow-loopback-jwks`.
pub async fn prepare_links(
    node: &NodeInner,
    links: &who::LinkFlags,
) -> Result<Option<pact_node::logo_fetch::Logo>, String> {
    links.check_named(LINK_FIELDS)?;
    match links.logo_to_fetch() {
        Some(uri) => {
            who::fetch_for_remote_registration(uri, node.config.jwks.allow_loopback, LINK_FIELDS[1])
                .await
                .map(Some)
        }
        None => Ok(None),
    }
}

/// Registers with the same function as `pactd agent add`, audited as
/// `agent.register` in the same transaction (shared with the console).
pub async fn register_with_links(
    node: &NodeInner,
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
    let logo = prepare_links(node, links)
        .await
        .map_err(AdminApiError::invalid)?;
    let mut tx = node.db.begin().await?;
    let registration = ops::agents::Registration {
        issuer,
        jwks_uri,
        name,
        links,
        logo: logo.as_ref(),
        pa_limit: None,
        user_limit: None,
    };
    let now = node.clock.now();
    let done = ops::agents::register(&mut tx, actor, Some(ip), &registration, now).await?;
    tx.commit().await?;
    Ok(done)
}

/// The one check of a registration (shared with the console and the CLI).
pub use crate::admin::ops::agents::check_registration;

/// `POST /agents` `{"issuer", "jwks_uri", "name"}`: register, or move a
/// known issuer to a new JWKS URI.
pub async fn register(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<RegisteredAgent>, AdminApiError> {
    caller.require(&node, Role::Owner, "agent.register").await?;
    caller.require_unlimited(&node, "agent.register").await?;
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
        &node,
        &caller.actor,
        &caller.ip,
        &r.issuer,
        &r.jwks_uri,
        &name,
        &links,
    )
    .await?;
    let links = meta.map_or(AgentLinks::default(), |m| AgentLinks {
        homepage: m.homepage_uri,
        logo_uri: m.logo_uri,
        policy_uri: m.policy_uri,
        tos_uri: m.tos_uri,
        logo: m.logo_sha256.map(|h| format!("/logos/{h}")),
    });
    Ok(Json(RegisteredAgent {
        agent: AgentView::of(&a, 0, 0),
        links,
    }))
}

/// The body of enabling an agent.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AgentToggle)]
pub struct Toggle {
    pub issuer: String,
    #[schema(schema_with = fields::reason)]
    pub reason: Option<String>,
}

/// The body of disabling an agent: the same fields, the reason required and
/// not blank (it is stored with every grant the disabling revokes;
/// `ops::agents::set_enabled` refuses one without it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AgentDisable)]
pub struct Disable {
    pub issuer: String,
    #[schema(schema_with = fields::non_blank_reason, required = true)]
    pub reason: Option<String>,
}

/// The role and the brand limit first (docs/admin.md: a request the role
/// does not allow is refused with 403 before anything else, and recorded),
/// then the body.
async fn may_toggle(node: &Node, caller: &ApiCaller, enabled: bool) -> Result<(), AdminApiError> {
    let action = if enabled {
        "agent.enable"
    } else {
        "agent.disable"
    };
    caller.require(node, Role::Operator, action).await?;
    caller.require_unlimited(node, action).await
}

async fn toggle(
    node: Node,
    caller: ApiCaller,
    t: Toggle,
    enabled: bool,
) -> Result<Json<AgentToggled>, AdminApiError> {
    let mut tx = node.db.begin().await?;
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
    Ok(Json(AgentToggled {
        issuer: t.issuer,
        enabled,
        revoked_grants: revoked,
    }))
}

/// `POST /agents/disable` `{"issuer", "reason"}`
pub async fn disable(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<AgentToggled>, AdminApiError> {
    may_toggle(&node, &caller, false).await?;
    let Disable { issuer, reason } = params::body(&body)?;
    toggle(node, caller, Toggle { issuer, reason }, false).await
}

/// `POST /agents/enable` `{"issuer", "reason"}` (revoked grants stay revoked).
pub async fn enable(
    State(node): State<Node>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<AgentToggled>, AdminApiError> {
    may_toggle(&node, &caller, true).await?;
    let t: Toggle = params::body(&body)?;
    toggle(node, caller, t, true).await
}

/// `GET /agents/seen`: the agents admitted under the open policy (PACT §3.1),
/// most recently seen first, with their tier, requests and live grants.
pub async fn seen(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<SeenAgentList>, AdminApiError> {
    caller.require(&node, Role::Viewer, "agent.list").await?;
    let items = pact_db::agents::sightings(&node.db, 500, caller.actor.within(), node.clock.now())
        .await?
        .into_iter()
        .map(|s| SeenAgent {
            issuer: s.issuer.into(),
            name: s.name,
            jwks_uri: s.jwks_uri,
            verified: s.verified,
            enabled: s.enabled,
            first_seen_at: Time(s.first_seen_at),
            last_seen_at: Time(s.last_seen_at),
            requests: s.requests,
            active_grants: s.grants,
            claimed_name: s.claimed_name,
            claimed_logo_uri: s.claimed_logo_uri,
        })
        .collect();
    caller
        .record(&node.db, "agent.list", None, None, json!({"seen": true}))
        .await?;
    Ok(Json(SeenAgentList { items }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = AgentIssuer)]
pub struct Issuer {
    pub issuer: String,
}

/// `POST /agents/verify` `{"issuer"}`: an agent admitted under `open` joins
/// the verified tier.
pub async fn verify(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<AgentVerified>, AdminApiError> {
    caller.require(&state, Role::Owner, "agent.verify").await?;
    caller.require_unlimited(&state, "agent.verify").await?;
    let t: Issuer = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    crate::admin::ops::agents::verify(&mut tx, &caller.actor, Some(&caller.ip), &t.issuer).await?;
    tx.commit().await?;
    state.door.forget(&t.issuer);
    Ok(Json(AgentVerified {
        issuer: t.issuer,
        verified: true,
    }))
}

/// `POST /agents/forget` `{"issuer"}`: an unverified agent is dropped with
/// its conversations and grants.
pub async fn forget(
    State(state): State<AppState>,
    caller: ApiCaller,
    body: Bytes,
) -> Result<Json<AgentForgotten>, AdminApiError> {
    caller
        .require(&state, Role::Operator, "agent.forget")
        .await?;
    caller.require_unlimited(&state, "agent.forget").await?;
    let t: Issuer = params::body(&body)?;
    let mut tx = state.db.begin().await?;
    crate::admin::ops::agents::forget(&mut tx, &caller.actor, Some(&caller.ip), &t.issuer).await?;
    tx.commit().await?;
    state.door.forget(&t.issuer);
    Ok(Json(AgentForgotten {
        issuer: t.issuer,
        forgotten: true,
    }))
}
