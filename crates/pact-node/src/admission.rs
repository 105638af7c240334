//! Which personal agents may talk to a brand (PACT §3.1): the Provider's
//! policy. `allowlist` (the default) admits only agents staff registered;
//! `registry` also those a trusted registry's signed list names
//! (`registry.rs`); `open` also admits an agent nobody registered, when its `iss` is an https
//! URL on a public address whose OpenID discovery document names a
//! `jwks_uri`, and its PA-JWT verifies against those keys per §3.2 in full.
//! The policy is Provider-wide (`--admission`) and a brand may override it
//! (its `admission` setting). An agent admitted by `open` is stored
//! unverified (a lower trust tier) until staff verify it.
//!
//! The issuer of an unknown agent is an attacker-chosen string, and each one
//! could make us fetch two documents. So the door ([`Door`]) spends from a
//! bounded budget, and nothing reaches the database before a token verified.
//!
//! ## The arithmetic (per node; N nodes: N times as much)
//!
//! Each discovery makes at most 2 outbound requests (the discovery document,
//! then the JWKS), each bounded by the JWKS fetch timeout (5 s) and body cap
//! (64 KiB). Discoveries take a token from one node-wide bucket of rate `r`
//! (default 2/s) and burst `b` (default 10), and one from the issuer host's
//! bucket (one per `h`, default 60 s, burst 1). So over any `T` seconds:
//!
//! * outbound requests ≤ 2 · (b + r·T): 100 in 20 s, 250 in a minute;
//! * to one host ≤ 2 · (1 + T/h): 2 a minute;
//! * at once ≤ 2 · `max_in_flight` (default 4) sockets, so ≤ 512 KiB of bodies;
//! * an issuer whose discovery or verification failed is not tried again for
//!   its back-off (60 s, doubling to 1 h), without spending from the budget;
//! * the memory of issuers (back-offs and discovered keys) holds at most
//!   `max_remembered` (10 000) entries; new ones arrive at most at `r`/s, so
//!   with 60 s back-offs about b + 60·r = 130 are live at a time;
//! * the database gains a row only for an issuer whose PA-JWT verified, and
//!   keeps at most `max_unverified` (1 000) unverified agents: admitting one
//!   more forgets the one seen least recently (with its grants), in the same
//!   transaction.
//!
//! A spray of random issuers therefore costs at most the budget above in
//! fetches and no rows, and never delays a registered agent, whose requests
//! do not pass the door at all.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pact_db::agents::Agent;
use pact_jose::{Discovered, IssuerDiscovery, JwksError, PaClaims, UnverifiedPaJwt};

use pact_core::rate_limit::{Bucket, KeyedLimiter};

pub use pact_core::config::AdmissionSettings;
pub use pact_core::domain::admission::{
    Policy, SETTING_KEY, Tier, admits, brand_override, host_blocked, is_address_issuer,
    normalize_host, policy_at, scope_refused,
};

/// Why the door stayed shut. Every variant is the same bare 401 (PACT §3.2);
/// the reason is for the log and the metric only.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("issuer cannot be discovered: {0}")]
    Issuer(JwksError),
    #[error("issuer stored meanwhile, and not admitted (blocked)")]
    NotAdmitted,
    #[error("issuer's host is blocked")]
    Blocked,
    #[error("issuer is backing off after a failure")]
    BackingOff,
    #[error("discovery budget spent")]
    Budget,
    #[error("discovery failed: {0}")]
    Discovery(JwksError),
    #[error("no key for the token")]
    NoKey,
    #[error("PA-JWT rejected: {0}")]
    Token(pact_jose::PaJwtError),
    #[error("database: {0}")]
    Db(#[from] pact_db::Error),
}

impl Refusal {
    fn label(&self) -> &'static str {
        match self {
            Self::Issuer(_) | Self::NotAdmitted => "issuer",
            Self::Blocked => "blocked",
            Self::BackingOff => "backing_off",
            Self::Budget => "budget",
            Self::Discovery(_) => "discovery",
            Self::NoKey | Self::Token(_) => "token",
            Self::Db(_) => "db",
        }
    }
}

