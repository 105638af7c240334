//! Admission rules (PACT §3.1): the Provider's policy and a brand's
//! override, the trust tier of a stored agent, which scopes an unverified one
//! may ask for, and the issuer hosts staff block. Plain functions of their
//! inputs and `now`; the door that applies them to unknown issuers, with its
//! budget, is the `admission` module of the server.

use pact_db::agents::Agent;
use pact_db::brands::Brand;

/// The brand setting that overrides the Provider's policy.
pub const SETTING_KEY: &str = "admission";

/// An admission policy (PACT §3.1). Each admits what the one before it does,
/// and more: staff's allowlist always, the agents a trusted registry lists
/// from `registry` on, and unknown agents found by discovery under `open`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    /// Only agents staff registered (`pactd agent add`).
    #[default]
    Allowlist,
    /// Also agents a trusted registry's current signed list names
    /// (`pactd registry add`, `registry.rs`).
    Registry,
    /// Also agents found through OpenID discovery, unverified.
    Open,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowlist => "allowlist",
            Self::Registry => "registry",
            Self::Open => "open",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allowlist" => Some(Self::Allowlist),
            "registry" => Some(Self::Registry),
            "open" => Some(Self::Open),
            _ => None,
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
            .ok_or_else(|| format!("{s:?} is not an admission policy (allowlist, registry, open)"))
    }
}

/// The brand's own policy, when it set one.
pub fn brand_override(brand: &Brand) -> Option<Policy> {
    brand
        .settings
        .get(SETTING_KEY)
        .and_then(|v| v.as_str())
        .and_then(Policy::parse)
}

/// The policy in force at `brand`: its own, else the Provider's.
pub fn policy_at(provider: Policy, brand: &Brand) -> Policy {
    brand_override(brand).unwrap_or(provider)
}

/// How an agent came to be trusted (issue 31's trust tiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Registered (or verified) by staff.
    Staff,
    /// Listed by a trusted registry, until its list expires.
    Listed(time::OffsetDateTime),
    /// Let in by the `open` policy; staff have not looked at it.
    Unverified,
}

impl Tier {
    pub fn of(agent: &Agent) -> Self {
        match (agent.verified, agent.listed_until) {
            (true, Some(until)) if agent.registry.is_some() => Self::Listed(until),
            (true, _) => Self::Staff,
            (false, _) => Self::Unverified,
        }
    }

    /// The word staff see.
    pub fn label(self) -> &'static str {
        match self {
            Self::Staff => "verified",
            Self::Listed(_) => "listed",
            Self::Unverified => "unverified",
        }
    }
}

/// Whether a stored agent may talk to a brand under `policy` at `now`: an
/// enabled agent that staff trust; one a registry lists, while its list is
/// in force, where the policy is `registry` or `open`; an unverified one
/// where the policy is `open` (an agent let in by one brand's open door is
/// not let in by an allowlisting brand).
pub fn admits(policy: Policy, agent: &Agent, now: time::OffsetDateTime) -> bool {
    agent.enabled
        && match Tier::of(agent) {
            Tier::Staff => true,
            Tier::Listed(until) => policy >= Policy::Registry && until > now,
            Tier::Unverified => policy == Policy::Open,
        }
}

/// The first of `wanted` that `agent` may not request at this brand: a
/// verified agent may request every scope; an unverified one only those the
/// brand marked for it (`unverified_allowed`, issue 31's trust tiers).
pub fn scope_refused<'w>(
    agent: &Agent,
    offered: &[pact_db::scopes::BrandScope],
    wanted: impl IntoIterator<Item = &'w String>,
) -> Option<&'w String> {
    if agent.verified {
        return None;
    }
    wanted.into_iter().find(|id| {
        !offered
            .iter()
            .any(|s| &s.scope_id == *id && s.unverified_allowed)
    })
}

/// The host staff name when blocking, in the form stored: lower case, no
/// trailing dot; a URL is taken for its host. `None` when it is not a DNS
/// name or address.
pub fn normalize_host(input: &str) -> Option<String> {
    let input = input.trim();
    let host = match url::Url::parse(input) {
        Ok(url) if input.contains("://") => url.host_str()?.to_owned(),
        _ => input.to_owned(),
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let fine = !host.is_empty()
        && host.len() <= 253
        && !host.starts_with('.')
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    fine.then_some(host)
}

/// Whether an issuer's host is an IP address. Open admission takes only
/// issuers named by DNS: a host block (`block_host`) is written for names and
/// the domains above them, and people are shown the issuer's host, which an
/// address does not name. Registered and listed agents are not concerned.
/// Loopback addresses pass when the node allows loopback (development and
/// tests, `--allow-loopback-jwks`), as they do for JWKS URLs.
pub fn is_address_issuer(url: &url::Url, allow_loopback: bool) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => !(allow_loopback && ip.is_loopback()),
        Some(url::Host::Ipv6(ip)) => !(allow_loopback && ip.is_loopback()),
        Some(url::Host::Domain(_)) | None => false,
    }
}

/// Whether `host` is blocked: it, or a domain above it, is in `blocked`
/// (as the database's `pactd_host_blocked` decides).
pub fn host_blocked(blocked: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    blocked.iter().any(|b| {
        host == *b
            || host
                .strip_suffix(b.as_str())
                .is_some_and(|rest| rest.ends_with('.'))
    })
}
