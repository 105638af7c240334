//! The OAuth endpoints' form parser, `pact_server::oauth::form::parse`
//! (RFC 6749 §3.1: no repeated parameters, empty values count as absent),
//! and the typed form the token endpoint reads through it
//! (`form::decode::<TokenForm>`), on arbitrary bytes.
//!
//! Checks: no panic; a refusal answers 400 `invalid_request` in RFC 6749's JSON
//! (never a 5xx); an accepted body has no empty value, and serialising the
//! result and parsing it again gives the same parameters; the typed form is
//! accepted exactly when the parser accepts, with each field the parser's
//! value of that name.

use axum::response::IntoResponse as _;
use pact_server::oauth::OAuthFailure;
use pact_server::oauth::form::{TokenForm, decode, parse};

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    let typed = decode::<TokenForm>(data);
    match parse(data) {
        Ok(params) => {
            let form = typed.expect("a form the parser accepts decodes");
            let field = |name: &str| params.get(name).map(String::as_str);
            assert_eq!(form.grant_type.as_deref(), field("grant_type"));
            assert_eq!(form.client_id.as_deref(), field("client_id"));
            assert_eq!(form.device_code.as_deref(), field("device_code"));
            assert_eq!(form.refresh_token.as_deref(), field("refresh_token"));
            assert_eq!(form.scope.as_deref(), field("scope"));
            assert_eq!(
                form.authorization_details.as_deref(),
                field("authorization_details")
            );
            assert!(params.values().all(|v| !v.is_empty()), "empty value kept");
            #[cfg(feature = "strict-nul")]
            assert!(
                params
                    .iter()
                    .all(|(k, v)| !k.contains('\0') && !v.contains('\0')),
                "NUL byte accepted"
            );
            let mut ser = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &params {
                ser.append_pair(k, v);
            }
            let again = parse(ser.finish().as_bytes()).expect("re-serialised form parses");
            assert_eq!(again, params, "round trip changed the parameters");
        }
        Err(failure) => {
            assert!(
                typed.is_err(),
                "the typed form accepted what the parser refused"
            );
            assert!(
                matches!(failure, OAuthFailure::Protocol(_)),
                "not a protocol error"
            );
            let response = failure.into_response();
            let status = response.status();
            assert!(status.is_client_error(), "refusal answered {status}");
        }
    }
}
