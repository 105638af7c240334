//! Operations: health, readiness, graceful shutdown, limits.

use std::sync::Arc;

use pact_server::agent::{AgentError, BoxFuture, BrandAgent, BrandAgents, ToolGate, Turn};
use pact_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn healthz_and_readyz_answer() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = app
        .http
        .get(format!("{}/readyz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn readyz_fails_when_the_database_is_unreachable() {
    let app = TestApp::spawn().await;
    let db_name = app.db_url.rsplit('/').next().unwrap().to_owned();
    // Drop the node's database from under it (terminating its connections).
    let admin_url = app.db_url.replace(&format!("/{db_name}"), "/postgres");
    let admin = sqlx::PgPool::connect(&admin_url).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database {db_name} with (force)"
    )))
    .execute(&admin)
    .await
    .unwrap();
    let res = app
        .http
        .get(format!("{}/readyz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    let res = app
        .http
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}

/// A brand agent that answers only when the test releases it, to have a
/// request in flight for as long as the test needs.
#[derive(Default)]
struct Held {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}
impl BrandAgent for Held {
    fn skills(&self, _: &pact_db::brands::Brand) -> Vec<pact_proto::card::AgentSkill> {
        vec![]
    }
    fn respond<'a>(
        &'a self,
        _turn: Turn<'a>,
        _tools: &'a mut ToolGate<'_>,
    ) -> BoxFuture<'a, Result<String, AgentError>> {
        Box::pin(async {
            self.started.notify_one();
            self.release.notified().await;
            Ok("done slowly".into())
        })
    }
}

#[tokio::test]
async fn shutdown_finishes_in_flight_requests() {
    let db_url = pact_tests::db::fresh_database().await;
    let mut agents = BrandAgents::builtin();
    let held = Arc::new(Held::default());
    agents.insert("slow", held.clone());
    let master = Arc::new(pact_crypto::MasterKey::generate().unwrap());
    let app = TestApp::spawn_full(db_url, master, |_| {}, agents).await;
    sqlx::query("update brands set agent_kind = 'slow' where id = 'demo'")
        .execute(&app.db)
        .await
        .unwrap();
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    let url = format!("{}/message:send", app.iface("demo"));
    let body =
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let in_flight = tokio::spawn(app.http.post(&url).bearer_auth(&token).json(&body).send());
    // The turn is running: the request is in flight.
    held.started.notified().await;
    let healthz = format!("{}/healthz", app.base_url);
    let stopping = tokio::spawn(app.stop()); // returns only once the in-flight request is done
    // Once a new connection is refused the node has stopped accepting...
    while pact_tests::http_get(&healthz).await.is_ok() {
        tokio::task::yield_now().await;
    }
    // ...and it is still draining: the held turn keeps it from returning.
    assert!(!stopping.is_finished(), "the stop waits for the turn");
    held.release.notify_one();
    stopping.await.unwrap();
    let res = in_flight.await.unwrap().unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["message"]["parts"][0]["text"], "done slowly");
    // And nothing is accepted any more.
    assert!(pact_tests::http_get(&healthz).await.is_err());
}

/// A body over the limit is refused before anything runs, with 413 in the
/// protocol's own format; authentication still comes first (PACT §3), so a
/// bad PA-JWT with a huge body is the bare 401.
#[tokio::test]
async fn oversized_bodies_are_refused_before_anything_runs() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example").await;
    let big = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x".repeat(100_000)}]}});
    let res = app
        .post_a2a(
            "demo",
            "message:send",
            Some(&pa.token("u1", app.audience())),
            &big,
        )
        .await;
    let message = "The request body is larger than this server accepts (65536 bytes)";
    crate::assert_a2a_error(res, 413, "INVALID_PARAMS", Some(message)).await;
    let res = app
        .post_a2a("demo", "message:send", Some("not.a.jwt"), &big)
        .await;
    crate::assert_bare_401(res).await;
    // OAuth: RFC 6749 JSON, not to be stored.
    let res = app
        .http
        .post(app.oauth("demo", "device_authorization"))
        .bearer_auth(pa.token("u1", app.audience()))
        .form(&[
            ("client_id", pa.issuer.as_str()),
            ("scope", &"x".repeat(100_000)),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "invalid_request", "{v}");
    // A page: a page, in HTML.
    let res = app
        .http
        .post(format!("{}/login", app.base_url))
        .form(&[("email", "x".repeat(100_000))])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    // Nothing was stored.
    let contexts: i64 = sqlx::query_scalar("select count(*) from conversations")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(contexts, 0);
}

