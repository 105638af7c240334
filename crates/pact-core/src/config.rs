//! Server settings, resolved by the `pactd` command from flags, env and file.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use pact_crypto::MasterKey;
use pact_db::agents::Agent;
use pact_db::ids::BrandId;
use pact_jose::JwksPolicy;

use crate::domain::admission::Policy;
use crate::domain::proxies::TrustedProxies;
use crate::page_limits::PageLimitSettings;
use crate::rate_limit::{AgentLimits, RateLimits};

#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    /// Base URL people and agents reach us at, without a trailing slash.
    pub public_url: String,
    /// The Provider-wide PA-JWT audience (PACT §3: never per brand).
    pub audience: String,
    /// Shown as `provider.organization` on every card.
    pub provider_name: String,
    pub jwks: JwksPolicy,
    /// Which personal agents are admitted (PACT §3.1) and open admission's
    /// budget (`pact-node/src/admission.rs`).
    pub admission: AdmissionSettings,
    pub request_timeout: Duration,
    pub body_limit: usize,
    pub rate_limits: RateLimits,
    pub page_limits: PageLimitSettings,
    pub connections: ConnectionSettings,
    /// Peers whose `X-Forwarded-For` names the client (reverse proxies).
    pub trusted_proxies: TrustedProxies,
    /// Seals the private signing keys at rest (`PACTD_MASTER_KEY`).
    pub master_key: Arc<MasterKey>,
    pub delegation: DelegationSettings,
    /// SMTP for password-reset links; `None` sends no mail.
    pub mail: Option<crate::mail::MailSettings>,
    /// Where `GET /metrics` is served (its own listener); `None`: nowhere.
    pub metrics_listen: Option<SocketAddr>,
    /// How often the receipt log is extended and a signed tree head published
    /// when it grew (docs/receipt-log.md); RFC 9162's maximum merge delay is
    /// about this long.
    pub tree_head_interval: Duration,
    /// The change listener's heartbeat (see `feed.rs`); not an operator
    /// setting: tests shorten it to see a frozen listener within seconds.
    pub listener: ListenerSettings,
}

/// How the change listener proves its connection alive (`listener.rs`).
#[derive(Clone, Debug)]
pub struct ListenerSettings {
    /// A heartbeat is sent this long after the previous one was sent.
    pub heartbeat_every: Duration,
    /// Its echo must be back this long after it was sent (and a connection
    /// attempt must succeed within it), or the connection is given up.
    pub heartbeat_timeout: Duration,
}

impl ListenerSettings {
    /// The oldest an answer from memory may be: a change committed just after
    /// the last proven heartbeat is missed at most until the next heartbeat's
    /// echo is overdue, `heartbeat_every + heartbeat_timeout` later.
    pub fn bound(&self) -> Duration {
        self.heartbeat_every + self.heartbeat_timeout
    }
}

impl Default for ListenerSettings {
    fn default() -> Self {
        Self {
            heartbeat_every: Duration::from_secs(1),
            heartbeat_timeout: Duration::from_secs(2),
        }
    }
}

