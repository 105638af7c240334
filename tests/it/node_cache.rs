//! What every node keeps in memory (agents, brands, scopes, merchant
//! settings), how a change made anywhere reaches it, per-agent rate limits,
//! and the metrics page.

use std::time::Duration;

use pact_tests::{TestApp, TestPa};
use serde_json::Value;

use crate::assert_bare_401;

const ISS: &str = "https://pa.cache.example";

/// Waits (bounded) until the node has heard a change of `table`.
async fn wait_heard(app: &TestApp, table: &str) {
    let cache = &app.state.config_cache;
    let mut events = cache.events();
    let heard = events.wait_for(|_| cache.last_heard() == table);
    if tokio::time::timeout(Duration::from_secs(5), heard)
        .await
        .is_err()
    {
        panic!(
            "no change of {table} was heard within 5 s (last: {:?})",
            cache.last_heard()
        );
    }
}

async fn device_authorization(app: &TestApp, pa: &TestPa, scope: &str) -> (u16, Value) {
    let res = app
        .oauth_post(
            "demo",
            "device_authorization",
            &pa.token("u1", app.audience()),
            &[("client_id", pa.issuer.as_str()), ("scope", scope)],
        )
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// A second node serves agents and scopes from its copy, and the table
/// triggers make a change made through another connection (as `pactd agent`
/// and `pactd brand` make them) reach it without any request in between.
#[tokio::test]
async fn a_change_made_elsewhere_reaches_a_second_nodes_copy() {
    let a = TestApp::spawn().await;
    a.enable_demo_delegation().await;
    let pa = a.registered_pa(ISS).await;
    let b = a.spawn_peer(|_| {}).await;
    b.until_listening().await;

    assert_eq!(
        b.send("demo", &pa.token("u1", b.audience()), "m1", "hi", None)
            .await
            .status(),
        200
    );
    let (status, body) = device_authorization(&b, &pa, "orders:export").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope"))
    );

    // The copy is what answers: a change nobody announces is not seen.
    sqlx::query("alter table agents disable trigger agents_changed")
        .execute(&a.db)
        .await
        .unwrap();
    assert!(
        pact_db::agents::set_enabled(&a.db, ISS, false)
            .await
            .unwrap()
    );
    assert_eq!(
        b.send("demo", &pa.token("u1", b.audience()), "m2", "hi", None)
            .await
            .status(),
        200,
        "node B answered from the database, not from its copy"
    );

    // Announced, it is seen at once: the copy is dropped on the notification.
    sqlx::query("alter table agents enable trigger agents_changed")
        .execute(&a.db)
        .await
        .unwrap();
    sqlx::query("update agents set updated_at = now() where issuer = $1")
        .bind(ISS)
        .execute(&a.db)
        .await
        .unwrap();
    wait_heard(&b, "agents").await;
    assert_bare_401(
        b.send("demo", &pa.token("u1", b.audience()), "m3", "hi", None)
            .await,
    )
    .await;

    assert!(
        pact_db::agents::set_enabled(&a.db, ISS, true)
            .await
            .unwrap()
    );
    // (Not `wait_heard(.., "agents")`: the last change heard was of agents
    // already, so it would not wait.)
    b.settle().await;
    pact_db::scopes::upsert(
        &a.db,
        &pact_tests::brand_id("demo"),
        "orders:export",
        "Export your orders",
        false,
    )
    .await
    .unwrap();
    wait_heard(&b, "brand_scopes").await;
    let (status, body) = device_authorization(&b, &pa, "orders:export").await;
    assert_eq!(status, 200, "{body}");
}

