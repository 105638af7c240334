//! The gateway between a brand agent and the brand's systems.
//!
//! A brand agent reaches account data only through [`ToolGate::call`], which
//! checks the delegation's scopes and the limits the person approved (the
//! grant's terms, `domain::terms`) against the real arguments *before* the
//! tool runs (PACT §5.5, §5.7). Enforcement sits here, not in the agent, so
//! a prompt-injected or buggy agent cannot exceed what the person allowed.
//! The gate also records what became of every call, for the receipt.

use std::collections::BTreeSet;
use std::sync::Arc;

use pact_db::brands::Brand;
use pact_db::ids::{GrantId, UserSub};
use pact_proto::oauth::{ActionError, ReceiptAction, ReceiptRefusal};
use serde_json::{Value, json};
use sqlx::PgConnection;

use super::BoxFuture;
use super::bounds;
use crate::domain::money::Amount;
use crate::domain::terms::{Beyond, Plan, RulesNow, Terms};

/// The authority a turn runs with under a delegation token: the token's
/// claims and, read back from the database when the turn began, what the
/// grant was approved under.
#[derive(Clone, Debug)]
pub struct Delegation {
    pub grant_id: GrantId,
    /// The user's id at the brand (the token's `sub`).
    pub user_sub: UserSub,
    pub scopes: BTreeSet<String>,
    pub authorization_details: Option<Value>,
    /// The grant's terms: the limits every call is judged against.
    pub terms: Arc<Terms>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolError {
    /// The brand offers this scope but the turn does not hold it: step up.
    #[error("missing scope {0}")]
    MissingScope(String),
    /// The brand does not offer delegation for this tool at all.
    #[error("not available at this brand")]
    Unavailable,
    /// Beyond a limit the person set: not forwarded; the person is asked
    /// about this one operation (the step-up task).
    #[error("beyond the granted limit {}.{}", .0.type_name, .0.field)]
    Beyond(Box<Beyond>),
    /// A missing or malformed argument that a limit looks at: refused.
    #[error("not permitted by the granted authorization details: {0}")]
    NotPermitted(String),
    /// The grant holds a limit that cannot be judged: refused (fail closed).
    #[error("the grant's limits cannot be evaluated: {0}")]
    Unenforceable(String),
    #[error("bad arguments: {0}")]
    BadArguments(String),
    #[error("tool failed: {0}")]
    Failed(String),
    /// The database could not be reached: the turn fails with the retryable
    /// 503, not as an internal error (it is nobody's bug, and the PA should retry).
    #[error("database unavailable")]
    DatabaseUnavailable,
}

impl ToolError {
    /// The receipt's and the gateway's word for a refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingScope(_) => "missing_scope",
            Self::Unavailable => "unavailable",
            Self::Beyond(_) => "beyond_limit",
            Self::NotPermitted(_) => "not_permitted",
            Self::Unenforceable(_) => "unenforceable",
            Self::BadArguments(_) => "invalid_arguments",
            Self::Failed(_) => "failed",
            Self::DatabaseUnavailable => "unavailable",
        }
    }
}

/// What a tool sees: the brand, and the user it acts for.
#[derive(Clone, Copy, Debug)]
pub struct ToolContext<'a> {
    pub brand: &'a Brand,
    pub user_sub: &'a UserSub,
}

pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// The scope a call needs.
    fn scope(&self) -> &'static str;
    /// Which arguments the granted limits apply to (`domain::tool_rules`).
    fn rules(&self) -> &'static [&'static str] {
        &[]
    }
    /// How one call reads to the person asked to approve it on its own.
    fn summary(&self) -> &'static str {
        ""
    }
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
    rules: &'c RulesNow,
    record: GateRecord,
}

impl<'c> ToolGate<'c> {
    pub fn new(
        conn: &'c mut PgConnection,
        brand: &'c Brand,
        offered: &'c BTreeSet<String>,
        delegation: Option<&'c Delegation>,
        rules: &'c RulesNow,
    ) -> Self {
        Self {
            conn,
            brand,
            offered,
            delegation,
            rules,
            record: GateRecord::default(),
        }
    }

    /// Whether this turn runs under a delegation token.
    pub fn is_delegated(&self) -> bool {
        self.delegation.is_some()
    }

