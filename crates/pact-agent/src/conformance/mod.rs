//! A conformance suite for any PACT 1.0 provider: one check per rule of
//! docs/protocol.md §2–6 and the RFC 8628 polling behaviours, each named after
//! the section it tests (`§3.alg-none-refused`, `§4.unknown-context`,
//! `§5.3.slow-down`, …) and ending PASS, FAIL (with the reason and the
//! offending response) or SKIP (with why the rule could not be exercised).
//!
//! ```text
//! let report = pact_agent::conformance::run(config, &approver).await;
//! ```
//!
//! The run needs a registered identity: the Provider must know the agent's
//! issuer and JWKS URI (registration is the operator's job, PACT §3). The
//! run serves the agent's JWKS itself ([`JwksServing::Serve`]) on the address
//! that was registered, or relies on it being served elsewhere
//! ([`JwksServing::External`]). When the valid-token baseline gets 401, the
//! report says exactly what to register.
//!
//! The Delegated profile needs a person (or a test) to approve device
//! authorizations: an [`Approver`]. [`InteractiveApprover`] prints the link
//! and waits; [`PactdLoginApprover`] signs in to pactd's own pages and
//! clicks Approve or Deny there; a test passes its own.

mod delegated;
mod expect;
mod forge;
mod identity;
mod messages;
mod report;
mod runner;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use report::{Check, Outcome, Report, xml_escape};

use crate::pactd_login::{DeviceLink, LoginAccount, PactdBrowser, PageDecision};
use crate::state::Identity;

/// Called as each check ends.
pub type Progress = Arc<dyn Fn(&Check) + Send + Sync>;

/// A boxed future, so [`Approver`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// PACT's two conformance profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Sections 1–4 and 6.
    Identity,
    /// Identity plus section 5.
    Delegated,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Delegated => "delegated",
        }
    }
}

/// Who serves the agent's JWKS during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JwksServing {
    /// Serve it on this address for the run. The registered JWKS URI must be
    /// `http://{addr}/.well-known/jwks.json`: use a fixed port that was
    /// registered (port 0 only works when registration happens after binding).
    Serve(SocketAddr),
    /// It is served elsewhere (already running, or behind HTTPS).
    External,
}

/// What to check and how.
#[derive(Clone)]
pub struct Config {
    /// The brand's Agent Card URL (PACT §1: PAs get it from the brand).
    pub card_url: String,
    /// The registered agent: issuer and key.
    pub identity: Identity,
    /// The Provider-assigned PA-JWT audience (PACT §3).
    pub audience: String,
    pub profile: Profile,
    /// A second brand at the same Provider (for `§3.token-on-several-brands`,
    /// `§5.3.foreign-code`, `§5.5.token-other-brand-refused`).
    pub other_brand: Option<String>,
    pub jwks: JwksServing,
    /// A message that needs a scope (step-up without a token, a receipt
    /// with one). pactd's demo brand: "Show me my orders".
    pub scoped_prompt: String,
    /// A message any caller gets an answer to.
    pub public_prompt: String,
    /// Also check the rules docs/protocol.md marks **pactd:** (a PACT provider
    /// may choose otherwise).
    pub pactd_rules: bool,
    /// Run only checks whose names start with one of these (all when empty).
    pub only: Vec<String>,
    /// Longest single wait a check may take (e.g. for a device code to expire).
    pub max_wait: Duration,
    /// Called as each check ends (the command line prints it).
    pub progress: Option<Progress>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("card_url", &self.card_url)
            .field("issuer", &self.identity.settings.issuer)
            .field("audience", &self.audience)
            .field("profile", &self.profile)
            .field("other_brand", &self.other_brand)
            .field("jwks", &self.jwks)
            .field("pactd_rules", &self.pactd_rules)
            .field("only", &self.only)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Defaults: Delegated profile, JWKS served elsewhere, pactd demo prompts,
    /// PACT rules only, 30 s longest wait.
    pub fn new(
        card_url: impl Into<String>,
        identity: Identity,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            card_url: card_url.into(),
            identity,
            audience: audience.into(),
            profile: Profile::Delegated,
            other_brand: None,
            jwks: JwksServing::External,
            scoped_prompt: "Show me my orders".to_owned(),
            public_prompt: "When are you open?".to_owned(),
            pactd_rules: false,
            only: Vec::new(),
            max_wait: Duration::from_secs(30),
            progress: None,
        }
    }
}

