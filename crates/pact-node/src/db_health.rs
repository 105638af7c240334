//! Whether the database answers, as this node last saw it: marked down by a
//! request that met it unreachable, suspected by the change listener, marked
//! up by the probe (pact-server's `db_health.rs`, which also answers 503 in
//! each face's format while it is down).

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

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
