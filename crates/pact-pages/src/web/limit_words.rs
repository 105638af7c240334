//! Limits in plain words, in the language of the page (RFC 9396 §7: the
//! person must be able to see what they grant): the consent page, the
//! one-off approval of an operation, the account page, the console, and a
//! step-up task's message (English there, as every A2A reply).
//!
//! A type's description is the brand's sentence with `{field}` standing for
//! an entry's value; each value is written by its kind (an amount as money,
//! a date as a date). A set field the sentence does not mention gets a
//! sentence of its own, so no limit is ever left unsaid.

use serde_json::Value;
use time::{Date, OffsetDateTime, UtcOffset, Weekday};

use super::i18n::{self, Lang};
use crate::domain::authz_details::{DetailsType, FieldSpec};
use crate::domain::hidden_chars;
use crate::domain::limits::{self, FieldKind, Limit};
use crate::domain::money::{self, Amount};
use crate::domain::terms::{Beyond, BeyondWhy};

fn style() -> money::Style {
    match i18n::current() {
        Lang::De => money::Style::German,
        Lang::En => money::Style::English,
    }
}

pub fn amount(a: Amount) -> String {
    money::show(a, style())
}

const EN_MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DE_MONTHS: [&str; 12] = [
    "Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sep.", "Okt.", "Nov.", "Dez.",
];

fn weekday(w: Weekday) -> &'static str {
    let i = w.number_days_from_monday() as usize;
    match i18n::current() {
        Lang::En => ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"][i],
        Lang::De => ["Mo.", "Di.", "Mi.", "Do.", "Fr.", "Sa.", "So."][i],
    }
}

/// `Tue 8 Dec 2026`, `Di., 8. Dez. 2026`.
pub fn date(d: Date) -> String {
    let m = usize::from(u8::from(d.month())) - 1;
    match i18n::current() {
        Lang::En => format!(
            "{} {} {} {}",
            weekday(d.weekday()),
            d.day(),
            EN_MONTHS[m],
            d.year()
        ),
        Lang::De => format!(
            "{} {}. {} {}",
            weekday(d.weekday()),
            d.day(),
            DE_MONTHS[m],
            d.year()
        ),
    }
}

/// A time in UTC (the offset it was given in is named when not UTC).
pub fn time(t: OffsetDateTime) -> String {
    let offset = t.offset();
    let label = if offset == UtcOffset::UTC {
        "UTC".to_owned()
    } else {
        let (h, m, _) = offset.as_hms();
        format!(
            "UTC{}{:02}:{:02}",
            if h < 0 || m < 0 { '-' } else { '+' },
            h.abs(),
            m.abs()
        )
    };
    format!(
        "{}, {:02}:{:02} {label}",
        date(t.date()),
        t.hour(),
        t.minute()
    )
}

/// Any value as a person reads it, by its shape: an amount as money, a
/// date or a time as such, a list joined, text as is (hidden characters
/// shown).
pub fn value(v: &Value) -> String {
    if let Some(a) = Amount::from_json(v) {
        return amount(a);
    }
    match v {
        Value::String(s) => {
            if let Some(d) = limits::parse_date(s) {
                date(d)
            } else if let Some(t) = limits::parse_time(s) {
                time(t)
            } else {
                hidden_chars::visible(s)
            }
        }
        Value::Array(items) => items.iter().map(value).collect::<Vec<_>>().join(", "),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        Value::Object(o) => {
            if let (Some(from), Some(to)) = (o.get("from"), o.get("to").or_else(|| o.get("until")))
            {
                i18n::t2("limit-range", "from", value(from), "to", value(to))
            } else {
                hidden_chars::visible(&v.to_string())
            }
        }
    }
}

/// A limit's value as the `{field}` of a type's sentence.
fn shown(limit: &Limit) -> String {
    match limit {
        Limit::Equals(s) => hidden_chars::visible(s),
        Limit::OneOf(list) => list
            .iter()
            .map(|s| hidden_chars::visible(s))
            .collect::<Vec<_>>()
            .join(", "),
        Limit::AtMost(a) | Limit::Total(a) => amount(*a),
        Limit::Calls(n) => n.to_string(),
        // A window of one day is that day ("Tue 8 Dec 2026").
        Limit::Days { from, to } if from == to => date(*from),
        Limit::Days { from, to } => i18n::t2("limit-range", "from", date(*from), "to", date(*to)),
        Limit::Times { from, until } => {
            i18n::t2("limit-range", "from", time(*from), "to", time(*until))
        }
    }
}

fn label(field: &str, spec: &FieldSpec) -> String {
    if spec.label.is_empty() {
        field.to_owned()
    } else {
        hidden_chars::visible(&spec.label)
    }
}

/// One limit on its own: "extra charge: at most €5.00"; a zero amount
/// allows none of it: "no extra charge".
pub fn limit(label: &str, limit: &Limit) -> String {
    let key = match limit {
        Limit::AtMost(a) if a.minor == 0 => return i18n::t1("limit-none", "label", label),
        Limit::Equals(_) => "limit-equals",
        Limit::OneOf(_) => "limit-one-of",
        Limit::AtMost(_) => "limit-at-most",
        Limit::Total(_) => "limit-total",
        Limit::Days { .. } | Limit::Times { .. } => "limit-window",
        Limit::Calls(n) => {
            return i18n::t2("limit-calls", "label", label, "n", *n);
        }
    };
    i18n::t2(key, "label", label, "value", shown(limit))
}

