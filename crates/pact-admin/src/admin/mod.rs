//! The merchant's staff side: the admin API (`/admin/api/v1`) and the
//! console (`/admin`). Staff accounts and API credentials are separate from
//! brand customers; every action lands in the audit log.

pub mod api;
pub mod brand_settings;
pub mod console;
pub mod credential;
pub mod ops;
pub mod receipts_export;
pub mod role;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::Extensions;
use axum::middleware::{self, Next};
use axum::response::Response;

use crate::state::AppState;

/// Every admin route, merged into the one route table (router.rs).
pub fn routes(state: &AppState) -> Router<AppState> {
    api::routes()
        .merge(console::routes())
        .layer(middleware::from_fn_with_state(
            state.clone(),
            seen_here_at_once,
        ))
}

/// Proof, set by the staff extractors (`ApiCaller`, the console's `Viewer`
/// and `StaffForm`), that a request comes from signed-in staff.
#[derive(Clone, Default)]
pub(crate) struct StaffRequest(Arc<AtomicBool>);

impl StaffRequest {
    /// Marks the request these extensions belong to as a signed-in staff
    /// member's (a request outside `routes` carries no mark to set).
    pub(crate) fn proven(extensions: &Extensions) {
        if let Some(mark) = extensions.get::<Self>() {
            mark.set();
        }
    }

    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// A staff change is seen by this node's very next request. Every node drops
/// its copy of the configuration rows (agents, brands, scopes, tools:
/// `pact_node::config_cache`) when the change's notification arrives; the
/// node the change was made on does not wait for its own notification. After
/// a signed-in staff member's request that may have changed something
/// succeeded, it drops its copy itself (after the handler committed), so that
/// an agent disabled or a scope removed here is refused here at once, however
/// late the notification. Only such a request counts: anyone can send a POST
/// that is redirected to the sign-in page, and dropping the copy for it would
/// let them make every request read the database.
async fn seen_here_at_once(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let may_change = !req.method().is_safe();
    let staff = StaffRequest::default();
    req.extensions_mut().insert(staff.clone());
    let res = next.run(req).await;
    let succeeded = res.status().is_success() || res.status().is_redirection();
    if may_change && succeeded && staff.0.load(Ordering::Acquire) {
        state.config_cache.invalidate();
    }
    res
}
