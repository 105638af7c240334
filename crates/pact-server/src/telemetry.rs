//! Prometheus metrics (`GET /metrics` on the metrics listener only).
//!
//! The handlers record through the `metrics` facade; with no recorder
//! installed (no `--metrics-listen`) every record is a no-op. The page is
//! never served on the public listener: it names the brands' routes and the
//! node's load, which is the operator's business, not an agent's
//! (docs/operations.md, "Metrics").

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
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

/// Latency buckets (seconds) of `pactd_http_request_duration_seconds`: the
/// measured latencies run from about 0.2 ms (a page asset, a pending poll
/// answered from memory) through a few milliseconds (a delegated turn's p99 is
/// 17 ms under load, docs/performance.md) to seconds (a merchant's agent that
/// thinks), up to the default request timeout (30 s). Prometheus advises
/// buckets spread over the range that matters to an alert or an SLO
/// (<https://prometheus.io/docs/practices/histograms/>): roughly a 1-2.5-5
/// series, so a quantile read from them is off by at most a factor of 2.5.
const LATENCY_BUCKETS: [f64; 17] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 20.0, 30.0,
];

/// What a metric family is, for its `# TYPE` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One family pactd exports: its name, type, `# HELP` text and the label
/// sets known before any event (each is exported at 0 from the start).
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// Label sets that exist from start: a counter is exported at 0 with each,
    /// so that `increase()` and `rate()` see its first event (a series that
    /// appears at 1 has no earlier sample to increase from, and an alert on
    /// `increase(...) > 0` never fires for it). Empty for a family whose
    /// labels are only known when it is recorded (a route's status), or a
    /// gauge set at scrape time.
    pub labels: &'static [&'static [(&'static str, &'static str)]],
}

const NO_LABELS: &[&[(&str, &str)]] = &[&[]];

/// Every family pactd exports (docs/operations.md, "Metrics", lists the same).
/// A test checks that the page names no family outside this table, and
/// `promtool check metrics` that each has its HELP and TYPE.
pub const FAMILIES: &[Family] = &[
    Family {
        name: "pactd_http_requests_total",
        kind: Kind::Counter,
        help: "HTTP requests answered, by route pattern, method and status.",
        labels: &[],
    },
    Family {
        name: "pactd_http_request_duration_seconds",
        kind: Kind::Histogram,
        help: "Time from a request's headers to its answer, by route pattern, method and status.",
        labels: &[],
    },
    Family {
        name: "pactd_tokens_issued_total",
        kind: Kind::Counter,
        help: "Delegation tokens issued at the token endpoint, by grant type.",
        labels: &[
            &[("grant_type", "device_code")],
            &[("grant_type", "refresh_token")],
        ],
    },
    Family {
        name: "pactd_refresh_token_reuse_total",
        kind: Kind::Counter,
        help: "Refresh tokens presented again after rotation; each one revoked its grant.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_device_authorizations_total",
        kind: Kind::Counter,
        help: "Device authorizations issued (RFC 8628 section 3.1).",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_step_ups_total",
        kind: Kind::Counter,
        help: "Turns answered with a step-up task (a missing scope or a call beyond a limit).",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_revocations_total",
        kind: Kind::Counter,
        help: "Grant revocations this node heard of.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_rate_limited_total",
        kind: Kind::Counter,
        help: "Requests refused by a rate limit, by limit.",
        labels: &[&[("limit", "pa")], &[("limit", "user")]],
    },
    Family {
        name: "pactd_open_admission_total",
        kind: Kind::Counter,
        help: "Unregistered personal agents admitted or refused under the open policy (PACT section 3.1), by reason.",
        labels: &[
            &[("result", "admitted"), ("reason", "none")],
            &[("result", "refused"), ("reason", "issuer")],
            &[("result", "refused"), ("reason", "backing_off")],
            &[("result", "refused"), ("reason", "budget")],
            &[("result", "refused"), ("reason", "discovery")],
            &[("result", "refused"), ("reason", "token")],
            &[("result", "refused"), ("reason", "db")],
        ],
    },
    Family {
        name: "pactd_jwks_fetches_total",
        kind: Kind::Counter,
        help: "Fetches of personal agents' JWKS.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_jwks_fetch_failures_total",
        kind: Kind::Counter,
        help: "Fetches of personal agents' JWKS that failed.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_signature_checks_total",
        kind: Kind::Counter,
        help: "PA-JWT signatures accepted, by whether the memo remembered them or they were verified.",
        labels: &[&[("result", "remembered")], &[("result", "verified")]],
    },
    Family {
        name: "pactd_signature_memo_entries",
        kind: Kind::Gauge,
        help: "Signatures held in the memo of verified signatures.",
        labels: &[],
    },
    Family {
        name: "pactd_config_cache_total",
        kind: Kind::Counter,
        help: "Lookups in the node's configuration copy, by hit or miss.",
        labels: &[&[("result", "hit")], &[("result", "miss")]],
    },
    Family {
        name: "pactd_tool_effects_beyond_limit_total",
        kind: Kind::Counter,
        help: "Tool calls whose merchant declared an effect beyond the granted limit.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_db_pool_connections",
        kind: Kind::Gauge,
        help: "Connections of the main database pool, by state (open, idle, in_use).",
        labels: &[],
    },
    Family {
        name: "pactd_db_pool_max_connections",
        kind: Kind::Gauge,
        help: "The main database pool's connection limit.",
        labels: &[],
    },
    Family {
        name: "pactd_listener_connected",
        kind: Kind::Gauge,
        help: "1 while the change listener is subscribed and its heartbeat proves it, else 0.",
        labels: &[],
    },
    Family {
        name: "pactd_listener_feed_age_seconds",
        kind: Kind::Gauge,
        help: "Age of the change listener's last heartbeat proof (+Inf while nothing is proven).",
        labels: &[],
    },
    Family {
        name: "pactd_listener_failures_total",
        kind: Kind::Counter,
        help: "Ends of the change listener's connection, by reason.",
        labels: &[
            &[("reason", "connect")],
            &[("reason", "lost")],
            &[("reason", "heartbeat")],
        ],
    },
    Family {
        name: "pactd_background_job_restarts_total",
        kind: Kind::Counter,
        help: "Background jobs that stopped (returned or panicked) and were started again, by job.",
        labels: &[
            &[("task", "listener"), ("how", "returned")],
            &[("task", "listener"), ("how", "panicked")],
            &[("task", "housekeeping"), ("how", "returned")],
            &[("task", "housekeeping"), ("how", "panicked")],
            &[("task", "db_probe"), ("how", "returned")],
            &[("task", "db_probe"), ("how", "panicked")],
            &[("task", "receipt_log"), ("how", "returned")],
            &[("task", "receipt_log"), ("how", "panicked")],
            &[("task", "node_heartbeat"), ("how", "returned")],
            &[("task", "node_heartbeat"), ("how", "panicked")],
        ],
    },
    Family {
        name: "pactd_trace_export_failures_total",
        kind: Kind::Counter,
        help: "Batches of spans the OTLP collector did not take (with tracing on).",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_trace_spans_lost_total",
        kind: Kind::Counter,
        help: "Spans in the batches the OTLP collector did not take.",
        labels: NO_LABELS,
    },
    Family {
        name: "pactd_revoked_grants_known",
        kind: Kind::Gauge,
        help: "Revoked grants in the node's memory view.",
        labels: &[],
    },
];

