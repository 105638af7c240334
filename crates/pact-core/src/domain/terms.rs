//! What a grant was approved under, kept with the grant (`grants.terms`),
//! and the one judgement of a tool call against it (PACT §5.7: details are
//! enforced "against the real resource and arguments before the operation
//! runs"; RFC 9396 §7: the AS never grants more than the person approved).
//!
//! At approval the grant takes a copy of each granted entry's type as then
//! declared, the tools of the scopes those types refine with their rules,
//! and a budget row for every `count` and `cumulative_amount` value. Later
//! edits to the brand's declarations therefore never widen an existing
//! grant. Rules a tool has *now* are added to the ones it had then: a rule
//! only ever narrows, so a grant also follows a rule added after it.
//!
//! A call of tool T (scope S) under a grant:
//!
//! 1. no entry refines S: the scope alone decides;
//! 2. T was not a tool of S when the person approved: the grant says
//!    nothing about it, so the person is asked (step-up);
//! 3. entries of one type combine by union (any one may allow the call),
//!    types by intersection (every type with an entry refining S must);
//! 4. in an entry, each field with a value limits T through T's rules that
//!    reach it; a field no tool of S reaches at all cannot be enforced and
//!    refuses every call of S (fail closed) — except a `count`, which then
//!    counts every call of S;
//! 5. an argument outside a limit, or a budget used up, makes the call
//!    *beyond* the grant: not forwarded, and the person is asked about this
//!    one operation; a missing or malformed argument is refused outright;
//! 6. an operation the person approved once (step-up, bound to the call's
//!    `argsHash`) allows exactly that call, once.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::authz_details::{DetailsType, DetailsTypes};
use super::limits::{self, Admits, FieldKind, Limit};
use super::money::Amount;
use super::tool_rules::{self, ToolRule};

/// The format of [`Terms`]; a grant holding another is refused (fail closed).
pub const VERSION: u32 = 1;

