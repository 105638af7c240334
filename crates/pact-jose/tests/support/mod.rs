//! A real JWKS endpoint on 127.0.0.1:0 that counts its hits, can be told to
//! change what it serves or to hold its answers until released, plus
//! generated public keys to serve.
//! Test scaffolding: a failed setup step should stop the test loudly.

#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use josekit::jwk::KeyPair as _;
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use pact_jose::{JwksPolicy, KeySet};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// What the endpoint answers.
#[derive(Clone, Debug)]
pub struct Served {
    pub status: u16,
    pub body: String,
    pub cache_control: Option<String>,
}

#[derive(Clone)]
struct ServerState {
    served: Arc<Mutex<Served>>,
    hits: Arc<tokio::sync::watch::Sender<u64>>,
    /// `false` while answers are held (see [`JwksServer::hold`]).
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

pub struct JwksServer {
    pub addr: SocketAddr,
    state: ServerState,
    task: Option<JoinHandle<()>>,
}

impl JwksServer {
    /// Start serving `body` with status 200 and no Cache-Control.
    pub async fn start(body: String) -> JwksServer {
        let state = ServerState {
            served: Arc::new(Mutex::new(Served {
                status: 200,
                body,
                cache_control: None,
            })),
            hits: Arc::new(tokio::sync::watch::Sender::new(0)),
            open: Arc::new(tokio::sync::watch::Sender::new(true)),
        };
        let app = Router::new()
            .route("/jwks.json", get(serve_jwks))
            .route("/redirect", get(redirect))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        JwksServer {
            addr,
            state,
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn jwks_url(&self) -> String {
        self.url("/jwks.json")
    }

    /// Hits on /jwks.json so far.
    pub fn hits(&self) -> u64 {
        *self.state.hits.borrow()
    }

    /// Returns once /jwks.json has been hit `n` times (the request is then
    /// in the server's hands: answered, or held).
    pub async fn hit(&self, n: u64) {
        let mut hits = self.state.hits.subscribe();
        hits.wait_for(|h| *h >= n).await.expect("server state");
    }

    /// Requests are counted but not answered until [`JwksServer::release`]:
    /// a fetch stays in flight for as long as the test needs.
    pub fn hold(&self) {
        self.state.open.send_replace(false);
    }

    pub fn release(&self) {
        self.state.open.send_replace(true);
    }

    pub fn set(&self, change: impl FnOnce(&mut Served)) {
        let mut served = self.state.served.lock().expect("lock");
        change(&mut served);
    }

    /// Stop listening: later connections are refused.
    pub async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn serve_jwks(State(state): State<ServerState>) -> Response {
    state.hits.send_modify(|h| *h += 1);
    let mut open = state.open.subscribe();
    open.wait_for(|open| *open).await.expect("server state");
    let served = state.served.lock().expect("lock").clone();
    let status = StatusCode::from_u16(served.status).expect("status");
    let mut response = (status, served.body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(cc) = served.cache_control {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_str(&cc).expect("cache-control"),
        );
    }
    response
}

async fn redirect() -> Response {
    (
        StatusCode::FOUND,
        [(header::LOCATION, HeaderValue::from_static("/jwks.json"))],
    )
        .into_response()
}

/// A public P-256 JWK with `kid`.
pub fn ec_jwk(kid: &str) -> Value {
    let pair = EcKeyPair::generate(EcCurve::P256).expect("ec key");
    let mut jwk = pair.to_jwk_public_key();
    jwk.set_key_id(kid);
    serde_json::to_value(&jwk).expect("jwk json")
}

/// A JWKS document holding fresh EC keys with these kids.
pub fn jwks(kids: &[&str]) -> String {
    let keys: Vec<Value> = kids.iter().map(|kid| ec_jwk(kid)).collect();
    let doc = json!({ "keys": keys }).to_string();
    assert_eq!(
        KeySet::from_json(doc.as_bytes()).expect("jwks").len(),
        kids.len()
    );
    doc
}

/// The default policy with loopback allowed (the test endpoints are local).
pub fn loopback_policy() -> JwksPolicy {
    JwksPolicy {
        allow_loopback: true,
        fetch_timeout: Duration::from_secs(2),
        ..JwksPolicy::default()
    }
}
