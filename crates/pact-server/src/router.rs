//! The one route table of pactd.
//!
//! Routing is decided here, before any authentication: a path that is not a
//! PACT operation is a bare 404 and a wrong method a bare 405 for everyone
//! (PACT §4, last row). Authentication happens in the handlers' `Caller`
//! extractor, which runs before the body is read.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, StatusCode, header};
use axum::routing::{get, post};
use pact_proto::a2a::DELEGATION_HEADER;
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::{DefaultOnResponse, OnResponse, TraceLayer};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::a2a::{card, jsonrpc, send, tasks};
use crate::merchant::gateway;
use crate::oauth::{device_authorization, metadata, revoke, token};
use crate::state::AppState;
use crate::web;
use crate::{db_health, health, trace_context};

pub fn router(state: AppState) -> Router {
    let request_id = HeaderName::from_static("x-request-id");
    let config = &state.config;
    let trusted = config.trusted_proxies.clone();
    let layers = ServiceBuilder::new()
        // Headers that carry credentials: marked sensitive so no layer logs them.
        .layer(SetSensitiveRequestHeadersLayer::new([
            header::AUTHORIZATION,
            header::COOKIE,
            HeaderName::from_static(DELEGATION_HEADER),
        ]))
        // A client's request id is kept only when it is a short plain token.
        .layer(axum::middleware::map_request(
            trace_context::drop_unfit_request_id,
        ))
        .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
        .layer(
            TraceLayer::new_for_http()
                // Method, route pattern and request id only: the raw path
                // carries ids and the query can carry user codes.
                .make_span_with(move |req: &axum::http::Request<_>| {
                    trace_context::request_span(req, &trusted)
                })
                .on_response(RecordStatus),
        )
        .layer(PropagateRequestIdLayer::new(request_id));
    let request_timeout = config.request_timeout;
    let body_limit = config.body_limit;

    let app = Router::new()
        // what this server is (web/home.rs)
        .route("/", get(web::home::home))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/static/style.css", get(web::assets::style))
        .route("/static/webauthn.js", get(web::assets::webauthn_js))
        .route("/static/codes.js", get(web::assets::codes_js))
        // web: logos and brand accents from our own origin (web/logos.rs)
        .route("/logos/{name}", get(web::logos::logo))
        .route("/theme/{file}", get(web::logos::theme))
        // web: sign-in, second factors, TOTP enrolment, recovery codes (web/login.rs, web/mfa.rs)
        .route(
            "/login",
            get(web::login::get_login).post(web::login::post_login),
        )
        .route(
            "/login/second-factor",
            get(web::login::get_second_factor).post(web::login::post_second_factor),
        )
        .route("/logout", post(web::login::post_logout))
        // web: "Forgot your password?" by email (web/password_reset.rs)
        .route(
            "/login/forgot",
            get(web::password_reset::get_forgot).post(web::password_reset::post_forgot),
        )
        .route(
            "/login/reset",
            get(web::password_reset::get_reset).post(web::password_reset::post_reset),
        )
        .route(
            "/account/totp",
            get(web::mfa::get_totp).post(web::mfa::post_totp),
        )
        .route(
            "/account/recovery-codes",
            post(web::mfa::post_recovery_codes),
        )
        // web: device pages, consent, brand login assertions (web/device.rs, web/brand_login.rs)
        .route(
            "/device",
            get(web::device::entry).post(web::device::confirm),
        )
        .route(
            "/device/consent",
            get(web::device::show).post(web::device::decide),
        )
        .route("/device/done", get(web::device::done))
        // the language switch on every page (web/i18n.rs)
        .route("/lang/{code}", get(web::i18n::switch))
        .route("/device/not-you", post(web::device::not_you))
        .route("/device/assertion", post(web::brand_login::assertion))
        // web: sign-in through a brand's OpenID provider (web/oidc_login.rs)
        .route("/oidc/{brand}/callback", get(web::oidc_login::callback))
        .route(
            "/oidc/{brand}/backchannel-logout",
            post(web::oidc_login::backchannel_logout),
        )
        // web: connected agents, passkeys (web/account.rs, web/passkeys.rs)
        .route("/account", get(web::account::page))
        .route(
            "/account/grants/{id}/revoke",
            get(web::account::confirm_revoke).post(web::account::revoke),
        )
        .route(
            "/account/delete",
            get(web::account_delete::confirm).post(web::account_delete::delete),
        )
        .route("/account/passkeys/{id}/delete", post(web::passkeys::delete))
        .route(
            "/account/sessions/sign-out-others",
            post(web::account::sign_out_others),
        )
        .route(
            "/passkeys/register/start",
            post(web::passkeys::register_start),
        )
        .route(
            "/passkeys/register/finish",
            post(web::passkeys::register_finish),
        )
        .route("/passkeys/login/start", post(web::passkeys::login_start))
        .route("/passkeys/login/finish", post(web::passkeys::login_finish))
        // PACT §2
        .route(
            "/a2a/{brand}/.well-known/agent-card.json",
            get(card::get_card),
        )
        // PACT §4, the eight operation rows
        .route("/a2a/{brand}/message:send", post(send::send_message))
        .route("/a2a/{brand}/message:stream", post(tasks::unsupported))
        // The same operations over A2A 1.0's JSON-RPC binding (A2A §9)
        .route("/a2a/{brand}/jsonrpc", post(jsonrpc::handle))
        .route("/a2a/{brand}/tasks", get(tasks::list_tasks))
        .route(
            "/a2a/{brand}/tasks/{segment}",
            get(tasks::task_by_id).post(tasks::task_by_id),
        )
        .route("/a2a/{brand}/extendedAgentCard", get(tasks::unsupported))
        .route(
            "/a2a/{brand}/tasks/{id}/pushNotificationConfigs",
            get(tasks::push_not_supported).post(tasks::push_not_supported),
        )
        .route(
            "/a2a/{brand}/tasks/{id}/pushNotificationConfigs/{config_id}",
            get(tasks::push_not_supported).delete(tasks::push_not_supported),
        )
        // PACT §1, §5: the brand's OAuth authorization server
        .route(
            "/a2a/{brand}/oauth/.well-known/oauth-authorization-server",
            get(metadata::metadata),
        )
        .route("/a2a/{brand}/oauth/jwks.json", get(metadata::jwks))
        .route(
            "/a2a/{brand}/oauth/receipt-keys.json",
            get(metadata::receipt_keys),
        )
        .route(
            "/a2a/{brand}/oauth/device_authorization",
            post(device_authorization::device_authorization),
        )
        .route("/a2a/{brand}/oauth/token", post(token::token))
        .route("/a2a/{brand}/oauth/revoke", post(revoke::revoke))
        // RFC 7662, for the brand's own resource servers (oauth/introspect.rs)
        .route(
            "/a2a/{brand}/oauth/introspect",
            post(crate::oauth::introspect::introspect),
        )
        // the merchant's agent acting during a turn (merchant/gateway.rs)
        .route(
            "/a2a/{brand}/turns/{turn}/tools/{tool}",
            post(gateway::call_tool),
        )
        // the same gateway over MCP Streamable HTTP (merchant/mcp.rs)
        .route(
            "/a2a/{brand}/turns/{turn}/mcp",
            post(crate::merchant::mcp::post)
                .get(crate::merchant::mcp::get_not_offered)
                .delete(crate::merchant::mcp::delete),
        )
        // one MCP session for all of a brand's turns (merchant/mcp.rs)
        .route(
            "/a2a/{brand}/mcp",
            post(crate::merchant::mcp::post_brand)
                .get(crate::merchant::mcp::brand_not_offered)
                .delete(crate::merchant::mcp::brand_not_offered),
        )
        // the receipt log: signed tree heads and proofs, public (receipt_log.rs)
        .route("/receipts/tree-head", get(crate::receipt_log::tree_head))
        .route(
            "/receipts/proof/inclusion",
            get(crate::receipt_log::inclusion),
        )
        .route(
            "/receipts/proof/consistency",
            get(crate::receipt_log::consistency),
        )
        // the staff's admin API and console (admin/)
        .merge(crate::admin::routes(&state))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.node.clone(),
            db_health::guard,
        ))
        .layer(axum::middleware::from_fn(refuse_control_bytes_in_path))
        // the body limit, read by the body extractors after authentication,
        // answered in each protocol's format (body_limit.rs)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::from_fn_with_state(
            body_limit,
            crate::body_limit::in_format,
        ))
        // the request timeout, answered in each protocol's format
        // (request_timeout.rs): inside the language scope, so a page says it
        // in the person's language, and inside the metrics layer, so a cut
        // request is counted with its 503
        .layer(axum::middleware::from_fn_with_state(
            request_timeout,
            crate::request_timeout::bound,
        ))
        // the person's language for every page and page error (web/i18n.rs)
        .layer(axum::middleware::from_fn_with_state(
            state.node.clone(),
            web::i18n::scope,
        ))
        .layer(axum::middleware::from_fn(web::security::headers));
    // Only with a metrics recorder: otherwise there is nothing to record into.
    let app = if crate::telemetry::enabled() {
        app.layer(axum::middleware::from_fn(crate::telemetry::track))
    } else {
        app
    };
    app.layer(layers).with_state(state)
}

