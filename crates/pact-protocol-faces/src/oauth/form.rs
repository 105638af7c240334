//! `application/x-www-form-urlencoded` bodies for the OAuth endpoints, read
//! into one typed struct per endpoint.
//!
//! RFC 6749 §3.1: a parameter must not be sent more than once, a parameter
//! sent without a value counts as absent, and parameters the endpoint does
//! not know are ignored. The structs below name every parameter an endpoint
//! reads; everything else in a body is dropped unread.

use std::collections::HashMap;

use pact_proto::oauth::OAuthErrorCode;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::OAuthFailure;

/// `POST {iface}/oauth/device_authorization` (RFC 8628 §3.1, RFC 9396 §2).
#[derive(Debug, Deserialize)]
pub struct DeviceAuthorizationForm {
    pub client_id: Option<String>,
    pub scope: Option<String>,
    pub authorization_details: Option<String>,
}

/// `POST {iface}/oauth/token`: a device-code poll (RFC 8628 §3.4) or a
/// refresh (RFC 6749 §6); each grant type reads its own parameters.
#[derive(Debug, Deserialize)]
pub struct TokenForm {
    pub grant_type: Option<String>,
    pub client_id: Option<String>,
    pub device_code: Option<String>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
    pub authorization_details: Option<String>,
}

/// `POST {iface}/oauth/revoke` (RFC 7009 §2.1). `token_type_hint` is not
/// read: every token kind is looked up anyway (§2.1 lets a server do so).
#[derive(Debug, Deserialize)]
pub struct RevokeForm {
    pub client_id: Option<String>,
    pub token: Option<String>,
}

/// `POST {iface}/oauth/introspect` (RFC 7662 §2.1).
#[derive(Debug, Deserialize)]
pub struct IntrospectForm {
    pub token: Option<String>,
}

/// Reads a form body as `T`, after refusing any repeated parameter.
pub fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, OAuthFailure> {
    let fields = parse(body)?;
    // Every value is a string and every field of the structs above an
    // optional string, so this cannot fail for them; a struct with another
    // field type would get `invalid_request` rather than a panic.
    let object = fields
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect::<serde_json::Map<_, _>>();
    serde_json::from_value(serde_json::Value::Object(object)).map_err(|_| {
        OAuthFailure::new(
            OAuthErrorCode::InvalidRequest,
            "the request's parameters could not be read",
        )
    })
}

/// The body's parameters, each once; empty values are left out. Public for
/// the fuzz target, which checks it against [`decode`].
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

    #[test]
    fn a_typed_form_reads_its_fields_and_ignores_the_rest() {
        let f: TokenForm = decode(
            b"grant_type=refresh_token&refresh_token=r%2B1&scope=&unknown=x&client_id=https%3A%2F%2Fpa",
        )
        .unwrap();
        assert_eq!(f.grant_type.as_deref(), Some("refresh_token"));
        assert_eq!(f.refresh_token.as_deref(), Some("r+1"));
        assert_eq!(f.client_id.as_deref(), Some("https://pa"));
        // Sent empty: absent (RFC 6749 §3.1).
        assert_eq!(f.scope, None);
        assert_eq!(f.device_code, None);
        // A repeat is refused even of a parameter the endpoint ignores.
        assert!(decode::<TokenForm>(b"grant_type=x&unknown=1&unknown=2").is_err());
        assert!(decode::<RevokeForm>(b"token=a&token=b").is_err());
    }
}
