//! Cross-node invalidation through Postgres LISTEN/NOTIFY: every node sees a revocation at once.
//!
//! One connection per node listens on `pactd_revocations`, `pactd_keys` and
//! `pactd_config` (agents, brands, scopes, merchant settings: the node's
//! cached copy is dropped, see `config_cache.rs`) and
//! `pactd_device_authorizations` (a decision or take-over: the node forgets
//! that pending authorization, see `pending_polls.rs`).
//!
//! A connection can die without saying so (a NAT that dropped its mapping, a
//! vanished host, a proxy that stopped forwarding: no reset, no error), so it
//! is trusted only as far as a heartbeat proves it (`feed.rs`): every
//! [`ListenerSettings::heartbeat_every`] the listener sends a `NOTIFY` on a
//! channel of its own over this same connection, and the echo must be back
//! within [`ListenerSettings::heartbeat_timeout`]. A lost connection, a
//! heartbeat that cannot be sent, or an echo that is late all end the
//! connection: the memory views are dropped, the database probe is asked
//! whether the database itself is gone (`db_health.rs`), and the listener
//! connects again and reloads everything that might have been missed.
//!
//! [`ListenerSettings::heartbeat_every`]: pact_core::config::ListenerSettings::heartbeat_every
//! [`ListenerSettings::heartbeat_timeout`]: pact_core::config::ListenerSettings::heartbeat_timeout

use std::time::{Duration, Instant};

use sqlx::postgres::{PgListener, PgNotification};

use crate::node::Node;

pub const REVOCATIONS_CHANNEL: &str = "pactd_revocations";
pub const KEYS_CHANNEL: &str = "pactd_keys";
pub const CONFIG_CHANNEL: &str = "pactd_config";
pub const DEVICE_CHANNEL: &str = "pactd_device_authorizations";
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Subscribing and reloading (on top of getting a connection, which has the
/// heartbeat timeout): bounded, since a query on a frozen connection never
/// returns by itself.
const RESYNC_TIMEOUT: Duration = Duration::from_secs(5);

/// The channel only this node listens on, for its own heartbeats: one
/// node's heartbeat wakes no other node.
pub fn heartbeat_channel(node: uuid::Uuid) -> String {
    format!("pactd_node_{}", node.simple())
}

/// Why a connection was given up (the `reason` of
/// `pactd_listener_failures_total`).
#[derive(Debug)]
enum Ended {
    /// No connection, or subscribing and reloading failed or took too long.
    Connect(String),
    /// The connection was closed or failed.
    Lost(String),
    /// The heartbeat could not be sent or its echo was late: the connection
    /// may look open, but nothing proves it carries anything.
    Heartbeat(&'static str),
}

impl Ended {
    fn reason(&self) -> &'static str {
        match self {
            Self::Connect(_) => "connect",
            Self::Lost(_) => "lost",
            Self::Heartbeat(_) => "heartbeat",
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "cannot listen: {e}"),
            Self::Lost(e) => write!(f, "connection lost: {e}"),
            Self::Heartbeat(why) => write!(f, "heartbeat {why}"),
        }
    }
}

