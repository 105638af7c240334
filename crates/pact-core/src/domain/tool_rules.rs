//! Which tool argument a granted limit applies to: the tool's `enforce`
//! list, the one place this is said (PACT §5.7: details are "enforced
//! against the real resource and arguments before the operation runs").
//!
//! A rule is written as the owner gives it and stored exactly so, which is
//! also what `tool list`, the console and the API show:
//!
//! * `FIELD=ARG`: the call's argument ARG is checked against field FIELD of
//!   every granted entry whose type refines the tool's scope and has FIELD;
//! * `TYPE.FIELD=ARG`: the same, for type TYPE only;
//! * `FIELD` or `TYPE.FIELD` alone: a `count` field, one call used per call.
//!
//! Rules name fields, not types, unless asked to: a type declared after the
//! tool is enforced by the same rule when it has the field.

use super::authz_details::{DetailsType, is_field_name};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRule {
    /// `None`: every type of the tool's scope that has `field`.
    pub type_name: Option<String>,
    pub field: String,
    /// The argument checked; `None` for a count.
    pub arg: Option<String>,
}

/// An argument name a rule may point at: one top-level member of the
/// call's JSON object.
fn is_arg_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ToolRule {
    /// Parses one rule as written; the message says what is wrong.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (target, arg) = match raw.split_once('=') {
            Some((t, a)) => (t, Some(a)),
            None => (raw, None),
        };
        // A type name may hold dots, a field name cannot: split at the last.
        let (type_name, field) = match target.rsplit_once('.') {
            Some((t, f)) => (Some(t), f),
            None => (None, target),
        };
        if type_name.is_some_and(str::is_empty) || !is_field_name(field) {
            return Err(format!(
                "invalid enforce rule {raw:?}: use FIELD=ARG, TYPE.FIELD=ARG, or FIELD for a count"
            ));
        }
        if let Some(a) = arg
            && !is_arg_name(a)
        {
            return Err(format!(
                "invalid enforce rule {raw:?}: the argument is 1–64 of A-Z, a-z, 0-9, '_' and '-'"
            ));
        }
        Ok(Self {
            type_name: type_name.map(str::to_owned),
            field: field.to_owned(),
            arg: arg.map(str::to_owned),
        })
    }

    /// Whether this rule reaches field `field` of type `type_name` (`t`).
    pub fn reaches(&self, type_name: &str, t: &DetailsType, field: &str) -> bool {
        self.field == field
            && t.fields.contains_key(field)
            && self.type_name.as_deref().is_none_or(|n| n == type_name)
    }
}

/// Parses a tool's stored rules, skipping none: one unreadable rule makes
/// the whole list unreadable (the caller fails closed).
pub fn parse_all(raw: &[String]) -> Result<Vec<ToolRule>, String> {
    raw.iter().map(|r| ToolRule::parse(r)).collect()
}

/// A tool's stored `enforce` (a JSON array of strings) as rule texts.
pub fn texts(enforce: &serde_json::Value) -> Vec<String> {
    enforce
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_read_as_written() {
        assert_eq!(
            ToolRule::parse("order_ids=order_id").unwrap(),
            ToolRule {
                type_name: None,
                field: "order_ids".into(),
                arg: Some("order_id".into())
            }
        );
        assert_eq!(
            ToolRule::parse("example.booking_change.max_fee=fee").unwrap(),
            ToolRule {
                type_name: Some("example.booking_change".into()),
                field: "max_fee".into(),
                arg: Some("fee".into())
            }
        );
        assert_eq!(
            ToolRule::parse("moves").unwrap(),
            ToolRule {
                type_name: None,
                field: "moves".into(),
                arg: None
            }
        );
        for bad in ["", "=x", "f=", ".f=x", "f=a b", "f=a.b", "a b=c", "f==x"] {
            assert!(ToolRule::parse(bad).is_err(), "{bad:?}");
        }
    }
}
