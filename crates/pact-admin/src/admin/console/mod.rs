//! The staff console, `/admin`: server-rendered pages with the customers'
//! pages' safety (CSRF token and Origin check on every POST, the CSP without
//! inline script, no framing, rotated hashed sessions, lockout). Every action
//! goes through the same database functions as the admin API and lands in
//! the audit log under the admin's email.

pub mod audit_words;
pub mod brand_edit;
pub mod extract;
pub mod factors;
pub mod pages;
pub mod session;
pub mod signin;

use axum::Router;
use axum::routing::{MethodRouter, get, post};
use pact_node::node::NodeInner;
use serde_json::Value;

use crate::state::AppState;
use crate::web::PageError;

/// One console route: a page (`get`) or a form's action (`post`).
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub route: fn() -> MethodRouter<AppState>,
}

const fn page(path: &'static str, route: fn() -> MethodRouter<AppState>) -> Route {
    Route {
        method: "get",
        path,
        route,
    }
}

const fn form(path: &'static str, route: fn() -> MethodRouter<AppState>) -> Route {
    Route {
        method: "post",
        path,
        route,
    }
}

/// Every console route. One table, so that the test of the audit log
/// (tests/it/audit_coverage.rs) can list every form that changes something
/// and check that each leaves an entry: a new form without one fails it.
pub const ROUTES: &[Route] = &[
    page("/admin", || get(pages::overview)),
    page("/admin/sign-in", || get(signin::get_sign_in)),
    form("/admin/sign-in", || post(signin::post_sign_in)),
    page("/admin/second-factor", || get(signin::get_second_factor)),
    form("/admin/second-factor", || post(signin::post_second_factor)),
    page("/admin/totp-setup", || get(signin::get_totp_setup)),
    form("/admin/totp-setup", || post(signin::post_totp_setup)),
    form("/admin/sign-out", || post(signin::post_sign_out)),
    page("/admin/account", || get(factors::account)),
    form("/admin/passkeys/register/start", || {
        post(factors::register_start)
    }),
    form("/admin/passkeys/register/finish", || {
        post(factors::register_finish)
    }),
    form("/admin/passkeys/{id}/delete", || {
        post(factors::delete_passkey)
    }),
    form("/admin/passkeys/login/start", || post(factors::login_start)),
    form("/admin/passkeys/login/finish", || {
        post(factors::login_finish)
    }),
    form("/admin/recovery-codes", || {
        post(factors::new_recovery_codes)
    }),
    page("/admin/agents", || get(pages::agents)),
    form("/admin/agents", || post(pages::register_agent)),
    page("/admin/agents/disable", || get(pages::confirm_disable)),
    form("/admin/agents/disable", || post(pages::disable_agent)),
    form("/admin/agents/enable", || post(pages::enable_agent)),
    form("/admin/agents/verify", || post(pages::verify_agent)),
    form("/admin/agents/forget", || post(pages::forget_agent)),
    form("/admin/agents/block-host", || post(pages::block_host)),
    form("/admin/agents/unblock-host", || post(pages::unblock_host)),
    page("/admin/grants", || get(pages::grants)),
    page("/admin/grants/{id}", || get(pages::grant)),
    page("/admin/grants/{id}/receipts.json", || {
        get(pages::grant_receipts)
    }),
    form("/admin/grants/{id}/revoke", || post(pages::revoke_grant)),
    page("/admin/customers", || get(pages::customers)),
    form("/admin/customers/{id}/{action}", || {
        post(pages::customer_action)
    }),
    page("/admin/brands", || get(pages::brands)),
    page("/admin/brands/{id}", || get(pages::brand)),
    form("/admin/brands/{id}/scopes", || post(pages::upsert_scope)),
    form("/admin/brands/{id}/scopes/remove", || {
        post(pages::remove_scope)
    }),
    form("/admin/brands/{id}/card", || post(brand_edit::card_text)),
    form("/admin/brands/{id}/grant-lifetime", || {
        post(brand_edit::grant_lifetime)
    }),
    form("/admin/brands/{id}/admission", || {
        post(brand_edit::admission)
    }),
    form("/admin/brands/{id}/details-types", || {
        post(brand_edit::upsert_details_type)
    }),
    form("/admin/brands/{id}/details-types/remove", || {
        post(brand_edit::remove_details_type)
    }),
    form("/admin/brands/{id}/tools", || post(brand_edit::upsert_tool)),
    form("/admin/brands/{id}/tools/remove", || {
        post(brand_edit::remove_tool)
    }),
    page("/admin/keys", || get(pages::keys)),
    form("/admin/keys/rotate", || post(pages::rotate_key)),
    page("/admin/audit", || get(pages::audit)),
];

pub fn routes() -> Router<AppState> {
    let mut router = Router::new();
    // A path with a page and a form gets both: axum merges the two method
    // routers of one path.
    for r in ROUTES {
        router = router.route(r.path, (r.route)());
    }
    router
}

/// An audit entry for a console event.
pub async fn audit_event(
    node: &NodeInner,
    actor_kind: &str,
    actor: &str,
    action: &str,
    ip: &str,
    detail: Value,
) -> Result<(), PageError> {
    pact_db::audit::record(
        &node.db,
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
