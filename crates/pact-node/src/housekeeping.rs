//! Periodic work of a node: drop dead device authorizations, expired
//! sessions, ceremonies and assertion `jti`s; reload keys so scheduled
//! unpublishing takes effect; refresh the trusted registries' lists.

use std::time::Duration;

use time::OffsetDateTime;

use crate::node::Node;

pub const PERIOD: Duration = Duration::from_secs(60);

pub async fn run(node: Node) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweep(&node, node.clock.now()).await;
    }
}

/// One pass; public so tests can run it without waiting.
pub async fn sweep(node: &Node, now: OffsetDateTime) {
    // Expired or finished authorizations are useless after a grace period that
    // lets a late poll still get `expired_token` rather than `invalid_grant`.
    match pact_db::device_authorizations::delete_stale(&node.db, now - time::Duration::hours(1))
        .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "removed stale device authorizations"),
        Err(e) => tracing::warn!(error = %e, "device authorization cleanup failed"),
    }
    node.pending_polls
        .drop_expired_before(now - time::Duration::hours(1));
    if let Err(e) = pact_db::sessions::delete_expired(&node.db, now).await {
        tracing::warn!(error = %e, "session cleanup failed");
    }
    if let Err(e) = pact_db::sign_in_failures::sweep(&node.db, now - time::Duration::days(1)).await
    {
        tracing::warn!(error = %e, "sign-in failure cleanup failed");
    }
    // Reset links that died a day ago count for nothing, not even the
    // per-account mail budget (an hour).
    if let Err(e) = pact_db::password_resets::sweep(&node.db, now - time::Duration::days(1)).await {
        tracing::warn!(error = %e, "password-reset link cleanup failed");
    }
    // A turn claimed by a node that stopped before storing its reply: after
    // CLAIM_ABANDONED_AFTER nobody will finish it; dropping the claim lets
    // the PA retry. (A delegated first turn's claim is its context row: a
    // retry takes that over itself, see a2a/send.rs.)
    match pact_db::conversations::delete_stale_claims(
        &node.db,
        now - pact_db::conversations::CLAIM_ABANDONED_AFTER,
    )
    .await
    {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "removed abandoned turn claims"),
        Err(e) => tracing::warn!(error = %e, "turn claim cleanup failed"),
    }
    // Logos nobody shows any more; a day of grace covers a registration
    // that stored one and has not referenced it yet.
    match pact_db::logos::delete_unused(&node.db, now - time::Duration::days(1)).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "removed unused logos"),
        Err(e) => tracing::warn!(error = %e, "logo cleanup failed"),
    }
    // Budgets of consumed limits outlive every grant that holds them by a
    // day (the account page still shows an ended grant's last figures
    // meanwhile); after that no grant can charge or show them.
    match pact_db::budgets::delete_expired(&node.db, now - time::Duration::days(1)).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(deleted = n, "removed the budgets of ended grants"),
        Err(e) => tracing::warn!(error = %e, "budget cleanup failed"),
    }
    // What nodes shared about turns long over (their tokens expired).
    if let Err(e) =
        pact_db::turn_fences::sweep(&node.relaxed_db, now - time::Duration::hours(1)).await
    {
        tracing::warn!(error = %e, "turn fence cleanup failed");
    }
    // Nodes that stopped without saying so (crash, kill -9).
    match pact_db::nodes::sweep(&node.db, now - crate::nodes::SWEEP_AFTER).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(removed = n, "removed the rows of nodes gone silent"),
        Err(e) => tracing::warn!(error = %e, "node list cleanup failed"),
    }
    // Trusted registries' lists that are due (one node fetches each).
    crate::registry::refresh_due(node, now).await;
    if let Err(e) = node.keys.refresh(&node.db, node.clock.now()).await {
        tracing::warn!(error = %e, "periodic key reload failed");
    }
}
