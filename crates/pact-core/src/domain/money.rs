//! Amounts of money in limits (PACT §5.7, RFC 9396 §2: a type defines its
//! own fields). On the wire an amount is `{"currency": "EUR", "amount":
//! "15.00"}`, the shape of RFC 9396's own payment example: an ISO 4217
//! alphabetic code and a decimal string with at most the currency's minor
//! unit digits (ISO 4217 "exponent": 2 for EUR, 0 for JPY, 3 for KWD).
//! Inside pactd an amount is a whole number of minor units: no floating
//! point anywhere between what the person approves and what is enforced.

use serde_json::{Value, json};

/// ISO 4217 codes pactd accepts, with their minor unit digits. A currency
/// missing here is refused where it comes in (a limit pactd cannot compare
/// is no limit).
const CURRENCIES: &[(&str, u8)] = &[
    ("AED", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BRL", 2),
    ("CAD", 2),
    ("CHF", 2),
    ("CLP", 0),
    ("CNY", 2),
    ("COP", 2),
    ("CZK", 2),
    ("DKK", 2),
    ("EGP", 2),
    ("EUR", 2),
    ("GBP", 2),
    ("HKD", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("IQD", 3),
    ("ISK", 0),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("LYD", 3),
    ("MAD", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("NGN", 2),
    ("NOK", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PEN", 2),
    ("PHP", 2),
    ("PLN", 2),
    ("PYG", 0),
    ("QAR", 2),
    ("RON", 2),
    ("RWF", 0),
    ("SAR", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("THB", 2),
    ("TND", 3),
    ("TRY", 2),
    ("TWD", 2),
    ("UAH", 2),
    ("UGX", 0),
    ("USD", 2),
    ("VND", 0),
    ("XAF", 0),
    ("XOF", 0),
    ("ZAR", 2),
];

/// Amounts above this many minor units are refused (far above any real
/// limit, far below `i64::MAX`, so sums of a few never overflow).
pub const MAX_MINOR: i64 = 1_000_000_000_000_000;

/// An amount in minor units of one currency.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Amount {
    pub currency: &'static str,
    pub minor: i64,
}

/// The minor unit digits of an accepted currency.
pub fn exponent(currency: &str) -> Option<u8> {
    CURRENCIES
        .iter()
        .find(|(c, _)| *c == currency)
        .map(|(_, e)| *e)
}

/// The accepted currency of this code, as a `'static` code.
pub fn currency(code: &str) -> Option<&'static str> {
    known(code)
}

fn known(currency: &str) -> Option<&'static str> {
    CURRENCIES
        .iter()
        .find(|(c, _)| *c == currency)
        .map(|(c, _)| *c)
}

impl Amount {
    /// Parses `{"currency", "amount"}`; `None` for anything else (an unknown
    /// currency, a negative or fractional-cent amount, a number instead of a
    /// string, extra members).
    pub fn from_json(v: &Value) -> Option<Self> {
        let obj = v.as_object()?;
        if obj.len() != 2 {
            return None;
        }
        let currency = known(obj.get("currency")?.as_str()?)?;
        let minor = parse_decimal(obj.get("amount")?.as_str()?, exponent(currency)?)?;
        Some(Self { currency, minor })
    }

    /// The wire form, with exactly the currency's minor digits.
    pub fn to_json(self) -> Value {
        json!({"currency": self.currency, "amount": self.decimal()})
    }

    /// `"15.00"` for 1500 minor units of EUR.
    pub fn decimal(self) -> String {
        let e = u32::from(exponent(self.currency).unwrap_or(2));
        if e == 0 {
            return self.minor.to_string();
        }
        let unit = 10_i64.pow(e);
        let sign = if self.minor < 0 { "-" } else { "" };
        let abs = self.minor.unsigned_abs();
        let unit = unit.unsigned_abs();
        format!(
            "{sign}{}.{:0width$}",
            abs / unit,
            abs % unit,
            width = e as usize
        )
    }

    pub fn same_currency(self, other: Self) -> bool {
        self.currency == other.currency
    }
}

/// A non-negative decimal string with at most `exponent` fraction digits,
/// as minor units: `"15"`, `"15.5"` and `"15.50"` are 1550 for EUR; `"15.505"`,
/// `"-1"`, `"1e3"`, `" 1"`, `"1."` and `".5"` are refused.
pub fn parse_decimal(s: &str, exponent: u8) -> Option<i64> {
    let (whole, frac) = match s.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || whole.len() > 16 {
        return None;
    }
    let frac = match frac {
        None => "",
        Some(f) if digits(f) && f.len() <= usize::from(exponent) => f,
        Some(_) => return None,
    };
    let mut minor: i64 = whole.parse().ok()?;
    for _ in 0..exponent {
        minor = minor.checked_mul(10)?;
    }
    if !frac.is_empty() {
        let mut f: i64 = frac.parse().ok()?;
        for _ in frac.len()..usize::from(exponent) {
            f *= 10;
        }
        minor = minor.checked_add(f)?;
    }
    (minor <= MAX_MINOR).then_some(minor)
}

/// How people read amounts in a language: where the symbol goes and which
/// mark separates the minor digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `€1,234.50`, `CHF 12.00`.
    English,
    /// `1.234,50 €`, `12,00 CHF`.
    German,
}

fn symbol(currency: &str) -> Option<&'static str> {
    match currency {
        "EUR" => Some("€"),
        "USD" => Some("$"),
        "GBP" => Some("£"),
        "JPY" => Some("¥"),
        _ => None,
    }
}

