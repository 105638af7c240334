//! The runner: shared state of a run, request helpers that record what the
//! Provider answered (for the checks over every response), and the setup
//! (card, JWKS, baseline).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pact_client::card::{self, CardInfo};
use pact_client::http::{Evidence, Http, Request, Response};
use pact_client::jwks_server::JwksServer;
use pact_client::jwt::Signer;
use reqwest::Method;
use serde_json::{Value, json};

use crate::expect::{self, Problem, Verdict, fail, skip};
use crate::report::{Check, Outcome, Report};
use crate::rules::RuleId;
use crate::{Approver, Config, JwksServing};

/// Runs `$body` (a [`Verdict`]) and records it as check `$id` (a
/// [`RuleId`]), unless the run does not want that check.
macro_rules! check {
    ($runner:expr, $id:expr, $body:expr) => {
        if $runner.wants($id) {
            let started = ::std::time::Instant::now();
            let verdict: $crate::expect::Verdict = $body;
            $runner.record($id, started, verdict);
        }
    };
}
pub(crate) use check;

/// Checks every run performs, and reports when they fail.
const SETUP_CHECKS: [RuleId; 2] = [RuleId::CardServed, RuleId::ValidTokenAccepted];

/// A response the checks over every response look at again.
#[derive(Clone, Debug)]
pub struct Seen {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Option<Value>,
    pub evidence: Evidence,
}

impl Seen {
    fn of(res: &Response) -> Self {
        Self {
            status: res.status,
            content_type: res.header("content-type").map(str::to_owned),
            body: res.json(),
            evidence: res.evidence(),
        }
    }
}

/// What a request is, for recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An A2A operation (PACT §4, §6).
    A2a,
    /// An OAuth endpoint (PACT §5).
    OAuth,
    /// Anything else (card, metadata, JWKS).
    Plain,
}

/// What is run-wide: the configuration, the agent's signer, the checks
/// recorded so far and the responses the checks over every response look
/// at. What a phase finds is its return value, not a field here.
pub struct Runner<'a> {
    pub cfg: Config,
    pub approver: &'a dyn Approver,
    pub http: Http,
    pub signer: Signer,
    run_id: String,
    subs: usize,
    results: Vec<Check>,
    pub a2a_seen: Vec<Seen>,
    pub oauth_seen: Vec<Seen>,
    pub limited_seen: Vec<(Evidence, Vec<Option<String>>)>,
}

/// Why the rest of the run cannot happen (a failed setup check says more);
/// every check not yet recorded is SKIP with this reason.
#[derive(Debug)]
pub struct Stopped(String);

/// What setup found. Every phase after it takes a `&Setup`, so none can run
/// before the card was read and the baseline tried.
pub struct Setup {
    /// The brand's Agent Card (PACT §2).
    pub card: CardInfo,
    /// The response that carried the card (its URL and caching headers).
    pub card_res: Response,
    /// The second brand of `--other-brand`.
    pub other: OtherBrand,
    /// The valid-token baseline (`§3.valid-token-accepted`).
    pub baseline: Baseline,
    /// The agent's JWKS, when this run serves it: kept for the whole run,
    /// since the Provider may fetch it to verify any PA-JWT (PACT §3).
    _jwks_server: Option<JwksServer>,
}

/// The second brand at the same Provider (`--other-brand`).
pub enum OtherBrand {
    /// None was given: checks that need one SKIP.
    NotGiven,
    /// Given, but its card could not be read: checks that need it FAIL.
    Unreadable(String),
    /// Boxed: a card is large, the other two variants are not.
    Read(Box<CardInfo>),
}

/// Whether a valid PA-JWT was accepted (PACT §3). Without that, every
/// refusal proves nothing.
pub enum Baseline {
    Accepted,
    /// The first line of why it was not.
    Failed(String),
}

/// Where the agent's JWKS is served during the run.
struct Jwks {
    /// The URL to register (`None` when served elsewhere and not configured).
    uri: Option<String>,
    /// The server, when this run serves it itself.
    server: Option<JwksServer>,
}

