//! `/admin/api/v1/audit`: the audit log, newest first, filterable; and
//! `/admin/api/v1/me`: who the credential is.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use pact_node::node::Node;
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::answer::{self, Time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params;
use crate::admin::role::Role;

/// One entry of the append-only audit log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    pub at: Time,
    /// `admin` (a console account), `credential` (an API credential),
    /// `cli` (the command line on the server) or `system` (pactd itself).
    pub actor_kind: String,
    pub actor: String,
    pub action: String,
    pub target: Option<String>,
    pub brand: Option<String>,
    /// What the action did, as it recorded it.
    #[schema(value_type = Object)]
    pub detail: Value,
    pub client_address: Option<String>,
}

impl From<pact_db::audit::Entry> for AuditEntry {
    fn from(e: pact_db::audit::Entry) -> Self {
        Self {
            id: e.id,
            at: Time(e.at),
            actor_kind: e.actor_kind,
            actor: e.actor,
            action: e.action,
            target: e.target,
            brand: e.brand_id,
            detail: e.detail,
            client_address: e.client_addr,
        }
    }
}

/// One page of the audit log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub items: Vec<AuditEntry>,
    /// Pass as `cursor` for the next page; `null` on the last one.
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The calling credential.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// `credential` for the API.
    pub kind: &'static str,
    pub name: String,
    #[schema(schema_with = answer::role)]
    pub role: Role,
    /// The brands it is limited to; `null`: every brand.
    #[schema(required = true)]
    pub brands: Option<Vec<String>>,
}

/// `GET /audit?actor=&action=&target=&brand=&cursor=&limit=`. `action` is
/// exact, or a prefix when it ends in `.` (`grant.`). A brand-limited caller
/// sees only entries about its brands.
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
    uri: Uri,
) -> Result<Json<AuditPage>, AdminApiError> {
    let q = params::query(
        &uri,
        &["actor", "action", "target", "brand", "cursor", "limit"],
    )?;
    let limit = params::limit(&q)?;
    let before = q
        .get("cursor")
        // An empty cursor is the first page, as no cursor is.
        .filter(|c| !c.is_empty())
        .map(|c| params::parse_audit_cursor(c))
        .transpose()?;
    // Recorded first, so a reader sees its own read.
    caller
        .record(&node.db, "audit.list", None, None, json!({}))
        .await?;
    let filter = pact_db::audit::Filter {
        brands: caller.actor.within(),
        actor: q.get("actor").map(String::as_str),
        action: q.get("action").map(String::as_str),
        target: q.get("target").map(String::as_str),
        brand_id: q.get("brand").map(String::as_str),
        before_id: before,
        limit: limit + 1,
    };
    let mut rows = pact_db::audit::list(&node.db, &filter).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        rows.last().map(|e| e.id.to_string())
    } else {
        None
    };
    Ok(Json(AuditPage {
        items: rows.into_iter().map(AuditEntry::from).collect(),
        next_cursor: next,
    }))
}

/// `GET /me`
pub async fn me(State(node): State<Node>, caller: ApiCaller) -> Result<Json<Me>, AdminApiError> {
    caller
        .record(&node.db, "credential.read", None, None, json!({}))
        .await?;
    Ok(Json(Me {
        kind: caller.actor.kind,
        name: caller.actor.name,
        role: caller.actor.role,
        brands: caller.actor.brands,
    }))
}
