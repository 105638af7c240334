//! Bounded authority at the gate: the limits a person approved, applied to
//! a tool call before it runs (PACT §5.7), for the built-in tools and the
//! merchant's tools alike. `domain::terms` judges; this module loads the
//! grant's terms, charges consumed limits in the database, gives back what
//! a refused call was charged, and tells staff about a grant whose limits
//! cannot be judged.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use pact_db::brands::Brand;
use pact_db::ids::BrandId;
use pact_db::ids::GrantId;
use pact_db::merchant::BrandTool;
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::tools::{Delegation, Tool, ToolError, scope_rule};
use crate::domain::authz_details::DetailsTypes;
use crate::domain::terms::{self, Judgement, Plan, RulesNow, Terms, ToolTerms};

/// One call as the gate sees it.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    pub tool: &'a str,
    /// `None`: a public tool.
    pub scope: Option<&'a str>,
    pub args: &'a Value,
    pub args_hash: &'a str,
    /// The tool's `summary` template, and its description, for the person
    /// asked to approve this call on its own.
    pub summary: &'a str,
    pub description: &'a str,
    /// The brand's tools and their rules now.
    pub rules: &'a RulesNow,
}

/// The merchant's tools as limits see them: scope and rules by name.
pub fn merchant_rules(tools: &[BrandTool]) -> RulesNow {
    tools
        .iter()
        .filter_map(|t| {
            t.scope.as_ref().map(|scope| {
                (
                    t.name.clone(),
                    ToolTerms {
                        scope: scope.clone(),
                        enforce: crate::domain::tool_rules::texts(&t.enforce),
                    },
                )
            })
        })
        .collect()
}

/// Built-in tools as limits see them.
pub fn builtin_rules(tools: &[&dyn Tool]) -> RulesNow {
    tools
        .iter()
        .map(|t| {
            (
                t.name().to_owned(),
                ToolTerms {
                    scope: t.scope().to_owned(),
                    enforce: t.rules().iter().map(|r| (*r).to_owned()).collect(),
                },
            )
        })
        .collect()
}

/// Terms as recorded with a grant (`None`: a grant without details, its
/// scopes alone); terms that do not read refuse every limited call.
pub fn terms_of_recorded(recorded: Option<Value>) -> Arc<Terms> {
    Arc::new(match recorded {
        None => Terms::default(),
        Some(v) => Terms::from_json(&v).unwrap_or(Terms {
            v: 0,
            ..Terms::default()
        }),
    })
}

/// The grant's terms for a turn: as recorded; for a grant made before they
/// were recorded, its entries judged by the declarations of this moment
/// (recorded on the way, so every later turn reads the same). Terms that do
/// not read are kept as unreadable: every limited call then refuses.
pub async fn terms_of(
    conn: &mut PgConnection,
    grant_id: GrantId,
    recorded: Option<Value>,
    details: Option<&Value>,
    types: &DetailsTypes,
    rules: &RulesNow,
) -> Result<Arc<Terms>, pact_db::Error> {
    let unreadable = || Terms {
        v: 0,
        ..Terms::default()
    };
    if let Some(v) = recorded {
        return Ok(Arc::new(Terms::from_json(&v).unwrap_or_else(unreadable)));
    }
    if details.is_none_or(|d| d.as_array().is_none_or(Vec::is_empty)) {
        return Ok(Arc::new(Terms::default()));
    }
    // Entries of these older kinds consume nothing: no budget rows to make.
    let (made, _) = terms::for_older_grant(details, types, rules, Uuid::new_v4);
    let stored = pact_db::grants::record_terms(&mut *conn, grant_id, &made.to_json()).await?;
    Ok(Arc::new(
        stored
            .as_ref()
            .and_then(Terms::from_json)
            .unwrap_or_else(unreadable),
    ))
}