/// An issuer that failed, and until when it is not tried again.
#[derive(Clone, Copy, Debug)]
struct Backoff {
    until: Instant,
    wait: Duration,
}

/// Keys found by discovery, kept briefly so that a retry (or a forged token
/// naming a real issuer) costs no second fetch.
#[derive(Clone, Debug)]
struct Found {
    discovered: Discovered,
    until: Instant,
}

#[derive(Default)]
struct Memory {
    backoffs: HashMap<String, Backoff>,
    found: HashMap<String, Found>,
    in_flight: HashSet<String>,
}

/// What the door uses of its node: the pools, the clock, the copy of
/// rarely-changing rows (blocked hosts), the JWKS cache and the PA-JWT rules.
pub struct Around<'a> {
    pub db: &'a pact_db::PgPool,
    pub relaxed_db: &'a pact_db::PgPool,
    pub clock: &'a pact_clock::Clock,
    pub config_cache: &'a crate::config_cache::ConfigCache,
    pub jwks: &'a pact_jose::JwksCache,
    pub pa_rules: &'a pact_jose::PaJwtRules,
}

/// The open door: one per node.
pub struct Door {
    settings: AdmissionSettings,
    discovery: IssuerDiscovery,
    allow_loopback: bool,
    budget: Mutex<Bucket>,
    per_host: KeyedLimiter,
    running: Arc<tokio::sync::Semaphore>,
    memory: Mutex<Memory>,
    sightings: Sightings,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("settings", &self.settings)
            .field("discovery", &self.discovery)
            .finish_non_exhaustive()
    }
}

