//! `/admin/api/v1/admins` and `/admin/api/v1/credentials`: the owner's view
//! of the staff accounts and API credentials, and revoking a credential.
//! Accounts and credentials are made with `pactd admin …` (their secrets are
//! shown once, on the command line).

use axum::Json;
use axum::extract::{Path, State};
use pact_node::node::Node;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::answer::{self, Time, time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use crate::admin::role::Role;

/// A staff account of the console: its factors counted, never shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct Admin {
    pub email: String,
    #[schema(schema_with = answer::role)]
    pub role: Role,
    /// The brands it is limited to; `null`: every brand.
    #[schema(required = true)]
    pub brands: Option<Vec<String>>,
    pub has_totp: bool,
    pub passkeys: i64,
    pub recovery_codes_left: i64,
    pub disabled_at: Option<Time>,
    pub created_at: Time,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AdminList {
    pub items: Vec<Admin>,
}

/// An admin API credential: its name, never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct Credential {
    pub name: String,
    #[schema(schema_with = answer::role)]
    pub role: Role,
    /// The brands it is limited to; `null`: every brand.
    #[schema(required = true)]
    pub brands: Option<Vec<String>>,
    pub created_at: Time,
    pub last_used_at: Option<Time>,
    pub revoked_at: Option<Time>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialList {
    pub items: Vec<Credential>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialRevoked {
    pub name: String,
    pub revoked: bool,
}

/// `GET /admins` (owner, every brand).
pub async fn list_admins(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<AdminList>, AdminApiError> {
    caller.require(&node, Role::Owner, "admin.list").await?;
    caller.require_unlimited(&node, "admin.list").await?;
    let mut items = Vec::new();
    for a in pact_db::admins::list(&node.db).await? {
        // How many of each factor, never what they are.
        let passkeys = pact_db::admin_factors::count_passkeys(&node.db, a.id).await?;
        let codes = pact_db::admin_factors::unused_recovery_codes(&node.db, a.id).await?;
        items.push(Admin {
            has_totp: a.has_totp(),
            email: a.email,
            role: a.role,
            brands: a.brands,
            passkeys,
            recovery_codes_left: codes,
            disabled_at: time(a.disabled_at),
            created_at: Time(a.created_at),
        });
    }
    caller
        .record(&node.db, "admin.list", None, None, json!({}))
        .await?;
    Ok(Json(AdminList { items }))
}

/// `GET /credentials` (owner, every brand): never a secret, only names.
pub async fn list_credentials(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<CredentialList>, AdminApiError> {
    caller
        .require(&node, Role::Owner, "credential.list")
        .await?;
    caller.require_unlimited(&node, "credential.list").await?;
    let items = pact_db::admins::list_credentials(&node.db)
        .await?
        .into_iter()
        .map(|c| Credential {
            name: c.name,
            role: c.role,
            brands: c.brands,
            created_at: Time(c.created_at),
            last_used_at: time(c.last_used_at),
            revoked_at: time(c.revoked_at),
        })
        .collect();
    caller
        .record(&node.db, "credential.list", None, None, json!({}))
        .await?;
    Ok(Json(CredentialList { items }))
}

/// `POST /credentials/{name}/revoke` (owner, every brand): refused from the
/// next request on.
pub async fn revoke_credential(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<CredentialRevoked>, AdminApiError> {
    caller
        .require(&node, Role::Owner, "credential.revoke")
        .await?;
    caller.require_unlimited(&node, "credential.revoke").await?;
    let mut tx = node.db.begin().await?;
    if !pact_db::admins::revoke_credential(&mut *tx, &name).await? {
        return Err(AdminApiError::NotFound);
    }
    caller
        .record(&mut *tx, "credential.revoke", Some(&name), None, json!({}))
        .await?;
    tx.commit().await?;
    Ok(Json(CredentialRevoked {
        name,
        revoked: true,
    }))
}