impl<'a> Runner<'a> {
    pub fn new(cfg: Config, approver: &'a dyn Approver) -> Result<Self, String> {
        let http = Http::new().map_err(|e| e.to_string())?;
        let signer = cfg
            .identity
            .signer(Some(&cfg.audience))
            .map_err(|e| e.to_string())?;
        Ok(Self {
            run_id: uuid::Uuid::new_v4().simple().to_string()[..10].to_owned(),
            cfg,
            approver,
            http,
            signer,
            subs: 0,
            results: Vec::new(),
            a2a_seen: Vec::new(),
            oauth_seen: Vec::new(),
            limited_seen: Vec::new(),
        })
    }

    /// `true` when the run wants this check: all of them, or those whose
    /// names start with one of `only`.
    pub fn wants(&self, id: RuleId) -> bool {
        selected(&self.cfg, id)
    }

    /// `true` when any check with one of these prefixes is wanted.
    pub fn wants_any(&self, prefixes: &[&str]) -> bool {
        RuleId::ALL
            .iter()
            .any(|r| prefixes.iter().any(|p| r.name().starts_with(p)) && self.wants(*r))
    }

    /// `true` when any of these checks is wanted.
    pub fn wants_some(&self, ids: &[RuleId]) -> bool {
        ids.iter().any(|id| self.wants(*id))
    }

    fn recorded(&self, id: RuleId) -> bool {
        self.results.iter().any(|c| c.id == id)
    }

    /// Records a check (once; unwanted checks are dropped). A broken rule
    /// ends as its level says: FAIL, WARN or INFO.
    pub fn record(&mut self, id: RuleId, started: Instant, verdict: Verdict) {
        // A failed setup check is always reported, whatever `only` says:
        // otherwise a run that could not start would look green.
        let setup_failed =
            SETUP_CHECKS.contains(&id) && matches!(verdict, Err(Problem::Fail { .. }));
        if (!self.wants(id) && !setup_failed) || self.recorded(id) {
            return;
        }
        let (outcome, reason, evidence) = match verdict {
            Ok(note) => (Outcome::Pass, note, None),
            Err(Problem::Fail { reason, evidence }) => (id.level().broken(), reason, evidence),
            Err(Problem::Skip(reason)) => (Outcome::Skip, reason, None),
        };
        let mut check = Check::new(id, outcome, reason);
        check.evidence = evidence.map(|e| *e);
        check.duration_ms = started.elapsed().as_millis();
        if let Some(progress) = &self.cfg.progress {
            progress(&check);
        }
        self.results.push(check);
    }

    /// Records SKIP for every wanted, unrecorded check among `ids`.
    pub fn skip_all(&mut self, ids: &[RuleId], reason: &str) {
        for id in ids {
            self.record(*id, Instant::now(), Err(skip(reason)));
        }
    }

    /// Records SKIP for every wanted, unrecorded check whose name starts
    /// with one of `prefixes`.
    pub fn skip_prefixed(&mut self, prefixes: &[&str], reason: &str) {
        let ids: Vec<RuleId> = RuleId::ALL
            .iter()
            .copied()
            .filter(|r| prefixes.iter().any(|p| r.name().starts_with(p)))
            .collect();
        self.skip_all(&ids, reason);
    }

    /// The report, in catalogue order; every wanted check appears (SKIP,
    /// with why the run stopped, when it was not reached).
    pub fn into_report(mut self, stopped: Option<Stopped>, duration: Duration) -> Report {
        let fallback = stopped.map_or_else(|| "not reached".to_owned(), |s| s.0);
        for id in RuleId::ALL {
            if !self.wants(*id) || self.recorded(*id) {
                continue;
            }
            self.results
                .push(Check::new(*id, Outcome::Skip, fallback.clone()));
        }
        self.results.sort_by_key(|c| c.id);
        Report {
            card_url: self.cfg.card_url.clone(),
            profile: self.cfg.profile.as_str().to_owned(),
            checks: self.results,
            duration,
        }
    }

    /// A fresh `sub` for one check: the Provider keys conversations and rate
    /// limits by `(PA, sub)`, so checks stay independent.
    pub fn sub(&mut self, label: &str) -> String {
        self.subs += 1;
        format!("conformance-{}-{}-{label}", self.run_id, self.subs)
    }

