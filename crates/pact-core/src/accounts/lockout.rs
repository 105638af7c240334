//! Account lockout after repeated failed sign-ins (OWASP Authentication Cheat
//! Sheet). The lock is short and grows, but is capped and always expires, so
//! an attacker who knows someone's email cannot lock them out for good; and a
//! passkey sign-in is not subject to it at all (nobody can guess one).

//!
//! Password sign-in counts failures by key, whether or not an account has the
//! email, so the answers for a known and an unknown email cannot differ:
//! * per (address, email): [`FREE_ATTEMPTS`], then locks — this is what a
//!   guesser from one network meets;
//! * per email from anywhere: [`ACCOUNT_FREE_ATTEMPTS`], then locks — a
//!   distributed guesser; while this lock holds, the right password still
//!   leads on to the second factor, so an attacker who knows only the email
//!   cannot keep a person who has one out (and passkeys ignore locks).

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

/// Failures allowed before the first lock (second factor, and password per address).
pub const FREE_ATTEMPTS: i32 = 5;
/// Password failures for one email, from all addresses, before it locks.
pub const ACCOUNT_FREE_ATTEMPTS: i32 = 20;
pub const FIRST_LOCK: Duration = Duration::minutes(1);
pub const MAX_LOCK: Duration = Duration::minutes(15);

/// After one more failure: the new count and, if any, the lock's end.
pub fn after_failure(failed_before: i32, now: OffsetDateTime) -> (i32, Option<OffsetDateTime>) {
    let failed = failed_before.saturating_add(1);
    (failed, lock_for(failed, FREE_ATTEMPTS, now))
}

/// The lock after `failed` failures when `free` are allowed: none before,
/// then 1, 2, 4, 8, 15, 15, … minutes.
pub fn lock_for(failed: i32, free: i32, now: OffsetDateTime) -> Option<OffsetDateTime> {
    if failed < free {
        return None;
    }
    let doublings = (failed - free).min(10);
    Some(now + (FIRST_LOCK * 2i32.pow(doublings.unsigned_abs())).min(MAX_LOCK))
}

/// The two failure counters of a password sign-in, as stored hashes (no
/// email is stored in the clear).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureKeys {
    pub from_address: Vec<u8>,
    pub account: Vec<u8>,
}

impl FailureKeys {
    /// `email` normalised (trimmed, lower case); `address` a limit key.
    pub fn new(brand_id: &str, email: &str, address: &str) -> Self {
        Self {
            from_address: Sha256::digest(format!("address\n{brand_id}\n{email}\n{address}"))
                .to_vec(),
            account: account_key(brand_id, email),
        }
    }
}

pub fn account_key(brand_id: &str, email: &str) -> Vec<u8> {
    Sha256::digest(format!("account\n{brand_id}\n{email}")).to_vec()
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
    fn the_account_counter_allows_more_than_one_address_does() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(lock_for(19, ACCOUNT_FREE_ATTEMPTS, now), None);
        assert_eq!(
            lock_for(20, ACCOUNT_FREE_ATTEMPTS, now),
            Some(now + Duration::minutes(1))
        );
        assert_eq!(lock_for(5, FREE_ATTEMPTS, now), Some(now + FIRST_LOCK));
    }

    #[test]
    fn failure_keys_differ_by_address_and_not_by_existence() {
        let a = FailureKeys::new("demo", "ann@example.com", "192.0.2.1");
        let b = FailureKeys::new("demo", "ann@example.com", "192.0.2.2");
        assert_ne!(a.from_address, b.from_address);
        assert_eq!(a.account, b.account);
        assert_ne!(a.account, account_key("other", "ann@example.com"));
    }

    #[test]
    fn a_lock_always_ends() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let (_, until) = after_failure(1_000_000, now);
        assert_eq!(locked_for(until, now), Some(15 * 60));
        assert_eq!(locked_for(until, now + MAX_LOCK), None);
    }
}