/// Gives every family its HELP text (the exporter writes `# HELP` only for
/// described metrics, and `promtool check metrics` refuses a family without
/// one) and exports each known counter series at 0.
fn describe() {
    for f in FAMILIES {
        match f.kind {
            Kind::Counter => {
                metrics::describe_counter!(f.name, f.help);
                for labels in f.labels {
                    // `increment(0)` registers the series without moving it.
                    metrics::counter!(f.name, *labels).increment(0);
                }
            }
            Kind::Gauge => metrics::describe_gauge!(f.name, f.help),
            Kind::Histogram => metrics::describe_histogram!(f.name, f.help),
        }
    }
}

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
            describe();
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

/// A batch of `spans` the trace exporter could not send (`pactd`'s
/// `otel.rs`): counted here, where every metric is named.
pub fn trace_export_failed(spans: usize) {
    metrics::counter!("pactd_trace_export_failures_total").increment(1);
    metrics::counter!("pactd_trace_spans_lost_total")
        .increment(u64::try_from(spans).unwrap_or(u64::MAX));
}

/// Whether a recorder is installed (then requests are tracked).
pub fn enabled() -> bool {
    HANDLE.get().is_some_and(Option::is_some)
}

/// Counts each request and times it, by matched route (the route pattern,
/// never the raw path, which carries ids and codes), method and status.
pub async fn track(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let route = req.extensions().get::<MatchedPath>().cloned();
    let res = next.run(req).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    record(route, method, res.status().as_u16(), started.elapsed());
    res
}

/// The method as a label (`trace_context::known_method`); anything else is
/// `other`: named as sent, a client sending made-up methods would make a new
/// series, kept for the life of the process, with each (Prometheus,
/// "Instrumentation": no unbounded values in labels).
fn method_label(method: &Method) -> &'static str {
    pact_app::trace_context::known_method(method).unwrap_or("other")
}

/// One request series: its count and its duration histogram.
type Series = (metrics::Counter, metrics::Histogram);
/// The series by route, then by method and status.
type ByRoute = HashMap<String, HashMap<(&'static str, u16), Series>>;

thread_local! {
    /// The handles of the series this worker thread has recorded, by route,
    /// then method and status. Building a labelled key hashes and allocates
    /// its three labels, and the recorder looks it up in its registry, on
    /// every request (issue 27); a handle made once records without either.
    /// Bounded: the routes are the router's patterns, the methods
    /// [`method_label`]'s ten, the statuses at most 500 codes. Only used once
    /// the recorder is installed ([`track`] is layered only then), so no
    /// handle is bound to the no-op recorder.
    static SERIES: RefCell<ByRoute> = RefCell::new(HashMap::new());
}

fn record(route: &str, method: &'static str, status: u16, took: Duration) {
    SERIES.with_borrow_mut(|by_route| {
        let series = match by_route.get(route).and_then(|m| m.get(&(method, status))) {
            Some(found) => found,
            None => {
                let labels = [
                    ("route", route.to_owned()),
                    ("method", method.to_owned()),
                    ("status", status.to_string()),
                ];
                let made = (
                    metrics::counter!("pactd_http_requests_total", &labels),
                    metrics::histogram!("pactd_http_request_duration_seconds", &labels),
                );
                by_route
                    .entry(route.to_owned())
                    .or_default()
                    .entry((method, status))
                    .or_insert(made)
            }
        };
        series.0.increment(1);
        series.1.record(took.as_secs_f64());
    });
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
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
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
    crate::accept::accept_loop(
        listener,
        router(state, handle),
        &settings,
        trusted,
        shutdown,
    )
    .await;
    Ok(())
}
