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
use crate::admin::ops;
use crate::admin::role::{Actor, Role};
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
    let now = state.clock.now();
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

/// Rotates as `pactd keys rotate` does without flags (the same function,
/// with the server's overlap and retention): the new key is published now
/// and signs after the overlap; the old ones stay published for the
/// retention. The audit entry (`key.rotate`, under `actor`) commits with the
/// key, and every node picks the key up through the `pactd_keys`
/// notification of the table trigger. Shared with the console.
pub async fn rotate_now(
    state: &AppState,
    actor: &Actor,
    ip: &str,
    now: OffsetDateTime,
) -> Result<KeyInfo, AdminApiError> {
    let d = &state.config.delegation;
    let overlap = time::Duration::try_from(d.key_overlap).map_err(AdminApiError::internal)?;
    let retain = time::Duration::try_from(d.key_retention).map_err(AdminApiError::internal)?;
    let key_error = |e| match e {
        crate::keys::KeyError::Db(e) => AdminApiError::from(e),
        other => AdminApiError::internal(other),
    };
    let mut tx = state.db.begin().await?;
    let master = &state.config.master_key;
    let key = ops::keys::rotate(&mut tx, actor, Some(ip), master, now, overlap, retain)
        .await
        .map_err(key_error)?;
    tx.commit().await?;
    Ok(key)
}

/// `POST /keys/rotate` (owner, every brand: the keys sign for all brands).
pub async fn rotate(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Owner, "key.rotate").await?;
    caller.require_unlimited(&state, "key.rotate").await?;
    let key = rotate_now(&state, &caller.actor, &caller.ip, state.clock.now()).await?;
    Ok(Json(key_json(&key)))
}
