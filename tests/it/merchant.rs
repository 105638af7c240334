//! The merchant's own agent and systems behind pactd (docs/merchant-agent.md):
//! the example merchant (examples/merchant, a real Python process) answers a
//! brand; its tools are reached only through pactd's gateway, which enforces
//! scopes and `authorization_details`; resource servers introspect
//! delegation tokens (RFC 7662). Also every refusal: turn tokens outside
//! their turn, missing scope, details mismatch, an agent that is down, slow
//! or too talkative, bad signatures at the merchant, and a retried
//! `messageId` while the agent runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use pact_server::merchant::signing::WebhookSecret;
use pact_tests::TestApp;
use pact_tests::merchant::Merchant;
use reqwest::Response;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

use crate::journey::{grant, ok_json, text, verified_receipt};

const ISS: &str = "https://pa.example/merchant";
const SUB: &str = "pa-user-1";

async fn shop_app() -> (TestApp, Merchant) {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let m = app.merchant_brand("demo").await;
    (app, m)
}

async fn message_rows(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from messages")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn introspect(app: &TestApp, basic: Option<(&str, &str)>, token: &str) -> Response {
    let mut req = app
        .http
        .post(app.oauth("demo", "introspect"))
        .form(&[("token", token)]);
    if let Some((id, secret)) = basic {
        req = req.basic_auth(id, Some(secret));
    }
    req.send().await.unwrap()
}

async fn credential(app: &TestApp, brand: &str) -> (String, String) {
    let c = pact_server::merchant::credentials::generate().unwrap();
    pact_db::merchant::insert_credential(
        &app.db,
        &c.client_id,
        &pact_tests::brand_id(brand),
        "orders API",
        &c.secret_hash,
    )
    .await
    .unwrap();
    (c.client_id, c.secret)
}

/// The merchant-agent journey end to end: consent for orders:read only → lookup
/// works with a receipt listing the tool → cancel gets 403 at the gateway and
/// the PA a step-up task → after approval the cancel reaches the example's
/// API exactly once → introspection: active, then inactive after revocation.
#[tokio::test]
async fn the_delegated_journey_runs_through_the_example_merchant() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let read = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;

    let v = ok_json(
        app.send_delegated("demo", &pa_jwt, &read, "m1", "Show me my orders", None)
            .await,
    )
    .await;
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    assert!(text(&v["message"]).contains("SHOP-1001"), "{v}");
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "lookup_orders");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({})).as_str())
    );
    assert_eq!(claims.scopes_used, ["orders:read"]);

    // Cancelling needs orders:cancel: refused at the gateway, nothing forwarded, step-up.
    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &read,
            "m2",
            "Please cancel SHOP-1001",
            Some(&ctx),
        )
        .await,
    )
    .await;
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert_eq!(task["contextId"], ctx.as_str());
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:cancel"])
    );
    let link = task["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap();
    assert!(link.contains("/device?user_code="), "{link}");
    let claims = verified_receipt(&app, &task["status"]["message"]).await;
    assert!(claims.actions.is_empty(), "a refused call is no action");
    let stats = m.stats().await;
    assert_eq!(stats["tool_calls"].get("cancel_order"), None, "{stats}");
    assert_eq!(stats["cancellations"], json!({}));

    // The person approves cancelling (limited to that order); the PA asks again.
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let both = grant(
        &app,
        &pa,
        SUB,
        "ann",
        &["orders:read", "orders:cancel"],
        Some(&details),
    )
    .await;
    let v = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &both,
            "m3",
            "Please cancel SHOP-1001",
            Some(&ctx),
        )
        .await,
    )
    .await;
    assert!(
        text(&v["message"]).contains("SHOP-1001 is cancelled"),
        "{v}"
    );
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.actions[0].tool, "cancel_order");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({"order_id": "SHOP-1001"})).as_str())
    );
    // A retry of m3 is the stored reply: the cancel is not forwarded again.
    let again = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            &both,
            "m3",
            "Please cancel SHOP-1001",
            Some(&ctx),
        )
        .await,
    )
    .await;
    assert_eq!(again, v);
    let stats = m.stats().await;
    assert_eq!(stats["cancellations"], json!({"SHOP-1001": 1}), "{stats}");
    assert_eq!(stats["turns"]["m3"], 1);

    // The merchant's API checks the token itself by introspection.
    let (id, secret) = credential(&app, "demo").await;
    let res = introspect(&app, Some((&id, &secret)), &both).await;
    assert_eq!(res.headers()["cache-control"], "no-store");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["active"], true, "{body}");
    assert_eq!(body["sub"], "ann");
    assert_eq!(body["client_id"], ISS);
    assert_eq!(body["scope"], "orders:cancel orders:read");
    assert_eq!(body["authorization_details"], details);
    assert_eq!(body["aud"], app.iface("demo"));
    assert_eq!(body["iss"], app.oauth("demo", "").trim_end_matches('/'));
    assert!(body["exp"].as_i64().unwrap() > body["iat"].as_i64().unwrap());
    let grant_id: uuid::Uuid = body["grant_id"].as_str().unwrap().parse().unwrap();
    pact_db::grants::revoke(&app.db, grant_id.into(), "test")
        .await
        .unwrap();
    let body: Value = introspect(&app, Some((&id, &secret)), &both)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body, json!({"active": false}));
}

