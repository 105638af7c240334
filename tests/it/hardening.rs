//! Attacks on availability and on what answers reveal: slow and idle
//! clients, floods of anonymous page views, code-entry floods, account
//! probing through the lockout, the two-tab consent, NUL bytes on every
//! route family, and database outages. Each test is one finding of the
//! hardening review, written so that it fails on the code before the fix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pact_crypto::MasterKey;
use pact_server::agent::BrandAgents;
use pact_server::client_ip::TrustedProxies;
use pact_tests::pages::{
    Browser, add_totp, add_user, csrf_from, hidden_field, location, without_csrf,
};
use pact_tests::tcp_proxy::TcpProxy;
use pact_tests::{TestApp, TestPa};
use reqwest::Response;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const PA_ISS: &str = "https://pa.example/agents/hardening";
const PA_SUB: &str = "pa-user-h";

async fn delegating_app(edit: impl FnOnce(&mut pact_server::Config)) -> (TestApp, TestPa) {
    let app = TestApp::spawn_with(edit).await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(PA_ISS).await;
    (app, pa)
}

/// Reads until the server closes the connection; returns what it sent.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

async fn connect_from(local: &str, to: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

// ------------------------------------------------------------ 1, 2: slow clients

#[tokio::test]
async fn a_client_that_sends_headers_slowly_is_disconnected() {
    let app = TestApp::spawn_with(|c| c.connections.header_timeout = Duration::from_secs(1)).await;
    let mut slow = TcpStream::connect(app.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // One more header line every 300 ms, never the blank line that ends them.
    let dripping = tokio::spawn(async move {
        for i in 0..40 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            if slow
                .write_all(format!("X-Drip-{i}: 1\r\n").as_bytes())
                .await
                .is_err()
            {
                return (i, slow);
            }
        }
        (40, slow)
    });
    let (lines, mut slow) = tokio::time::timeout(Duration::from_secs(20), dripping)
        .await
        .expect("the drip loop ends")
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), read_until_closed(&mut slow))
        .await
        .expect("the server closed the slow connection");
    assert!(
        lines < 40,
        "the server kept a connection whose headers never ended"
    );
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"));
    // Everyone else is still served.
    let ok = app
        .http
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn one_address_cannot_hold_more_than_its_share_of_connections() {
    let app = TestApp::spawn_with(|c| {
        c.connections.max_connections_per_ip = 5;
        c.connections.header_timeout = Duration::from_secs(30);
    })
    .await;
    // Five kept-alive connections, each answered once: an answer proves the
    // server has counted the connection, so no sleep stands in for that.
    let mut held = Vec::new();
    for _ in 0..5 {
        let mut s = connect_from("127.0.0.1", app.addr).await;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let head = read_response_head(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(s);
    }
    // The sixth is refused at once.
    assert!(
        !served_once(&app, "127.0.0.1").await,
        "the sixth connection was served"
    );
    // Another address is served.
    assert!(served_once(&app, "127.0.0.2").await);
    // Closing one gives its place back, as soon as the server has seen it
    // close: tried until it is served, a bounded number of times.
    drop(held.pop());
    let mut attempts = 0;
    while !served_once(&app, "127.0.0.1").await {
        attempts += 1;
        assert!(
            attempts < 200,
            "the closed connection's place never came back"
        );
        tokio::task::yield_now().await;
    }
}

/// Reads a response's status line and headers (up to the blank line).
async fn read_response_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte))
            .await
            .expect("an answer within 5 s")
            .unwrap();
        assert_eq!(n, 1, "closed before the headers ended");
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// One request on a new connection from `from`: whether it was answered
/// (a refused connection is closed without a byte).
async fn served_once(app: &TestApp, from: &str) -> bool {
    served_once_at(app.addr, "/healthz", from).await
}

