//! The gateway between a brand agent and the brand's systems.
//!
//! A brand agent reaches account data only through [`ToolGate::call`], which
//! checks the delegation's scopes and `authorization_details` against the real
//! arguments *before* the tool runs (PACT §5.5, §5.7). Enforcement sits here,
//! not in the agent, so a prompt-injected or buggy agent cannot exceed what
//! the person allowed. The gate also records what ran, for the receipt.

use std::collections::BTreeSet;

use pact_db::brands::Brand;
use pact_proto::oauth::ReceiptAction;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::BoxFuture;
use crate::domain::authz_details::{self, DetailsTypes};

/// The authority a turn runs with under a delegation token.
#[derive(Clone, Debug)]
pub struct Delegation {
    pub grant_id: Uuid,
    /// The user's id at the brand (the token's `sub`).
    pub user_sub: String,
    pub scopes: BTreeSet<String>,
    pub authorization_details: Option<Value>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolError {
    /// The brand offers this scope but the turn does not hold it: step up.
    #[error("missing scope {0}")]
    MissingScope(String),
    /// The brand does not offer delegation for this tool at all.
    #[error("not available at this brand")]
    Unavailable,
    /// The scope is held, but the granted `authorization_details` do not cover these arguments.
    #[error("not permitted by the granted authorization details")]
    NotPermitted,
    #[error("bad arguments: {0}")]
    BadArguments(String),
    #[error("tool failed: {0}")]
    Failed(String),
}

/// What a tool sees: the brand, and the user it acts for.
#[derive(Clone, Copy, Debug)]
pub struct ToolContext<'a> {
    pub brand: &'a Brand,
    pub user_sub: &'a str,
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// The scope a call needs.
    fn scope(&self) -> &'static str;
    fn run<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        ctx: ToolContext<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>>;
}

pub struct ToolGate<'c> {
    conn: &'c mut PgConnection,
    brand: &'c Brand,
    offered: &'c BTreeSet<String>,
    delegation: Option<&'c Delegation>,
    types: DetailsTypes,
    used_scopes: BTreeSet<String>,
    actions: Vec<ReceiptAction>,
    missing: BTreeSet<String>,
}

impl<'c> ToolGate<'c> {
    pub fn new(
        conn: &'c mut PgConnection,
        brand: &'c Brand,
        offered: &'c BTreeSet<String>,
        delegation: Option<&'c Delegation>,
    ) -> Self {
        Self {
            conn,
            brand,
            offered,
            delegation,
            types: authz_details::types_from_settings(&brand.settings),
            used_scopes: BTreeSet::new(),
            actions: Vec::new(),
            missing: BTreeSet::new(),
        }
    }

    /// Whether this turn runs under a delegation token.
    pub fn is_delegated(&self) -> bool {
        self.delegation.is_some()
    }

    pub async fn call(&mut self, tool: &dyn Tool, args: Value) -> Result<Value, ToolError> {
        let scope = tool.scope();
        if !self.offered.contains(scope) {
            return Err(ToolError::Unavailable);
        }
        let Some(delegation) = self.delegation.filter(|d| d.scopes.contains(scope)) else {
            self.missing.insert(scope.to_owned());
            return Err(ToolError::MissingScope(scope.to_owned()));
        };
        if !authz_details::permits(
            delegation.authorization_details.as_ref(),
            &self.types,
            tool.name(),
            &args,
        ) {
            tracing::info!(tool = tool.name(), grant = %delegation.grant_id, "tool call refused by authorization_details");
            return Err(ToolError::NotPermitted);
        }
        let ctx = ToolContext {
            brand: self.brand,
            user_sub: &delegation.user_sub,
        };
        let out = tool.run(self.conn, ctx, &args).await?;
        self.used_scopes.insert(scope.to_owned());
        self.actions.push(ReceiptAction {
            tool: tool.name().to_owned(),
            args_hash: Some(pact_jose::args_hash(&args)),
        });
        Ok(out)
    }

    /// Scopes the turn asked for and did not hold (the step-up set).
    pub fn into_record(self) -> GateRecord {
        GateRecord {
            used_scopes: self.used_scopes,
            actions: self.actions,
            missing: self.missing,
        }
    }
}

/// What a turn did through the gate.
#[derive(Clone, Debug, Default)]
pub struct GateRecord {
    pub used_scopes: BTreeSet<String>,
    pub actions: Vec<ReceiptAction>,
    pub missing: BTreeSet<String>,
}
