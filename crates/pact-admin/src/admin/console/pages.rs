//! The console's pages once signed in: overview, agent platforms, grants,
//! customers, audit log. Viewers see no action buttons, and the actions'
//! POSTs refuse them; objects outside an admin's brands are "not found".

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pact_db::admin_search::{self, GrantSearch, GrantState};
use pact_db::ids::{AgentIssuer, BrandId, UserSub};
use pact_node::node::{Node, NodeInner};
use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::extract::{StaffForm, Viewer};
use super::session::SignedIn;
use crate::admin::api::grants::customer_subjects;
use crate::admin::api::params::{grant_cursor, parse_grant_cursor};
use crate::admin::ops::{self, customers};
use crate::admin::receipts_export;
use crate::admin::role::Role;
use crate::state::AppState;
use crate::web::login::see_other;
use crate::web::{PageError, render};

/// What every console page's header needs.
pub struct Nav {
    pub email: String,
    pub role: &'static str,
    pub csrf: String,
    pub can_act: bool,
    /// Owners manage brands and scopes.
    pub is_owner: bool,
}

pub(super) fn nav(who: &SignedIn) -> Nav {
    Nav {
        email: who.admin.email.clone(),
        role: who.actor.role.as_str(),
        csrf: who.session.csrf_token.clone(),
        can_act: who.actor.may(Role::Operator),
        is_owner: who.actor.may(Role::Owner),
    }
}

fn not_found() -> PageError {
    PageError::NotFound("There is nothing here, or it is outside your brands.".into())
}

fn needs_operator() -> PageError {
    PageError::Forbidden("Your role (viewer) cannot change anything.".into())
}

/// An action the one staff function refused, as a page.
pub(super) fn ops_page_error(e: ops::OpsError) -> PageError {
    match e {
        ops::OpsError::Invalid(m) | ops::OpsError::Conflict(m) => PageError::BadRequest(m),
        ops::OpsError::Missing => not_found(),
        ops::OpsError::Db(e) => e.into(),
    }
}

async fn record(
    db: impl sqlx::PgExecutor<'_>,
    who: &SignedIn,
    ip: &str,
    action: &str,
    target: Option<&str>,
    brand: Option<&str>,
    detail: Value,
) -> Result<(), PageError> {
    pact_db::audit::record(
        db,
        &pact_db::audit::NewEntry {
            actor_kind: "admin",
            actor: &who.actor.name,
            action,
            target,
            brand_id: brand,
            detail,
            client_addr: Some(ip),
        },
    )
    .await?;
    Ok(())
}

/// A refused action, recorded as the API records it: `<action>.denied`,
/// with what it needed, before any object is looked up.
async fn denied(
    node: &NodeInner,
    who: &SignedIn,
    ip: &str,
    action: &str,
    target: Option<&str>,
    needs: &str,
) -> Result<(), PageError> {
    record(
        &node.db,
        who,
        ip,
        &format!("{action}.denied"),
        target,
        None,
        json!({ "needs": needs }),
    )
    .await
}

// --- overview ---------------------------------------------------------------

#[derive(Template)]
#[template(path = "admin/overview.html")]
struct OverviewPage {
    nav: Nav,
    o: admin_search::Overview,
    listening: bool,
    nodes_summary: String,
    nodes_ok: bool,
    nodes: Vec<NodeLine>,
}

pub struct NodeLine {
    pub id: String,
    pub hostname: String,
    pub version: String,
    pub started: String,
    pub last_seen: String,
    pub state: &'static str,
}

pub async fn overview(
    State(node): State<Node>,
    Viewer { who, .. }: Viewer,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let o = admin_search::overview(&node.db, who.actor.within(), now).await?;
    let nodes = crate::nodes::list(&node.db, now).await?;
    let page = OverviewPage {
        nav: nav(&who),
        o,
        listening: !node.db_health.is_down(),
        nodes_summary: crate::nodes::summary(&nodes),
        nodes_ok: nodes
            .iter()
            .filter(|n| !n.gone)
            .all(crate::nodes::NodeView::healthy),
        nodes: nodes
            .iter()
            .map(|n| NodeLine {
                id: n.row.id.to_string(),
                hostname: n.row.hostname.clone(),
                version: n.row.version.clone(),
                started: when(n.row.started_at),
                last_seen: when(n.row.last_seen),
                state: if n.gone {
                    "gone"
                } else if n.listening {
                    "listening"
                } else {
                    "NOT listening"
                },
            })
            .collect(),
    };
    Ok(render(&page, StatusCode::OK))
}

// --- agent platforms -------------------------------------------------------

pub struct AgentRow {
    pub issuer: String,
    pub name: String,
    pub jwks_uri: String,
    pub enabled: bool,
    /// The trust tier (PACT §3.1): registered or verified by staff, or
    /// admitted by the open policy and not yet looked at.
    pub verified: bool,
    /// The tier as staff read it: verified, unverified, or listed by a
    /// trusted registry (with until when, or that the listing ended).
    pub tier: String,
    pub grants: i64,
    pub people: i64,
}

/// The tier shown for an agent (issue 31's trust tiers).
fn tier_words(a: &pact_db::agents::Agent, now: time::OffsetDateTime) -> String {
    match (crate::admission::Tier::of(a), &a.registry) {
        (crate::admission::Tier::Listed(until), Some(r)) if until > now => {
            format!("listed by {r} until {}", when(until))
        }
        (crate::admission::Tier::Listed(_), Some(r)) => format!("no longer listed by {r}"),
        (t, _) => t.label().to_owned(),
    }
}

/// A trusted registry on the agent platforms page, with what its last fetch did.
pub struct RegistryRow {
    pub name: String,
    pub url: String,
    pub listed: i32,
    pub state: String,
    pub failed: bool,
}

pub struct BlockedHostRow {
    pub host: String,
    pub reason: String,
    pub since: String,
}

/// An agent admitted under the open policy, as the "who knocks" table shows it.
pub struct SeenRow {
    pub issuer: String,
    pub name: String,
    pub verified: bool,
    pub enabled: bool,
    pub first_seen: String,
    pub last_seen: String,
    pub requests: i64,
    pub grants: i64,
    /// What its discovery document claims (`client_name`, `logo_uri`); the
    /// logo is shown as its address, never loaded.
    pub claimed_name: String,
    pub claimed_logo_uri: String,
}