    /// A string unique to this run.
    pub fn unique(&self, label: &str) -> String {
        format!("pact-conformance-{}-{label}", self.run_id)
    }

    /// A valid PA-JWT for `sub`.
    pub fn jwt(&self, sub: &str) -> Result<String, Problem> {
        self.signer
            .token(sub)
            .map_err(|e| fail(format!("cannot sign a PA-JWT: {e}"), None))
    }

    /// An edited PA-JWT for `sub`.
    pub fn jwt_with(
        &self,
        sub: &str,
        edit: impl FnOnce(&mut Value, &mut Value),
    ) -> Result<String, Problem> {
        self.signer
            .token_with(sub, edit)
            .map_err(|e| fail(format!("cannot sign a PA-JWT: {e}"), None))
    }

    /// Sends and records.
    pub async fn send(&mut self, req: Request, kind: Kind) -> Result<Response, Problem> {
        let what = format!("{req:?}");
        let res = self
            .http
            .send(req)
            .await
            .map_err(|e| fail(format!("{what} failed: {e:#}"), None))?;
        self.observe(&res, kind);
        Ok(res)
    }

    /// Keeps what the checks over every response need.
    pub fn observe(&mut self, res: &Response, kind: Kind) {
        if !res.rate_limited.is_empty() {
            self.limited_seen
                .push((res.evidence(), res.rate_limited.clone()));
        }
        match kind {
            Kind::A2a => {
                let envelope = res
                    .json()
                    .as_ref()
                    .and_then(expect::envelope_reason)
                    .is_some();
                let bare = res.body.is_empty() && res.status != 200;
                let not_a2a = matches!(res.status, 401 | 404 | 405 | 429) && !envelope;
                if !bare && !not_a2a {
                    self.a2a_seen.push(Seen::of(res));
                }
            }
            Kind::OAuth => {
                if res.status >= 400 && !(res.status == 401 && res.body.is_empty()) {
                    self.oauth_seen.push(Seen::of(res));
                }
            }
            Kind::Plain => {}
        }
    }

    /// POSTs `message:send` with `body`, a PA-JWT for `sub` and an optional
    /// delegation token.
    pub async fn post_message(
        &mut self,
        s: &Setup,
        sub: &str,
        body: Value,
        delegation: Option<&str>,
    ) -> Result<Response, Problem> {
        self.message_to(s.iface(), sub, body, delegation).await
    }

    /// `message:send` of `text` as `sub`, optionally in a context.
    pub async fn say(
        &mut self,
        s: &Setup,
        sub: &str,
        text: &str,
        context: Option<&str>,
        delegation: Option<&str>,
    ) -> Result<Response, Problem> {
        let body = message_body(text, context, None);
        self.post_message(s, sub, body, delegation).await
    }

    /// [`Self::post_message`] to the interface at `iface`: setup sends the
    /// baseline before its [`Setup`] exists.
    async fn message_to(
        &mut self,
        iface: &str,
        sub: &str,
        body: Value,
        delegation: Option<&str>,
    ) -> Result<Response, Problem> {
        let jwt = self.jwt(sub)?;
        let mut req = a2a_request(iface, Method::POST, "message:send", Some(&jwt)).json(body);
        if let Some(t) = delegation {
            req = req.header(pact_proto::a2a::DELEGATION_HEADER, format!("Bearer {t}"));
        }
        self.send(req, Kind::A2a).await
    }

    /// Runs the suite: setup, then the phases that need what it found. `Err`
    /// when setup could not finish.
    pub async fn run(&mut self) -> Result<(), Stopped> {
        let setup = self.setup().await?;
        crate::identity::card_checks(self, &setup).await;
        crate::identity::token_checks(self, &setup).await;
        crate::admission::checks(self, &setup).await;
        crate::messages::message_checks(self, &setup).await;
        crate::delegated::run(self, &setup).await;
        crate::messages::aggregate_checks(self);
        Ok(())
    }