/// Which of the tester's accounts at the brand should decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Account {
    /// The main test account.
    Primary,
    /// A different account (for the one-user-per-context rule of §5.5).
    Secondary,
}

/// What the approver should decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Approve exactly these scopes (untick the rest).
    Approve {
        scopes: Vec<String>,
    },
    Deny,
}

/// A device authorization to decide (PACT §5.2).
#[derive(Clone, Debug)]
pub struct ApprovalRequest {
    /// The brand's interface URL.
    pub brand: String,
    pub brand_name: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub requested_scopes: Vec<String>,
    pub decision: Decision,
    pub account: Account,
    /// The check that needs it.
    pub purpose: String,
}

/// What an [`Approver`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalStatus {
    /// The decision is recorded; the runner polls for the result.
    Done,
    /// A person was asked; the runner polls until they decide or the code expires.
    Asked,
    /// This approver cannot decide: the checks that need it SKIP with this reason.
    Unavailable(String),
    /// It tried and failed: the checks that need it FAIL with this reason.
    Failed(String),
}

/// Decides device authorizations during a run (PACT §5.2 is the
/// person's job; the suite never approves by itself).
pub trait Approver: Send + Sync {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus>;
}

/// Prints the link and what to do, and lets the runner wait for a person.
#[derive(Clone, Debug, Default)]
pub struct InteractiveApprover {
    /// Also draw the link as a QR code.
    pub qr: bool,
}

impl Approver for InteractiveApprover {
    fn approve<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus> {
        Box::pin(async move {
            eprintln!();
            eprintln!("── approval needed for {} ──", r.purpose);
            eprintln!("Open:  {}", r.verification_uri_complete);
            eprintln!("   or  {} and enter {}", r.verification_uri, r.user_code);
            if self.qr
                && let Some(q) = crate::qr::render(&r.verification_uri_complete)
            {
                eprintln!("{q}");
            }
            match r.account {
                Account::Primary => {
                    eprintln!("Sign in to {} with your FIRST test account.", r.brand_name)
                }
                Account::Secondary => eprintln!(
                    "Sign in to {} with a SECOND test account (not the first one).",
                    r.brand_name
                ),
            }
            match &r.decision {
                Decision::Deny => eprintln!("Then DENY the request."),
                Decision::Approve { scopes } => {
                    eprintln!(
                        "Then APPROVE, with only these scopes ticked: {}",
                        scopes.join(", ")
                    )
                }
            }
            eprintln!("Waiting…");
            ApprovalStatus::Asked
        })
    }
}

/// Decides on pactd's own pages over HTTP, as the person would: opens the
/// link, confirms the code, signs in with a built-in account (password, then
/// an authenticator code when asked), ticks the scopes it was told to, and
/// presses Approve or Deny ([`crate::pactd_login`]). Each account keeps its
/// session between decisions, like a person's browser.
///
/// The one-user-per-context check (§5.5) needs a second account; without
/// one it SKIPs with that reason.
pub struct PactdLoginApprover {
    primary: PactdBrowser,
    secondary: Option<PactdBrowser>,
}

impl fmt::Debug for PactdLoginApprover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PactdLoginApprover")
            .field("primary", &self.primary.email())
            .field(
                "secondary",
                &self.secondary.as_ref().map(PactdBrowser::email),
            )
            .finish()
    }
}

impl PactdLoginApprover {
    pub fn new(primary: LoginAccount, secondary: Option<LoginAccount>) -> anyhow::Result<Self> {
        Ok(Self {
            primary: PactdBrowser::new(primary)?,
            secondary: secondary.map(PactdBrowser::new).transpose()?,
        })
    }
}

impl Approver for PactdLoginApprover {
    fn approve<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus> {
        Box::pin(async move {
            let browser = match (r.account, &self.secondary) {
                (Account::Primary, _) => &self.primary,
                (Account::Secondary, Some(b)) => b,
                (Account::Secondary, None) => {
                    return ApprovalStatus::Unavailable(
                        "needs a second account at the brand: pass --second-login-email (and \
                         --second-login-password, --second-totp-secret)"
                            .to_owned(),
                    );
                }
            };
            let link = DeviceLink {
                verification_uri_complete: Some(r.verification_uri_complete.as_str()),
                verification_uri: &r.verification_uri,
                user_code: &r.user_code,
            };
            let decision = match &r.decision {
                Decision::Approve { scopes } => PageDecision::Approve(scopes.clone()),
                Decision::Deny => PageDecision::Deny,
            };
            match browser.decide(link, &decision).await {
                Ok(_) => ApprovalStatus::Done,
                Err(e) => ApprovalStatus::Failed(format!(
                    "pactd-login as {} failed to {e}",
                    browser.email()
                )),
            }
        })
    }
}