    pub async fn call(&mut self, tool: &dyn Tool, args: Value) -> Result<Value, ToolError> {
        let scope = tool.scope();
        let args_hash = pact_jose::args_hash(&args);
        let call = bounds::Call {
            tool: tool.name(),
            scope: Some(scope),
            args: &args,
            args_hash: &args_hash,
            summary: tool.summary(),
            description: "",
            rules: self.rules,
        };
        let admitted = bounds::admit(
            &mut *self.conn,
            self.brand,
            self.offered,
            self.delegation,
            &call,
        )
        .await;
        let plan = match admitted {
            Ok(plan) => plan,
            Err(e) => {
                self.record.refused(&call, self.delegation, &e);
                return Err(e);
            }
        };
        let Some(delegation) = self.delegation else {
            return Err(ToolError::MissingScope(scope.to_owned()));
        };
        let ctx = ToolContext {
            brand: self.brand,
            user_sub: &delegation.user_sub,
        };
        match tool.run(self.conn, ctx, &args).await {
            Ok(out) => {
                self.record.ran(
                    tool.name(),
                    Some(scope),
                    &args_hash,
                    plan.as_ref(),
                    Done::ok(),
                );
                Ok(out)
            }
            Err(e) => {
                // It did not happen: what it was charged is given back.
                if let Some(p) = &plan {
                    bounds::release(&mut *self.conn, p).await;
                }
                Err(e)
            }
        }
    }

    /// What the turn did through the gate.
    pub fn into_record(self) -> GateRecord {
        self.record
    }
}

/// A call that went beyond a limit, kept for the step-up task that asks
/// the person about it (PACT §5.5 for details).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeyondCall {
    pub grant_id: GrantId,
    pub tool: String,
    pub scope: String,
    pub args: Value,
    pub args_hash: String,
    pub beyond: Beyond,
    /// The amounts in the call's limited arguments (its effect is held to them).
    pub amounts: Vec<Amount>,
    /// The tool's `summary` template and description, for the consent page.
    pub summary: String,
    pub description: String,
}

/// What became of a forwarded call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Done {
    /// `done`, `failed` or `unknown`.
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub error: Option<ActionError>,
    pub effect: Option<Value>,
    pub beyond_limit: bool,
}

impl Done {
    pub fn ok() -> Self {
        Self {
            outcome: "done",
            ..Self::default()
        }
    }
}

/// What a turn did through the gate.
#[derive(Clone, Debug, Default)]
pub struct GateRecord {
    pub used_scopes: BTreeSet<String>,
    pub actions: Vec<ReceiptAction>,
    pub refused: Vec<ReceiptRefusal>,
    /// Scopes asked for and not held: the step-up set (PACT §5.5).
    pub missing: BTreeSet<String>,
    /// Calls beyond a limit: the person is asked about them one by one.
    pub beyond: Vec<BeyondCall>,
}

impl GateRecord {
    /// Notes a refusal for the receipt; a missing scope joins the step-up
    /// set, a call beyond a limit the operations to ask about.
    pub fn refused(
        &mut self,
        call: &bounds::Call<'_>,
        delegation: Option<&Delegation>,
        e: &ToolError,
    ) {
        match e {
            ToolError::MissingScope(scope) => {
                self.missing.insert(scope.clone());
            }
            ToolError::Beyond(b) => {
                if let (Some(d), Some(scope)) = (delegation, call.scope) {
                    let amounts = crate::domain::terms::call_amounts(
                        &d.terms, call.rules, call.tool, scope, call.args,
                    );
                    let seen = self
                        .beyond
                        .iter()
                        .any(|x| x.tool == call.tool && x.args_hash == call.args_hash);
                    if !seen {
                        self.beyond.push(BeyondCall {
                            grant_id: d.grant_id,
                            tool: call.tool.to_owned(),
                            scope: scope.to_owned(),
                            args: call.args.clone(),
                            args_hash: call.args_hash.to_owned(),
                            beyond: (**b).clone(),
                            amounts,
                            summary: call.summary.to_owned(),
                            description: call.description.to_owned(),
                        });
                    }
                }
            }
            _ => {}
        }
        // Refusals of calls made without any delegation carry nothing of the person's.
        if delegation.is_none() {
            return;
        }
        let limit = match e {
            ToolError::Beyond(b) if !b.field.is_empty() => {
                Some(json!({"type": b.type_name, "field": b.field}))
            }
            ToolError::Beyond(b) => Some(json!({"type": b.type_name})),
            _ => None,
        };
        self.refused.push(ReceiptRefusal {
            tool: call.tool.to_owned(),
            args_hash: Some(call.args_hash.to_owned()),
            reason: e.reason().to_owned(),
            scope: call.scope.map(str::to_owned),
            limit,
            extra: Default::default(),
        });
    }

