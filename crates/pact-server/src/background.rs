//! The node's background work, started once by `serve` under one
//! supervisor (`jobs.rs`): the change listener, housekeeping, the database
//! probe, the receipt tree head and the node heartbeat. Here rather than in
//! `state.rs`, so that the state the handlers share is built from the layers
//! below them and knows none of the jobs that use it.

use crate::jobs::Job;
use crate::state::AppState;

/// Starts the jobs; aborting the handle stops them all.
pub fn spawn(state: &AppState) -> tokio::task::JoinHandle<()> {
    fn nothing(_: &AppState) {}
    let jobs = vec![
        Job {
            name: "listener",
            run: |s: AppState| Box::pin(crate::listener::run(s.node.clone())),
            on_stop: |s: &AppState| crate::listener::stopped(&s.node),
        },
        Job {
            name: "housekeeping",
            run: |s: AppState| Box::pin(crate::housekeeping::run(s.node.clone())),
            on_stop: nothing,
        },
        Job {
            name: "db_probe",
            run: |s: AppState| Box::pin(crate::db_health::probe(s.node.clone())),
            on_stop: nothing,
        },
        Job {
            name: "receipt_log",
            run: |s: AppState| Box::pin(crate::receipt_log::run(s.node.clone())),
            on_stop: nothing,
        },
        Job {
            name: "node_heartbeat",
            run: |s: AppState| Box::pin(crate::nodes::run(s.node.clone())),
            on_stop: nothing,
        },
    ];
    tokio::spawn(crate::jobs::supervise(state.clone(), jobs))
}
