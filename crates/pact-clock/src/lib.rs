//! The one time source of a pactd node.
//!
//! Everything that asks "what time is it" (handlers, the JWKS cache, the rate
//! limiters, background jobs) asks a [`Clock`] carried by the application
//! state, and passes the answer down as a plain `now`: the rules themselves
//! never read a clock. In production the clock is the system's. Tests use a
//! [`TestClock`], which follows the system clock plus an offset they can move
//! forward, so a test that needs "the next TOTP step" or "after the polling
//! interval" gets there at once instead of sleeping.
//!
//! The test clock only moves forward: both the wall time and the monotonic
//! instants it hands out stay ordered, as code that measures durations with
//! them expects.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use time::OffsetDateTime;

/// Where a node reads the time. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system clock.
    test: Option<TestClock>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self { test: None }
    }

    /// The wall time, for anything stored or compared with stored times.
    #[allow(clippy::disallowed_methods)] // the one reader of the system clock
    pub fn now(&self) -> OffsetDateTime {
        let now = OffsetDateTime::now_utc();
        match &self.test {
            None => now,
            Some(test) => now + test.offset(),
        }
    }

    /// A monotonic instant, for in-memory durations (token buckets, caches).
    pub fn instant(&self) -> Instant {
        let now = Instant::now();
        match &self.test {
            None => now,
            Some(test) => now + test.offset(),
        }
    }
}

impl From<TestClock> for Clock {
    fn from(test: TestClock) -> Self {
        Self { test: Some(test) }
    }
}

/// A clock for tests: the system clock moved forward by however much the test
/// has advanced it. Clones share the offset, so the test keeps one handle and
/// gives the node a [`Clock`] made from another.
#[derive(Clone, Debug, Default)]
pub struct TestClock {
    /// Nanoseconds ahead of the system clock.
    ahead_nanos: Arc<AtomicU64>,
}

impl TestClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.ahead_nanos.fetch_add(nanos, Ordering::SeqCst);
    }

    /// Moves the clock forward to the start of the next `step` (counted from
    /// the Unix epoch, as RFC 6238 §4 counts TOTP steps), so that a whole step
    /// lies ahead. Returns the new time.
    pub fn advance_to_next_step(&self, step: Duration) -> OffsetDateTime {
        let step = i128::try_from(step.as_nanos()).unwrap_or(i128::MAX).max(1);
        let now = self.now();
        let into = now.unix_timestamp_nanos().rem_euclid(step);
        let by = Duration::from_nanos(u64::try_from(step - into).unwrap_or(u64::MAX));
        self.advance(by);
        now + by
    }

    /// How far ahead of the system clock this clock is.
    pub fn offset(&self) -> Duration {
        Duration::from_nanos(self.ahead_nanos.load(Ordering::SeqCst))
    }

    /// The time now, on this clock.
    pub fn now(&self) -> OffsetDateTime {
        Clock::from(self.clone()).now()
    }

    /// A monotonic instant on this clock.
    pub fn instant(&self) -> Instant {
        Clock::from(self.clone()).instant()
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // compares with the system clock
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_follows_the_system() {
        let clock = Clock::system();
        let (before, now, after) = (
            OffsetDateTime::now_utc(),
            clock.now(),
            OffsetDateTime::now_utc(),
        );
        assert!(before <= now && now <= after);
    }

    #[test]
    fn advancing_moves_wall_time_and_instants_of_every_clone() {
        let test = TestClock::new();
        let clock = Clock::from(test.clone());
        let (wall, mono) = (clock.now(), clock.instant());
        test.advance(Duration::from_secs(3600));
        assert!(clock.now() - wall >= time::Duration::hours(1));
        assert!(clock.instant() - mono >= Duration::from_secs(3600));
        assert_eq!(test.offset(), Duration::from_secs(3600));
    }

    #[test]
    fn the_next_step_starts_on_a_step_boundary_ahead() {
        let test = TestClock::new();
        let before = test.now();
        let at = test.advance_to_next_step(Duration::from_secs(30));
        assert_eq!(at.unix_timestamp_nanos() % 30_000_000_000, 0);
        assert!(at > before);
        assert!(at - before <= time::Duration::seconds(30));
        // The clock itself is now in that step, with almost all of it ahead.
        let now = test.now();
        assert!(now >= at);
        assert_eq!(now.unix_timestamp() / 30, at.unix_timestamp() / 30);
    }
}