/// A staff change made on a node is seen by that node's very next request,
/// without waiting for its notification: here there is none (the trigger is
/// off), so only the node itself can drop its copy. A staff request that is
/// refused, or one from a session that is not fully signed in, changes
/// nothing and leaves the copy in place.
#[tokio::test]
async fn a_staff_change_is_seen_at_once_by_the_node_it_was_made_on() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    app.until_listening().await;
    let secret = crate::admin_api::credential(&app, "ops", "operator", None).await;
    let pa_jwt = pa.token("u1", app.audience());
    let turn = |id: &'static str| app.send("demo", &pa_jwt, id, "hi", None);
    assert_eq!(turn("m1").await.status(), 200);

    sqlx::query("alter table agents disable trigger agents_changed")
        .execute(&app.db)
        .await
        .unwrap();
    // Refused (no reason): nothing changed, the copy stays.
    let generation = app.state.config_cache.generation();
    let res = crate::admin_api::call(
        &app,
        &secret,
        "post",
        "/agents/disable",
        Some(serde_json::json!({ "issuer": ISS })),
    )
    .await;
    crate::admin_api::error(res, 400, "invalid_request").await;
    assert_eq!(app.state.config_cache.generation(), generation);
    // Nor does a console form from a session that has only passed the
    // password (its second factor pending), though it is answered with a
    // redirect: success is not enough, the request must be signed-in staff's.
    crate::admin_console::add_admin(&app, "half@example.com", "owner", None).await;
    let half = pact_tests::pages::Browser::new(&app);
    let res = half
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[
                ("email", "half@example.com"),
                ("password", crate::admin_console::PASSWORD),
            ],
        )
        .await;
    assert_eq!(pact_tests::pages::location(&res), "/admin/totp-setup");
    let (_, html) = half.get_html("/admin/totp-setup").await;
    let csrf = pact_tests::pages::csrf_from(&html).unwrap();
    let res = half
        .post(
            "/admin/agents/disable",
            &[("csrf", &csrf), ("issuer", ISS), ("reason", "not yet")],
        )
        .await;
    assert!(res.status().is_redirection(), "{}", res.status());
    assert_eq!(app.state.config_cache.generation(), generation);
    assert_eq!(turn("m2").await.status(), 200);

    let res = crate::admin_api::call(
        &app,
        &secret,
        "post",
        "/agents/disable",
        Some(serde_json::json!({ "issuer": ISS, "reason": "compromised key" })),
    )
    .await;
    crate::admin_api::ok(res).await;
    assert_bare_401(turn("m3").await).await;
}

