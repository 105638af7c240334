//! The judgement of tool calls against a grant's terms, as tables: each row
//! is a call and what the gate must answer.

use serde_json::json;

use super::*;

fn types() -> DetailsTypes {
    serde_json::from_value(json!({
        "booking_change": {
            "scope": "bookings:change",
            "description": "Move booking {booking_ids} between {dates}, extra charge at most {max_fee}",
            "fields": {
                "booking_ids": {"type": "string_array", "required": true},
                "dates": {"type": "date_window"},
                "max_fee": {"type": "amount", "label": "extra charge"},
                "moves": {"type": "count", "label": "moves"},
                "budget": {"type": "cumulative_amount"},
                "fare": {"type": "enum", "values": ["economy", "flex"]}
            }
        },
        "order_cancellation": {
            "scope": "orders:cancel",
            "fields": {"order_ids": {"type": "string_array", "required": true},
                       "max_cancellations": {"type": "count"}}
        }
    }))
    .unwrap()
}

fn tools() -> RulesNow {
    let t = |scope: &str, rules: &[&str]| ToolTerms {
        scope: scope.into(),
        enforce: rules.iter().map(|r| (*r).to_owned()).collect(),
    };
    [
        (
            "rebook",
            t(
                "bookings:change",
                &[
                    "booking_ids=booking_id",
                    "dates=new_date",
                    "max_fee=fee",
                    "moves",
                    "budget=fee",
                    "fare=fare",
                ],
            ),
        ),
        ("quote", t("bookings:change", &["booking_ids=booking_id"])),
        ("cancel_order", t("orders:cancel", &["order_ids=order_id"])),
        ("list_orders", t("orders:read", &[])),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_owned(), t))
    .collect()
}

fn ids() -> impl FnMut() -> Uuid {
    let mut n = 0u128;
    move || {
        n += 1;
        Uuid::from_u128(n)
    }
}

fn approved(entries: Value) -> (Terms, Vec<NewBudget>) {
    Terms::approve(entries.as_array().unwrap(), &types(), &tools(), ids())
}

fn eur(a: &str) -> Value {
    json!({"currency": "EUR", "amount": a})
}

fn call(terms: &Terms, now: &RulesNow, tool: &str, scope: &str, args: Value) -> Judgement {
    let hash = pact_jose::args_hash(&args);
    judge(terms, now, tool, scope, &args, &hash)
}

fn kind(j: &Judgement) -> &'static str {
    match j {
        Judgement::Unlimited => "unlimited",
        Judgement::Plans { plans, .. } if plans.iter().all(|p| p.charges.is_empty()) => "allowed",
        Judgement::Plans { .. } => "charged",
        Judgement::Beyond(b) if b.why == BeyondWhy::NotCovered => "not covered",
        Judgement::Beyond(_) => "beyond",
        Judgement::NotPermitted(_) => "not permitted",
        Judgement::Unenforceable(_) => "unenforceable",
    }
}

#[test]
fn approval_records_types_tools_and_one_budget_per_consumed_value() {
    let (terms, budgets) = approved(json!([{
        "type": "booking_change", "booking_ids": ["K7PQ2M"], "max_fee": eur("0.00"),
        "moves": 1, "budget": eur("50.00")
    }]));
    assert_eq!(terms.entries.len(), 1);
    assert_eq!(
        terms.entries[0].declared,
        types().get("booking_change").cloned()
    );
    // Only the tools of the refined scope are kept.
    assert_eq!(terms.tools.keys().collect::<Vec<_>>(), ["quote", "rebook"]);
    assert_eq!(
        budgets,
        vec![
            NewBudget {
                id: Uuid::from_u128(1),
                cap: 5000,
                currency: Some("EUR")
            },
            NewBudget {
                id: Uuid::from_u128(2),
                cap: 1,
                currency: None
            },
        ]
    );
    assert_eq!(terms.budget_ids().len(), 2);
    // The record reads back as written.
    assert_eq!(Terms::from_json(&terms.to_json()), Some(terms));
}