/// The pseudo-type of a one-off approval, shown in a step-up task's
/// `pact.missingAuthorizationDetails`.
pub const OPERATION_TYPE: &str = "pactd.operation";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Terms {
    pub v: u32,
    #[serde(default)]
    pub entries: Vec<TermsEntry>,
    /// The tools of the refined scopes when the person approved, with their
    /// rules as written then.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolTerms>,
    /// Operations the person approved one by one (step-up beyond a limit).
    #[serde(default)]
    pub operations: Vec<Operation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTerms {
    pub scope: String,
    #[serde(default)]
    pub enforce: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TermsEntry {
    #[serde(rename = "type")]
    pub type_name: String,
    /// The type as declared at approval; `None`: it was no longer declared
    /// when this record was made (an older grant), so it cannot be judged.
    pub declared: Option<DetailsType>,
    /// The entry's values as granted (without `type`).
    pub values: Map<String, Value>,
    /// The budget row of each consumed field.
    #[serde(default)]
    pub budgets: BTreeMap<String, Uuid>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    pub tool: String,
    pub scope: String,
    #[serde(rename = "argsHash")]
    pub args_hash: String,
    /// One use, charged like a count.
    pub budget: Uuid,
    /// The amounts the approved call carried, for its declared effect.
    #[serde(default)]
    pub amounts: Vec<Value>,
}

/// A budget a new grant needs: its id, what it starts with, its currency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewBudget {
    pub id: Uuid,
    pub cap: i64,
    pub currency: Option<&'static str>,
}

impl Default for Terms {
    /// The terms of a grant without `authorization_details`: its scopes alone.
    fn default() -> Self {
        Self {
            v: VERSION,
            entries: Vec::new(),
            tools: BTreeMap::new(),
            operations: Vec::new(),
        }
    }
}

impl Terms {
    pub fn from_json(v: &Value) -> Option<Self> {
        serde_json::from_value(v.clone()).ok()
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The record of a new approval: each granted entry with its type as
    /// declared now, the tools of the scopes they refine, and a new budget
    /// for each consumed value. `entries` are validated (`authz_details::
    /// validate`) and possibly narrowed by the person.
    pub fn approve(
        entries: &[Value],
        types: &DetailsTypes,
        tools: &BTreeMap<String, ToolTerms>,
        mut new_id: impl FnMut() -> Uuid,
    ) -> (Self, Vec<NewBudget>) {
        let mut budgets = Vec::new();
        let mut out = Vec::with_capacity(entries.len());
        for entry in entries {
            let Some(obj) = entry.as_object() else {
                continue;
            };
            let type_name = obj
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let declared = types.get(&type_name).cloned();
            let mut values = obj.clone();
            values.remove("type");
            let mut entry_budgets = BTreeMap::new();
            if let Some(t) = &declared {
                for (field, spec) in &t.fields {
                    let Some(v) = values.get(field) else { continue };
                    if let Some((cap, currency)) =
                        limits::parse(spec.kind, &spec.values, v).and_then(|l| l.budget())
                    {
                        let id = new_id();
                        budgets.push(NewBudget { id, cap, currency });
                        entry_budgets.insert(field.clone(), id);
                    }
                }
            }
            out.push(TermsEntry {
                type_name,
                declared,
                values,
                budgets: entry_budgets,
            });
        }
        let scopes: Vec<&str> = out
            .iter()
            .filter_map(|e| e.declared.as_ref().map(|d| d.scope.as_str()))
            .collect();
        let tools = tools
            .iter()
            .filter(|(_, t)| scopes.contains(&t.scope.as_str()))
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect();
        (
            Self {
                v: VERSION,
                entries: out,
                tools,
                operations: Vec::new(),
            },
            budgets,
        )
    }

    /// A step-up's grant carries what was allowed before (PACT §5.5): the
    /// earlier grants' entries with their *same* budgets (a limit used up
    /// stays used up), their tools and their operations, after its own.
    pub fn with_previous<'a>(mut self, previous: impl IntoIterator<Item = &'a Terms>) -> Self {
        for p in previous {
            for e in &p.entries {
                let seen = self.entries.iter().any(|x| {
                    x.type_name == e.type_name
                        && x.values == e.values
                        && x.budgets == e.budgets
                        && x.declared == e.declared
                });
                if !seen {
                    self.entries.push(e.clone());
                }
            }
            for (name, t) in &p.tools {
                self.tools.entry(name.clone()).or_insert_with(|| t.clone());
            }
            for o in &p.operations {
                if !self.operations.iter().any(|x| x.budget == o.budget) {
                    self.operations.push(o.clone());
                }
            }
        }
        self
    }

    /// Whether anything here limits calls: a grant without entries or
    /// operations is limited by its scopes alone.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.operations.is_empty()
    }

    /// Every budget this grant charges.
    pub fn budget_ids(&self) -> Vec<Uuid> {
        let mut ids: Vec<Uuid> = self
            .entries
            .iter()
            .flat_map(|e| e.budgets.values().copied())
            .chain(self.operations.iter().map(|o| o.budget))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// The record an older grant gets when it is first read under this
/// version: its entries judged by the types and tools declared now; an
/// entry whose type is gone is kept without a declaration, and refuses.
pub fn for_older_grant(
    details: Option<&Value>,
    types: &DetailsTypes,
    tools: &BTreeMap<String, ToolTerms>,
    new_id: impl FnMut() -> Uuid,
) -> (Terms, Vec<NewBudget>) {
    let entries = details
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Terms::approve(&entries, types, tools, new_id)
}

// ------------------------------------------------------------ judgement

/// One limit as it applies to a call, for the signed tool call, the
/// receipt and the effect check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub type_name: String,
    pub field: String,
    pub kind: FieldKind,
    pub limit: Limit,
    /// The call's argument it was checked against (amount kinds: for the
    /// declared effect).
    pub arg: Option<Value>,
    pub budget: Option<Uuid>,
}

/// What to charge before the call is forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charge {
    pub budget: Uuid,
    pub amount: i64,
}

/// One way the call may be allowed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Plan {
    pub charges: Vec<Charge>,
    pub applied: Vec<Applied>,
    /// Allowed by a one-off approval (its amounts, for the effect check).
    pub operation: Option<Vec<Amount>>,
}

