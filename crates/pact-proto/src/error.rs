//! The A2A error envelope (PACT §6, AIP-193).

use serde::{Deserialize, Serialize};
use serde_json::json;

/// The `reason` of an A2A error, each with its fixed HTTP code and gRPC status (PACT §6 table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorReason {
    InvalidParams,
    ContentTypeNotSupported,
    UnsupportedOperation,
    PushNotificationNotSupported,
    TaskNotFound,
    /// Not in the PACT §6 table: A2A 1.0's `TaskNotCancelableError` (409),
    /// for a step-up task, which only the person ends (at its link).
    TaskNotCancelable,
    Internal,
    /// Not in the PACT §6 table: a rate limit (PACT §6 allows `429` with
    /// `Retry-After`); the body is given in the envelope so clients can read it.
    ResourceExhausted,
    /// Not in the PACT §6 table: the Provider cannot serve now (its database is
    /// unreachable); `503` with `Retry-After`, safe to retry.
    Unavailable,
}

impl ErrorReason {
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidParams
            | Self::ContentTypeNotSupported
            | Self::UnsupportedOperation
            | Self::PushNotificationNotSupported => 400,
            Self::TaskNotFound => 404,
            Self::TaskNotCancelable => 409,
            Self::ResourceExhausted => 429,
            Self::Internal => 500,
            Self::Unavailable => 503,
        }
    }

    pub fn status(self) -> &'static str {
        match self {
            Self::InvalidParams | Self::ContentTypeNotSupported => "INVALID_ARGUMENT",
            Self::UnsupportedOperation
            | Self::PushNotificationNotSupported
            | Self::TaskNotCancelable => "FAILED_PRECONDITION",
            Self::TaskNotFound => "NOT_FOUND",
            Self::Internal => "INTERNAL",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::Unavailable => "UNAVAILABLE",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidParams => "INVALID_PARAMS",
            Self::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::TaskNotFound => "TASK_NOT_FOUND",
            Self::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Self::Internal => "INTERNAL",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::Unavailable => "UNAVAILABLE",
        }
    }
}

/// An A2A error as the server returns it: a reason plus a human message that
/// never carries internal detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct A2aError {
    pub reason: ErrorReason,
    pub message: String,
}

impl A2aError {
    pub fn new(reason: ErrorReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::InvalidParams, message)
    }

    /// PACT §4: an unknown context and someone else's context look the same.
    pub fn unknown_context() -> Self {
        Self::invalid_params("Unknown contextId")
    }

    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorReason::UnsupportedOperation, message)
    }

    /// PACT §4: `Task not found: {id}` for task lookups by id.
    pub fn task_not_found(id: &str) -> Self {
        Self::new(ErrorReason::TaskNotFound, format!("Task not found: {id}"))
    }

    /// A2A 1.0 `TaskNotCancelableError`: a step-up task ends when the person
    /// decides or its link expires, never by the agent's cancel.
    pub fn task_not_cancelable(id: &str) -> Self {
        Self::new(
            ErrorReason::TaskNotCancelable,
            format!(
                "Task cannot be canceled: {id} ends when the person decides or its link expires"
            ),
        )
    }

    pub fn push_not_supported() -> Self {
        Self::new(
            ErrorReason::PushNotificationNotSupported,
            "Push notifications are not supported",
        )
    }

    pub fn internal() -> Self {
        Self::new(ErrorReason::Internal, "Internal error")
    }

    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::new(
            ErrorReason::ResourceExhausted,
            format!("Too many requests; retry after {retry_after_secs} s"),
        )
    }

    pub fn unavailable() -> Self {
        Self::new(
            ErrorReason::Unavailable,
            "The service is temporarily unavailable; retry shortly",
        )
    }

    /// The AIP-193 envelope body.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "error": {
                "code": self.reason.http_status(),
                "status": self.reason.status(),
                "message": self.message,
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": self.reason.as_str(),
                    "domain": "a2a-protocol.org",
                }],
            }
        })
    }

    /// Reads an envelope back (for clients and tests); `None` when the body is not one.
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        let err = value.get("error")?;
        let message = err.get("message")?.as_str()?.to_owned();
        let reason_str = err.get("details")?.get(0)?.get("reason")?.as_str()?;
        let reason: ErrorReason =
            serde_json::from_value(serde_json::Value::String(reason_str.to_owned())).ok()?;
        Some(Self { reason, message })
    }
}

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.message)
    }
}

impl std::error::Error for A2aError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_has_the_aip193_shape() {
        let v = A2aError::task_not_found("t1").to_json();
        assert_eq!(v["error"]["code"], 404);
        assert_eq!(v["error"]["status"], "NOT_FOUND");
        assert_eq!(v["error"]["message"], "Task not found: t1");
        assert_eq!(
            v["error"]["details"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(v["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["error"]["details"][0]["domain"], "a2a-protocol.org");
        assert_eq!(
            A2aError::from_json(&v),
            Some(A2aError::task_not_found("t1"))
        );
    }

    #[test]
    fn every_reason_maps_to_the_table_in_section_6() {
        let table = [
            (ErrorReason::InvalidParams, 400, "INVALID_ARGUMENT"),
            (
                ErrorReason::ContentTypeNotSupported,
                400,
                "INVALID_ARGUMENT",
            ),
            (
                ErrorReason::UnsupportedOperation,
                400,
                "FAILED_PRECONDITION",
            ),
            (
                ErrorReason::PushNotificationNotSupported,
                400,
                "FAILED_PRECONDITION",
            ),
            (ErrorReason::TaskNotFound, 404, "NOT_FOUND"),
            (ErrorReason::TaskNotCancelable, 409, "FAILED_PRECONDITION"),
            (ErrorReason::Internal, 500, "INTERNAL"),
        ];
        for (reason, code, status) in table {
            assert_eq!(reason.http_status(), code);
            assert_eq!(reason.status(), status);
            let json = serde_json::to_value(reason).unwrap_or_default();
            assert_eq!(json.as_str(), Some(reason.as_str()));
        }
    }
}
