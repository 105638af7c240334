//! A2A messages and tasks (PACT §4, §5.5) and the validation of `message:send`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{A2aError, ErrorReason};

/// Longest `messageId` / `contextId` we accept; ids are opaque but bounded.
pub const MAX_ID_LEN: usize = 256;
/// Longest total text of one user message.
pub const MAX_TEXT_BYTES: usize = 32 * 1024;

/// A text part: PACT §4 says each reply part is exactly `{"text": ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextPart {
    pub text: String,
}

/// A reply from the brand agent (`role: ROLE_AGENT`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessage {
    pub message_id: String,
    pub context_id: String,
    pub role: String,
    pub parts: Vec<TextPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

impl AgentMessage {
    pub fn new(message_id: String, context_id: String, text: String) -> Self {
        Self {
            message_id,
            context_id,
            role: ROLE_AGENT.to_owned(),
            parts: vec![TextPart { text }],
            metadata: None,
        }
    }

    /// All text parts joined, for clients and tests.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .map(|p| p.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The header that carries the delegation token (PACT §5.5:
/// `X-A2A-User-Delegation: Bearer <token>`). Spelled in lower case, as
/// `http::HeaderName` keeps it and as it goes on the wire; field names are
/// case-insensitive (RFC 9110 §5.1), so the Provider matches any spelling.
pub const DELEGATION_HEADER: &str = "x-a2a-user-delegation";

pub const ROLE_USER: &str = "ROLE_USER";
pub const ROLE_AGENT: &str = "ROLE_AGENT";
pub const TASK_STATE_AUTH_REQUIRED: &str = "TASK_STATE_AUTH_REQUIRED";
/// Terminal states (A2A 1.0 `TaskState`) a step-up task ends in.
pub const TASK_STATE_COMPLETED: &str = "TASK_STATE_COMPLETED";
pub const TASK_STATE_REJECTED: &str = "TASK_STATE_REJECTED";
pub const TASK_STATE_FAILED: &str = "TASK_STATE_FAILED";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<AgentMessage>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// The body of a successful `message:send`: `{"message": ...}` or `{"task": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Message(AgentMessage),
    Task(Task),
}

/// `GET tasks` (PACT §4): pactd keeps no tasks, so the list is always empty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Value>,
    pub next_page_token: String,
    pub page_size: u32,
    pub total_size: u32,
}

/// PACT §4: `pageSize` 1–100, default 50; anything else is `INVALID_PARAMS`.
pub fn parse_page_size(raw: Option<&str>) -> Result<u32, A2aError> {
    match raw {
        None => Ok(50),
        // Digits only: `u32::from_str` would take `+5` too.
        Some(s) => match s
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u32>())
        {
            Some(Ok(n)) if (1..=100).contains(&n) => Ok(n),
            _ => Err(A2aError::invalid_params(
                "pageSize must be an integer from 1 to 100",
            )),
        },
    }
}

/// A validated user message from `message:send`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingMessage {
    pub message_id: String,
    pub context_id: Option<String>,
    /// The text parts joined by newlines.
    pub text: String,
}

/// Validates a `message:send` body by the rules of PACT §4. Pure: bytes in,
/// a message or the exact A2A error out.
pub fn parse_send_message(body: &[u8]) -> Result<IncomingMessage, A2aError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| A2aError::invalid_params("Request body is not valid JSON"))?;
    let message = value
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| A2aError::invalid_params("`message` must be an object"))?;

    // A taskId names a task we never issued: pactd keeps none (PACT §4).
    if message.get("taskId").is_some_and(|t| !t.is_null()) {
        return Err(A2aError::new(ErrorReason::TaskNotFound, "Task not found"));
    }

    let message_id = bounded_id(message.get("messageId"), "messageId")?
        .ok_or_else(|| A2aError::invalid_params("`messageId` is required"))?;
    let context_id = bounded_id(message.get("contextId"), "contextId")?;

    match message.get("role").and_then(Value::as_str) {
        Some(ROLE_USER) => {}
        _ => return Err(A2aError::invalid_params("`role` must be ROLE_USER")),
    }

    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| A2aError::invalid_params("`parts` must be an array"))?;
    let mut texts = Vec::with_capacity(parts.len());
    for part in parts {
        let part = part
            .as_object()
            .ok_or_else(|| A2aError::invalid_params("each part must be an object"))?;
        if ["raw", "url", "data", "file"]
            .iter()
            .any(|k| part.contains_key(*k))
        {
            return Err(A2aError::new(
                ErrorReason::ContentTypeNotSupported,
                "Only text parts are supported",
            ));
        }
        match part.get("text") {
            Some(Value::String(t)) => texts.push(t.as_str()),
            _ => return Err(A2aError::invalid_params("each part must carry `text`")),
        }
    }
    if texts.iter().all(|t| t.trim().is_empty()) {
        return Err(A2aError::invalid_params(
            "At least one non-blank text part is required",
        ));
    }
    let text = texts.join("\n");
    if text.len() > MAX_TEXT_BYTES {
        return Err(A2aError::invalid_params("Message text is too long"));
    }
    Ok(IncomingMessage {
        message_id,
        context_id,
        text,
    })
}