/// RFC 8628 §3.5 from memory: a node that has seen a code pending answers its
/// polls itself (an approval written behind its back, trigger off, is not
/// seen), and the approval made on another node reaches it through the row
/// trigger at once, so the next poll there redeems.
#[tokio::test]
async fn a_decision_made_on_one_node_ends_the_pending_answers_of_another() {
    let a = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    a.enable_demo_delegation().await;
    let pa = a.registered_pa(ISS).await;
    let b = a.spawn_peer(|c| c.delegation.poll_interval_secs = 1).await;
    a.until_listening().await;
    b.until_listening().await;
    let auth = a.device_authorize(&pa, "u1", "orders:read", None).await;
    let id: uuid::Uuid =
        sqlx::query_scalar("select id from device_authorizations where user_code = $1")
            .bind(auth.user_code.replace('-', ""))
            .fetch_one(&a.db)
            .await
            .unwrap();

    let (status, body) = b.poll(&pa, "u1", &auth.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    assert!(b.state.pending_polls.holds(id));

    // Node B answers from memory: a change nobody announces is not seen.
    let flip = |status: &'static str| {
        let db = a.db.clone();
        async move {
            let mut tx = db.begin().await.unwrap();
            sqlx::query(
                "alter table device_authorizations disable trigger device_authorization_changed",
            )
            .execute(&mut *tx)
            .await
            .unwrap();
            sqlx::query("update device_authorizations set status = $2 where id = $1")
                .bind(id)
                .bind(status)
                .execute(&mut *tx)
                .await
                .unwrap();
            sqlx::query(
                "alter table device_authorizations enable trigger device_authorization_changed",
            )
            .execute(&mut *tx)
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
    };
    flip("denied").await;
    b.clock.advance(Duration::from_secs(2));
    let (status, body) = b.poll(&pa, "u1", &auth.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending")),
        "node B answered from the database, not from memory"
    );
    flip("pending").await;

    // The person approves on node A; node B hears it and redeems on the next poll.
    let mut forgets = b.state.pending_polls.forgets();
    a.approve(&auth.user_code, "alice", &["orders:read"]).await;
    let heard = forgets.wait_for(|_| !b.state.pending_polls.holds(id));
    tokio::time::timeout(Duration::from_secs(5), heard)
        .await
        .expect("node B did not hear the approval within 5 s")
        .unwrap();
    let (status, body) = b.poll(&pa, "u1", &auth.device_code).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["access_token"].is_string());
    // Node A never held it; the code is spent everywhere.
    let (status, body) = a.poll(&pa, "u1", &auth.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

/// A node that lost its change listener cannot hear changes, so it stops
/// using its copy until it listens again (and then starts from empty).
#[tokio::test]
async fn without_its_listener_a_node_reads_the_database() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    app.until_listening().await;
    assert_eq!(
        app.send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
            .await
            .status(),
        200
    );
    // What the listener does when its connection is lost.
    app.state.config_cache.suspend();
    sqlx::query("alter table agents disable trigger agents_changed")
        .execute(&app.db)
        .await
        .unwrap();
    pact_db::agents::set_enabled(&app.db, ISS, false)
        .await
        .unwrap();
    assert_bare_401(
        app.send("demo", &pa.token("u1", app.audience()), "m2", "hi", None)
            .await,
    )
    .await;
}

/// An agent's own limits (`pactd agent limits`) replace the node's defaults
/// for that agent only.
#[tokio::test]
async fn an_agents_own_rate_limit_applies_to_it_alone() {
    let app = TestApp::spawn().await;
    let small = app.registered_pa(ISS).await;
    let other = app.registered_pa("https://pa.other.example").await;
    assert!(
        pact_db::agents::set_limits(
            &app.db,
            ISS,
            Some(pact_db::agents::AgentLimit {
                rate: 0.001,
                burst: 2.0,
            }),
            None,
        )
        .await
        .unwrap()
    );
    app.settle().await;
    for (i, expected) in [200, 200, 429].into_iter().enumerate() {
        let res = app
            .send(
                "demo",
                &small.token(&format!("u{i}"), app.audience()),
                &format!("m{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), expected, "request {i}");
    }
    for i in 0..3 {
        let res = app
            .send(
                "demo",
                &other.token(&format!("u{i}"), app.audience()),
                &format!("m{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), 200, "the other agent keeps the defaults");
    }
}

/// The value of the series of `name` with all these labels (0 when absent).
fn series(page: &str, name: &str, labels: &[&str]) -> f64 {
    page.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// `GET /metrics` answers on the metrics listener only, and its counts move.
#[tokio::test]
async fn metrics_are_served_on_their_own_listener_and_count_requests() {
    let handle = pact_server::telemetry::install().expect("recorder");
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_url = format!("http://{}/metrics", listener.local_addr().unwrap());
    tokio::spawn(pact_server::telemetry::serve(
        app.state.clone(),
        handle,
        listener,
        std::future::pending(),
    ));
    let scrape = || async {
        let res = app.http.get(&metrics_url).send().await.unwrap();
        assert_eq!(res.status(), 200);
        res.text().await.unwrap()
    };
    let requests = "pactd_http_requests_total";
    let route = r#"route="/a2a/{brand}/message:send""#;
    let sent = [route, r#"method="POST""#, r#"status="200""#];
    let refused = [route, r#"status="401""#];
    let before = scrape().await;
    for i in 0..2 {
        let res = app
            .send(
                "demo",
                &pa.token("u1", app.audience()),
                &format!("m{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    assert_bare_401(app.send("demo", "not-a-jwt", "m9", "hi", None).await).await;
    let after = scrape().await;
    assert!(
        series(&after, requests, &sent) >= series(&before, requests, &sent) + 2.0,
        "{after}"
    );
    assert!(series(&after, requests, &refused) >= series(&before, requests, &refused) + 1.0);
    assert!(after.contains("pactd_http_request_duration_seconds_bucket{"));
    assert!(after.contains(r#"pactd_db_pool_connections{state="in_use"}"#));
    assert!(after.contains("pactd_jwks_fetches_total"));
    // The same PA-JWT twice: the second check is answered from the memo of
    // verified signatures (process-wide, so other tests only add to it).
    let remembered = [r#"result="remembered""#];
    let token = pa.token("u2", app.audience());
    for i in 0..2 {
        let res = app.send("demo", &token, &format!("r{i}"), "hi", None).await;
        assert_eq!(res.status(), 200);
    }
    let again = scrape().await;
    let checks = "pactd_signature_checks_total";
    assert!(
        series(&again, checks, &remembered) >= series(&after, checks, &remembered) + 1.0,
        "{again}"
    );
    assert!(series(&again, checks, &[r#"result="verified""#]) >= 1.0);
    assert!(again.contains("pactd_signature_memo_entries"));
    // The raw path (with ids and codes) never becomes a label.
    assert!(!after.contains("/a2a/demo/"));

    // Not on the public listener.
    let res = app
        .http
        .get(format!("{}/metrics", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}