/// The sentence for one granted entry: the type's own words with the values
/// filled in, then a sentence for each set field the words do not mention.
pub fn entry(
    type_name: &str,
    declared: &DetailsType,
    values: &serde_json::Map<String, Value>,
) -> String {
    let mut text = if declared.description.is_empty() {
        i18n::t1("consent-detail-undescribed", "type", type_name)
    } else {
        declared.description.clone()
    };
    let mut extra = Vec::new();
    for (field, spec) in &declared.fields {
        let Some(v) = values.get(field) else {
            continue;
        };
        let placeholder = format!("{{{field}}}");
        let parsed = limits::parse(spec.kind, &spec.values, v);
        if text.contains(&placeholder) {
            let shown = parsed.as_ref().map_or_else(|| value(v), shown);
            text = text.replace(&placeholder, &shown);
        } else if let Some(l) = &parsed {
            extra.push(limit(&label(field, spec), l));
        }
    }
    let mut text = hidden_chars::visible(&text);
    for e in extra {
        text.push_str("; ");
        text.push_str(&e);
    }
    text
}

/// An entry whose type is not known: named, never hidden.
pub fn unknown_entry(type_name: &str) -> String {
    hidden_chars::visible(&i18n::t1("consent-detail-unknown-type", "type", type_name))
}

/// How much of a consumed limit is used: "1 of 1 moves used", "€15.00 of
/// €50.00 used".
pub fn usage(field: &str, spec: &FieldSpec, cap: i64, used: i64, currency: Option<&str>) -> String {
    let l = label(field, spec);
    match (spec.kind, currency.and_then(money::currency)) {
        (FieldKind::CumulativeAmount, Some(c)) => {
            let of = |minor| amount(Amount { currency: c, minor });
            i18n::t3(
                "limit-used-amount",
                "label",
                l,
                "used",
                of(used),
                "cap",
                of(cap),
            )
        }
        _ => i18n::t3("limit-used-calls", "label", l, "used", used, "cap", cap),
    }
}

/// Why a call needs the person's approval: the limit it goes beyond.
pub fn beyond(b: &Beyond) -> String {
    let label = if b.label.is_empty() {
        b.field.clone()
    } else {
        hidden_chars::visible(&b.label)
    };
    match (b.why, &b.limit) {
        (BeyondWhy::NotCovered, _) | (_, None) => i18n::t("limit-beyond-not-covered"),
        (BeyondWhy::Exhausted, Some(l)) => i18n::t2(
            "limit-beyond-used-up",
            "limit",
            limit(&label, l),
            "label",
            label.clone(),
        ),
        (BeyondWhy::Value, Some(l)) => i18n::t1("limit-beyond-value", "limit", limit(&label, l)),
    }
}

/// One call in plain words: the tool's `summary` with each `{arg}` filled
/// in by the argument's value, or its description and the arguments. An
/// argument the summary does not name is said after it: the person decides
/// on the whole call, so a summary that leaves out the fee cannot hide the
/// EUR 900 that broke the limit.
pub fn operation(tool: &str, summary: &str, description: &str, args: &Value) -> String {
    let obj = args.as_object();
    if !summary.is_empty() {
        let mut text = summary.to_owned();
        let mut unnamed = Vec::new();
        if let Some(obj) = obj {
            for (name, v) in obj {
                let placeholder = format!("{{{name}}}");
                if summary.contains(&placeholder) {
                    text = text.replace(&placeholder, &value(v));
                } else {
                    unnamed.push(format!("{name}: {}", value(v)));
                }
            }
        }
        if !unnamed.is_empty() {
            text = format!("{text} ({})", unnamed.join(", "));
        }
        return hidden_chars::visible(&text);
    }
    let head = if description.is_empty() {
        tool.to_owned()
    } else {
        description.to_owned()
    };
    let parts: Vec<String> = obj
        .map(|o| {
            o.iter()
                .map(|(k, v)| format!("{k}: {}", value(v)))
                .collect()
        })
        .unwrap_or_default();
    hidden_chars::visible(&if parts.is_empty() {
        head
    } else {
        format!("{head} ({})", parts.join(", "))
    })
}

