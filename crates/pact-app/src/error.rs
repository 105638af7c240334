//! The one place where failures become responses.
//!
//! A2A errors → the AIP-193 envelope (PACT §6); authentication failures → a
//! bare 401 with `WWW-Authenticate` (PACT §3, §5.5); unknown brand → bare 404;
//! rate limits → 429 with `Retry-After` (and the envelope, so clients can
//! read it); an unreachable database → 503 with `Retry-After`; input that
//! cannot be stored → `INVALID_PARAMS`; anything unexpected → `INTERNAL`, with
//! the cause logged here and never shown to the client.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_proto::{A2A_CONTENT_TYPE, A2aError};

#[derive(Debug)]
pub enum ApiError {
    A2a(A2aError),
    /// PACT §3: any PA-JWT failure.
    Unauthorized,
    /// PACT §5.5: a bad delegation token.
    InvalidDelegation,
    NotFound,
    RateLimited {
        retry_after_secs: u64,
    },
    /// The database cannot be reached now: 503 with `Retry-After`.
    Unavailable,
    /// The brand's own agent could not answer (down, slow, misbehaving): 503
    /// `UNAVAILABLE` with `Retry-After`, the retryable error. The cause was
    /// logged where it happened.
    AgentUnavailable,
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// Anything unexpected: logged where the response is made, never shown.
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }
}

impl From<A2aError> for ApiError {
    fn from(e: A2aError) -> Self {
        Self::A2a(e)
    }
}

impl From<pact_db::Error> for ApiError {
    fn from(e: pact_db::Error) -> Self {
        match pact_db::classify(&e) {
            pact_db::Failure::Unavailable => {
                tracing::warn!(error = %e, "database unavailable");
                Self::Unavailable
            }
            pact_db::Failure::BadInput => Self::A2a(A2aError::invalid_params(BAD_INPUT)),
            pact_db::Failure::Other => Self::internal(e),
        }
    }
}

/// What a client hears when its input cannot be stored (e.g. a NUL byte).
pub const BAD_INPUT: &str = "The request contains characters or values that cannot be accepted";

/// How long a client should wait before retrying while the database is down.
pub const UNAVAILABLE_RETRY_SECS: u64 = 2;

/// Marks a response as "the database was unreachable", so the health
/// middleware learns of it (see `db_health.rs`) without every error path
/// needing the state.
#[derive(Clone, Copy, Debug)]
pub struct DbUnavailable;

/// A 503 response with `Retry-After` and the marker.
pub fn unavailable(mut res: Response) -> Response {
    *res.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    res.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(UNAVAILABLE_RETRY_SECS),
    );
    res.extensions_mut().insert(DbUnavailable);
    res
}

/// A 429 response with `Retry-After` (at least one second).
pub fn rate_limited(mut res: Response, retry_after_secs: u64) -> Response {
    *res.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    res.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry_after_secs.max(1)),
    );
    res
}

/// Serialises a body as A2A JSON with the exact content type PACT §4 requires.
pub fn a2a_json(status: StatusCode, body: &serde_json::Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut res = Response::new(Body::from(bytes));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(A2A_CONTENT_TYPE),
    );
    // Replies carry account data, receipts and verification links: never
    // stored by a cache (shared caches already skip answers to requests
    // with Authorization, RFC 9111 §3.5; a private one would not).
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn bare(status: StatusCode) -> Response {
    let mut res = Response::new(Body::empty());
    *res.status_mut() = status;
    res
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            Self::A2a(e) => {
                let status = StatusCode::from_u16(e.reason.http_status())
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                a2a_json(status, &e.to_json())
            }
            Self::Unauthorized => {
                let mut res = bare(StatusCode::UNAUTHORIZED);
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="a2a""#),
                );
                res
            }
            Self::InvalidDelegation => {
                let mut res = bare(StatusCode::UNAUTHORIZED);
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="a2a", error="invalid_token""#),
                );
                res
            }
            Self::NotFound => bare(StatusCode::NOT_FOUND),
            Self::RateLimited { retry_after_secs } => {
                let secs = retry_after_secs.max(1);
                let body = A2aError::rate_limited(secs).to_json();
                rate_limited(a2a_json(StatusCode::TOO_MANY_REQUESTS, &body), secs)
            }
            Self::Unavailable => {
                let body = A2aError::unavailable().to_json();
                unavailable(a2a_json(StatusCode::SERVICE_UNAVAILABLE, &body))
            }
            Self::AgentUnavailable => {
                // Not `unavailable()`: that marks the database as down.
                let e = A2aError::new(
                    pact_proto::ErrorReason::Unavailable,
                    "The brand's agent is unavailable right now; retry later",
                );
                let mut res = a2a_json(StatusCode::SERVICE_UNAVAILABLE, &e.to_json());
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                res
            }
            Self::Internal(cause) => {
                tracing::error!(error = %cause, "internal error");
                Self::A2a(A2aError::internal()).into_response()
            }
        }
    }
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}

/// JSON with the no-store headers RFC 6749 §5.1 requires on token responses
/// (`oauth::oauth_json`), also used by the tool gateway and its MCP face,
/// whose answers carry a turn's data.
pub fn json_no_store(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut res = Response::new(Body::from(bytes));
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    res
}