/// Which limit a call went beyond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beyond {
    pub type_name: String,
    pub field: String,
    pub kind: Option<FieldKind>,
    pub limit: Option<Limit>,
    /// The field's label in the brand's words.
    pub label: String,
    pub why: BeyondWhy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeyondWhy {
    /// An argument outside the limit.
    Value,
    /// The limit's budget is used up (or would be by this call).
    Exhausted,
    /// The tool was not one the person approved the limits for.
    NotCovered,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// No entry refines the tool's scope: the scope alone rules.
    Unlimited,
    /// Allowed by the first plan whose charges fit; when none fits, beyond
    /// for `exhausted`.
    Plans { plans: Vec<Plan>, exhausted: Beyond },
    /// Outside what was granted: ask the person.
    Beyond(Beyond),
    /// A missing or malformed argument: refused, nothing to ask.
    NotPermitted(String),
    /// The grant holds a limit that cannot be judged: refused, staff told.
    Unenforceable(String),
}

/// A tool the person approved limits for under one scope, now mapped to
/// another (or made public): its calls are judged by no entry of the new
/// scope, so the limits would lapse with a staff edit. They are not the
/// person's to lose that way (PACT §5.7): such a call is beyond what was
/// granted, and the person is asked. `None` when the tool stays where it was
/// recorded, or was recorded under a scope this grant does not limit.
pub fn moved_from_limits(terms: &Terms, tool: &str, scope: Option<&str>) -> Option<Beyond> {
    let then = terms.tools.get(tool)?;
    if Some(then.scope.as_str()) == scope {
        return None;
    }
    let entry = terms
        .entries
        .iter()
        .find(|e| e.declared.as_ref().is_some_and(|d| d.scope == then.scope))?;
    Some(Beyond {
        type_name: entry.type_name.clone(),
        field: String::new(),
        kind: None,
        limit: None,
        label: String::new(),
        why: BeyondWhy::NotCovered,
    })
}

/// The tools' rules as they are now, by tool name.
pub type RulesNow = BTreeMap<String, ToolTerms>;

/// Plans per type are combined; more than this many alternatives are not
/// tried (entries of one type beyond the first few are rare).
const MAX_PLANS: usize = 8;

/// Judges one call of `tool` (needing `scope`) with `args` (whose hash is
/// `args_hash`) under `terms`; `now_rules` are the brand's tools now.
pub fn judge(
    terms: &Terms,
    now_rules: &RulesNow,
    tool: &str,
    scope: &str,
    args: &Value,
    args_hash: &str,
) -> Judgement {
    if terms.v != VERSION {
        return Judgement::Unenforceable(format!("terms of version {}", terms.v));
    }
    let ops: Vec<Plan> = terms
        .operations
        .iter()
        .filter(|o| o.tool == tool && o.scope == scope && o.args_hash == args_hash)
        .map(|o| Plan {
            charges: vec![Charge {
                budget: o.budget,
                amount: 1,
            }],
            applied: Vec::new(),
            operation: Some(o.amounts.iter().filter_map(Amount::from_json).collect()),
        })
        .collect();
    let regular = judge_entries(terms, now_rules, tool, scope, args);
    match regular {
        Judgement::Beyond(b) if !ops.is_empty() => Judgement::Plans {
            plans: ops,
            exhausted: b,
        },
        Judgement::Plans {
            mut plans,
            exhausted,
        } => {
            // The person's own approval of this very call comes after the
            // standing limits: it is used only when they do not allow it.
            plans.extend(ops);
            Judgement::Plans { plans, exhausted }
        }
        other => other,
    }
}

