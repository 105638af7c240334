//! `POST {iface}/jsonrpc`: A2A 1.0's JSON-RPC 2.0 binding (A2A §9), offered
//! beside HTTP+JSON so that clients whose default is JSON-RPC work as they
//! are. The same operations run behind both (`send::send`, `tasks::get`, …):
//! the same PA-JWT check before the body is read (PACT §3), the same
//! delegation header, contexts, receipts, step-up tasks and errors. A2A
//! errors become JSON-RPC error objects with A2A's codes (A2A §5.4) in a
//! `200`; what is an HTTP answer on every binding stays one (the bare `401`
//! of PACT §3 and §5.5, `429`, `503`).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_proto::A2aError;
use pact_proto::jsonrpc::{self, Method, RpcError};
use serde_json::Value;

use super::{send, tasks};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::AppState;

pub async fn handle(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = match jsonrpc::parse(&body) {
        Ok(r) => r,
        Err(e) => return rpc_json(&e.to_json()),
    };
    let params = &request.params;
    let outcome = match request.method {
        Method::SendMessage => match serde_json::to_vec(params) {
            Ok(body) => send::send(&state, &caller, &headers, &body).await,
            Err(e) => Err(ApiError::internal(e)),
        },
        Method::GetTask => match task_id(params) {
            Ok(id) => tasks::get(&state, &caller, id).await,
            Err(e) => Err(e),
        },
        Method::CancelTask => match task_id(params) {
            Ok(id) => tasks::cancel(&state, &caller, id)
                .await
                .map(|()| Value::Null),
            Err(e) => Err(e),
        },
        Method::ListTasks => page_size(params).and_then(|p| tasks::list(p.as_deref())),
        Method::SendStreamingMessage | Method::SubscribeToTask | Method::GetExtendedAgentCard => {
            Err(A2aError::unsupported("This operation is not supported").into())
        }
        Method::SetTaskPushNotificationConfig
        | Method::GetTaskPushNotificationConfig
        | Method::ListTaskPushNotificationConfig
        | Method::DeleteTaskPushNotificationConfig => Err(A2aError::push_not_supported().into()),
    };
    let id = request.id;
    match outcome {
        Ok(result) => rpc_json(&jsonrpc::result(&id, result)),
        Err(ApiError::A2a(e)) => match RpcError::from_a2a(id, &e) {
            Some(rpc) => rpc_json(&rpc.to_json()),
            None => ApiError::A2a(e).into_response(),
        },
        Err(ApiError::Internal(cause)) => {
            tracing::error!(error = %cause, "internal error");
            match RpcError::from_a2a(id, &A2aError::internal()) {
                Some(rpc) => rpc_json(&rpc.to_json()),
                None => ApiError::A2a(A2aError::internal()).into_response(),
            }
        }
        Err(other) => other.into_response(),
    }
}

/// `params.id` of GetTask and CancelTask (A2A 1.0 `GetTaskRequest`).
fn task_id(params: &Value) -> Result<&str, ApiError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| A2aError::invalid_params("params.id must be a task id").into())
}

/// `params.pageSize` of ListTasks, as HTTP+JSON's query parameter reads it.
fn page_size(params: &Value) -> Result<Option<String>, ApiError> {
    match params.get("pageSize") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => {
            Err(A2aError::invalid_params("pageSize must be an integer from 1 to 100").into())
        }
    }
}

/// JSON-RPC answers, errors included, are `200` with `application/json`.
fn rpc_json(body: &Value) -> Response {
    let mut res = (StatusCode::OK, serde_json::to_vec(body).unwrap_or_default()).into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}