/// Issue 28, finding 4: the metrics listener had no header timeout and no
/// cap (260 idle connections to it starved the public listener of file
/// descriptors). It now runs on the public listener's accept loop with a
/// budget of its own: per address, in total, and cut at the header timeout.
#[tokio::test]
async fn the_metrics_listener_caps_its_connections_and_cuts_idle_ones() {
    use pact_server::telemetry::{METRICS_MAX_CONNECTIONS, METRICS_MAX_CONNECTIONS_PER_IP};

    let app = TestApp::spawn_with(|c| c.connections.header_timeout = Duration::from_secs(5)).await;
    let handle = pact_server::telemetry::install().expect("recorder");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics = listener.local_addr().unwrap();
    tokio::spawn(pact_server::telemetry::serve(
        app.state.clone(),
        handle,
        listener,
        std::future::pending(),
    ));
    // Kept-alive connections, each answered once (so the server has counted
    // it), then idle: as many as one address may hold, from two addresses.
    let per_ip = METRICS_MAX_CONNECTIONS_PER_IP;
    assert_eq!(METRICS_MAX_CONNECTIONS, 2 * per_ip, "two addresses fill it");
    let mut held = Vec::new();
    for from in ["127.0.0.1", "127.0.0.2"] {
        for _ in 0..per_ip {
            let mut s = connect_from(from, metrics).await;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let head = read_response_head(&mut s).await;
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            held.push(s);
        }
        // One more from the same address is refused at once.
        assert!(!served_once_at(metrics, "/metrics", from).await, "{from}");
    }
    // Full: a third address is refused too, while the public listener,
    // with its own budget, serves it.
    assert!(!served_once_at(metrics, "/metrics", "127.0.0.3").await);
    assert!(served_once_at(app.addr, "/healthz", "127.0.0.3").await);
    // The idle ones are cut at the header timeout, and their places come back.
    for s in &mut held {
        tokio::time::timeout(Duration::from_secs(15), read_until_closed(s))
            .await
            .expect("an idle metrics connection is closed at the header timeout");
    }
    let mut attempts = 0;
    while !served_once_at(metrics, "/metrics", "127.0.0.1").await {
        attempts += 1;
        assert!(attempts < 200, "the metrics listener never served again");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`served_once`] on any listener and path.
async fn served_once_at(addr: std::net::SocketAddr, path: &str, from: &str) -> bool {
    let mut s = connect_from(from, addr).await;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let _ = s.write_all(request.as_bytes()).await;
    let answer = tokio::time::timeout(Duration::from_secs(5), read_until_closed(&mut s))
        .await
        .expect("the connection is answered or closed within 5 s");
    if answer.is_empty() {
        return false;
    }
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    true
}

#[tokio::test]
async fn shutdown_ends_after_the_grace_period_although_a_client_stays_connected() {
    let app = TestApp::spawn_with(|c| {
        c.connections.header_timeout = Duration::from_secs(120);
        c.connections.shutdown_grace = Duration::from_secs(1);
    })
    .await;
    let mut slow = TcpStream::connect(app.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // A kept-alive connection that has finished a request, idle now.
    let mut idle = TcpStream::connect(app.addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).ends_with("\r\n\r\nok") {
        let n = idle.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the response");
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));

    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(15), app.stop())
        .await
        .expect("the server stopped although a client stayed connected");
    assert!(started.elapsed() < Duration::from_secs(15));
    let rest = tokio::time::timeout(Duration::from_secs(5), read_until_closed(&mut slow))
        .await
        .expect("the slow connection was closed");
    assert!(rest.is_empty());
    let rest = tokio::time::timeout(Duration::from_secs(5), read_until_closed(&mut idle))
        .await
        .expect("the idle connection was closed");
    assert!(rest.is_empty());
}

// ------------------------------------------------------------ 3: anonymous floods

