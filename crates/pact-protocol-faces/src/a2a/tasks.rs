//! The task, streaming and push-notification rows of PACT §4. The only tasks
//! pactd returns are step-up tasks (PACT §5.5); they are kept, so that a
//! generic A2A client can follow one with Get Task (A2A 1.0 §3.1.3) until the
//! person decides, for as long as its device authorization is kept. Nothing
//! else is a task: the list stays empty and every other row answers a fixed
//! result — but only to an authenticated caller at an existing brand.

use axum::extract::{Path, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use pact_db::parties::PaUser;
use pact_node::node::NodeInner;
use pact_proto::A2aError;
use pact_proto::a2a::{AgentMessage, ListTasksResponse, parse_page_size};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::auth::{Caller, authenticate};
use crate::domain::step_up_task;
use crate::error::{ApiError, a2a_json};
use crate::state::AppState;

/// `GET tasks`: always empty; `pageSize` validated, other parameters ignored.
/// The query is read here rather than by a deserializer, whose refusal of a
/// repeated `pageSize` would be a plain-text 400, not PACT §4's
/// `INVALID_PARAMS` in the A2A envelope; a repeated one is refused too (two
/// values, even equal, name no one page size).
pub async fn list_tasks(_caller: Caller, RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    let mut sizes = url::form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
        .filter(|(name, _)| name == "pageSize")
        .map(|(_, value)| value.into_owned());
    let page_size = sizes.next();
    if sizes.next().is_some() {
        return Err(A2aError::invalid_params("pageSize is given more than once").into());
    }
    let body = list(page_size.as_deref())?;
    Ok(a2a_json(StatusCode::OK, &body))
}

/// List Tasks behind both bindings: PACT §4's empty page.
pub fn list(page_size: Option<&str>) -> Result<Value, ApiError> {
    let page_size = parse_page_size(page_size)?;
    let body = ListTasksResponse {
        tasks: vec![],
        next_page_token: String::new(),
        page_size,
        total_size: 0,
    };
    serde_json::to_value(body).map_err(ApiError::internal)
}

/// `GET tasks/{id}`, `POST tasks/{id}:cancel`, `POST tasks/{id}:subscribe`.
///
/// The router cannot match a parameter with a `:verb` suffix, so this handler
/// finishes routing itself — still before authentication, as PACT §4 requires:
/// an unknown verb is a 404 and a wrong method a 405 for anyone.
pub async fn task_by_id(
    State(state): State<AppState>,
    method: Method,
    path: Result<Path<(String, String)>, axum::extract::rejection::PathRejection>,
    headers: axum::http::HeaderMap,
) -> Response {
    // A path that does not decode (`%FF`) names no brand or task anyone
    // could have: answered as the protocol answers, not with axum's plain
    // text 400 — the bare 401 without a bearer token (PACT §3), else the
    // bare 404 of an unknown brand.
    let Ok(Path((brand_id, segment))) = path else {
        return if crate::auth::bearer(&headers, &axum::http::header::AUTHORIZATION).is_some() {
            ApiError::NotFound.into_response()
        } else {
            ApiError::Unauthorized.into_response()
        };
    };
    let op = match task_op(&method, &segment) {
        Ok(op) => op,
        // A 405 names the methods the resource takes (RFC 9110 §15.5.6).
        Err(StatusCode::METHOD_NOT_ALLOWED) => {
            let allow = if segment.contains(':') {
                "POST"
            } else {
                "GET, HEAD"
            };
            return (
                StatusCode::METHOD_NOT_ALLOWED,
                [(axum::http::header::ALLOW, allow)],
            )
                .into_response();
        }
        Err(status) => return status.into_response(),
    };
    let caller = match authenticate(&state, &headers, &brand_id).await {
        Ok(caller) => caller,
        Err(e) => return e.into_response(),
    };
    let result = match op {
        // A2A 1.0 `rpc GetTask(GetTaskRequest) returns (Task)`: the body
        // is the task itself, not wrapped like SendMessageResponse.
        TaskOp::Get(id) => get(&state, &caller, id)
            .await
            .map(|task| a2a_json(StatusCode::OK, &task)),
        TaskOp::Cancel(id) => cancel(&state, &caller, id)
            .await
            .map(|()| Response::default()),
        TaskOp::Subscribe(_) => Err(A2aError::unsupported("Streaming is not supported").into()),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// Get Task behind both bindings: the step-up task as it stands now, or
/// `TASK_NOT_FOUND` with PACT §4's message for an unknown id and for someone
/// else's alike.
pub async fn get(node: &NodeInner, caller: &Caller, id: &str) -> Result<Value, ApiError> {
    let Some(found) = find_task(node, caller, id).await? else {
        return Err(A2aError::task_not_found(id).into());
    };
    Ok(task_now(found, node.clock.now()))
}

/// Cancel Task behind both bindings: never succeeds. One's own step-up task
/// is not cancelable (the person ends it); any other id is not found.
pub async fn cancel(node: &NodeInner, caller: &Caller, id: &str) -> Result<(), ApiError> {
    match find_task(node, caller, id).await? {
        Some(_) => Err(A2aError::task_not_cancelable(id).into()),
        None => Err(A2aError::task_not_found(id).into()),
    }
}

/// The caller's own step-up task `id` (the brand, PA issuer and subject its
/// authorization was issued to); an id that is not a UUID is nobody's.
async fn find_task(
    node: &NodeInner,
    caller: &Caller,
    id: &str,
) -> Result<Option<pact_db::step_up_tasks::StepUpTask>, ApiError> {
    let Ok(id) = Uuid::parse_str(id) else {
        return Ok(None);
    };
    Ok(pact_db::step_up_tasks::find_for(
        &node.db,
        id,
        PaUser {
            brand_id: &caller.brand.id,
            pa_issuer: caller.issuer(),
            pa_sub: &caller.pa.sub,
        },
    )
    .await?)
}

/// The task as it was returned while the person has not decided; once they
/// have, its terminal state and a message saying what to do next. Either way
/// `pact.authorizationStatus` names the outcome for programs.
fn task_now(found: pact_db::step_up_tasks::StepUpTask, now: OffsetDateTime) -> Value {
    let outcome = step_up_task::outcome(found.status, found.expires_at, found.operation, now);
    let mut task = found.task;
    if let Some(text) = outcome.text(found.operation) {
        let id = task["id"].as_str().unwrap_or_default().to_owned();
        let context_id = task["contextId"].as_str().unwrap_or_default().to_owned();
        let message = AgentMessage::new(
            format!("{id}-{}", outcome.as_str()),
            context_id,
            text.into(),
        );
        task["status"] = json!({ "state": outcome.task_state(), "message": message });
    }
    if let Some(metadata) = task.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert(
            "pact.authorizationStatus".to_owned(),
            json!(outcome.as_str()),
        );
    }
    task
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
        // HEAD is GET without the body (RFC 9110 §9.3.2; axum drops it).
        (None, &Method::GET | &Method::HEAD) => Ok(TaskOp::Get(id)),
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
        assert_eq!(task_op(&Method::HEAD, "t1"), Ok(TaskOp::Get("t1")));
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
