//! A conformance suite for any PACT 1.0 provider: one check per rule of
//! docs/protocol.md §2–6 and the RFC 8628 polling behaviours, each named after
//! the section it tests (`§3.alg-none-refused`, `§4.unknown-context`,
//! `§5.3.slow-down`, …). Each check has a level and a source ([`RuleId`],
//! [`Rule`]): a broken MUST is FAIL, a broken SHOULD is WARN, a pactd
//! convention not followed is INFO; only FAIL fails a run. A check that
//! cannot be exercised is SKIP, with why. Checks judge behaviour and shape,
//! never names or strings PACT does not fix.
//!
//! ```text
//! let report = pact_conformance::run(config, &approver).await;
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
//! and waits; [`CommandApprover`] runs a program (a
//! script driving any provider's pages) with the request in its
//! environment; a test passes its own.

mod admission;
mod command;
mod delegated;
mod expect;
mod forge;
mod identity;
mod messages;
mod report;
mod rules;
mod runner;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use command::CommandApprover;
pub use report::{Check, Outcome, Report, xml_escape};
pub use rules::{Level, Rule, RuleId, markdown as checks_markdown};

use pact_client::state::Identity;

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
            .field("only", &self.only)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// Defaults: Delegated profile, JWKS served elsewhere, pactd demo prompts,
    /// 30 s longest wait.
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
                && let Some(q) = pact_client::qr::render(&r.verification_uri_complete)
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

/// Runs the suite. Never panics; every problem is a FAIL or SKIP in the
/// report, whose `is_success` is what a command's exit status follows.
pub async fn run(config: Config, approver: &dyn Approver) -> Report {
    let started = Instant::now();
    match runner::Runner::new(config.clone(), approver) {
        Ok(mut runner) => {
            let stopped = runner.run().await.err();
            runner.into_report(stopped, started.elapsed())
        }
        Err(why) => runner::setup_failure(&config, &why, started.elapsed()),
    }
}
