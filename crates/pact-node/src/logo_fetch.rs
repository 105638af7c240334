//! Fetching a personal-agent platform's logo (RFC 7591 §2 `logo_uri`) for
//! pactd to serve from its own origin.
//!
//! The consent page must never make the person's browser contact the
//! platform (it would learn who is deciding, and when), so pactd fetches the
//! image itself. That makes the `logo_uri` a URL chosen by a PA operator that
//! our server fetches: the same SSRF rules as a jwksUri apply (the URI check
//! and the guarded resolver of `pact-jose/src/uri_guard.rs`, no redirects, no
//! proxy), plus
//! a size cap, a timeout, and a content check by magic bytes: only raster
//! PNG, JPEG, GIF and WebP are kept. SVG is refused because it is a document
//! that can carry script and external references, not an image we can serve
//! blindly.

use std::error::Error as _;
use std::time::Duration;

use reqwest::header::ACCEPT;
use reqwest::{Client, StatusCode};

use pact_jose::{GuardedResolver, JwksError, check_jwks_uri};

/// The largest logo kept: a consent-page icon, not a photo.
pub const MAX_LOGO_BYTES: usize = 256 * 1024;

/// How long one logo fetch may take, connection included.
pub const LOGO_FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a logo was not accepted. Carries no body text from the remote side.
#[derive(Debug, thiserror::Error)]
pub enum LogoError {
    /// The URI is refused by the rules of a jwksUri (https, no userinfo…).
    #[error("invalid URI: {0}")]
    InvalidUri(&'static str),
    /// The host is, or resolves to, an address we refuse to contact (SSRF guard).
    #[error("the host is a forbidden address")]
    ForbiddenAddress,
    #[error("the host did not resolve")]
    Unresolvable,
    /// Anything but 200, redirects included (a 3xx could point at a private
    /// address after the URI check).
    #[error("the server answered HTTP {0} (redirects are not followed)")]
    Status(u16),
    #[error("larger than {MAX_LOGO_BYTES} bytes")]
    TooLarge,
    #[error("not a PNG, JPEG, GIF or WebP image (SVG and HTML are refused)")]
    NotAnImage,
    #[error("timed out")]
    Timeout,
    #[error("transport error: {0}")]
    Transport(reqwest::Error),
}

impl LogoError {
    /// The URI guard's verdict, worded for a logo rather than a jwksUri.
    pub fn from_guard(e: JwksError) -> Self {
        match e {
            JwksError::InvalidUri(why) => Self::InvalidUri(why),
            JwksError::Unresolvable => Self::Unresolvable,
            _ => Self::ForbiddenAddress,
        }
    }
}

/// A fetched logo: its type as sniffed from the bytes, never as declared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logo {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// The image type of `bytes` by its signature, for the four raster formats a
/// browser shows without scripting. Anything else (SVG, HTML, truncated
/// files) is `None`.
pub fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Fetches `uri` under the SSRF guard. `allow_loopback` as for the JWKS
/// cache (tests and local development only).
/// Traced as a `logo.fetch` span with no fields: the URI is not recorded.
#[tracing::instrument(name = "logo.fetch", level = "debug", skip_all)]
pub async fn fetch_logo(uri: &str, allow_loopback: bool) -> Result<Logo, LogoError> {
    let url = check_jwks_uri(uri, allow_loopback).map_err(LogoError::from_guard)?;
    let client = pact_jose::with_shared_tls(Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(LOGO_FETCH_TIMEOUT)
        .connect_timeout(LOGO_FETCH_TIMEOUT)
        .https_only(!allow_loopback)
        .dns_resolver(GuardedResolver::new(allow_loopback))
        .user_agent(concat!("pactd-logo/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(LogoError::Transport)?;
    let exchange = async {
        let mut response = client
            .get(url)
            .header(ACCEPT, "image/png, image/jpeg, image/webp, image/gif")
            .send()
            .await
            .map_err(transport_error)?;
        if response.status() != StatusCode::OK {
            return Err(LogoError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|len| len > MAX_LOGO_BYTES as u64)
        {
            return Err(LogoError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if body.len() + chunk.len() > MAX_LOGO_BYTES {
                return Err(LogoError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        let content_type = sniff_image(&body).ok_or(LogoError::NotAnImage)?;
        Ok(Logo {
            content_type,
            bytes: body,
        })
    };
    tokio::time::timeout(LOGO_FETCH_TIMEOUT, exchange)
        .await
        .map_err(|_| LogoError::Timeout)?
}

fn transport_error(err: reqwest::Error) -> LogoError {
    if err.is_timeout() {
        return LogoError::Timeout;
    }
    let mut source = err.source();
    while let Some(cause) = source {
        match cause.downcast_ref::<JwksError>() {
            Some(JwksError::ForbiddenAddress) => return LogoError::ForbiddenAddress,
            Some(JwksError::Unresolvable) => return LogoError::Unresolvable,
            _ => {}
        }
        source = cause.source();
    }
    LogoError::Transport(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_raster_signatures_are_images() {
        assert_eq!(sniff_image(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff_image(&[0xff, 0xd8, 0xff, 0xe0]), Some("image/jpeg"));
        assert_eq!(sniff_image(b"GIF89a...."), Some("image/gif"));
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(
            sniff_image(b"<svg xmlns='http://www.w3.org/2000/svg'/>"),
            None
        );
        assert_eq!(sniff_image(b"<?xml version='1.0'?><svg/>"), None);
        assert_eq!(sniff_image(b"<!doctype html><p>hi"), None);
        assert_eq!(sniff_image(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(sniff_image(b""), None);
    }
}
