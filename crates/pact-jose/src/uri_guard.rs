//! SSRF guard for jwksUri values: which URIs may be registered, which
//! addresses may be contacted, and a DNS resolver that enforces it.
//!
//! A jwksUri is chosen by a PA operator, and our server fetches it. Without a
//! guard, a PA registration (or a DNS record it controls) could make the
//! Provider's server call its own metadata service, admin ports or private
//! network. Checking the URI text is not enough because a public name can
//! resolve, or later re-resolve (DNS rebinding), to 127.0.0.1; so the same
//! address rules are applied again to every resolved address, in the
//! resolver that the HTTP client connects with.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

use crate::error::JwksError;

/// Longest jwksUri accepted; registration data, not a place for payloads.
const MAX_URI_LEN: usize = 2048;

/// What kind of destination an IP address is, for the SSRF guard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpClass {
    /// Globally routable as far as we know: may be contacted.
    Public,
    /// Loopback (127.0.0.0/8, ::1, and IPv4-mapped loopback): only in
    /// allow_loopback mode (tests and local development).
    Loopback,
    /// Never contacted: private, link-local, unspecified, multicast,
    /// broadcast, documentation, benchmarking, CGNAT, reserved, ULA, and
    /// IPv6 forms that embed such an IPv4 address.
    Restricted,
}

