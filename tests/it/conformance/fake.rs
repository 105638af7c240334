//! A tiny PACT provider for the conformance suite's own tests: it serves
//! the card, `message:send` and the device flow (no consent pages), in a
//! [`Style`] of its own that PACT allows, and with at most one injected
//! [`Flaw`] that the matching check must catch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};
use pact_agent::state::Identity;
use pact_jose::{KeySet, PaJwtRules, ProviderKey, ProviderKeySet, parse_pa_jwt};
use pact_proto::A2aError;
use pact_proto::a2a::{AgentMessage, parse_send_message};
use pact_proto::card::{AgentCard, CardInput, DeviceCodeFlow};
use pact_proto::oauth::GRANT_TYPE_DEVICE_CODE;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::ISSUER;

/// The one rule a fake breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flaw {
    None,
    /// §3: accepts `alg: none`.
    AcceptsAlgNone,
    /// §3: its 401 has a body.
    BodyOn401,
    /// §3: a correctly signed token with `sub: ""` is accepted (an empty
    /// string identifies nobody).
    AcceptsEmptySub,
    /// §3: a 16 KiB PA-JWT is served.
    ServesOversized,
    /// §2: the Bearer scheme has no `bearerFormat: "JWT"`.
    SchemeNotJwt,
    /// §4: `application/json` instead of `application/a2a+json`.
    PlainJson,
    /// §4: tells a foreign context apart from an unknown one.
    RevealsForeignContext,
    /// §4: a retried messageId runs the agent again.
    ReplayRunsAgain,
    /// §5.3 / RFC 8628: never says slow_down.
    NoSlowDown,
    /// §5.3 / RFC 8628: keeps saying slow_down to a client that added 5 s.
    SlowDownForever,
    /// §3.1: its open door admits an issuer that is not https (any http
    /// one, not only a development loopback issuer).
    AdmitsHttpIssuer,
    /// §3.1: says `pact_admission: allowlist`, yet admits an agent nobody
    /// registered whose issuer serves OpenID discovery.
    AdmitsUnderAllowlist,
}

/// Which agents a fake admits (PACT §3.1: the Provider's policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Only the registered agent.
    Allowlist,
    /// Also any agent whose https issuer serves OpenID discovery, or whose
    /// http issuer is a loopback address (a development Provider's
    /// exception, as pactd's `--allow-loopback-jwks`).
    Open,
    /// Open, but https issuers only: as a Provider elsewhere, which cannot
    /// reach the suite's loopback issuer.
    OpenHttpsOnly,
}

impl Admission {
    /// `pact_admission` in the RFC 8414 metadata, as pactd says it.
    fn as_str(self) -> &'static str {
        match self {
            Self::Allowlist => "allowlist",
            Self::Open | Self::OpenHttpsOnly => "open",
        }
    }
}

/// How a fake does what PACT leaves open.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// The name of the PA-JWT scheme in the card.
    pub pa_scheme: &'static str,
    /// The name of the delegation scheme in the card.
    pub delegation_scheme: &'static str,
    /// The auth-scheme as the card spells it.
    pub bearer: &'static str,
    /// Requests whose headers are larger get 431 from the "HTTP layer".
    pub max_header_bytes: Option<usize>,
    /// Whether the 5 s of slow_down hold for good (RFC 8628 §3.5 puts
    /// them on the client; a server may or may not enforce them).
    pub enforce_increase: bool,
    /// RFC 8628 `interval`.
    pub interval: u64,
    pub admission: Admission,
}

impl Style {
    /// As pactd does it (with a short interval).
    pub const PACTD: Style = Style {
        pa_scheme: "paJwt",
        delegation_scheme: "userDelegation",
        bearer: "Bearer",
        max_header_bytes: None,
        enforce_increase: true,
        interval: 1,
        admission: Admission::Allowlist,
    };

    /// Otherwise, as PACT allows: schemes named differently, `bearer` in
    /// lower case, 431 for oversized headers, no enforced increase, 3 s,
    /// open admission.
    pub const OTHER: Style = Style {
        pa_scheme: "platformJwt",
        delegation_scheme: "consent",
        bearer: "bearer",
        max_header_bytes: Some(8 * 1024),
        enforce_increase: false,
        interval: 3,
        admission: Admission::Open,
    };
}

