//! Whether the database answers, as this node last saw it.
//!
//! When PostgreSQL is down or refuses connections, every request would wait
//! the pool's acquire timeout and then fail. Instead, the first failure marks
//! the database down; while it is down, requests that need it get an
//! immediate 503 with `Retry-After` in their own format (A2A envelope, RFC
//! 6749 JSON, or a page), `/readyz` says so, and a probe retries every
//! [`PROBE_EVERY`] until a query succeeds again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

use crate::error::{ApiError, DbUnavailable};
use crate::oauth::OAuthFailure;
use crate::state::AppState;
use crate::web::PageError;

pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// A probe that takes longer than this counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub struct DbHealth {
    down: AtomicBool,
    wake: Notify,
}

impl DbHealth {
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// A request met an unreachable database.
    pub fn mark_down(&self) {
        if !self.down.swap(true, Ordering::AcqRel) {
            tracing::warn!("database unreachable: answering 503 until it is back");
            self.wake.notify_one();
        }
    }

    fn mark_up(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            tracing::info!("database reachable again");
        }
    }
}

/// Background: waits until the database is marked down, then probes it until
/// it answers.
pub async fn probe(state: AppState) {
    loop {
        if !state.db_health.is_down() {
            state.db_health.wake.notified().await;
        }
        while state.db_health.is_down() {
            tokio::time::sleep(PROBE_EVERY).await;
            let ok = tokio::time::timeout(PROBE_TIMEOUT, pact_db::ping(&state.db))
                .await
                .is_ok_and(|r| r.is_ok());
            if ok {
                state.db_health.mark_up();
            }
        }
    }
}

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
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let family = family(req.uri().path());
    if family != Family::Free && state.db_health.is_down() {
        return unavailable_response(family);
    }
    let res = next.run(req).await;
    if res.status() == StatusCode::SERVICE_UNAVAILABLE
        && res.extensions().get::<DbUnavailable>().is_some()
    {
        state.db_health.mark_down();
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
