//! `application/x-www-form-urlencoded` bodies for the OAuth endpoints.

use std::collections::HashMap;

use pact_proto::oauth::OAuthErrorCode;

use super::OAuthFailure;

/// Parses a form body. RFC 6749 §3.1: parameters must not repeat; empty
/// values count as absent.
pub fn parse(body: &[u8]) -> Result<HashMap<String, String>, OAuthFailure> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if v.is_empty() {
            continue;
        }
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(OAuthFailure::new(
                OAuthErrorCode::InvalidRequest,
                format!("parameter {k} is repeated"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_parameters_are_refused_and_empty_ones_ignored() {
        let f = parse(b"a=1&b=&c=x%20y").unwrap();
        assert_eq!(f.get("a").map(String::as_str), Some("1"));
        assert!(!f.contains_key("b"));
        assert_eq!(f.get("c").map(String::as_str), Some("x y"));
        assert!(parse(b"a=1&a=2").is_err());
    }
}
