//! Shared application state: one per server node.

use std::sync::Arc;

use pact_db::PgPool;
use pact_jose::{JwksCache, PaJwtRules};

use crate::agent::BrandAgents;
use crate::config::Config;
use crate::keys::KeyError;
use crate::rate_limit::RateLimiter;
use pact_node::node::Node;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The node: its clock, configuration, database pools and memory views
    /// (`pact_node::node`), which its background jobs share. Reached through
    /// `Deref`, so `state.db` and `state.clock` read as they always did.
    pub node: Node,
    pub jwks: JwksCache,
    /// Open admission of agents nobody registered (PACT §3.1).
    pub door: crate::admission::Door,
    pub pa_rules: PaJwtRules,
    pub agents: BrandAgents,
    pub limiter: RateLimiter,
    pub page_limits: crate::page_limits::PageLimits,
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
    /// The brands' OpenID providers' discovery documents, for back-channel logout.
    pub oidc_discovery: crate::oidc_discovery::DiscoveryCache,
}

/// The node's fields are the state's: what the handlers share is the node
/// plus what only requests need.
impl std::ops::Deref for Inner {
    type Target = pact_node::node::NodeInner;
    fn deref(&self) -> &pact_node::node::NodeInner {
        &self.node
    }
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
        let turn_key = pact_node::turn_token::TurnKey::from_master(&config.master_key)
            .map_err(StateError::TurnKey)?;
        let page_limits = crate::page_limits::PageLimits::new(&config.page_limits);
        let node = Node::new(config, db, clock).await?;
        Ok(Self(Arc::new(Inner {
            node,
            jwks,
            door,
            pa_rules,
            agents,
            limiter,
            page_limits,
            webauthn,
            live_turns: pact_node::live_turns::LiveTurns::new(turn_key),
            opened_secrets: Default::default(),
            outbound,
            mailer,
            oidc_discovery: Default::default(),
        })))
    }
}

/// A handler that needs only the node (its database, clock, keys and
/// memory views) takes `State<Node>`, and says so in its signature.
impl axum::extract::FromRef<AppState> for Node {
    fn from_ref(state: &AppState) -> Node {
        state.node.clone()
    }
}