/// The amount as a person reads it.
pub fn show(a: Amount, style: Style) -> String {
    let plain = a.decimal();
    let (whole, frac) = plain.split_once('.').unwrap_or((plain.as_str(), ""));
    let (group, point) = match style {
        Style::English => (',', '.'),
        Style::German => ('.', ','),
    };
    let mut grouped = String::new();
    let digits: Vec<char> = whole.trim_start_matches('-').chars().collect();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(group);
        }
        grouped.push(*c);
    }
    if whole.starts_with('-') {
        grouped.insert(0, '-');
    }
    let number = if frac.is_empty() {
        grouped
    } else {
        format!("{grouped}{point}{frac}")
    };
    match (style, symbol(a.currency)) {
        (Style::English, Some(s)) => format!("{s}{number}"),
        (Style::English, None) => format!("{} {number}", a.currency),
        (Style::German, Some(s)) => format!("{number}\u{a0}{s}"),
        (Style::German, None) => format!("{number}\u{a0}{}", a.currency),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_strings_become_minor_units_with_the_currencys_exponent() {
        for (s, e, minor) in [
            ("15", 2, Some(1500)),
            ("15.5", 2, Some(1550)),
            ("15.50", 2, Some(1550)),
            ("0.01", 2, Some(1)),
            ("0", 2, Some(0)),
            ("1000", 0, Some(1000)),
            ("1.250", 3, Some(1250)),
            ("15.505", 2, None),
            ("1.5", 0, None),
            ("-1", 2, None),
            ("+1", 2, None),
            ("1e3", 2, None),
            (" 1", 2, None),
            ("1.", 2, None),
            (".5", 2, None),
            ("", 2, None),
            ("١٢", 2, None),
            ("99999999999999999999", 2, None),
        ] {
            assert_eq!(parse_decimal(s, e), minor, "{s:?} with exponent {e}");
        }
    }

    #[test]
    fn amounts_on_the_wire_are_a_known_currency_and_a_decimal_string() {
        let a = Amount::from_json(&json!({"currency": "EUR", "amount": "15.5"})).unwrap();
        assert_eq!(a.minor, 1550);
        assert_eq!(a.to_json(), json!({"currency": "EUR", "amount": "15.50"}));
        let yen = Amount::from_json(&json!({"currency": "JPY", "amount": "1200"})).unwrap();
        assert_eq!(yen.to_json(), json!({"currency": "JPY", "amount": "1200"}));
        for bad in [
            json!({"currency": "EUR", "amount": 15}),
            json!({"currency": "EUR", "amount": 15.5}),
            json!({"currency": "eur", "amount": "15"}),
            json!({"currency": "XXX", "amount": "15"}),
            json!({"currency": "EUR"}),
            json!({"currency": "EUR", "amount": "15", "note": "x"}),
            json!("EUR 15"),
            json!({"currency": "JPY", "amount": "1.5"}),
        ] {
            assert_eq!(Amount::from_json(&bad), None, "{bad}");
        }
    }

    #[test]
    fn people_read_amounts_in_their_language() {
        let a = |c: &'static str, minor| Amount { currency: c, minor };
        assert_eq!(show(a("EUR", 1500), Style::English), "€15.00");
        assert_eq!(show(a("EUR", 123_456_789), Style::English), "€1,234,567.89");
        assert_eq!(show(a("EUR", 1500), Style::German), "15,00\u{a0}€");
        assert_eq!(show(a("EUR", 123_456), Style::German), "1.234,56\u{a0}€");
        assert_eq!(show(a("CHF", 1200), Style::English), "CHF 12.00");
        assert_eq!(show(a("JPY", 1200), Style::English), "¥1,200");
        assert_eq!(show(a("KWD", 1250), Style::German), "1,250\u{a0}KWD");
        assert_eq!(show(a("EUR", 0), Style::English), "€0.00");
    }
}
