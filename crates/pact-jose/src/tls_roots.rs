//! The system's trust roots, loaded once per process.
//!
//! A reqwest client on the native-tls backend builds its own OpenSSL context
//! when it is built, and that parses the whole CA bundle: with OpenSSL 3 about
//! 40 ms of CPU for Debian's 140 roots, whatever the client is for. pactd
//! builds clients per JWKS cache, per merchant endpoint and per logo fetch, and
//! a test builds one per simulated browser, so the parse dominated what those
//! cost. One connector built on first use and cloned (a reference-counted
//! `SSL_CTX`) serves every client with the same roots and the same defaults
//! (certificate and host name verification on, SNI on) that reqwest's own
//! native-tls setup uses.

use std::sync::OnceLock;

static CONNECTOR: OnceLock<Option<native_tls::TlsConnector>> = OnceLock::new();

/// `builder` set to use the process's shared TLS connector. When that cannot
/// be built (no usable OpenSSL), the builder is returned unchanged and reqwest
/// reports the same failure from `build()` as it always did.
pub fn with_shared_tls(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    match CONNECTOR.get_or_init(|| native_tls::TlsConnector::new().ok()) {
        Some(connector) => builder.tls_backend_preconfigured(connector.clone()),
        None => builder,
    }
}

#[cfg(test)]
mod tests {
    use super::with_shared_tls;

    #[test]
    fn clients_built_with_the_shared_connector_work_and_share_it() {
        let a = with_shared_tls(reqwest::Client::builder()).build();
        let b = with_shared_tls(reqwest::Client::builder()).build();
        assert!(a.is_ok() && b.is_ok());
        assert!(super::CONNECTOR.get().is_some_and(Option::is_some));
    }
}
