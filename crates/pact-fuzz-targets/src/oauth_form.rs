//! The OAuth endpoints' form parser, `pact_server::oauth::form::parse`
//! (RFC 6749 §3.1: no repeated parameters, empty values count as absent),
//! on arbitrary bytes.
//!
//! Checks: no panic; a refusal answers 400 `invalid_request` in RFC 6749's JSON
//! (never a 5xx); an accepted body has no empty value, and serialising the
//! result and parsing it again gives the same parameters.

use axum::response::IntoResponse as _;
use pact_server::oauth::OAuthFailure;
use pact_server::oauth::form::parse;

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    match parse(data) {
        Ok(params) => {
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
                matches!(failure, OAuthFailure::Protocol(_)),
                "not a protocol error"
            );
            let response = failure.into_response();
            let status = response.status();
            assert!(status.is_client_error(), "refusal answered {status}");
        }
    }
}
