//! The remote JWKS cache: one per server node, shared through `Arc` by every
//! request. It turns "verify this PA-JWT" into a memory lookup in the common
//! case while bounding how often, and how, we contact a PA's jwksUri.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use pact_clock::Clock;
use reqwest::{Client, Url};
use tracing::Instrument;

use crate::alg::Alg;
use crate::error::JwksError;
use crate::jwks_fetch::{build_client, fetch_jwks};
use crate::keys::{KeySet, VerifyingKey};
use crate::uri_guard::check_jwks_uri;

/// Tuning of the JWKS cache. Defaults suit production.
#[derive(Clone, Debug)]
pub struct JwksPolicy {
    /// Shortest time a fetched set stays fresh, whatever the PA's
    /// Cache-Control says: the floor that stops a PA making us fetch per request.
    pub min_ttl: Duration,
    /// Longest time a fetched set stays fresh, so rotated-out keys age out.
    pub max_ttl: Duration,
    /// Freshness when the response has no `Cache-Control: max-age`.
    pub default_ttl: Duration,
    /// Minimum time between two fetch attempts of one URI triggered by an
    /// unknown kid or following a failed fetch: an attacker sending random
    /// kids must not turn us into a request amplifier against the PA.
    pub unknown_kid_cooldown: Duration,
    /// Bound on one whole fetch (connect, TLS, headers, body).
    pub fetch_timeout: Duration,
    /// Largest JWKS body accepted.
    pub max_bytes: usize,
    /// Allow loopback jwksUris (http or https to `127.0.0.1`, `[::1]`, `localhost`):
    /// for tests and local development only.
    pub allow_loopback: bool,
}

impl Default for JwksPolicy {
    fn default() -> Self {
        let min_ttl = Duration::from_secs(60);
        Self {
            min_ttl,
            max_ttl: Duration::from_secs(24 * 60 * 60),
            default_ttl: Duration::from_secs(10 * 60),
            unknown_kid_cooldown: min_ttl,
            fetch_timeout: Duration::from_secs(5),
            max_bytes: 64 * 1024,
            allow_loopback: false,
        }
    }
}

/// A fetched key set and how long it is fresh.
#[derive(Clone, Debug)]
struct Snapshot {
    keys: Arc<KeySet>,
    fetched_at: Instant,
    ttl: Duration,
}

/// What is known about one jwksUri. Cloning is cheap (an `Arc` and plain values).
#[derive(Clone, Debug, Default)]
struct State {
    /// The last key set fetched successfully, possibly stale.
    keys: Option<Snapshot>,
    /// When the last fetch attempt (successful or not) finished.
    last_attempt: Option<Instant>,
    /// Whether that attempt failed: a stale entry waits out the cooldown only
    /// after a failure, otherwise it is refreshed as soon as it is stale.
    last_failed: bool,
}

/// One cached jwksUri.
struct Entry {
    url: Url,
    /// A std lock, held only to copy or replace `State`: the hot path never
    /// awaits, and never takes an async lock.
    state: RwLock<State>,
    /// Single flight: only the holder fetches; the others wait, then re-check.
    /// In an `Arc` so the guard can move into the spawned fetch task.
    refresh: Arc<tokio::sync::Mutex<()>>,
}

impl Entry {
    fn state(&self) -> State {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        change(&mut state);
    }
}

/// What to do for one lookup, decided from a snapshot of an entry's state.
enum Decision {
    Use(Arc<VerifyingKey>),
    Fail(JwksError),
    Fetch,
}

/// Past this many key sets, room is made before another is kept. Entries
/// are made only for registered or admitted agents, but an agent forgotten
/// on another node (open admission's pruning) is forgotten only there, and
/// each entry may hold 32 large RSA keys.
const MAX_ENTRIES: usize = 4096;

