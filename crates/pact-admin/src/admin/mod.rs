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

use crate::state::AppState;

/// Every admin route, merged into the one route table (router.rs).
pub fn routes() -> Router<AppState> {
    api::routes().merge(console::routes())
}