fn judge_entries(
    terms: &Terms,
    now_rules: &RulesNow,
    tool: &str,
    scope: &str,
    args: &Value,
) -> Judgement {
    // An entry whose type is unknown may refine any scope: fail closed.
    if let Some(e) = terms.entries.iter().find(|e| e.declared.is_none()) {
        return Judgement::Unenforceable(format!(
            "the grant holds an entry of type {:?}, which was not declared when it was recorded",
            e.type_name
        ));
    }
    let entries: Vec<(&TermsEntry, &DetailsType)> = terms
        .entries
        .iter()
        .filter_map(|e| e.declared.as_ref().map(|d| (e, d)))
        .filter(|(_, d)| d.scope == scope)
        .collect();
    let Some((first, _)) = entries.first() else {
        return Judgement::Unlimited;
    };
    let not_covered = || {
        Judgement::Beyond(Beyond {
            type_name: first.type_name.clone(),
            field: String::new(),
            kind: None,
            limit: None,
            label: String::new(),
            why: BeyondWhy::NotCovered,
        })
    };
    let then = terms.tools.get(tool).filter(|t| t.scope == scope);
    let now = now_rules.get(tool).filter(|t| t.scope == scope);
    // The tool's rules then and now; and every rule of the scope, to tell a
    // field no tool enforces.
    let mut texts: Vec<String> = Vec::new();
    for t in [then, now].into_iter().flatten() {
        texts.extend(t.enforce.iter().cloned());
    }
    texts.sort();
    texts.dedup();
    let rules = match tool_rules::parse_all(&texts) {
        Ok(r) => r,
        Err(e) => return Judgement::Unenforceable(e),
    };
    // A tool the person did not approve the limits for is judged only when
    // its rules reach every limit they set (a count aside, which counts any
    // call): then it cannot go past one. Otherwise they are asked.
    if then.is_none() {
        if now.is_none() {
            return not_covered();
        }
        let reaches_all = entries.iter().all(|(e, d)| {
            d.fields.iter().all(|(field, spec)| {
                !e.values.contains_key(field)
                    || spec.kind == FieldKind::Count
                    || rules.iter().any(|r| r.reaches(&e.type_name, d, field))
            })
        });
        if !reaches_all {
            return not_covered();
        }
    }
    // Where else the scope's limits are enforced, as the person approved
    // them: only the tools recorded then. A tool or a rule added since must
    // not make a field "enforced elsewhere" and so unchecked on the tools
    // that were checked (a rule only ever narrows, PACT §5.7); and a tool
    // not recorded then skips nothing (its own rules place what it charges).
    let mut scope_texts: Vec<String> = Vec::new();
    if then.is_some() {
        for t in terms.tools.values() {
            if t.scope == scope {
                scope_texts.extend(t.enforce.iter().cloned());
            }
        }
    }
    let scope_rules = match tool_rules::parse_all(&scope_texts) {
        Ok(r) => r,
        Err(e) => return Judgement::Unenforceable(e),
    };

    // Types in order of first appearance; each needs one entry that allows.
    let mut type_order: Vec<&str> = Vec::new();
    for (e, _) in &entries {
        if !type_order.contains(&e.type_name.as_str()) {
            type_order.push(&e.type_name);
        }
    }
    let mut per_type: Vec<Vec<Plan>> = Vec::new();
    let mut exhausted: Option<Beyond> = None;
    for type_name in type_order {
        let mut candidates = Vec::new();
        let mut first_beyond: Option<Beyond> = None;
        for (e, d) in entries.iter().filter(|(e, _)| e.type_name == type_name) {
            match judge_entry(e, d, &rules, &scope_rules, args) {
                EntryVerdict::Allows(plan) => candidates.push(plan),
                EntryVerdict::Beyond(b) => {
                    first_beyond.get_or_insert(b);
                }
                EntryVerdict::Malformed(why) => return Judgement::NotPermitted(why),
                EntryVerdict::Unenforceable(why) => return Judgement::Unenforceable(why),
            }
        }
        if candidates.is_empty() {
            return Judgement::Beyond(first_beyond.unwrap_or_else(|| Beyond {
                type_name: type_name.to_owned(),
                field: String::new(),
                kind: None,
                limit: None,
                label: String::new(),
                why: BeyondWhy::Value,
            }));
        }
        // Should every candidate's budget be used up, this is what to say.
        if exhausted.is_none()
            && let Some(a) = candidates
                .iter()
                .flat_map(|p| p.applied.iter())
                .find(|a| a.budget.is_some())
        {
            let label = entries
                .iter()
                .find(|(e, _)| e.type_name == a.type_name)
                .and_then(|(_, d)| d.fields.get(&a.field))
                .map(|s| s.label.clone())
                .unwrap_or_default();
            exhausted = Some(Beyond {
                type_name: a.type_name.clone(),
                field: a.field.clone(),
                kind: Some(a.kind),
                limit: Some(a.limit.clone()),
                label,
                why: BeyondWhy::Exhausted,
            });
        }
        per_type.push(candidates);
    }
    // Every combination of one candidate per type, in order, bounded.
    let mut plans = vec![Plan::default()];
    for candidates in per_type {
        let mut next = Vec::new();
        'outer: for p in &plans {
            for c in &candidates {
                let mut merged = p.clone();
                merged.charges.extend(c.charges.iter().copied());
                merged.applied.extend(c.applied.iter().cloned());
                next.push(merged);
                if next.len() >= MAX_PLANS {
                    break 'outer;
                }
            }
        }
        plans = next;
    }
    Judgement::Plans {
        plans,
        exhausted: exhausted.unwrap_or(Beyond {
            type_name: first.type_name.clone(),
            field: String::new(),
            kind: None,
            limit: None,
            label: String::new(),
            why: BeyondWhy::Exhausted,
        }),
    }
}