/// What a connection may cost us: slow or idle clients must not hold the
/// server, and a stop must end (see docs/operations.md for the matching proxy
/// settings).
#[derive(Clone, Debug)]
pub struct ConnectionSettings {
    /// Time to send a request's headers; also the longest a kept-alive
    /// connection may sit idle between requests (hyper starts the same timer
    /// when it waits for the next request head).
    pub header_timeout: Duration,
    /// Open connections on this node, all clients together.
    pub max_connections: usize,
    /// Open connections from one address (an IPv6 /64); trusted proxies are exempt.
    pub max_connections_per_ip: usize,
    /// After SIGTERM: how long in-flight requests may finish before the
    /// remaining connections are closed and the process exits.
    pub shutdown_grace: Duration,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            max_connections: default_max_connections(open_files_limit()),
            max_connections_per_ip: 128,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Leaves room under the open-files limit for the database pools, the change
/// listener, JWKS fetches, logs and the metrics listener (whose own cap,
/// `telemetry::METRICS_MAX_CONNECTIONS`, comes out of this reserve), so a
/// flood is refused at our cap rather than by `accept` failing with EMFILE
/// for everyone.
pub fn default_max_connections(open_files: Option<u64>) -> usize {
    let limit = open_files.unwrap_or(1024);
    let usable = limit.saturating_sub(128).max(64);
    usize::try_from(usable.min(16_384)).unwrap_or(16_384)
}

/// The soft `RLIMIT_NOFILE` of this process, from `/proc/self/limits`
/// (Linux; `None` elsewhere).
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

/// Lifetimes and knobs of the Delegated profile (PACT §5).
#[derive(Clone, Debug)]
pub struct DelegationSettings {
    /// RFC 8628 `expires_in` (PACT: 600 s).
    pub device_code_ttl: Duration,
    /// RFC 8628 `interval` (PACT: 5 s).
    pub poll_interval_secs: i32,
    /// Delegation token lifetime (PACT §5.4: at most 1 h; pactd: 15 min).
    pub access_token_ttl: Duration,
    /// Default grant lifetime; a brand's `grant_ttl_days` setting overrides it.
    pub grant_ttl: Duration,
    /// How long a new signing key is published before it signs.
    pub key_overlap: Duration,
    /// How long a retired key stays published (it must outlive its tokens and receipts).
    pub key_retention: Duration,
}

impl Default for DelegationSettings {
    fn default() -> Self {
        Self {
            device_code_ttl: Duration::from_secs(600),
            poll_interval_secs: 5,
            access_token_ttl: Duration::from_secs(15 * 60),
            grant_ttl: Duration::from_secs(30 * 24 * 3600),
            key_overlap: Duration::from_secs(10 * 60),
            key_retention: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

impl Config {
    /// Defaults for a listen address; `public_url` and `audience` follow it.
    pub fn for_listen(listen: SocketAddr, master_key: Arc<MasterKey>) -> Self {
        let public_url = format!("http://{listen}");
        Self {
            listen,
            audience: default_audience(&public_url),
            public_url,
            provider_name: "pactd".to_owned(),
            jwks: JwksPolicy::default(),
            admission: Default::default(),
            request_timeout: Duration::from_secs(30),
            body_limit: 64 * 1024,
            rate_limits: RateLimits::default(),
            page_limits: PageLimitSettings::default(),
            connections: ConnectionSettings::default(),
            trusted_proxies: TrustedProxies::default(),
            master_key,
            delegation: DelegationSettings::default(),
            mail: None,
            metrics_listen: None,
            tree_head_interval: Duration::from_secs(60),
            listener: ListenerSettings::default(),
        }
    }

    /// `{public_url}/a2a/{brand_id}` (PACT §1).
    pub fn interface_url(&self, brand_id: &BrandId) -> String {
        format!("{}/a2a/{brand_id}", self.public_url)
    }

    /// The brand's OAuth issuer, `{iface}/oauth` (PACT §1).
    pub fn oauth_issuer(&self, brand_id: &BrandId) -> String {
        format!("{}/oauth", self.interface_url(brand_id))
    }

    /// `{public_url}/device` (PACT §1).
    pub fn verification_uri(&self) -> String {
        format!("{}/device", self.public_url)
    }

    /// The WebAuthn relying party for the public URL. WebAuthn RP ids are
    /// domain names (WebAuthn Level 2 §5.1.2), so an IP-address host gets
    /// none and passkeys are not offered.
    pub fn relying_party(&self) -> Option<webauthn_rs::Webauthn> {
        let origin = url::Url::parse(&self.public_url).ok()?;
        let host = origin.host_str()?.to_owned();
        if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
            return None;
        }
        webauthn_rs::WebauthnBuilder::new(&host, &origin)
            .ok()?
            .rp_name(&self.provider_name)
            .build()
            .ok()
    }

    pub fn card_url(&self, brand_id: &BrandId) -> String {
        format!(
            "{}/.well-known/agent-card.json",
            self.interface_url(brand_id)
        )
    }
}

/// The default audience: `{public_url}/a2a`.
pub fn default_audience(public_url: &str) -> String {
    format!("{}/a2a", public_url.trim_end_matches('/'))
}

/// Open admission's budget and bounds (the arithmetic is in the
/// `admission` module's comment).
#[derive(Clone, Debug)]
pub struct AdmissionSettings {
    /// The Provider-wide policy (`--admission`).
    pub policy: Policy,
    /// Discoveries per second, node-wide, and their burst.
    pub discovery_rate: f64,
    pub discovery_burst: f64,
    /// At most one discovery per issuer host this often.
    pub per_host_interval: Duration,
    /// An issuer that failed waits this long, doubling on each further
    /// failure up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Discoveries running at once.
    pub max_in_flight: usize,
    /// Issuers remembered (back-offs and discovered keys), each map.
    pub max_remembered: usize,
    /// Unverified agents kept in the database.
    pub max_unverified: i64,
    /// An unverified agent's rate limits (requests per second and burst),
    /// platform-wide and per user, unless staff set its own.
    pub unverified_pa: (f64, f64),
    pub unverified_user: (f64, f64),
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        Self {
            policy: Policy::Allowlist,
            discovery_rate: 2.0,
            discovery_burst: 10.0,
            per_host_interval: Duration::from_secs(60),
            backoff_min: Duration::from_secs(60),
            backoff_max: Duration::from_secs(3600),
            max_in_flight: 4,
            max_remembered: 10_000,
            max_unverified: 1_000,
            unverified_pa: (20.0, 40.0),
            unverified_user: (2.0, 10.0),
        }
    }
}

impl AdmissionSettings {
    /// The rate limits an agent is held to: its own where staff set them,
    /// else, for an unverified agent, the lower ones of its tier (`None`
    /// keeps the node's defaults for a verified one).
    pub fn limits_of(&self, agent: &Agent) -> AgentLimits {
        let own = AgentLimits::of(agent);
        if agent.verified {
            return own;
        }
        AgentLimits {
            pa: own.pa.or(Some(self.unverified_pa)),
            user: own.user.or(Some(self.unverified_user)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_stays_under_the_open_files_limit() {
        assert_eq!(default_max_connections(Some(1024)), 896);
        assert_eq!(default_max_connections(Some(100)), 64);
        assert_eq!(default_max_connections(Some(1 << 20)), 16_384);
        assert_eq!(default_max_connections(None), 896);
    }

    #[test]
    fn no_relying_party_for_an_ip_address() {
        let key = Arc::new(MasterKey::generate().unwrap());
        let addr: SocketAddr = ([127, 0, 0, 1], 8080).into();
        let mut config = Config::for_listen(addr, key);
        assert!(config.relying_party().is_none());
        config.public_url = "http://localhost:8080".into();
        assert!(config.relying_party().is_some());
    }
}
