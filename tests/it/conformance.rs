//! `pact-agent conformance` in CI: the whole suite, both profiles, against
//! pactd (every check passes; the few SKIPs are rules that cannot be
//! exercised, each with its reason), and against a tiny fake provider that
//! breaks one rule at a time (the matching check fails, clearly).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pact_agent::client::{self, Reply};
use pact_agent::conformance::{
    self, Account, ApprovalRequest, ApprovalStatus, Approver, BoxFuture, Config, Decision,
    JwksServing, Outcome, Profile, Report,
};
use pact_agent::jwks_server::JwksServer;
use pact_agent::state::{Home, Identity, InitOptions};
use pact_server::AppState;
use pact_tests::TestApp;
use time::OffsetDateTime;

const ISSUER: &str = "https://conformance-pa.example";

/// An identity made by `pact-agent` in a fresh state directory.
fn new_identity(audience: &str) -> (Home, Identity) {
    let home =
        Home::at(std::env::temp_dir().join(format!("pact-agent-it-{}", uuid::Uuid::new_v4())));
    let identity = home
        .init(InitOptions {
            issuer: Some(ISSUER.to_owned()),
            audience: Some(audience.to_owned()),
            name: Some("pact-agent conformance".to_owned()),
            ..Default::default()
        })
        .unwrap();
    (home, identity)
}

/// The person's decision, through the domain functions pactd's consent page
/// will call (tests/src/delegation.rs does the same).
struct PactdApprover {
    state: AppState,
    primary: String,
    secondary: String,
}

impl Approver for PactdApprover {
    fn approve<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus> {
        Box::pin(async move {
            let user = match r.account {
                Account::Primary => self.primary.as_str(),
                Account::Secondary => self.secondary.as_str(),
            };
            let auth = match pact_server::consent::find_by_user_code(&self.state, &r.user_code)
                .await
            {
                Ok(Some(a)) => a,
                Ok(None) => {
                    return ApprovalStatus::Failed(format!("no live user code {}", r.user_code));
                }
                Err(e) => return ApprovalStatus::Failed(e.to_string()),
            };
            let now = OffsetDateTime::now_utc();
            let done = match &r.decision {
                Decision::Approve { scopes } => pact_server::consent::approve(
                    &self.state,
                    pact_server::consent::Approval {
                        authorization_id: auth.id,
                        user_sub: user,
                        scopes: scopes.iter().cloned().collect::<BTreeSet<_>>(),
                        authorization_details: None,
                    },
                    now,
                )
                .await
                .map(|_| ()),
                Decision::Deny => {
                    pact_server::consent::deny(&self.state, auth.id, Some(user), now).await
                }
            };
            match done {
                Ok(()) => ApprovalStatus::Done,
                Err(e) => ApprovalStatus::Failed(e.to_string()),
            }
        })
    }
}

/// pactd with the demo brand delegating, a second brand with a scope, and
/// the agent registered (issuer + the JWKS URI it serves).
async fn pactd_with_agent() -> (TestApp, Home, Identity, JwksServer) {
    // A short RFC 8628 interval keeps the run fast; 2 s (not 1) leaves room
    // on a loaded machine for "poll again at once" to still be too fast. Codes
    // live 10 s, so §5.3.expired-token is exercised too (approvals here take
    // one interval).
    let app = TestApp::spawn_with(|c| {
        c.delegation.poll_interval_secs = 2;
        c.delegation.device_code_ttl = Duration::from_secs(10);
    })
    .await;
    app.enable_demo_delegation().await;
    app.add_brand("acme", "Acme").await;
    pact_db::scopes::upsert(
        &app.db,
        "acme",
        "orders:read",
        "See your Acme orders",
        false,
    )
    .await
    .unwrap();
    let (home, identity) = new_identity(app.audience());
    let jwks = JwksServer::start("127.0.0.1:0".parse().unwrap(), identity.key.jwks())
        .await
        .unwrap();
    pact_db::agents::upsert(&app.db, ISSUER, &jwks.uri(), "pact-agent conformance")
        .await
        .unwrap();
    (app, home, identity, jwks)
}