#[derive(Template)]
#[template(path = "admin/agents.html")]
struct AgentsPage {
    nav: Nav,
    agents: Vec<AgentRow>,
    seen: Vec<SeenRow>,
    registries: Vec<RegistryRow>,
    blocked: Vec<BlockedHostRow>,
    unlimited: bool,
    /// May register and verify platforms: an owner limited to no brand.
    can_register: bool,
}

pub async fn agents(
    State(node): State<Node>,
    Viewer { who, .. }: Viewer,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let mut rows = Vec::new();
    for a in pact_db::agents::list(&node.db).await? {
        let (grants, people) =
            admin_search::active_for_agent(&node.db, who.actor.within(), &a.issuer, now).await?;
        rows.push(AgentRow {
            tier: tier_words(&a, now),
            issuer: a.issuer.into(),
            name: a.name,
            jwks_uri: a.jwks_uri,
            enabled: a.enabled,
            verified: a.verified,
            grants,
            people,
        });
    }
    let registries = pact_db::registries::list(&node.db)
        .await?
        .into_iter()
        .map(|r| RegistryRow {
            state: match (&r.last_error, r.list_expires_at) {
                (Some(e), _) => format!("last fetch refused, nothing changed: {e}"),
                (None, Some(exp)) => format!("list in force until {}", when(exp)),
                (None, None) => "not fetched yet".to_owned(),
            },
            failed: r.last_error.is_some(),
            name: r.name,
            url: r.url,
            listed: r.listed,
        })
        .collect();
    let blocked = pact_db::registries::blocked_hosts(&node.db)
        .await?
        .into_iter()
        .map(|b| BlockedHostRow {
            since: format!("{} ({})", when(b.blocked_at), ago(b.blocked_at, now)),
            host: b.host,
            reason: b.reason,
        })
        .collect();
    let seen = pact_db::agents::sightings(&node.db, 200, who.actor.within(), now)
        .await?
        .into_iter()
        .map(|s| SeenRow {
            first_seen: format!("{} ({})", when(s.first_seen_at), ago(s.first_seen_at, now)),
            last_seen: format!("{} ({})", when(s.last_seen_at), ago(s.last_seen_at, now)),
            issuer: s.issuer.into(),
            name: s.name,
            verified: s.verified,
            enabled: s.enabled,
            requests: s.requests,
            grants: s.grants,
            claimed_name: s.claimed_name.unwrap_or_default(),
            claimed_logo_uri: s.claimed_logo_uri.unwrap_or_default(),
        })
        .collect();
    let page = AgentsPage {
        seen,
        registries,
        blocked,
        unlimited: who.actor.is_unlimited(),
        can_register: who.actor.is_unlimited() && who.actor.may(Role::Owner),
        nav: nav(&who),
        agents: rows,
    };
    Ok(render(&page, StatusCode::OK))
}