enum EntryVerdict {
    Allows(Plan),
    Beyond(Beyond),
    Malformed(String),
    Unenforceable(String),
}

fn judge_entry(
    e: &TermsEntry,
    d: &DetailsType,
    rules: &[ToolRule],
    scope_rules: &[ToolRule],
    args: &Value,
) -> EntryVerdict {
    let mut plan = Plan::default();
    for (field, spec) in &d.fields {
        let Some(value) = e.values.get(field) else {
            continue; // not set: this entry does not limit it
        };
        let Some(limit) = limits::parse(spec.kind, &spec.values, value) else {
            return EntryVerdict::Unenforceable(format!(
                "the granted value of {}.{field} does not read as a {} limit",
                e.type_name,
                spec.kind.name()
            ));
        };
        let applied = |arg: Option<&Value>, budget: Option<Uuid>| Applied {
            type_name: e.type_name.clone(),
            field: field.clone(),
            kind: spec.kind,
            limit: limit.clone(),
            arg: arg.cloned(),
            budget,
        };
        let beyond = |why| Beyond {
            type_name: e.type_name.clone(),
            field: field.clone(),
            kind: Some(spec.kind),
            limit: Some(limit.clone()),
            label: spec.label.clone(),
            why,
        };
        let mut here: Vec<&ToolRule> = rules
            .iter()
            .filter(|r| r.reaches(&e.type_name, d, field))
            .collect();
        // One argument is checked (and charged) once, however many rules
        // name it: `budget=fee` recorded then and `booking_change.budget=fee`
        // written now are one rule, not a double charge.
        here.sort_by(|a, b| a.arg.cmp(&b.arg));
        here.dedup_by(|a, b| a.arg == b.arg);
        let anywhere = scope_rules
            .iter()
            .any(|r| r.reaches(&e.type_name, d, field));
        let budget = e.budgets.get(field).copied();
        if spec.kind == FieldKind::Count {
            // Counted once per call: where a rule places it on this tool, or,
            // when no tool of the scope has a rule for it, on every call.
            if here.is_empty() && anywhere {
                continue;
            }
            let Some(budget) = budget else {
                return EntryVerdict::Unenforceable(format!(
                    "{}.{field} has no budget",
                    e.type_name
                ));
            };
            plan.charges.push(Charge { budget, amount: 1 });
            plan.applied.push(applied(None, Some(budget)));
            continue;
        }
        if here.is_empty() {
            if anywhere {
                continue; // enforced on other tools of the scope, not this one
            }
            return EntryVerdict::Unenforceable(format!(
                "{}.{field} is enforced by no tool of scope {:?}",
                e.type_name, d.scope
            ));
        }
        for rule in here {
            let Some(arg_name) = &rule.arg else {
                return EntryVerdict::Unenforceable(format!(
                    "the rule for {}.{field} names no argument",
                    e.type_name
                ));
            };
            let Some(arg) = args.get(arg_name) else {
                return EntryVerdict::Malformed(format!("argument {arg_name:?} is missing"));
            };
            // A second member that differs from the limited one only in case
            // ("ORDER_ID" beside "order_id") is checked by nothing here, yet a
            // merchant that matches names without regard to case may act on
            // it: such arguments are refused, not forwarded.
            if let Some(twin) = case_twin(args, arg_name) {
                return EntryVerdict::Malformed(format!(
                    "argument {twin:?} differs from the limited {arg_name:?} only in case"
                ));
            }
            match limit.admits(arg) {
                Admits::Yes => plan.applied.push(applied(Some(arg), None)),
                Admits::Charge(n) => {
                    // More than the whole budget is beyond whatever is left.
                    if limit.budget().is_some_and(|(cap, _)| n > cap) {
                        return EntryVerdict::Beyond(beyond(BeyondWhy::Value));
                    }
                    let Some(budget) = budget else {
                        return EntryVerdict::Unenforceable(format!(
                            "{}.{field} has no budget",
                            e.type_name
                        ));
                    };
                    match plan.charges.iter_mut().find(|c| c.budget == budget) {
                        Some(c) => c.amount += n,
                        None => plan.charges.push(Charge { budget, amount: n }),
                    }
                    plan.applied.push(applied(Some(arg), Some(budget)));
                }
                Admits::Beyond => return EntryVerdict::Beyond(beyond(BeyondWhy::Value)),
                Admits::Malformed => {
                    return EntryVerdict::Malformed(format!(
                        "argument {arg_name:?} is not a {} value",
                        spec.kind.name()
                    ));
                }
            }
        }
    }
    EntryVerdict::Allows(plan)
}

