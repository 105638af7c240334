//! Liveness and readiness for orchestrators.

use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use pact_node::node::{Node, NodeInner};

/// How long readiness waits for a change listener that is (re)connecting,
/// so that a node just started, or reconnecting after a blip, is not taken
/// out of service for the few milliseconds that takes.
const LISTENER_GRACE: Duration = Duration::from_secs(1);

/// `GET /healthz`: the process is up and serving.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the database answers and the node hears changes. A node
/// without the database must not take traffic; one whose change listener is
/// not proven alive (`feed.rs`) answers from the database, correctly but
/// slower, and misses a revocation made during a running turn (PACT §5.7),
/// so it says it is not ready and a health-checking proxy can prefer others.
pub async fn readyz(State(node): State<Node>) -> Response {
    if node.db_health.is_down() {
        return not_ready("database unavailable");
    }
    if let Err(e) = pact_db::ping(&node.db).await {
        tracing::warn!(error = %e, "readiness check failed");
        return not_ready("database unavailable");
    }
    if !listening_within(&node, LISTENER_GRACE).await {
        return not_ready("not listening for changes: answers from memory are off");
    }
    (StatusCode::OK, "ready").into_response()
}

/// 503 with `Retry-After` (RFC 9110 §10.2.3), like every 503 pactd sends.
fn not_ready(why: &'static str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, crate::error::UNAVAILABLE_RETRY_SECS)],
        why,
    )
        .into_response()
}

/// Whether the node's memory views are in use, waiting at most `grace`.
async fn listening_within(node: &NodeInner, grace: Duration) -> bool {
    let cache = &node.config_cache;
    if cache.is_live() {
        return true;
    }
    let mut events = node.feed.events();
    let live = events.wait_for(|_| cache.is_live());
    tokio::time::timeout(grace, live)
        .await
        .is_ok_and(|r| r.is_ok())
}
