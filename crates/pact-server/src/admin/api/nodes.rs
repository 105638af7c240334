//! `/admin/api/v1/nodes`: the pactd nodes sharing this database and whether
//! each one's revocation listener is subscribed (PACT §5.7: a revoked grant is
//! refused at once only on nodes that hear the revocation).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::caller::ApiCaller;
use super::error::AdminApiError;
use super::params::rfc3339;
use crate::admin::role::Role;
use crate::nodes::NodeView;
use crate::state::AppState;

fn node_json(n: &NodeView) -> Value {
    json!({
        "id": n.row.id,
        "hostname": n.row.hostname,
        "version": n.row.version,
        "started_at": rfc3339(n.row.started_at),
        "last_seen": rfc3339(n.row.last_seen),
        "listening": n.listening,
        "gone": n.gone,
    })
}

/// `GET /nodes` (viewer).
pub async fn list(
    State(state): State<AppState>,
    caller: ApiCaller,
) -> Result<Json<Value>, AdminApiError> {
    caller.require(&state, Role::Viewer, "node.list").await?;
    let nodes = crate::nodes::list(&state.db, state.clock.now()).await?;
    caller
        .record(&state.db, "node.list", None, None, json!({}))
        .await?;
    Ok(Json(json!({
        "summary": crate::nodes::summary(&nodes),
        "all_listening": nodes.iter().filter(|n| !n.gone).all(NodeView::healthy),
        "items": nodes.iter().map(node_json).collect::<Vec<_>>(),
    })))
}
