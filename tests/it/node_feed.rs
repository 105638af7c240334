//! What a node keeps in memory answers only while its change feed is proven
//! alive (`feed.rs`), and a node that knows the database is gone says so at
//! once (`db_health.rs`): tried with a TCP proxy between node B and
//! PostgreSQL that stops forwarding without closing anything, as a NAT that
//! dropped its mapping or a vanished host would, and one that cuts it off.
//!
//! The heartbeat runs every 200 ms with a 400 ms timeout here, so the bound
//! is 600 ms and each test takes seconds. `PACTD_SLOW_SUITE=long` uses the
//! shipped defaults instead (1 s and 2 s: a 3 s bound) to measure those.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pact_crypto::MasterKey;
use pact_server::Config;
use pact_server::agent::BrandAgents;
use pact_server::config::ListenerSettings;
use pact_tests::tcp_proxy::TcpProxy;
use pact_tests::{TestApp, TestPa};
use serde_json::{Value, json};

use crate::admin_api::{call_ok, credential};
use crate::assert_bare_401;

const POLLER: &str = "https://pa.feed.example";
const TALKER: &str = "https://talker.feed.example";
/// Far longer than any bound here: only a hang reaches it.
const PATIENCE: Duration = Duration::from_secs(15);

fn long_suite() -> bool {
    std::env::var("PACTD_SLOW_SUITE").is_ok_and(|v| v == "long")
}

fn listener_settings() -> ListenerSettings {
    if long_suite() {
        ListenerSettings::default()
    } else {
        ListenerSettings {
            heartbeat_every: Duration::from_millis(200),
            heartbeat_timeout: Duration::from_millis(400),
        }
    }
}

fn quick(c: &mut Config) {
    c.listener = listener_settings();
    c.delegation.poll_interval_secs = 1;
}

async fn ready(app: &TestApp) -> (u16, String) {
    let res = app
        .http
        .get(format!("{}/readyz", app.base_url))
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// The `client_port`s of the change listeners' sessions on this database.
async fn listener_ports(db: &sqlx::PgPool) -> Vec<u16> {
    let ports: Vec<i32> = sqlx::query_scalar(
        "select client_port from pg_stat_activity \
         where datname = current_database() and application_name = $1",
    )
    .bind(pact_db::LISTENER_APPLICATION_NAME)
    .fetch_all(db)
    .await
    .unwrap();
    ports
        .into_iter()
        .map(|p| u16::try_from(p).unwrap())
        .collect()
}

/// Opens `n` connections in each of the node's pools and gives them back,
/// so that it serves the test's requests without a new connection (new ones
/// are held by the proxy while the listener's path is frozen).
async fn warm(app: &TestApp, n: usize) {
    for pool in [&app.state.db, &app.state.relaxed_db] {
        let mut held = Vec::new();
        for _ in 0..n.min(pool.options().get_max_connections() as usize) {
            held.push(pool.acquire().await.unwrap());
        }
    }
}

/// The A2A identity turn `message:send` of `pa` on `node`.
async fn identity_turn(node: &TestApp, pa: &TestPa, id: &str) -> reqwest::Response {
    node.send("demo", &pa.token("u2", node.audience()), id, "hi", None)
        .await
}

async fn node_row(a: &TestApp, secret: &str, node: uuid::Uuid) -> Value {
    let v = call_ok(a, secret, "get", "/nodes", None).await;
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == node.to_string())
        .cloned()
        .unwrap_or(Value::Null)
}

