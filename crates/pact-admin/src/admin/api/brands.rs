//! `/admin/api/v1/brands`: the brands an owner manages, each with the scopes
//! it offers (PACT §5: `{id, description}`, the description shown verbatim on
//! consent) and its grant lifetime. Scopes are added, changed and removed
//! through the same checks as `pactd brand scope add|remove`. A brand-limited
//! owner sees and edits its own brands only; any other answers `not_found`.
//!
//! The table triggers on `brand_scopes` announce every change on
//! `pactd_config`, so each node drops its cached copy at once.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use pact_db::ids::BrandId;
use pact_node::node::{Node, NodeInner};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::answer;
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::fields;
use super::params;
use crate::admin::brand_settings::{self, ToolDefinition};
use crate::admin::ops;
pub use crate::admin::ops::scopes::ScopeDefinition;
use crate::admin::role::{Actor, Role};
use crate::domain::authz_details::{DetailsType, DetailsTypes};

/// The brand's grant lifetime in days and whether it is the server default
/// (the same rule consent applies, `consent::grant_ttl`).
pub fn grant_lifetime(node: &NodeInner, b: &pact_db::brands::Brand) -> (i64, bool) {
    let own = b
        .settings
        .get("grant_ttl_days")
        .and_then(Value::as_i64)
        .filter(|d| (1..=365).contains(d));
    (
        crate::consent::grant_ttl(node, &b.settings).whole_days(),
        own.is_none(),
    )
}

/// A scope the brand offers (PACT §5), its description shown verbatim on
/// consent.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Scope)]
pub struct ScopeView {
    pub scope_id: String,
    pub description: String,
    pub requires_mfa: bool,
    /// Agents admitted under the open policy, not yet verified, may ask.
    pub unverified_allowed: bool,
}

/// A tool the brand's own agent calls through pactd's gateway.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Tool)]
pub struct ToolView {
    pub name: String,
    /// The scope a call needs; `null`: a public tool.
    pub scope: Option<String>,
    pub url: String,
    pub description: String,
    /// The tool's limit rules exactly as the gateway applies them.
    #[schema(value_type = Vec<String>)]
    pub enforce: Value,
    /// A JSON Schema of the arguments, given to the agent.
    pub input_schema: Option<Value>,
    /// `url`: pactd POSTs the signed call to `url`; `mcp`: `url` is the
    /// merchant's MCP server.
    #[schema(schema_with = answer::tool_kind)]
    pub kind: String,
    pub remote_name: Option<String>,
    /// False: imported from an MCP server without a scope; refused for
    /// everyone until mapped.
    pub mapped: bool,
    /// How one call reads to a person asked to approve it on its own.
    pub summary: String,
}

impl From<pact_db::merchant::BrandTool> for ToolView {
    fn from(t: pact_db::merchant::BrandTool) -> Self {
        Self {
            name: t.name,
            scope: t.scope,
            url: t.url,
            description: t.description,
            enforce: t.enforce,
            input_schema: t.input_schema,
            kind: t.kind,
            remote_name: t.remote_name,
            mapped: t.mapped,
            summary: t.summary,
        }
    }
}

/// A brand as its owner manages it: scopes, types, tools and policies.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Brand)]
pub struct BrandView {
    pub id: String,
    pub name: String,
    pub description: String,
    pub grant_lifetime_days: i64,
    pub grant_lifetime_is_default: bool,
    #[schema(schema_with = answer::admission_policy)]
    pub admission: &'static str,
    pub admission_is_default: bool,
    pub scopes: Vec<ScopeView>,
    /// RFC 9396 `authorization_details` types by name.
    #[schema(schema_with = answer::details_types)]
    pub details_types: DetailsTypes,
    pub tools: Vec<ToolView>,
}