/// RFC 7662: client authentication by a live credential of this brand;
/// any token that is not good here is just `active: false`.
#[tokio::test]
async fn introspection_needs_a_brand_credential_and_says_little_about_bad_tokens() {
    let (app, _m) = shop_app().await;
    app.add_brand("acme", "Acme").await;
    let pa = app.registered_pa(ISS).await;
    let token = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;
    let (id, secret) = credential(&app, "demo").await;
    let (acme_id, acme_secret) = credential(&app, "acme").await;

    let res = introspect(&app, None, &token).await;
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        r#"Basic realm="introspection""#
    );
    assert_eq!(
        introspect(&app, Some((&id, "pacts_wrong")), &token)
            .await
            .status(),
        401
    );
    // Another brand's credential does not open this brand's endpoint.
    assert_eq!(
        introspect(&app, Some((&acme_id, &acme_secret)), &token)
            .await
            .status(),
        401
    );
    for bad in ["", "not-a-jwt", "a.b.c", &format!("{token}x")] {
        let res = introspect(&app, Some((&id, &secret)), bad).await;
        if bad.is_empty() {
            assert_eq!(res.status(), 400);
            continue;
        }
        let body: Value = res.json().await.unwrap();
        assert_eq!(body, json!({"active": false}), "{bad}");
    }
    // A token signed by pactd's key that names more than its grant holds is
    // reported with the grant's scopes only, as a turn acts with no more.
    let wider = app.mint_delegation_token(&token, |c| {
        c.scope = "orders:read orders:cancel".to_owned();
    });
    let body: Value = introspect(&app, Some((&id, &secret)), &wider)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["active"], true, "{body}");
    assert_eq!(body["scope"], "orders:read", "{body}");
    // A demo token introspected at acme (foreign brand) is inactive there.
    let res = app
        .http
        .post(app.oauth("acme", "introspect"))
        .basic_auth(&acme_id, Some(&acme_secret))
        .form(&[("token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<Value>().await.unwrap(), json!({"active": false}));
    // A revoked credential is refused.
    assert!(
        pact_db::merchant::revoke_credential(&app.db, &pact_tests::brand_id("demo"), &id)
            .await
            .unwrap()
    );
    assert_eq!(
        introspect(&app, Some((&id, &secret)), &token)
            .await
            .status(),
        401
    );
    // Listed in the RFC 8414 metadata.
    let meta: Value = app
        .http
        .get(app.oauth("demo", ".well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        meta["introspection_endpoint"],
        app.oauth("demo", "introspect")
    );
}

/// PACT §5.7 at the gateway: orders:cancel is held, but only for SHOP-1002;
/// cancelling SHOP-1001 is 403 not_permitted and reaches nothing.
#[tokio::test]
async fn details_that_do_not_cover_the_arguments_forward_nothing() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1002"]}]);
    let token = grant(&app, &pa, SUB, "ann", &["orders:cancel"], Some(&details)).await;
    let v = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m1", "cancel SHOP-1001", None)
            .await,
    )
    .await;
    // Beyond the grant: nothing forwarded; the person is asked about it.
    crate::journey::beyond_task(&v, "cancel_order", &json!({"order_id": "SHOP-1001"}));
    let claims = verified_receipt(&app, &v["task"]["status"]["message"]).await;
    assert!(claims.actions.is_empty());
    assert_eq!(claims.refused[0].reason, "beyond_limit");
    let stats = m.stats().await;
    assert_eq!(stats["tool_calls"], json!({}), "{stats}");
    // The order it does cover goes through.
    let v = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m2", "cancel SHOP-1002", None)
            .await,
    )
    .await;
    assert!(
        text(&v["message"]).contains("SHOP-1002 is cancelled"),
        "{v}"
    );
    assert_eq!(m.stats().await["cancellations"], json!({"SHOP-1002": 1}));
}