/// Makes room for one more entry: the key sets no longer fresh go first
/// (they would be fetched again anyway), then, if none is, any one.
fn make_room(entries: &mut HashMap<String, Arc<Entry>>, now: Instant) {
    entries.retain(|_, e| {
        e.state()
            .keys
            .is_some_and(|k| now.saturating_duration_since(k.fetched_at) < k.ttl)
    });
    if entries.len() >= MAX_ENTRIES
        && let Some(any) = entries.keys().next().cloned()
    {
        entries.remove(&any);
    }
}

/// The remote JWKS cache. See the crate documentation for its rules.
pub struct JwksCache {
    policy: JwksPolicy,
    client: Client,
    /// Freshness, cooldowns and backoff are measured on this clock.
    clock: Clock,
    entries: RwLock<HashMap<String, Arc<Entry>>>,
    fetches: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("JwksCache")
            .field("policy", &self.policy)
            .field("entries", &entries)
            .field("fetches", &self.fetch_count())
            .finish_non_exhaustive()
    }
}

impl JwksCache {
    /// Build the cache and its one HTTP client (no redirects, timeout, the
    /// SSRF-guarded DNS resolver). Fails on an inconsistent policy.
    pub fn new(policy: JwksPolicy) -> Result<Self, JwksError> {
        Self::with_clock(policy, Clock::system())
    }

