//! The limits on the consent page (PACT §5.2, §5.7; RFC 9396 §7): each
//! requested `authorization_details` entry in plain words, with controls
//! that let the person narrow it — untick listed items, lower an amount,
//! allow fewer calls — and the reading of those controls back into the
//! entries the grant gets. Whatever the form says, `consent::approve` takes
//! only a choice that narrows the request.
//!
//! Control names are `d{entry}.{field}`: one checkbox per item of a list
//! (`string_array`, `enum`), one text field for an amount, one for a count.

use serde_json::{Map, Value, json};

use super::form::Fields;
use super::i18n;
use super::limit_words;
use crate::domain::authz_details::DetailsTypes;
use crate::domain::limits::{self, FieldKind, Limit};
use crate::domain::money::{self, Amount};

/// One requested entry on the page.
pub struct ConditionRow {
    pub text: String,
    pub controls: Vec<Control>,
}

/// One way to narrow a field.
pub struct Control {
    pub name: String,
    pub label: String,
    /// `items`, `amount` or `count`.
    pub kind: &'static str,
    /// For `items`: each value and whether it is ticked.
    pub items: Vec<(String, bool)>,
    /// For `amount` and `count`: the value shown, the most allowed, and the
    /// amount's currency.
    pub value: String,
    pub max: String,
    pub currency: String,
}

fn field_label(field: &str, label: &str) -> String {
    if label.is_empty() {
        field.to_owned()
    } else {
        crate::domain::hidden_chars::visible(label)
    }
}

/// The rows for an authorization's requested entries; `chosen` (a form sent
/// back with an error) keeps the person's last choice.
pub fn rows(
    details: Option<&Value>,
    types: &DetailsTypes,
    chosen: Option<&Value>,
) -> Vec<ConditionRow> {
    let Some(entries) = details.and_then(Value::as_array) else {
        return Vec::new();
    };
    let chosen = chosen.and_then(Value::as_array);
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let type_name = e.get("type").and_then(Value::as_str).unwrap_or("");
            let Some((t, values)) = types.get(type_name).zip(e.as_object()) else {
                return ConditionRow {
                    text: limit_words::unknown_entry(type_name),
                    controls: Vec::new(),
                };
            };
            let shown = chosen.and_then(|c| c.get(i)).and_then(Value::as_object);
            let mut controls = Vec::new();
            for (field, spec) in &t.fields {
                let Some(requested) = values
                    .get(field)
                    .and_then(|v| limits::parse(spec.kind, &spec.values, v))
                else {
                    continue;
                };
                let current = shown
                    .and_then(|s| s.get(field))
                    .and_then(|v| limits::parse(spec.kind, &spec.values, v))
                    .unwrap_or_else(|| requested.clone());
                let name = format!("d{i}.{field}");
                let label = field_label(field, &spec.label);
                let control = match (&requested, &current) {
                    (Limit::OneOf(all), Limit::OneOf(ticked)) if all.len() > 1 => Some(Control {
                        name,
                        label,
                        kind: "items",
                        items: all
                            .iter()
                            .map(|v| (crate::domain::hidden_chars::visible(v), ticked.contains(v)))
                            .collect(),
                        value: String::new(),
                        max: String::new(),
                        currency: String::new(),
                    }),
                    (
                        Limit::AtMost(max) | Limit::Total(max),
                        Limit::AtMost(cur) | Limit::Total(cur),
                    ) => Some(Control {
                        name,
                        label,
                        kind: "amount",
                        items: Vec::new(),
                        value: cur.decimal(),
                        max: max.decimal(),
                        currency: max.currency.to_owned(),
                    }),
                    (Limit::Calls(max), Limit::Calls(cur)) if *max > 1 => Some(Control {
                        name,
                        label,
                        kind: "count",
                        items: Vec::new(),
                        value: cur.to_string(),
                        max: max.to_string(),
                        currency: String::new(),
                    }),
                    _ => None,
                };
                controls.extend(control);
            }
            let words_of = shown.unwrap_or(values);
            ConditionRow {
                text: limit_words::entry(type_name, t, words_of),
                controls,
            }
        })
        .collect()
}

