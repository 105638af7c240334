//! Account lockout after repeated failed sign-ins (OWASP Authentication Cheat
//! Sheet). The lock is short and grows, but is capped and always expires, so
//! an attacker who knows someone's email cannot lock them out for good; and a
//! passkey sign-in is not subject to it at all (nobody can guess one).

use time::{Duration, OffsetDateTime};

/// Failures allowed before the first lock.
pub const FREE_ATTEMPTS: i32 = 5;
pub const FIRST_LOCK: Duration = Duration::minutes(1);
pub const MAX_LOCK: Duration = Duration::minutes(15);

/// After one more failure: the new count and, if any, the lock's end.
pub fn after_failure(failed_before: i32, now: OffsetDateTime) -> (i32, Option<OffsetDateTime>) {
    let failed = failed_before.saturating_add(1);
    if failed < FREE_ATTEMPTS {
        return (failed, None);
    }
    // 1, 2, 4, 8, 15, 15, … minutes.
    let doublings = (failed - FREE_ATTEMPTS).min(10);
    let lock = (FIRST_LOCK * 2i32.pow(doublings.unsigned_abs())).min(MAX_LOCK);
    (failed, Some(now + lock))
}

/// Seconds left on a lock, if locked now.
pub fn locked_for(locked_until: Option<OffsetDateTime>, now: OffsetDateTime) -> Option<i64> {
    locked_until
        .filter(|t| *t > now)
        .map(|t| (t - now).whole_seconds().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_five_failures_grows_and_is_capped() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(after_failure(0, now), (1, None));
        assert_eq!(after_failure(3, now), (4, None));
        assert_eq!(after_failure(4, now), (5, Some(now + Duration::minutes(1))));
        assert_eq!(after_failure(5, now), (6, Some(now + Duration::minutes(2))));
        assert_eq!(after_failure(100, now).1, Some(now + MAX_LOCK));
    }

    #[test]
    fn a_lock_always_ends() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let (_, until) = after_failure(1_000_000, now);
        assert_eq!(locked_for(until, now), Some(15 * 60));
        assert_eq!(locked_for(until, now + MAX_LOCK), None);
    }
}
