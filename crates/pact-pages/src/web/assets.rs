//! The stylesheet and the WebAuthn script, embedded in the binary so a
//! deployment is one file; served with a short public cache.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const STYLE: &str = include_str!("../../../../static/style.css");
const WEBAUTHN_JS: &str = include_str!("../../../../static/webauthn.js");
const CODES_JS: &str = include_str!("../../../../static/codes.js");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    res
}

pub async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

pub async fn webauthn_js() -> Response {
    asset(WEBAUTHN_JS, "text/javascript; charset=utf-8")
}

/// The recovery codes page's copy button (the download link needs no script).
pub async fn codes_js() -> Response {
    asset(CODES_JS, "text/javascript; charset=utf-8")
}