fn pactd_config(app: &TestApp, identity: &Identity, profile: Profile) -> Config {
    let mut c = Config::new(
        app.state.config.card_url("demo"),
        identity.clone(),
        app.audience(),
    );
    c.profile = profile;
    c.other_brand = Some(app.state.config.card_url("acme"));
    c.jwks = JwksServing::External;
    c.pactd_rules = true;
    c
}

/// Every check passed, except SKIPs of exactly these rules (with a reason).
fn assert_passes(report: &Report, allowed_skips: &[&str]) {
    println!("{}", report.to_text());
    for c in &report.checks {
        match c.outcome {
            Outcome::Pass => {}
            Outcome::Fail => panic!("{} failed: {}", c.name, c.line()),
            Outcome::Skip => {
                assert!(
                    allowed_skips.iter().any(|a| c.name.starts_with(a)),
                    "{} was skipped: {}",
                    c.name,
                    c.reason
                );
                assert!(!c.reason.is_empty(), "{} skipped without a reason", c.name);
            }
        }
    }
    assert_eq!(
        report.checks.len(),
        conformance::RULES.len(),
        "every rule is reported"
    );
    assert!(report.is_success());
}

/// The rules that cannot be exercised against pactd from outside.
const UNEXERCISABLE: [&str; 2] = [
    // No PACT operation closes a conversation.
    "§4.closed-context",
    // Not provoked: it would take a flood of requests.
    "§6.rate-limit-429",
];