#[tokio::test]
async fn a_busy_user_is_rate_limited_with_retry_after() {
    let app = TestApp::spawn_with(|c| {
        c.rate_limits.per_user_rate = 0.5;
        c.rate_limits.per_user_burst = 3.0;
    })
    .await;
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    for i in 0..3 {
        assert_eq!(
            app.send("demo", &token, &format!("m{i}"), "hi", None)
                .await
                .status(),
            200
        );
    }
    let res = app.send("demo", &token, "m9", "hi", None).await;
    assert_eq!(res.status(), 429);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3).contains(&retry), "{retry}");
    // Another user of the same PA is not affected.
    assert_eq!(
        app.send("demo", &pa.token("u2", app.audience()), "m1", "hi", None)
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn housekeeping_drops_expired_sessions_and_assertion_jtis_and_keeps_live_ones() {
    use pact_db::sessions::SessionState;
    use time::{Duration, OffsetDateTime};
    let app = TestApp::spawn().await;
    let now = OffsetDateTime::now_utc();
    for (hash, expires) in [
        (b"old".as_slice(), now - Duration::minutes(1)),
        (b"new".as_slice(), now + Duration::hours(1)),
    ] {
        pact_db::sessions::insert(&app.db, hash, "csrf", &SessionState::default(), expires)
            .await
            .unwrap();
    }
    assert!(
        pact_db::users::claim_assertion_jti(
            &app.db,
            &pact_tests::brand_id("demo"),
            "old-jti",
            now - Duration::minutes(1)
        )
        .await
        .unwrap()
    );
    assert!(
        pact_db::users::claim_assertion_jti(
            &app.db,
            &pact_tests::brand_id("demo"),
            "new-jti",
            now + Duration::minutes(5)
        )
        .await
        .unwrap()
    );
    pact_server::housekeeping::sweep(&app.state.node, now).await;
    let sessions: Vec<Vec<u8>> = sqlx::query_scalar("select id_hash from sessions")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(sessions, vec![b"new".to_vec()]);
    let jtis: Vec<String> = sqlx::query_scalar("select jti from brand_assertion_jtis")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(jtis, vec!["new-jti".to_owned()]);
    // A live jti is still refused as a replay after the sweep.
    assert!(
        !pact_db::users::claim_assertion_jti(
            &app.db,
            &pact_tests::brand_id("demo"),
            "new-jti",
            now + Duration::minutes(5)
        )
        .await
        .unwrap()
    );
}

/// Issue 33, item 5: a turn over the request timeout answered a bare 503
/// (no Content-Type, no `Retry-After`), and its `messageId` then answered 400
/// "not available yet" for ten minutes (the stale-claim sweep). Now the 503
/// is the A2A envelope with `Retry-After`, the cut turn's claim is dropped,
/// and a retry of the same `messageId` sent at once runs the turn.
#[tokio::test]
async fn a_turn_over_the_request_timeout_answers_503_in_a2a_format_and_is_retryable_at_once() {
    use pact_tests::held::HeldAgent;
    use std::time::Duration;

    let app = TestApp::spawn_with(|c| c.request_timeout = Duration::from_secs(2)).await;
    let (held, agent_url, mut turns) = HeldAgent::start().await;
    app.new_webhook_secret("demo").await;
    // The agent may take longer than the request may: the request timeout cuts it.
    app.set_agent("demo", &agent_url, Some(20_000)).await;
    let pa = app.registered_pa("https://pa.example/timeout").await;
    let token = pa.token("u1", app.audience());

    // A first turn makes the context (a new context's turn has no claim).
    let first = tokio::spawn({
        let (http, url, token) = (
            app.http.clone(),
            format!("{}/message:send", app.iface("demo")),
            token.clone(),
        );
        async move {
            let body = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
            http.post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    });
    turns.recv().await.unwrap();
    held.release_one();
    let res = first.await.unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    let context = v["message"]["contextId"].as_str().unwrap().to_owned();

    // The second turn, in that context, is held past the request timeout.
    let res = app
        .send("demo", &token, "m2", "again", Some(&context))
        .await;
    let turn = turns.recv().await.unwrap();
    assert_eq!(turn["turn"]["messageId"], "m2");
    assert_eq!(res.status(), 503);
    // The agent's wait now ends a second before the request's time is up
    // (merchant/turn.rs), so the turn ends as one whose agent did not answer
    // (Retry-After 5) rather than being cut by the timeout (2): either way a
    // 503 in the A2A envelope, and nothing of the turn is kept.
    let retry_after: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after >= 1);
    crate::assert_a2a_error(res, 503, "UNAVAILABLE", None).await;

    // Retried at once: the turn runs again (the agent is asked again) and
    // answers, instead of 400 INVALID_PARAMS "not available yet".
    let retry = tokio::spawn({
        let (http, url, token, context) = (
            app.http.clone(),
            format!("{}/message:send", app.iface("demo")),
            token.clone(),
            context.clone(),
        );
        async move {
            let body = json!({"message": {"messageId": "m2", "contextId": context, "role": "ROLE_USER", "parts": [{"text": "again"}]}});
            http.post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    });
    let again = tokio::time::timeout(Duration::from_secs(10), turns.recv())
        .await
        .expect("the retry reaches the agent")
        .unwrap();
    assert_eq!(again["turn"]["messageId"], "m2");
    // One permit for the retry, one for the cut turn's handler should it still wait.
    held.release_one();
    held.release_one();
    let res = retry.await.unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["message"]["parts"][0]["text"], "done", "{v}");
    // And the stored reply answers a later retry, with no third agent call.
    let res = app
        .send("demo", &token, "m2", "again", Some(&context))
        .await;
    assert_eq!(res.status(), 200);
    let stored: serde_json::Value = res.json().await.unwrap();
    assert_eq!(stored, v);
    assert!(turns.try_recv().is_err(), "no third agent call");
}

/// Issue 33, item 5: every 503 in its protocol's format. A request still
/// running at the request timeout — here held up by a personal agent's JWKS
/// that never answers — is answered 503 with `Retry-After` as the A2A
/// envelope on an A2A operation and as RFC 6749 JSON on an OAuth endpoint
/// (before: a bare 503, no Content-Type, no `Retry-After`), and it does not
/// mark the database down.
#[tokio::test]
async fn requests_over_the_request_timeout_answer_503_in_their_own_format() {
    use std::time::Duration;

    let app = TestApp::spawn_with(|c| c.request_timeout = Duration::from_secs(1)).await;
    app.enable_demo_delegation().await;
    let pa = pact_tests::TestPa::start("https://pa.example/slow-jwks").await;
    // The PA's keys are published somewhere that never answers: the PA-JWT's
    // check waits for them (its own fetch timeout is 5 s).
    let jwks = pact_tests::held::serve(axum::Router::new().route(
        "/jwks.json",
        axum::routing::get(std::future::pending::<String>),
    ))
    .await;
    pact_db::agents::upsert(&app.db, &pa.issuer, &format!("{jwks}/jwks.json"), "Slow PA")
        .await
        .unwrap();
    app.settle().await;
    let token = pa.token("u1", app.audience());

    let res = app.send("demo", &token, "m1", "hi", None).await;
    assert_eq!(res.headers()["retry-after"], "2");
    crate::assert_a2a_error(res, 503, "UNAVAILABLE", None).await;

    let res = app
        .http
        .post(format!("{}/oauth/device_authorization", app.iface("demo")))
        .bearer_auth(&token)
        .form(&[("client_id", pa.issuer.as_str()), ("scope", "orders:read")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "2");
    assert_eq!(res.headers()["content-type"], "application/json");
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");

    // A slow request says nothing about the database.
    assert!(!app.state.db_health.is_down());
    let res = app
        .http
        .get(format!("{}/readyz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