/// The owner's sub, and messageId → stored reply.
type Conversation = (String, HashMap<String, Value>);

/// A device code's polling state.
struct Device {
    last: Option<Instant>,
    interval: u64,
}

struct Fake {
    flaw: Flaw,
    style: Style,
    keys: KeySet,
    /// The agent's keys, to verify what `parse_pa_jwt` refuses (the empty-sub flaw).
    agent_keys: ProviderKeySet,
    audience: String,
    base: String,
    provider_key: ProviderKey,
    /// contextId → its conversation.
    contexts: Mutex<HashMap<String, Conversation>>,
    devices: Mutex<HashMap<String, Device>>,
}

impl Fake {
    fn iface(&self) -> String {
        format!("{}/a2a/fake", self.base)
    }

    fn authenticate(&self, headers: &HeaderMap) -> Option<String> {
        let token = headers
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        let unverified = pact_agent::jwt::decode_unverified(token);
        if self.flaw == Flaw::AcceptsAlgNone
            && let Some((h, c)) = &unverified
            && h["alg"]
                .as_str()
                .is_some_and(|a| a.eq_ignore_ascii_case("none"))
        {
            return c["sub"].as_str().map(str::to_owned);
        }
        if self.flaw == Flaw::AcceptsEmptySub
            && let Some((_, c)) = &unverified
            && c["sub"] == json!("")
            && self.agent_keys.verify_compact(token, "JWT").is_ok()
        {
            return Some(String::new());
        }
        let mut rules = PaJwtRules::new(self.audience.clone());
        if self.flaw == Flaw::ServesOversized {
            rules.max_token_bytes = 64 * 1024;
        }
        let jwt = parse_pa_jwt(token, &rules).ok()?;
        if jwt.issuer() != ISSUER {
            return None;
        }
        let key = self.keys.find(jwt.kid(), jwt.alg())?;
        let now = OffsetDateTime::now_utc().unix_timestamp();
        Some(jwt.verify(&key, &rules, now).ok()?.sub)
    }

    /// PACT §3.1: an agent nobody registered, through the open door: its
    /// keys found by OpenID discovery at `iss`, its PA-JWT verified in full
    /// (§3.2). Every name resolves to this machine (the fake's stand-in for
    /// the Internet), so the issuers the suite serves are reachable.
    async fn admit(&self, headers: &HeaderMap) -> Option<String> {
        let open = self.style.admission != Admission::Allowlist;
        if !open && self.flaw != Flaw::AdmitsUnderAllowlist {
            return None;
        }
        let token = headers
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?;
        let rules = PaJwtRules::new(self.audience.clone());
        let jwt = parse_pa_jwt(token, &rules).ok()?;
        let iss = jwt.issuer().to_owned();
        if iss == ISSUER {
            return None;
        }
        let url = url::Url::parse(&iss).ok()?;
        let loopback = match url.host()? {
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
            url::Host::Domain(_) => false,
        };
        let allowed = match url.scheme() {
            "https" => true,
            "http" => {
                self.flaw == Flaw::AdmitsHttpIssuer
                    || (loopback && self.style.admission != Admission::OpenHttpsOnly)
            }
            _ => false,
        };
        if !allowed {
            return None;
        }
        let mut client =
            pact_jose::with_shared_tls(reqwest::Client::builder()).timeout(Duration::from_secs(5));
        if let Some(url::Host::Domain(name)) = url.host() {
            // Port 0: reqwest keeps the URL's own port.
            client = client.resolve(name, ([127, 0, 0, 1], 0).into());
        }
        let client = client.build().ok()?;
        let discovery = format!(
            "{}/.well-known/openid-configuration",
            iss.trim_end_matches('/')
        );
        let doc: Value = client.get(discovery).send().await.ok()?.json().await.ok()?;
        if doc["issuer"].as_str() != Some(iss.as_str()) {
            return None;
        }
        let jwks = client
            .get(doc["jwks_uri"].as_str()?)
            .send()
            .await
            .ok()?
            .bytes()
            .await
            .ok()?;
        let keys = KeySet::from_json(&jwks).ok()?;
        let key = keys.find(jwt.kid(), jwt.alg())?;
        let now = OffsetDateTime::now_utc().unix_timestamp();
        Some(jwt.verify(&key, &rules, now).ok()?.sub)
    }

