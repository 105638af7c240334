//! Rate limits of the pages (per node): sign-in per address, second-factor
//! attempts, passkey ceremonies, and user-code entry (RFC 8628 §5.1: an
//! 8-letter code must not be guessable by brute force, PACT §7).
//!
//! ## User-code entry
//!
//! Every attempt costs a token of the visitor's bucket (session or form
//! token) and of its address's bucket. The Provider-wide budget is spent
//! only on *misses*: a person with a valid code is never refused because
//! others guessed wrong. Each guess is either a hit or a miss, so capping
//! misses caps guessing. When the miss budget is empty (a guessing flood),
//! an address gets one attempt per [`FLOOD_WINDOW`]: a person with a fresh
//! address and a valid code still gets through; a guessing address gets one
//! guess per window.
//!
//! The arithmetic, with the defaults and `L` codes pending at once:
//! the code space is 20^8 ≈ 2.56·10^10. A node admits at most
//! 120 + 2/s · 600 s = 1,320 misses over a code's 10-minute life, so the
//! chance that any guess lands on one of the `L` live codes is at most
//! 1,320 · L / 2.56·10^10 ≈ 5·10^-8 · L per node and code lifetime (for
//! L = 100: 5·10^-6; over a whole day of sustained guessing, 172,800
//! misses, 7·10^-4). In a flood, each attacking address adds 24 guesses a
//! day: 10,000 addresses add 240,000 guesses a day, about 10^-3 for L = 100.
//! Honest typing stays far below 2 misses a second per node.

use std::time::{Duration, Instant};

use crate::rate_limit::KeyedLimiter;

/// How long an address waits between attempts while misses are over budget.
pub const FLOOD_WINDOW: Duration = Duration::from_secs(3600);

/// A token bucket's sustained rate (per second) and burst.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl Rate {
    pub const fn new(per_second: f64, burst: f64) -> Self {
        Self { per_second, burst }
    }

    /// `RATE,BURST` (requests per second, bucket size), e.g. `0.5,20`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (r, b) = s
            .split_once(',')
            .ok_or_else(|| format!("expected RATE,BURST, got {s:?}"))?;
        let per_second: f64 = r.trim().parse().map_err(|_| format!("not a rate: {r:?}"))?;
        let burst: f64 = b
            .trim()
            .parse()
            .map_err(|_| format!("not a burst: {b:?}"))?;
        if !(per_second.is_finite() && per_second >= 0.0 && burst.is_finite() && burst >= 1.0) {
            return Err(format!("rate must be >= 0 and burst >= 1, got {s:?}"));
        }
        Ok(Self { per_second, burst })
    }

    fn limiter(self) -> KeyedLimiter {
        KeyedLimiter::new(self.per_second, self.burst)
    }
}

/// The configurable page limits.
#[derive(Clone, Debug)]
pub struct PageLimitSettings {
    /// Password sign-in attempts per address.
    pub sign_in_per_ip: Rate,
    /// Second-factor attempts per user (the lockout applies too).
    pub second_factor_per_user: Rate,
    /// Code-entry attempts per address.
    pub user_code_per_ip: Rate,
    /// Code-entry attempts per visitor (session or form token).
    pub user_code_per_visitor: Rate,
    /// Wrong codes, all visitors together (the guessing budget).
    pub user_code_misses: Rate,
}

impl Default for PageLimitSettings {
    fn default() -> Self {
        Self {
            // 20 attempts, then one every 3 s.
            sign_in_per_ip: Rate::new(1.0 / 3.0, 20.0),
            second_factor_per_user: Rate::new(1.0 / 6.0, 5.0),
            user_code_per_ip: Rate::new(1.0 / 6.0, 10.0),
            user_code_per_visitor: Rate::new(1.0 / 10.0, 5.0),
            user_code_misses: Rate::new(2.0, 120.0),
        }
    }
}

pub struct PageLimits {
    pub sign_in_per_ip: KeyedLimiter,
    pub second_factor_per_user: KeyedLimiter,
    pub user_code_per_ip: KeyedLimiter,
    pub user_code_per_visitor: KeyedLimiter,
    pub user_code_misses: KeyedLimiter,
    pub user_code_flood_per_ip: KeyedLimiter,
    /// Look-ups of a link's code to name its shop, per address (`link_lookup`).
    pub user_code_link_per_ip: KeyedLimiter,
}

impl Default for PageLimits {
    fn default() -> Self {
        Self::new(&PageLimitSettings::default())
    }
}

const ALL: &str = "all";

