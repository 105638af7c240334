//! Rate limits of the pages (per node): sign-in per account and per IP,
//! second-factor attempts, and user-code entry per IP, per session and
//! globally (RFC 8628 §5.1: an 8-letter code must not be guessable by
//! brute force).

use std::time::Instant;

use crate::rate_limit::KeyedLimiter;

pub struct PageLimits {
    pub sign_in_per_ip: KeyedLimiter,
    pub sign_in_per_account: KeyedLimiter,
    pub second_factor_per_user: KeyedLimiter,
    pub user_code_per_ip: KeyedLimiter,
    pub user_code_per_session: KeyedLimiter,
    pub user_code_global: KeyedLimiter,
}

impl Default for PageLimits {
    fn default() -> Self {
        Self {
            // 20 attempts, then one every 3 s, per IP.
            sign_in_per_ip: KeyedLimiter::new(1.0 / 3.0, 20.0),
            // 10 attempts, then one every 6 s, per account (the lockout rule also applies).
            sign_in_per_account: KeyedLimiter::new(1.0 / 6.0, 10.0),
            second_factor_per_user: KeyedLimiter::new(1.0 / 6.0, 5.0),
            user_code_per_ip: KeyedLimiter::new(1.0 / 6.0, 10.0),
            user_code_per_session: KeyedLimiter::new(1.0 / 10.0, 5.0),
            user_code_global: KeyedLimiter::new(50.0, 200.0),
        }
    }
}

/// Seconds to wait, when limited.
pub fn check(limiter: &KeyedLimiter, key: &str) -> Result<(), u64> {
    limiter
        .check(key, Instant::now())
        .map_err(|wait| wait.as_secs().saturating_add(1))
}