/// An agent that is down, too slow or too talkative: a retryable A2A error,
/// nothing stored, and the same `messageId` works once the agent does.
#[tokio::test]
async fn a_failing_agent_is_a_retryable_error_and_nothing_is_stored() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token(SUB, app.audience());
    let ctx =
        ok_json(app.send("demo", &token, "m0", "hello", None).await).await["message"]["contextId"]
            .as_str()
            .unwrap()
            .to_owned();
    let rows = message_rows(&app).await;

    // Down: nothing listens on the port.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}/pact", closed.local_addr().unwrap());
    drop(closed);
    app.set_agent("demo", &dead, None).await;
    let res = app
        .send("demo", &token, "m1", "When are you open?", Some(&ctx))
        .await;
    assert_eq!(res.headers()["retry-after"], "5");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], 503, "{body}");
    assert_eq!(body["error"]["details"][0]["reason"], "UNAVAILABLE");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unavailable"),
        "{body}"
    );
    assert_eq!(message_rows(&app).await, rows, "nothing half-stored");

    // Slow: a 500 ms timeout against an agent that takes 3 s.
    app.set_agent("demo", &m.agent_url(), Some(500)).await;
    let started = Instant::now();
    let res = app
        .send("demo", &token, "m1", "#slow When are you open?", Some(&ctx))
        .await;
    assert_eq!(res.status(), 503);
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(message_rows(&app).await, rows);

    // Too talkative: a 100 KiB reply.
    app.set_agent("demo", &m.agent_url(), Some(20_000)).await;
    let res = app
        .send("demo", &token, "m1", "#big When are you open?", Some(&ctx))
        .await;
    assert_eq!(res.status(), 503);
    assert_eq!(message_rows(&app).await, rows);

    // The same messageId, once the agent answers: stored once.
    let v = ok_json(
        app.send("demo", &token, "m1", "When are you open?", Some(&ctx))
            .await,
    )
    .await;
    assert!(text(&v["message"]).contains("Monday to Friday"), "{v}");
    assert_eq!(message_rows(&app).await, rows + 1);
}

/// A delegated first turn whose agent fails leaves nothing behind: its
/// claim (the new context's row) is dropped before the error is answered, so
/// the PA's retry of the `messageId` runs at once, in a context of its own,
/// and is stored once with its receipt.
#[tokio::test]
async fn a_failed_delegated_first_turn_leaves_no_context_and_its_retry_runs() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let read = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;
    let count = |table: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "select count(*) from {table}"
            )))
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("http://{}/pact", closed.local_addr().unwrap());
    drop(closed);
    app.set_agent("demo", &dead, None).await;
    let res = app
        .send_delegated("demo", &pa_jwt, &read, "m1", "Show me my orders", None)
        .await;
    assert_eq!(res.status(), 503);
    assert_eq!(count("conversations").await, 0, "the claim is dropped");
    assert_eq!(count("messages").await, 0);

    app.set_agent("demo", &m.agent_url(), None).await;
    let v = ok_json(
        app.send_delegated("demo", &pa_jwt, &read, "m1", "Show me my orders", None)
            .await,
    )
    .await;
    assert!(text(&v["message"]).contains("SHOP-1001"), "{v}");
    assert_eq!(verified_receipt(&app, &v["message"]).await.actions.len(), 1);
    assert_eq!(
        (
            count("conversations").await,
            count("messages").await,
            count("receipts").await
        ),
        (1, 1, 1)
    );
}

