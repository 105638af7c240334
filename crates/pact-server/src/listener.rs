//! Cross-node invalidation through Postgres LISTEN/NOTIFY: every node sees a revocation at once.
//!
//! One connection per node listens on `pactd_revocations` and `pactd_keys`.
//! When the connection drops, sqlx reports it (`try_recv` → `None`) and
//! reconnects; everything that might have been missed is then reloaded.

use std::time::Duration;

use sqlx::postgres::PgListener;
use time::OffsetDateTime;

use crate::state::AppState;

pub const REVOCATIONS_CHANNEL: &str = "pactd_revocations";
pub const KEYS_CHANNEL: &str = "pactd_keys";

/// Runs until the process ends; errors are logged and retried with backoff.
pub async fn run(state: AppState) {
    let mut backoff = Duration::from_millis(250);
    loop {
        match listen(&state).await {
            Ok(()) => backoff = Duration::from_millis(250),
            Err(e) => {
                tracing::warn!(error = %e, "change listener failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

async fn listen(state: &AppState) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect_with(&state.db).await?;
    listener
        .listen_all([REVOCATIONS_CHANNEL, KEYS_CHANNEL])
        .await?;
    resync(state).await?;
    loop {
        match listener.try_recv().await? {
            Some(n) if n.channel() == REVOCATIONS_CHANNEL => match n.payload().parse() {
                Ok(grant) => state.revocations.insert(grant),
                Err(_) => tracing::warn!("ignoring a malformed revocation notification"),
            },
            Some(_) => {
                if let Err(e) = state.keys.refresh(&state.db).await {
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
async fn resync(state: &AppState) -> Result<(), sqlx::Error> {
    let since = OffsetDateTime::now_utc() - time::Duration::hours(2);
    let revoked = pact_db::grants::recently_revoked(&state.db, since).await?;
    state.revocations.replace(revoked);
    if let Err(e) = state.keys.refresh(&state.db).await {
        tracing::error!(error = %e, "reloading signing keys failed");
    }
    Ok(())
}
