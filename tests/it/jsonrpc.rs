//! A2A 1.0's JSON-RPC 2.0 binding at `{iface}/jsonrpc` (A2A §9): the card
//! names it after HTTP+JSON, and the same operations answer through it, with
//! the same authentication, contexts, step-up, receipts and errors, each
//! under A2A's JSON-RPC code (A2A §5.4).

use pact_tests::TestApp;
use serde_json::{Value, json};

use crate::assert_bare_401;

const ISS: &str = "https://pa.example";
const SUB: &str = "pa-user-1";

async fn delegated_app() -> TestApp {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    app
}

fn url(app: &TestApp) -> String {
    format!("{}/jsonrpc", app.iface("demo"))
}

/// One call; the HTTP status and the JSON-RPC response.
async fn call(app: &TestApp, pa_jwt: &str, delegation: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = app.http.post(url(app)).bearer_auth(pa_jwt).json(body);
    if let Some(token) = delegation {
        req = req.header("X-A2A-User-Delegation", format!("Bearer {token}"));
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    if status == 200 {
        assert_eq!(
            res.headers()["content-type"].to_str().unwrap(),
            "application/json"
        );
        assert_eq!(res.headers()["cache-control"], "no-store");
    }
    (status, res.json().await.unwrap_or(Value::Null))
}

fn rpc(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn send_params(message_id: &str, text: &str, context: Option<&str>) -> Value {
    let mut message =
        json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(c) = context {
        message["contextId"] = json!(c);
    }
    json!({ "message": message })
}

/// The error object of a JSON-RPC answer: its code and A2A reason.
fn error_of(v: &Value) -> (i64, Option<&str>) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v.get("result").is_none(), "{v}");
    (
        v["error"]["code"].as_i64().unwrap(),
        v["error"]["data"][0]["reason"].as_str(),
    )
}

#[tokio::test]
async fn the_card_offers_json_rpc_after_http_json() {
    let app = TestApp::spawn().await;
    let card: Value = app
        .http
        .get(format!("{}/.well-known/agent-card.json", app.iface("demo")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(interfaces[0]["protocolBinding"], "HTTP+JSON");
    assert_eq!(interfaces[0]["url"], app.iface("demo").as_str());
    assert_eq!(
        interfaces[1],
        json!({"url": url(&app), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    );
}

#[tokio::test]
async fn the_delegated_journey_runs_over_json_rpc() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());

    // An identity turn, and its retry answered from storage.
    let (status, v) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(json!(1), "SendMessage", send_params("m1", "hello", None)),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v["id"], 1);
    let message = &v["result"]["message"];
    assert_eq!(message["role"], "ROLE_AGENT");
    let ctx = message["contextId"].as_str().unwrap().to_owned();
    let (_, again) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(
            json!("r"),
            "SendMessage",
            send_params("m1", "hello", Some(&ctx)),
        ),
    )
    .await;
    assert_eq!(again["id"], "r");
    assert_eq!(
        again["result"]["message"]["messageId"],
        message["messageId"]
    );

    // An account question: the step-up task, followed with GetTask.
    let (_, v) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(
            json!(2),
            "SendMessage",
            send_params("m2", "show my orders", Some(&ctx)),
        ),
    )
    .await;
    let task = v["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:read"])
    );
    let (_, got) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(json!(3), "GetTask", json!({"id": task["id"]})),
    )
    .await;
    assert_eq!(got["result"]["id"], task["id"]);
    assert_eq!(
        got["result"]["metadata"]["pact.authorizationStatus"],
        "pending"
    );
    let (_, cancel) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(json!(4), "CancelTask", json!({"id": task["id"]})),
    )
    .await;
    assert_eq!(error_of(&cancel), (-32002, Some("TASK_NOT_CANCELABLE")));

    // The person approves; the turn runs delegated, with a receipt that verifies.
    let tokens = app.connect(&pa, SUB, "alice", &["orders:read"]).await;
    let token = tokens["access_token"].as_str().unwrap();
    let (_, got) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(json!(5), "GetTask", json!({"id": task["id"]})),
    )
    .await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    let (_, v) = call(
        &app,
        &pa_jwt,
        Some(token),
        &rpc(
            json!(6),
            "SendMessage",
            send_params("m3", "show my orders", Some(&ctx)),
        ),
    )
    .await;
    let message = &v["result"]["message"];
    assert_eq!(message["contextId"], ctx.as_str());
    let claims = app.verified_receipt(message).await;
    assert_eq!(claims.pa, ISS);
    assert_eq!(claims.scopes_used, vec!["orders:read".to_owned()]);

    // A bad delegation token is the bare 401 of PACT §5.5, as over HTTP+JSON.
    let res = app
        .http
        .post(url(&app))
        .bearer_auth(&pa_jwt)
        .header("X-A2A-User-Delegation", "Bearer not-a-token")
        .json(&rpc(
            json!(7),
            "SendMessage",
            send_params("m4", "show my orders", Some(&ctx)),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"].to_str().unwrap(),
        r#"Bearer realm="a2a", error="invalid_token""#
    );
}

