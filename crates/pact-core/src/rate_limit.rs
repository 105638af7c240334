//! Per-node rate limits for authenticated A2A callers (PACT §6: `429` with
//! `Retry-After` when a PA or a `(PA, sub)` is limited).
//!
//! Token buckets in memory: limits are per node by design (docs/operations.md, "Rate limits"),
//! so N nodes admit at most N times the configured rate.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct RateLimits {
    /// Sustained requests per second for one PA platform (all its users).
    pub per_pa_rate: f64,
    pub per_pa_burst: f64,
    /// Sustained requests per second for one user of one PA.
    pub per_user_rate: f64,
    pub per_user_burst: f64,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            per_pa_rate: 200.0,
            per_pa_burst: 400.0,
            per_user_rate: 10.0,
            per_user_burst: 30.0,
        }
    }
}

/// A token bucket; a plain value so the rule is testable with any `now`.
#[derive(Clone, Copy, Debug)]
pub struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    pub fn full(burst: f64, now: Instant) -> Self {
        Self {
            tokens: burst,
            updated: now,
        }
    }

    /// Takes one token, or says how long until one is available.
    pub fn take(&mut self, now: Instant, rate: f64, burst: f64) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else if rate > 0.0 {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
        } else {
            Err(Duration::from_secs(60))
        }
    }

    /// Whether a token is available now (without taking it).
    pub fn has_token(&self, now: Instant, rate: f64, burst: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        (self.tokens + elapsed * rate).min(burst) >= 1.0
    }

    fn is_full(&self, now: Instant, rate: f64, burst: f64) -> bool {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens + elapsed * rate >= burst
    }
}

/// Above this many tracked keys, full buckets are dropped (they carry no state).
const PRUNE_ABOVE: usize = 50_000;

/// The buckets of a [`KeyedLimiter`], and the size at which they are pruned
/// next: twice what a prune left (at least [`PRUNE_ABOVE`]), so that keys
/// whose buckets stay partly spent for long (a limit of one an hour, keyed by
/// addresses an attacker has many of) cost one scan per doubling, not a scan
/// of the whole map under the lock on every request.
struct Buckets {
    map: HashMap<String, (Bucket, f64, f64)>,
    prune_at: usize,
}

/// A registered agent's own limits, which replace the node's defaults for it
/// (a large agent platform needs more than a small one): `(rate, burst)`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AgentLimits {
    pub pa: Option<(f64, f64)>,
    pub user: Option<(f64, f64)>,
}

impl AgentLimits {
    pub fn of(agent: &pact_db::agents::Agent) -> Self {
        Self {
            pa: agent.pa_limit().map(|l| (l.rate, l.burst)),
            user: agent.user_limit().map(|l| (l.rate, l.burst)),
        }
    }
}

/// The A2A limits: one bucket per PA, one per (PA, sub).
pub struct RateLimiter {
    per_pa: KeyedLimiter,
    per_user: KeyedLimiter,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> Self {
        Self {
            per_pa: KeyedLimiter::new(limits.per_pa_rate, limits.per_pa_burst),
            per_user: KeyedLimiter::new(limits.per_user_rate, limits.per_user_burst),
        }
    }

    /// Checks the user's bucket, then the PA's; `Err(retry_after)` when either is empty.
    pub fn check(&self, pa: &str, sub: &str, now: Instant) -> Result<(), Duration> {
        self.check_with(pa, sub, AgentLimits::default(), now)
    }

    /// As [`Self::check`], with the agent's own limits where it has them.
    pub fn check_with(
        &self,
        pa: &str,
        sub: &str,
        own: AgentLimits,
        now: Instant,
    ) -> Result<(), Duration> {
        // The separator cannot occur in an issuer URL's first line, so keys never collide.
        let (rate, burst) = own
            .user
            .unwrap_or((self.per_user.rate, self.per_user.burst));
        if let Err(wait) = self
            .per_user
            .check_at(&format!("{pa}\n{sub}"), now, rate, burst)
        {
            metrics::counter!("pactd_rate_limited_total", "limit" => "user").increment(1);
            return Err(wait);
        }
        let (rate, burst) = own.pa.unwrap_or((self.per_pa.rate, self.per_pa.burst));
        self.per_pa.check_at(pa, now, rate, burst).inspect_err(|_| {
            metrics::counter!("pactd_rate_limited_total", "limit" => "pa").increment(1);
        })
    }
}

/// One token bucket per key (e.g. per IP), with the same rate and burst.
pub struct KeyedLimiter {
    rate: f64,
    burst: f64,
    /// Each bucket with the rate and burst it is kept at.
    buckets: Mutex<Buckets>,
}

