//! Binding the app to a socket, on the accept loop of `accept.rs` (header
//! timeout, connection caps, bounded drain), with the node's background jobs
//! running beside it; and the stop signal.

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::accept::accept_loop;
use crate::router::router;
use crate::state::AppState;

/// Serves until `shutdown` resolves, then drains (bounded) and returns.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let background = crate::background::spawn(&state.node);
    let (state_db, node_id) = (state.db.clone(), state.node.identity.id);
    let settings = state.config.connections.clone();
    let trusted = state.config.trusted_proxies.clone();
    accept_loop(listener, router(state), &settings, trusted, shutdown).await;
    background.abort();
    // A clean stop leaves the node list at once instead of showing as gone;
    // bounded, since the database may be what is failing.
    let leave = pact_db::nodes::remove(&state_db, node_id);
    match tokio::time::timeout(Duration::from_secs(2), leave).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "removing this node's heartbeat failed"),
        Err(_) => tracing::warn!("removing this node's heartbeat timed out"),
    }
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
