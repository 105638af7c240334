//! Query strings and JSON bodies of the admin API, read by hand so that every
//! refusal has the API's own error shape (axum's rejections are plain text).

use std::collections::HashMap;

use axum::http::Uri;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::ids::GrantId;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::AdminApiError;

/// Page sizes: 50 unless asked, at most 200.
pub const DEFAULT_LIMIT: i64 = 50;
pub const MAX_LIMIT: i64 = 200;

/// The query parameters, each at most once and each one of `allowed`.
pub fn query(uri: &Uri, allowed: &[&str]) -> Result<HashMap<String, String>, AdminApiError> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        if !allowed.contains(&k.as_ref()) {
            return Err(AdminApiError::invalid(format!(
                "unknown query parameter {k:?}; this operation takes {}",
                allowed.join(", ")
            )));
        }
        if v.chars().any(char::is_control) || v.chars().count() > 512 {
            return Err(AdminApiError::invalid(format!(
                "query parameter {k:?} is too long or has control characters"
            )));
        }
        if out.insert(k.clone().into_owned(), v.into_owned()).is_some() {
            return Err(AdminApiError::invalid(format!(
                "query parameter {k:?} given twice"
            )));
        }
    }
    Ok(out)
}

/// A field that may be left out but, when given, is a value: `null` is
/// refused (with `#[serde(default)]`, absent reads as `None`), for a field
/// whose schema does not say `null`.
pub fn given<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `limit`: 1–200.
pub fn limit(q: &HashMap<String, String>) -> Result<i64, AdminApiError> {
    match q.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<i64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(AdminApiError::invalid(format!(
                "limit must be an integer from 1 to {MAX_LIMIT}"
            ))),
        },
    }
}

/// A JSON body (an empty body is `{}`, for operations whose fields are all optional).
pub fn body<T: DeserializeOwned>(raw: &[u8]) -> Result<T, AdminApiError> {
    let raw: &[u8] = if raw.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        raw
    };
    serde_json::from_slice(raw)
        .map_err(|e| AdminApiError::invalid(format!("the JSON body is not valid: {e}")))
}

/// A field that must be present but may be `null`: for `#[serde(deserialize_with
/// = "params::present")]`. serde reads a missing `Option` as `None`, so without
/// this an empty body would mean "back to the default" and undo an owner's
/// choice (an allowlisting brand opened to the Provider's policy); with it the
/// body must say `null` to mean that.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// [`present`] for a whole number, which JSON may also write with a zero
/// fraction (`30.0`): JSON Schema's `integer` admits it, so the server does.
pub fn present_whole<'de, D>(d: D) -> Result<Option<i64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    match n.as_f64() {
        // Within ±2^53 every whole f64 is exact and fits an i64.
        Some(f) if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 => Ok(Some(f as i64)),
        _ => Err(serde::de::Error::custom(format!(
            "invalid value {n}, expected a whole number"
        ))),
    }
}

/// An optional free-text reason: at most 200 characters, no control, invisible or direction-changing ones.
pub fn reason(r: Option<&str>) -> Result<Option<String>, AdminApiError> {
    Ok(crate::admin::ops::reason(r)?)
}

/// An id in a path: anything but a UUID names nothing.
pub fn path_id(raw: &str) -> Result<Uuid, AdminApiError> {
    raw.parse().map_err(|_| AdminApiError::NotFound)
}

/// The opaque cursor of a grant page: the last row's creation time and id.
pub fn grant_cursor(at: OffsetDateTime, id: GrantId) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}.{id}", at.unix_timestamp_nanos()))
}

pub fn parse_grant_cursor(raw: &str) -> Result<(OffsetDateTime, GrantId), AdminApiError> {
    let text = URL_SAFE_NO_PAD
        .decode(raw)
        .map_err(|_| AdminApiError::InvalidCursor)?;
    let text = String::from_utf8(text).map_err(|_| AdminApiError::InvalidCursor)?;
    let (nanos, id) = text.split_once('.').ok_or(AdminApiError::InvalidCursor)?;
    let nanos: i128 = nanos.parse().map_err(|_| AdminApiError::InvalidCursor)?;
    let at = OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .map_err(|_| AdminApiError::InvalidCursor)?;
    Ok((at, id.parse().map_err(|_| AdminApiError::InvalidCursor)?))
}

/// The cursor of an audit page: the last entry's id.
pub fn parse_audit_cursor(raw: &str) -> Result<i64, AdminApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or(AdminApiError::InvalidCursor)
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_cursors_round_trip_and_garbage_is_refused() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_700_000_000_123_456_789).unwrap();
        let id = GrantId::new_random();
        assert_eq!(parse_grant_cursor(&grant_cursor(at, id)).unwrap(), (at, id));
        assert!(parse_grant_cursor("nope").is_err());
        assert!(parse_grant_cursor(&URL_SAFE_NO_PAD.encode("1.not-a-uuid")).is_err());
    }

    #[test]
    fn queries_refuse_unknown_and_repeated_names() {
        let uri: Uri = "/x?brand=a&limit=5".parse().unwrap();
        let q = query(&uri, &["brand", "limit"]).unwrap();
        assert_eq!(limit(&q).unwrap(), 5);
        assert!(query(&"/x?evil=1".parse().unwrap(), &["brand"]).is_err());
        assert!(query(&"/x?brand=a&brand=b".parse().unwrap(), &["brand"]).is_err());
        let q = query(&"/x?limit=0".parse().unwrap(), &["limit"]).unwrap();
        assert!(limit(&q).is_err());
    }

    #[test]
    fn reasons_are_bounded() {
        assert_eq!(reason(Some("  ")).unwrap(), None);
        assert_eq!(
            reason(Some("lost phone")).unwrap().as_deref(),
            Some("lost phone")
        );
        assert!(reason(Some(&"x".repeat(201))).is_err());
        assert!(reason(Some("a\nb")).is_err());
    }
}