async fn session_rows(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_flood_of_cookieless_page_views_adds_no_rows() {
    let (app, pa) = delegating_app(|_| {}).await;
    let before = session_rows(&app).await;
    for i in 0..150 {
        // A fresh client each time: no cookie is ever sent back.
        let path = if i % 2 == 0 {
            "/device"
        } else {
            "/login?brand=demo"
        };
        let res = pact_tests::http_get(format!("{}{path}", app.base_url))
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(
        session_rows(&app).await,
        before,
        "anonymous GETs wrote sessions"
    );

    // The forms still work: entering a valid code is what makes the session.
    let auth = app.device_authorize(&pa, PA_SUB, "orders:read", None).await;
    let b = Browser::new(&app);
    let res = b
        .submit("/device", "/device", &[("user_code", &auth.user_code)])
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    assert_eq!(session_rows(&app).await, before + 1);
    // And signing in from there reaches the consent page for that code.
    add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    let res = b
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/device/consent",
        )
        .await;
    assert_eq!(location(&res), "/device/consent");
    let (status, html) = b.get_html("/device/consent").await;
    assert_eq!(status, 200);
    assert!(html.contains(&auth.user_code), "{html}");
}

#[tokio::test]
async fn an_anonymous_form_without_its_cookie_is_refused() {
    let app = TestApp::spawn().await;
    let (_, html) = Browser::new(&app).get_html("/device").await;
    let csrf = csrf_from(&html).unwrap();
    // Another browser (no form cookie) replays the token.
    let other = Browser::new(&app);
    let res = other
        .post("/device", &[("csrf", &csrf), ("user_code", "BCDF-GHJK")])
        .await;
    assert_eq!(res.status(), 403);
    let res = other
        .post(
            "/login",
            &[
                ("csrf", &csrf),
                ("brand", "demo"),
                ("email", "a@example.com"),
                ("password", "x"),
            ],
        )
        .await;
    assert_eq!(res.status(), 403);
}

// ------------------------------------------------------------ 4: code-entry floods

/// GET /device then POST a code, as a browser behind the trusted proxy at `from`.
async fn enter_code_from(app: &TestApp, from: &str, code: &str) -> Response {
    let b = Browser::new(app);
    let page = b
        .client
        .get(b.url("/device"))
        .header("x-forwarded-for", from)
        .send()
        .await
        .unwrap();
    let csrf = csrf_from(&page.text().await.unwrap()).unwrap();
    b.client
        .post(b.url("/device"))
        .header("origin", &b.origin)
        .header("x-forwarded-for", from)
        .form(&[("csrf", csrf.as_str()), ("user_code", code)])
        .send()
        .await
        .unwrap()
}

fn behind_loopback_proxy(c: &mut pact_server::Config) {
    c.trusted_proxies = TrustedProxies::parse("127.0.0.1").unwrap();
}

#[tokio::test]
async fn a_person_with_a_valid_code_gets_through_a_guessing_flood() {
    // The default miss budget's burst, with a refill slow enough that the
    // flood drains it whatever the machine's speed.
    let (app, pa) = delegating_app(|c| {
        behind_loopback_proxy(c);
        c.page_limits.user_code_misses = pact_server::web::limits::Rate::new(0.001, 120.0);
    })
    .await;
    let auth = app.device_authorize(&pa, PA_SUB, "orders:read", None).await;
    // 440 wrong codes from 40 addresses.
    let mut limited = 0;
    for ip in 0..40 {
        for _ in 0..11 {
            let res = enter_code_from(&app, &format!("10.1.0.{ip}"), "BBBB-BBBB").await;
            match res.status().as_u16() {
                404 => {}
                429 => limited += 1,
                other => panic!("unexpected {other}"),
            }
        }
    }
    assert!(limited > 0, "the flood was never limited");
    // A person: fresh address, fresh session, the right code.
    let res = enter_code_from(&app, "10.9.9.9", &auth.user_code).await;
    assert_eq!(res.status(), 303, "the person was refused");
}

#[tokio::test]
async fn one_address_is_limited_in_code_entry_even_with_fresh_sessions() {
    let (app, _) = delegating_app(|c| {
        behind_loopback_proxy(c);
        c.page_limits.user_code_per_ip = pact_server::web::limits::Rate::new(0.001, 10.0);
    })
    .await;
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(
            enter_code_from(&app, "10.2.0.1", "BBBB-BBBB")
                .await
                .status()
                .as_u16(),
        );
    }
    assert_eq!(&statuses[..10], &[404; 10]);
    assert_eq!(&statuses[10..], &[429, 429]);
}

