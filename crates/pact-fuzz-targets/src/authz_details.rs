//! RFC 9396 `authorization_details` (PACT §5.7):
//! `pact_server::domain::authz_details::validate`, then `describe` on what
//! validates and the gate's judgement of tool calls under it (the terms a
//! grant of these details gets, `terms::for_older_grant`, judged by
//! `terms::judge` with the demo tools' rules: `cancel_order` limits its
//! `order_id` to the entry's `order_ids`), with the demo brand's `demo_types()`.
//!
//! Input: the first byte picks the requested scopes (bits 0-1) and, with bit 7
//! set, a brand-declared type set instead of the demo one (the rest is then
//! `settings JSON 0xFF details`, the settings read by `types_from_settings` and
//! kept only if `check_type` passes); otherwise the rest is the raw
//! `authorization_details` parameter (lossy UTF-8).
//!
//! Invariants with the demo types: an accepted array holds 1 to 16
//! `order_cancellation` entries of 1 to 64 non-empty strings of at most 256
//! bytes, and the request has `orders:cancel`; `describe` gives one sentence per
//! entry with every placeholder filled; `cancel_order` is permitted exactly for
//! the listed ids (not for another id, a non-string or a missing argument),
//! other tools are not restricted. Judging and `describe` never panic on any
//! JSON value.

use std::collections::BTreeSet;

use crate::{split_ff, trace};
use pact_server::domain::authz_details::{
    DetailsTypes, MAX_ARRAY_VALUES, MAX_ENTRIES, MAX_STRING_LEN, Unworded, check_type, demo_types,
    describe, types_from_settings, validate,
};
use pact_server::domain::terms::{self, Judgement, RulesNow, ToolTerms};
use serde_json::{Value, json};

/// The demo brand's tools as the gate sees them (`agent::demo_tools`).
fn demo_rules() -> RulesNow {
    let tool = |scope: &str, enforce: &[&str]| ToolTerms {
        scope: scope.to_owned(),
        enforce: enforce.iter().map(|r| (*r).to_owned()).collect(),
    };
    RulesNow::from([
        (
            "cancel_order".to_owned(),
            tool("orders:cancel", &["order_ids=order_id"]),
        ),
        ("list_orders".to_owned(), tool("orders:read", &[])),
    ])
}

/// Whether the gate lets the call through under a grant of these details
/// (`None`: a grant of scopes alone).
fn permits(details: Option<&Value>, types: &DetailsTypes, tool: &str, args: &Value) -> bool {
    let rules = demo_rules();
    let mut n = 0u128;
    let (grant_terms, _) = terms::for_older_grant(details, types, &rules, || {
        n += 1;
        uuid::Uuid::from_u128(n)
    });
    let scope = rules.get(tool).map_or("orders:read", |t| t.scope.as_str());
    let judged = terms::judge(&grant_terms, &rules, tool, scope, args, "fuzz");
    trace(|| format!("judge {tool} {args}: {judged:?}"));
    matches!(judged, Judgement::Unlimited | Judgement::Plans { .. })
}

fn sentences(details: &Value, types: &DetailsTypes) -> Vec<String> {
    describe(details, types, |u| match u {
        Unworded::UnknownType(t) => format!("unknown {t}"),
        Unworded::Undescribed(t) => format!("undescribed {t}"),
    })
}

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let scopes: BTreeSet<String> = match mode & 3 {
        0 => ["orders:cancel"].as_slice(),
        1 => ["orders:read", "orders:cancel"].as_slice(),
        2 => ["orders:read"].as_slice(),
        _ => [].as_slice(),
    }
    .iter()
    .map(|s| (*s).to_owned())
    .collect();

    if mode & 0x80 != 0 {
        let (settings, raw) = split_ff(rest);
        let Ok(settings) = serde_json::from_slice::<Value>(settings) else {
            return;
        };
        let types = types_from_settings(&settings);
        if types.values().any(|t| check_type(t).is_err()) {
            return;
        }
        let raw = String::from_utf8_lossy(raw);
        let _ = generic(&raw, &types, &scopes);
        return;
    }

    let types = demo_types();
    let raw = String::from_utf8_lossy(rest);
    if let Ok(value) = generic(&raw, &types, &scopes) {
        check_demo(&value, &types, &scopes);
    }
}