/// Runs until the process ends; every failure is logged and retried with backoff.
pub async fn run(node: Node) {
    let mut backoff = Duration::from_millis(250);
    loop {
        let (ended, was_live) = listen(&node).await;
        stopped(&node);
        metrics::counter!("pactd_listener_failures_total", "reason" => ended.reason()).increment(1);
        tracing::warn!(error = %ended, "change listener stopped; connecting again");
        // Perhaps the database itself is gone: if so, requests get their 503
        // at once instead of each waiting for the pool (`db_health.rs`).
        node.db_health.suspect();
        refresh_stale_keys(&node).await;
        if was_live {
            // It had been working: try again at once.
            backoff = Duration::from_millis(250);
        } else {
            tokio::time::sleep(backoff).await;
            // Capped low: while the listener is down this node reads its
            // configuration from the database and misses revocations made
            // during a running turn, so after a failover it should be back
            // within seconds of the database; one attempt every 2 s is nothing.
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Whatever ended the connection (or the listener itself, when the supervisor
/// calls this after a panic: `jobs.rs`), changes can no longer reach us: the
/// memory views are dropped and not used until the next subscription.
pub fn stopped(node: &Node) {
    node.config_cache.suspend();
    node.pending_polls.suspend();
    node.feed.lost();
}

/// The signing keys are reloaded on `pactd_keys`; while that cannot be heard,
/// a snapshot older than the feed's bound is reloaded instead.
async fn refresh_stale_keys(node: &Node) {
    let settings = &node.config.listener;
    // Known down: the reload would only wait for the pool, and delay the
    // listener's next attempt.
    if node.keys.age() <= settings.bound() || node.db_health.is_down() {
        return;
    }
    let reload = node.keys.refresh(&node.db, node.clock.now());
    match tokio::time::timeout(settings.heartbeat_timeout, reload).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "reloading signing keys failed"),
        Err(_) => tracing::warn!("reloading signing keys timed out"),
    }
}

/// One heartbeat on its way: the echo of `seq` is due by `due`.
struct Beat {
    seq: u64,
    sent: Instant,
    due: tokio::time::Instant,
}

/// One connection, from subscribing to its end; also says whether its feed
/// was ever proven (then a reconnect is tried at once).
async fn listen(node: &Node) -> (Ended, bool) {
    let settings = node.config.listener.clone();
    let own = heartbeat_channel(node.identity.id);
    let pool = pact_db::listener_pool(&node.db, settings.heartbeat_timeout);
    let setup = async {
        let mut listener = PgListener::connect_with(&pool)
            .await
            .map_err(|e| pact_db::Error::from(e).to_string())?;
        // A lost connection is ours to handle (drop the views, reload), not
        // sqlx's to mend behind our back; and the pool is ours alone.
        listener.eager_reconnect(false);
        listener.ignore_pool_close_event(true);
        listener
            .listen_all([
                REVOCATIONS_CHANNEL,
                KEYS_CHANNEL,
                CONFIG_CHANNEL,
                DEVICE_CHANNEL,
                own.as_str(),
            ])
            .await
            .map_err(|e| pact_db::Error::from(e).to_string())?;
        resync(node).await?;
        Ok::<_, String>(listener)
    };
    let mut listener =
        match tokio::time::timeout(settings.heartbeat_timeout + RESYNC_TIMEOUT, setup).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return (Ended::Connect(e), false),
            Err(_) => return (Ended::Connect("timed out".to_owned()), false),
        };
    // Subscribed and reloaded: the views may fill again, and are used as soon
    // as the first heartbeat proves the feed (within milliseconds).
    node.config_cache.resume();
    node.pending_polls.resume();

    let mut seq = 0u64;
    let mut beat: Option<Beat> = None;
    let mut next_beat = tokio::time::Instant::now();
    let mut proven = false;
    loop {
        let due = beat.as_ref().map(|b| b.due);
        tokio::select! {
            // Buffered notifications first: an echo that arrived is not late.
            biased;
            received = listener.try_recv() => match received {
                Ok(Some(n)) if n.channel() == own => {
                    if let Some(b) = beat.take_if(|b| n.payload() == b.seq.to_string()) {
                        node.feed.proven(b.sent);
                        proven = true;
                    }
                }
                Ok(Some(n)) => {
                    if let Err(why) = heard(node, &n).await {
                        return (Ended::Lost(why), proven);
                    }
                }
                Ok(None) => return (Ended::Lost("closed".to_owned()), proven),
                Err(e) => return (Ended::Lost(e.to_string()), proven),
            },
            () = sleep_until_some(due) => {
                return (Ended::Heartbeat("echo overdue"), proven);
            }
            () = tokio::time::sleep_until(next_beat), if beat.is_none() => {
                seq += 1;
                let sent = Instant::now();
                let payload = seq.to_string();
                let send = pact_db::notify(&mut listener, &own, &payload);
                match tokio::time::timeout(settings.heartbeat_timeout, send).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return (Ended::Heartbeat("could not be sent"), proven),
                    Err(_) => return (Ended::Heartbeat("not answered"), proven),
                }
                let at = tokio::time::Instant::from_std(sent);
                beat = Some(Beat {
                    seq,
                    sent,
                    due: at + settings.heartbeat_timeout,
                });
                next_beat = at + settings.heartbeat_every;
            }
        }
    }
}

/// Resolves at `at`, or never.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A change announced on one of the shared channels. An error when it
/// could not be applied: the notification is not sent again, so the
/// connection is ended, and the resync of the next one reloads it.
async fn heard(node: &Node, n: &PgNotification) -> Result<(), String> {
    match n.channel() {
        CONFIG_CHANNEL => node.config_cache.heard(n.payload()),
        DEVICE_CHANNEL => match n.payload().parse() {
            Ok(id) => node.pending_polls.forget(id),
            // Unreadable: forget everything rather than risk a stale answer.
            Err(_) => {
                tracing::warn!("malformed device authorization notification");
                node.pending_polls.forget_all();
            }
        },
        REVOCATIONS_CHANNEL => match n.payload().parse() {
            Ok(grant) => {
                metrics::counter!("pactd_revocations_total").increment(1);
                node.revocations.insert(grant);
            }
            Err(_) => tracing::warn!("ignoring a malformed revocation notification"),
        },
        KEYS_CHANNEL => {
            // Bounded: a reload stuck on a frozen pool connection must not
            // hold up the heartbeat (an overdue echo then ends the connection).
            let reload = node.keys.refresh(&node.db, node.clock.now());
            match tokio::time::timeout(node.config.listener.heartbeat_timeout, reload).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "reloading signing keys failed");
                    return Err("reloading signing keys failed".to_owned());
                }
                Err(_) => {
                    tracing::error!("reloading signing keys timed out");
                    return Err("reloading signing keys timed out".to_owned());
                }
            }
        }
        other => tracing::debug!(channel = other, "notification on an unknown channel"),
    }
    Ok(())
}

/// Reloads what notifications would have told us. Access tokens live at most
/// an hour, so older revocations cannot matter to a token any more.
async fn resync(node: &Node) -> Result<(), String> {
    let since = node.clock.now() - time::Duration::hours(2);
    let revoked = pact_db::grants::recently_revoked(&node.db, since)
        .await
        .map_err(|e| e.to_string())?;
    node.revocations.reload(revoked);
    // A failed reload fails the resync: the keys' notifications were not
    // heard while disconnected, so the subscription is not proven current.
    node.keys
        .refresh(&node.db, node.clock.now())
        .await
        .map_err(|e| format!("reloading signing keys failed: {e}"))?;
    Ok(())
}
