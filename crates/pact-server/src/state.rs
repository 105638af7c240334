//! Shared application state: one per server node.

use std::sync::Arc;

use pact_db::PgPool;
use pact_jose::{JwksCache, PaJwtRules};

use crate::agent::BrandAgents;
use crate::config::Config;
use crate::keys::{KeyError, KeyStore};
use crate::rate_limit::RateLimiter;
use crate::revocation::RevocationView;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The node's one time source: handlers read it once and pass `now` down.
    pub clock: pact_clock::Clock,
    pub config: Config,
    pub db: PgPool,
    /// The same database, committing without waiting for the WAL flush: only
    /// for writes a crash may lose without harm (`pact_db::relaxed_pool`).
    pub relaxed_db: PgPool,
    pub jwks: JwksCache,
    /// Open admission of agents nobody registered (PACT §3.1).
    pub door: crate::admission::Door,
    pub pa_rules: PaJwtRules,
    pub agents: BrandAgents,
    pub limiter: RateLimiter,
    pub keys: KeyStore,
    pub revocations: RevocationView,
    /// Whether the change listener's feed is proven alive by its heartbeat
    /// (see `feed.rs`): the memory views below answer only while it is.
    pub feed: Arc<crate::feed::ChangeFeed>,
    /// Agents, brands, scopes and merchant settings, kept while the change
    /// listener is connected (see `config_cache.rs`).
    pub config_cache: crate::config_cache::ConfigCache,
    /// Device authorizations seen pending, answered from memory while the
    /// change listener is connected (see `pending_polls.rs`).
    pub pending_polls: crate::pending_polls::PendingPolls,
    pub page_limits: crate::page_limits::PageLimits,
    pub db_health: pact_node::db_health::DbHealth,
    /// WebAuthn relying party for the public URL; `None` when the host cannot
    /// be one (an IP address), in which case passkeys are not offered.
    pub webauthn: Option<webauthn_rs::Webauthn>,
    /// Webhook turns running on this node, for the tool gateway.
    pub live_turns: pact_node::live_turns::LiveTurns,
    /// Webhook signing secrets already opened (`pact_node::webhook_signing`).
    pub opened_secrets: pact_node::webhook_signing::OpenedSecrets,
    /// The SSRF-guarded client for calls to merchants' agents and tools.
    pub outbound: reqwest::Client,
    /// Sends password-reset links; `None` when no SMTP server is configured.
    pub mailer: Option<crate::mail::Mailer>,
    /// This node's copy of the receipt log's Merkle tree (kept by `receipt_log.rs`).
    pub receipt_log: pact_node::receipt_tree::LogCache,
    /// This process in the `nodes` table (its heartbeat).
    pub node: pact_node::node_identity::NodeIdentity,
    /// The brands' OpenID providers' discovery documents, for back-channel logout.
    pub oidc_discovery: crate::oidc_discovery::DiscoveryCache,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("JWKS client: {0}")]
    Jwks(#[from] pact_jose::JwksError),
    #[error("signing keys: {0}")]
    Keys(#[from] KeyError),
    #[error("outbound HTTP client: {0}")]
    Outbound(#[from] reqwest::Error),
    #[error("mail: {0}")]
    Mail(#[from] crate::mail::MailError),
    #[error("the turn token key: {0}")]
    TurnKey(pact_crypto::SealError),
}

impl AppState {
    /// Builds the state; loads (or creates) the signing keys.
    pub async fn new(config: Config, db: PgPool) -> Result<Self, StateError> {
        Self::with_agents(config, db, BrandAgents::builtin()).await
    }

    /// With a custom set of brand agents (embedding pactd, tests).
    pub async fn with_agents(
        config: Config,
        db: PgPool,
        agents: BrandAgents,
    ) -> Result<Self, StateError> {
        Self::with_clock(config, db, agents, pact_clock::Clock::system()).await
    }

    /// With custom brand agents and a clock of the caller's (tests move a
    /// [`pact_clock::TestClock`] forward instead of sleeping).
    pub async fn with_clock(
        config: Config,
        db: PgPool,
        agents: BrandAgents,
        clock: pact_clock::Clock,
    ) -> Result<Self, StateError> {
        let jwks = JwksCache::with_clock(config.jwks.clone(), clock.clone())?;
        let door = crate::admission::Door::new(
            config.admission.clone(),
            config.jwks.clone(),
            clock.instant(),
        )?;
        let pa_rules = PaJwtRules::new(config.audience.clone());
        let limiter = RateLimiter::new(config.rate_limits.clone());
        let keys = KeyStore::load(&db, config.master_key.clone(), clock.now()).await?;
        let webauthn = config.relying_party();
        if webauthn.is_none() {
            tracing::warn!(
                public_url = %config.public_url,
                "passkeys are off: WebAuthn needs a site name, not an IP address, in the public URL \
                 (use http://localhost:PORT or a host name with --public-url)"
            );
        }
        let outbound = pact_node::outbound::build_client(config.jwks.allow_loopback)?;
        let mailer = config
            .mail
            .as_ref()
            .map(crate::mail::Mailer::new)
            .transpose()?;
        let node = pact_node::node_identity::NodeIdentity::new(clock.now());
        let turn_key = pact_node::turn_token::TurnKey::from_master(&config.master_key)
            .map_err(StateError::TurnKey)?;
        let feed = Arc::new(crate::feed::ChangeFeed::new(&config.listener));
        Ok(Self(Arc::new(Inner {
            clock,
            relaxed_db: pact_db::relaxed_pool(&db),
            db,
            jwks,
            door,
            pa_rules,
            agents,
            limiter,
            keys,
            revocations: RevocationView::default(),
            config_cache: crate::config_cache::ConfigCache::new(feed.clone()),
            pending_polls: crate::pending_polls::PendingPolls::new(feed.clone()),
            feed,
            page_limits: crate::page_limits::PageLimits::new(&config.page_limits),
            db_health: pact_node::db_health::DbHealth::default(),
            webauthn,
            config,
            live_turns: pact_node::live_turns::LiveTurns::new(turn_key),
            opened_secrets: Default::default(),
            outbound,
            mailer,
            receipt_log: Default::default(),
            node,
            oidc_discovery: Default::default(),
        })))
    }
}
