//! Whether the database answers, as this node last saw it.
//!
//! When PostgreSQL is down or refuses connections, every request would wait
//! the pool's acquire timeout and then fail. Instead, the database is marked
//! down as soon as this node has reason to know: a request met it
//! unreachable, or the change listener lost its connection or its heartbeat
//! (`listener.rs`) and a check made at once (`pact_node::db_health::reachable_now`) failed. While
//! it is down, requests that need it get an immediate 503 with `Retry-After`
//! in their own format (A2A envelope, RFC 6749 JSON, or a page), `/readyz`
//! says so, and a probe retries every [`PROBE_EVERY`] until a query succeeds
//! again; before the node says it is back, the pools' idle connections are
//! checked and the ones the outage broke are closed.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pact_node::node::Node;

use crate::error::{ApiError, DbUnavailable};
use crate::oauth::OAuthFailure;
use crate::web::PageError;

pub use pact_node::db_health::{DbHealth, PROBE_EVERY, probe};

/// Which wire format a path answers errors in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Needs no database: `/healthz`, `/readyz` (which checks by itself), assets.
    Free,
    /// `{iface}/oauth/...`: RFC 6749 JSON.
    OAuth,
    /// Every other `/a2a/...` path: the A2A envelope.
    A2a,
    /// The browser pages.
    Page,
}

pub fn family(path: &str) -> Family {
    if matches!(path, "/healthz" | "/readyz") || path.starts_with("/static/") {
        return Family::Free;
    }
    match path.strip_prefix("/a2a/") {
        Some(rest) => match rest.split_once('/') {
            Some((_, op)) if op == "oauth" || op.starts_with("oauth/") => Family::OAuth,
            _ => Family::A2a,
        },
        None => Family::Page,
    }
}

/// The 503 of a family, for when the database is known to be down.
pub fn unavailable_response(family: Family) -> Response {
    match family {
        Family::OAuth => OAuthFailure::Api(ApiError::Unavailable).into_response(),
        Family::A2a => ApiError::Unavailable.into_response(),
        Family::Page | Family::Free => PageError::Unavailable.into_response(),
    }
}

/// Fails fast while the database is known to be down, and learns from
/// responses that met it down.
pub async fn guard(State(node): State<Node>, req: Request, next: Next) -> Response {
    let family = family(req.uri().path());
    if family != Family::Free && node.db_health.is_down() {
        return unavailable_response(family);
    }
    let res = next.run(req).await;
    if res.status() == StatusCode::SERVICE_UNAVAILABLE
        && res.extensions().get::<DbUnavailable>().is_some()
    {
        node.db_health.mark_down();
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_answer_in_their_own_format() {
        assert_eq!(family("/healthz"), Family::Free);
        assert_eq!(family("/static/style.css"), Family::Free);
        assert_eq!(family("/a2a/demo/oauth/token"), Family::OAuth);
        assert_eq!(
            family("/a2a/demo/oauth/.well-known/oauth-authorization-server"),
            Family::OAuth
        );
        assert_eq!(family("/a2a/demo/message:send"), Family::A2a);
        assert_eq!(family("/a2a/demo/.well-known/agent-card.json"), Family::A2a);
        assert_eq!(family("/a2a/oauth"), Family::A2a);
        assert_eq!(family("/device"), Family::Page);
        assert_eq!(family("/login"), Family::Page);
    }

    #[test]
    fn every_family_answers_503_with_retry_after() {
        for f in [Family::OAuth, Family::A2a, Family::Page] {
            let res = unavailable_response(f);
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{f:?}");
            assert!(res.headers().contains_key("retry-after"), "{f:?}");
        }
    }
}
