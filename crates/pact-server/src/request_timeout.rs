//! The request timeout (`--request-timeout`), answered in the protocol's own
//! format.
//!
//! A request still running when its time is up is cut (its future dropped:
//! whatever it held is released, a turn's claim on its `messageId` too, see
//! `a2a/send.rs`) and answered 503 with `Retry-After` (RFC 9110 §10.2.3), in
//! the same format as the database-outage 503s of `db_health.rs`: the A2A
//! error envelope with `UNAVAILABLE` (PACT §4, §6), RFC 6749 §5.2 JSON with
//! `temporarily_unavailable` on the OAuth endpoints, the admin API's error
//! shape, or a page. Unlike those it does not mark the database down: a slow
//! turn says nothing about PostgreSQL.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pact_proto::A2aError;
use pact_proto::oauth::{OAuthError, OAuthErrorCode};
use serde_json::json;

use crate::db_health::{self, Family};
use crate::error::{UNAVAILABLE_RETRY_SECS, a2a_json};
use crate::oauth::oauth_json;
use crate::web::PageError;

/// What the A2A and OAuth answers say.
const MESSAGE: &str = "The request took longer than this server allows; retry it shortly";

/// Bounds a request's time after its headers (reading the body, the work,
/// the answer) by `timeout`.
pub async fn bound(State(timeout): State<Duration>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let admin_api = path.starts_with(crate::admin::api::PREFIX);
    let family = db_health::family(path);
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) => {
            tracing::warn!(
                timeout_secs = timeout.as_secs_f64(),
                "request cut at the request timeout"
            );
            if admin_api {
                admin_api_timed_out()
            } else {
                timed_out(family)
            }
        }
    }
}

/// The 503 of a request that ran out of time, in its family's format.
pub fn timed_out(family: Family) -> Response {
    let res = match family {
        Family::A2a => {
            let e = A2aError::new(pact_proto::ErrorReason::Unavailable, MESSAGE);
            a2a_json(StatusCode::SERVICE_UNAVAILABLE, &e.to_json())
        }
        Family::OAuth => oauth_json(
            StatusCode::SERVICE_UNAVAILABLE,
            &OAuthError::new(OAuthErrorCode::TemporarilyUnavailable, MESSAGE),
        ),
        Family::Page | Family::Free => PageError::TimedOut.into_response(),
    };
    with_retry_after(res)
}

fn admin_api_timed_out() -> Response {
    let body = json!({"error": {"code": "unavailable", "message": MESSAGE}});
    let mut res = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    with_retry_after(res)
}

fn with_retry_after(mut res: Response) -> Response {
    res.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(UNAVAILABLE_RETRY_SECS),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::DbUnavailable;

    #[test]
    fn every_family_times_out_with_its_format_and_retry_after() {
        for (family, content_type) in [
            (Family::A2a, pact_proto::A2A_CONTENT_TYPE),
            (Family::OAuth, "application/json"),
            (Family::Page, "text/html"),
            (Family::Free, "text/html"),
        ] {
            let res = timed_out(family);
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{family:?}");
            assert!(
                res.headers().contains_key(header::RETRY_AFTER),
                "{family:?}"
            );
            let got = res.headers()[header::CONTENT_TYPE].to_str().unwrap();
            assert!(got.starts_with(content_type), "{family:?}: {got}");
            // A slow request is no sign of a database outage.
            assert!(
                res.extensions().get::<DbUnavailable>().is_none(),
                "{family:?}"
            );
        }
        let res = admin_api_timed_out();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(res.headers().contains_key(header::RETRY_AFTER));
    }
}