#[tokio::test]
async fn the_delegated_profile_passes_against_pactd() {
    let (app, home, identity, _jwks) = pactd_with_agent().await;
    let approver = PactdApprover {
        state: app.state.clone(),
        primary: format!("alice-{}", uuid::Uuid::new_v4()),
        secondary: format!("bob-{}", uuid::Uuid::new_v4()),
    };
    let started = Instant::now();
    let report =
        conformance::run(pactd_config(&app, &identity, Profile::Delegated), &approver).await;
    println!(
        "delegated profile: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_passes(&report, &UNEXERCISABLE);
    // The run really went through the grant: receipts verified and chained.
    for name in [
        "§5.6.receipt-verifies",
        "§5.6.receipt-chain",
        "§5.3.slow-down-adds-5s",
    ] {
        assert_eq!(report.get(name).unwrap().outcome, Outcome::Pass, "{name}");
    }
    let junit = report.to_junit();
    assert!(junit.contains("<testsuite name=\"PACT §5.3\""));
    std::fs::remove_dir_all(home.dir()).ok();
}

#[tokio::test]
async fn the_identity_profile_passes_against_pactd() {
    let (app, home, identity, _jwks) = pactd_with_agent().await;
    let approver = conformance::PactdLoginApprover {
        email: "unused@example.com".into(),
        password: "unused".into(),
        totp_secret: None,
    };
    let report =
        conformance::run(pactd_config(&app, &identity, Profile::Identity), &approver).await;
    let mut allowed: Vec<&str> = UNEXERCISABLE.to_vec();
    allowed.push("§5");
    assert_passes(&report, &allowed);
    assert!(
        report
            .get("§5.metadata")
            .unwrap()
            .reason
            .contains("identity profile")
    );
    std::fs::remove_dir_all(home.dir()).ok();
}

/// Without registration the baseline fails and says what to register.
#[tokio::test]
async fn an_unregistered_agent_is_told_what_to_register() {
    let app = TestApp::spawn().await;
    let (home, identity) = new_identity(app.audience());
    let mut c = Config::new(app.state.config.card_url("demo"), identity, app.audience());
    c.profile = Profile::Identity;
    c.jwks = JwksServing::Serve("127.0.0.1:0".parse().unwrap());
    let approver = conformance::InteractiveApprover::default();
    let report = conformance::run(c, &approver).await;
    let baseline = report.get("§3.valid-token-accepted").unwrap();
    assert_eq!(baseline.outcome, Outcome::Fail);
    assert!(
        baseline.reason.contains(&format!(
            "pactd agent add --issuer {ISSUER} --jwks-uri http://127.0.0.1:"
        )),
        "{}",
        baseline.reason
    );
    let attack = report.get("§3.alg-none-refused").unwrap();
    assert_eq!(
        attack.outcome,
        Outcome::Skip,
        "a refusal proves nothing then"
    );
    assert!(!report.is_success());
    std::fs::remove_dir_all(home.dir()).ok();
}

// ---------------------------------------------------------------------------
// The agent's own commands: send, connect, refresh, receipts
// ---------------------------------------------------------------------------

/// A person who approves every link the agent shows, everything requested.
struct ApprovingPerson {
    state: AppState,
    user: String,
    links: usize,
}

impl client::Ui for ApprovingPerson {
    fn info(&mut self, msg: &str) {
        println!("{msg}");
    }
    fn warn(&mut self, msg: &str) {
        println!("warning: {msg}");
    }
    fn show_link(&mut self, device: &pact_proto::oauth::DeviceAuthorizationResponse) {
        self.links += 1;
        let (state, user, code) = (
            self.state.clone(),
            self.user.clone(),
            device.user_code.clone(),
        );
        tokio::spawn(async move {
            let auth = pact_server::consent::find_by_user_code(&state, &code)
                .await
                .unwrap()
                .unwrap();
            let scopes = auth.scopes.iter().cloned().collect::<BTreeSet<_>>();
            pact_server::consent::approve(
                &state,
                pact_server::consent::Approval {
                    authorization_id: auth.id,
                    user_sub: &user,
                    scopes,
                    authorization_details: None,
                },
                OffsetDateTime::now_utc(),
            )
            .await
            .unwrap();
        });
    }
    fn confirm(&mut self, _question: &str) -> bool {
        false
    }
}

#[tokio::test]
async fn the_agent_steps_up_refreshes_and_keeps_verified_chained_receipts() {
    let (app, home, _identity, _jwks) = pactd_with_agent().await;
    let agent = client::Agent::load(home.clone(), None).unwrap();
    let mut person = ApprovingPerson {
        state: app.state.clone(),
        user: "carol".to_owned(),
        links: 0,
    };
    let send = |text: &str| client::SendOptions {
        card_url: app.state.config.card_url("demo"),
        text: text.to_owned(),
        auto_connect: true,
        ..Default::default()
    };

    // A public question starts a conversation the agent remembers.
    let Reply::Message { context_id, .. } =
        client::send(&agent, &send("When are you open?"), &mut person)
            .await
            .unwrap()
    else {
        panic!("expected a message");
    };

    // An account question: step-up, the agent's own device flow, then the
    // same question again in the same conversation, with a verified receipt.
    let reply = client::send(&agent, &send("Show me my orders"), &mut person)
        .await
        .unwrap();
    let Reply::Message {
        text,
        context_id: ctx,
    } = reply
    else {
        panic!("expected the orders, got {reply:?}");
    };
    assert!(text.starts_with("Your orders"), "{text}");
    assert_eq!(ctx, context_id, "re-sent in the remembered context");
    assert_eq!(person.links, 1);
    let tokens = home.tokens().unwrap();
    let stored = tokens.values().next().unwrap().clone();
    assert_eq!(stored.scope, "orders:read");

    // Less than a minute left: refreshed transparently before sending.
    let mut all = home.tokens().unwrap();
    all.values_mut().for_each(|t| t.expires_at = 0);
    home.save_tokens(&all).unwrap();
    let reply = client::send(&agent, &send("Show me my orders"), &mut person)
        .await
        .unwrap();
    assert!(matches!(reply, Reply::Message { .. }), "{reply:?}");
    let refreshed = home.tokens().unwrap().values().next().unwrap().clone();
    assert_ne!(refreshed.refresh_token, stored.refresh_token);
    assert_eq!(person.links, 1, "no new consent for a refresh");

    // Every receipt verifies against the brand's keys; they chain per grant.
    let checks = client::check_receipts(&agent).await.unwrap();
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c.signature.is_ok()), "{checks:?}");
    assert_eq!(checks[1].chain, Some(Ok(())));

    // The grant is revoked behind the agent's back: invalid_token, the
    // refresh fails too, so it steps up and connects again.
    let grant: uuid::Uuid = checks[0].stored.receipt["claims"]["grantId"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    pact_db::grants::revoke(&app.db, grant, "revoked in a test")
        .await
        .unwrap();
    let reply = client::send(&agent, &send("Show me my orders"), &mut person)
        .await
        .unwrap();
    assert!(
        matches!(&reply, Reply::Message { text, .. } if text.starts_with("Your orders")),
        "{reply:?}"
    );
    assert_eq!(person.links, 2, "a new consent after the revocation");
    let checks = client::check_receipts(&agent).await.unwrap();
    assert_eq!(checks.len(), 3);
    assert!(checks.iter().all(|c| c.signature.is_ok()));
    std::fs::remove_dir_all(home.dir()).ok();
}