#[test]
fn calls_are_judged_against_every_kind_of_limit() {
    let (terms, _) = approved(json!([{
        "type": "booking_change", "booking_ids": ["K7PQ2M"], "max_fee": eur("0.00"),
        "dates": {"from": "2026-12-07", "to": "2026-12-11"}, "fare": ["economy"]
    }]));
    let now = tools();
    let rebook =
        |args: Value| kind(&call(&terms, &now, "rebook", "bookings:change", args)).to_owned();
    let ok = json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("0"), "fare": "economy"});
    assert_eq!(rebook(ok.clone()), "allowed");
    let with = |k: &str, v: Value| {
        let mut a = ok.clone();
        a[k] = v;
        a
    };
    #[rustfmt::skip]
    let rows = [
        ("another booking", with("booking_id", json!("ZZZZZZ")), "beyond"),
        ("a fee", with("fee", eur("15.00")), "beyond"),
        ("a fee in dollars", with("fee", json!({"currency": "USD", "amount": "0"})), "beyond"),
        ("a date outside the week", with("new_date", json!("2026-12-14")), "beyond"),
        ("another fare", with("fare", json!("flex")), "beyond"),
        ("a fee as a number", with("fee", json!(0)), "not permitted"),
        ("a date in words", with("new_date", json!("Tuesday")), "not permitted"),
        ("a date whose UTC day is the 12th", with("new_date", json!("2026-12-11T23:00:00-05:00")), "beyond"),
        ("a second booking id in capitals", with("BOOKING_ID", json!("ZZZZZZ")), "not permitted"),
        ("a second date in mixed case", with("New_Date", json!("2026-12-24")), "not permitted"),
        ("an argument no limit names", with("note", json!("please")), "allowed"),
    ];
    for (case, args, expected) in rows {
        assert_eq!(rebook(args), expected, "{case}");
    }
    let mut missing = ok.clone();
    missing.as_object_mut().unwrap().remove("fee");
    assert_eq!(rebook(missing), "not permitted", "an argument left out");
    // A quote is limited to the booking only (its one rule).
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "quote",
            "bookings:change",
            json!({"booking_id": "K7PQ2M"})
        )),
        "allowed"
    );
    // Other scopes are not touched.
    assert_eq!(
        kind(&call(&terms, &now, "list_orders", "orders:read", json!({}))),
        "unlimited"
    );
}

#[test]
fn beyond_names_the_limit_for_the_persons_question() {
    let (terms, _) = approved(json!([{
        "type": "booking_change", "booking_ids": ["K7PQ2M"], "max_fee": eur("0.00")
    }]));
    let j = call(
        &terms,
        &tools(),
        "rebook",
        "bookings:change",
        json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("15.00")}),
    );
    let Judgement::Beyond(b) = j else {
        panic!("{j:?}")
    };
    assert_eq!(b.field, "max_fee");
    assert_eq!(b.label, "extra charge");
    assert_eq!(b.why, BeyondWhy::Value);
    assert_eq!(
        b.limit,
        Some(Limit::AtMost(Amount {
            currency: "EUR",
            minor: 0
        }))
    );
}

#[test]
fn counts_and_totals_are_charged_to_their_budgets() {
    let (terms, _) = approved(json!([{
        "type": "booking_change", "booking_ids": ["K7PQ2M"], "moves": 1, "budget": eur("50.00")
    }]));
    let j = call(
        &terms,
        &tools(),
        "rebook",
        "bookings:change",
        json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("15.00")}),
    );
    let Judgement::Plans { plans, exhausted } = j else {
        panic!("{j:?}")
    };
    assert_eq!(
        plans[0].charges,
        vec![
            Charge {
                budget: Uuid::from_u128(1),
                amount: 1500
            },
            Charge {
                budget: Uuid::from_u128(2),
                amount: 1
            },
        ]
    );
    assert_eq!(exhausted.why, BeyondWhy::Exhausted);
    // More than the whole budget at once is beyond, not a charge that fails.
    let j = call(
        &terms,
        &tools(),
        "rebook",
        "bookings:change",
        json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("50.01")}),
    );
    assert_eq!(kind(&j), "beyond");
}

