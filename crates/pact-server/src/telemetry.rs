//! Prometheus metrics (`GET /metrics` on the metrics listener only).
//!
//! The handlers record through the `metrics` facade; with no recorder
//! installed (no `--metrics-listen`) every record is a no-op. The page is
//! never served on the public listener: it names the brands' routes and the
//! node's load, which is the operator's business, not an agent's
//! (docs/operations.md, "Metrics").

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::client_ip::TrustedProxies;
use crate::config::ConnectionSettings;
use crate::state::AppState;

/// The metrics listener's own budget of open connections (file
/// descriptors), part of the reserve the public listener's default cap leaves
/// under the open-files limit (`config::default_max_connections`): a
/// Prometheus server keeps one connection per target, so this is plenty, and
/// a flood of connections to the metrics port is refused here instead of
/// using up descriptors the public listener needs.
pub const METRICS_MAX_CONNECTIONS: usize = 16;
/// Of those, from one address: one client cannot keep a scraper elsewhere out.
pub const METRICS_MAX_CONNECTIONS_PER_IP: usize = 8;

/// Latency buckets (seconds): from a cache hit to the request timeout.
const LATENCY_BUCKETS: [f64; 14] = [
    0.000_5, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 30.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder (once; later calls return the same
/// handle) and starts its upkeep. `None` when another recorder was installed.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &LATENCY_BUCKETS)
                .ok()?;
            let handle = builder
                .install_recorder()
                .map_err(|e| tracing::warn!(error = %e, "metrics recorder not installed"))
                .ok()?;
            let upkeep = handle.clone();
            // Histograms buffer samples until drained; drain them regularly
            // even when nobody scrapes.
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(5));
                loop {
                    tick.tick().await;
                    upkeep.run_upkeep();
                }
            });
            Some(handle)
        })
        .clone()
}

/// Whether a recorder is installed (then requests are tracked).
pub fn enabled() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// Counts each request and times it, by matched route (the route pattern,
/// never the raw path, which carries ids and codes) and status.
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    let labels = [
        ("route", route),
        ("method", method.as_str().to_owned()),
        ("status", status),
    ];
    metrics::counter!("pactd_http_requests_total", &labels).increment(1);
    metrics::histogram!("pactd_http_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    res
}

/// The metrics listener's app: `GET /metrics` and nothing else.
pub fn router(state: AppState, handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((state, handle))
}

async fn scrape(State((state, handle)): State<(AppState, PrometheusHandle)>) -> Response {
    // Levels read at scrape time rather than on every change.
    let size = f64::from(state.db.size());
    let idle = f64::from(u32::try_from(state.db.num_idle()).unwrap_or(u32::MAX));
    metrics::gauge!("pactd_db_pool_connections", "state" => "open").set(size);
    metrics::gauge!("pactd_db_pool_connections", "state" => "idle").set(idle);
    metrics::gauge!("pactd_db_pool_connections", "state" => "in_use").set((size - idle).max(0.0));
    metrics::gauge!("pactd_db_pool_max_connections")
        .set(f64::from(state.db.options().get_max_connections()));
    metrics::counter!("pactd_jwks_fetches_total").absolute(state.jwks.fetch_count());
    metrics::counter!("pactd_jwks_fetch_failures_total").absolute(state.jwks.failure_count());
    metrics::gauge!("pactd_revoked_grants_known").set(state.revocations.len() as f64);
    // The listener's truth is a time: read it now, not at its last event.
    let listening = state.config_cache.is_live();
    metrics::gauge!("pactd_listener_connected").set(if listening { 1.0 } else { 0.0 });
    // Unproven (not subscribed, or given up): no age to tell, as old as can be.
    let age = state.feed.age().map_or(f64::INFINITY, |a| a.as_secs_f64());
    metrics::gauge!("pactd_listener_feed_age_seconds").set(age);
    let memo = pact_jose::signature_memo_stats();
    metrics::counter!("pactd_signature_checks_total", "result" => "remembered")
        .absolute(memo.remembered);
    metrics::counter!("pactd_signature_checks_total", "result" => "verified")
        .absolute(memo.verified);
    metrics::gauge!("pactd_signature_memo_entries").set(memo.entries as f64);
    let mut res = handle.render().into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    *res.status_mut() = StatusCode::OK;
    res
}

/// The metrics listener's limits: the public listener's timeouts, and caps
/// of its own.
pub fn connection_settings(public: &ConnectionSettings) -> ConnectionSettings {
    ConnectionSettings {
        max_connections: METRICS_MAX_CONNECTIONS,
        max_connections_per_ip: METRICS_MAX_CONNECTIONS_PER_IP,
        ..public.clone()
    }
}

/// Serves the metrics page on its own listener until `shutdown` resolves,
/// through the public listener's accept loop (`serve.rs`): header timeout,
/// connection caps, bounded drain.
pub async fn serve(
    state: AppState,
    handle: PrometheusHandle,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let settings = connection_settings(&state.config.connections);
    // Nobody's forwarded address is believed here: the caps count peers.
    let trusted = TrustedProxies::default();
    crate::serve::accept_loop(
        listener,
        router(state, handle),
        &settings,
        trusted,
        shutdown,
    )
    .await;
    Ok(())
}
