//! The one place where failures become responses.
//!
//! A2A errors → the AIP-193 envelope (PACT §6); authentication failures → a
//! bare 401 with `WWW-Authenticate` (PACT §3, §5.5); unknown brand → bare 404;
//! rate limits → 429 with `Retry-After`; anything unexpected → `INTERNAL`, with
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
    /// The brand's own agent could not answer (down, slow, misbehaving): the
    /// `INTERNAL` envelope of PACT §6 with a message saying to retry, and
    /// `Retry-After`. The cause was logged where it happened.
    AgentUnavailable,
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl From<A2aError> for ApiError {
    fn from(e: A2aError) -> Self {
        Self::A2a(e)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        Self::Internal(Box::new(e))
    }
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
                let mut res = bare(StatusCode::TOO_MANY_REQUESTS);
                res.headers_mut().insert(
                    header::RETRY_AFTER,
                    HeaderValue::from(retry_after_secs.max(1)),
                );
                res
            }
            Self::AgentUnavailable => {
                let e = A2aError::new(
                    pact_proto::error::ErrorReason::Internal,
                    "The brand's agent is unavailable right now; retry later",
                );
                let mut res = a2a_json(StatusCode::INTERNAL_SERVER_ERROR, &e.to_json());
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
