//! The JSON-RPC 2.0 binding of A2A 1.0 (A2A §9): method names, the request
//! as it must arrive, and errors with A2A's JSON-RPC codes (A2A §5.4, JSON-RPC
//! 2.0 §5.1). The operations behind it are the HTTP+JSON ones.

use serde_json::{Value, json};

use crate::error::{A2aError, ErrorReason};

/// The `protocolBinding` of the card's JSON-RPC interface (A2A 1.0 §5.2).
pub const BINDING: &str = "JSONRPC";
/// Its path under the interface URL (pactd's choice; the card names it).
pub const PATH: &str = "jsonrpc";

/// JSON-RPC 2.0 §5.1.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// The A2A 1.0 methods (A2A §5.3), as sent in `method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    SetTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfig,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
}

impl Method {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "SendMessage" => Self::SendMessage,
            "SendStreamingMessage" => Self::SendStreamingMessage,
            "GetTask" => Self::GetTask,
            "ListTasks" => Self::ListTasks,
            "CancelTask" => Self::CancelTask,
            "SubscribeToTask" => Self::SubscribeToTask,
            "SetTaskPushNotificationConfig" => Self::SetTaskPushNotificationConfig,
            "GetTaskPushNotificationConfig" => Self::GetTaskPushNotificationConfig,
            "ListTaskPushNotificationConfig" => Self::ListTaskPushNotificationConfig,
            "DeleteTaskPushNotificationConfig" => Self::DeleteTaskPushNotificationConfig,
            "GetExtendedAgentCard" => Self::GetExtendedAgentCard,
            _ => return None,
        })
    }
}

/// A request that passed JSON-RPC 2.0 §4's checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: Value,
    pub method: Method,
    /// Always an object (`{}` when absent).
    pub params: Value,
}

/// An error object with the request's id (`null` when it could not be read).
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub id: Value,
    pub code: i64,
    pub message: String,
    /// The A2A reason, for errors A2A defines.
    pub reason: Option<ErrorReason>,
}

impl RpcError {
    fn plain(id: Value, code: i64, message: &str) -> Self {
        Self {
            id,
            code,
            message: message.to_owned(),
            reason: None,
        }
    }

    /// An A2A error under its JSON-RPC code (A2A §5.4). `None` for the
    /// reasons that are transport answers on every binding (429, 503).
    pub fn from_a2a(id: Value, e: &A2aError) -> Option<Self> {
        let code = code_of(e.reason)?;
        Some(Self {
            id,
            code,
            message: e.message.clone(),
            reason: Some(e.reason),
        })
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(reason) = self.reason {
            // The same ErrorInfo as the HTTP+JSON envelope's details.
            error["data"] = json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason.as_str(),
                "domain": "a2a-protocol.org",
            }]);
        }
        json!({"jsonrpc": "2.0", "id": self.id, "error": error})
    }
}

/// A2A §5.4's JSON-RPC code of each reason; JSON-RPC's own for the rest.
pub fn code_of(reason: ErrorReason) -> Option<i64> {
    Some(match reason {
        ErrorReason::InvalidParams => INVALID_PARAMS,
        ErrorReason::Internal => INTERNAL_ERROR,
        ErrorReason::TaskNotFound => -32001,
        ErrorReason::TaskNotCancelable => -32002,
        ErrorReason::PushNotificationNotSupported => -32003,
        ErrorReason::UnsupportedOperation => -32004,
        ErrorReason::ContentTypeNotSupported => -32005,
        ErrorReason::ResourceExhausted | ErrorReason::Unavailable => return None,
    })
}

/// A success with the request's id.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Reads a request body (JSON-RPC 2.0 §4, §5.1): not JSON is a parse error;
/// a batch, a notification (no `id`), a wrong `jsonrpc`, a non-string
/// `method` or an id that is neither string, number nor null is an invalid
/// request; an unknown method is method-not-found; `params` other than an
/// object is invalid params.
pub fn parse(body: &[u8]) -> Result<Request, RpcError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| RpcError::plain(Value::Null, PARSE_ERROR, "Parse error"))?;
    let Some(obj) = value.as_object() else {
        let msg = if value.is_array() {
            "Invalid Request: batches are not supported"
        } else {
            "Invalid Request"
        };
        return Err(RpcError::plain(Value::Null, INVALID_REQUEST, msg));
    };
    let id = match obj.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id.clone(),
        Some(_) => {
            return Err(RpcError::plain(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: bad id",
            ));
        }
        // A2A methods all answer; a notification would run without one.
        None => {
            return Err(RpcError::plain(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: an id is required",
            ));
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::plain(
            id,
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
        ));
    }
    let Some(name) = obj.get("method").and_then(Value::as_str) else {
        return Err(RpcError::plain(
            id,
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
        ));
    };
    let Some(method) = Method::parse(name) else {
        return Err(RpcError::plain(id, METHOD_NOT_FOUND, "Method not found"));
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err(RpcError::plain(
                id,
                INVALID_PARAMS,
                "params must be an object",
            ));
        }
    };
    Ok(Request { id, method, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> (Value, i64) {
        let e = parse(body.as_bytes()).unwrap_err();
        (e.id, e.code)
    }

    #[test]
    fn requests_are_checked_in_json_rpc_order() {
        assert_eq!(code("{"), (Value::Null, PARSE_ERROR));
        assert_eq!(code("[]"), (Value::Null, INVALID_REQUEST));
        assert_eq!(code("7"), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"GetTask"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#),
            (json!(1), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a","method":5}"#),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a","method":"message/send"}"#),
            (json!("a"), METHOD_NOT_FOUND)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":[1]}"#),
            (json!(2), INVALID_PARAMS)
        );
        let ok = parse(br#"{"jsonrpc":"2.0","id":3,"method":"ListTasks"}"#).unwrap();
        assert_eq!(ok.method, Method::ListTasks);
        assert_eq!(ok.params, json!({}));
    }

    #[test]
    fn a2a_errors_keep_their_reason_under_a2a_codes() {
        let e = RpcError::from_a2a(json!(1), &A2aError::task_not_found("t")).unwrap();
        let v = e.to_json();
        assert_eq!(v["error"]["code"], -32001);
        assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["id"], 1);
        assert!(RpcError::from_a2a(json!(1), &A2aError::unavailable()).is_none());
        assert_eq!(code_of(ErrorReason::Internal), Some(-32603));
    }
}