#[test]
fn entries_of_one_type_combine_by_union() {
    let (terms, _) = approved(json!([
        {"type": "order_cancellation", "order_ids": ["SHOP-1001"]},
        {"type": "order_cancellation", "order_ids": ["SHOP-1002"]}
    ]));
    let now = tools();
    for (id, expected) in [
        ("SHOP-1001", "allowed"),
        ("SHOP-1002", "allowed"),
        ("SHOP-1003", "beyond"),
    ] {
        assert_eq!(
            kind(&call(
                &terms,
                &now,
                "cancel_order",
                "orders:cancel",
                json!({"order_id": id})
            )),
            expected,
            "{id}"
        );
    }
}

#[test]
fn later_edits_never_widen_a_grant() {
    let (terms, _) = approved(json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]));
    let other = json!({"order_id": "SHOP-1002"});
    // The rule removed from the tool (or the tool re-added without it): the
    // rule recorded at approval still holds.
    let mut now = tools();
    now.get_mut("cancel_order").unwrap().enforce.clear();
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "cancel_order",
            "orders:cancel",
            other.clone()
        )),
        "beyond"
    );
    // The tool removed from the brand: the same.
    now.remove("cancel_order");
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "cancel_order",
            "orders:cancel",
            other.clone()
        )),
        "beyond"
    );
    // A tool of the scope added after approval is not covered: ask the person.
    now.insert(
        "cancel_order_v2".into(),
        ToolTerms {
            scope: "orders:cancel".into(),
            enforce: vec![],
        },
    );
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "cancel_order_v2",
            "orders:cancel",
            other.clone()
        )),
        "not covered"
    );
    // A rule added later narrows further (a rule never widens).
    let (terms, _) = approved(
        json!([{"type": "booking_change", "booking_ids": ["K7PQ2M"], "dates": {"from": "2026-12-07", "to": "2026-12-11"}}]),
    );
    let mut now = tools();
    let quote = json!({"booking_id": "K7PQ2M", "new_date": "2026-12-20"});
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "quote",
            "bookings:change",
            quote.clone()
        )),
        "allowed"
    );
    now.get_mut("quote")
        .unwrap()
        .enforce
        .push("dates=new_date".into());
    assert_eq!(
        kind(&call(&terms, &now, "quote", "bookings:change", quote)),
        "beyond"
    );
}

#[test]
fn a_type_declared_after_the_tool_is_enforced_by_the_tools_field_rule() {
    // A second type of orders:cancel with the same field, declared after
    // cancel_order's rule `order_ids=order_id` was written.
    let mut t = types();
    t.insert(
        "vip_cancellation".into(),
        serde_json::from_value(json!({"scope": "orders:cancel",
            "fields": {"order_ids": {"type": "string_array"}}}))
        .unwrap(),
    );
    let (terms, _) = Terms::approve(
        &[json!({"type": "vip_cancellation", "order_ids": ["SHOP-1001"]})],
        &t,
        &tools(),
        ids(),
    );
    let now = tools();
    assert_eq!(
        kind(&call(
            &terms,
            &now,
            "cancel_order",
            "orders:cancel",
            json!({"order_id": "SHOP-1002"})
        )),
        "beyond"
    );
}

#[test]
fn limits_no_tool_enforces_refuse_and_unknown_types_refuse() {
    // A field with a value that no tool of the scope has a rule for.
    let mut t = types();
    t.insert(
        "refund_limit".into(),
        serde_json::from_value(json!({"scope": "orders:cancel",
            "fields": {"max_refund": {"type": "amount"}}}))
        .unwrap(),
    );
    let (terms, _) = Terms::approve(
        &[json!({"type": "refund_limit", "max_refund": eur("20")})],
        &t,
        &tools(),
        ids(),
    );
    assert_eq!(
        kind(&call(
            &terms,
            &tools(),
            "cancel_order",
            "orders:cancel",
            json!({"order_id": "SHOP-1001"})
        )),
        "unenforceable"
    );
    // An entry whose type was gone when the record was made refuses any scoped call.
    let (terms, _) = for_older_grant(
        Some(&json!([{"type": "gone", "x": 1}])),
        &types(),
        &tools(),
        ids(),
    );
    assert_eq!(
        kind(&call(
            &terms,
            &tools(),
            "list_orders",
            "orders:read",
            json!({})
        )),
        "unenforceable"
    );
    // Terms of an unknown version.
    let mut future = terms.clone();
    future.v = 2;
    assert_eq!(
        kind(&call(
            &future,
            &tools(),
            "list_orders",
            "orders:read",
            json!({})
        )),
        "unenforceable"
    );
}