    /// What an HTTP layer answers before the application sees the request.
    fn too_large(&self, headers: &HeaderMap) -> Option<Response> {
        let limit = self.style.max_header_bytes?;
        let size: usize = headers
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len())
            .sum();
        (size > limit).then(|| {
            Response::builder()
                .status(431)
                .header(header::CONTENT_TYPE, "text/html")
                .body(Body::from(
                    "<html><body>431 Request Header Fields Too Large</body></html>",
                ))
                .unwrap()
        })
    }

    fn unauthorized(&self) -> Response {
        let body = if self.flaw == Flaw::BodyOn401 {
            Body::from(r#"{"error":"unauthorized"}"#)
        } else {
            Body::empty()
        };
        Response::builder()
            .status(401)
            .header(header::WWW_AUTHENTICATE, r#"Bearer realm="a2a""#)
            .body(body)
            .unwrap()
    }

    fn a2a(&self, status: u16, body: &Value) -> Response {
        let ct = if self.flaw == Flaw::PlainJson {
            "application/json"
        } else {
            "application/a2a+json"
        };
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, ct)
            .body(Body::from(body.to_string()))
            .unwrap()
    }

    fn error(&self, e: &A2aError) -> Response {
        self.a2a(e.reason.http_status(), &e.to_json())
    }

    fn oauth(&self, status: u16, body: &Value) -> Response {
        Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CACHE_CONTROL, "no-store")
            .body(Body::from(body.to_string()))
            .unwrap()
    }
}

/// Renames a scheme in the card, and in every requirement naming it.
fn rename_scheme(card: &mut Value, from: &str, to: &str) {
    if from == to {
        return;
    }
    if let Some(schemes) = card["securitySchemes"].as_object_mut()
        && let Some(s) = schemes.remove(from)
    {
        schemes.insert(to.to_owned(), s);
    }
    if let Some(reqs) = card["securityRequirements"].as_array_mut() {
        for r in reqs {
            if let Some(names) = r["schemes"].as_object_mut()
                && let Some(v) = names.remove(from)
            {
                names.insert(to.to_owned(), v);
            }
        }
    }
}

async fn card(State(f): State<Arc<Fake>>) -> Response {
    let iface = f.iface();
    let card = AgentCard::build(CardInput {
        brand_name: "Fake",
        brand_description: "A fake provider",
        interface_url: &iface,
        provider_organization: "fake",
        provider_url: &f.base,
        version: "1",
        skills: vec![],
        delegation: Some(DeviceCodeFlow {
            device_authorization_url: format!("{iface}/oauth/device_authorization"),
            token_url: format!("{iface}/oauth/token"),
            scopes: [("orders:read".to_owned(), "See your orders".to_owned())].into(),
        }),
    });
    let mut card = serde_json::to_value(card).unwrap();
    rename_scheme(&mut card, "paJwt", f.style.pa_scheme);
    rename_scheme(&mut card, "userDelegation", f.style.delegation_scheme);
    let http = &mut card["securitySchemes"][f.style.pa_scheme]["httpAuthSecurityScheme"];
    http["scheme"] = json!(f.style.bearer);
    if f.flaw == Flaw::SchemeNotJwt
        && let Some(h) = http.as_object_mut()
    {
        h.remove("bearerFormat");
    }
    f.a2a(200, &card)
}

async fn send(State(f): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = f.too_large(&headers) {
        return refused;
    }
    let sub = match f.authenticate(&headers) {
        Some(sub) => sub,
        None => match f.admit(&headers).await {
            Some(sub) => sub,
            None => return f.unauthorized(),
        },
    };
    let msg = match parse_send_message(&body) {
        Ok(m) => m,
        Err(e) => return f.error(&e),
    };
    let mut contexts = f.contexts.lock().unwrap();
    let ctx = match msg.context_id {
        Some(c) => match contexts.get(&c) {
            Some((owner, _)) if *owner == sub => c,
            Some(_) if f.flaw == Flaw::RevealsForeignContext => {
                return f.error(&A2aError::invalid_params(
                    "This context belongs to someone else",
                ));
            }
            _ => return f.error(&A2aError::unknown_context()),
        },
        None => {
            let c = uuid::Uuid::new_v4().to_string();
            contexts.insert(c.clone(), (sub, HashMap::new()));
            c
        }
    };
    let Some((_, replies)) = contexts.get_mut(&ctx) else {
        return f.error(&A2aError::internal());
    };
    if f.flaw != Flaw::ReplayRunsAgain
        && let Some(stored) = replies.get(&msg.message_id)
    {
        return f.a2a(200, stored);
    }
    let reply = json!({"message": AgentMessage::new(
        uuid::Uuid::new_v4().to_string(), ctx.clone(), "We are open 9 to 5.".to_owned())});
    replies.insert(msg.message_id, reply.clone());
    f.a2a(200, &reply)
}

