//! The request body limit (`--body-limit`), answered in the protocol's own
//! format.
//!
//! The limit is axum's `DefaultBodyLimit`, which the body extractors read:
//! a body is refused when a handler reads it, so a request is authenticated
//! first (PACT §3: "before the body is read"; a bad PA-JWT with a huge body
//! is the bare 401). What axum answers then is plain text; this layer turns
//! it into the request family's format, still `413 Content Too Large`
//! (RFC 9110 §15.5.14): the A2A error envelope with `INVALID_PARAMS` (PACT
//! §6), RFC 6749 §5.2 JSON with `invalid_request` and `no-store` on the
//! OAuth endpoints, the admin API's error shape, or a page.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pact_proto::A2aError;
use pact_proto::oauth::{OAuthError, OAuthErrorCode};
use serde_json::json;

use crate::db_health::{self, Family};
use crate::error::a2a_json;
use crate::oauth::oauth_json;
use crate::web::PageError;

/// Answers a body over the limit (`limit` bytes) in its family's format.
pub async fn in_format(State(limit): State<usize>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let admin_api = path.starts_with(crate::admin::api::PREFIX);
    let family = db_health::family(path);
    let res = next.run(req).await;
    if res.status() != StatusCode::PAYLOAD_TOO_LARGE {
        return res;
    }
    let message = format!("The request body is larger than this server accepts ({limit} bytes)");
    let status = StatusCode::PAYLOAD_TOO_LARGE;
    // Each family's own error, with 413 for its status.
    let mut res = if admin_api {
        crate::admin::api::error::AdminApiError::invalid(message).into_response()
    } else {
        match family {
            Family::A2a => {
                let mut body = A2aError::invalid_params(message).to_json();
                body["error"]["code"] = json!(status.as_u16());
                a2a_json(status, &body)
            }
            Family::OAuth => oauth_json(
                status,
                &OAuthError::new(OAuthErrorCode::InvalidRequest, &message),
            ),
            Family::Page => PageError::BadRequest(message).into_response(),
            Family::Free => return res,
        }
    };
    *res.status_mut() = status;
    res
}