#[derive(Deserialize)]
pub struct IssuerQuery {
    issuer: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/agent_disable.html")]
struct ConfirmDisablePage {
    nav: Nav,
    agent: AgentRow,
}

/// The step before a destructive action: what it does, what the customer
/// will see, and a button that repeats the request with `confirm=yes`.
#[derive(Template)]
#[template(path = "admin/confirm.html")]
struct ConfirmPage {
    nav: Nav,
    title: String,
    consequence: String,
    /// Checked already (as the action will check it), carried over.
    reason: String,
    action: String,
    confirm_label: &'static str,
    cancel_href: String,
}

/// Whether the form is the confirmed one.
/// A console form that names an agent platform, with the reason staff give.
#[derive(Debug, serde::Deserialize)]
struct PlatformForm {
    issuer: Option<String>,
    reason: Option<String>,
}

/// Blocking or unblocking a host: the host, and the reason for a block.
#[derive(Debug, serde::Deserialize)]
struct HostForm {
    host: Option<String>,
    reason: Option<String>,
}

/// Registering an agent platform: the two it must have, the name it may, and
/// its links (a blank one keeps what is stored).
#[derive(Debug, serde::Deserialize)]
struct RegisterForm {
    issuer: Option<String>,
    jwks_uri: Option<String>,
    name: Option<String>,
    homepage: Option<String>,
    logo_uri: Option<String>,
    policy_uri: Option<String>,
    tos_uri: Option<String>,
}

/// A brand's scope, added or changed or removed on the brand page.
#[derive(Debug, serde::Deserialize)]
struct ScopeForm {
    scope_id: Option<String>,
    description: Option<String>,
    requires_mfa: Option<String>,
    unverified_allowed: Option<String>,
}

/// A revocation asked for on the console: the reason staff give, and `yes`
/// once they confirmed on the page that says what it will do.
#[derive(Debug, serde::Deserialize)]
struct RevokeForm {
    confirm: Option<String>,
    reason: Option<String>,
}

impl RevokeForm {
    fn confirmed(&self) -> bool {
        self.confirm.as_deref() == Some("yes")
    }
}

/// Platform changes need an operator limited to no brand (a platform serves
/// every brand). A refusal is audited as `<action>.denied`, as the API's.
async fn may_change_platforms(
    node: &NodeInner,
    who: &SignedIn,
    ip: &str,
    action: &str,
) -> Result<(), PageError> {
    let refusal = if !who.actor.may(Role::Operator) {
        Some(("operator", needs_operator()))
    } else if !who.actor.is_unlimited() {
        Some((
            "every brand",
            PageError::Forbidden(
                "Agent platforms serve every brand; an account limited to some brands cannot change them."
                    .into(),
            ),
        ))
    } else {
        None
    };
    match refusal {
        None => Ok(()),
        Some((needs, error)) => {
            denied(node, who, ip, action, None, needs).await?;
            Err(error)
        }
    }
}

pub async fn confirm_disable(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Query(q): Query<IssuerQuery>,
) -> Result<Response, PageError> {
    may_change_platforms(&node, &who, &staff.ip, "agent.disable").await?;
    let issuer = q.issuer.unwrap_or_default();
    let a = pact_db::agents::find(&node.db, &issuer)
        .await?
        .ok_or_else(not_found)?;
    let (grants, people) =
        admin_search::active_for_agent(&node.db, None, &a.issuer, node.clock.now()).await?;
    let page = ConfirmDisablePage {
        nav: nav(&who),
        agent: AgentRow {
            tier: tier_words(&a, node.clock.now()),
            issuer: a.issuer.into(),
            name: a.name,
            jwks_uri: a.jwks_uri,
            enabled: a.enabled,
            verified: a.verified,
            grants,
            people,
        },
    };
    Ok(render(&page, StatusCode::OK))
}

async fn toggle_agent(
    state: AppState,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
    enabled: bool,
) -> Result<Response, PageError> {
    let action = if enabled {
        "agent.enable"
    } else {
        "agent.disable"
    };
    may_change_platforms(&state, &who, &staff.ip, action).await?;
    let form: PlatformForm = form.decode()?;
    let issuer = form.issuer.as_deref().unwrap_or("");
    let mut tx = state.db.begin().await?;
    ops::agents::set_enabled(
        &mut tx,
        &who.actor,
        Some(&staff.ip),
        issuer,
        enabled,
        form.reason.as_deref(),
    )
    .await
    .map_err(|e| match e {
        ops::OpsError::Invalid(_) => PageError::BadRequest(
            "Give a reason (up to 200 characters, no control, invisible or direction-changing characters): it is stored with \
             every grant this revokes and shown to each customer whose access ends."
                .into(),
        ),
        other => ops_page_error(other),
    })?;
    tx.commit().await?;
    Ok(see_other("/admin/agents", None))
}

/// `POST /admin/agents/verify` and `/admin/agents/forget`: staff decide on an
/// agent the open policy admitted (PACT §3.1). Blocking one is disabling it.
async fn decide_agent(
    state: AppState,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
    verify: bool,
) -> Result<Response, PageError> {
    let action = if verify {
        "agent.verify"
    } else {
        "agent.forget"
    };
    may_change_platforms(&state, &who, &staff.ip, action).await?;
    // Verifying lifts the unverified tier's limits for every brand: the
    // owner's decision, as registering is (and as the API asks).
    if verify && !who.actor.may(Role::Owner) {
        denied(&state, &who, &staff.ip, action, None, "owner").await?;
        return Err(PageError::Forbidden(
            "Verifying an agent platform needs the owner role.".into(),
        ));
    }
    let form: PlatformForm = form.decode()?;
    let issuer = form.issuer.as_deref().unwrap_or("");
    let mut tx = state.db.begin().await?;
    if verify {
        ops::agents::verify(&mut tx, &who.actor, Some(&staff.ip), issuer).await
    } else {
        ops::agents::forget(&mut tx, &who.actor, Some(&staff.ip), issuer).await
    }
    .map_err(ops_page_error)?;
    tx.commit().await?;
    state.door.forget(issuer);
    Ok(see_other("/admin/agents", None))
}

/// `POST /admin/agents/block-host` (`host`, `reason`): every issuer on the
/// host and under it is refused; the agents stored there are disabled and
/// their grants revoked (issue 31).
pub async fn block_host(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    decide_host(state, form, true).await
}

/// `POST /admin/agents/unblock-host` (`host`).
pub async fn unblock_host(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    decide_host(state, form, false).await
}

/// Blocking and unblocking a host: the same checks, one ops call each.
async fn decide_host(
    state: AppState,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
    block: bool,
) -> Result<Response, PageError> {
    let action = if block {
        "agent.block_host"
    } else {
        "agent.unblock_host"
    };
    may_change_platforms(&state, &who, &staff.ip, action).await?;
    let form: HostForm = form.decode()?;
    let host = form.host.as_deref().unwrap_or("");
    let mut tx = state.db.begin().await?;
    if block {
        let (who, ip, now) = (&who.actor, Some(staff.ip.as_str()), state.clock.now());
        ops::agents::block_host(&mut tx, who, ip, host, form.reason.as_deref(), now)
            .await
            .map(|_| ())
    } else {
        ops::agents::unblock_host(&mut tx, &who.actor, Some(&staff.ip), host)
            .await
            .map(|_| ())
    }
    .map_err(ops_page_error)?;
    tx.commit().await?;
    Ok(see_other("/admin/agents", None))
}

pub async fn verify_agent(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    decide_agent(state, form, true).await
}

pub async fn forget_agent(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    decide_agent(state, form, false).await
}

/// `POST /admin/agents`: register a platform (owner, every brand).
pub async fn register_agent(
    State(node): State<Node>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    if !who.actor.may(Role::Owner) || !who.actor.is_unlimited() {
        denied(
            &node,
            &who,
            &staff.ip,
            "agent.register",
            None,
            "owner, every brand",
        )
        .await?;
        return Err(PageError::Forbidden(
            "Registering an agent platform needs the owner role, for every brand.".into(),
        ));
    }
    let form: RegisterForm = form.decode()?;
    let issuer = form.issuer.as_deref().unwrap_or("");
    let jwks_uri = form.jwks_uri.as_deref().unwrap_or("");
    let name =
        crate::admin::api::agents::check_registration(issuer, jwks_uri, form.name.as_deref())
            .map_err(PageError::BadRequest)?;
    // A blank link field keeps what is stored (the form cannot tell "remove"
    // from "not given"; the API and `pactd agent add` take "" to remove).
    let link = |field: &Option<String>| field.as_deref().map(str::trim).map(str::to_owned);
    let links = crate::who::LinkFlags {
        homepage: link(&form.homepage),
        logo: link(&form.logo_uri),
        policy: link(&form.policy_uri),
        tos: link(&form.tos_uri),
    };
    crate::admin::api::agents::register_with_links(
        &node, &who.actor, &staff.ip, issuer, jwks_uri, &name, &links,
    )
    .await
    .map_err(api_to_page)?;
    Ok(see_other("/admin/agents", None))
}

pub async fn disable_agent(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    toggle_agent(state, form, false).await
}

pub async fn enable_agent(
    State(state): State<AppState>,
    form: StaffForm,
) -> Result<Response, PageError> {
    toggle_agent(state, form, true).await
}

/// A time as staff read it: to the minute, in UTC, named as such
/// (`2026-12-02 14:02 UTC`); seconds and microseconds only make columns wider.
pub(super) fn when(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute()
    )
}

