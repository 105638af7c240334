//! RFC 9396 `authorization_details` for PACT §5.7.
//!
//! A brand declares types in its settings: the fields an entry may carry, the
//! scope the type refines, a sentence for the consent page, and enforcement
//! rules ("tool T's argument A must be one of field F's values"). Entries of
//! one type combine by union: an operation is allowed when any entry allows it.
//! A grant without entries of a type is limited by its scope alone.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many entries in one request, and values per array field.
pub const MAX_ENTRIES: usize = 16;
pub const MAX_ARRAY_VALUES: usize = 64;
pub const MAX_STRING_LEN: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetailsType {
    /// The scope this type refines; requesting the type without it is an error.
    pub scope: String,
    /// Plain words for consent; `{field}` is replaced by the entry's values.
    #[serde(default)]
    pub description: String,
    pub fields: BTreeMap<String, FieldSpec>,
    #[serde(default)]
    pub enforce: Vec<EnforceRule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    #[serde(rename = "type")]
    pub kind: FieldKind,
    #[serde(default)]
    pub required: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    String,
    StringArray,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnforceRule {
    pub tool: String,
    pub arg: String,
    pub field: String,
}

pub type DetailsTypes = BTreeMap<String, DetailsType>;

/// The settings key under which a brand declares its types.
pub const SETTINGS_KEY: &str = "authorization_details_types";

/// The brand's declared types; malformed settings count as none (and are
/// refused when written, see `check_types`).
pub fn types_from_settings(settings: &Value) -> DetailsTypes {
    settings
        .get(SETTINGS_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// Checks a type declaration before it is stored.
pub fn check_type(t: &DetailsType) -> Result<(), String> {
    for rule in &t.enforce {
        if !t.fields.contains_key(&rule.field) {
            return Err(format!("enforce rule names unknown field {:?}", rule.field));
        }
    }
    if t.fields.contains_key("type") {
        return Err("`type` is reserved".to_owned());
    }
    Ok(())
}

/// Validates a request's `authorization_details` (a JSON array) against the
/// brand's types and the requested scopes. Returns the normalised array.
pub fn validate(
    raw: &str,
    types: &DetailsTypes,
    scopes: &BTreeSet<String>,
) -> Result<Value, String> {
    let value: Value = serde_json::from_str(raw).map_err(|_| "not valid JSON".to_owned())?;
    let entries = value.as_array().ok_or("must be a JSON array")?;
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return Err(format!("must hold 1 to {MAX_ENTRIES} entries"));
    }
    for entry in entries {
        let obj = entry.as_object().ok_or("each entry must be an object")?;
        let type_name = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or("each entry needs a string `type`")?;
        let t = types
            .get(type_name)
            .ok_or_else(|| format!("unknown type {type_name:?}"))?;
        if !scopes.contains(&t.scope) {
            return Err(format!(
                "type {type_name:?} needs scope {:?} in the request",
                t.scope
            ));
        }
        for (name, v) in obj {
            if name == "type" {
                continue;
            }
            let spec = t
                .fields
                .get(name)
                .ok_or_else(|| format!("unknown field {name:?} for type {type_name:?}"))?;
            check_field(name, spec.kind, v)?;
        }
        for (name, spec) in &t.fields {
            if spec.required && !obj.contains_key(name) {
                return Err(format!("field {name:?} is required for type {type_name:?}"));
            }
        }
    }
    Ok(value)
}

fn check_field(name: &str, kind: FieldKind, v: &Value) -> Result<(), String> {
    // Values are shown on consent and then enforced: one that displays
    // differently from what it is must not get that far.
    let strings: Vec<&str> = match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if let Some(c) = strings
        .iter()
        .find_map(|s| super::hidden_chars::first_hidden(s))
    {
        return Err(super::hidden_chars::refusal(&format!("field {name:?}"), c));
    }
    let ok_str = |s: &Value| {
        s.as_str()
            .is_some_and(|s| !s.is_empty() && s.len() <= MAX_STRING_LEN)
    };
    let ok = match kind {
        FieldKind::String => ok_str(v),
        FieldKind::StringArray => v
            .as_array()
            .is_some_and(|a| !a.is_empty() && a.len() <= MAX_ARRAY_VALUES && a.iter().all(ok_str)),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("field {name:?} has the wrong shape"))
    }
}

/// May `tool` run with `args` under these details? Checked by the gateway
/// before the tool runs, against the real argument values (PACT §5.7).
pub fn permits(details: Option<&Value>, types: &DetailsTypes, tool: &str, args: &Value) -> bool {
    let entries: &[Value] = details
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (type_name, t) in types {
        for rule in t.enforce.iter().filter(|r| r.tool == tool) {
            let of_type: Vec<&Value> = entries
                .iter()
                .filter(|e| e.get("type").and_then(Value::as_str) == Some(type_name))
                .collect();
            if of_type.is_empty() {
                continue; // no restriction of this type was granted: the scope rules
            }
            let Some(arg) = args.get(&rule.arg) else {
                return false;
            };
            let allowed = of_type.iter().any(|e| match e.get(&rule.field) {
                Some(Value::Array(values)) => values.contains(arg),
                Some(v) => v == arg,
                None => false,
            });
            if !allowed {
                return false;
            }
        }
    }
    true
}

/// What to say of an entry that has no sentence of its own; the caller words
/// it in the page's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unworded<'a> {
    /// A type the brand does not register (refused at request time; only an
    /// older stored authorization can still hold one).
    UnknownType(&'a str),
    /// A registered type without a description.
    Undescribed(&'a str),
}

/// Plain-words sentences for consent, one per entry (RFC 9396 §7: the user
/// must be able to see what they grant).
pub fn describe(
    details: &Value,
    types: &DetailsTypes,
    unworded: impl Fn(Unworded<'_>) -> String,
) -> Vec<String> {
    let Some(entries) = details.as_array() else {
        return vec![];
    };
    entries
        .iter()
        .map(|e| {
            let type_name = e.get("type").and_then(Value::as_str).unwrap_or("");
            let Some(t) = types.get(type_name) else {
                return super::hidden_chars::visible(&unworded(Unworded::UnknownType(type_name)));
            };
            let mut text = if t.description.is_empty() {
                unworded(Unworded::Undescribed(type_name))
            } else {
                t.description.clone()
            };
            for name in t.fields.keys() {
                let shown = match e.get(name) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", "),
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                text = text.replace(&format!("{{{name}}}"), &shown);
            }
            // Refused at request time; stored text still never hides anything.
            super::hidden_chars::visible(&text)
        })
        .collect()
}

/// The demo brand's one type: cancellation limited to named orders.
pub fn demo_types() -> DetailsTypes {
    let mut fields = BTreeMap::new();
    fields.insert(
        "order_ids".to_owned(),
        FieldSpec {
            kind: FieldKind::StringArray,
            required: true,
        },
    );
    let mut types = BTreeMap::new();
    types.insert(
        "order_cancellation".to_owned(),
        DetailsType {
            scope: "orders:cancel".to_owned(),
            description: "Cancel only these orders: {order_ids}".to_owned(),
            fields,
            enforce: vec![EnforceRule {
                tool: "cancel_order".to_owned(),
                arg: "order_id".to_owned(),
                field: "order_ids".to_owned(),
            }],
        },
    );
    types
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scopes(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn well_formed_details_of_a_known_type_with_its_scope_pass() {
        let raw = r#"[{"type":"order_cancellation","order_ids":["DEMO-1","DEMO-2"]}]"#;
        assert!(validate(raw, &demo_types(), &scopes(&["orders:cancel"])).is_ok());
    }

    #[test]
    fn malformed_unknown_or_scopeless_details_are_refused() {
        let types = demo_types();
        let s = scopes(&["orders:cancel"]);
        for raw in [
            "not json",
            "{}",
            "[]",
            r#"[1]"#,
            r#"[{"order_ids":["DEMO-1"]}]"#,
            r#"[{"type":"payment","amount":"1"}]"#,
            r#"[{"type":"order_cancellation","order_ids":["DEMO-1"],"extra":1}]"#,
            r#"[{"type":"order_cancellation"}]"#,
            r#"[{"type":"order_cancellation","order_ids":[]}]"#,
            r#"[{"type":"order_cancellation","order_ids":"DEMO-1"}]"#,
            r#"[{"type":"order_cancellation","order_ids":[1]}]"#,
        ] {
            assert!(validate(raw, &types, &s).is_err(), "{raw}");
        }
        let raw = r#"[{"type":"order_cancellation","order_ids":["DEMO-1"]}]"#;
        assert!(validate(raw, &types, &scopes(&["orders:read"])).is_err());
    }

    #[test]
    fn enforcement_checks_the_real_argument_and_entries_combine_by_union() {
        let types = demo_types();
        let d = json!([{"type":"order_cancellation","order_ids":["DEMO-1"]},
                       {"type":"order_cancellation","order_ids":["DEMO-2"]}]);
        assert!(permits(
            Some(&d),
            &types,
            "cancel_order",
            &json!({"order_id": "DEMO-1"})
        ));
        assert!(permits(
            Some(&d),
            &types,
            "cancel_order",
            &json!({"order_id": "DEMO-2"})
        ));
        assert!(!permits(
            Some(&d),
            &types,
            "cancel_order",
            &json!({"order_id": "DEMO-3"})
        ));
        assert!(!permits(Some(&d), &types, "cancel_order", &json!({})));
        // Other tools are not restricted by this type; no details means the scope alone rules.
        assert!(permits(Some(&d), &types, "list_orders", &json!({})));
        assert!(permits(
            None,
            &types,
            "cancel_order",
            &json!({"order_id": "DEMO-3"})
        ));
    }

    #[test]
    fn consent_wording_fills_in_the_values() {
        let d = json!([{"type":"order_cancellation","order_ids":["DEMO-1","DEMO-2"]}]);
        let unworded = |u: Unworded<'_>| match u {
            Unworded::UnknownType(t) => format!("unknown {t}"),
            Unworded::Undescribed(t) => format!("undescribed {t}"),
        };
        assert_eq!(
            describe(&d, &demo_types(), unworded),
            vec!["Cancel only these orders: DEMO-1, DEMO-2"]
        );
        // Without a sentence of its own, the caller's wording names the type.
        let mut types = demo_types();
        if let Some(t) = types.get_mut("order_cancellation") {
            t.description.clear();
        }
        let d = json!([{"type":"order_cancellation"}, {"type":"gone\u{202e}"}]);
        assert_eq!(
            describe(&d, &types, unworded),
            vec![
                "undescribed order_cancellation",
                // Even a stored odd type name is shown with its hidden characters visible.
                "unknown gone[U+202E]",
            ]
        );
    }
}
