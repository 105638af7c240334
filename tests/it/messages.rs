//! `message:send` (PACT §4): replies, contexts, retries, validation.

use pact_tests::TestApp;
use serde_json::{Value, json};

use crate::assert_a2a_error;

const ISS: &str = "https://pa.example";

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("select count(*) from {table}")))
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_demo_brand_answers_public_questions_with_an_agent_message() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let res = app
        .send(
            "demo",
            &pa.token("u1", app.audience()),
            "m1",
            "When are you open?",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    // Exactly this content type, no charset (PACT §4).
    assert_eq!(res.headers()["content-type"], "application/a2a+json");
    // A reply may carry account data and receipts: never stored by a cache.
    assert_eq!(res.headers()["cache-control"], "no-store");
    let v: Value = res.json().await.unwrap();
    let m = &v["message"];
    assert_eq!(m["role"], "ROLE_AGENT");
    assert!(
        m["messageId"]
            .as_str()
            .is_some_and(|s| !s.is_empty() && s != "m1")
    );
    assert!(m["contextId"].as_str().is_some_and(|s| !s.is_empty()));
    let parts = m["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 1);
    assert_eq!(
        parts[0].as_object().unwrap().len(),
        1,
        "each part is exactly {{text}}"
    );
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap()
            .contains("Monday to Friday")
    );
    assert_eq!(v.as_object().unwrap().len(), 1);
}