/// One rule of the catalogue.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub name: &'static str,
    /// What the check asserts.
    pub text: &'static str,
    /// A **pactd:** choice rather than PACT itself (checked with `pactd_rules`).
    pub pactd: bool,
}

const fn rule(name: &'static str, text: &'static str) -> Rule {
    Rule {
        name,
        text,
        pactd: false,
    }
}

const fn pactd(name: &'static str, text: &'static str) -> Rule {
    Rule {
        name,
        text,
        pactd: true,
    }
}

/// Every check, in report order.
pub const RULES: &[Rule] = &[
    pactd(
        "§1.pactd-urls",
        "interface, OAuth and verification URLs follow the §1 table",
    ),
    rule(
        "§2.card-served",
        "the card is served without authentication, as a JSON object",
    ),
    rule(
        "§2.unknown-brand-404",
        "an unknown brand's card is a 404 with an empty body",
    ),
    rule(
        "§2.interface",
        "supportedInterfaces holds {url, HTTP+JSON, 1.0}, first",
    ),
    rule(
        "§2.pa-jwt-scheme",
        "securitySchemes.paJwt is an HTTP Bearer JWT scheme",
    ),
    rule(
        "§2.identity-requirement",
        "one securityRequirements entry names paJwt alone",
    ),
    rule(
        "§2.delegation-scheme",
        "userDelegation is an OAuth2 device-code scheme with its own requirement",
    ),
    rule(
        "§2.fields",
        "name, description, version, provider, capabilities, modes, skills",
    ),
    pactd(
        "§2.pactd-cache-cors",
        "Cache-Control: public, max-age=300 and Access-Control-Allow-Origin: *",
    ),
    rule(
        "§3.valid-token-accepted",
        "a valid PA-JWT is accepted (the baseline for every refusal)",
    ),
    rule(
        "§3.missing-token-refused",
        "no Authorization, or not Bearer: bare 401",
    ),
    rule(
        "§3.malformed-refused",
        "tokens that are not compact JWS: bare 401",
    ),
    rule("§3.alg-none-refused", "alg none/None/NONE: bare 401"),
    rule(
        "§3.hs256-key-confusion-refused",
        "HS256 keyed with the PA's public key: bare 401",
    ),
    rule(
        "§3.rs256-against-ec-key-refused",
        "RS256 under the kid of the PA's EC key: bare 401",
    ),
    rule(
        "§3.unknown-kid-refused",
        "an unknown kid signed by a foreign key: bare 401",
    ),
    rule(
        "§3.foreign-key-refused",
        "a foreign key under the PA's kid: bare 401",
    ),
    rule(
        "§3.tampered-signature-refused",
        "one flipped signature bit: bare 401",
    ),
    rule(
        "§3.tampered-payload-refused",
        "claims edited after signing: bare 401",
    ),
    rule(
        "§3.jku-ignored",
        "jku/x5u/jwk headers naming an attacker's key: bare 401, never fetched",
    ),
    rule("§3.oversized-refused", "a 16 KiB PA-JWT: bare 401"),
    rule(
        "§3.iss-unknown-refused",
        "an unregistered issuer (also a near miss): bare 401",
    ),
    rule(
        "§3.sub-missing-refused",
        "sub missing, empty or not a string: bare 401",
    ),
    rule("§3.aud-missing-refused", "aud missing or null: bare 401"),
    rule("§3.aud-wrong-refused", "another audience: bare 401"),
    rule(
        "§3.aud-array-refused",
        "aud as an array (even holding the audience): bare 401",
    ),
    rule(
        "§3.aud-interface-url-refused",
        "aud = the interface URL (never per brand): bare 401",
    ),
    rule("§3.iat-missing-refused", "no iat: bare 401"),
    rule("§3.iat-future-refused", "iat 31 s in the future: bare 401"),
    rule(
        "§3.iat-skew-tolerated",
        "iat 25 s in the future is within the 30 s skew: accepted",
    ),
    rule("§3.exp-missing-refused", "no exp: bare 401"),
    rule("§3.exp-past-refused", "exp 31 s in the past: bare 401"),
    rule(
        "§3.lifetime-over-300-refused",
        "exp − iat = 301 s: bare 401",
    ),
    rule("§3.jti-optional", "a PA-JWT without jti is accepted"),
    rule(
        "§3.token-reuse-accepted",
        "the same PA-JWT works twice (replay tracking is not required)",
    ),
    rule(
        "§3.token-on-several-brands",
        "the same PA-JWT works on two brands",
    ),
    rule(
        "§3.auth-before-brand",
        "a bad PA-JWT at an unknown brand: 401, not 404",
    ),
    rule(
        "§3.auth-before-body",
        "a bad PA-JWT with a bad body: 401, not 400",
    ),
    rule(
        "§3.every-operation-authenticated",
        "every A2A operation without a PA-JWT: bare 401",
    ),
    rule(
        "§4.reply-shape",
        "message:send → 200 {message: {messageId, contextId, ROLE_AGENT, [{text}]}}",
    ),
    rule(
        "§4.content-type-exact",
        "every A2A response is exactly application/a2a+json",
    ),
    rule(
        "§4.any-request-content-type",
        "any request Content-Type (or none) is accepted",
    ),
    rule(
        "§4.a2a-version-optional",
        "any or no A2A-Version header is accepted",
    ),
    rule(
        "§4.context-continues",
        "a returned contextId continues the conversation",
    ),
    rule(
        "§4.unknown-context",
        "an unknown contextId: INVALID_PARAMS \"Unknown contextId\"",
    ),
    rule(
        "§4.foreign-context",
        "another sub's contextId: exactly the unknown-context error",
    ),
    rule(
        "§4.replayed-message-id",
        "a repeated messageId returns the stored reply",
    ),
    rule(
        "§4.role-user-required",
        "role other than ROLE_USER: INVALID_PARAMS",
    ),
    rule(
        "§4.blank-text-refused",
        "no non-blank text part: INVALID_PARAMS",
    ),
    rule(
        "§4.non-text-part-refused",
        "raw/url/data parts: CONTENT_TYPE_NOT_SUPPORTED",
    ),
    rule(
        "§4.task-id-refused",
        "a taskId: TASK_NOT_FOUND \"Task not found\"",
    ),
    rule(
        "§4.bad-json-refused",
        "a body that is not JSON: INVALID_PARAMS",
    ),
    rule(
        "§4.tasks-list",
        "GET tasks: 200 {tasks: [], nextPageToken: \"\", pageSize: 50, totalSize: 0}",
    ),
    rule(
        "§4.tasks-page-size",
        "pageSize 1–100 is echoed; other query parameters are ignored",
    ),
    rule(
        "§4.tasks-page-size-invalid",
        "pageSize 0, 101, -1, abc: INVALID_PARAMS",
    ),
    rule(
        "§4.task-get-not-found",
        "GET tasks/{id}: TASK_NOT_FOUND \"Task not found: {id}\"",
    ),
    rule(
        "§4.task-cancel-not-found",
        "POST tasks/{id}:cancel: TASK_NOT_FOUND \"Task not found: {id}\"",
    ),
    rule(
        "§4.stream-unsupported",
        "POST message:stream: UNSUPPORTED_OPERATION",
    ),
    rule(
        "§4.subscribe-unsupported",
        "POST tasks/{id}:subscribe: UNSUPPORTED_OPERATION",
    ),
    rule(
        "§4.extended-card-unsupported",
        "GET extendedAgentCard: UNSUPPORTED_OPERATION",
    ),
    rule(
        "§4.push-configs-unsupported",
        "pushNotificationConfigs routes: PUSH_NOTIFICATION_NOT_SUPPORTED",
    ),
    rule(
        "§4.unmatched-route-404",
        "unknown paths: 404, no A2A body, before authentication",
    ),
    rule(
        "§4.wrong-method-405",
        "wrong methods: 405 (or 404), no A2A body, before authentication",
    ),
    rule(
        "§4.closed-context",
        "a closed conversation: UNSUPPORTED_OPERATION",
    ),
    rule(
        "§5.metadata",
        "RFC 8414 metadata at oauth2MetadataUrl matches the card",
    ),
    rule(
        "§5.1.device-authorization",
        "device authorization: RFC 8628 §3.2 fields, Cache-Control: no-store",
    ),
    pactd(
        "§5.1.pactd-codes",
        "user_code XXXX-XXXX of BCDFGHJKLMNPQRSTVWXZ; {public_url}/device links",
    ),
    rule(
        "§5.1.requires-pa-jwt",
        "device authorization without a PA-JWT: bare 401",
    ),
    rule("§5.1.unknown-scope", "an unknown scope: 400 invalid_scope"),
    rule(
        "§5.1.client-id-mismatch",
        "client_id ≠ PA iss: 401 invalid_client",
    ),
    rule(
        "§5.3.authorization-pending",
        "before approval: authorization_pending",
    ),
    rule("§5.3.slow-down", "polling faster than interval: slow_down"),
    rule(
        "§5.3.slow-down-adds-5s",
        "after slow_down the interval is 5 s longer",
    ),
    rule("§5.3.access-denied", "a denied request: access_denied"),
    rule("§5.3.expired-token", "an expired code: expired_token"),
    rule("§5.3.unknown-code", "an unknown device_code: invalid_grant"),
    rule(
        "§5.3.foreign-code",
        "another brand's device_code: invalid_grant",
    ),
    rule(
        "§5.3.unsupported-grant-type",
        "an unknown grant_type: unsupported_grant_type",
    ),
    rule(
        "§5.3.token-response",
        "success: {token_type Bearer, access_token, refresh_token, expires_in, scope}",
    ),
    rule(
        "§5.3.scope-may-be-less",
        "scope is what was approved, within what was requested",
    ),
    rule("§5.3.redeem-twice", "a redeemed device_code: invalid_grant"),
    rule(
        "§5.3.refresh",
        "refresh returns a new pair, never a wider scope",
    ),
    pactd(
        "§5.3.refresh-reuse-revokes",
        "a used refresh token: invalid_grant, and the grant is revoked",
    ),
    rule(
        "§5.3.error-shape",
        "OAuth errors: JSON {error, error_description?}, 400 (401 invalid_client)",
    ),
    rule("§5.4.jwks", "the metadata jwks_uri serves ES256 keys"),
    rule(
        "§5.4.delegation-token",
        "the token verifies; iss, aud = iface, sub, client_id, scope, grant_id, iat, exp ≤ 1 h, jti",
    ),
    pactd("§5.4.pactd-header", "token header typ at+jwt with a kid"),
    rule(
        "§5.5.step-up-task",
        "a turn needing a scope without one: 200 task TASK_STATE_AUTH_REQUIRED",
    ),
    rule(
        "§5.5.step-up-context-open",
        "after a step-up the conversation stays open",
    ),
    rule(
        "§5.5.step-up-resend",
        "re-sent with a token in the same context: a message",
    ),
    rule(
        "§5.5.pa-jwt-checked-first",
        "a delegation token without a PA-JWT: bare 401",
    ),
    rule(
        "§5.5.tampered-token-refused",
        "a forged delegation token: 401 error=\"invalid_token\", no body",
    ),
    rule(
        "§5.5.token-other-brand-refused",
        "a token of another brand: 401 error=\"invalid_token\"",
    ),
    rule(
        "§5.5.context-other-user",
        "a context that ran as one user refuses another (also on retry)",
    ),
    rule(
        "§5.5.revoked-grant-refused",
        "a revoked grant's token: 401 error=\"invalid_token\"",
    ),
    rule(
        "§5.6.receipt-present",
        "a delegated reply carries pact.receipt {jws, claims}",
    ),
    rule(
        "§5.6.receipt-verifies",
        "the receipt verifies against jwks_uri and names the grant, user, PA, brand",
    ),
    rule(
        "§5.6.receipt-on-retry",
        "a retried messageId returns the same receipt",
    ),
    rule(
        "§5.6.receipt-chain",
        "prev is the hash of the grant's previous receipt (pactd extension)",
    ),
    rule(
        "§5.7.unknown-type-refused",
        "an unknown authorization_details type: invalid_authorization_details",
    ),
    rule(
        "§5.7.malformed-refused",
        "malformed authorization_details: invalid_authorization_details",
    ),
    rule(
        "§6.error-envelope",
        "every A2A error is the AIP-193 envelope",
    ),
    rule(
        "§6.reason-status-table",
        "every A2A error's HTTP code and status match its reason",
    ),
    rule("§6.rate-limit-429", "a 429 carries Retry-After"),
];

/// The rule of that name.
pub fn rule_named(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

/// Runs the suite. Never panics; every problem is a FAIL or SKIP in the
/// report, whose `is_success` is what a command's exit status follows.
pub async fn run(config: Config, approver: &dyn Approver) -> Report {
    let started = Instant::now();
    match runner::Runner::new(config.clone(), approver) {
        Ok(mut runner) => {
            runner.run().await;
            runner.into_report(started.elapsed())
        }
        Err(why) => runner::setup_failure(&config, &why, started.elapsed()),
    }
}
