//! PACT §3.1 (admission): whether a Provider admits only the personal
//! agents it allowlisted, or any whose `iss` serves a JWKS, is its policy;
//! either way it verifies §3.2 in full, so an `iss` that is not https is
//! refused, and an open Provider finds the keys through OpenID discovery at
//! `{iss}/.well-known/openid-configuration`.
//!
//! Both checks act as an agent nobody registered: a fresh key, whose
//! discovery document and JWKS this run serves itself, so a Provider that
//! reaches the issuer finds keys the PA-JWT verifies against and the only
//! thing it can object to is what the check is about.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use pact_client::http::{Request, Response};
use pact_client::jwks_server::{DISCOVERY_PATH, JWKS_PATH, JwksServer};
use pact_client::jwt::Signer;
use pact_client::keys::AgentKey;
use reqwest::Method;
use serde_json::Value;

use crate::JwksServing;
use crate::expect::{self, Problem, Verdict, during, fail, skip};
use crate::rules::RuleId as R;
use crate::runner::{Kind, Runner, Setup, check, message_body};

/// PACT §3.1.
pub async fn checks(r: &mut Runner<'_>, s: &Setup) {
    if !r.wants_any(&["§3.1."]) {
        return;
    }
    check!(r, R::HttpIssuerRefused, http_issuer(r, s).await);
    check!(r, R::OpenAdmission, open_admission(r, s).await);
}

/// The admission policy a brand says it has: pactd names it `pact_admission`
/// in the brand's RFC 8414 metadata (PACT §3.1 leaves how to tell open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Only agents staff registered: `allowlist`, or `registry` (also the
    /// agents a trusted registry lists, which this run's fresh agent is not).
    Closed(&'static str),
    Open,
}

/// An agent nobody registered: its own key, and its OpenID discovery
/// document and JWKS served by this run at its issuer (dropped with it).
struct Stranger {
    signer: Signer,
    server: JwksServer,
}

impl Stranger {
    /// A fresh key served on `ip`, under the issuer `issuer_of(port)`. The
    /// discovery document must name the issuer it is reached at (OpenID
    /// Connect Discovery 1.0 §4.3), and `JwksServer` fixes it before it
    /// binds, so a free port is found first; another process may take it
    /// in between, hence the retries.
    async fn start(
        ip: IpAddr,
        audience: &str,
        issuer_of: impl Fn(u16) -> String,
    ) -> Result<Self, Problem> {
        let key = Arc::new(
            AgentKey::generate().map_err(|e| fail(format!("cannot make a key: {e:#}"), None))?,
        );
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port(ip)?;
            let issuer = issuer_of(port);
            let discovery = Some((issuer.clone(), format!("{issuer}{JWKS_PATH}")));
            match JwksServer::start_discoverable(SocketAddr::new(ip, port), key.jwks(), discovery)
                .await
            {
                Ok(server) => {
                    return Ok(Self {
                        signer: Signer::new(issuer, audience, key),
                        server,
                    });
                }
                Err(e) => last = format!("{e:#}"),
            }
        }
        Err(fail(
            format!("cannot serve an unregistered agent's discovery document on {ip}: {last}"),
            None,
        ))
    }

    fn issuer(&self) -> &str {
        &self.signer.issuer
    }

    /// `message:send` of the public prompt with a valid PA-JWT of this agent.
    async fn say(&self, r: &mut Runner<'_>, s: &Setup) -> Result<Response, Problem> {
        let sub = r.sub("stranger");
        let token = self
            .signer
            .token(&sub)
            .map_err(|e| fail(format!("cannot sign a PA-JWT: {e:#}"), None))?;
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let req = s
            .a2a_request(Method::POST, "message:send", Some(&token))
            .json(body);
        r.send(req, Kind::A2a).await
    }

    /// ` (the Provider fetched its JWKS N time(s))`, when it did.
    fn fetched(&self) -> String {
        match self.server.hits() {
            0 => String::new(),
            n => format!(" (the Provider fetched its JWKS {n} time(s))"),
        }
    }
}

/// A port on `ip` nobody listens on right now.
fn free_port(ip: IpAddr) -> Result<u16, Problem> {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| fail(format!("cannot find a free port on {ip}: {e}"), None))
}