/// tower-http's own response event (at DEBUG), then the status on the span.
#[derive(Clone, Copy)]
struct RecordStatus;

impl<B> OnResponse<B> for RecordStatus {
    fn on_response(
        self,
        res: &axum::http::Response<B>,
        latency: std::time::Duration,
        span: &tracing::Span,
    ) {
        DefaultOnResponse::default().on_response(res, latency, span);
        trace_context::record_status(span, res.status());
    }
}

/// PACT §4: an unmatched A2A or OAuth path is a bare 404 with no body; any
/// other path is a person's browser, which gets a page saying so.
async fn not_found(uri: axum::http::Uri) -> Response {
    let path = uri.path();
    if path == "/a2a" || path.starts_with("/a2a/") || path.starts_with("/.well-known/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    web::PageError::NotFound(web::i18n::t("err-no-such-page")).into_response()
}

/// No PACT path, brand id or page path contains a control character once
/// percent-decoded (`%00` would otherwise reach PostgreSQL, which refuses
/// NUL in text): such a path names nothing we serve, so it is the bare 404
/// of an unmatched route (PACT §4, last row), before anything else runs.
///
/// Running after routing and before anything that reads the database, it
/// also names the request span by the matched route
/// (`trace_context::record_route`).
async fn refuse_control_bytes_in_path(req: Request, next: Next) -> Response {
    trace_context::record_route(
        &tracing::Span::current(),
        req.method(),
        req.extensions()
            .get::<axum::extract::MatchedPath>()
            .map(axum::extract::MatchedPath::as_str),
    );
    let path = req.uri().path();
    if percent_decode(path.as_bytes())
        .into_iter()
        .any(|b| b < 0x20 || b == 0x7f)
    {
        // The admin API answers in its own JSON error shape, even here.
        if path.starts_with(crate::admin::api::PREFIX) {
            return crate::admin::api::error::AdminApiError::NotFound.into_response();
        }
        return StatusCode::NOT_FOUND.into_response();
    }
    next.run(req).await
}

/// The bytes of a percent-encoded path (invalid escapes are kept as they are).
fn percent_decode(input: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%'
            && let (Some(h), Some(l)) = (
                input.get(i + 1).copied().and_then(hex),
                input.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn percent_decoding_finds_hidden_control_bytes() {
        assert_eq!(percent_decode(b"/a2a/de%00mo"), b"/a2a/de\0mo");
        assert_eq!(percent_decode(b"/a%2Fb%zz%4"), b"/a/b%zz%4");
        assert_eq!(percent_decode(b"%0a%7F"), b"\n\x7f");
    }
}
