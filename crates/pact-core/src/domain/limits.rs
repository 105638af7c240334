//! The kinds of limit a brand's `authorization_details` field can hold, and
//! each kind's three rules (PACT §5.7, RFC 9396 §2 "the type determines the
//! fields"): what an entry may carry, whether the person's choice at
//! consent only narrows what the agent asked for (RFC 9396 §7: grant less,
//! never more), and whether a tool call's argument stays inside the limit.
//!
//! | kind | entry value | a call's argument |
//! |---|---|---|
//! | `string` | `"K7PQ2M"` | equal |
//! | `string_array` | `["SHOP-1001", "SHOP-1002"]` | one of them |
//! | `enum` | a subset of the declared `values` | one of the subset |
//! | `amount` | `{"currency": "EUR", "amount": "20.00"}` | an amount of that currency, at most it |
//! | `count` | `1` (calls allowed) | none: each call uses one |
//! | `cumulative_amount` | `{"currency": "EUR", "amount": "50.00"}` | an amount; the calls' sum stays within it |
//! | `date_window` | `{"from": "2026-12-07", "to": "2026-12-11"}` | a date (or an RFC 3339 time) on one of those days |
//! | `time_window` | `{"from": "…T09:00:00Z", "until": "…T17:00:00Z"}` | an RFC 3339 time, from ≤ t < until |
//!
//! `count` and `cumulative_amount` are consumed: the gateway charges a
//! budget row per granted entry atomically before it forwards a call.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::money::Amount;

/// Values per array field, and the longest string value in characters (as
/// an enum's declared values are counted, `authz_details::check_type`, so
/// every value a brand can declare can also be asked for).
pub const MAX_ARRAY_VALUES: usize = 64;
pub const MAX_STRING_LEN: usize = 256;
/// The most calls a `count` may allow.
pub const MAX_COUNT: i64 = 1_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    String,
    StringArray,
    Enum,
    Amount,
    Count,
    CumulativeAmount,
    DateWindow,
    TimeWindow,
}

impl FieldKind {
    /// Consumed per call, so charged against a budget row.
    pub fn is_budget(self) -> bool {
        matches!(self, Self::Count | Self::CumulativeAmount)
    }

    /// The kind names as the declaration spells them.
    pub const ALL: [FieldKind; 8] = [
        Self::String,
        Self::StringArray,
        Self::Enum,
        Self::Amount,
        Self::Count,
        Self::CumulativeAmount,
        Self::DateWindow,
        Self::TimeWindow,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::StringArray => "string_array",
            Self::Enum => "enum",
            Self::Amount => "amount",
            Self::Count => "count",
            Self::CumulativeAmount => "cumulative_amount",
            Self::DateWindow => "date_window",
            Self::TimeWindow => "time_window",
        }
    }
}

/// A parsed entry value: what a limit allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    Equals(String),
    OneOf(Vec<String>),
    AtMost(Amount),
    Calls(i64),
    Total(Amount),
    Days {
        from: Date,
        to: Date,
    },
    Times {
        from: OffsetDateTime,
        until: OffsetDateTime,
    },
}

const DAY: &[time::format_description::FormatItem<'static>] =
    format_description!("[year]-[month]-[day]");

pub fn parse_date(s: &str) -> Option<Date> {
    // Exactly YYYY-MM-DD: the parser alone would also take a longer year.
    if s.len() != 10 {
        return None;
    }
    Date::parse(s, DAY).ok()
}

pub fn format_date(d: Date) -> String {
    d.format(DAY).unwrap_or_default()
}

pub fn parse_time(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s, &Rfc3339).ok()
}

