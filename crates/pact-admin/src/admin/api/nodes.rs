//! `/admin/api/v1/nodes`: the pactd nodes sharing this database and whether
//! each one's revocation listener is subscribed (PACT §5.7: a revoked grant is
//! refused at once only on nodes that hear the revocation).

use axum::Json;
use axum::extract::State;
use pact_node::node::Node;
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::answer::Time;
use super::caller::ApiCaller;
use super::error::AdminApiError;
use crate::admin::role::Role;
use crate::nodes::NodeView;

/// A pactd node on this database, by its heartbeat.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Node)]
pub struct NodeItem {
    pub id: Uuid,
    pub hostname: String,
    pub version: String,
    pub started_at: Time,
    pub last_seen: Time,
    /// Its change listener is subscribed, so it hears revocations at once.
    pub listening: bool,
    /// No heartbeat for long: taken as stopped.
    pub gone: bool,
}

impl From<&NodeView> for NodeItem {
    fn from(n: &NodeView) -> Self {
        Self {
            id: n.row.id,
            hostname: n.row.hostname.clone(),
            version: n.row.version.clone(),
            started_at: Time(n.row.started_at),
            last_seen: Time(n.row.last_seen),
            listening: n.listening,
            gone: n.gone,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeList {
    /// One line for people: how many nodes, how many listening.
    pub summary: String,
    /// Every node not gone hears revocations.
    pub all_listening: bool,
    pub items: Vec<NodeItem>,
}

/// `GET /nodes` (viewer).
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<NodeList>, AdminApiError> {
    caller.require(&node, Role::Viewer, "node.list").await?;
    let nodes = crate::nodes::list(&node.db, node.clock.now()).await?;
    caller
        .record(&node.db, "node.list", None, None, json!({}))
        .await?;
    Ok(Json(NodeList {
        summary: crate::nodes::summary(&nodes),
        all_listening: nodes.iter().filter(|n| !n.gone).all(NodeView::healthy),
        items: nodes.iter().map(NodeItem::from).collect(),
    }))
}