/// Where this run serves its unregistered agents: on the address the
/// registered JWKS is served on, which the Provider reaches, else loopback
/// (a Provider on this machine).
fn serve_ip(r: &Runner<'_>) -> IpAddr {
    match r.cfg.jwks {
        JwksServing::Serve(addr) if !addr.ip().is_unspecified() => addr.ip(),
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// PACT §3 (the jwksUri is HTTPS) and §3.1 (an open Provider still verifies
/// §3.2 in full): an `http` issuer is refused, whatever the policy. An http
/// issuer on loopback is not tried: a development Provider may take one
/// (pactd with `--allow-loopback-jwks`), and this run's loopback issuer is
/// the one `§3.1.open-admission` needs admitted there. A made-up name under
/// `.invalid` (RFC 6761 §6.4) carries this run's port, so a Provider that
/// routes it here finds the served keys; when the agent's address is not
/// loopback, that address is tried too, which any Provider can reach.
async fn http_issuer(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let ip = serve_ip(r);
    let name = format!("{}.invalid", r.unique("http-issuer"));
    let mut strangers =
        vec![Stranger::start(ip, &r.cfg.audience, |port| format!("http://{name}:{port}")).await?];
    if !ip.is_loopback() {
        strangers.push(
            Stranger::start(ip, &r.cfg.audience, |port| {
                format!("http://{}", SocketAddr::new(ip, port))
            })
            .await?,
        );
    }
    for stranger in &strangers {
        let res = stranger.say(r, s).await?;
        expect::bare_401(&res).map_err(|p| {
            let label = format!(
                "an agent nobody registered, with iss {}{}",
                stranger.issuer(),
                stranger.fetched()
            );
            during(&label, p)
        })?;
    }
    Ok(if ip.is_loopback() {
        "refused; an http issuer on loopback is not tried (a development Provider may take one)"
            .to_owned()
    } else {
        format!("{} http issuers refused", strangers.len())
    })
}

/// PACT §3.1: where the brand says `open`, an agent nobody registered whose
/// issuer serves OpenID discovery is admitted (for an identity
/// `message:send`); where it says `allowlist`, it gets the bare 401 of any
/// refused PA-JWT. A refusal under `open` before the JWKS was fetched is a
/// SKIP, never a pass: the Provider may simply not reach (or not accept)
/// this run's http issuer, which says nothing of its policy.
async fn open_admission(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let policy = advertised_policy(r, s).await?;
    let ip = serve_ip(r);
    let stranger = Stranger::start(ip, &r.cfg.audience, |port| {
        format!("http://{}", SocketAddr::new(ip, port))
    })
    .await?;
    let res = stranger.say(r, s).await?;
    let iss = stranger.issuer().to_owned();
    match policy {
        Policy::Closed(word) => expect::bare_401(&res)
            .map(|()| format!("refused: the brand's pact_admission is {word}"))
            .map_err(|p| {
                let label = format!(
                    "an agent nobody registered ({iss}), where pact_admission is {word}{}",
                    stranger.fetched()
                );
                during(&label, p)
            }),
        Policy::Open if res.status == 401 && stranger.server.hits() == 0 => Err(skip(format!(
            "pact_admission is open, but the Provider refused {iss} without fetching its \
             JWKS: it cannot reach, or does not accept, this run's http issuer (pactd takes \
             one on loopback only with --allow-loopback-jwks); this says nothing of its policy"
        ))),
        Policy::Open => expect::reply_message(&res)
            .map(|_| format!("admitted {iss}, its keys found through {iss}{DISCOVERY_PATH}"))
            .map_err(|p| {
                let label = format!(
                    "an agent nobody registered ({iss}), where pact_admission is open{}",
                    stranger.fetched()
                );
                during(&label, p)
            }),
    }
}

/// The policy in the brand's RFC 8414 metadata (`pact_admission`); SKIP
/// when it cannot be known: the check judges behaviour against what the
/// Provider says, and PACT fixes no way to say it.
async fn advertised_policy(r: &mut Runner<'_>, s: &Setup) -> Result<Policy, Problem> {
    let Some(d) = &s.card.delegation else {
        return Err(skip(
            "the card names no RFC 8414 metadata (oauth2MetadataUrl), where the brand would \
             say its admission policy (pact_admission)",
        ));
    };
    let res = r.send(Request::get(&d.metadata_url), Kind::Plain).await?;
    let v = expect::ok_json(&res).map_err(|p| match p {
        Problem::Fail { reason, .. } => skip(format!(
            "the RFC 8414 metadata could not be read (see §5.metadata): {reason}"
        )),
        p @ Problem::Skip(_) => p,
    })?;
    match v.get("pact_admission").and_then(Value::as_str) {
        Some("allowlist") => Ok(Policy::Closed("allowlist")),
        Some("registry") => Ok(Policy::Closed("registry")),
        Some("open") => Ok(Policy::Open),
        Some(other) => Err(skip(format!(
            "pact_admission is {other:?}, none of allowlist, registry and open"
        ))),
        None => Err(skip(
            "the RFC 8414 metadata does not say the admission policy (no pact_admission)",
        )),
    }
}
