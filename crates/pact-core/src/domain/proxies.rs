//! The proxies whose connections may tell us the client's address
//! (`--trusted-proxies`): a setting and its one rule. How the address is then
//! read from `X-Forwarded-For` is `client_ip`.

use std::net::IpAddr;

use ipnet::IpNet;

/// The networks whose connections may tell us the client address.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Self(nets)
    }

    /// Parses `10.0.0.0/8, 192.0.2.7` (an address alone is a /32 or /128).
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split([',', ' '])
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpNet>()
                    .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("not an address or network: {s:?}"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `::ffff:192.0.2.7` is `192.0.2.7`.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
