//! Whether the database answers, as this node last saw it: marked down by a
//! request that met it unreachable, suspected by the change listener, marked
//! up by the probe ([`probe`], one of the node's background jobs; pact-server's
//! `db_health.rs` answers 503 in each face's format while it is down).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::node::Node;

pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// A probe that takes longer than this counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Background: waits until the database is marked down (or suspected, and a
/// check at once finds it unreachable), then probes it until it answers.
pub async fn probe(node: Node) {
    let health = &node.db_health;
    loop {
        if !health.is_down() {
            tokio::select! {
                () = health.woken() => {}
                () = health.suspected() => {
                    if !reachable_now(&node).await {
                        health.mark_down();
                    }
                }
            }
        }
        while health.is_down() {
            tokio::time::sleep(PROBE_EVERY).await;
            let ok = tokio::time::timeout(PROBE_TIMEOUT, pact_db::ping(&node.db))
                .await
                .is_ok_and(|r| r.is_ok());
            if ok {
                // Connections cut during the outage must not reach the first
                // requests after it (`pact_db::sweep_idle`).
                let closed = pact_db::sweep_idle(&node.db, PROBE_TIMEOUT).await
                    + pact_db::sweep_idle(&node.relaxed_db, PROBE_TIMEOUT).await;
                if closed > 0 {
                    tracing::info!(closed, "closed pooled connections broken by the outage");
                }
                node.db_health.mark_up();
            }
        }
    }
}

/// What one way of reaching the database said.
enum Reach {
    Yes,
    No,
    /// No verdict from this way (the other one decides).
    Unsure,
}

/// Whether the database answers now, asked two ways at once, whichever
/// answers first: a query through the pool (an idle connection that still
/// works proves it, even when the server has no room for a new one), and a
/// new connection outside the pool (a refusal or reset there is a verdict in
/// milliseconds, where the pool would retry it until its acquire timeout).
/// Neither within [`PROBE_TIMEOUT`] (a frozen network): unreachable.
pub async fn reachable_now(node: &Node) -> bool {
    let through_pool = async {
        match pact_db::ping(&node.db).await {
            Ok(()) => Reach::Yes,
            // One broken pooled connection says little about the server.
            Err(_) => Reach::Unsure,
        }
    };
    let new_connection = async {
        match pact_db::ping_new_connection(&node.db).await {
            Ok(()) => Reach::Yes,
            // The server answered, but has no room for one more connection
            // (53300): the pool's connections may still work.
            Err(e) if e.code().as_deref() == Some("53300") => Reach::Unsure,
            Err(e) if pact_db::classify(&e) == pact_db::Failure::Unavailable => Reach::No,
            // It answered (say, refused the login): it is up.
            Err(_) => Reach::Yes,
        }
    };
    let verdict = async {
        tokio::pin!(through_pool, new_connection);
        let (mut pool_done, mut new_done) = (false, false);
        loop {
            let reach = tokio::select! {
                r = &mut through_pool, if !pool_done => { pool_done = true; r }
                r = &mut new_connection, if !new_done => { new_done = true; r }
                else => return false,
            };
            match reach {
                Reach::Yes => return true,
                Reach::No => return false,
                Reach::Unsure => {}
            }
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, verdict)
        .await
        .unwrap_or(false)
}

#[derive(Debug, Default)]
pub struct DbHealth {
    down: AtomicBool,
    wake: Notify,
    /// Asks the probe for a check now (the listener lost its connection).
    suspect: Notify,
}

impl DbHealth {
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// A request met an unreachable database.
    pub fn mark_down(&self) {
        if !self.down.swap(true, Ordering::AcqRel) {
            tracing::warn!("database unreachable: answering 503 until it is back");
            self.wake.notify_one();
        }
    }

    /// The change listener lost its connection or its heartbeat: perhaps the
    /// database is gone; the probe checks at once.
    pub fn suspect(&self) {
        self.suspect.notify_one();
    }

    /// A probe found it answering again.
    pub fn mark_up(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            tracing::info!("database reachable again");
        }
    }

    /// Resolves when the database is marked down.
    pub fn woken(&self) -> tokio::sync::futures::Notified<'_> {
        self.wake.notified()
    }

    /// Resolves when the listener suspects the database.
    pub fn suspected(&self) -> tokio::sync::futures::Notified<'_> {
        self.suspect.notified()
    }
}
