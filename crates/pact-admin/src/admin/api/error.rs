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
    /// 400 `invalid_request`, with a message for the developer.
    Invalid(String),
    /// 400 `invalid_cursor`: a page cursor this API did not give.
    InvalidCursor,
    /// 409 `already_revoked`: revoking a grant that is no longer active.
    AlreadyRevoked,
    /// 409 `conflict`: a well-formed request that names something the
    /// brand does not have yet (a scope for a tool or a type).
    Conflict(String),
    Unavailable,
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// The stable `code` of an error body: a closed set, so that clients can
/// match on it and the OpenAPI document lists exactly these (`ErrorCode::ALL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    Unauthenticated,
    Forbidden,
    NotFound,
    InvalidRequest,
    InvalidCursor,
    AlreadyRevoked,
    Conflict,
    Unavailable,
    Internal,
}

impl ErrorCode {
    /// Every code. A new variant stops the build at the exhaustive `match`
    /// below, beside this list; the unit test checks that each kind of error
    /// answers with a listed code.
    pub const ALL: [ErrorCode; 9] = [
        Self::Unauthenticated,
        Self::Forbidden,
        Self::NotFound,
        Self::InvalidRequest,
        Self::InvalidCursor,
        Self::AlreadyRevoked,
        Self::Conflict,
        Self::Unavailable,
        Self::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::InvalidRequest => "invalid_request",
            Self::InvalidCursor => "invalid_cursor",
            Self::AlreadyRevoked => "already_revoked",
            Self::Conflict => "conflict",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }
}

const _: fn(ErrorCode) = |c| match c {
    ErrorCode::Unauthenticated
    | ErrorCode::Forbidden
    | ErrorCode::NotFound
    | ErrorCode::InvalidRequest
    | ErrorCode::InvalidCursor
    | ErrorCode::AlreadyRevoked
    | ErrorCode::Conflict
    | ErrorCode::Unavailable
    | ErrorCode::Internal => {}
};

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
            pact_db::Failure::BadInput => Self::invalid(crate::error::BAD_INPUT),
            pact_db::Failure::Other => Self::internal(e),
        }
    }
}

impl AdminApiError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unauthenticated => ErrorCode::Unauthenticated,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::NotFound => ErrorCode::NotFound,
            Self::Invalid(_) => ErrorCode::InvalidRequest,
            Self::InvalidCursor => ErrorCode::InvalidCursor,
            Self::AlreadyRevoked => ErrorCode::AlreadyRevoked,
            Self::Conflict(_) => ErrorCode::Conflict,
            Self::Unavailable => ErrorCode::Unavailable,
            Self::Internal(_) => ErrorCode::Internal,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Invalid(_) | Self::InvalidCursor => StatusCode::BAD_REQUEST,
            Self::AlreadyRevoked | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message for the client: never the cause of an internal error.
    pub fn message(&self) -> String {
        match self {
            Self::Unauthenticated => {
                "A valid admin API credential is required (Authorization: Bearer pactd_admin_…)."
                    .to_owned()
            }
            Self::Forbidden(m) => (*m).to_owned(),
            Self::NotFound => "No such object.".to_owned(),
            Self::Invalid(m) => m.clone(),
            Self::InvalidCursor => "cursor is not one this API gave".to_owned(),
            Self::AlreadyRevoked => "This grant was already revoked.".to_owned(),
            Self::Conflict(m) => m.clone(),
            Self::Unavailable => {
                "The database cannot be reached now; nothing was changed. Retry shortly.".to_owned()
            }
            Self::Internal(_) => "Something went wrong on our side.".to_owned(),
        }
    }
}

impl IntoResponse for AdminApiError {
    fn into_response(self) -> Response {
        if let Self::Internal(cause) = &self {
            tracing::error!(error = %cause, "admin API request failed");
        }
        let message = self.message();
        let body = json!({"error": {"code": self.code().as_str(), "message": message}});
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
            OpsError::Conflict(m) => AdminApiError::Conflict(m),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_answers_with_a_listed_code_and_the_list_has_no_twins() {
        let errors = [
            AdminApiError::Unauthenticated,
            AdminApiError::Forbidden("no"),
            AdminApiError::NotFound,
            AdminApiError::invalid("bad"),
            AdminApiError::InvalidCursor,
            AdminApiError::AlreadyRevoked,
            AdminApiError::Conflict("no such scope".into()),
            AdminApiError::Unavailable,
            AdminApiError::internal(std::io::Error::other("cause")),
        ];
        for e in &errors {
            assert!(ErrorCode::ALL.contains(&e.code()), "{:?}", e.code());
            // An internal error's cause never reaches the client.
            assert!(!e.message().contains("cause"));
        }
        let names: std::collections::BTreeSet<&str> =
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), ErrorCode::ALL.len());
        // Each code is produced by some error: none is listed for nothing.
        for code in ErrorCode::ALL {
            assert!(errors.iter().any(|e| e.code() == code), "{code:?}");
        }
    }
}
