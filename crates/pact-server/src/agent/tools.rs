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
    /// The database could not be reached: the turn fails with the retryable
    /// 503, not as an internal error (it is nobody's bug, and the PA should retry).
    #[error("database unavailable")]
    DatabaseUnavailable,
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
    record: GateRecord,
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
            record: GateRecord::default(),
        }
    }

    /// Whether this turn runs under a delegation token.
    pub fn is_delegated(&self) -> bool {
        self.delegation.is_some()
    }

    pub async fn call(&mut self, tool: &dyn Tool, args: Value) -> Result<Value, ToolError> {
        let scope = tool.scope();
        if let Err(e) = check_call(
            self.offered,
            self.delegation,
            &self.types,
            tool.name(),
            Some(scope),
            &args,
        ) {
            self.record.refused(&e);
            return Err(e);
        }
        let Some(delegation) = self.delegation else {
            return Err(ToolError::MissingScope(scope.to_owned()));
        };
        let ctx = ToolContext {
            brand: self.brand,
            user_sub: &delegation.user_sub,
        };
        let out = tool.run(self.conn, ctx, &args).await?;
        self.record.ran(tool.name(), Some(scope), &args);
        Ok(out)
    }

    /// Scopes the turn asked for and did not hold (the step-up set).
    pub fn into_record(self) -> GateRecord {
        self.record
    }
}

/// What a turn did through the gate.
#[derive(Clone, Debug, Default)]
pub struct GateRecord {
    pub used_scopes: BTreeSet<String>,
    pub actions: Vec<ReceiptAction>,
    pub missing: BTreeSet<String>,
}

impl GateRecord {
    /// Notes a refusal: a missing scope joins the step-up set (PACT §5.5).
    pub fn refused(&mut self, e: &ToolError) {
        if let ToolError::MissingScope(scope) = e {
            self.missing.insert(scope.clone());
        }
    }

    /// Notes a call that ran, for the receipt: `{tool, argsHash}` (PACT §5.6).
    pub fn ran(&mut self, tool: &str, scope: Option<&str>, args: &Value) {
        if let Some(scope) = scope {
            self.used_scopes.insert(scope.to_owned());
        }
        self.actions.push(ReceiptAction {
            tool: tool.to_owned(),
            args_hash: Some(pact_jose::args_hash(args)),
        });
    }
}

/// The gate's rule, for built-in tools and for a merchant's tools behind the
/// webhook gateway alike, checked against the real arguments before anything
/// runs (PACT §5.5, §5.7):
///
/// * `scope` `None` is a public tool: anyone may call it;
/// * a scope the brand does not offer: [`ToolError::Unavailable`];
/// * a scope the turn's delegation does not hold (or no delegation):
///   [`ToolError::MissingScope`], the step-up;
/// * `authorization_details` that do not cover `args`: [`ToolError::NotPermitted`].
pub fn check_call(
    offered: &BTreeSet<String>,
    delegation: Option<&Delegation>,
    types: &DetailsTypes,
    tool: &str,
    scope: Option<&str>,
    args: &Value,
) -> Result<(), ToolError> {
    let Some(scope) = scope else {
        return Ok(());
    };
    if !offered.contains(scope) {
        return Err(ToolError::Unavailable);
    }
    let Some(delegation) = delegation.filter(|d| d.scopes.contains(scope)) else {
        return Err(ToolError::MissingScope(scope.to_owned()));
    };
    if !authz_details::permits(delegation.authorization_details.as_ref(), types, tool, args) {
        tracing::info!(tool, grant = %delegation.grant_id, "tool call refused by authorization_details");
        return Err(ToolError::NotPermitted);
    }
    Ok(())
}