    /// Notes a call that reached the tool, for the receipt: `{tool,
    /// argsHash}` (PACT §5.6) and what became of it.
    pub fn ran(
        &mut self,
        tool: &str,
        scope: Option<&str>,
        args_hash: &str,
        plan: Option<&Plan>,
        done: Done,
    ) {
        if let Some(scope) = scope {
            self.used_scopes.insert(scope.to_owned());
        }
        self.actions.push(ReceiptAction {
            tool: tool.to_owned(),
            args_hash: Some(args_hash.to_owned()),
            outcome: Some(done.outcome.to_owned()),
            status: done.status,
            error: done.error,
            limits: plan.map(bounds::applied_json).unwrap_or_default(),
            approved_once: plan.is_some_and(|p| p.operation.is_some()),
            effect: done.effect,
            beyond_limit: done.beyond_limit,
            extra: Default::default(),
        });
    }
}

/// The scope half of the gate's rule, without arguments: whether a call of
/// a tool needing `scope` may happen at all under this turn's delegation
/// (what an MCP `tools/list` reports per tool). `Ok(None)`: a public tool;
/// `Ok(Some(d))`: the delegation holds the scope (its limits may still
/// refuse particular arguments).
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

#[cfg(test)]
mod tests {
    //! The gate's scope rule as a table (PACT §5.5 scopes and step-up); the
    //! limits' rule is `domain::terms`' table, and the two together are
    //! tried end to end in tests/it.

    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn delegation(scopes: &[&str]) -> Delegation {
        Delegation {
            grant_id: GrantId::from(uuid::Uuid::nil()),
            user_sub: UserSub::from("u-1".to_owned()),
            scopes: set(scopes),
            authorization_details: None,
            terms: Arc::new(Terms::default()),
        }
    }

    #[test]
    fn the_scope_rule_answers_each_call_as_the_rules_say() {
        let offered = set(&["orders:read", "orders:cancel"]);
        let read_only = delegation(&["orders:read"]);
        let both = delegation(&["orders:read", "orders:cancel"]);
        let missing = |s: &str| Err(ToolError::MissingScope(s.to_owned()));
        type Case<'a> = (
            &'a str,
            Option<&'a Delegation>,
            Option<&'a str>,
            Result<bool, ToolError>,
        );
        #[rustfmt::skip]
        let table: Vec<Case> = vec![
            // A public tool: anyone, even without a delegation.
            ("public tool, no token", None, None, Ok(false)),
            // A scope the brand does not offer is not a step-up: nobody can get it here.
            ("unoffered scope", Some(&both), Some("payments:refund"), Err(ToolError::Unavailable)),
            ("unoffered scope, no token", None, Some("payments:refund"), Err(ToolError::Unavailable)),
            // An offered scope not held: the step-up (PACT §5.5).
            ("no token", None, Some("orders:read"), missing("orders:read")),
            ("scope not held", Some(&read_only), Some("orders:cancel"), missing("orders:cancel")),
            ("scope held", Some(&read_only), Some("orders:read"), Ok(true)),
        ];
        for (name, d, scope, expected) in table {
            assert_eq!(
                scope_rule(&offered, d, scope).map(|d| d.is_some()),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn the_record_keeps_what_ran_and_what_was_refused_for_the_receipt() {
        let d = delegation(&["orders:read"]);
        let mut record = GateRecord::default();
        let rules = RulesNow::new();
        let call = |tool, scope| bounds::Call {
            tool,
            scope,
            args: &Value::Null,
            args_hash: "h",
            summary: "",
            description: "",
            rules: &rules,
        };
        record.refused(
            &call("cancel_order", Some("orders:cancel")),
            Some(&d),
            &ToolError::MissingScope("orders:cancel".to_owned()),
        );
        record.refused(
            &call("cancel_order", Some("orders:cancel")),
            Some(&d),
            &ToolError::MissingScope("orders:cancel".to_owned()),
        );
        // Refusals that no approval can fix are not a step-up.
        record.refused(
            &call("cancel_order", Some("orders:cancel")),
            Some(&d),
            &ToolError::NotPermitted("argument \"order_id\" is missing".to_owned()),
        );
        record.refused(
            &call("refund", Some("payments:refund")),
            Some(&d),
            &ToolError::Unavailable,
        );
        record.ran(
            "list_orders",
            Some("orders:read"),
            &pact_jose::args_hash(&json!({"limit": 3})),
            None,
            Done::ok(),
        );
        record.ran("store_hours", None, "h0", None, Done::ok());
        assert_eq!(record.missing, set(&["orders:cancel"]));
        assert_eq!(record.used_scopes, set(&["orders:read"]));
        let tools: Vec<&str> = record.actions.iter().map(|a| a.tool.as_str()).collect();
        assert_eq!(tools, ["list_orders", "store_hours"]);
        // The receipt names the arguments by hash, never by value (PACT §5.6).
        assert_eq!(
            record.actions[0].args_hash,
            Some(pact_jose::args_hash(&json!({"limit": 3})))
        );
        let reasons: Vec<&str> = record.refused.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "missing_scope",
                "missing_scope",
                "not_permitted",
                "unavailable"
            ]
        );
    }
}
