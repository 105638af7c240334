//! `/admin/api/v1/audit`: the audit log, newest first, filterable; and
//! `/admin/api/v1/me`: who the credential is.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use serde_json::{Value, json};

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::{self, rfc3339};
use crate::state::AppState;

pub fn entry_json(e: &pact_db::audit::Entry) -> Value {
    json!({
        "id": e.id,
        "at": rfc3339(e.at),
        "actor_kind": e.actor_kind,
        "actor": e.actor,
        "action": e.action,
        "target": e.target,
        "brand": e.brand_id,
        "detail": e.detail,
        "client_address": e.client_addr,
    })
}

/// `GET /audit?actor=&action=&target=&brand=&cursor=&limit=`. `action` is
/// exact, or a prefix when it ends in `.` (`grant.`). A brand-limited caller
/// sees only entries about its brands.
pub async fn list(
    State(state): State<AppState>,
    caller: ApiCaller,
    uri: Uri,
) -> Result<Json<Value>, AdminApiError> {
    let q = params::query(
        &uri,
        &["actor", "action", "target", "brand", "cursor", "limit"],
    )?;
    let limit = params::limit(&q)?;
    let before = q
        .get("cursor")
        .map(|c| params::parse_audit_cursor(c))
        .transpose()?;
    // Recorded first, so a reader sees its own read.
    caller
        .record(&state.db, "audit.list", None, None, json!({}))
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
    let mut rows = pact_db::audit::list(&state.db, &filter).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        rows.last().map(|e| e.id.to_string())
    } else {
        None
    };
    Ok(Json(json!({
        "items": rows.iter().map(entry_json).collect::<Vec<_>>(),
        "next_cursor": next,
    })))
}

/// `GET /me`
pub async fn me(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .record(&state.db, "credential.read", None, None, json!({}))
        .await?;
    Ok(Json(json!({
        "kind": caller.actor.kind,
        "name": caller.actor.name,
        "role": caller.actor.role.as_str(),
        "brands": caller.actor.brands,
    })))
}
