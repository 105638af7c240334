//! A merchant's agent the test holds: each webhook turn is handed to the
//! test (its `pact.turn` body, with the gateway URL and the turn token), and
//! answered only once the test releases it, so the test can act as the
//! agent in between (tool calls, MCP sessions) on a turn still open.

use std::sync::Arc;

use axum::extract::State;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};

/// Serves `router` on a free loopback port: its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, router).await.ok();
    });
    base
}

pub struct HeldAgent {
    turns: mpsc::UnboundedSender<Value>,
    release: Semaphore,
    /// The next released turn answers 500 instead of its reply.
    fail_next: std::sync::atomic::AtomicBool,
}

impl HeldAgent {
    /// The agent at `{url}` (its agent URL), and the turns it receives.
    pub async fn start() -> (Arc<Self>, String, mpsc::UnboundedReceiver<Value>) {
        let (turns, received) = mpsc::unbounded_channel();
        let held = Arc::new(Self {
            turns,
            release: Semaphore::new(0),
            fail_next: std::sync::atomic::AtomicBool::new(false),
        });
        let base = serve(
            axum::Router::new()
                .route("/pact", axum::routing::post(held_turn))
                .with_state(held.clone()),
        )
        .await;
        (held, format!("{base}/pact"), received)
    }

    /// Lets one held turn answer `{"reply": "done"}`.
    pub fn release_one(&self) {
        self.release.add_permits(1);
    }

    /// Lets one held turn fail with `500` (an agent that crashed after acting).
    pub fn fail_one(&self) {
        self.fail_next
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.release.add_permits(1);
    }
}

async fn held_turn(
    State(h): State<Arc<HeldAgent>>,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, String) {
    h.turns
        .send(serde_json::from_slice(&body).unwrap())
        .unwrap();
    h.release.acquire().await.unwrap().forget();
    if h.fail_next.swap(false, std::sync::atomic::Ordering::SeqCst) {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "crashed".to_owned(),
        );
    }
    (
        axum::http::StatusCode::OK,
        json!({"reply": "done"}).to_string(),
    )
}