    /// The agent's JWKS (PACT §3), the card (PACT §2), the other brand's
    /// card, and the valid-token baseline, in that order: each needs the one
    /// before.
    async fn setup(&mut self) -> Result<Setup, Stopped> {
        let jwks = self.serve_jwks().await?;
        let (card, card_res) = self.read_card().await?;
        let other = self.read_other_brand().await;
        let baseline = self.baseline(&card, jwks.uri.as_deref()).await;
        Ok(Setup {
            card,
            card_res,
            other,
            baseline,
            _jwks_server: jwks.server,
        })
    }

    /// Serves the agent's JWKS, so the Provider can verify our PA-JWTs
    /// (PACT §3), or finds it already served.
    async fn serve_jwks(&mut self) -> Result<Jwks, Stopped> {
        let addr = match self.cfg.jwks {
            JwksServing::External => {
                return Ok(Jwks {
                    uri: self.cfg.identity.settings.jwks_uri.clone(),
                    server: None,
                });
            }
            JwksServing::Serve(addr) => addr,
        };
        match JwksServer::start(addr, self.cfg.identity.key.jwks()).await {
            Ok(server) => Ok(Jwks {
                uri: Some(server.uri()),
                server: Some(server),
            }),
            // Already served there (e.g. by `pact-agent serve-jwks`)?
            Err(_) if self.serves_our_key(addr).await => Ok(Jwks {
                uri: Some(format!(
                    "http://{addr}{}",
                    pact_client::jwks_server::JWKS_PATH
                )),
                server: None,
            }),
            Err(e) => {
                let why = format!("cannot serve the agent's JWKS on {addr}: {e:#}");
                self.record(
                    RuleId::ValidTokenAccepted,
                    Instant::now(),
                    Err(fail(&why, None)),
                );
                Err(Stopped(why))
            }
        }
    }

    /// `§2.card-served`: the card, fetched without credentials (PACT §2).
    async fn read_card(&mut self) -> Result<(CardInfo, Response), Stopped> {
        let started = Instant::now();
        let url = self.cfg.card_url.clone();
        let fetched = self
            .send(Request::get(&url).follow_redirects(), Kind::Plain)
            .await
            .and_then(|res| {
                let v = expect::ok_json(&res)?;
                let info = card::parse(v, &res.url).map_err(|e| fail(e.to_string(), Some(&res)))?;
                Ok((info, res))
            });
        let verdict = expect::verdict_on(&fetched, |(info, _)| {
            Ok(format!("{} at {}", info.name, info.iface))
        });
        self.record(RuleId::CardServed, started, verdict);
        fetched.map_err(|_| Stopped("the Agent Card could not be read (§2.card-served)".to_owned()))
    }

    /// The card of `--other-brand`, when one was given.
    async fn read_other_brand(&self) -> OtherBrand {
        let Some(url) = &self.cfg.other_brand else {
            return OtherBrand::NotGiven;
        };
        match card::fetch(&self.http, url).await {
            Ok((_, info)) => OtherBrand::Read(Box::new(info)),
            Err(e) => OtherBrand::Unreadable(format!("cannot read the other brand's card: {e:#}")),
        }
    }

    /// `§3.valid-token-accepted`: a valid PA-JWT is accepted at `card`'s
    /// interface. Without it, every refusal later would prove nothing.
    async fn baseline(&mut self, card: &CardInfo, jwks_uri: Option<&str>) -> Baseline {
        let started = Instant::now();
        let sub = self.sub("baseline");
        let body = message_body(&self.cfg.public_prompt.clone(), None, None);
        let sent = self.message_to(&card.iface, &sub, body, None).await;
        let verdict = sent.and_then(|res| {
            if res.status == 401 {
                return Err(fail(self.registration_advice(jwks_uri), Some(&res)));
            }
            expect::reply_message(&res).map(|m| {
                format!(
                    "replied in context {}",
                    m.get("contextId").and_then(Value::as_str).unwrap_or("?")
                )
            })
        });
        let baseline = match &verdict {
            Err(Problem::Fail { reason, .. }) => {
                Baseline::Failed(reason.lines().next().unwrap_or("").to_owned())
            }
            // Nothing in the baseline is optional, so it never SKIPs.
            _ => Baseline::Accepted,
        };
        self.record(RuleId::ValidTokenAccepted, started, verdict);
        baseline
    }