/// A grant's limits for the person and staff, each with how much of it is
/// used ("1 of 1 cancellations used"), and the calls allowed once.
pub fn grant_lines(
    terms: &crate::domain::terms::Terms,
    usage: &std::collections::HashMap<uuid::Uuid, pact_db::budgets::Usage>,
) -> Vec<String> {
    let mut out = Vec::new();
    if terms.v != crate::domain::terms::VERSION {
        out.push(i18n::t("limit-unreadable"));
        return out;
    }
    for e in &terms.entries {
        let Some(declared) = &e.declared else {
            out.push(unknown_entry(&e.type_name));
            continue;
        };
        let mut line = entry(&e.type_name, declared, &e.values);
        for (field, budget) in &e.budgets {
            if let (Some(spec), Some(u)) = (declared.fields.get(field), usage.get(budget)) {
                line.push_str(" — ");
                line.push_str(&self::usage(
                    field,
                    spec,
                    u.cap,
                    u.used,
                    u.currency.as_deref(),
                ));
            }
        }
        out.push(line);
    }
    for o in &terms.operations {
        let used = usage.get(&o.budget).is_some_and(|u| u.used >= u.cap);
        let tool = o.tool.replace(['_', '-'], " ");
        out.push(if used {
            i18n::t1("limit-once-used", "tool", tool.trim())
        } else {
            i18n::t1("limit-once-open", "tool", tool.trim())
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn in_lang<T>(lang: Lang, f: impl FnOnce() -> T) -> T {
        i18n::with_lang(lang, f)
    }

    #[test]
    fn values_read_by_their_shape_in_each_language() {
        let fee = json!({"currency": "EUR", "amount": "15.00"});
        assert_eq!(in_lang(Lang::En, || value(&fee)), "€15.00");
        assert_eq!(in_lang(Lang::De, || value(&fee)), "15,00\u{a0}€");
        assert_eq!(
            in_lang(Lang::En, || value(&json!("2026-12-08"))),
            "Tue 8 Dec 2026"
        );
        assert_eq!(
            in_lang(Lang::De, || value(&json!("2026-12-08"))),
            "Di. 8. Dez. 2026"
        );
        assert_eq!(
            in_lang(Lang::En, || value(&json!("2026-12-08T09:30:00Z"))),
            "Tue 8 Dec 2026, 09:30 UTC"
        );
        assert_eq!(in_lang(Lang::En, || value(&json!(["A", "B"]))), "A, B");
        assert_eq!(
            in_lang(Lang::En, || value(&json!("K7\u{202e}PQ"))),
            "K7[U+202E]PQ"
        );
    }

    #[test]
    fn an_operation_reads_as_the_tools_summary_filled_in() {
        let args = json!({"booking_id": "K7PQ2M", "new_date": "2026-12-08",
                          "fee": {"currency": "EUR", "amount": "15.00"}});
        assert_eq!(
            in_lang(Lang::En, || operation(
                "rebook",
                "Move booking {booking_id} to {new_date} — extra charge {fee}",
                "",
                &args
            )),
            "Move booking K7PQ2M to Tue 8 Dec 2026 — extra charge €15.00"
        );
        // What the summary leaves out is said after it.
        assert_eq!(
            in_lang(Lang::En, || operation(
                "rebook",
                "Move booking {booking_id} to {new_date}",
                "",
                &args
            )),
            "Move booking K7PQ2M to Tue 8 Dec 2026 (fee: €15.00)"
        );
        assert_eq!(
            in_lang(Lang::En, || operation(
                "rebook",
                "",
                "Move a booking",
                &json!({"booking_id": "K7PQ2M"})
            )),
            "Move a booking (booking_id: K7PQ2M)"
        );
    }

    #[test]
    fn every_set_field_of_an_entry_is_said() {
        let t: DetailsType = serde_json::from_value(json!({
            "scope": "bookings:change",
            "description": "Move booking {booking_ids}",
            "fields": {
                "booking_ids": {"type": "string_array"},
                "max_fee": {"type": "amount", "label": "extra charge"},
                "moves": {"type": "count", "label": "moves"}
            }
        }))
        .unwrap();
        let values = json!({"booking_ids": ["K7PQ2M"], "max_fee": {"currency": "EUR", "amount": "0.00"}, "moves": 1});
        let text = in_lang(Lang::En, || {
            entry("booking_change", &t, values.as_object().unwrap())
        });
        assert_eq!(
            text,
            "Move booking K7PQ2M; no extra charge; moves: at most 1"
        );
        let de = in_lang(Lang::De, || {
            entry("booking_change", &t, values.as_object().unwrap())
        });
        assert!(de.contains("ohne extra charge"), "{de}");
        let fee = serde_json::Map::from_iter([(
            "max_fee".to_owned(),
            json!({"currency": "EUR", "amount": "5.00"}),
        )]);
        assert_eq!(
            in_lang(Lang::En, || entry("booking_change", &t, &fee)),
            "Move booking {booking_ids}; extra charge: at most €5.00"
        );
        let day = Limit::Days {
            from: time::macros::date!(2026 - 12 - 08),
            to: time::macros::date!(2026 - 12 - 08),
        };
        assert_eq!(
            in_lang(Lang::En, || limit("new date", &day)),
            "new date: only Tue 8 Dec 2026"
        );
        let spec = &t.fields["moves"];
        assert_eq!(
            in_lang(Lang::En, || usage("moves", spec, 1, 1, None)),
            "1 of 1 moves used"
        );
        let total: FieldSpec =
            serde_json::from_value(json!({"type": "cumulative_amount"})).unwrap();
        assert_eq!(
            in_lang(Lang::En, || usage(
                "budget",
                &total,
                5000,
                1500,
                Some("EUR")
            )),
            "budget: €15.00 of €50.00 used"
        );
    }
}
