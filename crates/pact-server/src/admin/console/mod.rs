//! The staff console, `/admin`: server-rendered pages with the customers'
//! pages' safety (CSRF token and Origin check on every POST, the CSP without
//! inline script, no framing, rotated hashed sessions, lockout). Every action
//! goes through the same database functions as the admin API and lands in
//! the audit log under the admin's email.

pub mod brand_edit;
pub mod factors;
pub mod pages;
pub mod session;
pub mod signin;

use axum::Router;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use serde_json::Value;

use crate::state::AppState;
use crate::web::PageError;
use crate::web::form::Fields;
use session::Staff;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin", get(pages::overview))
        .route(
            "/admin/sign-in",
            get(signin::get_sign_in).post(signin::post_sign_in),
        )
        .route(
            "/admin/second-factor",
            get(signin::get_second_factor).post(signin::post_second_factor),
        )
        .route(
            "/admin/totp-setup",
            get(signin::get_totp_setup).post(signin::post_totp_setup),
        )
        .route("/admin/sign-out", post(signin::post_sign_out))
        .route("/admin/account", get(factors::account))
        .route(
            "/admin/passkeys/register/start",
            post(factors::register_start),
        )
        .route(
            "/admin/passkeys/register/finish",
            post(factors::register_finish),
        )
        .route("/admin/passkeys/{id}/delete", post(factors::delete_passkey))
        .route("/admin/passkeys/login/start", post(factors::login_start))
        .route("/admin/passkeys/login/finish", post(factors::login_finish))
        .route("/admin/recovery-codes", post(factors::new_recovery_codes))
        .route(
            "/admin/agents",
            get(pages::agents).post(pages::register_agent),
        )
        .route(
            "/admin/agents/disable",
            get(pages::confirm_disable).post(pages::disable_agent),
        )
        .route("/admin/agents/enable", post(pages::enable_agent))
        .route("/admin/grants", get(pages::grants))
        .route("/admin/grants/{id}", get(pages::grant))
        .route(
            "/admin/grants/{id}/receipts.json",
            get(pages::grant_receipts),
        )
        .route("/admin/grants/{id}/revoke", post(pages::revoke_grant))
        .route("/admin/customers", get(pages::customers))
        .route(
            "/admin/customers/{id}/{action}",
            post(pages::customer_action),
        )
        .route("/admin/brands", get(pages::brands))
        .route("/admin/brands/{id}", get(pages::brand))
        .route("/admin/brands/{id}/scopes", post(pages::upsert_scope))
        .route(
            "/admin/brands/{id}/scopes/remove",
            post(pages::remove_scope),
        )
        .route(
            "/admin/brands/{id}/grant-lifetime",
            post(brand_edit::grant_lifetime),
        )
        .route(
            "/admin/brands/{id}/details-types",
            post(brand_edit::upsert_details_type),
        )
        .route(
            "/admin/brands/{id}/details-types/remove",
            post(brand_edit::remove_details_type),
        )
        .route("/admin/brands/{id}/tools", post(brand_edit::upsert_tool))
        .route(
            "/admin/brands/{id}/tools/remove",
            post(brand_edit::remove_tool),
        )
        .route("/admin/keys", get(pages::keys))
        .route("/admin/keys/rotate", post(pages::rotate_key))
        .route("/admin/audit", get(pages::audit))
}

/// The first steps of every console POST: the Origin check, then the form,
/// then the session's CSRF token (web/security.rs's rules).
pub fn guard(
    state: &AppState,
    headers: &HeaderMap,
    staff: &Staff,
    body: &[u8],
) -> Result<Fields, PageError> {
    crate::web::security::check_origin(headers, &state.config.public_url)?;
    let form = Fields::parse(body);
    let Some(s) = &staff.session else {
        return Err(PageError::Forbidden(
            "Your session has ended. Sign in again.".into(),
        ));
    };
    crate::web::security::check_csrf(&s.csrf_token, form.get("csrf"))?;
    Ok(form)
}

/// An audit entry for a console event.
pub async fn audit_event(
    state: &AppState,
    actor_kind: &str,
    actor: &str,
    action: &str,
    ip: &str,
    detail: Value,
) -> Result<(), PageError> {
    pact_db::audit::record(
        &state.db,
        &pact_db::audit::NewEntry {
            actor_kind,
            actor,
            action,
            target: None,
            brand_id: None,
            detail,
            client_addr: Some(ip),
        },
    )
    .await?;
    Ok(())
}