fn plain_string(v: &Value) -> Option<&str> {
    v.as_str()
        .filter(|s| !s.is_empty() && s.chars().count() <= MAX_STRING_LEN)
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    let items = v.as_array()?;
    if items.is_empty() || items.len() > MAX_ARRAY_VALUES {
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let s = plain_string(item)?.to_owned();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Some(out)
}

/// Parses an entry's value for a field of `kind` (`allowed`: an enum's
/// declared values). `None`: the value has the wrong shape.
pub fn parse(kind: FieldKind, allowed: &[String], v: &Value) -> Option<Limit> {
    match kind {
        FieldKind::String => plain_string(v).map(|s| Limit::Equals(s.to_owned())),
        FieldKind::StringArray => string_list(v).map(Limit::OneOf),
        FieldKind::Enum => {
            // One value may be given on its own.
            let list = match v {
                Value::String(_) => string_list(&Value::Array(vec![v.clone()])),
                _ => string_list(v),
            }?;
            list.iter()
                .all(|x| allowed.contains(x))
                .then_some(Limit::OneOf(list))
        }
        FieldKind::Amount => Amount::from_json(v).map(Limit::AtMost),
        FieldKind::CumulativeAmount => Amount::from_json(v).map(Limit::Total),
        // A JSON integer only: `1.0` and `"1"` are refused.
        FieldKind::Count => v
            .as_i64()
            .filter(|n| (1..=MAX_COUNT).contains(n))
            .map(Limit::Calls),
        FieldKind::DateWindow => {
            let o = v.as_object().filter(|o| o.len() == 2)?;
            let from = parse_date(o.get("from")?.as_str()?)?;
            let to = parse_date(o.get("to")?.as_str()?)?;
            (from <= to).then_some(Limit::Days { from, to })
        }
        FieldKind::TimeWindow => {
            let o = v.as_object().filter(|o| o.len() == 2)?;
            let from = parse_time(o.get("from")?.as_str()?)?;
            let until = parse_time(o.get("until")?.as_str()?)?;
            (from < until).then_some(Limit::Times { from, until })
        }
    }
}

impl Limit {
    /// The wire form (canonical: amounts with their minor digits).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Equals(s) => Value::String(s.clone()),
            Self::OneOf(v) => Value::Array(v.iter().cloned().map(Value::String).collect()),
            Self::AtMost(a) | Self::Total(a) => a.to_json(),
            Self::Calls(n) => Value::from(*n),
            Self::Days { from, to } => {
                serde_json::json!({"from": format_date(*from), "to": format_date(*to)})
            }
            Self::Times { from, until } => serde_json::json!({
                "from": from.format(&Rfc3339).unwrap_or_default(),
                "until": until.format(&Rfc3339).unwrap_or_default(),
            }),
        }
    }

    /// Whether `self` (the person's choice) allows nothing `requested` does
    /// not: the same string, a non-empty subset, a lower amount of the same
    /// currency, fewer calls, a window inside the requested one.
    pub fn narrows(&self, requested: &Limit) -> bool {
        match (self, requested) {
            (Self::Equals(a), Self::Equals(b)) => a == b,
            (Self::OneOf(a), Self::OneOf(b)) => !a.is_empty() && a.iter().all(|x| b.contains(x)),
            (Self::AtMost(a), Self::AtMost(b)) | (Self::Total(a), Self::Total(b)) => {
                a.same_currency(*b) && a.minor <= b.minor
            }
            (Self::Calls(a), Self::Calls(b)) => *a >= 1 && a <= b,
            (Self::Days { from: f, to: t }, Self::Days { from: rf, to: rt }) => f >= rf && t <= rt,
            (
                Self::Times { from: f, until: u },
                Self::Times {
                    from: rf,
                    until: ru,
                },
            ) => f >= rf && u <= ru,
            _ => false,
        }
    }

    /// What a call's argument is checked against, for the limits that look
    /// at one (all but `count`).
    pub fn admits(&self, arg: &Value) -> Admits {
        match self {
            Self::Equals(s) => match arg.as_str() {
                Some(a) if a == s => Admits::Yes,
                Some(_) => Admits::Beyond,
                None => Admits::Malformed,
            },
            Self::OneOf(list) => match arg.as_str() {
                Some(a) if list.iter().any(|x| x == a) => Admits::Yes,
                Some(_) => Admits::Beyond,
                None => Admits::Malformed,
            },
            Self::AtMost(max) => match Amount::from_json(arg) {
                Some(a) if a.same_currency(*max) && a.minor <= max.minor => Admits::Yes,
                Some(_) => Admits::Beyond,
                None => Admits::Malformed,
            },
            Self::Total(total) => match Amount::from_json(arg) {
                // Whether it fits what is left is the budget's question.
                Some(a) if a.same_currency(*total) => Admits::Charge(a.minor),
                Some(_) => Admits::Beyond,
                None => Admits::Malformed,
            },
            Self::Calls(_) => Admits::Charge(1),
            Self::Days { from, to } => {
                let Some(s) = arg.as_str() else {
                    return Admits::Malformed;
                };
                let within = |d: time::Date| d >= *from && d <= *to;
                // A date, or a time whose day is in the window both as written
                // and in UTC: the day of "2026-12-08T23:30:00-12:00" is the
                // 8th where it was written and the 9th in UTC, and a merchant
                // may read it either way, so an offset must not carry a call
                // out of the days the person approved.
                let days = parse_date(s).map(|d| (d, d)).or_else(|| {
                    parse_time(s).map(|t| (t.date(), t.to_offset(time::UtcOffset::UTC).date()))
                });
                match days {
                    Some((written, utc)) if within(written) && within(utc) => Admits::Yes,
                    Some(_) => Admits::Beyond,
                    None => Admits::Malformed,
                }
            }
            Self::Times { from, until } => match arg.as_str().and_then(parse_time) {
                Some(t) if t >= *from && t < *until => Admits::Yes,
                Some(_) => Admits::Beyond,
                None => Admits::Malformed,
            },
        }
    }

    /// The budget a consumed limit starts with: calls, or minor units.
    pub fn budget(&self) -> Option<(i64, Option<&'static str>)> {
        match self {
            Self::Calls(n) => Some((*n, None)),
            Self::Total(a) => Some((a.minor, Some(a.currency))),
            _ => None,
        }
    }
}

