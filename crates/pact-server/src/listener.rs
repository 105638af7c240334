//! Cross-node invalidation through Postgres LISTEN/NOTIFY: every node sees a revocation at once.
//!
//! One connection per node listens on `pactd_revocations`, `pactd_keys` and
//! `pactd_config` (agents, brands, scopes, merchant settings: the node's
//! cached copy is dropped, see `config_cache.rs`) and
//! `pactd_device_authorizations` (a decision or take-over: the node forgets
//! that pending authorization, see `pending_polls.rs`).
//! When the connection drops, sqlx reports it (`try_recv` → `None`) and
//! reconnects; everything that might have been missed is then reloaded.

use std::time::Duration;

use sqlx::postgres::PgListener;

use crate::state::AppState;

pub const REVOCATIONS_CHANNEL: &str = "pactd_revocations";
pub const KEYS_CHANNEL: &str = "pactd_keys";
pub const CONFIG_CHANNEL: &str = "pactd_config";
pub const DEVICE_CHANNEL: &str = "pactd_device_authorizations";
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Runs until the process ends; errors are logged and retried with backoff.
pub async fn run(state: AppState) {
    let mut backoff = Duration::from_millis(250);
    loop {
        let outcome = listen(&state).await;
        // Whatever ended the connection, changes can no longer reach us.
        state.config_cache.set_live(false);
        state.pending_polls.set_live(false);
        metrics::gauge!("pactd_listener_connected").set(0.0);
        match outcome {
            Ok(()) => backoff = Duration::from_millis(250),
            Err(e) => {
                metrics::counter!("pactd_listener_failures_total").increment(1);
                tracing::warn!(error = %e, "change listener failed; retrying");
                tokio::time::sleep(backoff).await;
                // Capped low: while the listener is down this node reads its
                // configuration from the database and its revocation view is
                // stale, so after a failover it should be back within seconds
                // of the database; one connection attempt every 2 s is nothing.
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

async fn listen(state: &AppState) -> Result<(), pact_db::Error> {
    let mut listener = PgListener::connect_with(&state.db).await?;
    listener
        .listen_all([
            REVOCATIONS_CHANNEL,
            KEYS_CHANNEL,
            CONFIG_CHANNEL,
            DEVICE_CHANNEL,
        ])
        .await?;
    resync(state).await?;
    // Subscribed: from here on every change reaches us, so the copy may be used.
    state.config_cache.set_live(true);
    state.pending_polls.set_live(true);
    metrics::gauge!("pactd_listener_connected").set(1.0);
    loop {
        match listener.try_recv().await? {
            Some(n) if n.channel() == CONFIG_CHANNEL => state.config_cache.heard(n.payload()),
            Some(n) if n.channel() == DEVICE_CHANNEL => match n.payload().parse() {
                Ok(id) => state.pending_polls.forget(id),
                // Unreadable: forget everything rather than risk a stale answer.
                Err(_) => {
                    tracing::warn!("malformed device authorization notification");
                    state.pending_polls.set_live(true);
                }
            },
            Some(n) if n.channel() == REVOCATIONS_CHANNEL => match n.payload().parse() {
                Ok(grant) => {
                    metrics::counter!("pactd_revocations_total").increment(1);
                    state.revocations.insert(grant);
                }
                Err(_) => tracing::warn!("ignoring a malformed revocation notification"),
            },
            Some(_) => {
                if let Err(e) = state.keys.refresh(&state.db, state.clock.now()).await {
                    tracing::error!(error = %e, "reloading signing keys failed");
                }
            }
            // The connection was lost and notifications sent meanwhile are gone:
            // start over (listen first, then reload) so nothing falls in between.
            None => {
                tracing::info!("change listener lost its connection; resynchronising");
                return Ok(());
            }
        }
    }
}

/// Reloads what notifications would have told us. Access tokens live at most
/// an hour, so older revocations cannot matter to a token any more.
async fn resync(state: &AppState) -> Result<(), pact_db::Error> {
    let since = state.clock.now() - time::Duration::hours(2);
    let revoked = pact_db::grants::recently_revoked(&state.db, since).await?;
    state.revocations.replace(revoked);
    if let Err(e) = state.keys.refresh(&state.db, state.clock.now()).await {
        tracing::error!(error = %e, "reloading signing keys failed");
    }
    Ok(())
}
