//! Shared application state: one per server node.

use std::sync::Arc;

use pact_db::PgPool;
use pact_jose::{JwksCache, PaJwtRules};

use crate::agent::BrandAgents;
use crate::config::Config;
use crate::rate_limit::RateLimiter;

#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub config: Config,
    pub db: PgPool,
    pub jwks: JwksCache,
    pub pa_rules: PaJwtRules,
    pub agents: BrandAgents,
    pub limiter: RateLimiter,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    pub fn new(config: Config, db: PgPool) -> Result<Self, pact_jose::JwksError> {
        Self::with_agents(config, db, BrandAgents::builtin())
    }

    /// With a custom set of brand agents (embedding pactd, tests).
    pub fn with_agents(
        config: Config,
        db: PgPool,
        agents: BrandAgents,
    ) -> Result<Self, pact_jose::JwksError> {
        let jwks = JwksCache::new(config.jwks.clone())?;
        let pa_rules = PaJwtRules::new(config.audience.clone());
        let limiter = RateLimiter::new(config.rate_limits.clone());
        Ok(Self(Arc::new(Inner {
            config,
            db,
            jwks,
            pa_rules,
            agents,
            limiter,
        })))
    }
}
