//! Our own accept loop, so that slow or idle clients cannot hold the server
//! and a stop always ends.
//!
//! * Each connection gets a header timeout (hyper's `header_read_timeout`),
//!   which also bounds the idle time of a kept-alive connection; the request
//!   timeout layer in the router bounds the rest of a request.
//! * Connections are counted, globally and per address (an IPv6 /64), and
//!   refused at accept time above the caps, so a flood is stopped well below
//!   the open-files limit instead of `accept` failing for everybody.
//! * On shutdown we stop accepting, let in-flight requests finish for at most
//!   `shutdown_grace`, then close whatever is left and return, whatever the
//!   clients do: an orchestrator's rolling restart ends in an exit, not a SIGKILL.
//!
//! The metrics listener runs on the same loop with caps of its own
//! (`telemetry.rs`), so it can never take the public listener's file
//! descriptors.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use crate::client_ip::{TrustedProxies, limit_key};
use crate::config::ConnectionSettings;

/// Serves `app` on `listener` under `settings` (header timeout, connection
/// caps, bounded drain) until `shutdown` resolves; the public listener and
/// the metrics listener (`telemetry.rs`) both run on it.
pub async fn accept_loop(
    listener: TcpListener,
    app: axum::Router,
    settings: &ConnectionSettings,
    trusted: TrustedProxies,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let counter = Arc::new(ConnectionCounter::new(settings, trusted));

    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(settings.header_timeout)
        .keep_alive(true);

    let graceful = GracefulShutdown::new();
    // Flipped after the grace period: every remaining connection is dropped.
    let (close_all, closing) = watch::channel(false);
    let mut refused_logged = tokio::time::Instant::now();
    tokio::pin!(shutdown);

    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE/ENFILE and friends: pause instead of spinning; the
                    // caps should keep us from ever getting here.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = ConnectionCounter::admit(&counter, peer.ip()) else {
            // Dropping the stream closes it. Log at most once a second: a
            // flood must not become a flood of log lines.
            if refused_logged.elapsed() >= Duration::from_secs(1) {
                refused_logged = tokio::time::Instant::now();
                tracing::warn!(peer = %limit_key(peer.ip()), "connection refused: too many open connections");
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = app
            .clone()
            .map_request(move |mut req: axum::http::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            });
        let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let conn = graceful.watch(conn);
        let mut closing = closing.clone();
        tokio::spawn(async move {
            let _slot = slot;
            tokio::select! {
                result = conn => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                _ = closing.wait_for(|closed| *closed) => {}
            }
        });
    }

    drop(listener);
    let open = graceful.count();
    tracing::info!(open, grace = ?settings.shutdown_grace, "stopped accepting; draining connections");
    if tokio::time::timeout(settings.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            remaining = counter.open(),
            "shutdown grace period over: closing the remaining connections"
        );
        let _ = close_all.send(true);
    }
}

/// Open connections, in total and per address key.
struct ConnectionCounter {
    max_total: usize,
    max_per_ip: usize,
    trusted: TrustedProxies,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    per_ip: HashMap<String, usize>,
}

/// One admitted connection; dropping it gives the place back.
struct Slot {
    counter: Arc<ConnectionCounter>,
    key: Option<String>,
}

impl ConnectionCounter {
    fn new(settings: &ConnectionSettings, trusted: TrustedProxies) -> Self {
        Self {
            max_total: settings.max_connections,
            max_per_ip: settings.max_connections_per_ip,
            trusted,
            open: Mutex::new(Open::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        match self.open.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn open(&self) -> usize {
        self.lock().total
    }

    fn admit(this: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        // A trusted proxy carries many clients: only the global cap applies to it.
        let key = (!this.trusted.contains(ip)).then(|| limit_key(ip));
        let mut open = this.lock();
        if open.total >= this.max_total {
            return None;
        }
        if let Some(k) = &key {
            let n = open.per_ip.entry(k.clone()).or_insert(0);
            if *n >= this.max_per_ip {
                return None;
            }
            *n += 1;
        }
        open.total += 1;
        Some(Slot {
            counter: this.clone(),
            key,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.counter.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(k) = &self.key
            && let Some(n) = open.per_ip.get_mut(k)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.per_ip.remove(k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(total: usize, per_ip: usize, trusted: &str) -> Arc<ConnectionCounter> {
        let settings = ConnectionSettings {
            max_connections: total,
            max_connections_per_ip: per_ip,
            ..ConnectionSettings::default()
        };
        Arc::new(ConnectionCounter::new(
            &settings,
            TrustedProxies::parse(trusted).unwrap(),
        ))
    }

    #[test]
    fn one_address_cannot_take_more_than_its_share() {
        let c = counter(10, 2, "");
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let s1 = ConnectionCounter::admit(&c, a).unwrap();
        let _s2 = ConnectionCounter::admit(&c, a).unwrap();
        assert!(ConnectionCounter::admit(&c, a).is_none());
        assert!(ConnectionCounter::admit(&c, b).is_some());
        drop(s1);
        assert!(ConnectionCounter::admit(&c, a).is_some());
    }

    #[test]
    fn the_global_cap_holds_and_proxies_are_exempt_from_the_per_address_cap() {
        let c = counter(3, 1, "10.0.0.0/8");
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let slots: Vec<_> = (0..3)
            .map(|_| ConnectionCounter::admit(&c, proxy).unwrap())
            .collect();
        assert!(ConnectionCounter::admit(&c, proxy).is_none());
        assert!(ConnectionCounter::admit(&c, "192.0.2.1".parse().unwrap()).is_none());
        drop(slots);
        assert_eq!(c.open(), 0);
        assert!(c.lock().per_ip.is_empty());
    }
}
