//! `/admin/api/v1/customers`: find brand customers (built-in accounts), see
//! their second factors and lock state, unlock, reset second factors, sign
//! out everywhere, disable, enable and remove (each written once, in
//! `admin::ops::customers`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::Uri;
use pact_db::admin_search;
use pact_db::users::User;
use pact_node::node::{Node, NodeInner};
use serde::Serialize;
use serde_json::json;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::answer::{Time, time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params;
use crate::admin::ops::customers::{self, Action, Change};
use crate::admin::role::Role;

/// The customer with this id, only if it is within the caller's brands.
pub async fn visible_customer(
    node: &NodeInner,
    caller: &ApiCaller,
    raw_id: &str,
) -> Result<User, AdminApiError> {
    let id = params::path_id(raw_id)?;
    admin_search::customer(&node.db, caller.actor.within(), id)
        .await?
        .ok_or(AdminApiError::NotFound)
}

/// A brand customer's built-in account (never its password or factors).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Customer)]
pub struct CustomerView {
    pub id: Uuid,
    pub brand: String,
    pub email: String,
    pub external_id: Option<String>,
    /// The subject grants and receipts name.
    pub subject: String,
    pub has_totp: bool,
    /// Set while failed sign-ins keep the account locked.
    pub locked_until: Option<Time>,
    pub disabled_at: Option<Time>,
    pub created_at: Time,
}

impl CustomerView {
    pub fn of(u: &User, now: OffsetDateTime) -> Self {
        Self {
            id: u.id,
            brand: u.brand_id.to_string(),
            email: u.email.clone(),
            external_id: u.external_id.clone(),
            subject: u.subject().into(),
            has_totp: u.has_totp(),
            locked_until: time(u.locked_until.filter(|t| *t > now)),
            disabled_at: time(u.disabled_at),
            created_at: Time(u.created_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CustomerList {
    pub items: Vec<CustomerView>,
}

/// One account with counts of its second factors and live grants.
#[derive(Debug, Serialize, ToSchema)]
pub struct CustomerDetail {
    #[serde(flatten)]
    pub customer: CustomerView,
    pub passkeys: usize,
    pub recovery_codes_left: i64,
    pub active_grants: i64,
}

/// What the action did to the account.
#[derive(Debug, Serialize, ToSchema)]
pub struct CustomerChanged {
    pub id: Uuid,
    #[serde(flatten)]
    pub change: Change,
}

/// `GET /customers?q=&brand=`: by email, account id or external id (exact).
pub async fn find(
    State(node): State<Node>,
    caller: ApiCaller,
    uri: Uri,
) -> Result<Json<CustomerList>, AdminApiError> {
    let q = params::query(&uri, &["q", "brand"])?;
    let Some(needle) = q.get("q").map(|s| s.trim()).filter(|s| !s.is_empty()) else {
        return Err(AdminApiError::invalid(
            "q (an email, account id or external id) is required",
        ));
    };
    let brand = q.get("brand").map(String::as_str);
    let now = node.clock.now();
    let found =
        admin_search::find_customers(&node.db, caller.actor.within(), brand, needle).await?;
    caller
        .record(
            &node.db,
            "customer.find",
            None,
            // A brand the caller cannot see is not named: not its log.
            brand.filter(|b| caller.actor.sees_brand(b)),
            // By opaque id, never the searched email (the log is append-only).
            json!({"found": found.len(),
                   "customers": found.iter().map(|u| u.id).collect::<Vec<_>>()}),
        )
        .await?;
    Ok(Json(CustomerList {
        items: found.iter().map(|u| CustomerView::of(u, now)).collect(),
    }))
}

/// `GET /customers/{id}`: the account with its second factors and grants.
pub async fn get(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerDetail>, AdminApiError> {
    let u = visible_customer(&node, &caller, &id).await?;
    let now = node.clock.now();
    let passkeys = pact_db::sessions::credentials_of(&node.db, u.id)
        .await?
        .len();
    let recovery = pact_db::users::unused_recovery_codes(&node.db, u.id).await?;
    let active = admin_search::active_grant_count(&node.db, &u.brand_id, &u.subject(), now).await?;
    let out = CustomerDetail {
        customer: CustomerView::of(&u, now),
        passkeys,
        recovery_codes_left: recovery,
        active_grants: active,
    };
    caller
        .record(
            &node.db,
            "customer.read",
            Some(&u.id.to_string()),
            Some(&u.brand_id),
            json!({}),
        )
        .await?;
    Ok(Json(out))
}

async fn post(
    node: Node,
    caller: ApiCaller,
    id: String,
    action: Action,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    let role = match action {
        // Erasing an account cannot be undone: the owner's call.
        Action::Remove => Role::Owner,
        _ => Role::Operator,
    };
    caller.require(&node, role, action.audit_name()).await?;
    let user = visible_customer(&node, &caller, &id).await?;
    let mut tx = node.db.begin().await?;
    let now = node.clock.now();
    let change =
        customers::apply(&mut tx, &caller.actor, Some(&caller.ip), &user, action, now).await?;
    tx.commit().await?;
    Ok(Json(CustomerChanged {
        id: user.id,
        change,
    }))
}

/// `POST /customers/{id}/unlock`
pub async fn unlock(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::Unlock).await
}

/// `POST /customers/{id}/reset-second-factors`
pub async fn reset_second_factors(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::ResetSecondFactors).await
}

/// `POST /customers/{id}/sign-out`
pub async fn sign_out(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::SignOut).await
}

/// `POST /customers/{id}/disable`: the account cannot sign in, its sessions
/// end and every grant it gave is revoked at once.
pub async fn disable(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::Disable).await
}

/// `POST /customers/{id}/enable`: the account can sign in again (its revoked
/// grants stay revoked).
pub async fn enable(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::Enable).await
}

/// `POST /customers/{id}/remove`: erases the account, its second factors and
/// sessions, and revokes every grant it gave (owner only).
pub async fn remove(
    State(node): State<Node>,
    caller: ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<CustomerChanged>, AdminApiError> {
    post(node, caller, id, Action::Remove).await
}
