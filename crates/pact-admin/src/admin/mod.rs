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

use axum::Router;
use axum::extract::{Request, State};
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

/// A staff change is seen by this node's very next request. Every node drops
/// its copy of the configuration rows (agents, brands, scopes, tools:
/// `pact_node::config_cache`) when the change's notification arrives; the
/// node the change was made on does not wait for its own notification. After
/// a staff request that may have changed something succeeded, it drops its
/// copy itself (after the handler committed), so that an agent disabled or a
/// scope removed here is refused here at once, however late the
/// notification. Only a success counts: a refused request changed nothing,
/// and no request that failed to sign in empties the copy.
async fn seen_here_at_once(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let may_change = !req.method().is_safe();
    let res = next.run(req).await;
    if may_change && (res.status().is_success() || res.status().is_redirection()) {
        state.config_cache.invalidate();
    }
    res
}
