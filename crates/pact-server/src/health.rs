//! Liveness and readiness for orchestrators.

use axum::extract::State;
use axum::http::StatusCode;

use crate::state::AppState;

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the database answers; a node without it must not take traffic.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.db_health.is_down() {
        return (StatusCode::SERVICE_UNAVAILABLE, "database unavailable");
    }
    match pact_db::ping(&state.db).await {
        Ok(_) => (StatusCode::OK, "ready"),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        }
    }
}