#[test]
fn a_count_without_a_rule_counts_every_call_of_its_scope() {
    let mut now = tools();
    now.get_mut("cancel_order").unwrap().enforce = vec!["order_ids=order_id".into()];
    let (terms, _) = Terms::approve(
        &[
            json!({"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1}),
        ],
        &types(),
        &now,
        ids(),
    );
    let j = call(
        &terms,
        &now,
        "cancel_order",
        "orders:cancel",
        json!({"order_id": "SHOP-1001"}),
    );
    let Judgement::Plans { plans, .. } = j else {
        panic!("{j:?}")
    };
    assert_eq!(
        plans[0].charges,
        vec![Charge {
            budget: Uuid::from_u128(1),
            amount: 1
        }]
    );
}

/// Staff add a tool, or a rule to a new tool, after the person approved: a
/// count that counted every call of the scope still does, on the tools that
/// were there and on the new one; a field no tool enforced then is still
/// refused on the old tool. Before, a rule anywhere in the scope "now" made
/// the field enforced elsewhere, and the calls it should limit went free.
#[test]
fn a_tool_added_after_approval_switches_no_limit_off() {
    let (terms, _) = Terms::approve(
        &[
            json!({"type": "order_cancellation", "order_ids": ["S-1", "S-2", "S-3"], "max_cancellations": 1}),
        ],
        &types(),
        &tools(),
        ids(),
    );
    let mut now = tools();
    now.insert(
        "bulk_cancel".into(),
        ToolTerms {
            scope: "orders:cancel".into(),
            enforce: vec!["max_cancellations".into()],
        },
    );
    now.insert(
        "cancel_order_v2".into(),
        ToolTerms {
            scope: "orders:cancel".into(),
            enforce: vec!["order_ids=order_id".into()],
        },
    );
    let one = vec![Charge {
        budget: Uuid::from_u128(1),
        amount: 1,
    }];
    for tool in ["cancel_order", "cancel_order_v2"] {
        let j = call(
            &terms,
            &now,
            tool,
            "orders:cancel",
            json!({"order_id": "S-1"}),
        );
        let Judgement::Plans { plans, .. } = j else {
            panic!("{tool}: {j:?}")
        };
        assert_eq!(plans[0].charges, one, "{tool} is counted");
    }
}

/// A tool approved with limits under one scope and moved since (to a scope
/// no entry limits, or made public) is beyond the grant: the person is
/// asked, the limits do not lapse with the move.
#[test]
fn a_tool_moved_out_of_its_limited_scope_is_beyond_the_grant() {
    let (terms, _) = approved(
        json!([{"type": "order_cancellation", "order_ids": ["S-1"], "max_cancellations": 1}]),
    );
    for now in [Some("orders:read"), None] {
        let b = moved_from_limits(&terms, "cancel_order", now).expect("moved");
        assert_eq!(b.why, BeyondWhy::NotCovered, "{now:?}");
        assert_eq!(b.type_name, "order_cancellation");
    }
    assert_eq!(
        moved_from_limits(&terms, "cancel_order", Some("orders:cancel")),
        None
    );
    // A tool recorded under a scope the grant does not limit moves freely.
    assert_eq!(moved_from_limits(&terms, "list_orders", None), None);
}

/// A rule recorded at approval and the same rule written differently now
/// (qualified by its type) check the argument once: the call is charged
/// once, not twice.
#[test]
fn one_argument_named_by_two_rules_is_charged_once() {
    let (terms, _) = approved(json!([{"type": "booking_change", "booking_ids": ["K7PQ2M"],
        "budget": eur("50.00")}]));
    let mut now = tools();
    now.get_mut("rebook")
        .unwrap()
        .enforce
        .push("booking_change.budget=fee".into());
    let j = call(
        &terms,
        &now,
        "rebook",
        "bookings:change",
        json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("30.00"),
               "fare": eur("0")}),
    );
    let Judgement::Plans { plans, .. } = j else {
        panic!("{j:?}")
    };
    let charged: i64 = plans[0].charges.iter().map(|c| c.amount).sum();
    assert_eq!(charged, 3000, "{:?}", plans[0].charges);
}

