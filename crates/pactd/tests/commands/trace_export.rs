//! OpenTelemetry traces from the real `pactd serve` binary, received by an
//! OTLP/HTTP receiver inside the test (protobuf `ExportTraceServiceRequest`s
//! decoded with opentelemetry-proto).
//!
//! One run goes through everything a secret passes: a device flow with a
//! person signing in (password, then TOTP) and approving on the pages, the
//! token poll, a delegated turn answered by a merchant agent that calls a
//! tool through pactd's gateway, a refresh and an introspection with a brand
//! API credential. Then pactd gets SIGTERM, which must flush every span.
//! The test checks the parent/child shape (request → database, JWKS, brand
//! agent → merchant call), `traceparent` at the merchant, the trusted-proxy
//! rule for incoming `traceparent`, trace ids in every JSON log line of a
//! request, and greps every exported string and every log line for each
//! secret the run used.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use pact_tests::pages::{Browser, add_totp, add_user, location, totp_now};
use pact_tests::{TestApp, TestPa};
use prost::Message as _;
use serde_json::{Value, json};

use crate::support::{free_port, run};

const ISS: &str = "https://pa.example";
const SUB: &str = "pa-user-1";
const EMAIL: &str = "ann@example.com";
const PASSWORD: &str = "tracing-test correct horse 7";
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The only trusted proxy of the run: requests from it may bring a `traceparent`.
const PROXY_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

// ---------------------------------------------------------------------------
// The OTLP/HTTP receiver
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Received {
    exports: Vec<(HeaderMap, ExportTraceServiceRequest)>,
}

async fn collect(
    State(received): State<Arc<Mutex<Received>>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body.as_ref()) else {
        return (StatusCode::BAD_REQUEST, Vec::new()).into_response();
    };
    received.lock().unwrap().exports.push((headers, request));
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

async fn start_receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let app = Router::new()
        .route("/v1/traces", post(collect))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (url, received)
}

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Exported {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    kind: i32,
    attributes: BTreeMap<String, String>,
    /// The attributes exported as ints (OTLP `IntValue`).
    ints: BTreeSet<String>,
}

fn value_text(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value_text(kv.value.as_ref())))
        .collect()
}

fn spans(received: &Received) -> Vec<Exported> {
    let mut out = Vec::new();
    for (_, request) in &received.exports {
        for rs in &request.resource_spans {
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    out.push(Exported {
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        name: s.name.clone(),
                        kind: s.kind,
                        attributes: attributes(&s.attributes),
                        ints: s
                            .attributes
                            .iter()
                            .filter(|kv| {
                                matches!(
                                    kv.value.as_ref().and_then(|v| v.value.as_ref()),
                                    Some(any_value::Value::IntValue(_))
                                )
                            })
                            .map(|kv| kv.key.clone())
                            .collect(),
                    });
                }
            }
        }
    }
    out
}

