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

use crate::domain::proxies::TrustedProxies;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns trace context on for this process (called once an exporter is installed).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether spans are exported (an exporter is installed).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// A request's method as telemetry names it: HTTP's own methods (RFC 9110
/// §9.3, and PATCH, RFC 5789) by name, anything else `None`. The client
/// chooses the method, so a made-up one must not become a metric label or a
/// span name, each value of which is kept apart: the OpenTelemetry HTTP
/// conventions say `_OTHER` and a span named `HTTP`, the metrics `other`.
pub fn known_method(method: &Method) -> Option<&'static str> {
    Some(match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => return None,
    })
}

/// The longest `X-Request-Id` kept from a client.
const MAX_REQUEST_ID: usize = 128;

/// Whether a client's `X-Request-Id` may be kept as the request's id: it is
/// echoed in the answer, written into every log line of the request and
/// passed to the merchant's agent, so only a short token of letters,
/// digits and `-._:` is (a UUID, a ULID, a load balancer's id). Anything
/// else (a line of forged log fields, 400 KB of text) is replaced by an id
/// of our own.
pub fn keeps_request_id(value: &[u8]) -> bool {
    !value.is_empty()
        && value.len() <= MAX_REQUEST_ID
        && value
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
}

/// Drops a client's `X-Request-Id` that [`keeps_request_id`] refuses, before
/// the request id layer, which then gives the request a new one.
pub async fn drop_unfit_request_id(
    mut req: Request<axum::body::Body>,
) -> Request<axum::body::Body> {
    if req
        .headers()
        .get("x-request-id")
        .is_some_and(|v| !keeps_request_id(v.as_bytes()))
        || req.headers().get_all("x-request-id").iter().count() > 1
    {
        req.headers_mut().remove("x-request-id");
    }
    req
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
///
/// A request to a turn's tool gateway or MCP endpoint (`…/turns/{turn}/…`)
/// is the exception: its caller proves who it is with the turn token, and
/// its span starts only once the token is checked
/// ([`start_turn_call_span`]), so that the merchant's `traceparent` can be
/// its parent.
pub fn request_span<B>(req: &Request<B>, trusted: &TrustedProxies) -> Span {
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let span = tracing::info_span!(
        "http",
        http.request.method = known_method(req.method()).unwrap_or("_OTHER"),
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
    span.record("otel.name", known_method(req.method()).unwrap_or("HTTP"));
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
    if is_turn_call(req.uri().path()) {
        // Started once the turn token is checked (`start_turn_call_span`).
        return span;
    }
    record_ids(&span);
    span
}

/// `/a2a/{brand}/turns/{turn}/…`: the gateway and MCP routes of a turn; and
/// `/a2a/{brand}/mcp`, the brand's shared MCP endpoint, whose every request
/// carries a turn token too.
fn is_turn_call(path: &str) -> bool {
    let mut segments = path.split('/');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some(""), Some("a2a"), Some(_), Some("turns")) => true,
        (Some(""), Some("a2a"), Some(_), Some("mcp")) => segments.next().is_none(),
        _ => false,
    }
}

/// Starts the OpenTelemetry span of `span`, which gives it its ids, and
/// records them, so every log line written inside the request carries them
/// from then on.
fn record_ids(span: &Span) {
    let cx = span.context();
    let otel_span = cx.span();
    let ids = otel_span.span_context();
    if ids.is_valid() {
        span.record("trace_id", tracing::field::display(ids.trace_id()));
        span.record("span_id", tracing::field::display(ids.span_id()));
    }
}

/// For a turn's gateway or MCP request (`merchant/live_turns.rs`): with
/// `Some(headers)` once its turn token is proven, the caller's `traceparent`
/// (W3C Trace Context §3.2) becomes the request span's parent; then the span
/// starts. The turn token proves the caller is the merchant's agent acting in
/// a turn pactd called it for, with the `traceparent` pactd sent it: the
/// trust the trusted-proxy list gives a proxy's `traceparent`, for this
/// request only, and without believing its `X-Forwarded-For` (issue 33,
/// item 4). `None` (the token was refused): the span starts as it was.
pub fn start_turn_call_span(headers: Option<&HeaderMap>) {
    if !enabled() {
        return;
    }
    let span = Span::current();
    if span.is_disabled() {
        return;
    }
    if let Some(headers) = headers {
        let parent = TraceContextPropagator::new().extract(&Headers(headers));
        if parent.span().span_context().is_valid()
            && let Err(e) = span.set_parent(parent)
        {
            // Already started (a second call): it keeps its parent.
            tracing::debug!(error = %e, "the caller's traceparent was not adopted");
        }
    }
    record_ids(&span);
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
        let name = format!("{} {route}", known_method(method).unwrap_or("HTTP"));
        if is_turn_call(route) {
            // Not started yet, and it must wait for its parent: named
            // through the field, which names it when it starts.
            span.record("otel.name", name.as_str());
        } else {
            // Started already: the field would no longer rename it.
            span.context().span().update_name(name);
        }
    }
}

/// The response status on the request span; a 5xx marks it failed (the
/// OpenTelemetry HTTP conventions: a 4xx is the client's error, not the server's).
pub fn record_status(span: &Span, status: StatusCode) {
    if !enabled() || span.is_disabled() {
        return;
    }
    span.record("http.response.status_code", status_code(status));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
}

/// `http.response.status_code` as the OpenTelemetry HTTP semantic
/// conventions type it: an int. Recorded as a `u16` (or `u64`), the
/// tracing-opentelemetry layer exported it as the string "200": its attribute
/// visitor takes `i64` as an int and anything unsigned through `Debug`.
pub fn status_code(status: StatusCode) -> i64 {
    i64::from(status.as_u16())
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
    fn only_http_methods_are_named() {
        assert_eq!(known_method(&Method::GET), Some("GET"));
        assert_eq!(known_method(&Method::PATCH), Some("PATCH"));
        for made_up in ["BREW", "get", "PROPFIND"] {
            assert_eq!(
                known_method(&Method::from_bytes(made_up.as_bytes()).unwrap()),
                None
            );
        }
    }

    #[test]
    fn turn_calls_are_the_gateway_and_mcp_routes() {
        assert!(is_turn_call("/a2a/shop/turns/0b5e/tools/lookup_orders"));
        assert!(is_turn_call("/a2a/shop/turns/0b5e/mcp"));
        assert!(is_turn_call("/a2a/shop/mcp"));
        assert!(!is_turn_call("/a2a/shop/mcp/x"));
        assert!(!is_turn_call("/a2a/shop/message:send"));
        assert!(!is_turn_call("/a2a/turns"));
        assert!(!is_turn_call("/x/a2a/shop/turns/1"));
    }

    #[test]
    fn nothing_is_written_while_tracing_is_off() {
        // No exporter in unit tests: `enable` is never called here.
        assert!(!enabled());
        assert!(outbound_headers().is_empty());
    }
}
