//! What the merchant journeys share (merchant.rs, mcp.rs, mcp_server.rs):
//! grants through the device flow, replies and their verified receipts;
//! the Node processes written with the official MCP SDK come from
//! `pact_tests::node`.

use pact_proto::oauth::ReceiptClaims;
use pact_tests::TestApp;
use reqwest::Response;
use serde_json::Value;

pub use pact_tests::node::NodeService;

/// The JSON of a `200`, else a failure showing the body.
pub async fn ok_json(res: Response) -> Value {
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    body
}

/// The text of an A2A message's first part.
pub fn text(message: &Value) -> &str {
    message["parts"][0]["text"].as_str().unwrap()
}

/// The message's receipt, verified with the provider's published keys.
pub async fn verified_receipt(app: &TestApp, message: &Value) -> ReceiptClaims {
    app.verified_receipt(message).await
}

/// Device authorization for `sub` (with details) → approval of `scopes` as
/// `user` → the delegation token.
pub async fn grant(
    app: &TestApp,
    pa: &pact_tests::TestPa,
    sub: &str,
    user: &str,
    scopes: &[&str],
    details: Option<&Value>,
) -> String {
    let auth = app
        .device_authorize(pa, sub, &scopes.join(" "), details)
        .await;
    app.approve(&auth.user_code, user, scopes).await;
    let (status, body) = app.poll(pa, sub, &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    body["access_token"].as_str().unwrap().to_owned()
}

/// The user code in a step-up task's link.
pub fn user_code_of(task: &Value) -> String {
    let link = task["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap();
    link.split("user_code=").nth(1).unwrap().to_owned()
}

/// A step-up task beyond a limit: `AUTH_REQUIRED`, no missing scope, one
/// operation asked about (its tool and `argsHash`) and the link; returns
/// the operation entry.
pub fn beyond_task<'v>(v: &'v Value, tool: &str, args: &Value) -> &'v Value {
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        serde_json::json!([]),
        "{v}"
    );
    let op = &task["metadata"]["pact.missingAuthorizationDetails"][0];
    assert_eq!(op["type"], "pactd.operation", "{v}");
    assert_eq!(op["tool"], tool, "{v}");
    assert_eq!(op["argsHash"], pact_jose::args_hash(args), "{v}");
    op
}

/// A delegated turn on the demo brand that must answer 200: its JSON.
pub async fn send_ok(
    app: &TestApp,
    pa_jwt: &str,
    token: &str,
    message_id: &str,
    words: &str,
    context: Option<&str>,
) -> Value {
    ok_json(
        app.send_delegated("demo", pa_jwt, token, message_id, words, context)
            .await,
    )
    .await
}