/// How long ago (or how soon) `t` is from `now`, as people say it:
/// "just now", "3 min ago", "5 h ago", "2 days ago", "in 29 days". Beside
/// or over the exact time, which staff quote; this is what they read.
pub(super) fn ago(t: OffsetDateTime, now: OffsetDateTime) -> String {
    let secs = (now - t).whole_seconds();
    let (n, future) = (secs.unsigned_abs(), secs < 0);
    let span = match n {
        0..=59 => return "just now".into(),
        60..=3599 => format!("{} min", n / 60),
        3600..=86_399 => format!("{} h", n / 3600),
        86_400..=172_799 => "1 day".into(),
        _ => format!("{} days", n / 86_400),
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

// --- grants ----------------------------------------------------------------

pub struct GrantRow {
    pub id: String,
    pub brand: String,
    pub customer: String,
    pub agent: String,
    /// The customer's email when the brand's account is kept here, else empty.
    pub customer_email: String,
    /// The platform's registered name, else empty.
    pub agent_name: String,
    pub scopes: String,
    pub state: &'static str,
    pub created: String,
    pub expires: String,
    /// `created` and `expires` relative to now (`ago`).
    pub created_ago: String,
    pub expires_ago: String,
}

/// Names staff recognise for a page of grants: the customers' emails by
/// (brand, subject), the platforms' names by issuer. Tokens carry only the
/// subject and the issuer, which nobody searching by email can match by eye.
#[derive(Default)]
struct Names {
    emails: std::collections::HashMap<(BrandId, UserSub), String>,
    agents: std::collections::HashMap<AgentIssuer, String>,
}

async fn names_for(
    db: &pact_db::PgPool,
    within: Option<&[String]>,
    grants: &[pact_db::grants::Grant],
) -> Result<Names, PageError> {
    let mut names = Names {
        agents: registered_agents(db).await?.into_iter().collect(),
        ..Default::default()
    };
    for g in grants {
        let key = (g.brand_id.clone(), g.user_sub.clone());
        if names.emails.contains_key(&key) {
            continue;
        }
        // The subject is the account's external id or its id; the search also
        // matches emails, so keep only the account whose subject it is.
        let email = admin_search::find_customers(db, within, Some(&g.brand_id), &g.user_sub)
            .await?
            .into_iter()
            .find(|u| u.subject() == g.user_sub)
            .map(|u| u.email)
            .unwrap_or_default();
        names.emails.insert(key, email);
    }
    Ok(names)
}

/// Registered platforms as (issuer, name), a blank name shown as the issuer.
async fn registered_agents(db: &pact_db::PgPool) -> Result<Vec<(AgentIssuer, String)>, PageError> {
    Ok(pact_db::agents::list(db)
        .await?
        .into_iter()
        .map(|a| {
            let name = if a.name.trim().is_empty() {
                a.issuer.to_string()
            } else {
                a.name
            };
            (a.issuer, name)
        })
        .collect())
}

fn grant_row(g: &pact_db::grants::Grant, now: OffsetDateTime, names: &Names) -> GrantRow {
    GrantRow {
        id: g.id.to_string(),
        brand: g.brand_id.to_string(),
        customer: g.user_sub.to_string(),
        agent: g.pa_issuer.to_string(),
        customer_email: names
            .emails
            .get(&(g.brand_id.clone(), g.user_sub.clone()))
            .cloned()
            .unwrap_or_default(),
        agent_name: names
            .agents
            .get(&g.pa_issuer)
            .filter(|n| **n != *g.pa_issuer)
            .cloned()
            .unwrap_or_default(),
        scopes: g.scopes.join(" "),
        state: GrantState::of(g, now).as_str(),
        created: when(g.created_at),
        expires: when(g.expires_at),
        created_ago: ago(g.created_at, now),
        expires_ago: ago(g.expires_at, now),
    }
}

#[derive(Deserialize, Default)]
pub struct GrantQuery {
    brand: Option<String>,
    customer: Option<String>,
    agent: Option<String>,
    state: Option<String>,
    cursor: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/grants.html")]
struct GrantsPage {
    nav: Nav,
    brand: String,
    customer: String,
    agent: String,
    state: String,
    /// The agent filter's choices.
    agents: Vec<AgentChoice>,
    grants: Vec<GrantRow>,
    next: Option<String>,
}

pub struct AgentChoice {
    pub issuer: String,
    pub name: String,
}

fn blank_to_none(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

pub async fn grants(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Query(q): Query<GrantQuery>,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let brand = blank_to_none(&q.brand);
    let grant_state = blank_to_none(&q.state).and_then(GrantState::parse);
    let after = blank_to_none(&q.cursor).and_then(|c| parse_grant_cursor(c).ok());
    let subjects = match blank_to_none(&q.customer) {
        None => None,
        Some(c) => Some(customer_subjects(&node.db, who.actor.within(), brand, c).await?),
    };
    let agents = registered_agents(&node.db).await?;
    // The filter is a pick-list of issuers, but a typed name (an old link,
    // a bookmark) finds that platform rather than nothing.
    let agent = blank_to_none(&q.agent).map(|a| {
        agents
            .iter()
            .find(|(issuer, name)| issuer != a && name.eq_ignore_ascii_case(a))
            .map_or(a, |(issuer, _)| issuer.as_str())
    });
    const PAGE: i64 = 50;
    let mut rows = admin_search::grants(
        &node.db,
        &GrantSearch {
            within: who.actor.within(),
            brand_id: brand,
            user_subs: subjects.as_deref(),
            pa_issuer: agent,
            state: grant_state,
            after,
            limit: PAGE + 1,
        },
        now,
    )
    .await?;
    let more = rows.len() as i64 > PAGE;
    rows.truncate(PAGE as usize);
    // A staff read of customer data, as the API's `grant.list`: a customer
    // by the opaque subjects the search named, never the searched email, and
    // a brand the account cannot see is not named.
    let mut filter = serde_json::Map::new();
    for (k, v) in [
        ("brand", &q.brand),
        ("agent", &q.agent),
        ("state", &q.state),
    ] {
        if let Some(v) = blank_to_none(v) {
            filter.insert(k.to_owned(), json!(v));
        }
    }
    if let Some(subjects) = &subjects {
        filter.insert("customer".to_owned(), json!(subjects));
    }
    filter.insert("found".to_owned(), json!(rows.len()));
    record(
        &node.db,
        &who,
        &staff.ip,
        "grant.list",
        None,
        brand.filter(|b| who.actor.sees_brand(b)),
        Value::Object(filter),
    )
    .await?;
    let next = if more {
        rows.last().map(|g| {
            let mut link = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in [
                ("brand", &q.brand),
                ("customer", &q.customer),
                ("agent", &q.agent),
                ("state", &q.state),
            ] {
                if let Some(v) = blank_to_none(v) {
                    link.append_pair(k, v);
                }
            }
            link.append_pair("cursor", &grant_cursor(g.created_at, g.id));
            format!("/admin/grants?{}", link.finish())
        })
    } else {
        None
    };
    let names = names_for(&node.db, who.actor.within(), &rows).await?;
    let page = GrantsPage {
        nav: nav(&who),
        brand: brand.unwrap_or("").to_owned(),
        customer: blank_to_none(&q.customer).unwrap_or("").to_owned(),
        agent: agent.unwrap_or("").to_owned(),
        state: grant_state.map_or("", GrantState::as_str).to_owned(),
        grants: rows.iter().map(|g| grant_row(g, now, &names)).collect(),
        agents: agents
            .iter()
            .map(|(issuer, name)| AgentChoice {
                issuer: issuer.to_string(),
                name: name.clone(),
            })
            .collect(),
        next,
    };
    Ok(render(&page, StatusCode::OK))
}

pub struct ReceiptRow {
    pub seq: i32,
    pub message_id: String,
    pub at: String,
}

#[derive(Template)]
#[template(path = "admin/grant.html")]
struct GrantPage {
    nav: Nav,
    /// The result of the action that led here (`?done=revoked`).
    notice: String,
    g: GrantRow,
    active: bool,
    details: String,
    approved_at: String,
    request_ip: String,
    revoked: String,
    receipts: Vec<ReceiptRow>,
    chain_problems: Vec<String>,
    /// The limits the grant was approved under, in words, with their use.
    limits: Vec<String>,
    /// Why the gateway could not evaluate the grant's limits (each refused
    /// call's audit entry), for staff to fix or ask the person to approve again.
    unenforceable: Vec<String>,
}

async fn visible_grant(
    node: &NodeInner,
    who: &SignedIn,
    raw: &str,
) -> Result<pact_db::grants::Grant, PageError> {
    let id: pact_db::ids::GrantId = raw.parse().map_err(|_| not_found())?;
    match pact_db::grants::find(&node.db, id).await? {
        Some(g) if who.actor.sees_brand(&g.brand_id) => Ok(g),
        _ => Err(not_found()),
    }
}

#[derive(serde::Deserialize)]
pub struct DoneQuery {
    done: Option<String>,
}

pub async fn grant(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Path(id): Path<String>,
    Query(done): Query<DoneQuery>,
) -> Result<Response, PageError> {
    let g = visible_grant(&node, &who, &id).await?;
    let now = node.clock.now();
    // A staff read of one customer's grant, as the API's `grant.read`.
    record(
        &node.db,
        &who,
        &staff.ip,
        "grant.read",
        Some(&g.id.to_string()),
        Some(&g.brand_id),
        json!({"customer": g.user_sub}),
    )
    .await?;
    let approval = admin_search::approval_of(&node.db, g.id).await?;
    let receipts = pact_db::receipts::list(&node.db, Some(g.id)).await?;
    // PACT §5.6: signatures and the chain, checked on the page.
    let chain_problems: Vec<String> = receipts_export::chain_breaks(&node.db, &receipts)
        .await
        .map_err(PageError::internal)?
        .iter()
        .map(|b| format!("receipt #{}: {}", b.seq, b.problem))
        .collect();
    let terms = crate::agent::bounds::terms_of_recorded(g.terms.clone());
    let usage: std::collections::HashMap<uuid::Uuid, pact_db::budgets::Usage> =
        pact_db::budgets::usage(&node.db, &terms.budget_ids())
            .await?
            .into_iter()
            .map(|u| (u.id, u))
            .collect();
    let target = g.id.to_string();
    let unenforceable = pact_db::audit::list(
        &node.db,
        &pact_db::audit::Filter {
            action: Some("grant.unenforceable"),
            target: Some(&target),
            limit: 20,
            ..Default::default()
        },
    )
    .await?
    .into_iter()
    .map(|e| {
        format!(
            "{}: {} ({})",
            when(e.at),
            e.detail.get("why").and_then(Value::as_str).unwrap_or(""),
            e.detail.get("tool").and_then(Value::as_str).unwrap_or("")
        )
    })
    .collect();
    let page = GrantPage {
        notice: match done.done.as_deref() {
            Some("revoked") => {
                "Revoked: the agent's tokens for this grant are refused on every node from now on."
                    .into()
            }
            _ => String::new(),
        },
        chain_problems,
        limits: crate::web::limit_words::grant_lines(&terms, &usage),
        unenforceable,
        nav: nav(&who),
        active: g.is_active(now),
        details: g
            .authorization_details
            .as_ref()
            .map(|d| serde_json::to_string_pretty(d).unwrap_or_default())
            .unwrap_or_default(),
        approved_at: approval
            .as_ref()
            .and_then(|a| a.decided_at)
            .map(|t| format!("{} ({})", when(t), ago(t, now)))
            .unwrap_or_else(|| "-".into()),
        request_ip: approval
            .and_then(|a| a.request_ip)
            .unwrap_or_else(|| "-".into()),
        revoked: match (&g.revoked_at, &g.revoked_reason) {
            (Some(at), why) => format!("{} ({})", when(*at), why.as_deref().unwrap_or("")),
            _ => String::new(),
        },
        receipts: receipts
            .iter()
            .map(|r| ReceiptRow {
                seq: r.seq,
                message_id: r.message_id.clone(),
                at: when(r.created_at),
            })
            .collect(),
        g: grant_row(
            &g,
            now,
            &names_for(&node.db, who.actor.within(), std::slice::from_ref(&g)).await?,
        ),
    };
    Ok(render(&page, StatusCode::OK))
}

/// `GET /admin/grants/{id}/receipts.json`: the grant's receipts as a
/// download anyone can check offline (admin/receipts_export.rs).
pub async fn grant_receipts(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let g = visible_grant(&node, &who, &id).await?;
    let receipts = pact_db::receipts::list(&node.db, Some(g.id)).await?;
    let body = receipts_export::export_checked(&node.db, &node.config, &g, &receipts)
        .await
        .map_err(PageError::internal)?;
    record(
        &node.db,
        &who,
        &staff.ip,
        "grant.receipts.export",
        Some(&g.id.to_string()),
        Some(&g.brand_id),
        json!({"receipts": receipts.len()}),
    )
    .await?;
    let bytes = serde_json::to_vec_pretty(&body).map_err(PageError::internal)?;
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/json".to_owned(),
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                receipts_export::disposition(&g),
            ),
            (axum::http::header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        bytes,
    )
        .into_response())
}

pub async fn revoke_grant(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    if !who.actor.may(Role::Operator) {
        denied(
            &node,
            &who,
            &staff.ip,
            "grant.revoke",
            Some(&id),
            "operator",
        )
        .await?;
        return Err(needs_operator());
    }
    let form: RevokeForm = form.decode()?;
    let g = visible_grant(&node, &who, &id).await?;
    if !form.confirmed() {
        let reason = ops::reason(form.reason.as_deref()).map_err(ops_page_error)?;
        let agent = pact_db::agents::find(&node.db, &g.pa_issuer)
            .await?
            .map_or_else(|| g.pa_issuer.to_string(), |a| a.name);
        let page = ConfirmPage {
            nav: nav(&who),
            title: format!("Revoke {agent}'s access?"),
            consequence: format!(
                "{agent} loses this grant ({}) on every node at once; its tokens are refused from the \
                 next request on. The customer can connect it again later.",
                g.scopes.join(", ")
            ),
            reason: reason.unwrap_or_default(),
            action: format!("/admin/grants/{}/revoke", g.id),
            confirm_label: "Yes, revoke",
            cancel_href: format!("/admin/grants/{}", g.id),
        };
        return Ok(render(&page, StatusCode::OK));
    }
    let mut tx = node.db.begin().await?;
    // Already revoked: nothing to do, the grant page says so.
    let reason = form.reason.as_deref();
    let revoked = ops::grants::revoke(&mut tx, &who.actor, Some(&staff.ip), &g, reason)
        .await
        .map_err(ops_page_error)?;
    tx.commit().await?;
    let done = if revoked { "?done=revoked" } else { "" };
    Ok(see_other(&format!("/admin/grants/{}{done}", g.id), None))
}

// --- customers -------------------------------------------------------------

pub struct CustomerRow {
    pub id: String,
    pub brand: String,
    pub email: String,
    pub subject: String,
    pub totp: bool,
    pub locked: bool,
    pub disabled: bool,
}

#[derive(Deserialize, Default)]
pub struct CustomerQuery {
    q: Option<String>,
    /// How many grants the confirmed "revoke all" ended.
    revoked: Option<u32>,
}

#[derive(Template)]
#[template(path = "admin/customers.html")]
struct CustomersPage {
    nav: Nav,
    notice: String,
    q: String,
    customers: Vec<CustomerRow>,
    searched: bool,
}

pub async fn customers(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Query(q): Query<CustomerQuery>,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let needle = blank_to_none(&q.q).unwrap_or("").to_owned();
    let found = if needle.is_empty() {
        Vec::new()
    } else {
        let found =
            admin_search::find_customers(&node.db, who.actor.within(), None, &needle).await?;
        // A search of customer accounts, as the API's `customer.find`.
        record(
            &node.db,
            &who,
            &staff.ip,
            "customer.find",
            None,
            None,
            // Who was found, by opaque id: never the searched email, which
            // this append-only log could not erase with the account.
            json!({"found": found.len(),
                   "customers": found.iter().map(|u| u.id).collect::<Vec<_>>()}),
        )
        .await?;
        found
    };
    let page = CustomersPage {
        notice: q.revoked.map_or_else(String::new, |n| {
            format!("Revoked {n} grant(s): those agents are refused on every node from now on.")
        }),
        nav: nav(&who),
        searched: !needle.is_empty(),
        q: needle,
        customers: found
            .iter()
            .map(|u| CustomerRow {
                id: u.id.to_string(),
                brand: u.brand_id.to_string(),
                email: u.email.clone(),
                subject: u.subject().into(),
                totp: u.has_totp(),
                locked: u.locked_until.is_some_and(|t| t > now),
                disabled: u.disabled_at.is_some(),
            })
            .collect(),
    };
    Ok(render(&page, StatusCode::OK))
}

pub async fn customer_action(
    State(node): State<Node>,
    Path((id, action)): Path<(String, String)>,
    StaffForm { staff, who, fields }: StaffForm,
) -> Result<Response, PageError> {
    let form: RevokeForm = fields.decode()?;
    let action = match action.as_str() {
        "unlock" => Some(customers::Action::Unlock),
        "reset-second-factors" => Some(customers::Action::ResetSecondFactors),
        "sign-out" => Some(customers::Action::SignOut),
        "disable" => Some(customers::Action::Disable),
        "enable" => Some(customers::Action::Enable),
        "revoke-grants" => None,
        _ => return Err(not_found()),
    };
    if !who.actor.may(Role::Operator) {
        // Before the customer is looked up, as the API: the answer and the
        // entry never depend on whether the customer exists.
        let name = action.map_or("customer.revoke_grants", customers::Action::audit_name);
        denied(&node, &who, &staff.ip, name, None, "operator").await?;
        return Err(needs_operator());
    }
    let uid: uuid::Uuid = id.parse().map_err(|_| not_found())?;
    let user = admin_search::customer(&node.db, who.actor.within(), uid)
        .await?
        .ok_or_else(not_found)?;
    let back = format!("/admin/customers?q={}", crate::web::login::enc(&user.email));
    // What ends grants asks first, saying what the customer will lose.
    let confirm = match action {
        None => Some((
            ops::reason(form.reason.as_deref())
                .map_err(ops_page_error)?
                .unwrap_or_default(),
            format!("Revoke every grant {} gave?", user.email),
            "Every agent this customer connected loses its access, on every node at once. \
             The customer can connect them again later.",
            "revoke-grants",
            "Yes, revoke them all",
        )),
        Some(customers::Action::Disable) => Some((
            customers::DISABLED.to_owned(),
            format!("Disable {}?", user.email),
            "The customer can no longer sign in, is signed out everywhere, and every agent they \
             connected loses its access, on every node at once. Enabling the account later does \
             not give those agents their access back.",
            "disable",
            "Yes, disable the account",
        )),
        Some(_) => None,
    };
    if let Some((reason, title, consequence, path, confirm_label)) = confirm
        && !form.confirmed()
    {
        let page = ConfirmPage {
            nav: nav(&who),
            title,
            consequence: consequence.into(),
            reason,
            action: format!("/admin/customers/{}/{path}", user.id),
            confirm_label,
            cancel_href: back,
        };
        return Ok(render(&page, StatusCode::OK));
    }
    let mut tx = node.db.begin().await?;
    let Some(action) = action else {
        // Every live grant of the customer, recorded by the one function.
        let revoked = ops::grants::revoke_for_customer(
            &mut tx,
            &who.actor,
            Some(&staff.ip),
            &user,
            form.reason.as_deref(),
        )
        .await
        .map_err(ops_page_error)?;
        tx.commit().await?;
        return Ok(see_other(&format!("{back}&revoked={revoked}"), None));
    };
    customers::apply(
        &mut tx,
        &who.actor,
        Some(&staff.ip),
        &user,
        action,
        node.clock.now(),
    )
    .await
    .map_err(ops_page_error)?;
    tx.commit().await?;
    Ok(see_other(&back, None))
}

// --- audit log ---------------------------------------------------------------

pub struct AuditRow {
    pub at: String,
    /// Who did what to whom, in words (audit_words.rs); the rest is the record.
    pub sentence: String,
    /// `at` relative to now, over the exact time.
    pub ago: String,
    pub actor_kind: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub brand: String,
    pub detail: String,
    pub from: String,
}

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    before: Option<i64>,
}

#[derive(Template)]
#[template(path = "admin/audit.html")]
struct AuditPage {
    nav: Nav,
    actor: String,
    action: String,
    entries: Vec<AuditRow>,
    next: Option<String>,
}

pub async fn audit(
    State(node): State<Node>,
    Viewer { staff, who }: Viewer,
    Query(q): Query<AuditQuery>,
) -> Result<Response, PageError> {
    const PAGE: i64 = 100;
    let mut rows = pact_db::audit::list(
        &node.db,
        &pact_db::audit::Filter {
            brands: who.actor.within(),
            actor: blank_to_none(&q.actor),
            action: blank_to_none(&q.action),
            before_id: q.before,
            limit: PAGE + 1,
            ..Default::default()
        },
    )
    .await?;
    // The log names customers and what was done to them: reading it is
    // recorded too, as the API's `audit.list`.
    record(
        &node.db,
        &who,
        &staff.ip,
        "audit.list",
        None,
        None,
        json!({"actor": blank_to_none(&q.actor), "action": blank_to_none(&q.action)}),
    )
    .await?;
    let more = rows.len() as i64 > PAGE;
    rows.truncate(PAGE as usize);
    let next = if more {
        rows.last().map(|e| {
            let mut link = url::form_urlencoded::Serializer::new(String::new());
            if let Some(a) = blank_to_none(&q.actor) {
                link.append_pair("actor", a);
            }
            if let Some(a) = blank_to_none(&q.action) {
                link.append_pair("action", a);
            }
            link.append_pair("before", &e.id.to_string());
            format!("/admin/audit?{}", link.finish())
        })
    } else {
        None
    };
    let known = super::audit_words::Known::of(&node.db, who.actor.within(), &rows).await?;
    let now = node.clock.now();
    let page = AuditPage {
        nav: nav(&who),
        actor: blank_to_none(&q.actor).unwrap_or("").to_owned(),
        action: blank_to_none(&q.action).unwrap_or("").to_owned(),
        entries: rows
            .into_iter()
            .map(|e| AuditRow {
                sentence: super::audit_words::sentence(&e, &known),
                ago: ago(e.at, now),
                at: when(e.at),
                actor_kind: e.actor_kind,
                actor: e.actor,
                action: e.action,
                target: e.target.unwrap_or_default(),
                brand: e.brand_id.unwrap_or_default(),
                detail: e.detail.to_string(),
                from: e.client_addr.unwrap_or_default(),
            })
            .collect(),
        next,
    };
    Ok(render(&page, StatusCode::OK))
}

// --- signing keys ----------------------------------------------------------

pub struct KeyRow {
    pub kid: String,
    pub status: &'static str,
    pub created: String,
    pub activates: String,
    pub retired: String,
    pub unpublished: String,
}

#[derive(Template)]
#[template(path = "admin/keys.html")]
struct KeysPage {
    nav: Nav,
    keys: Vec<KeyRow>,
    /// An owner limited to no brand: the keys sign for every brand.
    can_rotate: bool,
}

pub async fn keys(
    State(node): State<Node>,
    Viewer { who, .. }: Viewer,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let opt = |t: Option<OffsetDateTime>| t.map(when).unwrap_or_else(|| "—".into());
    let keys = crate::keys::list(&node.db, now)
        .await?
        .into_iter()
        .map(|k| KeyRow {
            status: match k.status {
                crate::keys::KeyStatus::Active => "active (signs)",
                crate::keys::KeyStatus::Published => "published for verification",
                crate::keys::KeyStatus::Retired => "retired",
            },
            created: when(k.created_at),
            activates: when(k.activates_at),
            retired: opt(k.retired_at),
            unpublished: opt(k.unpublish_at),
            kid: k.kid,
        })
        .collect();
    let page = KeysPage {
        can_rotate: who.actor.may(Role::Owner) && who.actor.is_unlimited(),
        nav: nav(&who),
        keys,
    };
    Ok(render(&page, StatusCode::OK))
}

/// `POST /admin/keys/rotate` (owner, every brand): the same rotation as
/// `pactd keys rotate`.
pub async fn rotate_key(
    State(node): State<Node>,
    StaffForm { staff, who, .. }: StaffForm,
) -> Result<Response, PageError> {
    if !who.actor.may(Role::Owner) || !who.actor.is_unlimited() {
        denied(
            &node,
            &who,
            &staff.ip,
            "key.rotate",
            None,
            "owner, every brand",
        )
        .await?;
        return Err(PageError::Forbidden(
            "Rotating the signing key needs the owner role, for every brand.".into(),
        ));
    }
    let now = node.clock.now();
    crate::admin::api::keys::rotate_now(&node, &who.actor, &staff.ip, now)
        .await
        .map_err(api_to_page)?;
    Ok(see_other("/admin/keys", None))
}

fn api_to_page(e: crate::admin::api::error::AdminApiError) -> PageError {
    use crate::admin::api::error::AdminApiError as E;
    match e {
        E::NotFound => not_found(),
        E::Invalid(m) | E::Conflict(m) => PageError::BadRequest(m),
        e @ (E::InvalidCursor | E::AlreadyRevoked) => PageError::BadRequest(e.message()),
        E::Forbidden(m) => PageError::Forbidden(m.into()),
        E::Unavailable => PageError::Unavailable,
        E::Unauthenticated => PageError::Forbidden("Sign in again.".into()),
        E::Internal(cause) => PageError::Internal(cause),
    }
}

// --- brands and scopes -------------------------------------------------------

fn needs_owner() -> PageError {
    PageError::Forbidden("Brands and their scopes are managed by owners.".into())
}

pub struct BrandLine {
    pub id: String,
    pub name: String,
    pub scopes: usize,
    pub lifetime_days: i64,
    pub lifetime_default: bool,
}

#[derive(Template)]
#[template(path = "admin/brands.html")]
struct BrandsPage {
    nav: Nav,
    brands: Vec<BrandLine>,
}

pub async fn brands(
    State(node): State<Node>,
    Viewer { who, .. }: Viewer,
) -> Result<Response, PageError> {
    if !who.actor.may(Role::Owner) {
        return Err(needs_owner());
    }
    let mut lines = Vec::new();
    for b in pact_db::brands::list(&node.db).await? {
        if !who.actor.sees_brand(&b.id) {
            continue;
        }
        let (lifetime_days, lifetime_default) =
            crate::admin::api::brands::grant_lifetime(&node, &b);
        lines.push(BrandLine {
            scopes: pact_db::scopes::list(&node.db, &b.id).await?.len(),
            id: b.id.into(),
            name: b.name,
            lifetime_days,
            lifetime_default,
        });
    }
    let page = BrandsPage {
        nav: nav(&who),
        brands: lines,
    };
    Ok(render(&page, StatusCode::OK))
}

#[derive(Template)]
#[template(path = "admin/brand.html")]
struct BrandPage {
    nav: Nav,
    id: String,
    name: String,
    description: String,
    /// The owner's card skills as JSON, or empty (the agent's own).
    card_skills: String,
    lifetime_days: i64,
    lifetime_default: bool,
    /// The policy in force (PACT §3.1) and whether it is the Provider's.
    admission: &'static str,
    admission_default: bool,
    scopes: Vec<pact_db::scopes::BrandScope>,
    /// RFC 9396 types: (name, scope, declaration as JSON).
    types: Vec<(String, String, String)>,
    tools: Vec<ToolLine>,
}

pub struct ToolLine {
    pub name: String,
    pub scope: String,
    pub url: String,
    pub description: String,
    pub enforce: String,
    pub summary: String,
}

async fn owned_brand(
    node: &NodeInner,
    who: &SignedIn,
    brand: &str,
) -> Result<pact_db::brands::Brand, PageError> {
    if !who.actor.may(Role::Owner) {
        return Err(needs_owner());
    }
    crate::admin::api::brands::visible(node, &who.actor, brand)
        .await?
        .ok_or_else(not_found)
}

pub async fn brand(
    State(node): State<Node>,
    Viewer { who, .. }: Viewer,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let b = owned_brand(&node, &who, &id).await?;
    let (lifetime_days, lifetime_default) = crate::admin::api::brands::grant_lifetime(&node, &b);
    let (types, tools) = crate::admin::brand_settings::describe(&node.db, &b).await?;
    let page = BrandPage {
        admission: crate::admission::policy_at(node.config.admission.policy, &b).as_str(),
        admission_default: crate::admission::brand_override(&b).is_none(),
        nav: nav(&who),
        card_skills: crate::admin::brand_settings::card_skills(&b)
            .and_then(|s| serde_json::to_string_pretty(&s).ok())
            .unwrap_or_default(),
        scopes: pact_db::scopes::list(&node.db, &b.id).await?,
        types: types
            .iter()
            .map(|(name, t)| {
                (
                    name.clone(),
                    t.scope.clone(),
                    serde_json::to_string(t).unwrap_or_default(),
                )
            })
            .collect(),
        tools: tools
            .into_iter()
            .map(|t| ToolLine {
                enforce: t
                    .enforce
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default(),
                summary: t.summary,
                name: t.name,
                // An imported MCP tool without a scope is refused, not public.
                url: if t.kind == pact_db::merchant::TOOL_KIND_MCP {
                    format!("MCP {} ({})", t.url, t.remote_name.unwrap_or_default())
                } else {
                    t.url
                },
                scope: if t.mapped {
                    t.scope.unwrap_or_else(|| "public".to_owned())
                } else {
                    "unmapped (refused until a scope is set)".to_owned()
                },
                description: t.description,
            })
            .collect(),
        id: b.id.into(),
        name: b.name,
        description: b.description,
        lifetime_days,
        lifetime_default,
    };
    Ok(render(&page, StatusCode::OK))
}

/// A refused change to a brand is audited like the API's (`<action>.denied`).
pub(super) async fn brand_change_allowed(
    node: &NodeInner,
    who: &SignedIn,
    ip: &str,
    action: &str,
    brand: &str,
) -> Result<pact_db::brands::Brand, PageError> {
    if !who.actor.may(Role::Owner) {
        denied(node, who, ip, action, None, "owner").await?;
        return Err(needs_owner());
    }
    owned_brand(node, who, brand).await
}

/// `POST /admin/brands/{brand}/scopes`: add or change a scope.
pub async fn upsert_scope(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "scope.upsert", &id).await?;
    let form: ScopeForm = form.decode()?;
    let def = crate::admin::api::brands::ScopeDefinition {
        scope_id: form.scope_id.as_deref().unwrap_or("").trim().to_owned(),
        description: form.description.unwrap_or_default(),
        // Checkboxes: present when ticked.
        requires_mfa: form.requires_mfa.is_some(),
        unverified_allowed: form.unverified_allowed.is_some(),
    };
    crate::admin::api::brands::upsert_scope(&node, &who.actor, &staff.ip, &b.id, &def)
        .await
        .map_err(api_to_page)?;
    Ok(see_other(&format!("/admin/brands/{}", b.id), None))
}

