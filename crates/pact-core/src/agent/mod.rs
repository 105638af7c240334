//! Brand agents: what answers a turn for a brand.
//!
//! The server owns the protocol (authentication, contexts, retries, storage);
//! a [`BrandAgent`] only turns a user's text into an outcome. The built-in
//! demo agent answers for `agent_kind = 'demo'`; later kinds (a webhook to the
//! brand's own agent) plug in behind the same trait.

pub mod asked;
pub mod bounds;
pub mod demo;
pub mod demo_tools;
pub mod tools;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use pact_db::brands::Brand;
use pact_proto::card::AgentSkill;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One turn as the brand agent sees it.
#[derive(Clone, Debug)]
pub struct Turn<'a> {
    pub brand: &'a Brand,
    /// The PA platform and its opaque user id: who is talking, not a proven account.
    pub pa_issuer: &'a pact_db::ids::AgentIssuer,
    pub pa_sub: &'a str,
    pub context_id: &'a str,
    pub text: &'a str,
}

pub use tools::{BeyondCall, Delegation, Done, GateRecord, Tool, ToolContext, ToolError, ToolGate};

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("brand agent failed: {0}")]
    Failed(String),
    /// A tool met an unreachable database (e.g. during a failover): the
    /// turn gets the retryable 503.
    #[error("the database is unavailable")]
    DatabaseUnavailable,
}

pub trait BrandAgent: Send + Sync {
    /// Skills advertised on the brand's card.
    fn skills(&self, brand: &Brand) -> Vec<AgentSkill>;
    /// Answers one turn with the reply's text. Account data is reachable only through `tools`, which
    /// enforces the delegation; a call refused for a missing scope makes the
    /// server answer with a step-up task, whatever the agent replies.
    fn respond<'a>(
        &'a self,
        turn: Turn<'a>,
        tools: &'a mut ToolGate<'_>,
    ) -> BoxFuture<'a, Result<String, AgentError>>;
}

/// The built-in agents available to brands, by `agent_kind`
/// (`pact_db::brands::Brand::agent`).
#[derive(Clone)]
pub struct BrandAgents {
    by_kind: HashMap<String, Arc<dyn BrandAgent>>,
}

impl BrandAgents {
    pub fn builtin() -> Self {
        let mut by_kind: HashMap<String, Arc<dyn BrandAgent>> = HashMap::new();
        by_kind.insert("demo".to_owned(), Arc::new(demo::DemoAgent));
        Self { by_kind }
    }

    pub fn insert(&mut self, kind: &str, agent: Arc<dyn BrandAgent>) {
        self.by_kind.insert(kind.to_owned(), agent);
    }

    /// The built-in agent of this kind (`Brand::agent`'s `BuiltIn`).
    pub fn of_kind(&self, kind: &str) -> Option<&Arc<dyn BrandAgent>> {
        self.by_kind.get(kind)
    }
}