impl KeyedLimiter {
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst,
            buckets: Mutex::new(Buckets {
                map: HashMap::new(),
                prune_at: PRUNE_ABOVE,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Whether `key` could take a token now, without taking it.
    pub fn has_token(&self, key: &str, now: Instant) -> bool {
        self.lock()
            .map
            .get(key)
            .is_none_or(|(b, rate, burst)| b.has_token(now, *rate, *burst))
    }

    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        self.check_at(key, now, self.rate, self.burst)
    }

    /// Takes a token from `key`'s bucket, kept at this rate and burst.
    pub fn check_at(&self, key: &str, now: Instant, rate: f64, burst: f64) -> Result<(), Duration> {
        let mut guard = self.lock();
        let Buckets {
            map: buckets,
            prune_at,
        } = &mut *guard;
        if buckets.len() > *prune_at {
            buckets.retain(|_, (b, rate, burst)| !b.is_full(now, *rate, *burst));
            *prune_at = buckets.len().saturating_mul(2).max(PRUNE_ABOVE);
        }
        // Looked up before inserting, so a hit costs no key allocation.
        if let Some(entry) = buckets.get_mut(key) {
            entry.1 = rate;
            entry.2 = burst;
            return entry.0.take(now, rate, burst);
        }
        let mut bucket = Bucket::full(burst, now);
        let taken = bucket.take(now, rate, burst);
        buckets.insert(key.to_owned(), (bucket, rate, burst));
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets that stay spent are not scanned again on every request: the
    /// next prune waits until the map has doubled.
    #[test]
    fn spent_buckets_are_pruned_once_per_doubling() {
        let t0 = Instant::now();
        let limiter = KeyedLimiter::new(1.0 / 3600.0, 1.0);
        for i in 0..=PRUNE_ABOVE {
            assert!(limiter.check(&i.to_string(), t0).is_ok());
        }
        // Past the bound: pruned once (nothing is full), the next prune set
        // at twice the map.
        assert!(limiter.check("one more", t0).is_ok());
        let (len, prune_at) = {
            let b = limiter.lock();
            (b.map.len(), b.prune_at)
        };
        assert_eq!(len, PRUNE_ABOVE + 2);
        assert_eq!(prune_at, 2 * (PRUNE_ABOVE + 1));
        // An hour on, the first buckets are full again; the prune that
        // comes once the map has doubled drops them all, and only them.
        let later = t0 + Duration::from_secs(3601);
        for i in 0..PRUNE_ABOVE + 2 {
            assert!(limiter.check(&format!("b{i}"), later).is_ok());
        }
        let b = limiter.lock();
        assert_eq!(b.map.len(), PRUNE_ABOVE + 2);
        assert!(!b.map.contains_key("0") && b.map.contains_key("b0"));
    }

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::full(3.0, t0);
        for _ in 0..3 {
            assert!(b.take(t0, 1.0, 3.0).is_ok());
        }
        let wait = b.take(t0, 1.0, 3.0).unwrap_err();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::ZERO);
        assert!(b.take(t0 + Duration::from_millis(1000), 1.0, 3.0).is_ok());
    }

    #[test]
    fn one_user_cannot_exhaust_another_users_budget() {
        let limiter = RateLimiter::new(RateLimits {
            per_pa_rate: 100.0,
            per_pa_burst: 100.0,
            per_user_rate: 1.0,
            per_user_burst: 2.0,
        });
        let now = Instant::now();
        assert!(limiter.check("pa", "alice", now).is_ok());
        assert!(limiter.check("pa", "alice", now).is_ok());
        assert!(limiter.check("pa", "alice", now).is_err());
        assert!(limiter.check("pa", "bob", now).is_ok());
    }

    #[test]
    fn an_agents_own_limits_replace_the_defaults_for_it_alone() {
        let limiter = RateLimiter::new(RateLimits {
            per_pa_rate: 1.0,
            per_pa_burst: 1.0,
            per_user_rate: 1.0,
            per_user_burst: 1.0,
        });
        let now = Instant::now();
        let big = AgentLimits {
            pa: Some((100.0, 3.0)),
            user: Some((100.0, 2.0)),
        };
        assert!(limiter.check_with("big", "a", big, now).is_ok());
        assert!(limiter.check_with("big", "a", big, now).is_ok());
        // The user's own burst of 2 is spent; another user still has the PA's.
        assert!(limiter.check_with("big", "a", big, now).is_err());
        assert!(limiter.check_with("big", "b", big, now).is_ok());
        assert!(limiter.check_with("big", "c", big, now).is_err());
        // A PA without its own limits keeps the defaults.
        assert!(limiter.check("small", "a", now).is_ok());
        assert!(limiter.check("small", "b", now).is_err());
    }

    #[test]
    fn the_platform_limit_caps_all_users_together() {
        let limiter = RateLimiter::new(RateLimits {
            per_pa_rate: 1.0,
            per_pa_burst: 2.0,
            per_user_rate: 100.0,
            per_user_burst: 100.0,
        });
        let now = Instant::now();
        assert!(limiter.check("pa", "a", now).is_ok());
        assert!(limiter.check("pa", "b", now).is_ok());
        assert!(limiter.check("pa", "c", now).is_err());
        assert!(limiter.check("other-pa", "c", now).is_ok());
    }
}