/// `POST /admin/brands/{brand}/scopes/remove` (`scope_id` in the form).
pub async fn remove_scope(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "scope.remove", &id).await?;
    let form: ScopeForm = form.decode()?;
    let scope = form.scope_id.as_deref().unwrap_or("");
    if !crate::admin::api::brands::remove_scope_of(&node, &who.actor, &staff.ip, &b.id, scope)
        .await
        .map_err(api_to_page)?
    {
        return Err(not_found());
    }
    Ok(see_other(&format!("/admin/brands/{}", b.id), None))
}

#[cfg(test)]
mod tests {
    use super::{ago, when};
    use time::macros::datetime;

    #[test]
    fn times_read_to_the_minute_in_utc_and_relative_to_now() {
        let now = datetime!(2026-12-02 14:05:30.123456 UTC);
        assert_eq!(when(now), "2026-12-02 14:05 UTC");
        assert_eq!(
            when(datetime!(2026-12-02 16:05:30 +02:00)),
            "2026-12-02 14:05 UTC"
        );
        assert_eq!(ago(datetime!(2026-12-02 14:05:00 UTC), now), "just now");
        assert_eq!(ago(datetime!(2026-12-02 14:02:00 UTC), now), "3 min ago");
        assert_eq!(ago(datetime!(2026-12-02 09:00:00 UTC), now), "5 h ago");
        assert_eq!(ago(datetime!(2026-12-01 09:00:00 UTC), now), "1 day ago");
        assert_eq!(ago(datetime!(2026-12-31 14:06:00 UTC), now), "in 29 days");
    }
}