async fn metadata(State(f): State<Arc<Fake>>) -> Response {
    let o = format!("{}/oauth", f.iface());
    f.oauth(
        200,
        &json!({"issuer": o, "device_authorization_endpoint": format!("{o}/device_authorization"),
                "token_endpoint": format!("{o}/token"), "jwks_uri": format!("{o}/jwks.json"),
                "pact_admission": f.style.admission.as_str()}),
    )
}

async fn jwks(State(f): State<Arc<Fake>>) -> Response {
    f.oauth(200, &json!({"keys": [f.provider_key.public_jwk()]}))
}

async fn device(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Form(_form): Form<HashMap<String, String>>,
) -> Response {
    if f.authenticate(&headers).is_none() {
        return f.unauthorized();
    }
    let code = uuid::Uuid::new_v4().to_string();
    let interval = f.style.interval;
    f.devices.lock().unwrap().insert(
        code.clone(),
        Device {
            last: None,
            interval,
        },
    );
    f.oauth(
        200,
        &json!({"device_code": code, "user_code": "BCDF-GHJK",
                "verification_uri": format!("{}/device", f.base),
                "verification_uri_complete": format!("{}/device?user_code=BCDF-GHJK", f.base),
                "expires_in": 600, "interval": interval}),
    )
}

async fn token(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if f.authenticate(&headers).is_none() {
        return f.unauthorized();
    }
    if form.get("grant_type").map(String::as_str) != Some(GRANT_TYPE_DEVICE_CODE) {
        return f.oauth(400, &json!({"error": "unsupported_grant_type"}));
    }
    let code = form.get("device_code").cloned().unwrap_or_default();
    let mut devices = f.devices.lock().unwrap();
    let Some(d) = devices.get_mut(&code) else {
        return f.oauth(400, &json!({"error": "invalid_grant"}));
    };
    let since = d.last.map(|l| l.elapsed());
    d.last = Some(Instant::now());
    let too_fast = match f.flaw {
        Flaw::NoSlowDown => false,
        // Any poll within a minute of the last one.
        Flaw::SlowDownForever => since.is_some_and(|s| s < Duration::from_secs(60)),
        _ => since.is_some_and(|s| s < Duration::from_secs(d.interval)),
    };
    if too_fast {
        if f.style.enforce_increase {
            d.interval += 5;
        }
        return f.oauth(400, &json!({"error": "slow_down"}));
    }
    f.oauth(400, &json!({"error": "authorization_pending"}))
}

/// Starts a fake provider; returns its card URL.
pub async fn start(flaw: Flaw, style: Style, identity: &Identity, audience: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let agent_jwks = identity.key.jwks();
    let fake = Arc::new(Fake {
        flaw,
        style,
        keys: KeySet::from_json(agent_jwks.to_string().as_bytes()).unwrap(),
        agent_keys: ProviderKeySet::from_public_jwks(agent_jwks["keys"].as_array().unwrap())
            .unwrap(),
        audience: audience.to_owned(),
        base: base.clone(),
        provider_key: ProviderKey::generate().unwrap(),
        contexts: Mutex::new(HashMap::new()),
        devices: Mutex::new(HashMap::new()),
    });
    let p = "/a2a/fake";
    let app = Router::new()
        .route(&format!("{p}/.well-known/agent-card.json"), get(card))
        .route(&format!("{p}/message:send"), post(send))
        .route(
            &format!("{p}/oauth/.well-known/oauth-authorization-server"),
            get(metadata),
        )
        .route(&format!("{p}/oauth/jwks.json"), get(jwks))
        .route(&format!("{p}/oauth/device_authorization"), post(device))
        .route(&format!("{p}/oauth/token"), post(token))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state(fake);
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    format!("{base}{p}/.well-known/agent-card.json")
}