/// The gate's rule for one call, checked against the real arguments before
/// anything runs (PACT §5.5, §5.7):
///
/// * `scope` `None` is a public tool: anyone may call it;
/// * a scope the brand does not offer: [`ToolError::Unavailable`];
/// * a scope the turn's delegation does not hold (or no delegation):
///   [`ToolError::MissingScope`], the step-up;
/// * outside the grant's limits: [`ToolError::Beyond`] (the person is
///   asked), [`ToolError::NotPermitted`] (a bad argument) or
///   [`ToolError::Unenforceable`] (fail closed; staff are told when the
///   refusal is recorded, [`report_unenforceable`]);
/// * within them, and consuming: [`Judged::Charge`], for [`charge`].
pub fn judge_call(
    offered: &std::collections::BTreeSet<String>,
    delegation: Option<&Delegation>,
    call: &Call<'_>,
) -> Result<Judged, ToolError> {
    if let Some(d) = delegation
        && let Some(b) = terms::moved_from_limits(&d.terms, call.tool, call.scope)
    {
        // Asked once and allowed: the operation rules the call (below).
        let allowed_once = call.scope.is_some_and(|scope| {
            d.terms
                .operations
                .iter()
                .any(|o| o.tool == call.tool && o.scope == scope && o.args_hash == call.args_hash)
        });
        if !allowed_once {
            tracing::info!(tool = call.tool, grant = %d.grant_id, "a tool approved with limits was moved to another scope since");
            return Err(match call.scope {
                Some(_) => ToolError::Beyond(Box::new(b)),
                // Public now: nothing the person could allow; staff are told.
                None => ToolError::Unenforceable(format!(
                    "{} was approved with limits of {} and is public now",
                    call.tool, b.type_name
                )),
            });
        }
    }
    let Some(delegation) = scope_rule(offered, delegation, call.scope)? else {
        return Ok(Judged::Free(None));
    };
    let Some(scope) = call.scope else {
        return Ok(Judged::Free(None));
    };
    match terms::judge(
        &delegation.terms,
        call.rules,
        call.tool,
        scope,
        call.args,
        call.args_hash,
    ) {
        Judgement::Unlimited => Ok(Judged::Free(None)),
        Judgement::Plans {
            mut plans,
            exhausted,
        } => {
            if plans.first().is_some_and(|p| p.charges.is_empty()) {
                return Ok(Judged::Free(Some(plans.swap_remove(0))));
            }
            Ok(Judged::Charge {
                plans,
                exhausted: Box::new(exhausted),
            })
        }
        Judgement::Beyond(b) => {
            tracing::info!(tool = call.tool, grant = %delegation.grant_id, field = %b.field, "tool call beyond a limit");
            Err(ToolError::Beyond(Box::new(b)))
        }
        Judgement::NotPermitted(why) => {
            tracing::info!(tool = call.tool, grant = %delegation.grant_id, "tool call refused by authorization_details");
            Err(ToolError::NotPermitted(why))
        }
        Judgement::Unenforceable(why) => {
            tracing::warn!(tool = call.tool, grant = %delegation.grant_id, why = %why, "a grant's limits cannot be evaluated; the call is refused");
            Err(ToolError::Unenforceable(why))
        }
    }
}

/// What the rule allows: a call that consumes nothing (with the limits it is
/// under, if any), or one that must first be charged.
#[derive(Debug)]
pub enum Judged {
    Free(Option<Plan>),
    Charge {
        plans: Vec<Plan>,
        exhausted: Box<terms::Beyond>,
    },
}

/// Charges the first plan whose budgets have enough left, all of it or
/// nothing ("20 parallel calls against a count of 1 forward exactly one");
/// none left: beyond the limit.
pub async fn charge(
    conn: &mut PgConnection,
    plans: Vec<Plan>,
    exhausted: Box<terms::Beyond>,
) -> Result<Plan, ToolError> {
    for plan in plans {
        if plan.charges.is_empty() {
            return Ok(plan);
        }
        let ids: Vec<Uuid> = plan.charges.iter().map(|c| c.budget).collect();
        let amounts: Vec<i64> = plan.charges.iter().map(|c| c.amount).collect();
        let charged = pact_db::budgets::charge(&mut *conn, &ids, &amounts)
            .await
            .map_err(db_error)?;
        if charged {
            return Ok(plan);
        }
    }
    tracing::info!(field = %exhausted.field, "tool call beyond a limit: used up");
    Err(ToolError::Beyond(exhausted))
}

/// [`judge_call`] then [`charge`] on one connection (the built-in tools').
pub async fn admit(
    conn: &mut PgConnection,
    brand: &Brand,
    offered: &std::collections::BTreeSet<String>,
    delegation: Option<&Delegation>,
    call: &Call<'_>,
) -> Result<Option<Plan>, ToolError> {
    let judged = match judge_call(offered, delegation, call) {
        Ok(j) => j,
        Err(ToolError::Unenforceable(why)) => {
            if let Some(d) = delegation {
                report_unenforceable(conn, &brand.id, d.grant_id, call.tool, &why).await;
            }
            return Err(ToolError::Unenforceable(why));
        }
        Err(e) => return Err(e),
    };
    match judged {
        Judged::Free(plan) => Ok(plan),
        Judged::Charge { plans, exhausted } => charge(conn, plans, exhausted).await.map(Some),
    }
}

