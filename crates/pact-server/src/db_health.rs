//! Whether the database answers, as this node last saw it.
//!
//! When PostgreSQL is down or refuses connections, every request would wait
//! the pool's acquire timeout and then fail. Instead, the database is marked
//! down as soon as this node has reason to know: a request met it
//! unreachable, or the change listener lost its connection or its heartbeat
//! (`listener.rs`) and a check made at once ([`reachable_now`]) failed. While
//! it is down, requests that need it get an immediate 503 with `Retry-After`
//! in their own format (A2A envelope, RFC 6749 JSON, or a page), `/readyz`
//! says so, and a probe retries every [`PROBE_EVERY`] until a query succeeds
//! again; before the node says it is back, the pools' idle connections are
//! checked and the ones the outage broke are closed.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, DbUnavailable};
use crate::oauth::OAuthFailure;
use crate::state::AppState;
use crate::web::PageError;

pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// A probe that takes longer than this counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

pub use pact_node::db_health::DbHealth;

/// Background: waits until the database is marked down (or suspected, and a
/// check at once finds it unreachable), then probes it until it answers.
pub async fn probe(state: AppState) {
    let health = &state.db_health;
    loop {
        if !health.is_down() {
            tokio::select! {
                () = health.woken() => {}
                () = health.suspected() => {
                    if !reachable_now(&state).await {
                        health.mark_down();
                    }
                }
            }
        }
        while health.is_down() {
            tokio::time::sleep(PROBE_EVERY).await;
            let ok = tokio::time::timeout(PROBE_TIMEOUT, pact_db::ping(&state.db))
                .await
                .is_ok_and(|r| r.is_ok());
            if ok {
                // Connections cut during the outage must not reach the first
                // requests after it (`pact_db::sweep_idle`).
                let closed = pact_db::sweep_idle(&state.db, PROBE_TIMEOUT).await
                    + pact_db::sweep_idle(&state.relaxed_db, PROBE_TIMEOUT).await;
                if closed > 0 {
                    tracing::info!(closed, "closed pooled connections broken by the outage");
                }
                state.db_health.mark_up();
            }
        }
    }
}

/// What one way of reaching the database said.
enum Reach {
    Yes,
    No,
    /// No verdict from this way (the other one decides).
    Unsure,
}

/// Whether the database answers now, asked two ways at once, whichever
/// answers first: a query through the pool (an idle connection that still
/// works proves it, even when the server has no room for a new one), and a
/// new connection outside the pool (a refusal or reset there is a verdict in
/// milliseconds, where the pool would retry it until its acquire timeout).
/// Neither within [`PROBE_TIMEOUT`] (a frozen network): unreachable.
pub async fn reachable_now(state: &AppState) -> bool {
    let through_pool = async {
        match pact_db::ping(&state.db).await {
            Ok(()) => Reach::Yes,
            // One broken pooled connection says little about the server.
            Err(_) => Reach::Unsure,
        }
    };
    let new_connection = async {
        match pact_db::ping_new_connection(&state.db).await {
            Ok(()) => Reach::Yes,
            // The server answered, but has no room for one more connection
            // (53300): the pool's connections may still work.
            Err(e) if e.code().as_deref() == Some("53300") => Reach::Unsure,
            Err(e) if pact_db::classify(&e) == pact_db::Failure::Unavailable => Reach::No,
            // It answered (say, refused the login): it is up.
            Err(_) => Reach::Yes,
        }
    };
    let verdict = async {
        tokio::pin!(through_pool, new_connection);
        let (mut pool_done, mut new_done) = (false, false);
        loop {
            let reach = tokio::select! {
                r = &mut through_pool, if !pool_done => { pool_done = true; r }
                r = &mut new_connection, if !new_done => { new_done = true; r }
                else => return false,
            };
            match reach {
                Reach::Yes => return true,
                Reach::No => return false,
                Reach::Unsure => {}
            }
        }
    };
    tokio::time::timeout(PROBE_TIMEOUT, verdict)
        .await
        .unwrap_or(false)
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
