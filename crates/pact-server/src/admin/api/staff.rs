//! `/admin/api/v1/admins` and `/admin/api/v1/credentials`: the owner's view
//! of the staff accounts and API credentials, and revoking a credential.
//! Accounts and credentials are made with `pactd admin …` (their secrets are
//! shown once, on the command line).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::rfc3339;
use crate::admin::role::Role;
use crate::state::AppState;

/// `GET /admins` (owner, every brand).
pub async fn list_admins(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Owner, "admin.list").await?;
    caller.require_unlimited(&state, "admin.list").await?;
    let mut items: Vec<Value> = Vec::new();
    for a in pact_db::admins::list(&state.db).await? {
        // How many of each factor, never what they are.
        let passkeys = pact_db::admin_factors::count_passkeys(&state.db, a.id).await?;
        let codes = pact_db::admin_factors::unused_recovery_codes(&state.db, a.id).await?;
        items.push(json!({
            "email": a.email,
            "role": a.role,
            "brands": a.brands,
            "has_totp": a.has_totp(),
            "passkeys": passkeys,
            "recovery_codes_left": codes,
            "disabled_at": a.disabled_at.map(rfc3339),
            "created_at": rfc3339(a.created_at),
        }));
    }
    caller
        .record(&state.db, "admin.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

/// `GET /credentials` (owner, every brand): never a secret, only names.
pub async fn list_credentials(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Owner, "credential.list")
        .await?;
    caller.require_unlimited(&state, "credential.list").await?;
    let items: Vec<Value> = pact_db::admins::list_credentials(&state.db)
        .await?
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "role": c.role,
                "brands": c.brands,
                "created_at": rfc3339(c.created_at),
                "last_used_at": c.last_used_at.map(rfc3339),
                "revoked_at": c.revoked_at.map(rfc3339),
            })
        })
        .collect();
    caller
        .record(&state.db, "credential.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({ "items": items })))
}

/// `POST /credentials/{name}/revoke` (owner, every brand): refused from the
/// next request on.
pub async fn revoke_credential(
    State(state): State<AppState>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<Value>, AdminApiError> {
    caller
        .require(&state, Role::Owner, "credential.revoke")
        .await?;
    caller
        .require_unlimited(&state, "credential.revoke")
        .await?;
    let mut tx = state.db.begin().await?;
    if !pact_db::admins::revoke_credential(&mut *tx, &name).await? {
        return Err(AdminApiError::NotFound);
    }
    caller
        .record(&mut *tx, "credential.revoke", Some(&name), None, json!({}))
        .await?;
    tx.commit().await?;
    Ok(Json(json!({ "name": name, "revoked": true })))
}