#[test]
fn a_step_ups_grant_keeps_the_earlier_budgets_and_a_one_off_approval_allows_that_call_once() {
    let (old, _) = approved(
        json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1}]),
    );
    let (new, budgets) = Terms::approve(&[], &types(), &tools(), || Uuid::from_u128(99));
    assert!(budgets.is_empty());
    let merged = new.with_previous([&old]);
    assert_eq!(
        merged.entries, old.entries,
        "same entries, same budget rows"
    );

    let args = json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08", "fee": eur("15.00")});
    let (mut terms, _) = approved(
        json!([{"type": "booking_change", "booking_ids": ["K7PQ2M"], "max_fee": eur("0")}]),
    );
    assert_eq!(
        kind(&call(
            &terms,
            &tools(),
            "rebook",
            "bookings:change",
            args.clone()
        )),
        "beyond"
    );
    terms.operations.push(Operation {
        tool: "rebook".into(),
        scope: "bookings:change".into(),
        args_hash: pact_jose::args_hash(&args),
        budget: Uuid::from_u128(50),
        amounts: vec![eur("15.00")],
    });
    let j = call(&terms, &tools(), "rebook", "bookings:change", args.clone());
    let Judgement::Plans { plans, exhausted } = j else {
        panic!("{j:?}")
    };
    assert_eq!(plans.len(), 1);
    assert_eq!(
        plans[0].charges,
        vec![Charge {
            budget: Uuid::from_u128(50),
            amount: 1
        }]
    );
    assert_eq!(
        exhausted.field, "max_fee",
        "once used, the limit is what is beyond"
    );
    // Other arguments are not that operation.
    let mut other = args.clone();
    other["new_date"] = json!("2026-12-09");
    assert_eq!(
        kind(&call(&terms, &tools(), "rebook", "bookings:change", other)),
        "beyond"
    );
    assert_eq!(
        call_amounts(&terms, &tools(), "rebook", "bookings:change", &args),
        vec![Amount {
            currency: "EUR",
            minor: 1500
        }]
    );
}

#[test]
fn a_declared_effect_is_held_to_the_limits_it_was_allowed_under() {
    let max = |minor| Applied {
        type_name: "t".into(),
        field: "max_fee".into(),
        kind: FieldKind::Amount,
        limit: Limit::AtMost(Amount {
            currency: "EUR",
            minor,
        }),
        arg: None,
        budget: None,
    };
    let plan = Plan {
        charges: vec![],
        applied: vec![max(1000)],
        operation: None,
    };
    let e = |minor| Amount {
        currency: "EUR",
        minor,
    };
    assert!(!check_effect(&plan, e(1000)).beyond);
    assert!(check_effect(&plan, e(1001)).beyond);
    assert!(
        check_effect(
            &plan,
            Amount {
                currency: "USD",
                minor: 1
            }
        )
        .beyond
    );
    let total = Applied {
        kind: FieldKind::CumulativeAmount,
        limit: Limit::Total(e(5000)),
        arg: Some(eur("15.00")),
        budget: Some(Uuid::from_u128(7)),
        ..max(0)
    };
    let plan = Plan {
        charges: vec![],
        applied: vec![total],
        operation: None,
    };
    assert_eq!(
        check_effect(&plan, e(2000)).corrections,
        vec![Charge {
            budget: Uuid::from_u128(7),
            amount: 500
        }]
    );
    let op = Plan {
        charges: vec![],
        applied: vec![],
        operation: Some(vec![e(1500)]),
    };
    assert!(!check_effect(&op, e(1500)).beyond);
    assert!(check_effect(&op, e(1600)).beyond);
    assert_eq!(effect_amount(&json!({"ok": true})), None);
    assert_eq!(
        effect_amount(&json!({"pactEffect": {"amount": eur("15")}})),
        Some(Ok(e(1500)))
    );
    assert_eq!(
        effect_amount(&json!({"pactEffect": {"amount": 15}})),
        Some(Err(()))
    );
}
