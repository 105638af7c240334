//! OpenTelemetry traces over OTLP/HTTP with protobuf bodies, configured by
//! the OpenTelemetry specification's own environment variables
//! (docs/operations.md, "Tracing").
//!
//! * Nothing is installed unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` is set: no exporter, no extra layer, no
//!   thread.
//! * Spans leave through the SDK's batch processor: a bounded queue
//!   (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048 by default; a full queue drops spans,
//!   never blocks a request) drained by its own thread, which sends with a
//!   blocking HTTP client, so export never runs on the request path.
//! * Endpoint, headers, timeout and sampler are read by the SDK as the
//!   specification defines them (the generic endpoint gets `/v1/traces`
//!   appended, the traces-only one is used as it is; the traces-only
//!   headers replace the generic ones).
//! * Database queries become spans from sqlx's own statement events
//!   ([`DbSpans`]): the SQL text with its `$n` placeholders, never the values.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use opentelemetry::KeyValue;
use opentelemetry::trace::{
    Span as _, SpanKind, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};
use tracing::dispatcher::WeakDispatch;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// How long a stop waits for the last spans to be sent.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The protocol pactd speaks (OTLP/HTTP, protobuf bodies).
const HTTP_PROTOBUF: &str = "http/protobuf";

/// Whether the environment asks for trace export; an error for settings
/// pactd cannot honour (better than silently sending nothing).
fn wanted(env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<bool> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    if let Some(exporters) = var("OTEL_TRACES_EXPORTER") {
        let list: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if list.iter().any(|e| e.eq_ignore_ascii_case("none")) {
            return Ok(false);
        }
        if let Some(other) = list.iter().find(|e| !e.eq_ignore_ascii_case("otlp")) {
            bail!(
                "OTEL_TRACES_EXPORTER={other} is not supported: pactd exports traces over OTLP only (otlp or none)"
            );
        }
    }
    if var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none()
        && var("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
    {
        return Ok(false);
    }
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(protocol) = var(name) {
            if protocol != HTTP_PROTOBUF {
                bail!(
                    "{name}={protocol} is not supported: pactd sends OTLP over HTTP with protobuf bodies ({HTTP_PROTOBUF})"
                );
            }
            // The traces-only setting wins over the generic one.
            break;
        }
    }
    Ok(true)
}

/// The exporter and its provider, when the environment asks for them.
pub fn from_env() -> anyhow::Result<Option<SdkTracerProvider>> {
    if !wanted(&|name| std::env::var(name).ok())? {
        return Ok(None);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .build()
        .context("cannot set up the OTLP trace exporter")?;
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    // OTEL_SERVICE_NAME is read by the SDK; without it the service is "pactd".
    if !std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty()) {
        resource = resource.with_service_name("pactd");
    }
    let exporter = Reporting {
        inner: exporter,
        log: std::sync::Mutex::new(LogThrottle::default()),
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_resource(resource.build())
        .build();
    Ok(Some(provider))
}

/// At most one log line per this long about failed exports.
const EXPORT_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

/// The OTLP exporter, with its failures told: a batch the collector did not
/// take (down, refusing, timing out) is lost, and the SDK says so nowhere an
/// operator looks. Each failure is counted (`pactd_trace_export_failures_total`,
/// and its spans in `pactd_trace_spans_lost_total`) and logged, at most once
/// a minute with the number of failures since the last line, so a collector
/// that is down does not flood the log (the export thread retries every
/// batch, every few seconds).
#[derive(Debug)]
struct Reporting<E> {
    inner: E,
    log: std::sync::Mutex<LogThrottle>,
}

#[derive(Debug, Default)]
struct LogThrottle {
    last: Option<std::time::Instant>,
    /// Failures not logged since the last line.
    unlogged: u64,
}

impl LogThrottle {
    /// Whether to log a failure at `now`, and how many it stands for.
    fn failed(&mut self, now: std::time::Instant) -> Option<u64> {
        self.unlogged += 1;
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < EXPORT_FAILURE_LOG_EVERY)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.unlogged))
    }
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            pact_server::telemetry::trace_export_failed(spans);
            let log = self
                .log
                .lock()
                .map(|mut t| t.failed(std::time::Instant::now()))
                .unwrap_or(None);
            if let Some(failures) = log {
                // Target `pactd::otel`: not one of the traced crates (`ours`),
                // so this line is never a span event queued behind the failure.
                tracing::warn!(
                    error = %e,
                    spans,
                    failures,
                    "trace export failed: spans lost (logged at most once a minute)"
                );
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Sends the spans still queued (bounded by [`FLUSH_TIMEOUT`]) and stops the exporter.
pub fn shutdown(provider: &SdkTracerProvider) {
    if let Err(e) = provider.shutdown_with_timeout(FLUSH_TIMEOUT) {
        tracing::warn!(error = %e, "traces not all sent at shutdown");
    }
}

/// Spans of pactd's own crates and their events from INFO up (the same
/// lines as the logs); nothing from dependencies, so the exporter's own
/// HTTP client is never traced into the queue it is draining.
fn ours(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("pact_") && (meta.is_span() || *meta.level() <= Level::INFO)
}

/// sqlx's statement events, and the spans they happen in.
fn queries(meta: &Metadata<'_>) -> bool {
    if meta.is_span() {
        return meta.target().starts_with("pact_");
    }
    meta.target() == "sqlx::query"
}

/// The layers that turn pactd's spans into OpenTelemetry spans.
pub fn layers<S>(provider: &SdkTracerProvider) -> impl Layer<S> + Send + Sync
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let tracer = provider.tracer("pactd");
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer.clone())
        // Spans find their parents through the registry, and outbound calls
        // read their span's context themselves: attaching the context on
        // every poll of every future would be cost for nothing.
        .with_context_activation(false)
        .with_filter(filter_fn(ours).with_max_level_hint(LevelFilter::DEBUG));
    let db = DbSpans {
        tracer,
        dispatch: OnceLock::new(),
    }
    .with_filter(filter_fn(queries).with_max_level_hint(LevelFilter::DEBUG));
    spans.and_then(db)
}