/// Takes the issuer off the in-flight set however the discovery ends
/// (including the request being dropped).
struct InFlight<'d> {
    door: &'d Door,
    issuer: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.door.memory().in_flight.remove(&self.issuer);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Keeps a map within `max` entries: the expired go at every insert (so the
/// map holds what is live, not up to `max` of what once was: discovered key
/// sets may be large), then, if it is still full, the one that expires
/// soonest.
fn make_room<V>(
    map: &mut HashMap<String, V>,
    max: usize,
    now: Instant,
    until: impl Fn(&V) -> Instant,
) {
    map.retain(|_, v| until(v) > now);
    while map.len() >= max.max(1) {
        let Some(first) = map
            .iter()
            .min_by_key(|(_, v)| until(v))
            .map(|(k, _)| k.clone())
        else {
            break;
        };
        map.remove(&first);
    }
}

impl Door {
    pub fn new(
        settings: AdmissionSettings,
        jwks: pact_jose::JwksPolicy,
        now: Instant,
    ) -> Result<Self, JwksError> {
        let allow_loopback = jwks.allow_loopback;
        let per_host_rate = 1.0 / settings.per_host_interval.as_secs_f64().max(0.001);
        Ok(Self {
            discovery: IssuerDiscovery::new(jwks)?,
            allow_loopback,
            budget: Mutex::new(Bucket::full(settings.discovery_burst, now)),
            per_host: KeyedLimiter::new(per_host_rate, 1.0),
            running: Arc::new(tokio::sync::Semaphore::new(settings.max_in_flight.max(1))),
            memory: Mutex::default(),
            sightings: Sightings::default(),
            settings,
        })
    }

    pub fn settings(&self) -> &AdmissionSettings {
        &self.settings
    }

    /// Outbound requests discovery made so far (for tests and metrics).
    pub fn fetch_count(&self) -> u64 {
        self.discovery.fetch_count()
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        lock(&self.memory)
    }

    /// Admits an unknown issuer under `open`: discovery within the budget,
    /// the PA-JWT verified in full with the keys found, then (and only then)
    /// the agent stored unverified. Returns the stored agent and the
    /// verified claims.
    pub async fn admit(
        &self,
        node: &Around<'_>,
        jwt: &UnverifiedPaJwt,
    ) -> Result<(Agent, PaClaims), Refusal> {
        let got = self.try_admit(node, jwt).await;
        let result = if got.is_ok() { "admitted" } else { "refused" };
        let reason = got.as_ref().err().map_or("none", Refusal::label);
        metrics::counter!("pactd_open_admission_total", "result" => result, "reason" => reason)
            .increment(1);
        got
    }

    async fn try_admit(
        &self,
        node: &Around<'_>,
        jwt: &UnverifiedPaJwt,
    ) -> Result<(Agent, PaClaims), Refusal> {
        let issuer = jwt.issuer();
        // Free checks first: the text of the issuer, then what we remember.
        let url = pact_jose::check_issuer(issuer, self.allow_loopback).map_err(Refusal::Issuer)?;
        if is_address_issuer(&url, self.allow_loopback) {
            return Err(Refusal::Issuer(JwksError::InvalidUri(
                "an issuer admitted under open is a DNS name, not an address",
            )));
        }
        // A blocked host costs no fetch (the set is in the node's copy).
        let blocked = node.config_cache.blocked_hosts(node.db).await?;
        if host_blocked(&blocked, url.host_str().unwrap_or_default()) {
            return Err(Refusal::Blocked);
        }
        let now = node.clock.instant();
        let found = {
            let memory = self.memory();
            if memory.backoffs.get(issuer).is_some_and(|b| b.until > now) {
                return Err(Refusal::BackingOff);
            }
            memory
                .found
                .get(issuer)
                .filter(|f| f.until > now)
                .map(|f| f.discovered.clone())
        };
        let discovered = match found {
            Some(d) => d,
            None => self.discover(issuer, &url, now).await?,
        };
        let key = discovered
            .keys
            .find(jwt.kid(), jwt.alg())
            .ok_or(Refusal::NoKey)?;
        let claims = jwt
            .verify(&key, node.pa_rules, node.clock.now().unix_timestamp())
            .map_err(Refusal::Token)?;
        // Verified (§3.2): the first write for this issuer.
        let name = url.host_str().unwrap_or(issuer).to_owned();
        let mut tx = node.db.begin().await.map_err(pact_db::Error::from)?;
        pact_db::registries::hold_blocks(&mut tx).await?;
        let agent = pact_db::agents::insert_admitted(
            &mut *tx,
            issuer,
            &discovered.jwks_uri,
            &name,
            pact_db::agents::Claimed {
                name: discovered.claimed_name.as_deref(),
                logo_uri: discovered.claimed_logo_uri.as_deref(),
            },
            node.clock.now(),
        )
        .await?
        .ok_or(Refusal::Blocked)?;
        let forgotten =
            pact_db::agents::prune_unverified(&mut *tx, self.settings.max_unverified).await?;
        // Another node (or staff) stored this issuer first, and it may since
        // have been blocked: the stored row decides.
        if !admits(Policy::Open, &agent, node.clock.now()) {
            return Err(Refusal::NotAdmitted);
        }
        tx.commit().await.map_err(pact_db::Error::from)?;
        if !forgotten.is_empty() {
            tracing::info!(
                forgotten = forgotten.len(),
                "unverified agents forgotten (oldest idle first)"
            );
        }
        // This node's JWKS cache holds an entry per admitted agent's URI; the
        // forgotten ones go with them, so the bound on rows bounds it too.
        for uri in &forgotten {
            node.jwks.forget(uri);
        }
        if let Err(e) = node
            .jwks
            .prime(&agent.jwks_uri, discovered.keys.clone(), discovered.ttl)
        {
            tracing::debug!(error = %e, "JWKS cache not primed");
        }
        tracing::info!(issuer = %agent.issuer, "agent admitted under the open policy (unverified)");
        Ok((agent, claims))
    }

    /// Spends from the budget and discovers; remembers the outcome.
    async fn discover(
        &self,
        issuer: &str,
        url: &reqwest::Url,
        now: Instant,
    ) -> Result<Discovered, Refusal> {
        let Ok(_permit) = self.running.clone().try_acquire_owned() else {
            return Err(Refusal::Budget);
        };
        let _flight = {
            let mut memory = self.memory();
            if !memory.in_flight.insert(issuer.to_owned()) {
                return Err(Refusal::Budget);
            }
            InFlight {
                door: self,
                issuer: issuer.to_owned(),
            }
        };
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or("")),
            None => url.host_str().unwrap_or("").to_owned(),
        };
        // The host's bucket is asked first without taking, so that a host
        // refused does not spend the node-wide budget, and the node-wide
        // budget refused does not spend the host's.
        if !self.per_host.has_token(&host, now) {
            return Err(Refusal::Budget);
        }
        lock(&self.budget)
            .take(
                now,
                self.settings.discovery_rate,
                self.settings.discovery_burst,
            )
            .map_err(|_| Refusal::Budget)?;
        self.per_host
            .check(&host, now)
            .map_err(|_| Refusal::Budget)?;
        match self.discovery.discover(issuer).await {
            Ok(d) => {
                let until = now + d.ttl.min(Duration::from_secs(600));
                let mut memory = self.memory();
                memory.backoffs.remove(issuer);
                make_room(&mut memory.found, self.settings.max_remembered, now, |f| {
                    f.until
                });
                memory.found.insert(
                    issuer.to_owned(),
                    Found {
                        discovered: d.clone(),
                        until,
                    },
                );
                Ok(d)
            }
            Err(e) => {
                let mut memory = self.memory();
                let wait = memory
                    .backoffs
                    .get(issuer)
                    .map_or(self.settings.backoff_min, |b| {
                        b.wait.saturating_mul(2).min(self.settings.backoff_max)
                    });
                make_room(
                    &mut memory.backoffs,
                    self.settings.max_remembered,
                    now,
                    |b| b.until,
                );
                memory.backoffs.insert(
                    issuer.to_owned(),
                    Backoff {
                        until: now + wait,
                        wait,
                    },
                );
                Err(Refusal::Discovery(e))
            }
        }
    }

    /// Counts a request of an unverified agent; at most once a minute per
    /// agent, writes what was counted to its sighting (staff's "who knocks"),
    /// off the request's path.
    pub fn seen(&self, node: &Around<'_>, agent: &Agent) {
        if agent.verified {
            return;
        }
        let Some(requests) = self.sightings.count(
            &agent.issuer,
            node.clock.instant(),
            self.settings.max_remembered,
        ) else {
            return;
        };
        let db = node.relaxed_db.clone();
        let issuer = agent.issuer.clone();
        let now = node.clock.now();
        tokio::spawn(async move {
            if let Err(e) = pact_db::agents::record_sighting(&db, &issuer, requests, now).await {
                tracing::debug!(error = %e, "sighting not recorded");
            }
        });
    }

    /// Forgets what this node remembers of an issuer (staff verified, blocked
    /// or forgot it).
    pub fn forget(&self, issuer: &str) {
        let mut memory = self.memory();
        memory.backoffs.remove(issuer);
        memory.found.remove(issuer);
    }
}

