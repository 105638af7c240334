//! The task, streaming and push-notification rows of PACT §4. pactd keeps no
//! tasks (step-up tasks are ephemeral), so these answer fixed results — but
//! only to an authenticated caller at an existing brand.

use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use pact_proto::A2aError;
use pact_proto::a2a::{ListTasksResponse, parse_page_size};

use crate::auth::{Caller, authenticate};
use crate::error::{ApiError, a2a_json};
use crate::state::AppState;

#[derive(serde::Deserialize)]
pub struct ListQuery {
    #[serde(rename = "pageSize")]
    page_size: Option<String>,
}

/// `GET tasks`: always empty; `pageSize` validated, other parameters ignored.
pub async fn list_tasks(_caller: Caller, Query(q): Query<ListQuery>) -> Result<Response, ApiError> {
    let page_size = parse_page_size(q.page_size.as_deref())?;
    let body = ListTasksResponse {
        tasks: vec![],
        next_page_token: String::new(),
        page_size,
        total_size: 0,
    };
    let body = serde_json::to_value(body).map_err(ApiError::internal)?;
    Ok(a2a_json(StatusCode::OK, &body))
}

/// `GET tasks/{id}`, `POST tasks/{id}:cancel`, `POST tasks/{id}:subscribe`.
///
/// The router cannot match a parameter with a `:verb` suffix, so this handler
/// finishes routing itself — still before authentication, as PACT §4 requires:
/// an unknown verb is a 404 and a wrong method a 405 for anyone.
pub async fn task_by_id(
    State(state): State<AppState>,
    method: Method,
    Path((brand_id, segment)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> Response {
    let op = match task_op(&method, &segment) {
        Ok(op) => op,
        Err(status) => return status.into_response(),
    };
    if let Err(e) = authenticate(&state, &headers, &brand_id).await {
        return e.into_response();
    }
    let err = match op {
        TaskOp::Get(id) | TaskOp::Cancel(id) => A2aError::task_not_found(id),
        TaskOp::Subscribe(_) => A2aError::unsupported("Streaming is not supported"),
    };
    ApiError::from(err).into_response()
}

#[derive(Debug, PartialEq, Eq)]
pub enum TaskOp<'a> {
    Get(&'a str),
    Cancel(&'a str),
    Subscribe(&'a str),
}

/// Routes `tasks/{segment}` by method and `:verb` suffix; `Err` is the 404/405.
pub fn task_op<'a>(method: &Method, segment: &'a str) -> Result<TaskOp<'a>, StatusCode> {
    let (id, verb) = match segment.rsplit_once(':') {
        Some((id, verb)) => (id, Some(verb)),
        None => (segment, None),
    };
    if id.is_empty() {
        return Err(StatusCode::NOT_FOUND);
    }
    match (verb, method) {
        (None, &Method::GET) => Ok(TaskOp::Get(id)),
        (None, _) => Err(StatusCode::METHOD_NOT_ALLOWED),
        (Some("cancel"), &Method::POST) => Ok(TaskOp::Cancel(id)),
        (Some("subscribe"), &Method::POST) => Ok(TaskOp::Subscribe(id)),
        (Some("cancel" | "subscribe"), _) => Err(StatusCode::METHOD_NOT_ALLOWED),
        (Some(_), _) => Err(StatusCode::NOT_FOUND),
    }
}

/// `POST message:stream` and `GET extendedAgentCard`.
pub async fn unsupported(_caller: Caller) -> ApiError {
    A2aError::unsupported("This operation is not supported").into()
}

/// Every push-notification-config row.
pub async fn push_not_supported(_caller: Caller) -> ApiError {
    A2aError::push_not_supported().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_segments_route_by_method_and_verb() {
        assert_eq!(task_op(&Method::GET, "t1"), Ok(TaskOp::Get("t1")));
        assert_eq!(
            task_op(&Method::POST, "t1:cancel"),
            Ok(TaskOp::Cancel("t1"))
        );
        assert_eq!(
            task_op(&Method::POST, "t1:subscribe"),
            Ok(TaskOp::Subscribe("t1"))
        );
        assert_eq!(
            task_op(&Method::POST, "t1"),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            task_op(&Method::GET, "t1:cancel"),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(
            task_op(&Method::POST, "t1:frobnicate"),
            Err(StatusCode::NOT_FOUND)
        );
        assert_eq!(
            task_op(&Method::POST, ":cancel"),
            Err(StatusCode::NOT_FOUND)
        );
    }
}