/// PACT §4 with a slow agent: a retry of a running `messageId` waits for the
/// reply instead of calling the agent a second time.
#[tokio::test]
async fn a_concurrent_retry_does_not_call_the_agent_twice() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token(SUB, app.audience());
    let ctx =
        ok_json(app.send("demo", &token, "m0", "hello", None).await).await["message"]["contextId"]
            .as_str()
            .unwrap()
            .to_owned();
    let first = app.send("demo", &token, "m1", "#wait when are you open", Some(&ctx));
    let retry = async {
        // The retry goes out once the agent has the first turn (it holds it
        // for a second), not after a guessed delay.
        let mut polls = 0;
        while m.stats().await["turns"]["m1"] != 1 {
            polls += 1;
            assert!(polls < 10_000, "the first turn never reached the agent");
        }
        app.send("demo", &token, "m1", "#wait when are you open", Some(&ctx))
            .await
    };
    let (a, b) = tokio::join!(first, retry);
    let (a, b) = (ok_json(a).await, ok_json(b).await);
    assert_eq!(a, b);
    assert_eq!(m.stats().await["turns"]["m1"], 1, "the agent ran once");
}

/// Standard Webhooks at the merchant: the example refuses a missing, wrong
/// or stale signature before reading the request, a webhook-id it has seen
/// within the tolerance window (a replay), and a well-signed body meant for
/// another endpoint; it accepts pactd's.
#[tokio::test]
async fn the_example_refuses_bad_signatures() {
    let whsec = format!(
        "whsec_{}",
        STANDARD.encode(b"0123456789abcdef0123456789abcdef")
    );
    let m = Merchant::start(&whsec).await;
    let secret = WebhookSecret::from_bytes(b"0123456789abcdef0123456789abcdef".to_vec());
    let body = serde_json::to_vec(&json!({"type": "pact.turn", "url": m.agent_url(),
        "turn": {"messageId": "x", "text": "hello"},
        "tools": {"url": "http://127.0.0.1:9/none", "token": "t"}}))
    .unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let headers = |id: &str, ts: i64, sig: String| {
        vec![
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", sig),
        ]
    };
    let good = secret.sign("msg_1", now, &body).unwrap();
    // The spec signs id, timestamp and body (not the path): a good request is 200.
    assert_eq!(
        m.post_raw("/pact", &headers("msg_1", now, good.clone()), &body)
            .await,
        200
    );
    // The same request again is a replay: refused within the window.
    assert_eq!(
        m.post_raw("/pact", &headers("msg_1", now, good.clone()), &body)
            .await,
        401
    );
    // Several signatures (rotation): one good one is enough.
    let good2 = secret.sign("msg_2", now, &body).unwrap();
    assert_eq!(
        m.post_raw(
            "/pact",
            &headers("msg_2", now, format!("v1,AAAA {good2}")),
            &body
        )
        .await,
        200
    );
    assert_eq!(m.post_raw("/pact", &[], &body).await, 401);
    let other = WebhookSecret::generate().unwrap();
    let wrong = other.sign("msg_3", now, &body).unwrap();
    assert_eq!(
        m.post_raw("/pact", &headers("msg_3", now, wrong), &body)
            .await,
        401
    );
    let mut edited = body.clone();
    edited.push(b' ');
    let good4 = secret.sign("msg_4", now, &body).unwrap();
    assert_eq!(
        m.post_raw("/pact", &headers("msg_4", now, good4), &edited)
            .await,
        401
    );
    let old = now - 600;
    let stale = secret.sign("msg_5", old, &body).unwrap();
    assert_eq!(
        m.post_raw("/pact", &headers("msg_5", old, stale), &body)
            .await,
        401
    );
    // A well-signed turn posted to a tool endpoint is not a tool call.
    let good6 = secret.sign("msg_6", now, &body).unwrap();
    assert_eq!(
        m.post_raw("/tools/cancel-order", &headers("msg_6", now, good6), &body)
            .await,
        403
    );
    let stats = m.stats().await;
    assert_eq!(stats["refused_signatures"], 4);
    assert_eq!(stats["refused_replays"], 1);
    assert_eq!(stats["refused_misdirected"], 1);
    assert_eq!(stats["agent_calls"], 2);
    assert_eq!(stats["tool_calls"], json!({}));
}