/// Requests of unverified agents counted since their last write.
#[derive(Default)]
struct Sightings(Mutex<HashMap<String, (i64, Instant)>>);

/// How often one agent's sighting is written, at most, per node.
const SIGHTING_EVERY: Duration = Duration::from_secs(60);

impl Sightings {
    /// Counts one request; returns the count to write when it is time.
    fn count(&self, issuer: &str, now: Instant, max: usize) -> Option<i64> {
        let mut map = lock(&self.0);
        if let Some((n, last)) = map.get_mut(issuer) {
            *n += 1;
            if now.saturating_duration_since(*last) >= SIGHTING_EVERY {
                let due = *n;
                *n = 0;
                *last = now;
                return Some(due);
            }
            return None;
        }
        if map.len() >= max {
            // Only counts are lost; the bound matters more.
            map.clear();
        }
        // The first request of a node's run is written at once (the row may
        // be new to staff); later ones at most once a minute.
        map.insert(issuer.to_owned(), (0, now));
        Some(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_admission_takes_issuers_named_by_dns_only() {
        let address =
            |iss: &str, loopback| is_address_issuer(&reqwest::Url::parse(iss).unwrap(), loopback);
        assert!(!address("https://agent.example", false));
        assert!(!address("https://agent.example:8443/pa", false));
        assert!(address("https://203.0.113.7", false));
        assert!(address("https://[2001:db8::7]/pa", false));
        // Loopback only where the node allows it (development, tests).
        assert!(address("http://127.0.0.1:8080", false));
        assert!(!address("http://127.0.0.1:8080", true));
        assert!(!address("http://[::1]:8080", true));
        assert!(address("https://203.0.113.7", true));
    }

    fn agent(verified: bool, listed_until: Option<time::OffsetDateTime>) -> Agent {
        let t = time::OffsetDateTime::UNIX_EPOCH;
        Agent {
            issuer: "https://a.example".to_owned().into(),
            jwks_uri: "https://a.example/jwks".into(),
            name: "A".into(),
            enabled: true,
            created_at: t,
            updated_at: t,
            pa_rate: None,
            pa_burst: None,
            user_rate: None,
            user_burst: None,
            verified,
            registry: listed_until.map(|_| "trusted".to_owned()),
            listed_until,
        }
    }

    #[test]
    fn each_policy_admits_what_the_one_before_does_and_more() {
        use Policy::*;
        let now = time::OffsetDateTime::UNIX_EPOCH + time::Duration::days(1);
        let staffs = agent(true, None);
        let listed = agent(true, Some(now + time::Duration::minutes(1)));
        let lapsed = agent(true, Some(now));
        let unverified = agent(false, None);
        let table = [
            (&staffs, [true, true, true]),
            (&listed, [false, true, true]),
            (&lapsed, [false, false, false]),
            (&unverified, [false, false, true]),
        ];
        for (a, want) in table {
            let got = [Allowlist, Registry, Open].map(|p| admits(p, a, now));
            assert_eq!(got, want, "{:?}", Tier::of(a));
        }
        let mut blocked = staffs.clone();
        blocked.enabled = false;
        assert!(!admits(Open, &blocked, now));
        assert_eq!(Tier::of(&listed).label(), "listed");
    }

    #[test]
    fn a_blocked_host_blocks_the_domains_under_it_only() {
        let blocked = vec!["evil.example".to_owned()];
        assert!(host_blocked(&blocked, "evil.example"));
        assert!(host_blocked(&blocked, "a.b.EVIL.example."));
        assert!(!host_blocked(&blocked, "notevil.example"));
        assert!(!host_blocked(&blocked, "evil.example.com"));
        assert_eq!(
            normalize_host("https://Agent.Example:8443/x").as_deref(),
            Some("agent.example")
        );
        assert_eq!(
            normalize_host("Evil.Example.").as_deref(),
            Some("evil.example")
        );
        assert_eq!(normalize_host("a b"), None);
        assert_eq!(normalize_host(".example"), None);
        assert_eq!(normalize_host(""), None);
    }

    #[test]
    fn policies_read_and_print_the_same_words() {
        for p in [Policy::Allowlist, Policy::Registry, Policy::Open] {
            assert_eq!(Policy::parse(p.as_str()), Some(p));
        }
        assert_eq!(Policy::parse("everyone"), None);
        assert!(Policy::Allowlist < Policy::Registry && Policy::Registry < Policy::Open);
        assert_eq!(Policy::default(), Policy::Allowlist);
    }

    #[test]
    fn a_full_map_drops_the_expired_then_the_soonest() {
        let now = Instant::now();
        let mut m: HashMap<String, Instant> = HashMap::new();
        m.insert("old".into(), now - Duration::from_secs(1));
        m.insert("soon".into(), now + Duration::from_secs(1));
        m.insert("late".into(), now + Duration::from_secs(9));
        make_room(&mut m, 3, now, |v| *v);
        assert!(!m.contains_key("old") && m.len() == 2);
        make_room(&mut m, 2, now, |v| *v);
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["late"]);
        // The expired go even while the map has room: it holds what is live.
        m.insert("gone".into(), now - Duration::from_secs(1));
        make_room(&mut m, 100, now, |v| *v);
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["late"]);
    }

    #[test]
    fn sightings_are_written_at_most_once_a_minute() {
        let s = Sightings::default();
        let t0 = Instant::now();
        assert_eq!(s.count("a", t0, 10), Some(1));
        assert_eq!(s.count("a", t0 + Duration::from_secs(1), 10), None);
        assert_eq!(s.count("a", t0 + Duration::from_secs(2), 10), None);
        assert_eq!(s.count("a", t0 + Duration::from_secs(61), 10), Some(3));
    }
}
