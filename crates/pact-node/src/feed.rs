//! Whether this node's change feed is proven alive, and so whether what the
//! node keeps in memory may answer a request.
//!
//! The memory views (the configuration copy, pending device codes, and with
//! them the agent rows behind the signature memo's callers) are right only
//! while every change committed elsewhere reaches this node. A `LISTEN`
//! connection that dies silently (a NAT that dropped its mapping, a database
//! host that vanished, a proxy that stopped forwarding) reports nothing: its
//! socket neither closes nor errs, and a node trusting it would answer from
//! memory for ever. So the feed is trusted only as far as a heartbeat proves
//! it: the listener sends a `NOTIFY` to a channel of its own over the same
//! connection and waits for it to come back (`listener.rs`). Notifications
//! arrive in commit order, so the echo of a heartbeat sent at `t` proves that
//! every change committed before `t` has been heard. The memory is used while
//! the last such proof is at most [`ListenerSettings::bound`] old, checked at
//! each use, so even a listener task that is stuck cannot stretch it.
//!
//! Time here is real time (a network timeout), not the node's clock: tests
//! that move the clock forward must not make the feed look dead.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pact_core::config::ListenerSettings;

/// A memory view may answer when its feed was proven current at `proven`
/// (`None`: not since the listener last (re)subscribed) and `now` is at most
/// `bound` later.
pub fn fresh(proven: Option<Instant>, now: Instant, bound: Duration) -> bool {
    proven.is_some_and(|at| now.saturating_duration_since(at) <= bound)
}

pub struct ChangeFeed {
    /// The instant the offsets below count from.
    origin: Instant,
    /// One more than the milliseconds after `origin` as of which the feed was
    /// last proven current; 0 while unproven (not subscribed, or lost).
    proven_ms: AtomicU64,
    bound: Duration,
    /// Counts proofs and losses, so that whoever waits for the feed (readyz
    /// during a reconnect, the tests) is woken instead of polling.
    events: tokio::sync::watch::Sender<u64>,
}

impl ChangeFeed {
    pub fn new(settings: &ListenerSettings) -> Self {
        Self {
            origin: Instant::now(),
            proven_ms: AtomicU64::new(0),
            bound: settings.bound(),
            events: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The echo of a heartbeat sent at `sent` came back: every change
    /// committed before `sent` has been heard.
    pub fn proven(&self, sent: Instant) {
        let ms = u64::try_from(sent.saturating_duration_since(self.origin).as_millis())
            .unwrap_or(u64::MAX - 1);
        // Only forward: a late echo of an older heartbeat proves less.
        self.proven_ms.fetch_max(ms + 1, Ordering::AcqRel);
        self.events.send_modify(|n| *n += 1);
    }

    /// The listener gave its connection up: nothing is proven any more.
    pub fn lost(&self) {
        self.proven_ms.store(0, Ordering::Release);
        self.events.send_modify(|n| *n += 1);
    }

    /// As of when the feed was last proven current.
    pub fn proven_at(&self) -> Option<Instant> {
        match self.proven_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(self.origin + Duration::from_millis(ms - 1)),
        }
    }

    /// Whether memory fed by it may answer now.
    pub fn is_live(&self) -> bool {
        fresh(self.proven_at(), Instant::now(), self.bound)
    }

    /// How old the last proof is (the `pactd_listener_feed_age_seconds` gauge).
    pub fn age(&self) -> Option<Duration> {
        self.proven_at().map(|at| at.elapsed())
    }

    /// The longest an answer from memory may lag behind the database.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Wakes on every proof and every loss.
    pub fn events(&self) -> tokio::sync::watch::Receiver<u64> {
        self.events.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(bound_ms: u64) -> ChangeFeed {
        ChangeFeed::new(&ListenerSettings {
            heartbeat_every: Duration::from_millis(bound_ms / 2),
            heartbeat_timeout: Duration::from_millis(bound_ms - bound_ms / 2),
        })
    }

    #[test]
    fn memory_answers_only_within_the_bound_of_the_last_proof() {
        let t = Instant::now();
        let bound = Duration::from_secs(3);
        assert!(!fresh(None, t, bound));
        assert!(fresh(Some(t), t, bound));
        assert!(fresh(Some(t), t + bound, bound));
        assert!(!fresh(Some(t), t + bound + Duration::from_millis(1), bound));
        // A proof "from the future" (clock granularity) is as good as now.
        assert!(fresh(Some(t + Duration::from_millis(5)), t, bound));
    }

    #[test]
    fn a_feed_is_unproven_until_an_echo_and_again_after_a_loss() {
        let f = feed(3_000);
        assert!(!f.is_live());
        assert_eq!(f.age(), None);
        f.proven(Instant::now());
        assert!(f.is_live());
        f.lost();
        assert!(!f.is_live());
    }

    #[test]
    fn an_old_proof_lapses_and_a_late_echo_of_an_older_heartbeat_does_not_renew_it() {
        let f = feed(100);
        let sent = Instant::now();
        f.proven(sent);
        std::thread::sleep(Duration::from_millis(150));
        assert!(!f.is_live(), "a proof 150 ms old with a 100 ms bound");
        let newer = Instant::now();
        f.proven(newer);
        f.proven(sent);
        assert!(f.is_live());
        assert!(f.proven_at().is_some_and(|at| at >= sent));
    }
}