impl PageLimits {
    pub fn new(s: &PageLimitSettings) -> Self {
        Self {
            sign_in_per_ip: s.sign_in_per_ip.limiter(),
            second_factor_per_user: s.second_factor_per_user.limiter(),
            user_code_per_ip: s.user_code_per_ip.limiter(),
            user_code_per_visitor: s.user_code_per_visitor.limiter(),
            user_code_misses: s.user_code_misses.limiter(),
            user_code_flood_per_ip: KeyedLimiter::new(1.0 / FLOOD_WINDOW.as_secs_f64(), 1.0),
            user_code_link_per_ip: s.user_code_per_ip.limiter(),
        }
    }

    /// Before a code is looked up: the visitor's and the address's buckets,
    /// then, only while misses are over budget, the address's flood allowance.
    pub fn code_attempt(&self, visitor: &str, ip: &str, now: Instant) -> Result<(), u64> {
        let secs = |wait: Duration| wait.as_secs().saturating_add(1);
        self.user_code_per_visitor
            .check(visitor, now)
            .map_err(secs)?;
        self.user_code_per_ip.check(ip, now).map_err(secs)?;
        if !self.user_code_misses.has_token(ALL, now) {
            self.user_code_flood_per_ip.check(ip, now).map_err(secs)?;
        }
        Ok(())
    }

    /// Whether `GET /device?user_code=` may look its code up to name the
    /// shop and the agent: at the address's rate of code attempts, in a
    /// bucket of its own (opening a link must not use up the attempt that
    /// confirms it), and never while wrong codes are over the shared budget.
    /// A miss spends that budget (`code_missed`) like a typed one.
    pub fn link_lookup(&self, ip: &str, now: Instant) -> bool {
        self.user_code_misses.has_token(ALL, now)
            && self.user_code_link_per_ip.check(ip, now).is_ok()
    }

    /// A looked-up code did not exist: spend the shared miss budget.
    pub fn code_missed(&self, now: Instant) {
        let _ = self.user_code_misses.check(ALL, now);
    }
}

/// Seconds to wait, when limited.
pub fn check(limiter: &KeyedLimiter, key: &str, now: Instant) -> Result<(), u64> {
    limiter
        .check(key, now)
        .map_err(|wait| wait.as_secs().saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_as_rate_comma_burst() {
        assert_eq!(Rate::parse("0.5,20"), Ok(Rate::new(0.5, 20.0)));
        assert_eq!(Rate::parse(" 2 , 120 "), Ok(Rate::new(2.0, 120.0)));
        for bad in ["", "1", "x,2", "1,0", "-1,5", "NaN,5", "1,inf"] {
            assert!(Rate::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_guessing_flood_does_not_refuse_a_fresh_address() {
        let limits = PageLimits::default();
        let now = Instant::now();
        // 40 addresses, 10 wrong codes each, each from a fresh visitor.
        for ip in 0..40 {
            for attempt in 0..10 {
                let visitor = format!("v{ip}-{attempt}");
                if limits
                    .code_attempt(&visitor, &format!("ip{ip}"), now)
                    .is_ok()
                {
                    limits.code_missed(now);
                }
            }
        }
        assert!(
            !limits.user_code_misses.has_token(ALL, now),
            "the flood drained the budget"
        );
        // A person: fresh address, fresh session.
        assert!(limits.code_attempt("person", "fresh-ip", now).is_ok());
        // A guessing address gets nothing more while the flood lasts.
        assert!(limits.code_attempt("v-new", "ip3", now).is_err());
    }

    #[test]
    fn in_a_flood_an_address_gets_one_attempt_per_window() {
        let limits = PageLimits::default();
        let now = Instant::now();
        for _ in 0..120 {
            limits.code_missed(now);
        }
        assert!(limits.code_attempt("a", "ip", now).is_ok());
        assert!(limits.code_attempt("b", "ip", now).is_err());
        // Once misses are back under budget, normal limits apply again.
        let later = now + Duration::from_secs(30);
        assert!(limits.code_attempt("c", "ip", later).is_ok());
    }

    #[test]
    fn link_look_ups_have_their_own_bucket_and_stop_in_a_flood() {
        let limits = PageLimits::default();
        let now = Instant::now();
        for _ in 0..10 {
            assert!(limits.link_lookup("ip", now));
        }
        assert!(!limits.link_lookup("ip", now), "the address's rate");
        // Opening links used none of the form's attempts.
        assert!(limits.code_attempt("v", "ip", now).is_ok());
        for _ in 0..120 {
            limits.code_missed(now);
        }
        assert!(!limits.link_lookup("other-ip", now), "none in a flood");
    }

    #[test]
    fn each_visitor_and_address_is_limited_without_misses() {
        let limits = PageLimits::default();
        let now = Instant::now();
        for _ in 0..5 {
            assert!(limits.code_attempt("v", "ip", now).is_ok());
        }
        assert!(limits.code_attempt("v", "ip", now).is_err());
        for i in 0..5 {
            assert!(limits.code_attempt(&format!("w{i}"), "ip", now).is_ok());
        }
        assert!(limits.code_attempt("w9", "ip", now).is_err());
    }
}
