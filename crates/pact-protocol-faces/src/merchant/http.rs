//! pactd's outbound calls to a merchant's agent and tools.
//!
//! The same SSRF rules as JWKS fetching (`pact_jose::check_jwks_uri` on the
//! URL text, and the guarded resolver on every connection, so a name that
//! re-resolves to a private address is refused: DNS rebinding); no redirects
//! (a 3xx could point a public URL at a private one); no proxy; per-call
//! timeouts; response bodies read chunk by chunk up to a cap.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::{Client, StatusCode, Url};
use tracing::Instrument;

use super::signing::SignedHeaders;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("URL refused by the SSRF guard: {0}")]
    Refused(String),
    #[error("timed out")]
    Timeout,
    #[error("unreachable: {0}")]
    Connect(String),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("response larger than {0} bytes")]
    TooLarge(usize),
    #[error("transport: {0}")]
    Transport(String),
}

pub use pact_node::outbound::build_client;

pub(crate) fn transport(e: reqwest::Error) -> CallError {
    if e.is_timeout() {
        CallError::Timeout
    } else if e.is_connect() {
        // The resolver's refusal surfaces as a connect error too; say which without the URL.
        let text = std::error::Error::source(&e)
            .map(ToString::to_string)
            .unwrap_or_else(|| "connection failed".to_owned());
        CallError::Connect(text)
    } else {
        CallError::Transport(e.without_url().to_string())
    }
}

/// How many checked URLs are remembered before the memo starts over (a
/// node's merchants have a handful of agent and tool URLs each).
const CHECKED_URLS: usize = 1024;

/// One memo for each value of `allow_loopback` (tests run nodes of both kinds in one process).
static CHECKED: LazyLock<Mutex<[HashMap<String, Url>; 2]>> = LazyLock::new(Mutex::default);

/// `pact_jose::check_jwks_uri` for a merchant URL, remembered: the check is
/// a function of the text alone (the addresses a name resolves to are
/// checked on every connection, by the guarded resolver), and parsing the
/// same agent and tool URLs on every call was a measurable part of a
/// webhook turn. Only URLs that passed are kept.
fn checked_url(url: &str, allow_loopback: bool) -> Result<Url, CallError> {
    let kind = usize::from(allow_loopback);
    let mut memo = CHECKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(hit) = memo[kind].get(url) {
        return Ok(hit.clone());
    }
    drop(memo);
    let checked = pact_jose::check_jwks_uri(url, allow_loopback)
        .map_err(|e| CallError::Refused(e.to_string()))?;
    memo = CHECKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if memo[kind].len() >= CHECKED_URLS {
        memo[kind].clear();
    }
    memo[kind].insert(url.to_owned(), checked.clone());
    Ok(checked)
}

/// POSTs a signed JSON body; returns the status and the response body (at
/// most `max` bytes). The whole exchange is bounded by `timeout`.
pub async fn post_signed(
    client: &Client,
    url: &str,
    allow_loopback: bool,
    body: Vec<u8>,
    signed: &SignedHeaders,
    timeout: Duration,
    max: usize,
) -> Result<(StatusCode, Vec<u8>), CallError> {
    let url = checked_url(url, allow_loopback)?;
    // The host only: a merchant may put a credential in its URL's path or query.
    let span = tracing::debug_span!(
        "merchant.call",
        otel.kind = "client",
        server.address = url.host_str().unwrap_or(""),
        http.response.status_code = tracing::field::Empty,
    );
    let exchange = async {
        let sig = HeaderValue::from_str(&signed.signature)
            .map_err(|_| CallError::Transport("bad signature header".to_owned()))?;
        let mut res = client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header("webhook-id", signed.id.as_str())
            .header("webhook-timestamp", signed.timestamp.to_string())
            .header("webhook-signature", sig)
            // W3C Trace Context: the merchant's spans join this turn's trace.
            .headers(crate::trace_context::outbound_headers())
            .body(body)
            .send()
            .await
            .map_err(transport)?;
        let status = res.status();
        tracing::Span::current().record(
            "http.response.status_code",
            crate::trace_context::status_code(status),
        );
        if res.content_length().is_some_and(|l| l > max as u64) {
            return Err(CallError::TooLarge(max));
        }
        let mut out = Vec::new();
        while let Some(chunk) = res.chunk().await.map_err(transport)? {
            if out.len() + chunk.len() > max {
                return Err(CallError::TooLarge(max));
            }
            out.extend_from_slice(&chunk);
        }
        Ok((status, out))
    };
    tokio::time::timeout(timeout, exchange.instrument(span))
        .await
        .map_err(|_| CallError::Timeout)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_memo_keeps_only_what_passed_and_each_kind_apart() {
        let loopback = "http://127.0.0.1:9/agent";
        // Remembered as allowed where loopback is allowed...
        assert!(checked_url(loopback, true).is_ok());
        assert!(checked_url(loopback, true).is_ok());
        // ...which says nothing for a node that refuses loopback.
        assert!(matches!(
            checked_url(loopback, false),
            Err(CallError::Refused(_))
        ));
        // A refusal is never remembered as a pass: asked again, refused again.
        for _ in 0..2 {
            assert!(matches!(
                checked_url("http://10.0.0.7/tool", true),
                Err(CallError::Refused(_))
            ));
        }
        let url = checked_url("https://merchant.example/tools/a?x=1", false);
        assert_eq!(
            url.ok().map(|u| u.to_string()).as_deref(),
            Some("https://merchant.example/tools/a?x=1")
        );
    }
}
