//! Publishing a JWKS at `/.well-known/jwks.json` (PACT §3: the Provider
//! fetches the PA's keys from its registered `jwksUri`).
//!
//! The URI must stay stable: keys rotate behind it, the URI does not. So
//! `serve-jwks` and `conformance` listen on the address stored in the state
//! (`jwks_listen`), and the URI printed for registration is the one they
//! serve. A Provider requires HTTPS in production (pactd accepts loopback
//! HTTP only in development); put a TLS proxy in front and store its URL.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, Result};
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

/// The path the JWKS is served at.
pub const JWKS_PATH: &str = "/.well-known/jwks.json";

/// The path of the OpenID discovery document (OpenID Connect Discovery 1.0
/// §4), which an open Provider reads to find `jwks_uri` (PACT §3.1).
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

/// A running JWKS server. Stops when dropped.
#[derive(Debug)]
pub struct JwksServer {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    /// Binds `listen` (port 0 picks one) and serves `jwks` with
    /// `Cache-Control: max-age=300`, counting requests.
    pub async fn start(listen: SocketAddr, jwks: Value) -> Result<Self> {
        Self::start_discoverable(listen, jwks, None).await
    }

    /// As [`JwksServer::start`], also serving, when `discovery` names the
    /// agent's issuer and JWKS URI, the OpenID discovery document
    /// `{"issuer", "jwks_uri"}` at [`DISCOVERY_PATH`], so that a Provider
    /// whose admission is `open` finds the keys with no registration (PACT
    /// §3.1). The issuer must be the origin (and path) this server is
    /// reached at: the Provider fetches `{iss}/.well-known/openid-configuration`.
    pub async fn start_discoverable(
        listen: SocketAddr,
        jwks: Value,
        discovery: Option<(String, String)>,
    ) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let body = Arc::new(jwks.to_string());
        let mut app = Router::new().route(
            JWKS_PATH,
            get(move || {
                let body = body.clone();
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    jwks_response(body.as_str())
                }
            }),
        );
        if let Some((issuer, jwks_uri)) = discovery {
            let doc =
                Arc::new(serde_json::json!({"issuer": issuer, "jwks_uri": jwks_uri}).to_string());
            app = app.route(
                DISCOVERY_PATH,
                get(move || {
                    let doc = doc.clone();
                    async move { discovery_response(doc.as_str()) }
                }),
            );
        }
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        Ok(Self { addr, hits, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://{addr}/.well-known/jwks.json`.
    pub fn uri(&self) -> String {
        format!("http://{}{JWKS_PATH}", self.addr)
    }

    /// How many times the JWKS was fetched.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Serves until the task ends (for the `serve-jwks` command).
    pub async fn wait(mut self) {
        (&mut self.task).await.ok();
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn discovery_response(body: &str) -> Response {
    let mut res = body.to_owned().into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    res
}

fn jwks_response(body: &str) -> Response {
    let mut res = body.to_owned().into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jwk-set+json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    res
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    async fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
        let client = pact_jose::with_shared_tls(reqwest::Client::builder()).build()?;
        client.get(url).send().await
    }

    #[tokio::test]
    async fn serves_and_counts() {
        let key = crate::keys::AgentKey::generate().unwrap();
        let server = JwksServer::start("127.0.0.1:0".parse().unwrap(), key.jwks())
            .await
            .unwrap();
        let v: Value = get(server.uri()).await.unwrap().json().await.unwrap();
        assert_eq!(v["keys"][0]["kid"], key.kid());
        assert_eq!(server.hits(), 1);
    }

    #[tokio::test]
    async fn serves_the_discovery_document_when_asked() {
        let key = crate::keys::AgentKey::generate().unwrap();
        let plain = JwksServer::start("127.0.0.1:0".parse().unwrap(), key.jwks())
            .await
            .unwrap();
        let none = get(format!("http://{}{DISCOVERY_PATH}", plain.addr()))
            .await
            .unwrap();
        assert_eq!(none.status(), 404);
        let server = JwksServer::start_discoverable(
            "127.0.0.1:0".parse().unwrap(),
            key.jwks(),
            Some((
                "https://agent.example".into(),
                "https://agent.example/.well-known/jwks.json".into(),
            )),
        )
        .await
        .unwrap();
        let v: Value = get(format!("http://{}{DISCOVERY_PATH}", server.addr()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["issuer"], "https://agent.example");
        assert_eq!(v["jwks_uri"], "https://agent.example/.well-known/jwks.json");
    }
}
