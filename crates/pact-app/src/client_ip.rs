//! The client's address, as far as we can trust it.
//!
//! Behind a reverse proxy every connection comes from the proxy, so per-address
//! limits and the consent page's "from where" would see one address for
//! everybody. `X-Forwarded-For` fixes that, but anyone can send it: it is read
//! only when the TCP peer is a configured trusted proxy, and then from the
//! right, skipping our own proxies, so a client cannot inject an address
//! ahead of the one the proxy appended (the usual rule, as in nginx's
//! `real_ip_recursive on`).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;

pub use crate::domain::proxies::TrustedProxies;
use crate::domain::proxies::canonical;
use crate::state::AppState;

/// The client address for this peer and these headers (a plain function so
/// the rule is tested without a server).
pub fn resolve(peer: IpAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    let peer = canonical(peer);
    if !trusted.contains(peer) {
        return peer;
    }
    // Every X-Forwarded-For line, in order, as one list; walk it from the right.
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Ok(ip) = hop.parse::<IpAddr>() else {
            // Garbage from an untrusted hop: stop at the last address we trust.
            break;
        };
        client = canonical(ip);
        if !trusted.contains(client) {
            break;
        }
    }
    client
}

/// The key that per-address limits use: the address, or its /64 for IPv6 (one
/// host usually holds a whole /64, so single addresses would be free to rotate).
pub fn limit_key(ip: IpAddr) -> String {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
    }
}

/// The client address of a request (extractor). Falls back to the
/// unspecified address when the server was started without connection info
/// (only in embedding tests).
#[derive(Clone, Copy, Debug)]
pub struct ClientIp(pub IpAddr);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Infallible> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
        Ok(Self(resolve(
            peer,
            &parts.headers,
            &state.config.trusted_proxies,
        )))
    }
}

impl ClientIp {
    pub fn limit_key(&self) -> String {
        limit_key(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_for_is_ignored_from_an_untrusted_peer() {
        let trusted = TrustedProxies::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            resolve(ip("198.51.100.9"), &xff(&["192.0.2.1"]), &trusted),
            ip("198.51.100.9")
        );
        let none = TrustedProxies::default();
        assert_eq!(
            resolve(ip("10.0.0.1"), &xff(&["192.0.2.1"]), &none),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1").unwrap();
        // The client put 1.2.3.4 in front itself; the proxy appended its real address.
        let h = xff(&["1.2.3.4, 192.0.2.1", "10.0.0.5"]);
        assert_eq!(resolve(ip("127.0.0.1"), &h, &trusted), ip("192.0.2.1"));
        // Garbage on the right stops the walk at the proxy.
        assert_eq!(
            resolve(ip("10.0.0.1"), &xff(&["192.0.2.1, nonsense"]), &trusted),
            ip("10.0.0.1")
        );
        // No header: the proxy itself.
        assert_eq!(
            resolve(ip("10.0.0.1"), &HeaderMap::new(), &trusted),
            ip("10.0.0.1")
        );
        // A mapped IPv4 peer counts as its IPv4 address.
        assert_eq!(
            resolve(ip("::ffff:10.0.0.1"), &xff(&["192.0.2.1"]), &trusted),
            ip("192.0.2.1")
        );
    }

    #[test]
    fn trusted_proxies_parse_networks_and_addresses() {
        assert!(TrustedProxies::parse("10.0.0.0/8,::1 192.0.2.7").is_ok());
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("proxy.example").is_err());
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }

    #[test]
    fn ipv6_callers_are_limited_per_64() {
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
        assert_eq!(
            limit_key(ip("2001:db8:1:2:aaaa::1")),
            limit_key(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_eq!(limit_key(ip("::ffff:192.0.2.7")), "192.0.2.7");
        assert_eq!(limit_key(ip("192.0.2.7")), "192.0.2.7");
    }
}