/// Checks that hold for any type set; returns `validate`'s answer.
fn generic(raw: &str, types: &DetailsTypes, scopes: &BTreeSet<String>) -> Result<Value, String> {
    let result = validate(raw, types, scopes);
    trace(|| format!("validate: {result:?}"));
    match &result {
        Ok(value) => {
            let entries = value.as_array().expect("accepted details are an array");
            assert!(!entries.is_empty() && entries.len() <= MAX_ENTRIES);
            for entry in entries {
                let type_name = entry["type"].as_str().expect("string type");
                let t = types.get(type_name).expect("known type");
                assert!(scopes.contains(&t.scope), "type accepted without its scope");
                for (name, spec) in &t.fields {
                    if spec.required {
                        assert!(entry.get(name).is_some(), "required field missing");
                    }
                }
            }
            assert_eq!(sentences(value, types).len(), entries.len());
        }
        Err(message) => assert!(!message.is_empty()),
    }
    // Whatever JSON the request held, the gateway and consent code must not panic on it.
    if let Ok(any) = serde_json::from_str::<Value>(raw) {
        let _ = sentences(&any, types);
        for tool in ["cancel_order", "list_orders"] {
            let _ = permits(Some(&any), types, tool, &json!({"order_id": "DEMO-1"}));
            let _ = permits(Some(&any), types, tool, &any);
        }
    }
    result
}

fn check_demo(value: &Value, types: &DetailsTypes, scopes: &BTreeSet<String>) {
    assert!(scopes.contains("orders:cancel"));
    let entries = value.as_array().expect("array");
    let mut ids: Vec<&str> = Vec::new();
    for entry in entries {
        let obj = entry.as_object().expect("object");
        assert_eq!(obj.get("type"), Some(&Value::from("order_cancellation")));
        assert!(
            obj.keys().all(|k| k == "type" || k == "order_ids"),
            "unknown field kept"
        );
        let list = obj["order_ids"].as_array().expect("order_ids array");
        assert!(!list.is_empty() && list.len() <= MAX_ARRAY_VALUES);
        for id in list {
            let id = id.as_str().expect("string id");
            assert!(!id.is_empty() && id.chars().count() <= MAX_STRING_LEN);
            ids.push(id);
        }
    }

    for (entry, sentence) in entries.iter().zip(sentences(value, types)) {
        let listed: Vec<&str> = entry["order_ids"]
            .as_array()
            .expect("order_ids array")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            sentence,
            format!("Cancel only these orders: {}", listed.join(", "))
        );
    }

    for id in &ids {
        assert!(
            permits(
                Some(value),
                types,
                "cancel_order",
                &json!({ "order_id": id })
            ),
            "listed id refused"
        );
    }
    // Longer than every listed id, so listed nowhere.
    let other: String = ids.concat() + "#";
    assert!(
        !permits(
            Some(value),
            types,
            "cancel_order",
            &json!({ "order_id": other })
        ),
        "unlisted id permitted"
    );
    assert!(
        !permits(
            Some(value),
            types,
            "cancel_order",
            &json!({ "order_id": 1 })
        ),
        "number permitted"
    );
    assert!(
        !permits(Some(value), types, "cancel_order", &json!({})),
        "missing argument permitted"
    );
    assert!(
        permits(Some(value), types, "list_orders", &json!({})),
        "unrestricted tool refused"
    );
    assert!(
        permits(None, types, "cancel_order", &json!({ "order_id": other })),
        "scope-only grant refused"
    );
}