fn bounded_id(value: Option<&Value>, name: &str) -> Result<Option<String>, A2aError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID_LEN => Ok(Some(s.clone())),
        Some(_) => Err(A2aError::invalid_params(format!(
            "`{name}` must be a non-empty string of at most {MAX_ID_LEN} bytes"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<IncomingMessage, A2aError> {
        parse_send_message(v.to_string().as_bytes())
    }

    fn msg(extra: Value) -> Value {
        let mut m = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                m.insert(k.clone(), v.clone());
            }
        }
        json!({ "message": m })
    }

    #[test]
    fn a_plain_text_message_parses() {
        let m = parse(msg(json!({"contextId": "c1"}))).unwrap();
        assert_eq!(m.message_id, "m1");
        assert_eq!(m.context_id.as_deref(), Some("c1"));
        assert_eq!(m.text, "hi");
    }

    #[test]
    fn bad_json_is_invalid_params() {
        let e = parse_send_message(b"{not json").unwrap_err();
        assert_eq!(e.reason, ErrorReason::InvalidParams);
    }

    #[test]
    fn non_text_parts_are_content_type_not_supported() {
        for part in [
            json!({"raw": "aGk="}),
            json!({"url": "https://x"}),
            json!({"data": {}}),
        ] {
            let e = parse(msg(json!({"parts": [{"text": "hi"}, part]}))).unwrap_err();
            assert_eq!(e.reason, ErrorReason::ContentTypeNotSupported);
        }
    }

    #[test]
    fn blank_text_only_is_invalid_params() {
        let e = parse(msg(json!({"parts": [{"text": "  "}]}))).unwrap_err();
        assert_eq!(e.reason, ErrorReason::InvalidParams);
        let e = parse(msg(json!({"parts": []}))).unwrap_err();
        assert_eq!(e.reason, ErrorReason::InvalidParams);
    }

    #[test]
    fn wrong_role_is_invalid_params() {
        for role in [json!("ROLE_AGENT"), json!(null), json!(1)] {
            let e = parse(msg(json!({"role": role}))).unwrap_err();
            assert_eq!(e.reason, ErrorReason::InvalidParams);
        }
    }

    #[test]
    fn a_task_id_is_task_not_found() {
        let e = parse(msg(json!({"taskId": "t1"}))).unwrap_err();
        assert_eq!(
            e,
            A2aError::new(ErrorReason::TaskNotFound, "Task not found")
        );
    }

    #[test]
    fn missing_or_oversized_message_id_is_invalid_params() {
        let mut v = msg(json!({}));
        v["message"].as_object_mut().unwrap().remove("messageId");
        assert_eq!(parse(v).unwrap_err().reason, ErrorReason::InvalidParams);
        let e = parse(msg(json!({"messageId": "x".repeat(MAX_ID_LEN + 1)}))).unwrap_err();
        assert_eq!(e.reason, ErrorReason::InvalidParams);
    }

    #[test]
    fn page_size_rules() {
        assert_eq!(parse_page_size(None).unwrap(), 50);
        assert_eq!(parse_page_size(Some("1")).unwrap(), 1);
        assert_eq!(parse_page_size(Some("100")).unwrap(), 100);
        for bad in ["0", "101", "-1", "abc", ""] {
            assert!(parse_page_size(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_serialise_as_single_key_objects() {
        let r = SendMessageResponse::Message(AgentMessage::new("r".into(), "c".into(), "t".into()));
        assert_eq!(
            serde_json::to_value(r).unwrap(),
            json!({"message": {"messageId": "r", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "t"}]}})
        );
    }
}