// ------------------------------------------------------------ 5: account probing

/// POSTs a sign-in from `from`; returns the status, the page and whether `Retry-After` was set.
async fn sign_in_from(
    app: &TestApp,
    from: &str,
    email: &str,
    password: &str,
) -> (u16, String, Option<String>) {
    let b = Browser::new(app);
    let page = b
        .client
        .get(b.url("/login?brand=demo"))
        .header("x-forwarded-for", from)
        .send()
        .await
        .unwrap();
    let csrf = csrf_from(&page.text().await.unwrap()).unwrap();
    let res = b
        .client
        .post(b.url("/login"))
        .header("origin", &b.origin)
        .header("x-forwarded-for", from)
        .form(&[
            ("csrf", csrf.as_str()),
            ("brand", "demo"),
            ("next", "/account"),
            ("email", email),
            ("password", password),
        ])
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    // The whole page, with what differs by nature (the form token) masked.
    let page = without_csrf(&res.text().await.unwrap());
    (status, page, retry.map(|_| "set".to_owned()))
}

#[tokio::test]
async fn unknown_and_known_emails_get_the_same_answers_and_the_same_lockout() {
    let app = TestApp::spawn_with(behind_loopback_proxy).await;
    add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for _ in 0..7 {
        known.push(sign_in_from(&app, "10.3.0.1", "ann@example.com", "wrong").await);
        unknown.push(sign_in_from(&app, "10.3.0.1", "nobody@example.com", "wrong").await);
    }
    assert_eq!(known, unknown);
    assert_eq!(known[0].0, 400);
    assert_eq!(known[5].0, 429, "{known:?}");
    // The lock holds even for the right password, from that address.
    let (status, _, _) =
        sign_in_from(&app, "10.3.0.1", "ann@example.com", "correct horse battery").await;
    assert_eq!(status, 429);
    // Ann, from her own address, is not locked out by it.
    let (status, _, _) =
        sign_in_from(&app, "10.3.0.2", "ann@example.com", "correct horse battery").await;
    assert_eq!(status, 303);
}

#[tokio::test]
async fn guessing_from_many_addresses_cannot_keep_out_a_person_with_a_second_factor() {
    let app = TestApp::spawn_with(|c| {
        behind_loopback_proxy(c);
        c.page_limits.sign_in_per_ip = pact_server::web::limits::Rate::new(100.0, 100.0);
    })
    .await;
    let ann = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    add_totp(&app, &ann).await;
    add_user(&app, "demo", "bob@example.com", "battery staple horse").await;
    // 25 wrong passwords for each, five from each of five addresses.
    for ip in 0..5 {
        for _ in 0..5 {
            for email in ["ann@example.com", "bob@example.com", "nobody@example.com"] {
                sign_in_from(&app, &format!("10.4.0.{ip}"), email, "wrong").await;
            }
        }
    }
    // The accounts are locked for everyone, known or not, with the same answer...
    let bob = sign_in_from(&app, "10.4.9.9", "bob@example.com", "wrong").await;
    let nobody = sign_in_from(&app, "10.4.9.9", "nobody@example.com", "wrong").await;
    assert_eq!(bob, nobody);
    assert_eq!(bob.0, 429);
    // ...but Ann's right password leads on to her second factor.
    let (status, _, _) =
        sign_in_from(&app, "10.4.9.8", "ann@example.com", "correct horse battery").await;
    assert_eq!(status, 303);
    // Bob has only a password: the lock holds for him until it ends.
    let (status, _, _) =
        sign_in_from(&app, "10.4.9.8", "bob@example.com", "battery staple horse").await;
    assert_eq!(status, 429);
}

