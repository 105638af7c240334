//! One HTTP fetch of a JWKS document, and how long its answer may be cached.

use std::error::Error as _;
use std::time::Duration;

use reqwest::header::{ACCEPT, CACHE_CONTROL, HeaderMap};
use reqwest::{Client, StatusCode, Url};

use crate::error::JwksError;
use crate::jwks_cache::JwksPolicy;
use crate::keys::KeySet;
use crate::uri_guard::GuardedResolver;

/// The client used for every JWKS fetch of one cache.
///
/// * no redirects: a 3xx would let a public jwksUri point us at a private
///   address after the URI check (SSRF), so it is an error like any non-200;
/// * no proxy: the guarded resolver must see the real destination;
/// * no idle pooled connections: fetches are minutes apart per URI, and a
///   kept-alive socket would outlive a DNS change the guard should see;
/// * https only unless loopback mode (PACT §3: the jwksUri is HTTPS).
pub(crate) fn build_client(policy: &JwksPolicy) -> Result<Client, JwksError> {
    crate::with_shared_tls(Client::builder())
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(policy.fetch_timeout)
        .connect_timeout(policy.fetch_timeout)
        .https_only(!policy.allow_loopback)
        .dns_resolver(GuardedResolver::new(policy.allow_loopback))
        .user_agent(concat!("pactd-jwks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(JwksError::Client)
}

/// A successfully fetched and parsed key set with its cache lifetime.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) keys: KeySet,
    pub(crate) ttl: Duration,
}

/// GET the JWKS: `Accept: application/json`, then [`fetch_document`]'s
/// limits, then the key set parsed with its cache lifetime.
pub(crate) async fn fetch_jwks(
    client: &Client,
    url: Url,
    policy: &JwksPolicy,
) -> Result<Fetched, JwksError> {
    let (headers, body) = fetch_document(
        client,
        url,
        "application/json",
        policy.max_bytes,
        policy.fetch_timeout,
    )
    .await?;
    let ttl = ttl_from_headers(&headers, policy);
    let keys = KeySet::from_json(&body)?;
    Ok(Fetched { keys, ttl })
}

/// GET one document from a remote party (a JWKS, a discovery document, a
/// registry's list): the status must be 200, the body is read chunk by chunk
/// and abandoned as soon as it exceeds `max` (a hostile endpoint cannot make
/// us buffer an unbounded body), and the whole exchange is bounded by
/// `timeout`. Returns the response headers with the body.
pub(crate) async fn fetch_document(
    client: &Client,
    url: Url,
    accept: &str,
    max: usize,
    timeout: Duration,
) -> Result<(HeaderMap, Vec<u8>), JwksError> {
    let exchange = async {
        let mut response = client
            .get(url)
            .header(ACCEPT, accept)
            .send()
            .await
            .map_err(transport_error)?;
        if response.status() != StatusCode::OK {
            return Err(JwksError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|len| len > max as u64)
        {
            return Err(JwksError::TooLarge);
        }
        let headers = response.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if body.len() + chunk.len() > max {
                return Err(JwksError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok((headers, body))
    };
    // reqwest's own timeout covers the request, this one covers everything.
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| JwksError::Timeout)?
}

/// Map a reqwest error, surfacing the guard's refusal from the resolver (it
/// travels as the source of a connect error) so logs say why.
pub(crate) fn transport_error(err: reqwest::Error) -> JwksError {
    if err.is_timeout() {
        return JwksError::Timeout;
    }
    let mut source = err.source();
    while let Some(cause) = source {
        match cause.downcast_ref::<JwksError>() {
            Some(JwksError::ForbiddenAddress) => return JwksError::ForbiddenAddress,
            Some(JwksError::Unresolvable) => return JwksError::Unresolvable,
            _ => {}
        }
        source = cause.source();
    }
    JwksError::Transport(err)
}

/// How long a fetched key set stays fresh: `Cache-Control: max-age` (RFC 9111
/// §5.2.2.1), `no-store`/`no-cache` meaning "as short as we allow", otherwise
/// the default; always clamped to [min_ttl, max_ttl]. The floor exists so a
/// PA cannot make us fetch on every request; the ceiling so rotated-out keys
/// do not live forever.
pub(crate) fn ttl_from_headers(headers: &HeaderMap, policy: &JwksPolicy) -> Duration {
    let values = headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok());
    ttl_from_cache_control(values, policy)
}

pub(crate) fn ttl_from_cache_control<'a>(
    values: impl Iterator<Item = &'a str>,
    policy: &JwksPolicy,
) -> Duration {
    let mut max_age: Option<u64> = None;
    let mut no_store = false;
    for directive in values.flat_map(|v| v.split(',')) {
        let (name, arg) = match directive.split_once('=') {
            Some((name, arg)) => (name.trim(), Some(arg.trim().trim_matches('"'))),
            None => (directive.trim(), None),
        };
        if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
            no_store = true;
        } else if name.eq_ignore_ascii_case("max-age")
            && let Some(secs) = arg.and_then(|a| a.parse::<u64>().ok())
        {
            // Conflicting max-age directives: the most conservative wins.
            max_age = Some(max_age.map_or(secs, |m| m.min(secs)));
        }
    }
    let ttl = if no_store {
        policy.min_ttl
    } else {
        max_age.map_or(policy.default_ttl, Duration::from_secs)
    };
    ttl.max(policy.min_ttl).min(policy.max_ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> JwksPolicy {
        JwksPolicy::default()
    }

    fn ttl(values: &[&str]) -> Duration {
        ttl_from_cache_control(values.iter().copied(), &policy())
    }

    #[test]
    fn cache_control_is_honoured_and_clamped() {
        assert_eq!(ttl(&[]), Duration::from_secs(600));
        assert_eq!(ttl(&["max-age=3600"]), Duration::from_secs(3600));
        assert_eq!(ttl(&["public, max-age=300"]), Duration::from_secs(300));
        assert_eq!(ttl(&["MAX-AGE = \"120\""]), Duration::from_secs(120));
        assert_eq!(ttl(&["max-age=1"]), Duration::from_secs(60));
        assert_eq!(ttl(&["max-age=0"]), Duration::from_secs(60));
        assert_eq!(ttl(&["max-age=99999999"]), Duration::from_secs(86_400));
        assert_eq!(ttl(&["no-store"]), Duration::from_secs(60));
        assert_eq!(ttl(&["max-age=3600, no-cache"]), Duration::from_secs(60));
        assert_eq!(
            ttl(&["max-age=900", "max-age=300"]),
            Duration::from_secs(300)
        );
        assert_eq!(ttl(&["max-age=banana"]), Duration::from_secs(600));
        assert_eq!(ttl(&["max-age=-5"]), Duration::from_secs(600));
    }

    /// The guarded resolver is what the client connects with: a name that
    /// resolves to loopback (as a DNS-rebinding name would) is refused before
    /// any connection, even though the URI check was bypassed here.
    #[tokio::test]
    async fn client_refuses_a_name_resolving_to_loopback() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let policy = JwksPolicy::default();
        let client = build_client(&policy).expect("client");
        let url = Url::parse(&format!("https://localhost:{port}/jwks.json")).expect("url");
        let got = fetch_jwks(&client, url, &policy).await;
        assert!(matches!(got, Err(JwksError::ForbiddenAddress)), "{got:?}");
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a connection was made"
        );
    }
}