/// Every string the receiver got: resource attributes, span names, attribute
/// values, event names and values, status messages.
fn every_exported_string(received: &Received) -> Vec<String> {
    let mut out = Vec::new();
    for (_, request) in &received.exports {
        for rs in &request.resource_spans {
            if let Some(r) = &rs.resource {
                out.extend(
                    attributes(&r.attributes)
                        .into_iter()
                        .map(|(k, v)| format!("{k}={v}")),
                );
            }
            for ss in &rs.scope_spans {
                for s in &ss.spans {
                    out.push(s.name.clone());
                    out.extend(
                        attributes(&s.attributes)
                            .into_iter()
                            .map(|(k, v)| format!("{k}={v}")),
                    );
                    for e in &s.events {
                        out.push(e.name.clone());
                        out.extend(
                            attributes(&e.attributes)
                                .into_iter()
                                .map(|(k, v)| format!("{k}={v}")),
                        );
                    }
                    for l in &s.links {
                        out.extend(attributes(&l.attributes).into_values());
                    }
                    if let Some(status) = &s.status {
                        out.push(status.message.clone());
                    }
                }
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------
// The merchant's agent and tool
// ---------------------------------------------------------------------------

#[derive(Default)]
struct MerchantSeen {
    /// (`traceparent` on the turn, the turn's tool token, its tools URL)
    turns: Vec<(Option<String>, String, String)>,
    /// `traceparent` on each forwarded tool call.
    tool_calls: Vec<Option<String>>,
    /// What the gateway answered the agent's tool call.
    gateway_statuses: Vec<u16>,
}

type Seen = Arc<Mutex<MerchantSeen>>;

fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// The merchant's agent: calls `lookup_orders` through the gateway during
/// the turn, passing on the turn's `traceparent` as a traced agent does,
/// then replies. Before that, one call with a wrong token and the same
/// `traceparent`, which must not join the trace.
async fn agent_turn(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> String {
    let turn: Value = serde_json::from_slice(&body).unwrap();
    let token = turn["tools"]["token"].as_str().unwrap().to_owned();
    let tools = turn["tools"]["url"].as_str().unwrap().to_owned();
    let url = format!("{tools}/lookup_orders");
    let parent = traceparent(&headers);
    seen.lock()
        .unwrap()
        .turns
        .push((parent.clone(), token.clone(), tools));
    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .build()
        .unwrap();
    let call = |token: String| {
        let mut req = http.post(&url).bearer_auth(token).json(&json!({}));
        if let Some(p) = &parent {
            req = req.header("traceparent", p);
        }
        req
    };
    let refused = call(format!("{token}x")).send().await.unwrap().status();
    assert_eq!(refused, 401);
    let status = call(token.clone()).send().await.unwrap().status().as_u16();
    seen.lock().unwrap().gateway_statuses.push(status);
    json!({"reply": "You have no open orders."}).to_string()
}

async fn tool(State(seen): State<Seen>, headers: HeaderMap) -> String {
    seen.lock().unwrap().tool_calls.push(traceparent(&headers));
    json!({"orders": []}).to_string()
}

async fn start_merchant() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/pact", post(agent_turn))
        .route("/tools/lookup-orders", post(tool))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (base, seen)
}

// ---------------------------------------------------------------------------
// pactd
// ---------------------------------------------------------------------------

struct Pactd {
    child: tokio::process::Child,
    base: String,
    log: std::path::PathBuf,
}

impl Pactd {
    async fn start(app: &TestApp, otlp: &str) -> Self {
        Self::start_with(app, otlp, &[], &[]).await
    }

    /// With more arguments and environment variables.
    async fn start_with(app: &TestApp, otlp: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let log =
            std::env::temp_dir().join(format!("pactd-tracing-{}-{port}.log", std::process::id()));
        let mut cmd = crate::support::pactd();
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("OTEL_") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("DATABASE_URL", &app.db_url)
            .env("PACTD_MASTER_KEY", app.master_key.to_base64())
            // Everything pactd and its libraries log, so the grep sees the most.
            .env("RUST_LOG", "debug")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-collector-key=collector%20key",
            )
            .env("OTEL_SERVICE_NAME", "pactd-tracing-test")
            .args(["serve", "--no-migrate", "--allow-loopback-jwks"])
            .args(["--log-format", "json"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--public-url", &base])
            .args(["--trusted-proxies", &PROXY_IP.to_string()])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut pactd = Self {
            child: cmd.spawn().unwrap(),
            base,
            log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = pactd.child.try_wait().unwrap() {
                panic!("pactd exited before serving ({status}): {}", pactd.log());
            }
            if let Ok(res) = pact_tests::http_get(format!("{}/healthz", pactd.base)).await
                && res.status() == 200
            {
                return pactd;
            }
            assert!(Instant::now() < deadline, "no /healthz: {}", pactd.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then the exit status: the drain and the span flush happen in between.
    async fn stop(mut self) -> String {
        let pid = self.child.id().unwrap();
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("pactd stops within 30 s of SIGTERM")
            .unwrap();
        let log = self.log();
        assert!(status.success(), "pactd exited with {status}: {log}");
        let _ = std::fs::remove_file(&self.log);
        log
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Every secret the run used, by what it is.
#[derive(Default)]
struct Secrets(Vec<(&'static str, String)>);

impl Secrets {
    fn add(&mut self, what: &'static str, value: impl Into<String>) {
        let value = value.into();
        assert!(value.len() >= 8, "{what} is too short to grep for");
        self.0.push((what, value));
    }
}

fn form_ok(res_status: u16, body: &Value, what: &str) {
    assert_eq!(res_status, 200, "{what}: {body}");
}

#[tokio::test]
async fn spans_reach_an_otlp_receiver_with_their_parents_and_no_secret() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let pa: TestPa = app.registered_pa(ISS).await;
    let user = add_user(&app, "demo", EMAIL, PASSWORD).await;
    let totp = add_totp(&app, &user).await;
    let (merchant, seen) = start_merchant().await;
    let whsec = app.new_webhook_secret("demo").await;
    app.set_agent("demo", &format!("{merchant}/pact"), None)
        .await;
    pact_db::merchant::upsert_tool(
        &app.db,
        &pact_db::merchant::BrandTool {
            brand_id: pact_tests::brand_id("demo"),
            name: "lookup_orders".to_owned(),
            scope: Some("orders:read".to_owned()),
            url: format!("{merchant}/tools/lookup-orders"),
            description: String::new(),
            enforce: json!([]),
            input_schema: None,
            kind: pact_db::merchant::TOOL_KIND_URL.to_owned(),
            remote_name: None,
            mapped: true,
            summary: String::new(),
        },
    )
    .await
    .unwrap();
    let credential = pact_server::merchant::credentials::generate().unwrap();
    pact_db::merchant::insert_credential(
        &app.db,
        &credential.client_id,
        &pact_tests::brand_id("demo"),
        "orders API",
        &credential.secret_hash,
    )
    .await
    .unwrap();

    let (otlp, received) = start_receiver().await;
    let pactd = Pactd::start(&app, &otlp).await;
    let base = pactd.base.clone();
    let audience = format!("{base}/a2a");
    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut secrets = Secrets::default();
    secrets.add("password", PASSWORD);
    secrets.add("TOTP secret", pact_server::accounts::totp::base32(&totp));
    secrets.add("TOTP secret (hex)", hex(&totp));
    secrets.add("webhook secret", whsec.clone());
    secrets.add(
        "webhook secret (key)",
        whsec.trim_start_matches("whsec_").to_owned(),
    );
    secrets.add("client secret", credential.secret.clone());

    // Each PA-JWT is a bearer credential too.
    let pa_jwt = |secrets: &mut Secrets| {
        let jwt = pa.token(SUB, &audience);
        secrets.add("PA-JWT", jwt.clone());
        jwt
    };

    // 1. The PA asks (its JWKS is fetched now).
    let res = http
        .post(format!("{base}/a2a/demo/oauth/device_authorization"))
        .bearer_auth(pa_jwt(&mut secrets))
        .form(&[("client_id", ISS), ("scope", "orders:read")])
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let auth: Value = res.json().await.unwrap();
    form_ok(status, &auth, "device authorization");
    let user_code = auth["user_code"].as_str().unwrap().to_owned();
    let device_code = auth["device_code"].as_str().unwrap().to_owned();
    secrets.add("user code", user_code.clone());
    secrets.add("user code (as stored)", user_code.replace('-', ""));
    secrets.add("device code", device_code.clone());

    // 2. The person: code, password, TOTP, consent, on pactd's pages.
    let jar = Arc::new(reqwest::cookie::Jar::default());
    let b = Browser {
        client: pact_jose::with_shared_tls(reqwest::Client::builder())
            .cookie_provider(jar.clone())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        jar,
        base_url: base.clone(),
        origin: base.clone(),
        db: app.db.clone(),
    };
    // A prefilled link first: the user code in a query string.
    let (status, _) = b.get_html(&format!("/device?user_code={user_code}")).await;
    assert_eq!(status, 200);
    let res = b
        .submit("/device", "/device", &[("user_code", &user_code)])
        .await;
    assert_eq!(location(&res), "/login?brand=demo&next=/device/consent");
    let res = b.sign_in("demo", EMAIL, PASSWORD, "/device/consent").await;
    assert_eq!(res.status(), 303);
    assert!(
        location(&res).starts_with("/login/second-factor"),
        "{}",
        location(&res)
    );
    let res = b
        .second_factor("code", &totp_now(&totp), "/device/consent")
        .await;
    assert_eq!(location(&res), "/device/consent");
    secrets.add("session cookie", b.session_cookie().unwrap());
    let res = b
        .submit(
            "/device/consent",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(location(&res), "/device/done");

    // 3. The PA polls (RFC 8628 §3.4: waiting its interval between polls).
    let interval = auth["interval"].as_u64().unwrap_or(5);
    let tokens = loop {
        tokio::time::sleep(Duration::from_secs(interval)).await;
        let res = http
            .post(format!("{base}/a2a/demo/oauth/token"))
            .bearer_auth(pa_jwt(&mut secrets))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", &device_code),
                ("client_id", ISS),
            ])
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = res.json().await.unwrap();
        if status == 200 {
            break body;
        }
        assert_eq!(body["error"], "authorization_pending", "{body}");
    };
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    secrets.add("access token", access.clone());
    secrets.add("refresh token", refresh.clone());

    // 4. A delegated turn: the merchant's agent calls a tool through the gateway.
    let res = http
        .post(format!("{base}/a2a/demo/message:send"))
        .bearer_auth(pa_jwt(&mut secrets))
        .header("X-A2A-User-Delegation", format!("Bearer {access}"))
        .json(&json!({"message": {"messageId": "m1", "role": "ROLE_USER",
                                  "parts": [{"text": "Where is my order?"}]}}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let reply: Value = res.json().await.unwrap();
    form_ok(status, &reply, "delegated turn");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.turns.len(), 1);
        assert_eq!(seen.gateway_statuses, [200], "the tool call went through");
        assert_eq!(seen.tool_calls.len(), 1);
        secrets.add("turn tool token", seen.turns[0].1.clone());
    }

    // 5. A refresh, and the merchant's API introspecting the new token.
    let res = http
        .post(format!("{base}/a2a/demo/oauth/token"))
        .bearer_auth(pa_jwt(&mut secrets))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", ISS),
        ])
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let refreshed: Value = res.json().await.unwrap();
    form_ok(status, &refreshed, "refresh");
    let new_access = refreshed["access_token"].as_str().unwrap().to_owned();
    secrets.add("refreshed access token", new_access.clone());
    if let Some(r) = refreshed["refresh_token"].as_str() {
        secrets.add("refreshed refresh token", r);
    }
    let res = http
        .post(format!("{base}/a2a/demo/oauth/introspect"))
        .basic_auth(&credential.client_id, Some(&credential.secret))
        .form(&[("token", &new_access)])
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    form_ok(status, &body, "introspection");
    assert_eq!(body["active"], true);

    // 6. Incoming `traceparent`: honoured from the trusted proxy only.
    let from_proxy = pact_jose::with_shared_tls(reqwest::Client::builder())
        .local_address(IpAddr::V4(PROXY_IP))
        .build()
        .unwrap();
    let proxy_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let proxy_parent = "00f067aa0ba902b7";
    let res = from_proxy
        .get(format!("{base}/a2a/demo/.well-known/agent-card.json"))
        .header("traceparent", format!("00-{proxy_trace}-{proxy_parent}-01"))
        .header("x-request-id", "from-the-proxy")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let forged_trace = "0af7651916cd43dd8448eb211c80319c";
    let res = http
        .get(format!("{base}/a2a/demo/.well-known/agent-card.json"))
        .header(
            "traceparent",
            format!("00-{forged_trace}-b7ad6b7169203331-00"),
        )
        .header("x-request-id", "from-a-client")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // 7. SIGTERM: the drain, then the flush of every queued span.
    let log = pactd.stop().await;
    let received = received.lock().unwrap();
    assert!(!received.exports.is_empty(), "nothing exported: {log}");
    for (headers, _) in &received.exports {
        assert_eq!(headers["x-collector-key"], "collector key");
        assert_eq!(headers[header::CONTENT_TYPE], "application/x-protobuf");
    }
    let service = received.exports[0].1.resource_spans[0]
        .resource
        .as_ref()
        .map(|r| attributes(&r.attributes))
        .unwrap_or_default();
    assert_eq!(service["service.name"], "pactd-tracing-test");
    let all = spans(&received);
    let named = |name: &str| -> Vec<&Exported> { all.iter().filter(|s| s.name == name).collect() };
    let children = |of: &Exported| -> Vec<&Exported> {
        all.iter()
            .filter(|s| s.parent == of.span_id && s.trace_id == of.trace_id)
            .collect()
    };
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();

    // Server spans are named by route pattern, with the route as an attribute.
    const SERVER: i32 = 2;
    const CLIENT: i32 = 3;
    let authorize = named("POST /a2a/{brand}/oauth/device_authorization");
    assert_eq!(authorize.len(), 1, "{names:?}");
    let authorize = authorize[0];
    assert_eq!(authorize.kind, SERVER);
    assert_eq!(
        authorize.attributes["http.route"],
        "/a2a/{brand}/oauth/device_authorization"
    );
    assert_eq!(authorize.attributes["http.response.status_code"], "200");
    // An int, as the OpenTelemetry HTTP conventions type it (issue 33, item 4:
    // it was exported as the string "200").
    assert!(
        authorize.ints.contains("http.response.status_code"),
        "{:?}",
        authorize.attributes
    );
    // The JWKS fetch runs in its own task, and is still the request's child.
    let jwks: Vec<_> = children(authorize)
        .into_iter()
        .filter(|s| s.name == "jwks.fetch")
        .collect();
    assert_eq!(jwks.len(), 1, "{names:?}");
    assert_eq!(jwks[0].kind, CLIENT);
    assert_eq!(jwks[0].attributes["server.address"], "127.0.0.1");
    let db = |of: &Exported| -> Vec<&Exported> {
        children(of)
            .into_iter()
            .filter(|s| {
                s.attributes.get("db.system.name").map(String::as_str) == Some("postgresql")
            })
            .collect()
    };
    assert!(
        !db(authorize).is_empty(),
        "no database span under {authorize:?}"
    );
    for s in all
        .iter()
        .filter(|s| s.attributes.contains_key("db.query.text"))
    {
        assert_eq!(s.kind, CLIENT);
        assert_eq!(s.name, s.attributes["db.operation.name"]);
    }

    // The turn: request → brand agent → merchant call, database spans under the request.
    let send = named("POST /a2a/{brand}/message:send");
    assert_eq!(send.len(), 1, "{names:?}");
    let send = send[0];
    assert!(!db(send).is_empty(), "no database span under {send:?}");
    let agent: Vec<_> = children(send)
        .into_iter()
        .filter(|s| s.name == "brand_agent")
        .collect();
    assert_eq!(agent.len(), 1, "{names:?}");
    assert_eq!(agent[0].attributes["pact.agent_kind"], "webhook");
    // The turn's own call (the tool call's forward is in the trace too, deeper).
    let calls: Vec<_> = all
        .iter()
        .filter(|s| s.name == "merchant.call" && s.parent == agent[0].span_id)
        .collect();
    assert_eq!(calls.len(), 1, "{names:?}");
    assert_eq!(calls[0].attributes["http.response.status_code"], "200");
    assert!(calls[0].ints.contains("http.response.status_code"));
    // The merchant got this trace, with the call's span as the parent.
    let seen = seen.lock().unwrap();
    let turn_parent = seen.turns[0].0.clone().expect("traceparent on the turn");
    assert_eq!(
        turn_parent,
        format!("00-{}-{}-01", send.trace_id, calls[0].span_id)
    );
    // The tool call through the gateway, with the turn's traceparent passed
    // on and its turn token proven, joins the turn's trace under the turn's
    // call to the merchant (issue 33, item 4: it was a trace of its own, and
    // the merchant is no trusted proxy). The one with a wrong token does not.
    let gateway = named("POST /a2a/{brand}/turns/{turn}/tools/{tool}");
    assert_eq!(gateway.len(), 2, "{names:?}");
    let (refused, gateway): (Vec<_>, Vec<_>) = gateway
        .into_iter()
        .partition(|s| s.attributes["http.response.status_code"] == "401");
    assert_eq!((refused.len(), gateway.len()), (1, 1), "{names:?}");
    assert_eq!(
        (gateway[0].trace_id.as_str(), gateway[0].parent.as_str()),
        (send.trace_id.as_str(), calls[0].span_id.as_str()),
        "the tool call joins the turn's trace"
    );
    assert_ne!(refused[0].trace_id, send.trace_id);
    assert_eq!(
        refused[0].parent, "",
        "an unproven caller's traceparent is no parent"
    );
    let forward: Vec<_> = children(gateway[0])
        .into_iter()
        .filter(|s| s.name == "merchant.call")
        .collect();
    assert_eq!(forward.len(), 1, "{names:?}");
    assert_eq!(
        seen.tool_calls[0].as_deref(),
        Some(format!("00-{}-{}-01", gateway[0].trace_id, forward[0].span_id).as_str())
    );

    // traceparent: the proxy's joins its trace; the client's starts a new one.
    let by_request = |id: &str| -> &Exported {
        all.iter()
            .find(|s| s.attributes.get("request_id").map(String::as_str) == Some(id))
            .unwrap_or_else(|| panic!("no span for request {id}"))
    };
    let proxied = by_request("from-the-proxy");
    assert_eq!(
        (proxied.trace_id.as_str(), proxied.parent.as_str()),
        (proxy_trace, proxy_parent)
    );
    let forged = by_request("from-a-client");
    assert_ne!(forged.trace_id, forged_trace);
    assert_eq!(forged.parent, "", "a client's traceparent is not a parent");
    assert_eq!(forged.name, "GET /a2a/{brand}/.well-known/agent-card.json");

    // No raw path, query or id in any span name.
    let turn = turn_id(&seen);
    assert_eq!(turn.len(), 36, "a UUID: {turn}");
    for s in &all {
        assert!(
            !s.name.contains('?') && !s.name.contains("/demo/") && !s.name.contains(&turn),
            "span named by a raw path: {s:?}"
        );
    }

    // Every JSON log line inside a request carries the request's trace and
    // span ids. A turn's tool-gateway request gets them once its turn token
    // is checked (its span waits for the caller's parent): its lines before
    // that (tower-http's "started processing request") have none yet.
    let exported_traces: std::collections::HashSet<&str> =
        all.iter().map(|s| s.trace_id.as_str()).collect();
    let turn_calls: std::collections::HashSet<&str> =
        named("POST /a2a/{brand}/turns/{turn}/tools/{tool}")
            .iter()
            .map(|s| s.attributes["request_id"].as_str())
            .collect();
    let mut inside = 0;
    let mut turn_call_lines_with_ids = 0;
    for line in log.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        let Some(request) = v["spans"]
            .as_array()
            .and_then(|spans| spans.iter().find(|s| s["name"] == "http"))
        else {
            continue;
        };
        inside += 1;
        let turn_call = request["request_id"]
            .as_str()
            .is_some_and(|id| turn_calls.contains(id));
        if turn_call && request.get("trace_id").is_none() {
            assert_eq!(
                v["fields"]["message"], "started processing request",
                "only the line before the token check: {line}"
            );
            continue;
        }
        turn_call_lines_with_ids += usize::from(turn_call);
        let trace_id = request["trace_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no trace_id: {line}"));
        let span_id = request["span_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no span_id: {line}"));
        assert_eq!((trace_id.len(), span_id.len()), (32, 16), "{line}");
        assert!(exported_traces.contains(trace_id), "unknown trace: {line}");
    }
    assert!(
        inside > 10,
        "RUST_LOG=debug writes lines inside requests: {log}"
    );
    assert!(
        turn_call_lines_with_ids > 0,
        "a tool call's lines after its token check carry its ids: {log}"
    );

    // And no secret anywhere: not in a span, not in a log line.
    let exported = every_exported_string(&received);
    for (what, secret) in &secrets.0 {
        for s in &exported {
            assert!(
                !s.contains(secret.as_str()),
                "the {what} is in an exported span: {s}"
            );
        }
        for line in log.lines() {
            assert!(
                !line.contains(secret.as_str()),
                "the {what} is in a log line: {line}"
            );
        }
    }
}

/// The turn's id, from the tools URL the merchant was given (`…/turns/{id}/tools`).
fn turn_id(seen: &MerchantSeen) -> String {
    let url = &seen.turns[0].2;
    let after = &url[url.find("/turns/").unwrap() + "/turns/".len()..];
    after.trim_end_matches("/tools").to_owned()
}

/// Issue 33, item 4: with the collector down, spans were dropped with no
/// log line and no metric. Each lost batch is now counted (with its spans),
/// and logged at most once a minute: many failures here, one line.
#[tokio::test]
async fn a_collector_that_is_down_is_counted_and_logged_once_a_minute() {
    let app = TestApp::spawn().await;
    // Nothing listens there: every export is refused.
    let collector = format!("http://127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let pactd = Pactd::start_with(
        &app,
        &collector,
        &["--metrics-listen", &metrics],
        // A batch every 100 ms instead of every 5 s.
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let value = |page: &str, name: &str| -> f64 {
        page.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}:\n{page}"))
            .parse()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        // Requests make spans; each batch of them fails.
        pact_tests::http_get(format!("{}/healthz", pactd.base))
            .await
            .unwrap();
        let page = pact_tests::http_get(format!("http://{metrics}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if value(&page, "pactd_trace_export_failures_total") >= 3.0 {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "no export failure counted: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        value(&page, "pactd_trace_spans_lost_total") >= 3.0,
        "{page}"
    );
    let log = pactd.stop().await;
    assert_eq!(
        log.matches("trace export failed: spans lost").count(),
        1,
        "one line for many failures within a minute: {log}"
    );
}

/// Settings pactd cannot honour stop it at once, naming the variable.
#[tokio::test]
async fn an_otlp_protocol_other_than_http_protobuf_is_refused() {
    let mut cmd = crate::support::pactd();
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none");
    let out = run(cmd, &["serve"]).await;
    let stderr = out.failed();
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc") && stderr.contains("http/protobuf"),
        "{stderr}"
    );
}
