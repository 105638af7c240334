//! `/admin/api/v1/keys`: the Provider's signing keys (public facts only: kid,
//! status and times; the private part never leaves the sealed column) and
//! their rotation, through the same function as `pactd keys rotate`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::rfc3339;
use crate::admin::role::Role;
use crate::keys::KeyInfo;
use crate::state::AppState;

pub fn key_json(k: &KeyInfo) -> Value {
    json!({
        "kid": k.kid,
        "status": k.status.as_str(),
        "created_at": rfc3339(k.created_at),
        "activates_at": rfc3339(k.activates_at),
        "retired_at": k.retired_at.map(rfc3339),
        "unpublish_at": k.unpublish_at.map(rfc3339),
    })
}

/// `GET /keys` (viewer): the keys are public (they are in every brand's
/// JWKS), so a brand-limited caller may read them too.
pub async fn list(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Viewer, "key.list").await?;
    let now = OffsetDateTime::now_utc();
    let items: Vec<Value> = crate::keys::list(&state.db, now)
        .await?
        .iter()
        .map(key_json)
        .collect();
    caller
        .record(&state.db, "key.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

/// Rotates as `pactd keys rotate` does without flags: the new key is
/// published now and signs after the overlap; the old ones stay published
/// for the retention. Every node picks the new key up through the
/// `pactd_keys` notification of the table trigger.
pub async fn rotate_now(state: &AppState, now: OffsetDateTime) -> Result<KeyInfo, AdminApiError> {
    let d = &state.config.delegation;
    let overlap = time::Duration::try_from(d.key_overlap)
        .map_err(|e| AdminApiError::Internal(Box::new(e)))?;
    let retain = time::Duration::try_from(d.key_retention)
        .map_err(|e| AdminApiError::Internal(Box::new(e)))?;
    let kid = crate::keys::rotate(&state.db, &state.config.master_key, now, overlap, retain)
        .await
        .map_err(|e| match e {
            crate::keys::KeyError::Db(e) => AdminApiError::from(e),
            other => AdminApiError::Internal(Box::new(other)),
        })?;
    crate::keys::list(&state.db, now)
        .await?
        .into_iter()
        .find(|k| k.kid == kid)
        .ok_or_else(|| AdminApiError::Internal(format!("rotated key {kid} not found").into()))
}

/// `POST /keys/rotate` (owner, every brand: the keys sign for all brands).
pub async fn rotate(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Owner, "key.rotate").await?;
    caller.require_unlimited(&state, "key.rotate").await?;
    let key = rotate_now(&state, OffsetDateTime::now_utc()).await?;
    caller
        .record(
            &state.db,
            "key.rotate",
            Some(&key.kid),
            None,
            json!({"signs_from": rfc3339(key.activates_at)}),
        )
        .await?;
    Ok(Json(key_json(&key)))
}