/// The entries as the person set them on the form: `Ok(None)` when they
/// left everything as requested. An unreadable value is an error for the
/// person (in their language); whether the choice narrows is for
/// `consent::approve` to decide.
pub fn chosen(
    form: &Fields,
    details: Option<&Value>,
    types: &DetailsTypes,
) -> Result<Option<Value>, String> {
    let Some(entries) = details.and_then(Value::as_array) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(entries.len());
    let mut changed = false;
    for (i, e) in entries.iter().enumerate() {
        let type_name = e.get("type").and_then(Value::as_str).unwrap_or("");
        let (Some(t), Some(values)) = (types.get(type_name), e.as_object()) else {
            out.push(e.clone());
            continue;
        };
        let mut entry: Map<String, Value> = values.clone();
        for (field, spec) in &t.fields {
            let Some(requested) = values
                .get(field)
                .and_then(|v| limits::parse(spec.kind, &spec.values, v))
            else {
                continue;
            };
            let name = format!("d{i}.{field}");
            let label = field_label(field, &spec.label);
            let value = match (spec.kind, &requested) {
                (FieldKind::StringArray | FieldKind::Enum, Limit::OneOf(all)) if all.len() > 1 => {
                    let ticked: Vec<Value> = all
                        .iter()
                        .filter(|v| {
                            form.all(&name)
                                .any(|x| x == crate::domain::hidden_chars::visible(v))
                        })
                        .map(|v| Value::String(v.clone()))
                        .collect();
                    if ticked.is_empty() {
                        return Err(i18n::t1("consent-err-keep-one", "label", label));
                    }
                    Value::Array(ticked)
                }
                (
                    FieldKind::Amount | FieldKind::CumulativeAmount,
                    Limit::AtMost(a) | Limit::Total(a),
                ) => {
                    let Some(text) = form.get(&name) else {
                        continue;
                    };
                    let text = text.trim().replace(',', ".");
                    let minor = money::exponent(a.currency)
                        .and_then(|e| money::parse_decimal(&text, e))
                        .ok_or_else(|| i18n::t1("consent-err-amount", "label", label.clone()))?;
                    Amount {
                        currency: a.currency,
                        minor,
                    }
                    .to_json()
                }
                (FieldKind::Count, Limit::Calls(max)) if *max > 1 => {
                    let Some(text) = form.get(&name) else {
                        continue;
                    };
                    let n: i64 = text
                        .trim()
                        .parse()
                        .map_err(|_| i18n::t1("consent-err-count", "label", label.clone()))?;
                    json!(n)
                }
                _ => continue,
            };
            if Some(&value) != values.get(field) {
                changed = true;
            }
            entry.insert(field.clone(), value);
        }
        out.push(Value::Object(entry));
    }
    Ok(changed.then_some(Value::Array(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> DetailsTypes {
        serde_json::from_value(json!({"booking_change": {"scope": "b", "fields": {
            "booking_ids": {"type": "string_array"},
            "max_fee": {"type": "amount", "label": "extra charge"},
            "moves": {"type": "count"}
        }}}))
        .unwrap()
    }

    fn details() -> Value {
        json!([{"type": "booking_change", "booking_ids": ["A", "B"],
                "max_fee": {"currency": "EUR", "amount": "20.00"}, "moves": 3}])
    }

    #[test]
    fn the_form_offers_a_control_for_each_narrowable_limit() {
        let rows = i18n::with_lang(i18n::Lang::En, || rows(Some(&details()), &types(), None));
        assert_eq!(rows.len(), 1);
        let kinds: Vec<(&str, &str)> = rows[0]
            .controls
            .iter()
            .map(|c| (c.name.as_str(), c.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("d0.booking_ids", "items"),
                ("d0.max_fee", "amount"),
                ("d0.moves", "count")
            ]
        );
        assert_eq!(rows[0].controls[1].value, "20.00");
    }

    #[test]
    fn the_persons_choice_is_read_back_from_the_form() {
        let form = Fields::parse(b"d0.booking_ids=B&d0.max_fee=12%2C50&d0.moves=1");
        let chosen = i18n::with_lang(i18n::Lang::En, || chosen(&form, Some(&details()), &types()))
            .unwrap()
            .unwrap();
        assert_eq!(
            chosen,
            json!([{"type": "booking_change", "booking_ids": ["B"],
                    "max_fee": {"currency": "EUR", "amount": "12.50"}, "moves": 1}])
        );
        // Left as requested: nothing chosen.
        let form = Fields::parse(b"d0.booking_ids=A&d0.booking_ids=B&d0.max_fee=20&d0.moves=3");
        assert_eq!(chosen_or_err(&form), Ok(None));
        // Nothing ticked, or an unreadable amount: a message, not a grant.
        assert!(chosen_or_err(&Fields::parse(b"d0.max_fee=20&d0.moves=3")).is_err());
        assert!(
            chosen_or_err(&Fields::parse(
                b"d0.booking_ids=A&d0.max_fee=lots&d0.moves=3"
            ))
            .is_err()
        );
    }

    fn chosen_or_err(form: &Fields) -> Result<Option<Value>, String> {
        i18n::with_lang(i18n::Lang::En, || chosen(form, Some(&details()), &types()))
    }
}