/// A limit's answer to one argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admits {
    Yes,
    /// Allowed once this much is charged to the limit's budget.
    Charge(i64),
    /// A well-formed argument outside the limit: the person may be asked.
    Beyond,
    /// Missing or of the wrong shape: refused, nothing to ask about.
    Malformed,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn limit(kind: FieldKind, v: Value) -> Limit {
        parse(kind, &["economy".into(), "flex".into()], &v).unwrap()
    }

    /// A value is as long as its characters: what a brand may declare (256
    /// characters, `authz_details::check_type`) an agent may ask for, also
    /// in a script of two bytes a character.
    #[test]
    fn string_values_are_counted_in_characters() {
        let long = "é".repeat(MAX_STRING_LEN);
        let declared = [long.clone()];
        assert!(parse(FieldKind::String, &[], &json!(long)).is_some());
        assert!(parse(FieldKind::Enum, &declared, &json!([long])).is_some());
        let too_long = "é".repeat(MAX_STRING_LEN + 1);
        assert!(parse(FieldKind::String, &[], &json!(too_long)).is_none());
    }

    #[test]
    fn each_kind_takes_its_own_shape_only() {
        let ok: &[(FieldKind, Value)] = &[
            (FieldKind::String, json!("K7PQ2M")),
            (FieldKind::StringArray, json!(["a", "b"])),
            (FieldKind::Enum, json!(["flex"])),
            (FieldKind::Enum, json!("flex")),
            (
                FieldKind::Amount,
                json!({"currency": "EUR", "amount": "20.00"}),
            ),
            (FieldKind::Count, json!(1)),
            (
                FieldKind::CumulativeAmount,
                json!({"currency": "EUR", "amount": "50"}),
            ),
            (
                FieldKind::DateWindow,
                json!({"from": "2026-12-07", "to": "2026-12-11"}),
            ),
            (
                FieldKind::TimeWindow,
                json!({"from": "2026-12-07T09:00:00Z", "until": "2026-12-07T17:00:00Z"}),
            ),
        ];
        for (kind, v) in ok {
            assert!(
                parse(*kind, &["economy".into(), "flex".into()], v).is_some(),
                "{kind:?} {v}"
            );
        }
        let bad: &[(FieldKind, Value)] = &[
            (FieldKind::String, json!("")),
            (FieldKind::String, json!(1)),
            (FieldKind::StringArray, json!([])),
            (FieldKind::StringArray, json!([1])),
            (FieldKind::Enum, json!(["first"])),
            (FieldKind::Amount, json!({"currency": "EUR", "amount": 20})),
            (
                FieldKind::Amount,
                json!({"currency": "EUR", "amount": "-1"}),
            ),
            (FieldKind::Count, json!(0)),
            (FieldKind::Count, json!(1.5)),
            (FieldKind::Count, json!("1")),
            (FieldKind::Count, json!(MAX_COUNT + 1)),
            (
                FieldKind::DateWindow,
                json!({"from": "2026-12-11", "to": "2026-12-07"}),
            ),
            (FieldKind::DateWindow, json!({"from": "2026-12-07"})),
            (
                FieldKind::DateWindow,
                json!({"from": "+2026-12-07", "to": "2026-12-11"}),
            ),
            (
                FieldKind::TimeWindow,
                json!({"from": "2026-12-07T09:00:00Z", "until": "2026-12-07T09:00:00Z"}),
            ),
        ];
        for (kind, v) in bad {
            assert!(
                parse(*kind, &["economy".into(), "flex".into()], v).is_none(),
                "{kind:?} {v}"
            );
        }
    }

    #[test]
    fn a_time_in_a_date_window_is_inside_on_both_readings_of_its_day() {
        let one_day = limit(
            FieldKind::DateWindow,
            json!({"from": "2026-12-08", "to": "2026-12-08"}),
        );
        for (arg, want) in [
            ("2026-12-08", Admits::Yes),
            ("2026-12-08T12:00:00Z", Admits::Yes),
            ("2026-12-08T10:00:00+02:00", Admits::Yes),
            // The 8th where written, the 9th in UTC.
            ("2026-12-08T23:30:00-12:00", Admits::Beyond),
            // The 8th where written, the 7th in UTC.
            ("2026-12-08T05:00:00+14:00", Admits::Beyond),
            ("2026-12-09", Admits::Beyond),
            ("the 8th", Admits::Malformed),
        ] {
            assert_eq!(one_day.admits(&json!(arg)), want, "{arg}");
        }
    }

    #[test]
    fn the_persons_choice_may_only_narrow_what_was_asked() {
        let eur = |a: &str| json!({"currency": "EUR", "amount": a});
        let cases = [
            (
                FieldKind::StringArray,
                json!(["a"]),
                json!(["a", "b"]),
                true,
            ),
            (
                FieldKind::StringArray,
                json!(["a", "c"]),
                json!(["a", "b"]),
                false,
            ),
            (FieldKind::Amount, eur("10"), eur("20"), true),
            (FieldKind::Amount, eur("20.01"), eur("20"), false),
            (
                FieldKind::Amount,
                json!({"currency": "USD", "amount": "1"}),
                eur("20"),
                false,
            ),
            (FieldKind::Count, json!(1), json!(3), true),
            (FieldKind::Count, json!(4), json!(3), false),
            (FieldKind::CumulativeAmount, eur("30"), eur("50"), true),
            (FieldKind::CumulativeAmount, eur("60"), eur("50"), false),
            (
                FieldKind::DateWindow,
                json!({"from": "2026-12-08", "to": "2026-12-09"}),
                json!({"from": "2026-12-07", "to": "2026-12-11"}),
                true,
            ),
            (
                FieldKind::DateWindow,
                json!({"from": "2026-12-06", "to": "2026-12-09"}),
                json!({"from": "2026-12-07", "to": "2026-12-11"}),
                false,
            ),
            (FieldKind::String, json!("x"), json!("y"), false),
        ];
        for (kind, chosen, requested, narrows) in cases {
            assert_eq!(
                limit(kind, chosen.clone()).narrows(&limit(kind, requested.clone())),
                narrows,
                "{kind:?}: {chosen} within {requested}"
            );
        }
    }

    #[test]
    fn a_call_argument_is_inside_beyond_or_malformed() {
        let eur = |a: &str| json!({"currency": "EUR", "amount": a});
        let fee = limit(FieldKind::Amount, eur("0"));
        assert_eq!(fee.admits(&eur("0.00")), Admits::Yes);
        assert_eq!(fee.admits(&eur("15.00")), Admits::Beyond);
        assert_eq!(
            fee.admits(&json!({"currency": "USD", "amount": "0"})),
            Admits::Beyond
        );
        assert_eq!(fee.admits(&json!(0)), Admits::Malformed);
        assert_eq!(fee.admits(&json!("0.00")), Admits::Malformed);
        let total = limit(FieldKind::CumulativeAmount, eur("50"));
        assert_eq!(total.admits(&eur("15")), Admits::Charge(1500));
        assert_eq!(
            limit(FieldKind::Count, json!(1)).admits(&Value::Null),
            Admits::Charge(1)
        );
        let week = limit(
            FieldKind::DateWindow,
            json!({"from": "2026-12-07", "to": "2026-12-11"}),
        );
        assert_eq!(week.admits(&json!("2026-12-08")), Admits::Yes);
        assert_eq!(week.admits(&json!("2026-12-11T23:00:00Z")), Admits::Yes);
        assert_eq!(week.admits(&json!("2026-12-12")), Admits::Beyond);
        assert_eq!(week.admits(&json!("next tuesday")), Admits::Malformed);
        let shift = limit(
            FieldKind::TimeWindow,
            json!({"from": "2026-12-07T09:00:00Z", "until": "2026-12-07T17:00:00Z"}),
        );
        assert_eq!(shift.admits(&json!("2026-12-07T09:00:00Z")), Admits::Yes);
        assert_eq!(shift.admits(&json!("2026-12-07T17:00:00Z")), Admits::Beyond);
        assert_eq!(
            shift.admits(&json!("2026-12-07T10:00:00+02:00")),
            Admits::Beyond
        );
        let orders = limit(FieldKind::StringArray, json!(["SHOP-1001"]));
        assert_eq!(orders.admits(&json!("SHOP-1001")), Admits::Yes);
        assert_eq!(orders.admits(&json!("SHOP-1002")), Admits::Beyond);
        assert_eq!(orders.admits(&json!(["SHOP-1001"])), Admits::Malformed);
        assert_eq!(orders.admits(&json!(1001)), Admits::Malformed);
    }
}