impl BrandView {
    /// The brand with its scopes, types and tools as stored now.
    pub async fn load(
        node: &NodeInner,
        b: &pact_db::brands::Brand,
    ) -> Result<Self, pact_db::Error> {
        let scopes = pact_db::scopes::list(&node.db, &b.id).await?;
        let (days, default) = grant_lifetime(node, b);
        let (types, tools) = brand_settings::describe(&node.db, b).await?;
        Ok(Self {
            id: b.id.to_string(),
            name: b.name.clone(),
            description: b.description.clone(),
            grant_lifetime_days: days,
            grant_lifetime_is_default: default,
            admission: crate::admission::policy_at(node.config.admission.policy, b).as_str(),
            admission_is_default: crate::admission::brand_override(b).is_none(),
            scopes: scopes
                .into_iter()
                .map(|s| ScopeView {
                    scope_id: s.scope_id,
                    description: s.description,
                    requires_mfa: s.requires_mfa,
                    unverified_allowed: s.unverified_allowed,
                })
                .collect(),
            details_types: types,
            tools: tools.into_iter().map(ToolView::from).collect(),
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BrandList {
    pub items: Vec<BrandView>,
}

/// The brand a path names, if the actor may see it: `None` when the text is
/// no brand id, no brand has it, or it is outside the actor's brands (the
/// same answer, so nothing leaks). The brand found carries its [`BrandId`].
pub async fn visible(
    node: &NodeInner,
    actor: &Actor,
    brand_id: &str,
) -> Result<Option<pact_db::brands::Brand>, pact_db::Error> {
    if !actor.sees_brand(brand_id) || !BrandId::is_valid(brand_id) {
        return Ok(None);
    }
    pact_db::brands::find(&node.db, brand_id).await
}

/// `GET /brands` (owner): the caller's brands.
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<BrandList>, AdminApiError> {
    caller.require(&node, Role::Owner, "brand.list").await?;
    let mut items = Vec::new();
    for b in pact_db::brands::list(&node.db).await? {
        if caller.actor.sees_brand(&b.id) {
            items.push(BrandView::load(&node, &b).await?);
        }
    }
    caller
        .record(&node.db, "brand.list", None, None, json!({}))
        .await?;
    Ok(Json(BrandList { items }))
}

/// `GET /brands/{brand}` (owner).
pub async fn get(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
) -> Result<Json<BrandView>, AdminApiError> {
    caller.require(&node, Role::Owner, "brand.read").await?;
    let b = visible(&node, &caller.actor, &brand)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    caller
        .record(&node.db, "brand.read", Some(&b.id), Some(&b.id), json!({}))
        .await?;
    Ok(Json(BrandView::load(&node, &b).await?))
}

/// Adds or changes one scope of a visible brand, audited as `scope.upsert`
/// under `actor` (shared with the console; the one function is
/// `ops::scopes::upsert`).
pub async fn upsert_scope(
    node: &NodeInner,
    actor: &Actor,
    ip: &str,
    brand_id: &BrandId,
    def: &ScopeDefinition,
) -> Result<(), AdminApiError> {
    let mut tx = node.db.begin().await?;
    ops::scopes::upsert(&mut tx, actor, Some(ip), brand_id, def).await?;
    tx.commit().await?;
    Ok(())
}

/// Removes one scope of a visible brand, audited as `scope.remove`; false
/// when the brand has no such scope (shared with the console).
pub async fn remove_scope_of(
    node: &NodeInner,
    actor: &Actor,
    ip: &str,
    brand_id: &BrandId,
    scope_id: &str,
) -> Result<bool, AdminApiError> {
    let mut tx = node.db.begin().await?;
    let removed = ops::scopes::remove(&mut tx, actor, Some(ip), brand_id, scope_id).await?;
    tx.commit().await?;
    Ok(removed)
}

/// `POST /brands/{brand}/scopes` (owner): add or change a scope.
pub async fn put_scope(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    caller.require(&node, Role::Owner, "scope.upsert").await?;
    let b = visible(&node, &caller.actor, &brand)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    let def: ScopeDefinition = params::body(&body)?;
    upsert_scope(&node, &caller.actor, &caller.ip, &b.id, &def).await?;
    Ok(Json(BrandView::load(&node, &b).await?))
}

/// `POST /brands/{brand}/scopes/{scope}/remove` (owner). Grants that hold the
/// scope keep it until they end or are revoked, as with the command line.
pub async fn remove_scope(
    State(node): State<Node>,
    caller: ApiCaller,
    Path((brand, scope)): Path<(String, String)>,
) -> Result<Json<BrandView>, AdminApiError> {
    caller.require(&node, Role::Owner, "scope.remove").await?;
    let b = visible(&node, &caller.actor, &brand)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    if !remove_scope_of(&node, &caller.actor, &caller.ip, &b.id, &scope).await? {
        return Err(AdminApiError::NotFound);
    }
    Ok(Json(BrandView::load(&node, &b).await?))
}

/// The brand of an owner's edit: the role first (refused and recorded before
/// anything is looked up), then the brand, "not found" outside the caller's.
async fn brand_to_edit(
    node: &NodeInner,
    caller: &ApiCaller,
    action: &str,
    brand: &str,
) -> Result<pact_db::brands::Brand, AdminApiError> {
    caller.require(node, Role::Owner, action).await?;
    visible(node, &caller.actor, brand)
        .await?
        .ok_or(AdminApiError::NotFound)
}

/// What the brand's Agent Card says of it; a field left out is unchanged,
/// and at least one must be given. `null` is refused rather than read as
/// "left out": the schema says what a field is, and null is none of them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CardText {
    /// 1–200 characters; absent: unchanged.
    #[serde(default, deserialize_with = "params::given")]
    #[schema(schema_with = fields::brand_name)]
    pub name: Option<String>,
    /// At most 1000 characters, empty for one made from the name; absent: unchanged.
    #[serde(default, deserialize_with = "params::given")]
    #[schema(schema_with = fields::card_description)]
    pub description: Option<String>,
    /// The card's skills; `[]` for the brand agent's own; absent: unchanged.
    #[serde(default, deserialize_with = "params::given")]
    #[schema(schema_with = fields::card_skills)]
    pub skills: Option<Vec<pact_proto::card::AgentSkill>>,
}

/// `POST /brands/{brand}/card` (owner), as `pactd brand set --name
/// --description`: what the brand's Agent Card says of it.
pub async fn set_card_text(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "brand.card", &brand).await?;
    let req: CardText = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    let edit = brand_settings::CardEdit {
        name: req.name.as_deref(),
        description: req.description.as_deref(),
        skills: req.skills,
    };
    brand_settings::set_card_text(&mut tx, &caller.actor, Some(&caller.ip), &b, edit).await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantLifetime {
    /// How long new grants last; null: the server's default.
    #[serde(deserialize_with = "params::present_whole")]
    #[schema(minimum = 1, maximum = 365, required = true)]
    pub days: Option<i64>,
}

/// `POST /brands/{brand}/grant-lifetime` (owner), as `pactd brand set
/// --grant-ttl-days`: how long the brand's new grants last.
pub async fn set_grant_lifetime(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "brand.grant_lifetime", &brand).await?;
    let req: GrantLifetime = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    brand_settings::set_grant_lifetime(&mut tx, &caller.actor, Some(&caller.ip), &b, req.days)
        .await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Admission {
    /// `allowlist`, `registry`, `open`, or null for the Provider's policy.
    #[serde(deserialize_with = "params::present")]
    #[schema(schema_with = fields::policy_or_default, required = true)]
    pub policy: Option<String>,
}

/// `POST /brands/{brand}/admission` (owner), as `pactd brand set
/// --admission`: which personal agents the brand admits (PACT §3.1).
pub async fn set_admission(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "brand.admission", &brand).await?;
    let req: Admission = params::body(&body)?;
    let policy = match req.policy.as_deref() {
        None => None,
        Some(p) => Some(crate::admission::Policy::parse(p).ok_or_else(|| {
            AdminApiError::invalid("policy is allowlist, registry, open or null")
        })?),
    };
    let mut tx = node.db.begin().await?;
    brand_settings::set_admission(&mut tx, &caller.actor, Some(&caller.ip), &b, policy).await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

/// The body of `POST /brands/{brand}/details-types`: a type's name and its
/// declaration (RFC 9396 §2; PACT §5.7).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DetailsTypeDefinition {
    /// The `type` value that the grant's `authorization_details` entries carry.
    #[schema(schema_with = fields::type_name)]
    pub type_name: String,
    #[schema(schema_with = fields::details_type)]
    pub declaration: DetailsType,
}

/// The brand as it is now, after an edit.
async fn fresh_brand(
    node: &NodeInner,
    brand_id: &BrandId,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = pact_db::brands::find(&node.db, brand_id)
        .await?
        .ok_or(AdminApiError::NotFound)?;
    Ok(Json(BrandView::load(node, &b).await?))
}

/// `POST /brands/{brand}/details-types` (owner), as `pactd brand
/// details-type add`: declare or replace an RFC 9396 type.
pub async fn put_details_type(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "details_type.upsert", &brand).await?;
    let def: DetailsTypeDefinition = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    brand_settings::upsert_details_type(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &b,
        &def.type_name,
        def.declaration,
    )
    .await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

/// `POST /brands/{brand}/details-types/{type}/remove` (owner).
pub async fn remove_details_type(
    State(node): State<Node>,
    caller: ApiCaller,
    Path((brand, type_name)): Path<(String, String)>,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "details_type.remove", &brand).await?;
    let mut tx = node.db.begin().await?;
    brand_settings::remove_details_type(&mut tx, &caller.actor, Some(&caller.ip), &b, &type_name)
        .await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

/// `POST /brands/{brand}/tools` (owner), as `pactd brand tool add`.
pub async fn put_tool(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(brand): Path<String>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "tool.upsert", &brand).await?;
    let def: ToolDefinition = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    brand_settings::upsert_tool(&mut tx, &caller.actor, Some(&caller.ip), &b, def).await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

/// The body of `POST /brands/{brand}/tools/{tool}/rules`.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ToolRules)]
pub struct ToolRulesBody {
    /// The tool's limit rules, as in `ToolDefinition`; `[]` clears them.
    /// Required: a body that leaves them out must not lift every limit of
    /// the tool on new grants.
    #[schema(schema_with = fields::rules)]
    pub enforce: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = fields::summary_or_keep)]
    pub summary: Option<String>,
}

/// `POST /brands/{brand}/tools/{tool}/rules` (owner).
pub async fn set_tool_rules(
    State(node): State<Node>,
    caller: ApiCaller,
    Path((brand, tool)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "tool.set_rules", &brand).await?;
    let rules: ToolRulesBody = params::body(&body)?;
    let mut tx = node.db.begin().await?;
    brand_settings::set_tool_rules(
        &mut tx,
        &caller.actor,
        Some(&caller.ip),
        &b,
        &tool,
        rules.enforce,
        rules.summary,
    )
    .await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}

/// `POST /brands/{brand}/tools/{tool}/remove` (owner).
pub async fn remove_tool(
    State(node): State<Node>,
    caller: ApiCaller,
    Path((brand, tool)): Path<(String, String)>,
) -> Result<Json<BrandView>, AdminApiError> {
    let b = brand_to_edit(&node, &caller, "tool.remove", &brand).await?;
    let mut tx = node.db.begin().await?;
    brand_settings::remove_tool(&mut tx, &caller.actor, Some(&caller.ip), &b, &tool).await?;
    tx.commit().await?;
    fresh_brand(&node, &b.id).await
}
