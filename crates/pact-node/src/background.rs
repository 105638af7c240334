//! The node's background work, started once by pact-server's `serve` under
//! one supervisor (`jobs.rs`): the change listener, housekeeping, the
//! database probe, the receipt log's tree heads and the node heartbeat.
//! Each takes the node and nothing of HTTP, so all of them live here; the
//! state the handlers share knows none of them.

use crate::jobs::{Job, supervise};
use crate::node::Node;

/// Starts the jobs; aborting the handle stops them all.
pub fn spawn(node: &Node) -> tokio::task::JoinHandle<()> {
    let jobs = vec![
        // A listener that stops leaves the memory views unfed: they stop answering.
        Job {
            on_stop: crate::listener::stopped,
            ..Job::new("listener", |n| Box::pin(crate::listener::run(n)))
        },
        Job::new("housekeeping", |n| Box::pin(crate::housekeeping::run(n))),
        Job::new("db_probe", |n| Box::pin(crate::db_health::probe(n))),
        Job::new("receipt_log", |n| Box::pin(crate::tree_heads::run(n))),
        Job::new("node_heartbeat", |n| Box::pin(crate::nodes::run(n))),
    ];
    tokio::spawn(supervise(node.clone(), jobs))
}
