//! The admin API's one error shape: `{"error": {"code": "...", "message":
//! "..."}}`, with a stable machine-readable `code`. A missing object and one
//! outside the caller's brands give the same `not_found`, byte for byte.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub enum AdminApiError {
    /// 401: no credential, a malformed one, an unknown or revoked one.
    Unauthenticated,
    /// 403: the credential's role does not allow the operation.
    Forbidden(&'static str),
    /// 404: no such object within the caller's brands.
    NotFound,
    /// 400 with a stable code and a message for the developer.
    Invalid(&'static str, String),
    /// 409: the object is not in a state the operation applies to.
    Conflict(&'static str, String),
    Unavailable,
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl AdminApiError {
    /// Anything unexpected: logged, answered as a bare 500.
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }
}

impl From<pact_db::Error> for AdminApiError {
    fn from(e: pact_db::Error) -> Self {
        match pact_db::classify(&e) {
            pact_db::Failure::Unavailable => Self::Unavailable,
            pact_db::Failure::BadInput => {
                Self::Invalid("invalid_request", crate::error::BAD_INPUT.to_owned())
            }
            pact_db::Failure::Other => Self::internal(e),
        }
    }
}

impl AdminApiError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid("invalid_request", message.into())
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound => "not_found",
            Self::Invalid(code, _) | Self::Conflict(code, _) => code,
            Self::Unavailable => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Invalid(..) => StatusCode::BAD_REQUEST,
            Self::Conflict(..) => StatusCode::CONFLICT,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AdminApiError {
    fn into_response(self) -> Response {
        let message = match &self {
            Self::Unauthenticated => {
                "A valid admin API credential is required (Authorization: Bearer pactd_admin_…)."
                    .to_owned()
            }
            Self::Forbidden(m) => (*m).to_owned(),
            Self::NotFound => "No such object.".to_owned(),
            Self::Invalid(_, m) | Self::Conflict(_, m) => m.clone(),
            Self::Unavailable => {
                "The database cannot be reached now; nothing was changed. Retry shortly.".to_owned()
            }
            Self::Internal(cause) => {
                tracing::error!(error = %cause, "admin API request failed");
                "Something went wrong on our side.".to_owned()
            }
        };
        let body = json!({"error": {"code": self.code(), "message": message}});
        let mut res = (self.status(), axum::Json(body)).into_response();
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match self {
            Self::Unauthenticated => {
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(r#"Bearer realm="pactd-admin""#),
                );
            }
            Self::Unavailable => res = crate::error::unavailable(res),
            _ => {}
        }
        res
    }
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<crate::admin::ops::OpsError> for AdminApiError {
    fn from(e: crate::admin::ops::OpsError) -> Self {
        use crate::admin::ops::OpsError;
        match e {
            OpsError::Invalid(m) => AdminApiError::invalid(m),
            OpsError::Missing => AdminApiError::NotFound,
            OpsError::Db(e) => e.into(),
        }
    }
}

impl From<sqlx::Error> for AdminApiError {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}
