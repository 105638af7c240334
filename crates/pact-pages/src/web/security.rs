//! Page safety rules: security headers, the Origin check, CSRF tokens, and
//! same-origin redirect targets.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

use super::page::PageError;

/// No inline script or style, nothing from elsewhere, never framed
/// (clickjacking of the consent page is the attack to stop).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to every response (harmless on JSON).
pub async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    // A handler may set a stricter policy of its own (logos: `default-src
    // 'none'`); every other response gets the page policy.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// The `scheme://host[:port]` of a URL (our public URL, a PA's issuer):
/// `https://pa.example` for `https://pa.example/agents/1`. What has no host
/// is shown as given, without a trailing slash.
pub fn origin_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) if u.host().is_some() => u.origin().ascii_serialization(),
        _ => url.trim_end_matches('/').to_owned(),
    }
}

/// A state-changing request must come from our own pages: `Origin` (sent by
/// browsers on POST) must be ours; without it, `Sec-Fetch-Site` must say
/// same-origin. Anything else is refused.
///
/// `Origin: null` counts as "without it": under `Referrer-Policy:
/// no-referrer` (which every page has) browsers send `null` even on a
/// same-origin form POST (Fetch, "serializing a request origin"). Opaque
/// origins (sandboxed frames, `data:` pages) also send `null`, but with
/// `Sec-Fetch-Site: cross-site`, so they are still refused.
pub fn check_origin(headers: &HeaderMap, public_url: &str) -> Result<(), PageError> {
    let ours = origin_of(public_url);
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(o) if o == ours => Ok(()),
        Some(o) if o != "null" => Err(PageError::Forbidden(super::i18n::t("err-cross-site"))),
        _ => match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
            Some("same-origin") => Ok(()),
            _ => Err(PageError::Forbidden(super::i18n::t("err-unverified"))),
        },
    }
}

/// Constant-time comparison of the form's CSRF token with the session's.
pub fn check_csrf(expected: &str, given: Option<&str>) -> Result<(), PageError> {
    let given = given.unwrap_or("");
    let same = expected.len() == given.len()
        && !expected.is_empty()
        && openssl::memcmp::eq(expected.as_bytes(), given.as_bytes());
    if same {
        Ok(())
    } else {
        Err(PageError::Forbidden(super::i18n::t("err-session-changed")))
    }
}

/// Only same-origin paths are followed after sign-in: `/x` but not `//evil`,
/// `/\evil`, `https://evil`, or anything with control characters.
pub fn safe_next(next: Option<&str>) -> String {
    let Some(n) = next else {
        return "/account".to_owned();
    };
    let ok = n.starts_with('/')
        && !n.starts_with("//")
        && !n.starts_with("/\\")
        && n.len() <= 2048
        && !n.chars().any(|c| c.is_control() || c == '\\');
    if ok {
        n.to_owned()
    } else {
        "/account".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn issuer_origin_is_scheme_host_port() {
        assert_eq!(
            origin_of("https://pa.example/agents/1"),
            "https://pa.example"
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080/x"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin_of("not a url"), "not a url");
        assert_eq!(origin_of("https://pactd.example/"), "https://pactd.example");
    }

    #[test]
    fn only_same_origin_paths_are_followed() {
        assert_eq!(safe_next(Some("/device/consent")), "/device/consent");
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "javascript:alert(1)",
            "/a\nb",
            "evil",
        ] {
            assert_eq!(safe_next(Some(bad)), "/account", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/account");
    }

    #[test]
    fn origins_must_match_exactly() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(check_origin(&h, "http://127.0.0.1:8080").is_ok());
        assert!(check_origin(&h, "http://127.0.0.1:8081").is_err());
        h.insert(header::ORIGIN, HeaderValue::from_static("null"));
        assert!(check_origin(&h, "http://127.0.0.1:8080").is_err());
        // `null` from our own page (no-referrer policy) vs an opaque origin.
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(check_origin(&h, "http://127.0.0.1:8080").is_ok());
        h.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(check_origin(&h, "http://127.0.0.1:8080").is_err());
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        h.insert("sec-fetch-site", HeaderValue::from_static("same-origin"));
        assert!(check_origin(&h, "http://127.0.0.1:8080").is_err());
        assert!(check_origin(&HeaderMap::new(), "http://127.0.0.1:8080").is_err());
    }

    #[test]
    fn csrf_tokens_must_match() {
        assert!(check_csrf("abc", Some("abc")).is_ok());
        assert!(check_csrf("abc", Some("abd")).is_err());
        assert!(check_csrf("abc", None).is_err());
        assert!(check_csrf("", Some("")).is_err());
    }
}