/// Gives back what a plan charged: the call did not happen (refused by the
/// merchant, or it failed before it was sent). Logged, never fatal: the
/// worst case is a limit that counts a call that did not happen.
pub async fn release(conn: &mut PgConnection, plan: &Plan) {
    if plan.charges.is_empty() {
        return;
    }
    let ids: Vec<Uuid> = plan.charges.iter().map(|c| c.budget).collect();
    let amounts: Vec<i64> = plan.charges.iter().map(|c| c.amount).collect();
    if let Err(e) = pact_db::budgets::release(&mut *conn, &ids, &amounts).await {
        tracing::warn!(error = %e, "could not give back what a refused call was charged");
    }
}

/// A declared effect against the plan: corrects cumulative budgets by what
/// really moved and says whether the effect went beyond a limit.
pub async fn settle_effect(
    conn: &mut PgConnection,
    plan: Option<&Plan>,
    effect: crate::domain::money::Amount,
) -> bool {
    let Some(plan) = plan else {
        return false;
    };
    let check = terms::check_effect(plan, effect);
    let mut beyond = check.beyond;
    if !check.corrections.is_empty() {
        let ids: Vec<Uuid> = check.corrections.iter().map(|c| c.budget).collect();
        let deltas: Vec<i64> = check.corrections.iter().map(|c| c.amount).collect();
        match pact_db::budgets::correct(&mut *conn, &ids, &deltas).await {
            Ok(over) => beyond |= !over.is_empty(),
            Err(e) => tracing::warn!(error = %e, "could not correct a budget by a declared effect"),
        }
    }
    beyond
}

/// The limits a call was allowed under, as the signed tool call and the
/// receipt carry them: `{type, field, kind, limit}`.
pub fn applied_json(plan: &Plan) -> Vec<Value> {
    let mut out: Vec<Value> = plan
        .applied
        .iter()
        .map(|a| {
            json!({
                "type": a.type_name,
                "field": a.field,
                "kind": a.kind.name(),
                "limit": a.limit.to_json(),
            })
        })
        .collect();
    out.dedup();
    if let Some(amounts) = &plan.operation {
        out.push(json!({
            "kind": "operation",
            "amounts": amounts.iter().map(|a| a.to_json()).collect::<Vec<_>>(),
        }));
    }
    out
}

fn db_error(e: pact_db::Error) -> ToolError {
    match pact_db::classify(&e) {
        pact_db::Failure::Unavailable => ToolError::DatabaseUnavailable,
        _ => ToolError::Failed(e.to_string()),
    }
}

/// Grants and tools already reported by this node: one audit entry per
/// pair is enough for staff, and a looping agent cannot flood the log.
static REPORTED: Mutex<Option<HashSet<(GrantId, String)>>> = Mutex::new(None);
const MAX_REPORTED: usize = 10_000;

fn first_report(grant: GrantId, tool: &str) -> bool {
    let mut guard = REPORTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let seen = guard.get_or_insert_with(HashSet::new);
    if seen.len() >= MAX_REPORTED {
        seen.clear();
    }
    seen.insert((grant, tool.to_owned()))
}

/// A grant whose limits cannot be judged is refused (fail closed) and staff
/// are told: an audit entry (the console's grant page shows it) and a
/// warning in the log.
pub async fn report_unenforceable(
    conn: &mut PgConnection,
    brand_id: &BrandId,
    grant: GrantId,
    tool: &str,
    why: &str,
) {
    if !first_report(grant, tool) {
        return;
    }
    let target = grant.to_string();
    let entry = pact_db::audit::NewEntry {
        actor_kind: "system",
        actor: "pactd",
        action: "grant.unenforceable",
        target: Some(&target),
        brand_id: Some(brand_id),
        detail: json!({"tool": tool, "why": why}),
        client_addr: None,
    };
    if let Err(e) = pact_db::audit::record(&mut *conn, &entry).await {
        tracing::warn!(error = %e, "could not record an unenforceable grant in the audit log");
    }
}
