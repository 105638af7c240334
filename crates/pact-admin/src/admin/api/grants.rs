//! `/admin/api/v1/grants`: search, one grant with its receipts, revoke one;
//! `/admin/api/v1/customers/{id}/revoke-grants`: revoke all of a customer's.
//!
//! Revocation goes through `pact_db::grants`, whose table trigger announces
//! it on `pactd_revocations`, so every node refuses the grant's tokens at once
//! (PACT §5.7), exactly as a customer's own revocation does.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use pact_db::admin_search::{self, GrantSearch, GrantState};
use pact_db::grants::Grant;
use pact_node::node::{Node, NodeInner};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::answer::{self, Time, time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::fields;
use super::params;
use crate::admin::role::Role;
use crate::admin::{ops, receipts_export};

/// A grant: who gave which agent which scopes of a brand, and until when.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Grant)]
pub struct GrantView {
    pub id: Uuid,
    pub brand: String,
    /// The person's subject at the brand.
    pub customer: String,
    /// The agent platform's issuer.
    pub agent: String,
    pub scopes: Vec<String>,
    /// Its state at the time of the request.
    #[schema(schema_with = answer::grant_state)]
    pub state: &'static str,
    pub created_at: Time,
    pub expires_at: Time,
    pub last_used_at: Option<Time>,
    pub revoked_at: Option<Time>,
    pub revoked_reason: Option<String>,
}

impl GrantView {
    pub fn of(g: &Grant, now: OffsetDateTime) -> Self {
        Self {
            id: g.id.as_uuid(),
            brand: g.brand_id.to_string(),
            customer: g.user_sub.to_string(),
            agent: g.pa_issuer.to_string(),
            scopes: g.scopes.clone(),
            state: GrantState::of(g, now).as_str(),
            created_at: Time(g.created_at),
            expires_at: Time(g.expires_at),
            last_used_at: time(g.last_used_at),
            revoked_at: time(g.revoked_at),
            revoked_reason: g.revoked_reason.clone(),
        }
    }
}

/// One page of grants, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantPage {
    pub items: Vec<GrantView>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// A grant with its details, its approval and its receipts.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantDetail {
    #[serde(flatten)]
    pub grant: GrantView,
    /// The RFC 9396 `authorization_details` approved, as stored.
    pub authorization_details: Option<Value>,
    /// When the person approved it and from where the agent asked.
    pub approval: Option<Approval>,
    /// PACT §5.6: each receipt's signature and the chain of `prev` hashes.
    pub receipt_chain: ReceiptChain,
    pub receipts: Vec<ReceiptView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Approval {
    pub approved_at: Option<Time>,
    pub agent_request_address: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReceiptChain {
    pub verified: bool,
    pub problems: Vec<ChainProblem>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ChainProblem {
    pub seq: i32,
    pub problem: String,
}

/// A signed receipt of a delegated reply (PACT §5.6).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Receipt)]
pub struct ReceiptView {
    pub seq: i32,
    pub message_id: String,
    pub created_at: Time,
    #[schema(value_type = Object)]
    pub claims: Value,
    pub jws: String,
}

/// A grant revoked by this request.
#[derive(Debug, Serialize, ToSchema)]
pub struct Revoked {
    pub id: Uuid,
    pub revoked: bool,
}

/// How many live grants of the customer this request revoked.
#[derive(Debug, Serialize, ToSchema)]
pub struct CustomerRevoked {
    pub id: Uuid,
    pub revoked_grants: usize,
}

/// The grant with this id, only if it is within the caller's brands.
pub async fn visible_grant(
    node: &NodeInner,
    caller: &ApiCaller,
    raw_id: &str,
) -> Result<Grant, AdminApiError> {
    let id = params::path_id(raw_id)?.into();
    match pact_db::grants::find(&node.db, id).await? {
        Some(g) if caller.actor.sees_brand(&g.brand_id) => Ok(g),
        _ => Err(AdminApiError::NotFound),
    }
}

/// A customer named by email, account id or subject: every subject it
/// resolves to within `within` (and `brand`), plus the value itself unless it
/// is an email (people who signed in through a brand's own login have no
/// account here). The console's grant search names customers the same way.
pub async fn customer_subjects(
    db: &pact_db::PgPool,
    within: Option<&[String]>,
    brand: Option<&str>,
    named: &str,
) -> pact_db::DbResult<Vec<String>> {
    let mut subs: Vec<String> = admin_search::find_customers(db, within, brand, named)
        .await?
        .iter()
        .map(|u| u.subject().into())
        .collect();
    if !named.contains('@') {
        subs.push(named.to_owned());
    }
    Ok(subs)
}

/// The `agent=` filter: an issuer URL as given (also of an agent since
/// forgotten), or a registered agent's name, compared without case. A name
/// that matches nothing or several agents is a 400 saying so, never an
/// empty list that reads as "no grants" (issue 30, item 2).
async fn agent_issuer(db: &sqlx::PgPool, given: &str) -> Result<String, AdminApiError> {
    let given = given.trim();
    if given.starts_with("https://") || given.starts_with("http://") {
        return Ok(given.to_owned());
    }
    let wanted = given.to_lowercase();
    let mut named: Vec<String> = pact_db::agents::list(db)
        .await?
        .into_iter()
        .filter(|a| a.name.trim().to_lowercase() == wanted)
        .map(|a| a.issuer.into())
        .collect();
    match named.len() {
        1 => Ok(named.remove(0)),
        0 => Err(AdminApiError::invalid(
            "agent: no registered agent has that name; give its issuer URL or its name",
        )),
        _ => Err(AdminApiError::invalid(
            "agent: several agents have that name; give the issuer URL",
        )),
    }
}

/// `GET /grants?brand=&customer=&agent=&state=&cursor=&limit=`, newest first.
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
    uri: Uri,
) -> Result<Json<GrantPage>, AdminApiError> {
    let q = params::query(
        &uri,
        &["brand", "customer", "agent", "state", "cursor", "limit"],
    )?;
    let now = node.clock.now();
    let limit = params::limit(&q)?;
    let grant_state = match q.get("state") {
        None => None,
        Some(s) => Some(GrantState::parse(s).ok_or_else(|| {
            AdminApiError::invalid("state must be active, revoked, superseded or expired")
        })?),
    };
    let after = q
        .get("cursor")
        // An empty cursor is the first page, as no cursor is.
        .filter(|c| !c.is_empty())
        .map(|c| params::parse_grant_cursor(c))
        .transpose()?;
    let brand = q.get("brand").map(String::as_str);
    let subjects = match q.get("customer") {
        None => None,
        Some(c) => Some(customer_subjects(&node.db, caller.actor.within(), brand, c).await?),
    };
    let issuer = match q.get("agent") {
        None => None,
        Some(a) => Some(agent_issuer(&node.db, a).await?),
    };
    let search = GrantSearch {
        within: caller.actor.within(),
        brand_id: brand,
        user_subs: subjects.as_deref(),
        pa_issuer: issuer.as_deref(),
        state: grant_state,
        after,
        limit: limit + 1,
    };
    let mut rows = admin_search::grants(&node.db, &search, now).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        rows.last()
            .map(|g| params::grant_cursor(g.created_at, g.id))
    } else {
        None
    };
    // The filter as given, but a customer by the opaque subjects it named,
    // never the searched email (docs/admin.md: the log is append-only and
    // outlives the account); and a brand the caller cannot see is not named
    // (its log is not this caller's to write into).
    let filter: serde_json::Map<String, Value> = q
        .iter()
        .filter(|(k, _)| k.as_str() != "cursor")
        .map(|(k, v)| match k.as_str() {
            "customer" => (k.clone(), json!(subjects)),
            _ => (k.clone(), json!(v)),
        })
        .collect();
    let seen_brand = brand.filter(|b| caller.actor.sees_brand(b));
    caller
        .record(
            &node.db,
            "grant.list",
            None,
            seen_brand,
            Value::Object(filter),
        )
        .await?;
    Ok(Json(GrantPage {
        items: rows.iter().map(|g| GrantView::of(g, now)).collect(),
        next_cursor: next,
    }))
}

/// `GET /grants/{id}`: scopes, details, approval, receipts.
pub async fn get(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<GrantDetail>, AdminApiError> {
    let g = visible_grant(&node, &caller, &id).await?;
    let now = node.clock.now();
    let approval = admin_search::approval_of(&node.db, g.id).await?;
    let receipts = pact_db::receipts::list(&node.db, Some(g.id)).await?;
    // PACT §5.6: each receipt's signature by a published key and the chain
    // of `prev` hashes, checked here so staff need no other tool.
    let breaks = receipts_export::chain_breaks(&node.db, &receipts)
        .await
        .map_err(AdminApiError::internal)?;
    let out = GrantDetail {
        grant: GrantView::of(&g, now),
        authorization_details: g.authorization_details.clone(),
        approval: approval.map(|a| Approval {
            approved_at: time(a.decided_at),
            agent_request_address: a.request_ip,
        }),
        receipt_chain: ReceiptChain {
            verified: breaks.is_empty(),
            problems: breaks
                .into_iter()
                .map(|b| ChainProblem {
                    seq: b.seq,
                    problem: b.problem,
                })
                .collect(),
        },
        receipts: receipts
            .into_iter()
            .map(|r| ReceiptView {
                seq: r.seq,
                message_id: r.message_id,
                created_at: Time(r.created_at),
                claims: r.claims,
                jws: r.jws,
            })
            .collect(),
    };
    caller
        .record(
            &node.db,
            "grant.read",
            Some(&g.id.to_string()),
            Some(&g.brand_id),
            json!({}),
        )
        .await?;
    Ok(Json(out))
}

/// `GET /grants/{id}/receipts`: the grant's receipts as a file that is
/// checked offline (admin/receipts_export.rs).
pub async fn receipts(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Response, AdminApiError> {
    let g = visible_grant(&node, &caller, &id).await?;
    let receipts = pact_db::receipts::list(&node.db, Some(g.id)).await?;
    let body = receipts_export::export_checked(&node.db, &node.config, &g, &receipts)
        .await
        .map_err(AdminApiError::internal)?;
    caller
        .record(
            &node.db,
            "grant.receipts.export",
            Some(&g.id.to_string()),
            Some(&g.brand_id),
            json!({"receipts": receipts.len()}),
        )
        .await?;
    Ok((
        [(
            axum::http::header::CONTENT_DISPOSITION,
            receipts_export::disposition(&g),
        )],
        Json(body),
    )
        .into_response())
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Reason)]
pub struct RevokeBody {
    #[schema(schema_with = fields::reason)]
    pub reason: Option<String>,
}

/// `POST /grants/{id}/revoke` `{"reason": "..."}`.
pub async fn revoke(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Revoked>, AdminApiError> {
    caller
        .require(&node, Role::Operator, "grant.revoke")
        .await?;
    let b: RevokeBody = params::body(&body)?;
    let why = params::reason(b.reason.as_deref())?;
    let g = visible_grant(&node, &caller, &id).await?;
    let mut tx = node.db.begin().await?;
    let ip = Some(caller.ip.as_str());
    if !ops::grants::revoke(&mut tx, &caller.actor, ip, &g, why.as_deref()).await? {
        return Err(AdminApiError::AlreadyRevoked);
    }
    tx.commit().await?;
    Ok(Json(Revoked {
        id: g.id.as_uuid(),
        revoked: true,
    }))
}

/// `POST /customers/{id}/revoke-grants` `{"reason": "..."}`: every live grant
/// the customer gave, to any agent.
pub async fn revoke_for_customer(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<CustomerRevoked>, AdminApiError> {
    caller
        .require(&node, Role::Operator, "customer.revoke_grants")
        .await?;
    let b: RevokeBody = params::body(&body)?;
    let why = params::reason(b.reason.as_deref())?;
    let user = super::customers::visible_customer(&node, &caller, &id).await?;
    let mut tx = node.db.begin().await?;
    let ip = Some(caller.ip.as_str());
    let revoked =
        ops::grants::revoke_for_customer(&mut tx, &caller.actor, ip, &user, why.as_deref()).await?;
    tx.commit().await?;
    Ok(Json(CustomerRevoked {
        id: user.id,
        revoked_grants: revoked,
    }))
}
