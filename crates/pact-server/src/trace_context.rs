//! The request span and W3C Trace Context (<https://www.w3.org/TR/trace-context/>)
//! for OpenTelemetry traces.
//!
//! The `pactd` command installs the OTLP exporter when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-only variable) is set, and
//! then calls [`enable`]. Until then nothing here reads a `traceparent`,
//! writes one, or names a span: a request costs what it cost before.
//!
//! What a span may carry is decided here and nowhere else: the method, the
//! matched route pattern (never the raw path, whose segments are ids, and
//! never the query, which can carry a user code), the request id, the status.
//! Header values are never recorded.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::ConnectInfo;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::client_ip::TrustedProxies;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns trace context on for this process (called once an exporter is installed).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether spans are exported (an exporter is installed).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The span of one request (the tower-http trace layer's `make_span_with`).
///
/// A `traceparent` from the client is honoured only when the TCP peer is one
/// of the trusted proxies (`--trusted-proxies`), the same rule as for
/// `X-Forwarded-For`. From anyone else it is ignored and the request starts a
/// new trace: with the parent-based sampler a caller's `traceparent` decides
/// whether its requests are recorded at all (flags `00` would hide them from
/// the operator's traces), and it would let any caller file its requests
/// under a trace of its choosing (W3C Trace Context §8.1 leaves the choice of
/// whom to trust to the vendor).
pub fn request_span<B>(req: &Request<B>, trusted: &TrustedProxies) -> Span {
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!(
        "http",
        http.request.method = %req.method(),
        http.route = Empty,
        request_id = %request_id,
        http.response.status_code = Empty,
        trace_id = Empty,
        span_id = Empty,
        otel.name = Empty,
        otel.kind = Empty,
        otel.status_code = Empty,
    );
    if !enabled() || span.is_disabled() {
        return span;
    }
    // The kind is fixed when the OpenTelemetry span starts (below); the name
    // becomes `{method} {route}` once the router has matched (`record_route`).
    span.record("otel.kind", "server");
    span.record("otel.name", req.method().as_str());
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if peer.is_some_and(|ip| trusted.contains(ip)) {
        let parent = TraceContextPropagator::new().extract(&Headers(req.headers()));
        if parent.span().span_context().is_valid() {
            // Fails only when no OpenTelemetry layer is installed.
            let _ = span.set_parent(parent);
        }
    }
    // Starting the OpenTelemetry span gives the ids, and every log line
    // written inside the request carries them from its first one on.
    let cx = span.context();
    let otel_span = cx.span();
    let ids = otel_span.span_context();
    if ids.is_valid() {
        span.record("trace_id", tracing::field::display(ids.trace_id()));
        span.record("span_id", tracing::field::display(ids.span_id()));
    }
    span
}

/// Once the router has matched: the route pattern on the request span and
/// the span's name, `{method} {route}` (the OpenTelemetry HTTP server span
/// name; an unmatched request keeps the method alone).
pub fn record_route(span: &Span, method: &Method, route: Option<&str>) {
    let Some(route) = route else {
        return;
    };
    span.record("http.route", route);
    if enabled() && !span.is_disabled() {
        span.context()
            .span()
            .update_name(format!("{method} {route}"));
    }
}

/// The response status on the request span; a 5xx marks it failed (the
/// OpenTelemetry HTTP conventions: a 4xx is the client's error, not the server's).
pub fn record_status(span: &Span, status: StatusCode) {
    if !enabled() || span.is_disabled() {
        return;
    }
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
}

/// `traceparent` (and `tracestate`) for an outbound request made inside the
/// current span, so the receiver's spans join this trace (W3C Trace Context
/// §3). Empty when tracing is off or the span is not recorded.
pub fn outbound_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    if !enabled() {
        return headers;
    }
    let cx = Span::current().context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut HeadersMut(&mut headers));
    }
    headers
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_written_while_tracing_is_off() {
        // No exporter in unit tests: `enable` is never called here.
        assert!(!enabled());
        assert!(outbound_headers().is_empty());
    }
}