/// The requests a capturing tool server kept: headers and raw body.
type Kept = Arc<std::sync::Mutex<Vec<(HeaderMap, Bytes)>>>;

/// A tool server that keeps every request pactd forwards to it: its
/// Standard Webhooks headers and raw body, as an eavesdropper would.
async fn start_tool_capture() -> (String, Kept) {
    let kept: Kept = Arc::default();
    let app = axum::Router::new()
        .route(
            "/tools/lookup",
            post(
                |State(k): State<Kept>, headers: HeaderMap, body: Bytes| async move {
                    k.lock().unwrap().push((headers, body));
                    axum::Json(json!({"orders": []}))
                },
            ),
        )
        .with_state(kept.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/tools/lookup", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (url, kept)
}

/// Issue 28, finding 5: a pactd-signed `pact.tool_call` for `lookup_orders`
/// (scope orders:read), captured where it was sent and replayed to the
/// example's `/tools/cancel-order`, cancels nothing: the signed body names
/// its tool and its URL. Replayed to the lookup endpoint, or the same
/// legitimate cancellation sent twice, it is refused too (the webhook-id was
/// seen). What pactd signs names the destination: the turn its agent URL,
/// the tool call its tool and URL.
#[tokio::test]
async fn a_signed_tool_call_cannot_be_replayed_to_another_endpoint() {
    let (app, m) = shop_app().await;
    let (capture_url, kept) = start_tool_capture().await;
    let mut lookup = pact_db::merchant::list_tools(&app.db, &pact_tests::brand_id("demo"))
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "lookup_orders")
        .unwrap();
    lookup.url = capture_url.clone();
    pact_db::merchant::upsert_tool(&app.db, &lookup)
        .await
        .unwrap();
    let (agent_url, capture, mut turns) = start_capture().await;
    app.set_agent("demo", &agent_url, None).await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let delegation = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;

    let app = Arc::new(app);
    let a = app.clone();
    let turn = tokio::spawn(async move {
        a.send_delegated("demo", &pa_jwt, &delegation, "m1", "show my orders", None)
            .await
            .status()
    });
    let (turn_headers, t) = turns.recv().await.unwrap();
    assert_eq!(t["type"], "pact.turn");
    assert_eq!(t["url"], agent_url, "the turn names where it was sent");
    assert!(turn_headers.contains_key("webhook-signature"));
    // The agent asks for a lookup whose arguments name an order.
    let res = app
        .http
        .post(format!(
            "{}/lookup_orders",
            t["tools"]["url"].as_str().unwrap()
        ))
        .bearer_auth(t["tools"]["token"].as_str().unwrap())
        .json(&json!({"order_id": "SHOP-1001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    capture.release.add_permits(1);
    assert_eq!(turn.await.unwrap(), 200);

    let (headers, body) = kept.lock().unwrap().pop().unwrap();
    let signed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(signed["type"], "pact.tool_call");
    assert_eq!(signed["tool"], "lookup_orders");
    assert_eq!(signed["url"], capture_url);
    let replayed: Vec<(&str, String)> = ["webhook-id", "webhook-timestamp", "webhook-signature"]
        .iter()
        .map(|h| (*h, headers[*h].to_str().unwrap().to_owned()))
        .collect();
    // Replayed to the cancel endpoint: not its tool, not its URL.
    assert_eq!(
        m.post_raw("/tools/cancel-order", &replayed, &body).await,
        403
    );
    // And anywhere again: the webhook-id was seen.
    assert_eq!(
        m.post_raw("/tools/lookup-orders", &replayed, &body).await,
        401
    );
    assert_eq!(
        m.post_raw("/tools/cancel-order", &replayed, &body).await,
        401
    );
    let stats = m.stats().await;
    assert_eq!(stats["cancellations"], json!({}), "nothing was cancelled");
    assert_eq!(stats["tool_calls"], json!({}));

    // A cancellation really meant for the endpoint runs once, not twice.
    let secret = WebhookSecret::from_bytes(
        STANDARD
            .decode(m.secret.strip_prefix("whsec_").unwrap())
            .unwrap(),
    );
    let cancel = serde_json::to_vec(&json!({"type": "pact.tool_call", "tool": "cancel_order",
        "url": format!("{}/tools/cancel-order", m.base), "args": {"order_id": "SHOP-1001"}}))
    .unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let once = vec![
        ("webhook-id", "msg_once".to_owned()),
        ("webhook-timestamp", now.to_string()),
        (
            "webhook-signature",
            secret.sign("msg_once", now, &cancel).unwrap(),
        ),
    ];
    assert_eq!(m.post_raw("/tools/cancel-order", &once, &cancel).await, 200);
    assert_eq!(m.post_raw("/tools/cancel-order", &once, &cancel).await, 401);
    assert_eq!(m.stats().await["cancellations"], json!({"SHOP-1001": 1}));
}

/// Rotation: during the grace both signatures are sent, so a merchant that
/// still has only the old secret keeps working; after it, it does not.
#[tokio::test]
async fn a_rotated_secret_keeps_signing_during_its_grace() {
    let (app, m) = shop_app().await;
    let pa = app.registered_pa(ISS).await;
    let token = pa.token(SUB, app.audience());
    // Rotate with a one-hour grace, as `pactd brand webhook-secret rotate` does.
    let new = WebhookSecret::generate().unwrap();
    let id = uuid::Uuid::new_v4();
    let sealed = new
        .seal(&app.master_key, &pact_tests::brand_id("demo"), id)
        .unwrap();
    let grace_end = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    pact_db::merchant::retire_current_secret(&app.db, &pact_tests::brand_id("demo"), grace_end)
        .await
        .unwrap();
    pact_db::merchant::insert_secret(&app.db, id, &pact_tests::brand_id("demo"), &sealed)
        .await
        .unwrap();
    // Nodes keep the secrets in memory until the change is heard (migration 0040).
    app.settle().await;
    ok_json(
        app.send("demo", &token, "m1", "When are you open?", None)
            .await,
    )
    .await;
    // Grace over: only the new secret signs, which the example does not know.
    sqlx::query("update brand_webhook_secrets set retired_at = now() where retired_at is not null")
        .execute(&app.db)
        .await
        .unwrap();
    app.settle().await;
    let res = app
        .send("demo", &token, "m2", "When are you open?", None)
        .await;
    assert_eq!(res.status(), 503);
    assert_eq!(m.stats().await["refused_signatures"], 1);
}

/// A stand-in agent that hands each turn to the test and answers when told.
struct Capture {
    turns: mpsc::UnboundedSender<(HeaderMap, Value)>,
    release: Semaphore,
}

async fn capture_turn(State(c): State<Arc<Capture>>, headers: HeaderMap, body: Bytes) -> String {
    let v: Value = serde_json::from_slice(&body).unwrap();
    c.turns.send((headers, v)).unwrap();
    c.release.acquire().await.unwrap().forget();
    json!({"reply": "done"}).to_string()
}

async fn start_capture() -> (
    String,
    Arc<Capture>,
    mpsc::UnboundedReceiver<(HeaderMap, Value)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let c = Arc::new(Capture {
        turns: tx,
        release: Semaphore::new(0),
    });
    let app = axum::Router::new()
        .route("/pact", post(capture_turn))
        .with_state(c.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/pact", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (url, c, rx)
}

async fn call_tool(app: &TestApp, url: &str, token: &str) -> u16 {
    app.http
        .post(url)
        .bearer_auth(token)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A turn token is good for its own turn only: not with another turn's URL,
/// not at another brand, not guessed, not after its turn ended. The turn
/// carries what the merchant needs and never the PA-JWT or delegation token.
#[tokio::test]
async fn a_turn_token_is_useless_outside_its_turn() {
    let (app, _m) = shop_app().await;
    app.add_brand("acme", "Acme").await;
    let (agent_url, capture, mut turns) = start_capture().await;
    app.set_agent("demo", &agent_url, None).await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let delegation = grant(&app, &pa, SUB, "ann", &["orders:read"], None).await;

    let app = Arc::new(app);
    let (a1, a2) = (app.clone(), app.clone());
    let (j1, d1) = (pa_jwt.clone(), delegation.clone());
    let first = tokio::spawn(async move {
        a1.send_delegated("demo", &j1, &d1, "m1", "show my orders", None)
            .await
            .status()
    });
    let (h1, t1) = turns.recv().await.unwrap();
    let j2 = pa_jwt.clone();
    let second =
        tokio::spawn(async move { a2.send("demo", &j2, "m2", "hello", None).await.status() });
    let (_, t2) = turns.recv().await.unwrap();

    // What the merchant gets: the turn, the caller, the delegation — no credentials.
    let raw = t1.to_string();
    assert!(!raw.contains(&pa_jwt) && !raw.contains(&delegation));
    assert_eq!(t1["turn"]["messageId"], "m1");
    assert_eq!(t1["turn"]["text"], "show my orders");
    assert_eq!(t1["caller"]["paIssuer"], ISS);
    assert_eq!(t1["caller"]["paSub"], SUB);
    assert_eq!(t1["delegation"]["userId"], "ann");
    assert_eq!(t1["delegation"]["scopes"], json!(["orders:read"]));
    assert!(t2["delegation"].is_null());
    assert!(h1["webhook-signature"].to_str().unwrap().starts_with("v1,"));
    assert!(h1.contains_key("webhook-id") && h1.contains_key("webhook-timestamp"));

    let url1 = format!("{}/lookup_orders", t1["tools"]["url"].as_str().unwrap());
    let url2 = format!("{}/lookup_orders", t2["tools"]["url"].as_str().unwrap());
    let tok1 = t1["tools"]["token"].as_str().unwrap().to_owned();
    let tok2 = t2["tools"]["token"].as_str().unwrap().to_owned();
    // Its own turn: accepted (and the lookup forwarded to the example).
    assert_eq!(call_tool(&app, &url1, &tok1).await, 200);
    // The second turn has no delegation: accepted token, missing scope.
    assert_eq!(call_tool(&app, &url2, &tok2).await, 403);
    // Another turn's token, a guessed one, another brand, an unknown tool.
    assert_eq!(call_tool(&app, &url1, &tok2).await, 401);
    assert_eq!(call_tool(&app, &url2, &tok1).await, 401);
    assert_eq!(call_tool(&app, &url1, "ptt_guessed").await, 401);
    assert_eq!(
        call_tool(&app, &url1.replace("/a2a/demo/", "/a2a/acme/"), &tok1).await,
        401
    );
    assert_eq!(
        call_tool(&app, &url1.replace("lookup_orders", "nope"), &tok1).await,
        404
    );

    capture.release.add_permits(2);
    assert_eq!(first.await.unwrap(), 200);
    assert_eq!(second.await.unwrap(), 200);
    // The turns ended: their tokens are dead.
    assert_eq!(call_tool(&app, &url1, &tok1).await, 401);
    assert_eq!(call_tool(&app, &url2, &tok2).await, 401);
    assert!(app.state.live_turns.is_empty());
}
