//! The node's background work, started once by pact-server's `serve` under
//! one supervisor (`jobs.rs`): the change listener, housekeeping, the
//! database probe, the receipt log's tree heads and the node heartbeat.
//! Each takes the node and nothing of HTTP, so all of them live here; the
//! state the handlers share knows none of them.

use crate::jobs::{Job, supervise};
use crate::node::Node;

/// Starts the jobs; aborting the handle stops them all.
pub fn spawn(node: &Node) -> tokio::task::JoinHandle<()> {
    fn nothing(_: &Node) {}
    let jobs = vec![
        Job {
            name: "listener",
            run: |n| Box::pin(crate::listener::run(n)),
            on_stop: crate::listener::stopped,
        },
        Job {
            name: "housekeeping",
            run: |n| Box::pin(crate::housekeeping::run(n)),
            on_stop: nothing,
        },
        Job {
            name: "db_probe",
            run: |n| Box::pin(crate::db_health::probe(n)),
            on_stop: nothing,
        },
        Job {
            name: "receipt_log",
            run: |n| Box::pin(crate::tree_heads::run(n)),
            on_stop: nothing,
        },
        Job {
            name: "node_heartbeat",
            run: |n| Box::pin(crate::nodes::run(n)),
            on_stop: nothing,
        },
    ];
    tokio::spawn(supervise(node.clone(), jobs))
}
