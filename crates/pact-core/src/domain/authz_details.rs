//! RFC 9396 `authorization_details` for PACT §5.7: the brand's declared
//! types and the check of a request's entries against them.
//!
//! A brand declares types in its settings: the scope a type refines, a
//! sentence for the consent page (`{field}` stands for an entry's value),
//! and the fields an entry may carry, each of one limit kind
//! (`domain::limits`). Which tool argument a field limits is said by the
//! tool (`domain::tool_rules`), never by the type, so re-declaring a type
//! cannot drop a rule; and what a grant was approved under is kept with the
//! grant (`domain::terms`), so no later edit changes an existing grant.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::{self, FieldKind};

/// At most this many entries in one request.
pub const MAX_ENTRIES: usize = 16;
pub use super::limits::{MAX_ARRAY_VALUES, MAX_STRING_LEN};

/// Longest field name, and the most fields a type may declare.
const MAX_FIELD_NAME: usize = 64;
const MAX_FIELDS: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetailsType {
    /// The scope this type refines; requesting the type without it is an error.
    pub scope: String,
    /// Plain words for consent; `{field}` is replaced by the entry's values.
    #[serde(default)]
    pub description: String,
    pub fields: BTreeMap<String, FieldSpec>,
    /// Rules used to live here; they belong to the tools now (one place,
    /// so re-declaring a type cannot drop one). Read so that an old
    /// declaration still parses; refused on every write (`check_type`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enforce: Vec<Value>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    #[serde(rename = "type")]
    pub kind: FieldKind,
    #[serde(default)]
    pub required: bool,
    /// An `enum`'s allowed values (and only an enum's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// What is counted or limited, in the brand's words, for sentences the
    /// type's description does not cover ("cancellations", "extra charge").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
}

pub type DetailsTypes = BTreeMap<String, DetailsType>;

/// The settings key under which a brand declares its types.
pub const SETTINGS_KEY: &str = "authorization_details_types";

/// The brand's declared types; malformed settings count as none (and are
/// refused when written, see `check_type`).
pub fn types_from_settings(settings: &Value) -> DetailsTypes {
    settings
        .get(SETTINGS_KEY)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// A field name: what an entry's member is called and a tool rule names.
pub fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FIELD_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Checks a type declaration before it is stored.
pub fn check_type(t: &DetailsType) -> Result<(), String> {
    if !t.enforce.is_empty() {
        return Err(
            "enforce rules belong to the tools now: give them with the tool \
             (`pactd brand tool add … --enforce TYPE.FIELD=ARG`, or the tool's `enforce` list)"
                .to_owned(),
        );
    }
    if t.fields.is_empty() || t.fields.len() > MAX_FIELDS {
        return Err(format!("a type declares 1 to {MAX_FIELDS} fields"));
    }
    for (name, spec) in &t.fields {
        if name == "type" {
            return Err("`type` is reserved".to_owned());
        }
        if !is_field_name(name) {
            return Err(format!(
                "field name {name:?}: 1–64 of A-Z, a-z, 0-9, '_' and '-'"
            ));
        }
        match (spec.kind, spec.values.is_empty()) {
            (FieldKind::Enum, true) => {
                return Err(format!("enum field {name:?} needs its `values`"));
            }
            (FieldKind::Enum, false) => {
                let unique: BTreeSet<&String> = spec.values.iter().collect();
                if unique.len() != spec.values.len()
                    || spec.values.len() > MAX_ARRAY_VALUES
                    || spec
                        .values
                        .iter()
                        .any(|v| v.is_empty() || v.chars().count() > MAX_STRING_LEN)
                {
                    return Err(format!(
                        "enum field {name:?}: 1 to {MAX_ARRAY_VALUES} distinct non-empty values"
                    ));
                }
            }
            (_, false) => return Err(format!("only an enum field has `values` ({name:?})")),
            (_, true) => {}
        }
        if spec.label.chars().count() > MAX_STRING_LEN {
            return Err(format!("the label of {name:?} is too long"));
        }
    }
    Ok(())
}

/// Validates a request's `authorization_details` (a JSON array) against the
/// brand's types and the requested scopes. Returns the normalised array
/// (amounts with their currency's minor digits, duplicates removed from lists).
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
    let mut out = Vec::with_capacity(entries.len());
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
        let mut normal = serde_json::Map::new();
        normal.insert("type".to_owned(), Value::String(type_name.to_owned()));
        for (name, v) in obj {
            if name == "type" {
                continue;
            }
            let spec = t
                .fields
                .get(name)
                .ok_or_else(|| format!("unknown field {name:?} for type {type_name:?}"))?;
            normal.insert(name.clone(), check_field(name, spec, v)?);
        }
        for (name, spec) in &t.fields {
            if spec.required && !obj.contains_key(name) {
                return Err(format!("field {name:?} is required for type {type_name:?}"));
            }
        }
        out.push(Value::Object(normal));
    }
    Ok(Value::Array(out))
}

/// One field's value: no hidden characters (they would make what consent
/// shows differ from what is enforced), and the shape of its kind.
fn check_field(name: &str, spec: &FieldSpec, v: &Value) -> Result<Value, String> {
    if let Some(c) = strings_of(v)
        .iter()
        .find_map(|s| super::hidden_chars::first_hidden(s))
    {
        return Err(super::hidden_chars::refusal(&format!("field {name:?}"), c));
    }
    limits::parse(spec.kind, &spec.values, v)
        .map(|l| l.to_json())
        .ok_or_else(|| {
            format!(
                "field {name:?} has the wrong shape for a {} limit",
                spec.kind.name()
            )
        })
}

fn strings_of(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().flat_map(strings_of).collect(),
        Value::Object(o) => o.values().flat_map(strings_of).collect(),
        _ => vec![],
    }
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

/// The demo brand's one type: cancellation limited to named orders (the
/// built-in `cancel_order` tool's rule `order_ids=order_id` applies it).
pub fn demo_types() -> DetailsTypes {
    let mut fields = BTreeMap::new();
    fields.insert(
        "order_ids".to_owned(),
        FieldSpec {
            kind: FieldKind::StringArray,
            required: true,
            values: Vec::new(),
            label: String::new(),
        },
    );
    let mut types = BTreeMap::new();
    types.insert(
        "order_cancellation".to_owned(),
        DetailsType {
            scope: "orders:cancel".to_owned(),
            description: "Cancel only these orders: {order_ids}".to_owned(),
            fields,
            enforce: Vec::new(),
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