/// One client span per SQL statement, made from the event sqlx writes when
/// a statement finishes (target `sqlx::query`: its SQL text, rows and
/// elapsed time; bind values are never part of it), as a child of the span
/// the statement ran in. Statements outside any span (the listener, the
/// housekeeping) are not traced.
struct DbSpans {
    tracer: SdkTracer,
    dispatch: OnceLock<WeakDispatch>,
}

#[derive(Default)]
struct Statement {
    summary: String,
    text: String,
    elapsed_secs: f64,
    rows_returned: Option<u64>,
    rows_affected: Option<u64>,
}

impl Visit for Statement {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.trim().clone_into(&mut self.text),
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed_secs = value;
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "rows_returned" => self.rows_returned = Some(value),
            "rows_affected" => self.rows_affected = Some(value),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for DbSpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        let _ = self.dispatch.set(subscriber.downgrade());
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let Some(id) = ctx.event_span(event).map(|s| s.id()) else {
            return;
        };
        let Some(dispatch) = self.dispatch.get().and_then(WeakDispatch::upgrade) else {
            return;
        };
        let Some(parent) = tracing_opentelemetry::get_otel_context(&id, &dispatch) else {
            return;
        };
        if !parent.span().span_context().is_valid() {
            return;
        }
        let mut statement = Statement::default();
        event.record(&mut statement);
        #[allow(clippy::disallowed_methods)] // OpenTelemetry spans carry wall-clock timestamps
        let end = SystemTime::now();
        let start = Duration::try_from_secs_f64(statement.elapsed_secs)
            .ok()
            .and_then(|d| end.checked_sub(d))
            .unwrap_or(end);
        // sqlx gives the whole text only when it is longer than its summary.
        let text = if statement.text.is_empty() {
            statement.summary.trim_end_matches(" …").to_owned()
        } else {
            statement.text
        };
        let operation = text
            .split_whitespace()
            .next()
            .unwrap_or("query")
            .to_ascii_uppercase();
        let mut attributes = vec![
            KeyValue::new("db.system.name", "postgresql"),
            KeyValue::new("db.operation.name", operation.clone()),
            KeyValue::new("db.query.text", text),
        ];
        if let Some(rows) = statement.rows_returned {
            attributes.push(KeyValue::new(
                "db.response.returned_rows",
                i64::try_from(rows).unwrap_or(i64::MAX),
            ));
        }
        if let Some(rows) = statement.rows_affected {
            attributes.push(KeyValue::new(
                "pactd.db.rows_affected",
                i64::try_from(rows).unwrap_or(i64::MAX),
            ));
        }
        let mut span = self
            .tracer
            .span_builder(operation)
            .with_kind(SpanKind::Client)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        span.end_with_timestamp(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_failures_are_logged_at_most_once_a_minute_with_their_count() {
        let mut throttle = LogThrottle::default();
        let t0 = std::time::Instant::now();
        assert_eq!(throttle.failed(t0), Some(1));
        assert_eq!(throttle.failed(t0 + Duration::from_secs(5)), None);
        assert_eq!(throttle.failed(t0 + Duration::from_secs(30)), None);
        // The next line tells the two failures since the first one too.
        assert_eq!(throttle.failed(t0 + Duration::from_secs(61)), Some(3));
        assert_eq!(throttle.failed(t0 + Duration::from_secs(62)), None);
    }

    #[test]
    fn no_endpoint_means_no_exporter() {
        assert!(!wanted(&env_of(&[])).unwrap());
        assert!(!wanted(&env_of(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])).unwrap());
        assert!(!wanted(&env_of(&[("OTEL_SERVICE_NAME", "pactd-eu")])).unwrap());
    }

    #[test]
    fn either_endpoint_turns_export_on() {
        assert!(
            wanted(&env_of(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://collector:4318"
            )]))
            .unwrap()
        );
        assert!(
            wanted(&env_of(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://collector:4318/v1/traces"
            )]))
            .unwrap()
        );
    }

    #[test]
    fn disabled_or_none_wins_over_an_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert!(!wanted(&env_of(&[endpoint, ("OTEL_SDK_DISABLED", "true")])).unwrap());
        assert!(!wanted(&env_of(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")])).unwrap());
        assert!(wanted(&env_of(&[endpoint, ("OTEL_TRACES_EXPORTER", "otlp")])).unwrap());
    }

    #[test]
    fn settings_pactd_cannot_honour_are_refused_by_name() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        let e = wanted(&env_of(&[
            endpoint,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"), "{e}");
        let e = wanted(&env_of(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("zipkin"), "{e}");
        // The traces-only protocol wins over the generic one.
        assert!(
            wanted(&env_of(&[
                endpoint,
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]))
            .unwrap()
        );
        assert!(
            wanted(&env_of(&[
                endpoint,
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ]))
            .is_err()
        );
    }
}