#[tokio::test]
async fn json_rpc_errors_carry_a2a_codes_and_change_nothing() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let cases = [
        (
            rpc(
                json!(1),
                "SendMessage",
                send_params("m1", "hi", Some("no-such-context")),
            ),
            -32602,
            Some("INVALID_PARAMS"),
        ),
        (
            rpc(
                json!(2),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "aGk="}]}}),
            ),
            -32005,
            Some("CONTENT_TYPE_NOT_SUPPORTED"),
        ),
        (
            rpc(json!(3), "SendMessage", json!({})),
            -32602,
            Some("INVALID_PARAMS"),
        ),
        (
            rpc(json!(4), "GetTask", json!({"id": "abc-123"})),
            -32001,
            Some("TASK_NOT_FOUND"),
        ),
        (
            rpc(json!(5), "GetTask", json!({})),
            -32602,
            Some("INVALID_PARAMS"),
        ),
        (
            rpc(json!(6), "ListTasks", json!({"pageSize": 0})),
            -32602,
            Some("INVALID_PARAMS"),
        ),
        (
            rpc(
                json!(7),
                "SendStreamingMessage",
                send_params("m", "hi", None),
            ),
            -32004,
            Some("UNSUPPORTED_OPERATION"),
        ),
        (
            rpc(json!(8), "SubscribeToTask", json!({"id": "t"})),
            -32004,
            Some("UNSUPPORTED_OPERATION"),
        ),
        (
            rpc(json!(9), "GetExtendedAgentCard", json!({})),
            -32004,
            Some("UNSUPPORTED_OPERATION"),
        ),
        (
            rpc(json!(10), "SetTaskPushNotificationConfig", json!({})),
            -32003,
            Some("PUSH_NOTIFICATION_NOT_SUPPORTED"),
        ),
        (rpc(json!(11), "message/send", json!({})), -32601, None),
        (
            json!({"jsonrpc": "2.0", "method": "ListTasks"}),
            -32600,
            None,
        ),
        (
            json!([rpc(json!(12), "ListTasks", json!({}))]),
            -32600,
            None,
        ),
    ];
    for (body, code, reason) in cases {
        let (status, v) = call(&app, &pa_jwt, None, &body).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(error_of(&v), (code, reason), "{body} → {v}");
        if let Some(id) = body.get("id") {
            assert_eq!(&v["id"], id);
        }
    }
    let res = app
        .http
        .post(url(&app))
        .bearer_auth(&pa_jwt)
        .body("{not json")
        .send()
        .await
        .unwrap();
    let v: Value = res.json().await.unwrap();
    assert_eq!(error_of(&v), (-32700, None));
    assert_eq!(v["id"], Value::Null);

    let (_, list) = call(
        &app,
        &pa_jwt,
        None,
        &rpc(json!(13), "ListTasks", json!({"pageSize": 10})),
    )
    .await;
    assert_eq!(
        list["result"],
        json!({"tasks": [], "nextPageToken": "", "pageSize": 10, "totalSize": 0})
    );

    // Nothing above started a conversation.
    let conversations: i64 = sqlx::query_scalar("select count(*) from conversations")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(conversations, 0);

    // Without a PA-JWT: the bare 401 of PACT §3, before the body is read.
    let res = app
        .http
        .post(url(&app))
        .json(&rpc(json!(14), "ListTasks", json!({})))
        .send()
        .await
        .unwrap();
    assert_bare_401(res).await;
}
