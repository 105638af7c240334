//! This node's heartbeat: a row in `nodes` refreshed about every 10 s with
//! whether the change listener is subscribed and its feed proven alive
//! (`feed.rs`). A node without it would keep accepting tokens of grants
//! revoked elsewhere (PACT §5.7 wants them refused at once), so the console's
//! overview names such a node. A row not refreshed for [`UNSURE_AFTER`] no
//! longer counts as listening: whatever it said, it said too long ago.

use std::time::Duration;

use pact_db::nodes::NodeRow;
use time::OffsetDateTime;

use crate::node::Node;

/// How often a node refreshes its row.
pub const BEAT: Duration = Duration::from_secs(10);
/// A row older than this (a missed beat, with room for a slow write) says
/// nothing any more about whether its node listens.
pub const UNSURE_AFTER: time::Duration = time::Duration::seconds(15);
/// A row older than this (three missed beats) is shown as gone.
pub const GONE_AFTER: time::Duration = time::Duration::seconds(35);
/// A row older than this is removed (housekeeping).
pub const SWEEP_AFTER: time::Duration = time::Duration::minutes(5);

pub use crate::node_identity::NodeIdentity;

/// Writes this node's row now.
pub async fn beat(node: &Node, now: OffsetDateTime) -> Result<(), pact_db::Error> {
    let n = &node.identity;
    pact_db::nodes::heartbeat(
        &node.db,
        &NodeRow {
            id: n.id,
            hostname: n.hostname.clone(),
            version: n.version.to_owned(),
            started_at: n.started_at,
            last_seen: now,
            listening: node.config_cache.is_live(),
        },
    )
    .await
}

/// Runs until the process ends: a beat every [`BEAT`], and at once when the
/// listener connects or drops, so the overview does not lag behind it.
pub async fn run(node: Node) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<(tokio::time::Instant, bool)> = None;
    loop {
        tick.tick().await;
        let live = node.config_cache.is_live();
        let due = last.is_none_or(|(at, was)| was != live || at.elapsed() >= BEAT);
        if !due {
            continue;
        }
        if let Err(e) = beat(&node, node.clock.now()).await {
            tracing::warn!(error = %e, "node heartbeat failed");
        }
        // Tried: the next try is at the next beat (or listener change), so a
        // database outage gives one warning per beat, not one per tick.
        last = Some((tokio::time::Instant::now(), live));
    }
}

/// What staff see of a node at `now`.
#[derive(Clone, Debug)]
pub struct NodeView {
    pub row: NodeRow,
    /// Said it listens, and said so within [`UNSURE_AFTER`].
    pub listening: bool,
    /// Not heard from for [`GONE_AFTER`].
    pub gone: bool,
}

impl NodeView {
    pub fn at(row: NodeRow, now: OffsetDateTime) -> Self {
        Self {
            listening: row.listening && row.last_seen >= now - UNSURE_AFTER,
            gone: row.last_seen < now - GONE_AFTER,
            row,
        }
    }

    /// Alive and listening: revocations reach it at once.
    pub fn healthy(&self) -> bool {
        !self.gone && self.listening
    }
}

pub async fn list(
    db: &pact_db::PgPool,
    now: OffsetDateTime,
) -> Result<Vec<NodeView>, pact_db::Error> {
    Ok(pact_db::nodes::list(db)
        .await?
        .into_iter()
        .map(|row| NodeView::at(row, now))
        .collect())
}

/// The overview's one line: "N nodes, all listening", or which are not.
pub fn summary(nodes: &[NodeView]) -> String {
    let alive: Vec<&NodeView> = nodes.iter().filter(|n| !n.gone).collect();
    let deaf: Vec<String> = alive
        .iter()
        .filter(|n| !n.listening)
        .map(|n| format!("{} ({})", n.row.hostname, n.row.id))
        .collect();
    let count = match alive.len() {
        // Only just started: even this node has not written its row yet.
        0 => return "no node has reported yet".to_owned(),
        1 => "1 node".to_owned(),
        n => format!("{n} nodes"),
    };
    if deaf.is_empty() {
        format!("{count}, all listening")
    } else {
        format!(
            "{count}; not listening for revocations: {}",
            deaf.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn view(host: &str, listening: bool, gone: bool) -> NodeView {
        let t = OffsetDateTime::UNIX_EPOCH;
        NodeView {
            row: NodeRow {
                id: Uuid::nil(),
                hostname: host.into(),
                version: "0".into(),
                started_at: t,
                last_seen: t,
                listening,
            },
            listening,
            gone,
        }
    }

    #[test]
    fn a_row_not_refreshed_for_a_beat_and_more_no_longer_counts_as_listening() {
        let seen = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        let row = NodeRow {
            id: Uuid::nil(),
            hostname: "b".into(),
            version: "0".into(),
            started_at: seen,
            last_seen: seen,
            listening: true,
        };
        let fresh = NodeView::at(row.clone(), seen + time::Duration::seconds(10));
        assert!(fresh.listening && fresh.healthy());
        let unsure = NodeView::at(row.clone(), seen + time::Duration::seconds(16));
        assert!(!unsure.listening && !unsure.gone && !unsure.healthy());
        assert!(NodeView::at(row, seen + time::Duration::seconds(36)).gone);
    }

    #[test]
    fn the_summary_names_the_node_that_does_not_listen_and_ignores_gone_ones() {
        assert_eq!(
            summary(&[view("a", true, false), view("b", true, false)]),
            "2 nodes, all listening"
        );
        assert_eq!(
            summary(&[view("a", true, false), view("old", false, true)]),
            "1 node, all listening"
        );
        assert_eq!(
            summary(&[view("old", true, true)]),
            "no node has reported yet"
        );
        let s = summary(&[view("a", true, false), view("b", false, false)]);
        assert!(
            s.starts_with("2 nodes; not listening for revocations: b ("),
            "{s}"
        );
    }
}