#[tokio::test]
async fn account_questions_without_delegation_ask_for_an_order_number() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let v: Value = app
        .send("demo", &token, "m1", "Where is my order?", None)
        .await
        .json()
        .await
        .unwrap();
    assert!(
        v["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("order number")
    );
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let v: Value = app
        .send("demo", &token, "m2", "DEMO-12345", Some(&ctx))
        .await
        .json()
        .await
        .unwrap();
    let text = v["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("connected"), "{text}");
    assert_eq!(v["message"]["contextId"], ctx.as_str());
}

#[tokio::test]
async fn a_context_continues_only_for_its_own_brand_pa_and_sub() {
    let app = TestApp::spawn().await;
    app.add_brand("acme", "Acme").await;
    let pa = app.registered_pa(ISS).await;
    let other_pa = app.registered_pa("https://other-pa.example").await;
    let v: Value = app
        .send("demo", &pa.token("alice", app.audience()), "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();

    // The owner continues.
    let res = app
        .send(
            "demo",
            &pa.token("alice", app.audience()),
            "m2",
            "hi again",
            Some(&ctx),
        )
        .await;
    assert_eq!(res.status(), 200);

    // Another sub of the same PA, another PA with the same sub, the same caller at another brand:
    // all see exactly what an unknown id gets.
    for res in [
        app.send(
            "demo",
            &pa.token("mallory", app.audience()),
            "m3",
            "hi",
            Some(&ctx),
        )
        .await,
        app.send(
            "demo",
            &other_pa.token("alice", app.audience()),
            "m3",
            "hi",
            Some(&ctx),
        )
        .await,
        app.send(
            "acme",
            &pa.token("alice", app.audience()),
            "m3",
            "hi",
            Some(&ctx),
        )
        .await,
        app.send(
            "demo",
            &pa.token("alice", app.audience()),
            "m3",
            "hi",
            Some(&uuid::Uuid::new_v4().to_string()),
        )
        .await,
        app.send(
            "demo",
            &pa.token("alice", app.audience()),
            "m3",
            "hi",
            Some("not-a-uuid"),
        )
        .await,
    ] {
        assert_a2a_error(res, 400, "INVALID_PARAMS", Some("Unknown contextId")).await;
    }
    assert_eq!(count(&app, "messages").await, 2);
}

#[tokio::test]
async fn a_retried_message_id_returns_the_stored_reply_without_running_the_agent() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let first: Value = app
        .send("demo", &token, "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    let second: Value = app
        .send("demo", &token, "m2", "When are you open?", Some(&ctx))
        .await
        .json()
        .await
        .unwrap();
    // A retry of m2 with *different* text still gets m2's stored reply: the agent did not run again.
    let retry: Value = app
        .send(
            "demo",
            &token,
            "m2",
            "What is your return policy?",
            Some(&ctx),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(retry, second);
    assert_eq!(count(&app, "messages").await, 2);
}

#[tokio::test]
async fn concurrent_retries_of_one_message_get_one_reply() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let first: Value = app
        .send("demo", &token, "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    let sends = (0..8).map(|_| app.send("demo", &token, "m2", "When are you open?", Some(&ctx)));
    let replies: Vec<Value> = futures_join(sends).await;
    for r in &replies {
        assert_eq!(r, &replies[0]);
    }
    assert_eq!(count(&app, "messages").await, 2);
}

async fn futures_join<F: std::future::Future<Output = reqwest::Response>>(
    fs: impl Iterator<Item = F>,
) -> Vec<Value> {
    let mut set = Vec::new();
    for f in fs {
        set.push(f);
    }
    let mut out = Vec::new();
    // Drive them concurrently on this task.
    let results = join_all(set).await;
    for r in results {
        assert_eq!(r.status(), 200);
        out.push(r.json::<Value>().await.unwrap());
    }
    out
}

/// Drives the futures concurrently on this task; their outputs in order.
pub(crate) async fn join_all<F: std::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = fs.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if outs[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => outs[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outs.into_iter().map(|o| o.unwrap()).collect()
}

#[tokio::test]
async fn a_message_whose_reply_is_not_stored_yet_is_invalid_params() {
    // A retry waits for the running turn up to the request timeout less 2 s
    // (`a2a/send.rs`); a short timeout keeps that wait at its 1 s floor.
    let app = TestApp::spawn_with(|c| c.request_timeout = std::time::Duration::from_secs(3)).await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let first: Value = app
        .send("demo", &token, "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    // Another node is mid-turn on m2: its row exists without a reply.
    sqlx::query("insert into messages (conversation_id, message_id, request_text) values ($1::uuid, 'm2', 'x')")
        .bind(&ctx)
        .execute(&app.db)
        .await
        .unwrap();
    let res = app.send("demo", &token, "m2", "hi", Some(&ctx)).await;
    assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;
}

/// A claim left by a node that stopped mid-turn is dropped by the
/// housekeeping sweep once it is ten minutes old, so the PA's retry of that
/// `messageId` runs; a younger claim and an old answered turn stay. The
/// sweep finds claims by `replied_at` (migration 0049), which every stored
/// reply sets.
#[tokio::test]
async fn the_sweep_drops_only_claims_left_ten_minutes_without_a_reply() {
    use time::{Duration, OffsetDateTime};
    // A short request timeout keeps the wait for the young claim at 1 s.
    let app = TestApp::spawn_with(|c| c.request_timeout = std::time::Duration::from_secs(3)).await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let first: Value = app
        .send("demo", &token, "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    let now = OffsetDateTime::now_utc();
    for (message_id, age) in [("m2", 11), ("m3", 1)] {
        sqlx::query(
            "insert into messages (conversation_id, message_id, request_text, created_at) \
             values ($1::uuid, $2, 'x', $3)",
        )
        .bind(&ctx)
        .bind(message_id)
        .bind(now - Duration::minutes(age))
        .execute(&app.db)
        .await
        .unwrap();
    }
    sqlx::query("update messages set created_at = $1 where message_id = 'm1'")
        .bind(now - Duration::hours(1))
        .execute(&app.db)
        .await
        .unwrap();

    pact_server::housekeeping::sweep(&app.state.node, now).await;

    let swept: Value = app
        .send("demo", &token, "m2", "When are you open?", Some(&ctx))
        .await
        .json()
        .await
        .unwrap();
    assert!(swept["message"]["parts"][0]["text"].is_string(), "{swept}");
    let res = app.send("demo", &token, "m3", "hi", Some(&ctx)).await;
    assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;
    let retry: Value = app
        .send("demo", &token, "m1", "hi", Some(&ctx))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(retry, first);
    assert_eq!(count(&app, "messages").await, 3);
}

#[tokio::test]
async fn a_closed_conversation_is_an_unsupported_operation() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let first: Value = app
        .send("demo", &token, "m1", "hi", None)
        .await
        .json()
        .await
        .unwrap();
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    pact_db::conversations::close(&app.db, ctx.parse().unwrap())
        .await
        .unwrap();
    let res = app.send("demo", &token, "m2", "hi", Some(&ctx)).await;
    assert_a2a_error(res, 400, "UNSUPPORTED_OPERATION", None).await;
}

#[tokio::test]
async fn malformed_requests_get_the_right_error_and_write_nothing() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let url = format!("{}/message:send", app.iface("demo"));
    let raw = |body: &'static str| app.http.post(&url).bearer_auth(&token).body(body).send();
    assert_a2a_error(raw("{not json").await.unwrap(), 400, "INVALID_PARAMS", None).await;
    assert_a2a_error(raw("").await.unwrap(), 400, "INVALID_PARAMS", None).await;
    let cases = [
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "aGk="}]}}),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "https://x.example/f"}]}}),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"a": 1}}]}}),
            400,
            "CONTENT_TYPE_NOT_SUPPORTED",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"message": {"messageId": "m", "parts": [{"text": "hi"}]}}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "   "}]}}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            400,
            "INVALID_PARAMS",
        ),
        (
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            400,
            "INVALID_PARAMS",
        ),
        (json!({"msg": {}}), 400, "INVALID_PARAMS"),
    ];
    for (body, status, reason) in cases {
        assert_a2a_error(
            app.post_a2a("demo", "message:send", Some(&token), &body)
                .await,
            status,
            reason,
            None,
        )
        .await;
    }
    let task = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "taskId": "t1"}});
    assert_a2a_error(
        app.post_a2a("demo", "message:send", Some(&token), &task)
            .await,
        404,
        "TASK_NOT_FOUND",
        Some("Task not found"),
    )
    .await;
    assert_eq!(count(&app, "conversations").await, 0);
    assert_eq!(count(&app, "messages").await, 0);
}

#[tokio::test]
async fn any_content_type_and_any_a2a_version_header_are_accepted() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token("u1", app.audience());
    let body =
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                      "configuration": {"blocking": true}, "metadata": {"x": 1}})
        .to_string();
    let url = format!("{}/message:send", app.iface("demo"));
    for (ct, version) in [
        ("text/plain", Some("1.0")),
        ("application/a2a+json", Some("0.3")),
        ("application/octet-stream", None),
    ] {
        let mut req = app
            .http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", ct)
            .body(body.clone());
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200, "{ct}");
    }
    // No content type at all.
    let res = app
        .http
        .post(&url)
        .bearer_auth(&token)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