// ------------------------------------------------------------ 6: two tabs

#[tokio::test]
async fn the_consent_form_approves_only_the_request_it_showed() {
    let (app, pa) = delegating_app(|_| {}).await;
    add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    let first = app.device_authorize(&pa, PA_SUB, "orders:read", None).await;
    let second = app
        .device_authorize(&pa, "someone-else", "orders:read orders:cancel", None)
        .await;
    let b = Browser::new(&app);
    b.submit("/device", "/device", &[("user_code", &first.user_code)])
        .await;
    b.sign_in(
        "demo",
        "ann@example.com",
        "correct horse battery",
        "/device/consent",
    )
    .await;
    // Tab 1 shows the first request.
    let (_, tab1) = b.get_html("/device/consent").await;
    assert!(tab1.contains(&first.user_code));
    let csrf = csrf_from(&tab1).unwrap();
    let shown = hidden_field(&tab1, "authorization").unwrap();
    // Tab 2 enters the second code.
    let res = b
        .submit("/device", "/device", &[("user_code", &second.user_code)])
        .await;
    assert_eq!(location(&res), "/device/consent");
    // Approve in tab 1: refused, nothing approved.
    let res = b
        .post(
            "/device/consent",
            &[
                ("csrf", &csrf),
                ("authorization", &shown),
                ("action", "approve"),
                ("scope", "orders:read"),
            ],
        )
        .await;
    assert_eq!(res.status(), 403);
    for auth in [&first, &second] {
        let status: String =
            sqlx::query_scalar("select status from device_authorizations where user_code = $1")
                .bind(auth.user_code.replace('-', ""))
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert_eq!(status, "pending");
    }
    // A form without the reference is refused too.
    let res = b
        .post(
            "/device/consent",
            &[
                ("csrf", &csrf),
                ("action", "approve"),
                ("scope", "orders:read"),
            ],
        )
        .await;
    assert_eq!(res.status(), 403);
    // The page now shown (the second request) can be approved.
    let res = b
        .submit(
            "/device/consent",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(location(&res), "/device/done");
}

// ------------------------------------------------------------ 7: odd bytes

#[tokio::test]
async fn nul_bytes_get_a_4xx_on_every_route_family() {
    let (app, pa) = delegating_app(|_| {}).await;
    let token = pa.token(PA_SUB, app.audience());
    let base = &app.base_url;
    // The unauthenticated card and the OAuth paths, NUL in the brand.
    let res = app
        .http
        .get(format!("{base}/a2a/de%00mo/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = app
        .http
        .post(format!("{base}/a2a/de%00mo/oauth/token"))
        .bearer_auth(&token)
        .form(&[("grant_type", "refresh_token")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = app
        .http
        .get(format!("{base}/login?brand=de%00mo"))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    // A path that does not decode as UTF-8 gets the protocol's answers, not
    // a plain-text 400: the card's bare 404; a task's bare 401 without a
    // token (PACT §3), its bare 404 with one.
    for (path, bearer, want) in [
        ("/a2a/%FF/.well-known/agent-card.json", false, 404),
        (
            "/a2a/%FF/oauth/.well-known/oauth-authorization-server",
            false,
            404,
        ),
        ("/a2a/%FF/oauth/jwks.json", false, 404),
        ("/a2a/%FF/oauth/receipt-keys.json", false, 404),
        ("/a2a/demo/tasks/%FF", false, 401),
        ("/a2a/demo/tasks/%FF", true, 404),
    ] {
        let mut req = app.http.get(format!("{base}{path}"));
        if bearer {
            req = req.bearer_auth(&token);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), want, "{path}");
        assert!(
            res.bytes().await.unwrap().is_empty(),
            "{path}: a bare answer"
        );
    }
    // Introspection at a brand that does not decode: no client is
    // authenticated there (RFC 7662 §2.1), in OAuth's JSON.
    let res = app
        .http
        .post(format!("{base}/a2a/%FF/oauth/introspect"))
        .basic_auth("pactc_x", Some("pacts_y"))
        .form(&[("token", "a.b.c")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "invalid_client", "{v}");
    // A2A bodies: messageId, text, contextId.
    for message in [
        json!({"messageId": "m\u{0}1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}),
        json!({"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "h\u{0}i"}]}),
        json!({"messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": "c\u{0}"}),
    ] {
        let res = app
            .post_a2a(
                "demo",
                "message:send",
                Some(&token),
                &json!({ "message": message }),
            )
            .await;
        crate::assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;
    }
    // OAuth forms.
    for form in [
        vec![("client_id", PA_ISS), ("scope", "orders:read\u{0}")],
        vec![
            ("client_id", "https://pa.example/\u{0}"),
            ("scope", "orders:read"),
        ],
    ] {
        let res = app
            .http
            .post(app.oauth("demo", "device_authorization"))
            .bearer_auth(&token)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_client_error(), "{}", res.status());
        let v: serde_json::Value = res.json().await.unwrap();
        assert!(v["error"].is_string(), "{v}");
    }
    for form in [
        vec![
            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
            ("device_code", "abc\u{0}"),
            ("client_id", PA_ISS),
        ],
        vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", "r\u{0}"),
            ("client_id", PA_ISS),
        ],
    ] {
        let res = app
            .http
            .post(app.oauth("demo", "token"))
            .bearer_auth(&token)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400);
        let v: serde_json::Value = res.json().await.unwrap();
        assert!(v["error"].is_string(), "{v}");
    }
    // In the PA-JWT itself (`iss`, `sub`): a failed authentication, the
    // bare 401 of PACT §3 on A2A and OAuth alike, never a 400 or 500 from
    // the database refusing the byte.
    for (claim, value) in [("iss", "https://pa.example/\u{0}"), ("sub", "u\u{0}1")] {
        let forged = pa.token_with(PA_SUB, app.audience(), |_, c| c[claim] = json!(value));
        let res = app
            .post_a2a(
                "demo",
                "message:send",
                Some(&forged),
                &json!({"message": {"messageId": "m9", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            )
            .await;
        assert_eq!(res.status(), 401, "{claim}");
        assert_eq!(res.headers()["www-authenticate"], r#"Bearer realm="a2a""#);
        let res = app
            .http
            .post(app.oauth("demo", "token"))
            .bearer_auth(&forged)
            .form(&[("grant_type", "refresh_token"), ("refresh_token", "r")])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{claim}");
    }
    // A merchant's Basic credentials at introspection: 401, not 500.
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        "pactc_\u{0}x:secret",
    );
    let res = app
        .http
        .post(format!("{}/oauth/introspect", app.iface("demo")))
        .header("authorization", format!("Basic {basic}"))
        .form(&[("token", "t")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    // Page forms: the sign-in email and the user code.
    let b = Browser::new(&app);
    let res = b
        .sign_in("demo", "ann\u{0}@example.com", "pw", "/account")
        .await;
    assert_eq!(res.status(), 400);
    let res = b
        .submit("/device", "/device", &[("user_code", "BCDF\u{0}GHJK")])
        .await;
    assert!(res.status().is_client_error(), "{}", res.status());
}

// ------------------------------------------------------------ 8: outages

/// A refresh at the token endpoint answered `status` with `Retry-After` and
/// RFC 6749's `temporarily_unavailable` (not the A2A envelope).
async fn assert_oauth_refusal(app: &TestApp, token: &str, status: u16) {
    let res = app
        .http
        .post(app.oauth("demo", "token"))
        .bearer_auth(token)
        .form(&[("grant_type", "refresh_token"), ("refresh_token", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), status);
    assert!(res.headers().contains_key("retry-after"));
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "temporarily_unavailable");
}

/// An app whose database connections all go through a proxy the test can
/// unplug.
async fn behind_a_proxy() -> (TcpProxy, TestApp) {
    let db_url = pact_tests::db::fresh_database().await;
    let proxy = TcpProxy::start(TcpProxy::target_of(&db_url)).await;
    let app = TestApp::spawn_full(
        proxy.url_for(&db_url),
        Arc::new(MasterKey::generate().unwrap()),
        |_| {},
        BrandAgents::builtin(),
    )
    .await;
    (proxy, app)
}

/// Introspection (RFC 7662) meets an outage as every OAuth endpoint does:
/// 503 `temporarily_unavailable` with Retry-After, not a 500 `server_error`
/// a resource server would not retry.
#[tokio::test]
async fn introspection_answers_a_database_outage_with_503() {
    let (proxy, app) = behind_a_proxy().await;
    app.enable_demo_delegation().await;
    let c = pact_server::merchant::credentials::generate().unwrap();
    pact_db::merchant::insert_credential(
        &app.db,
        &c.client_id,
        &pact_tests::brand_id("demo"),
        "orders API",
        &c.secret_hash,
    )
    .await
    .unwrap();
    proxy.unplug();
    let res = app
        .http
        .post(app.oauth("demo", "introspect"))
        .basic_auth(&c.client_id, Some(&c.secret))
        .form(&[("token", "a.b.c")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "temporarily_unavailable");
    proxy.plug_in();
}

#[tokio::test]
async fn a_database_outage_answers_503_fast_in_each_format_and_recovers() {
    let (proxy, app) = behind_a_proxy().await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(PA_ISS).await;
    let token = pa.token(PA_SUB, app.audience());
    let ready = |app: &TestApp| {
        let url = format!("{}/readyz", app.base_url);
        let http = app.http.clone();
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(ready(&app).await, 200);

    proxy.unplug();
    // The first request meets the outage (after the pool's wait) and says so.
    let res = app.send("demo", &token, "m1", "hello", None).await;
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    crate::assert_a2a_error(res, 503, "UNAVAILABLE", None).await;

    // From then on every family answers at once, in its own format.
    let started = Instant::now();
    let res = app.send("demo", &token, "m2", "hello", None).await;
    assert_eq!(res.status(), 503);
    crate::assert_a2a_error(res, 503, "UNAVAILABLE", None).await;
    assert_oauth_refusal(&app, &token, 503).await;
    let res = app
        .http
        .get(format!("{}/login?brand=demo", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert!(res.headers().contains_key("retry-after"));
    assert!(res.text().await.unwrap().contains("<html"));
    assert_eq!(ready(&app).await, 503);
    // Known down: nobody waits for the pool (its acquire timeout is 3 s).
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "requests waited for the pool: {:?}",
        started.elapsed()
    );
    // Liveness does not depend on the database.
    let res = app
        .http
        .get(format!("{}/healthz", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    proxy.plug_in();
    let mut back = false;
    for _ in 0..100 {
        if ready(&app).await == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "readiness never recovered");
    let res = app.send("demo", &token, "m3", "hello", None).await;
    assert_eq!(res.status(), 200);
}

#[tokio::test]
async fn rate_limited_a2a_and_oauth_answers_carry_a_body() {
    let (app, pa) = delegating_app(|c| {
        c.rate_limits.per_user_rate = 0.01;
        c.rate_limits.per_user_burst = 1.0;
    })
    .await;
    let token = pa.token(PA_SUB, app.audience());
    assert_eq!(
        app.send("demo", &token, "m1", "hello", None).await.status(),
        200
    );
    let res = app.send("demo", &token, "m2", "hello", None).await;
    assert!(res.headers().contains_key("retry-after"));
    crate::assert_a2a_error(res, 429, "RESOURCE_EXHAUSTED", None).await;
    assert_oauth_refusal(&app, &token, 429).await;
}

/// PACT §6 and RFC 8628 §3.5 together: polls of a pending code the node
/// holds are paced by `slow_down` and count against no rate limit (a 429
/// would save no work: the limiter runs after the PA-JWT check, and the
/// answer is a lookup in memory); a poll the node cannot answer from memory
/// (an unknown code) and every other token request count as before.
#[tokio::test]
async fn too_fast_polls_of_a_pending_code_are_slow_down_and_other_token_requests_are_limited() {
    let (app, pa) = delegating_app(|c| {
        c.rate_limits.per_user_rate = 0.01;
        c.rate_limits.per_user_burst = 3.0;
        c.rate_limits.per_pa_rate = 0.01;
        c.rate_limits.per_pa_burst = 4.0;
    })
    .await;
    app.until_listening().await;
    let auth = app.device_authorize(&pa, PA_SUB, "orders:read", None).await;
    let token = pa.token(PA_SUB, app.audience());
    let poll = |code: &'static str| {
        let code = if code.is_empty() {
            auth.device_code.clone()
        } else {
            code.to_owned()
        };
        let req = app
            .http
            .post(app.oauth("demo", "token"))
            .bearer_auth(&token)
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", code.as_str()),
                ("client_id", pa.issuer.as_str()),
            ]);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let body: serde_json::Value = res.json().await.unwrap();
            (
                status,
                body["error"].as_str().unwrap_or_default().to_owned(),
            )
        }
    };
    // The device authorization took one token of each bucket. The first poll
    // reads the database (a second); then the node holds the code.
    assert_eq!(poll("").await, (400, "authorization_pending".to_owned()));
    for _ in 0..6 {
        assert_eq!(poll("").await, (400, "slow_down".to_owned()));
    }
    // An unknown code is database work: it takes the user's last token, then 429.
    assert_eq!(poll("made-up").await, (400, "invalid_grant".to_owned()));
    assert_eq!(poll("made-up").await.0, 429);
    assert_oauth_refusal(&app, &token, 429).await;
    // The pending code is still answered.
    assert_eq!(poll("").await, (400, "slow_down".to_owned()));
}

#[tokio::test]
async fn the_consent_page_shows_the_forwarded_address_only_from_a_trusted_proxy() {
    for (trusted, expected) in [(true, "198.51.100.7"), (false, "127.0.0.1")] {
        let (app, pa) = delegating_app(|c| {
            if trusted {
                behind_loopback_proxy(c);
            }
        })
        .await;
        let res = app
            .http
            .post(app.oauth("demo", "device_authorization"))
            .bearer_auth(pa.token(PA_SUB, app.audience()))
            .header("x-forwarded-for", "198.51.100.7")
            .form(&[("client_id", PA_ISS), ("scope", "orders:read")])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let ip: Option<String> =
            sqlx::query_scalar("select request_ip from device_authorizations limit 1")
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert_eq!(ip.as_deref(), Some(expected));
    }
}

/// A client's `X-Request-Id` is kept (echoed, logged, passed to the
/// merchant) only when it is a short plain token; a value that could forge
/// log fields or flood the log is replaced by an id of pactd's own.
#[tokio::test]
async fn only_a_short_plain_request_id_is_kept_from_a_client() {
    let app = TestApp::spawn().await;
    let echoed = |sent: String| {
        let req = app
            .http
            .get(format!("{}/healthz", app.base_url))
            .header("x-request-id", sent);
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            res.headers()["x-request-id"].to_str().unwrap().to_owned()
        }
    };
    for kept in ["lb-7f3a.2_x:1", "0b9e7c2e-5d1b-4f3e-9a51-3c2d1e0f9a8b"] {
        assert_eq!(echoed(kept.to_owned()).await, kept);
    }
    for forged in [
        "x status=200 http.route=/admin".to_owned(),
        "a".repeat(129),
        "id\"with;quotes".to_owned(),
    ] {
        let got = echoed(forged.clone()).await;
        assert_ne!(got, forged);
        assert!(uuid::Uuid::parse_str(&got).is_ok(), "{got}");
    }
}