/// Waits (bounded) until node A's `/admin/api/v1/nodes` says `listening` of `node`.
async fn until_listed(a: &TestApp, secret: &str, node: uuid::Uuid, listening: bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let row = node_row(a, secret, node).await;
        if row["listening"] == listening {
            return row;
        }
        assert!(Instant::now() < deadline, "the nodes view kept {row}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One value of an unlabelled gauge on a metrics page.
fn gauge(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Scrapes until `name` reads `want` (the gauge is set at scrape time; the
/// recorder is process-wide, so another test's scrape may set it in between).
async fn until_gauge(http: &reqwest::Client, url: &str, name: &str, want: f64) {
    let mut last = None;
    for _ in 0..20 {
        let page = http.get(url).send().await.unwrap().text().await.unwrap();
        last = gauge(&page, name);
        if last == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} stayed {last:?}, not {want}");
}

/// Finding 1 of issue 28: node B's LISTEN connection frozen without a reset.
/// Before, B answered an approved code `authorization_pending` and a disabled
/// agent's turns 200 for as long as it ran, and the nodes view said B was
/// listening. Now B stops answering from memory within the bound (it asks
/// the database, which it still reaches), and readiness, the nodes view and
/// the metric say that it does not listen; once the path thaws it listens again.
#[tokio::test]
async fn a_frozen_listener_stops_answering_from_memory_within_its_bound() {
    let bound = listener_settings().bound();
    let a = TestApp::spawn_with(quick).await;
    a.enable_demo_delegation().await;
    let poller = a.registered_pa(POLLER).await;
    let talker = a.registered_pa(TALKER).await;
    let proxy = TcpProxy::start(TcpProxy::target_of(&a.db_url)).await;
    let b = TestApp::spawn_full(
        proxy.url_for(&a.db_url),
        a.master_key.clone(),
        quick,
        BrandAgents::builtin(),
    )
    .await;
    a.until_listening().await;
    b.until_listening().await;
    let operator = credential(&a, "ops", "operator", None).await;
    let viewer = credential(&a, "desk", "viewer", None).await;
    let handle = pact_server::telemetry::install().expect("recorder");
    let metrics = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_url = format!("http://{}/metrics", metrics.local_addr().unwrap());
    tokio::spawn(pact_server::telemetry::serve(
        b.state.clone(),
        handle,
        metrics,
        std::future::pending(),
    ));

    // Healthy: node B answers both from memory.
    let auth = a.device_authorize(&poller, "u1", "orders:read", None).await;
    let (status, body) = b.poll(&poller, "u1", &auth.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    assert_eq!(b.state.pending_polls.len(), 1, "B holds the code");
    assert_eq!(identity_turn(&b, &talker, "t0").await.status(), 200);
    assert_eq!(ready(&b).await.0, 200);
    until_listed(&a, &viewer, b.state.node.identity.id, true).await;
    until_gauge(&b.http, &metrics_url, "pactd_listener_connected", 1.0).await;

    // B's LISTEN connection stops carrying bytes, and so does any new
    // connection of B: the listener cannot come back. B's pooled connections
    // keep working, so B can still ask the database.
    warm(&b, 6).await;
    let port = listener_ports(&a.db)
        .await
        .into_iter()
        .find(|p| proxy.freeze(*p))
        .expect("node B's listener goes through the proxy");
    proxy.hold_new(true);
    let frozen_at = Instant::now();

    // Two changes on node A: the person approves; staff disable the other agent.
    a.approve(&auth.user_code, "alice", &["orders:read"]).await;
    let approved_at = Instant::now();
    call_ok(
        &a,
        &operator,
        "post",
        "/agents/disable",
        Some(json!({"issuer": TALKER, "reason": "frozen listener test"})),
    )
    .await;
    let disabled_at = Instant::now();
    a.settle().await;
    assert_bare_401(identity_turn(&a, &talker, "a1").await).await;

    // Node B, asked again and again: stale answers until the bound, then the truth.
    let (mut redeemed, mut refused) = (None, None);
    let (mut stale_polls, mut stale_turns) = (0, 0);
    let mut n = 0;
    // Long enough for any loaded machine, short enough that the clock moved
    // below (a second per poll, the interval) leaves the PA-JWTs valid.
    let patience = bound + Duration::from_secs(5);
    while redeemed.is_none() || refused.is_none() {
        assert!(
            frozen_at.elapsed() < patience,
            "node B still answers from memory after {:?} (bound {bound:?}): \
             {stale_polls} polls pending, {stale_turns} turns answered",
            frozen_at.elapsed()
        );
        n += 1;
        if redeemed.is_none() {
            b.clock.advance(Duration::from_secs(1));
            let (status, body) = b.poll(&poller, "u1", &auth.device_code).await;
            match (status, body["error"].as_str()) {
                (400, Some("authorization_pending")) => stale_polls += 1,
                (200, _) => {
                    assert!(body["access_token"].is_string(), "{body}");
                    redeemed = Some(approved_at.elapsed());
                }
                other => panic!("poll answered {other:?}: {body}"),
            }
        }
        if refused.is_none() {
            let res = identity_turn(&b, &talker, &format!("t{n}")).await;
            match res.status().as_u16() {
                200 => stale_turns += 1,
                401 => {
                    assert_bare_401(res).await;
                    refused = Some(disabled_at.elapsed());
                }
                other => panic!("identity turn answered {other}"),
            }
        }
        // Ten tries within the bound: well inside the rate limits, and the
        // clock moved a second per poll stays within the PA-JWTs' 120 s.
        tokio::time::sleep(bound / 10).await;
    }
    let (redeemed, refused) = (redeemed.unwrap(), refused.unwrap());
    eprintln!(
        "frozen listener (bound {bound:?}): approval → B redeems after {redeemed:?} \
         ({stale_polls} pending answers before), disable → B refuses after {refused:?} \
         ({stale_turns} turns answered before); frozen {:?} ago",
        frozen_at.elapsed()
    );
    // Within the bound, counted from the freeze (the last proof was before
    // it); the slack is for a loaded machine, not for the design.
    let slack = Duration::from_secs(2);
    assert!(frozen_at.elapsed() - approved_at.elapsed() + redeemed <= bound + slack);
    assert!(frozen_at.elapsed() - disabled_at.elapsed() + refused <= bound + slack);

    // B says so: readiness, the nodes view (through A), the metric.
    let (status, text) = ready(&b).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("not listening"), "{text}");
    let row = until_listed(&a, &viewer, b.state.node.identity.id, false).await;
    assert_eq!(row["gone"], false, "{row}");
    let v = call_ok(&a, &viewer, "get", "/nodes", None).await;
    assert_eq!(v["all_listening"], false);
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains(&b.state.node.identity.id.to_string()),
        "{v}"
    );
    until_gauge(&b.http, &metrics_url, "pactd_listener_connected", 0.0).await;
    // B still answers, from the database: a new pending code is pending, and
    // B does not learn it while deaf.
    let again = a.device_authorize(&poller, "u3", "orders:read", None).await;
    let (status, body) = b.poll(&poller, "u3", &again.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    assert_eq!(b.state.pending_polls.len(), 0);
    // Nothing here made the database look down.
    assert!(!b.state.db_health.is_down());

    // The path thaws: B listens again, says so, and answers from memory again.
    proxy.thaw_all();
    let thawed = Instant::now();
    b.until_listening().await;
    let back = thawed.elapsed();
    assert_eq!(ready(&b).await.0, 200);
    until_listed(&a, &viewer, b.state.node.identity.id, true).await;
    until_gauge(&b.http, &metrics_url, "pactd_listener_connected", 1.0).await;
    b.clock.advance(Duration::from_secs(2));
    let (status, body) = b.poll(&poller, "u3", &again.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    assert_eq!(b.state.pending_polls.len(), 1, "B learns again");
    eprintln!("frozen listener: listening again {back:?} after the thaw (port {port})");
}

/// Finding 8 of issue 28: with the database gone for a second, the next
/// device authorization waited the pool's 3 s acquire timeout for its 503.
/// The listener's lost connection tells the node at once, a new connection
/// refused confirms it, and the 503 with `Retry-After` comes without any
/// wait; the first probe that succeeds ends it.
#[tokio::test]
async fn a_node_that_knows_the_database_is_gone_answers_503_at_once_and_recovers_with_the_first_probe()
 {
    let (app, proxy, pa) = behind_proxy().await;
    let authorize = || async {
        let res = app
            .oauth_post(
                "demo",
                "device_authorization",
                &pa.token("u1", app.audience()),
                &[("client_id", POLLER), ("scope", "orders:read")],
            )
            .await;
        let retry_after = res.headers().contains_key("retry-after");
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        (status, retry_after, body)
    };
    assert_eq!(authorize().await.0, 200);

    proxy.unplug();
    let gone = Instant::now();
    // Known without a single request.
    let known = until_down(&app, gone).await;
    // "Gone for a second", as in the finding.
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(gone.elapsed())).await;
    let asked = Instant::now();
    let (status, retry_after, body) = authorize().await;
    let took = asked.elapsed();
    assert_eq!((status, retry_after), (503, true), "{body}");
    assert_eq!(body["error"], "temporarily_unavailable");
    // The pool retries a refused connection until its acquire timeout (3 s):
    // an answer well before that did not wait for it.
    assert!(took < Duration::from_secs(2), "waited {took:?}");
    assert_eq!(ready(&app).await.0, 503);

    proxy.plug_in();
    let plugged = Instant::now();
    let recovered = loop {
        let (status, _, body) = authorize().await;
        if status == 200 {
            break plugged.elapsed();
        }
        assert_eq!(status, 503, "{body}");
        assert!(plugged.elapsed() < PATIENCE, "never recovered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "database gone: known down {known:?} after the cut, 503 in {took:?}; \
         back {recovered:?} after it returned"
    );
}

/// The same with a database that stops answering without closing anything
/// (a vanished host): the overdue heartbeat tells the node, and no check
/// reaches the database within the probe's timeout, so it is known down
/// before any request waits for the pool.
#[tokio::test]
async fn a_node_whose_database_froze_knows_it_from_its_heartbeat() {
    let (app, proxy, pa) = behind_proxy().await;

    proxy.freeze_all();
    let frozen = Instant::now();
    let known = until_down(&app, frozen).await;
    assert!(!app.state.config_cache.is_live());
    let asked = Instant::now();
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
        .await;
    let took = asked.elapsed();
    assert!(res.headers().contains_key("retry-after"));
    crate::assert_a2a_error(res, 503, "UNAVAILABLE", None).await;
    assert!(took < Duration::from_secs(2), "waited {took:?}");

    proxy.thaw_all();
    let thawed = Instant::now();
    let deadline = thawed + PATIENCE;
    while app.state.db_health.is_down() {
        assert!(Instant::now() < deadline, "never recovered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let up = thawed.elapsed();
    app.until_listening().await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m2", "hi", None)
        .await;
    assert_eq!(res.status(), 200);
    eprintln!(
        "database frozen: known down {known:?} after the freeze (bound {:?} + probe), \
         503 in {took:?}; up {up:?} after the thaw",
        listener_settings().bound()
    );
}

/// One node whose database connections all go through a proxy, listening.
async fn behind_proxy() -> (TestApp, TcpProxy, TestPa) {
    let db_url = pact_tests::db::fresh_database().await;
    let proxy = TcpProxy::start(TcpProxy::target_of(&db_url)).await;
    let app = TestApp::spawn_full(
        proxy.url_for(&db_url),
        Arc::new(MasterKey::generate().unwrap()),
        quick,
        BrandAgents::builtin(),
    )
    .await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(POLLER).await;
    app.until_listening().await;
    (app, proxy, pa)
}

/// Waits (bounded) until the node marks the database down; how long after `since`.
async fn until_down(app: &TestApp, since: Instant) -> Duration {
    while !app.state.db_health.is_down() {
        assert!(
            since.elapsed() < PATIENCE,
            "the node never learned that the database is gone"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    since.elapsed()
}