    /// [`JwksCache::new`], measuring time on `clock`.
    pub fn with_clock(policy: JwksPolicy, clock: Clock) -> Result<Self, JwksError> {
        if policy.min_ttl > policy.max_ttl {
            return Err(JwksError::InvalidPolicy("min_ttl exceeds max_ttl"));
        }
        if policy.fetch_timeout.is_zero() {
            return Err(JwksError::InvalidPolicy("fetch_timeout is zero"));
        }
        if policy.max_bytes == 0 {
            return Err(JwksError::InvalidPolicy("max_bytes is zero"));
        }
        let client = build_client(&policy)?;
        Ok(Self {
            policy,
            client,
            clock,
            entries: RwLock::new(HashMap::new()),
            fetches: Arc::new(AtomicU64::new(0)),
            failures: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The policy this cache was built with.
    pub fn policy(&self) -> &JwksPolicy {
        &self.policy
    }

    /// The key for a token signed under `jwks_uri`.
    ///
    /// Hot path: with a warm, fresh entry and a known kid this does no network
    /// call and takes no async lock (two short std read locks and an `Arc` clone).
    ///
    /// Otherwise: a stale entry, or an unknown kid once the cooldown since the
    /// last fetch attempt has passed, triggers one fetch per URI (single
    /// flight; waiters re-check after the fetch rather than fetch again). A
    /// failed refresh keeps serving the previous keys, and counts as an attempt
    /// for the cooldown so a down endpoint is not hammered. With no keys at all
    /// a failed fetch is an error, and later lookups fail fast with
    /// `Unavailable` until the cooldown has passed.
    ///
    /// `jwks_uri` should be the registered URI of the PA whose `iss` the token
    /// names: entries are kept per distinct URI until [`JwksCache::forget`].
    pub async fn key_for(
        &self,
        jwks_uri: &str,
        kid: Option<&str>,
        alg: Alg,
    ) -> Result<Arc<VerifyingKey>, JwksError> {
        let existing = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(jwks_uri)
            .cloned();
        let entry = match existing {
            Some(entry) => match self.decide(&entry.state(), kid, alg) {
                Decision::Use(key) => return Ok(key),
                Decision::Fail(err) => return Err(err),
                Decision::Fetch => entry,
            },
            None => self.insert_entry(jwks_uri)?,
        };

        let guard = Arc::clone(&entry.refresh).lock_owned().await;
        // Another task may have fetched while we waited for the lock.
        match self.decide(&entry.state(), kid, alg) {
            Decision::Use(key) => return Ok(key),
            Decision::Fail(err) => return Err(err),
            Decision::Fetch => {}
        }

        // The fetch runs in its own task, holding the single-flight guard, so a
        // caller that goes away (client disconnect, request timeout) neither
        // aborts a fetch other requests are waiting on nor lets a second one start.
        // A spawned task has no current span: the fetch's span is made here,
        // as a child of the request that waits for it. The host only, as for
        // every outbound call.
        let span = tracing::debug_span!(
            "jwks.fetch",
            otel.kind = "client",
            server.address = entry.url.host_str().unwrap_or(""),
        );
        let task = tokio::spawn(
            refresh(
                Arc::clone(&entry),
                self.client.clone(),
                self.policy.clone(),
                self.clock.clone(),
                Arc::clone(&self.fetches),
                Arc::clone(&self.failures),
                guard,
            )
            .instrument(span),
        );
        let outcome = task.await.unwrap_or(Err(JwksError::Unavailable));
        match outcome {
            Ok(keys) => keys.find(kid, alg).ok_or(JwksError::UnknownKey),
            Err(err) => match entry.state().keys {
                Some(snapshot) => {
                    tracing::warn!(
                        jwks_uri = %entry.url,
                        error = %error_chain(&err),
                        "JWKS refresh failed; serving the cached keys"
                    );
                    self.serve_stale(&snapshot, kid, alg, self.clock.instant())
                }
                None => Err(err),
            },
        }
    }

    /// Stores a key set fetched elsewhere (OpenID discovery of an agent just
    /// admitted, `discovery.rs`) as if this cache had fetched it, so the
    /// agent's next request does not fetch the same document again.
    pub fn prime(&self, jwks_uri: &str, keys: Arc<KeySet>, ttl: Duration) -> Result<(), JwksError> {
        let entry = self.insert_entry(jwks_uri)?;
        let now = self.clock.instant();
        let ttl = ttl.max(self.policy.min_ttl).min(self.policy.max_ttl);
        entry.update(|state| {
            state.keys = Some(Snapshot {
                keys,
                fetched_at: now,
                ttl,
            });
            state.last_attempt = Some(now);
            state.last_failed = false;
        });
        Ok(())
    }

    /// Drop the entry for one URI (used when an agent's registration changes).
    pub fn forget(&self, jwks_uri: &str) {
        self.entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(jwks_uri);
    }

    /// Number of network fetches attempted so far (for metrics/tests).
    pub fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Number of those fetches that failed (for metrics).
    pub fn failure_count(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Create (or find, if another task just did) the entry for a URI that
    /// passes the jwksUri rules. Refused URIs never get an entry.
    fn insert_entry(&self, jwks_uri: &str) -> Result<Arc<Entry>, JwksError> {
        let url = check_jwks_uri(jwks_uri, self.policy.allow_loopback)?;
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if !entries.contains_key(jwks_uri) && entries.len() >= MAX_ENTRIES {
            make_room(&mut entries, self.clock.instant());
        }
        let entry = entries.entry(jwks_uri.to_owned()).or_insert_with(|| {
            Arc::new(Entry {
                url,
                state: RwLock::new(State::default()),
                refresh: Arc::new(tokio::sync::Mutex::new(())),
            })
        });
        Ok(Arc::clone(entry))
    }

    /// The cache rules, as a pure function of one state snapshot.
    fn decide(&self, state: &State, kid: Option<&str>, alg: Alg) -> Decision {
        let now = self.clock.instant();
        let cooling = state
            .last_attempt
            .is_some_and(|at| now.saturating_duration_since(at) < self.policy.unknown_kid_cooldown);
        let Some(snapshot) = &state.keys else {
            return if cooling {
                Decision::Fail(JwksError::Unavailable)
            } else {
                Decision::Fetch
            };
        };
        let fresh = now.saturating_duration_since(snapshot.fetched_at) < snapshot.ttl;
        if fresh {
            match snapshot.keys.find(kid, alg) {
                Some(key) => Decision::Use(key),
                None if cooling => Decision::Fail(JwksError::UnknownKey),
                None => Decision::Fetch,
            }
        } else if cooling && state.last_failed {
            match self.serve_stale(snapshot, kid, alg, now) {
                Ok(key) => Decision::Use(key),
                Err(err) => Decision::Fail(err),
            }
        } else {
            Decision::Fetch
        }
    }

    /// Keys past their freshness are still served while the endpoint cannot be
    /// reached, but not forever: after a further `max_ttl` a key the PA may
    /// have withdrawn (e.g. compromised) is no longer trusted.
    fn serve_stale(
        &self,
        snapshot: &Snapshot,
        kid: Option<&str>,
        alg: Alg,
        now: Instant,
    ) -> Result<Arc<VerifyingKey>, JwksError> {
        let limit = snapshot.ttl.saturating_add(self.policy.max_ttl);
        if now.saturating_duration_since(snapshot.fetched_at) >= limit {
            return Err(JwksError::Unavailable);
        }
        snapshot.keys.find(kid, alg).ok_or(JwksError::UnknownKey)
    }
}

/// An error and its causes on one line, for logs: "JWKS fetch failed" alone
/// would not say whether DNS, TLS or the connection failed.
fn error_chain(err: &JwksError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some messages already quote their direct cause; don't repeat it.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Fetch one entry's JWKS and record the outcome. Holds the entry's
/// single-flight guard until the new state is stored.
async fn refresh(
    entry: Arc<Entry>,
    client: Client,
    policy: JwksPolicy,
    clock: Clock,
    fetches: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
) -> Result<Arc<KeySet>, JwksError> {
    fetches.fetch_add(1, Ordering::Relaxed);
    let result = fetch_jwks(&client, entry.url.clone(), &policy).await;
    let now = clock.instant();
    match result {
        Ok(fetched) => {
            let keys = Arc::new(fetched.keys);
            tracing::debug!(jwks_uri = %entry.url, keys = keys.len(), "JWKS fetched");
            let snapshot = Snapshot {
                keys: Arc::clone(&keys),
                fetched_at: now,
                ttl: fetched.ttl,
            };
            entry.update(|state| {
                state.keys = Some(snapshot);
                state.last_attempt = Some(now);
                state.last_failed = false;
            });
            Ok(keys)
        }
        Err(err) => {
            failures.fetch_add(1, Ordering::Relaxed);
            entry.update(|state| {
                state.last_attempt = Some(now);
                state.last_failed = true;
            });
            Err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache never holds more than its bound: the stale go first, and
    /// a fresh set is kept when a stale one can make room.
    #[test]
    fn the_cache_is_bounded_and_drops_stale_key_sets_first() {
        let clock = pact_clock::TestClock::new();
        let policy = JwksPolicy::default();
        let cache = JwksCache::with_clock(policy, Clock::from(clock.clone())).expect("cache");
        let keys = Arc::new(KeySet::default());
        let uri = |i: usize| format!("https://agent{i}.example/jwks.json");
        cache
            .prime(&uri(0), Arc::clone(&keys), Duration::from_secs(0))
            .expect("primed");
        clock.advance(cache.policy().max_ttl + Duration::from_secs(1));
        for i in 1..=MAX_ENTRIES + 10 {
            cache
                .prime(&uri(i), Arc::clone(&keys), Duration::from_secs(3600))
                .expect("primed");
        }
        let entries = cache.entries.read().expect("entries");
        assert!(entries.len() <= MAX_ENTRIES, "{}", entries.len());
        assert!(!entries.contains_key(&uri(0)), "the stale one went first");
        assert!(entries.contains_key(&uri(MAX_ENTRIES + 10)));
    }

    /// A refused connection is logged with its root cause, not just
    /// "JWKS fetch failed".
    #[tokio::test]
    async fn error_chain_reaches_the_root_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let policy = JwksPolicy {
            allow_loopback: true,
            ..JwksPolicy::default()
        };
        let client = build_client(&policy).expect("client");
        let url = Url::parse(&format!("http://127.0.0.1:{port}/jwks.json")).expect("url");
        let err = fetch_jwks(&client, url, &policy)
            .await
            .expect_err("nothing listens");
        let text = error_chain(&err);
        assert!(text.starts_with("JWKS fetch failed: "), "{text}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.matches("error sending request").count() <= 1, "{text}");
        assert!(text.len() > err.to_string().len(), "{text}");
    }
}
