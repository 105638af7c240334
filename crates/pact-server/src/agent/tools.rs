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

/// The scope half of [`check_call`], without arguments: whether a call of a
/// tool needing `scope` may happen at all under this turn's delegation (what
/// an MCP `tools/list` reports per tool). `Ok(None)`: a public tool;
/// `Ok(Some(d))`: the delegation holds the scope (its `authorization_details`
/// may still refuse particular arguments).
pub fn scope_rule<'d>(
    offered: &BTreeSet<String>,
    delegation: Option<&'d Delegation>,
    scope: Option<&str>,
) -> Result<Option<&'d Delegation>, ToolError> {
    let Some(scope) = scope else {
        return Ok(None);
    };
    if !offered.contains(scope) {
        return Err(ToolError::Unavailable);
    }
    match delegation.filter(|d| d.scopes.contains(scope)) {
        Some(d) => Ok(Some(d)),
        None => Err(ToolError::MissingScope(scope.to_owned())),
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
    let Some(delegation) = scope_rule(offered, delegation, Some(scope))? else {
        return Ok(());
    };
    if !authz_details::permits(delegation.authorization_details.as_ref(), types, tool, args) {
        tracing::info!(tool, grant = %delegation.grant_id, "tool call refused by authorization_details");
        return Err(ToolError::NotPermitted);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The gate's rule as a table: each row is a call and what the gate must
    //! answer (PACT §5.5 scopes and step-up, §5.7 authorization_details).

    use serde_json::json;

    use super::*;
    use crate::domain::authz_details::demo_types;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn delegation(scopes: &[&str], details: Option<Value>) -> Delegation {
        Delegation {
            grant_id: Uuid::nil(),
            user_sub: "u-1".to_owned(),
            scopes: set(scopes),
            authorization_details: details,
        }
    }

    #[test]
    fn the_gate_answers_each_call_as_the_rules_say() {
        let offered = set(&["orders:read", "orders:cancel"]);
        let types = demo_types();
        let read_only = delegation(&["orders:read"], None);
        let both = delegation(&["orders:read", "orders:cancel"], None);
        let only_demo_1 = delegation(
            &["orders:read", "orders:cancel"],
            Some(json!([{"type": "order_cancellation", "order_ids": ["DEMO-1"]}])),
        );
        let missing = |s: &str| Err(ToolError::MissingScope(s.to_owned()));
        // (case, delegation, tool, the tool's scope, arguments, answer)
        type Row<'d> = (
            &'static str,
            Option<&'d Delegation>,
            &'static str,
            Option<&'static str>,
            Value,
            Result<(), ToolError>,
        );
        #[rustfmt::skip]
        let table: Vec<Row<'_>> = vec![
            // A public tool: anyone, even without a delegation.
            ("public tool, no token", None, "store_hours", None, json!({}), Ok(())),
            // A scope the brand does not offer is not a step-up: nobody can get it here.
            ("unoffered scope", Some(&both), "refund", Some("payments:refund"), json!({}), Err(ToolError::Unavailable)),
            ("unoffered scope, no token", None, "refund", Some("payments:refund"), json!({}), Err(ToolError::Unavailable)),
            // An offered scope not held: the step-up (PACT §5.5).
            ("no token", None, "list_orders", Some("orders:read"), json!({}), missing("orders:read")),
            ("scope not held", Some(&read_only), "cancel_order", Some("orders:cancel"), json!({"order_id": "DEMO-1"}), missing("orders:cancel")),
            ("scope held", Some(&read_only), "list_orders", Some("orders:read"), json!({}), Ok(())),
            // No authorization_details: the scope alone rules.
            ("scope held, no details", Some(&both), "cancel_order", Some("orders:cancel"), json!({"order_id": "DEMO-9"}), Ok(())),
            // Details bind the real arguments (PACT §5.7).
            ("named order", Some(&only_demo_1), "cancel_order", Some("orders:cancel"), json!({"order_id": "DEMO-1"}), Ok(())),
            ("another order", Some(&only_demo_1), "cancel_order", Some("orders:cancel"), json!({"order_id": "DEMO-2"}), Err(ToolError::NotPermitted)),
            ("argument left out", Some(&only_demo_1), "cancel_order", Some("orders:cancel"), json!({}), Err(ToolError::NotPermitted)),
            ("argument of another JSON type", Some(&only_demo_1), "cancel_order", Some("orders:cancel"), json!({"order_id": ["DEMO-1"]}), Err(ToolError::NotPermitted)),
            ("argument as a number", Some(&only_demo_1), "cancel_order", Some("orders:cancel"), json!({"order_id": 1}), Err(ToolError::NotPermitted)),
            // Details restrict only the tools their type names.
            ("details do not touch other tools", Some(&only_demo_1), "list_orders", Some("orders:read"), json!({}), Ok(())),
        ];
        for (name, d, tool, scope, args, expected) in table {
            assert_eq!(
                check_call(&offered, d, &types, tool, scope, &args),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn the_record_keeps_what_ran_for_the_receipt_and_what_was_missing_for_the_step_up() {
        let mut record = GateRecord::default();
        record.refused(&ToolError::MissingScope("orders:cancel".to_owned()));
        record.refused(&ToolError::MissingScope("orders:cancel".to_owned()));
        // Refusals that no approval can fix are not a step-up.
        record.refused(&ToolError::NotPermitted);
        record.refused(&ToolError::Unavailable);
        record.ran("list_orders", Some("orders:read"), &json!({"limit": 3}));
        record.ran("store_hours", None, &json!({}));
        assert_eq!(record.missing, set(&["orders:cancel"]));
        assert_eq!(record.used_scopes, set(&["orders:read"]));
        let tools: Vec<&str> = record.actions.iter().map(|a| a.tool.as_str()).collect();
        assert_eq!(tools, ["list_orders", "store_hours"]);
        // The receipt names the arguments by hash, never by value (PACT §5.6).
        assert_eq!(
            record.actions[0].args_hash,
            Some(pact_jose::args_hash(&json!({"limit": 3})))
        );
    }
}
