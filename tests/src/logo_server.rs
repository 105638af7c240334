//! A personal-agent platform's web server on loopback, serving its logo and
//! the hostile answers a logo URL can give (SVG, HTML, too large, a redirect
//! to a private address). Counts requests so a test can see whether pactd
//! (and never the browser) fetched the logo.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The platform logo: a 64×64 PNG.
pub const PA_LOGO: &[u8] = include_bytes!("../fixtures/pa-logo.png");
/// A brand logo file for `pactd brand set --logo`.
pub const BRAND_LOGO: &[u8] = include_bytes!("../fixtures/brand-logo.png");
/// An SVG with script: what must never be served from pactd's origin.
pub const EVIL_SVG: &[u8] =
    br#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.domain)</script></svg>"#;

pub struct LogoServer {
    pub addr: SocketAddr,
    /// Answers every request with a PNG that never states its length and
    /// goes on past the cap (read until the connection closes).
    pub endless_addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
}

fn with_type(body: impl Into<Body>, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

impl LogoServer {
    pub async fn start() -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        let app = Router::new()
            .route(
                "/logo.png",
                get(|| async { with_type(PA_LOGO, "image/png") }),
            )
            // Declared as PNG: the type must come from the bytes.
            .route(
                "/logo.svg",
                get(|| async { with_type(EVIL_SVG, "image/png") }),
            )
            .route(
                "/logo.html",
                get(|| async { with_type(&b"<!doctype html><p>not a logo"[..], "image/png") }),
            )
            .route(
                "/big.png",
                get(|| async {
                    let mut body = PA_LOGO.to_vec();
                    body.resize(300 * 1024, 0);
                    with_type(body, "image/png")
                }),
            )
            .route(
                "/redirect.png",
                get(|| async {
                    (
                        StatusCode::FOUND,
                        [(header::LOCATION, "http://10.0.0.1/logo.png")],
                    )
                        .into_response()
                }),
            )
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let counter = counter.clone();
                    async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        next.run(req).await
                    }
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let endless = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endless_addr = endless.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut socket, _)) = endless.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let head =
                        "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\nconnection: close\r\n\r\n";
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = socket.write_all(PA_LOGO).await;
                    let filler = vec![0u8; 16 * 1024];
                    for _ in 0..64 {
                        if socket.write_all(&filler).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            endless_addr,
            hits,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn endless_url(&self) -> String {
        format!("http://{}/logo.png", self.endless_addr)
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}