    /// `true` when `http://{addr}/.well-known/jwks.json` already publishes
    /// this agent's key.
    async fn serves_our_key(&self, addr: std::net::SocketAddr) -> bool {
        let url = format!("http://{addr}{}", pact_client::jwks_server::JWKS_PATH);
        let kid = self.cfg.identity.key.kid();
        match self.http.send(Request::get(url)).await {
            Ok(res) if res.status == 200 => res.json().is_some_and(|v| {
                v.get("keys").and_then(Value::as_array).is_some_and(|keys| {
                    keys.iter()
                        .any(|k| k.get("kid").and_then(Value::as_str) == Some(kid))
                })
            }),
            _ => false,
        }
    }

    /// What to register when the Provider does not know this agent.
    fn registration_advice(&self, jwks_uri: Option<&str>) -> String {
        let uri = jwks_uri.unwrap_or("<the URL that serves this agent's JWKS>");
        format!(
            "a valid PA-JWT got 401: the Provider does not know this agent (or cannot fetch its \
             JWKS, or its audience is not {:?}). Register it:\n    {}",
            self.cfg.audience,
            self.cfg.identity.registration_line(uri)
        )
    }
}

impl Setup {
    /// The interface URL (PACT §2: the card's first interface).
    pub fn iface(&self) -> &str {
        &self.card.iface
    }

    /// An A2A request to `{iface}/{op}`.
    pub fn a2a_request(&self, method: Method, op: &str, token: Option<&str>) -> Request {
        a2a_request(self.iface(), method, op, token)
    }

    /// SKIP when a valid PA-JWT was not accepted: then a refusal proves nothing.
    pub fn auth_gate(&self) -> Result<(), Problem> {
        match &self.baseline {
            Baseline::Accepted => Ok(()),
            Baseline::Failed(why) => Err(skip(format!(
                "the valid-token baseline failed (§3.valid-token-accepted: {why}), so this proves nothing"
            ))),
        }
    }

    /// The other brand's card, or why a check needing it cannot run.
    pub fn other_brand(&self) -> Result<CardInfo, Problem> {
        match &self.other {
            OtherBrand::NotGiven => {
                Err(skip("needs a second brand: pass --other-brand <card-url>"))
            }
            OtherBrand::Unreadable(why) => Err(fail(why.clone(), None)),
            OtherBrand::Read(info) => Ok((**info).clone()),
        }
    }
}

/// An A2A request to `{iface}/{op}`, with a PA-JWT when `token` is given.
fn a2a_request(iface: &str, method: Method, op: &str, token: Option<&str>) -> Request {
    let mut req = Request::new(method, format!("{iface}/{op}"));
    if let Some(t) = token {
        req = req.bearer(t);
    }
    req
}

/// A `message:send` body (PACT §4).
pub fn message_body(text: &str, context: Option<&str>, message_id: Option<&str>) -> Value {
    let id = message_id
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let mut message = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(c) = context {
        message["contextId"] = json!(c);
    }
    json!({ "message": message })
}

/// Space-separated scopes as a set.
pub fn scope_set(s: &str) -> BTreeSet<String> {
    s.split(' ')
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `true` when `cfg` wants check `id`: all, or those matching `only`.
fn selected(cfg: &Config, id: RuleId) -> bool {
    cfg.only.is_empty() || cfg.only.iter().any(|p| id.name().starts_with(p.as_str()))
}

/// A failure for a setup report (the suite could not start).
pub fn setup_failure(cfg: &Config, why: &str, duration: Duration) -> Report {
    let reason = format!("the suite could not start: {why}");
    let checks = RuleId::ALL
        .iter()
        .copied()
        .filter(|id| *id == RuleId::CardServed || selected(cfg, *id))
        .map(|id| {
            let outcome = if id == RuleId::CardServed {
                Outcome::Fail
            } else {
                Outcome::Skip
            };
            Check::new(id, outcome, reason.clone())
        })
        .collect();
    Report {
        card_url: cfg.card_url.clone(),
        profile: cfg.profile.as_str().to_owned(),
        checks,
        duration,
    }
}