/// Classify an address. A plain function so the table of ranges can be unit
/// tested without any network.
pub fn classify_ip(ip: IpAddr) -> IpClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether an address may be contacted under the given mode.
pub fn ip_allowed(ip: IpAddr, allow_loopback: bool) -> bool {
    match classify_ip(ip) {
        IpClass::Public => true,
        IpClass::Loopback => allow_loopback,
        IpClass::Restricted => false,
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> IpClass {
    if ip.is_loopback() {
        return IpClass::Loopback;
    }
    // (network, prefix length): RFC 6890 special-purpose ranges that are not
    // globally reachable, plus multicast and the reserved class E.
    const RESTRICTED: [([u8; 4], u32); 14] = [
        ([0, 0, 0, 0], 8),       // "this network", incl. unspecified (RFC 791)
        ([10, 0, 0, 0], 8),      // private (RFC 1918)
        ([100, 64, 0, 0], 10),   // shared address space / CGNAT (RFC 6598)
        ([169, 254, 0, 0], 16),  // link-local, incl. cloud metadata (RFC 3927)
        ([172, 16, 0, 0], 12),   // private (RFC 1918)
        ([192, 0, 0, 0], 24),    // IETF protocol assignments (RFC 6890)
        ([192, 0, 2, 0], 24),    // TEST-NET-1 documentation (RFC 5737)
        ([192, 88, 99, 0], 24),  // 6to4 relay anycast (RFC 7526)
        ([192, 168, 0, 0], 16),  // private (RFC 1918)
        ([198, 18, 0, 0], 15),   // benchmarking (RFC 2544)
        ([198, 51, 100, 0], 24), // TEST-NET-2 documentation (RFC 5737)
        ([203, 0, 113, 0], 24),  // TEST-NET-3 documentation (RFC 5737)
        ([224, 0, 0, 0], 4),     // multicast (RFC 5771)
        ([240, 0, 0, 0], 4),     // reserved, incl. broadcast 255.255.255.255
    ];
    if RESTRICTED
        .iter()
        .any(|(net, prefix)| in_v4(ip, *net, *prefix))
    {
        IpClass::Restricted
    } else {
        IpClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> IpClass {
    if ip.is_loopback() {
        return IpClass::Loopback;
    }
    // IPv4-mapped (::ffff:a.b.c.d): the connection goes to the IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let seg = ip.segments();
    let bits = u128::from(ip);
    let in_v6 = |net: u128, prefix: u32| {
        let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
        bits & mask == net & mask
    };
    // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052) and 6to4 2002::/16
    // (RFC 3056) embed an IPv4 destination: judge that address.
    if in_v6(0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96) {
        let v4 = Ipv4Addr::new(
            (seg[6] >> 8) as u8,
            seg[6] as u8,
            (seg[7] >> 8) as u8,
            seg[7] as u8,
        );
        return match classify_v4(v4) {
            IpClass::Public => IpClass::Public,
            _ => IpClass::Restricted,
        };
    }
    if in_v6(0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
        let v4 = Ipv4Addr::new(
            (seg[1] >> 8) as u8,
            seg[1] as u8,
            (seg[2] >> 8) as u8,
            seg[2] as u8,
        );
        return match classify_v4(v4) {
            IpClass::Public => IpClass::Public,
            _ => IpClass::Restricted,
        };
    }
    const RESTRICTED: [(u128, u32); 10] = [
        (0, 96), // ::/96: unspecified, IPv4-compatible (deprecated)
        (0x0064_ff9b_0001_0000_0000_0000_0000_0000, 48), // local-use NAT64 (RFC 8215)
        (0x0100_0000_0000_0000_0000_0000_0000_0000, 64), // discard-only (RFC 6666)
        (0x2001_0000_0000_0000_0000_0000_0000_0000, 23), // IETF protocol assignments, incl. Teredo (RFC 2928)
        (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32), // documentation (RFC 3849)
        (0x3fff_0000_0000_0000_0000_0000_0000_0000, 20), // documentation (RFC 9637)
        (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7),  // unique local (RFC 4193)
        (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10), // link-local (RFC 4291)
        (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10), // site-local, deprecated (RFC 3879)
        (0xff00_0000_0000_0000_0000_0000_0000_0000, 8),  // multicast (RFC 4291)
    ];
    if RESTRICTED.iter().any(|(net, prefix)| in_v6(*net, *prefix)) {
        IpClass::Restricted
    } else {
        IpClass::Public
    }
}

/// `localhost` and `*.localhost` always mean loopback (RFC 6761 §6.3), so they
/// are judged as loopback without asking DNS.
fn is_localhost_name(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    host == "localhost" || host.ends_with(".localhost")
}

/// Checks an URI may be used as a jwksUri: https only, except with
/// `allow_loopback` also http to a loopback host (`http://127.0.0.1[:port]`,
/// `http://[::1]`, `http://localhost`). No userinfo, no fragment. IP-literal hosts
/// must pass [`ip_allowed`]. Used by the cache before any fetch, and by the
/// admin CLI when registering an agent (PACT §3: the jwksUri is HTTPS).
pub fn check_jwks_uri(uri: &str, allow_loopback: bool) -> Result<Url, JwksError> {
    if uri.len() > MAX_URI_LEN {
        return Err(JwksError::InvalidUri("too long"));
    }
    // The WHATWG parser is forgiving (it strips whitespace and tabs, turns
    // '\\' into '/', and reads "https:///x" as host "x"); a registered URI
    // must mean exactly what it says, so refuse anything it would rewrite.
    if uri
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
    {
        return Err(JwksError::InvalidUri("whitespace, control or backslash"));
    }
    let after_scheme = uri.split_once(':').map(|(_, rest)| rest);
    if !after_scheme.is_some_and(|rest| rest.starts_with("//") && !rest[2..].starts_with('/')) {
        return Err(JwksError::InvalidUri("not scheme://host/…"));
    }
    let url = Url::parse(uri).map_err(|_| JwksError::InvalidUri("not an absolute URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(JwksError::InvalidUri("userinfo not allowed"));
    }
    if url.fragment().is_some() {
        return Err(JwksError::InvalidUri("fragment not allowed"));
    }
    let loopback_host = match url.host() {
        None => return Err(JwksError::InvalidUri("no host")),
        Some(Host::Ipv4(v4)) => check_ip(IpAddr::V4(v4), allow_loopback)?,
        Some(Host::Ipv6(v6)) => check_ip(IpAddr::V6(v6), allow_loopback)?,
        Some(Host::Domain(name)) => {
            // The WHATWG parser lets through host code points no DNS name
            // has (`*`, `!`, `$`, ...); such a "host" names nothing anyone
            // could own. Internationalised names arrive here as `xn--`.
            if !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
            {
                return Err(JwksError::InvalidUri("the host is not a DNS name"));
            }
            if is_localhost_name(name) {
                if !allow_loopback {
                    return Err(JwksError::ForbiddenAddress);
                }
                true
            } else {
                false
            }
        }
    };
    match url.scheme() {
        "https" => {}
        "http" if allow_loopback && loopback_host => {}
        _ => return Err(JwksError::InvalidUri("scheme must be https")),
    }
    Ok(url)
}

/// Returns whether the literal is loopback, or refuses it.
fn check_ip(ip: IpAddr, allow_loopback: bool) -> Result<bool, JwksError> {
    if !ip_allowed(ip, allow_loopback) {
        return Err(JwksError::ForbiddenAddress);
    }
    Ok(classify_ip(ip) == IpClass::Loopback)
}

/// A DNS resolver for the JWKS client that refuses a name when ANY of its
/// addresses is not allowed. Refusing (rather than filtering) means a name
/// that mixes public and private addresses is treated as hostile. IP-literal
/// hosts never reach a resolver; [`check_jwks_uri`] judges those.
#[derive(Clone, Copy, Debug)]
pub struct GuardedResolver {
    allow_loopback: bool,
}

impl GuardedResolver {
    pub fn new(allow_loopback: bool) -> Self {
        Self { allow_loopback }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_loopback = self.allow_loopback;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(Box::new(JwksError::Unresolvable) as _);
            }
            if addrs.iter().any(|a| !ip_allowed(a.ip(), allow_loopback)) {
                return Err(Box::new(JwksError::ForbiddenAddress) as _);
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_classification_table() {
        let table: &[(&str, IpClass)] = &[
            ("8.8.8.8", IpClass::Public),
            ("1.1.1.1", IpClass::Public),
            ("93.184.216.34", IpClass::Public),
            ("172.15.255.255", IpClass::Public),
            ("172.32.0.1", IpClass::Public),
            ("100.63.255.255", IpClass::Public),
            ("100.128.0.0", IpClass::Public),
            ("127.0.0.1", IpClass::Loopback),
            ("127.255.255.254", IpClass::Loopback),
            ("0.0.0.0", IpClass::Restricted),
            ("0.1.2.3", IpClass::Restricted),
            ("10.0.0.1", IpClass::Restricted),
            ("172.16.0.1", IpClass::Restricted),
            ("172.31.255.255", IpClass::Restricted),
            ("192.168.1.1", IpClass::Restricted),
            ("169.254.169.254", IpClass::Restricted),
            ("100.64.0.1", IpClass::Restricted),
            ("100.127.255.255", IpClass::Restricted),
            ("192.0.0.8", IpClass::Restricted),
            ("192.0.2.1", IpClass::Restricted),
            ("198.51.100.7", IpClass::Restricted),
            ("203.0.113.9", IpClass::Restricted),
            ("198.18.0.1", IpClass::Restricted),
            ("198.19.255.255", IpClass::Restricted),
            ("224.0.0.1", IpClass::Restricted),
            ("239.255.255.250", IpClass::Restricted),
            ("240.0.0.1", IpClass::Restricted),
            ("255.255.255.255", IpClass::Restricted),
            ("2606:4700:4700::1111", IpClass::Public),
            ("2001:4860:4860::8888", IpClass::Public),
            ("::1", IpClass::Loopback),
            ("::", IpClass::Restricted),
            ("::ffff:127.0.0.1", IpClass::Loopback),
            ("::ffff:10.1.2.3", IpClass::Restricted),
            ("::ffff:192.168.0.1", IpClass::Restricted),
            ("::ffff:169.254.169.254", IpClass::Restricted),
            ("::ffff:8.8.8.8", IpClass::Public),
            ("::10.0.0.1", IpClass::Restricted),
            ("64:ff9b::10.0.0.1", IpClass::Restricted),
            ("64:ff9b::127.0.0.1", IpClass::Restricted),
            ("64:ff9b::8.8.8.8", IpClass::Public),
            ("64:ff9b:1::1", IpClass::Restricted),
            ("2002:0a00:0001::1", IpClass::Restricted),
            ("2002:0808:0808::1", IpClass::Public),
            ("fc00::1", IpClass::Restricted),
            ("fd12:3456:789a::1", IpClass::Restricted),
            ("fe80::1", IpClass::Restricted),
            ("febf::1", IpClass::Restricted),
            ("fec0::1", IpClass::Restricted),
            ("ff02::1", IpClass::Restricted),
            ("2001:db8::1", IpClass::Restricted),
            ("2001::1", IpClass::Restricted),
            ("100::1", IpClass::Restricted),
            ("3fff::1", IpClass::Restricted),
        ];
        for (text, want) in table {
            let ip: IpAddr = match text.parse() {
                Ok(ip) => ip,
                Err(e) => panic!("{text}: {e}"),
            };
            assert_eq!(classify_ip(ip), *want, "{text}");
            assert_eq!(
                ip_allowed(ip, false),
                *want == IpClass::Public,
                "{text} strict"
            );
            assert_eq!(
                ip_allowed(ip, true),
                *want != IpClass::Restricted,
                "{text} loopback mode"
            );
        }
    }

    #[test]
    fn jwks_uri_rules_strict_mode() {
        let ok = [
            "https://pa.example.com/.well-known/jwks.json",
            "https://pa.example.com:8443/jwks?v=2",
            "https://8.8.8.8/jwks.json",
            "https://[2606:4700:4700::1111]/jwks.json",
            "https://bücher.example/jwks.json",
            "https://_keys.pa.example/jwks.json",
        ];
        for uri in ok {
            assert!(check_jwks_uri(uri, false).is_ok(), "{uri}");
        }
        let refused = [
            "http://pa.example.com/jwks.json",
            "ftp://pa.example.com/jwks.json",
            "file:///etc/passwd",
            "https://user:pw@pa.example.com/jwks.json",
            "https://user@pa.example.com/jwks.json",
            "https://pa.example.com/jwks.json#frag",
            "/jwks.json",
            "https:///jwks.json",
            "https:/pa.example.com/jwks.json",
            "https:pa.example.com/jwks.json",
            "https://pa.example.com\\@127.0.0.1/jwks.json",
            " https://pa.example.com/jwks.json",
            "https://pa.exa\tmple.com/jwks.json",
            "http://127.0.0.1/jwks.json",
            "https://127.0.0.1/jwks.json",
            "https://127.1/jwks.json",
            "https://0x7f000001/jwks.json",
            "https://10.0.0.1/jwks.json",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/jwks.json",
            "https://[::ffff:10.0.0.1]/jwks.json",
            "https://[fd00::1]/jwks.json",
            "https://localhost/jwks.json",
            "https://api.localhost./jwks.json",
            "http://localhost:8080/jwks.json",
            "https://0.0.0.0/jwks.json",
            "https://pa.example*/jwks.json",
            "https://pa!.example/jwks.json",
            "https://pa$x.example/jwks.json",
        ];
        for uri in refused {
            assert!(check_jwks_uri(uri, false).is_err(), "{uri}");
        }
        let long = format!("https://pa.example.com/{}", "a".repeat(MAX_URI_LEN));
        assert!(check_jwks_uri(&long, false).is_err());
    }

    #[test]
    fn jwks_uri_rules_loopback_mode() {
        let ok = [
            "http://127.0.0.1/jwks.json",
            "http://127.0.0.1:8080/jwks.json",
            "http://[::1]:9000/jwks.json",
            "http://localhost/jwks.json",
            "https://127.0.0.1/jwks.json",
            "https://pa.example.com/jwks.json",
        ];
        for uri in ok {
            assert!(check_jwks_uri(uri, true).is_ok(), "{uri}");
        }
        let refused = [
            "http://pa.example.com/jwks.json",
            "http://10.0.0.1/jwks.json",
            "https://10.0.0.1/jwks.json",
            "https://192.168.0.10/jwks.json",
            "http://user@127.0.0.1/jwks.json",
            "http://127.0.0.1/jwks.json#x",
        ];
        for uri in refused {
            assert!(check_jwks_uri(uri, true).is_err(), "{uri}");
        }
    }

    #[tokio::test]
    async fn resolver_refuses_names_that_resolve_to_loopback() {
        let name = |s: &str| match s.parse::<Name>() {
            Ok(n) => n,
            Err(_) => panic!("bad name {s}"),
        };
        // "localhost" stands in for a rebinding name: whatever DNS says, a
        // loopback answer is refused outside allow_loopback mode.
        let strict = GuardedResolver::new(false).resolve(name("localhost")).await;
        assert!(strict.is_err());
        let relaxed = GuardedResolver::new(true).resolve(name("localhost")).await;
        match relaxed {
            Ok(addrs) => {
                let addrs: Vec<SocketAddr> = addrs.collect();
                assert!(!addrs.is_empty());
                assert!(addrs.iter().all(|a| a.ip().is_loopback()));
            }
            Err(e) => panic!("localhost did not resolve: {e}"),
        }
    }
}