/// The amounts a call carries in arguments that amount limits look at, for
/// a one-off approval of it (its declared effect is held to them).
pub fn call_amounts(
    terms: &Terms,
    now_rules: &RulesNow,
    tool: &str,
    scope: &str,
    args: &Value,
) -> Vec<Amount> {
    let mut texts: Vec<String> = Vec::new();
    for t in [terms.tools.get(tool), now_rules.get(tool)]
        .into_iter()
        .flatten()
        .filter(|t| t.scope == scope)
    {
        texts.extend(t.enforce.iter().cloned());
    }
    let rules = tool_rules::parse_all(&texts).unwrap_or_default();
    let mut out = Vec::new();
    for e in &terms.entries {
        let Some(d) = e.declared.as_ref().filter(|d| d.scope == scope) else {
            continue;
        };
        for (field, spec) in &d.fields {
            if !matches!(spec.kind, FieldKind::Amount | FieldKind::CumulativeAmount) {
                continue;
            }
            for r in rules.iter().filter(|r| r.reaches(&e.type_name, d, field)) {
                if let Some(a) = r
                    .arg
                    .as_ref()
                    .and_then(|n| args.get(n))
                    .and_then(Amount::from_json)
                    && !out.contains(&a)
                {
                    out.push(a);
                }
            }
        }
    }
    out
}

// ------------------------------------------------------------ effects

/// What the merchant declared a call did: `pactEffect` in its answer
/// (docs/merchant-agent.md), today the amount it charged.
pub fn effect_amount(answer: &Value) -> Option<Result<Amount, ()>> {
    let effect = answer.get("pactEffect")?;
    Some(effect.get("amount").and_then(Amount::from_json).ok_or(()))
}

/// The declared effect against the limits the call was allowed under:
/// `beyond` when it exceeds an amount limit or the approved call's own
/// amount, and how much to correct each cumulative budget by (what was
/// charged was the requested amount; the truth is the effect).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectCheck {
    pub beyond: bool,
    pub corrections: Vec<Charge>,
}

pub fn check_effect(plan: &Plan, effect: Amount) -> EffectCheck {
    let mut out = EffectCheck::default();
    if let Some(approved) = &plan.operation {
        let ok = approved
            .iter()
            .any(|a| a.same_currency(effect) && effect.minor <= a.minor);
        out.beyond |= !ok;
    }
    for a in &plan.applied {
        match (&a.limit, a.budget) {
            (Limit::AtMost(max), _) => {
                out.beyond |= !(max.same_currency(effect) && effect.minor <= max.minor);
            }
            (Limit::Total(total), Some(budget)) => {
                if !total.same_currency(effect) {
                    out.beyond = true;
                    continue;
                }
                let charged = a
                    .arg
                    .as_ref()
                    .and_then(Amount::from_json)
                    .map_or(0, |x| x.minor);
                if effect.minor != charged {
                    out.corrections.push(Charge {
                        budget,
                        amount: effect.minor - charged,
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Another member of `args` whose name equals `name` but for case.
fn case_twin<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    let folded = name.to_lowercase();
    args.as_object()?
        .keys()
        .map(String::as_str)
        .find(|k| *k != name && k.to_lowercase() == folded)
}

#[cfg(test)]
#[path = "terms_tests.rs"]
mod tests;