// ---------------------------------------------------------------------------
// The suite can fail: a fake provider breaking one rule at a time
// ---------------------------------------------------------------------------

mod fake {
    use super::*;

    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::extract::{Form, State};
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::Response;
    use axum::routing::{get, post};
    use pact_jose::{KeySet, PaJwtRules, ProviderKey, parse_pa_jwt};
    use pact_proto::A2aError;
    use pact_proto::a2a::{AgentMessage, parse_send_message};
    use pact_proto::card::{AgentCard, CardInput, DeviceCodeFlow};
    use serde_json::{Value, json};

    /// The one rule a fake breaks.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Flaw {
        None,
        /// §3: accepts `alg: none`.
        AcceptsAlgNone,
        /// §3: its 401 has a body.
        BodyOn401,
        /// §4: `application/json` instead of `application/a2a+json`.
        PlainJson,
        /// §4: tells a foreign context apart from an unknown one.
        RevealsForeignContext,
        /// §4: a retried messageId runs the agent again.
        ReplayRunsAgain,
        /// §5.3 / RFC 8628: never says slow_down.
        NoSlowDown,
    }

    /// The owner's sub, and messageId → stored reply.
    type Conversation = (String, HashMap<String, Value>);

    struct Fake {
        flaw: Flaw,
        keys: KeySet,
        audience: String,
        base: String,
        provider_key: ProviderKey,
        /// contextId → its conversation.
        contexts: Mutex<HashMap<String, Conversation>>,
        /// device_code → (last poll, interval).
        devices: Mutex<HashMap<String, (Option<Instant>, u64)>>,
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
            if self.flaw == Flaw::AcceptsAlgNone
                && let Some((h, c)) = pact_agent::jwt::decode_unverified(token)
                && h["alg"]
                    .as_str()
                    .is_some_and(|a| a.eq_ignore_ascii_case("none"))
            {
                return c["sub"].as_str().map(str::to_owned);
            }
            let rules = PaJwtRules::new(self.audience.clone());
            let jwt = parse_pa_jwt(token, &rules).ok()?;
            if jwt.issuer() != ISSUER {
                return None;
            }
            let key = self.keys.find(jwt.kid(), jwt.alg())?;
            let now = OffsetDateTime::now_utc().unix_timestamp();
            Some(jwt.verify(&key, &rules, now).ok()?.sub)
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
        f.a2a(200, &serde_json::to_value(card).unwrap())
    }

    async fn send(State(f): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
        let Some(sub) = f.authenticate(&headers) else {
            return f.unauthorized();
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
                    "token_endpoint": format!("{o}/token"), "jwks_uri": format!("{o}/jwks.json")}),
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
        f.devices.lock().unwrap().insert(code.clone(), (None, 1));
        f.oauth(
            200,
            &json!({"device_code": code, "user_code": "BCDF-GHJK",
                    "verification_uri": format!("{}/device", f.base),
                    "verification_uri_complete": format!("{}/device?user_code=BCDF-GHJK", f.base),
                    "expires_in": 600, "interval": 1}),
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
        let code = form.get("device_code").cloned().unwrap_or_default();
        let mut devices = f.devices.lock().unwrap();
        let Some((last, interval)) = devices.get_mut(&code) else {
            return f.oauth(400, &json!({"error": "invalid_grant"}));
        };
        let too_fast = last.is_some_and(|l| l.elapsed() < Duration::from_secs(*interval));
        *last = Some(Instant::now());
        if too_fast && f.flaw != Flaw::NoSlowDown {
            *interval += 5;
            return f.oauth(400, &json!({"error": "slow_down"}));
        }
        f.oauth(400, &json!({"error": "authorization_pending"}))
    }

    /// Starts a fake provider with `flaw`; returns its card URL.
    pub async fn start(flaw: Flaw, identity: &Identity, audience: &str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let fake = Arc::new(Fake {
            flaw,
            keys: KeySet::from_json(identity.key.jwks().to_string().as_bytes()).unwrap(),
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
}

use fake::Flaw;

/// Each flaw, the check that must catch it, and words its reason must hold.
const CAUGHT: [(Flaw, &str, &[&str]); 6] = [
    (
        Flaw::AcceptsAlgNone,
        "§3.alg-none-refused",
        &["alg \"none\"", "got HTTP 200"],
    ),
    (
        Flaw::BodyOn401,
        "§3.missing-token-refused",
        &["401 has no body"],
    ),
    (
        Flaw::PlainJson,
        "§4.content-type-exact",
        &["\"application/json\"", "application/a2a+json"],
    ),
    (
        Flaw::RevealsForeignContext,
        "§4.foreign-context",
        &["Unknown contextId", "This context belongs to someone else"],
    ),
    (
        Flaw::ReplayRunsAgain,
        "§4.replayed-message-id",
        &["the agent ran again"],
    ),
    (
        Flaw::NoSlowDown,
        "§5.3.slow-down",
        &["slow_down", "authorization_pending"],
    ),
];

struct NoApprover;
impl Approver for NoApprover {
    fn approve<'a>(&'a self, _r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus> {
        Box::pin(async { ApprovalStatus::Unavailable("the fake has no consent page".into()) })
    }
}

async fn run_against_fake(flaw: Flaw, only: &[&str]) -> Report {
    let audience = "https://fake-provider.example/a2a";
    let (home, identity) = new_identity(audience);
    let card_url = fake::start(flaw, &identity, audience).await;
    let mut c = Config::new(card_url, identity, audience);
    c.only = only.iter().map(|s| (*s).to_owned()).collect();
    let report = conformance::run(c, &NoApprover).await;
    std::fs::remove_dir_all(home.dir()).ok();
    println!("{flaw:?}:\n{}", report.to_text());
    report
}

/// Without a flaw the fake passes every check the flaws are caught by, so
/// each failure below is the flaw's doing.
#[tokio::test]
async fn the_fake_without_a_flaw_passes_the_checks_that_catch_the_flaws() {
    let names: Vec<&str> = CAUGHT.iter().map(|(_, name, _)| *name).collect();
    let report = run_against_fake(Flaw::None, &names).await;
    for name in names {
        let c = report.get(name).unwrap();
        assert_eq!(c.outcome, Outcome::Pass, "{}", c.line());
    }
}

#[tokio::test]
async fn each_broken_rule_fails_its_check_with_a_clear_message() {
    for (flaw, name, words) in CAUGHT {
        let report = run_against_fake(flaw, &[name]).await;
        let c = report.get(name).unwrap();
        assert_eq!(
            c.outcome,
            Outcome::Fail,
            "{flaw:?} was not caught: {}",
            c.line()
        );
        for w in words {
            assert!(c.reason.contains(w), "{flaw:?}: {:?} lacks {w:?}", c.reason);
        }
        assert!(
            c.evidence.is_some(),
            "{flaw:?}: a failure shows the offending response"
        );
        assert!(!report.is_success());
    }
}
