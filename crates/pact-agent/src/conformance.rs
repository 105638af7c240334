//! The conformance suite (the `pact-conformance` crate), and the one
//! approver that knows pactd's pages: [`PactdLoginApprover`] signs in to
//! pactd's own pages and clicks Approve or Deny there. The suite itself is
//! provider-agnostic; this is the only pactd-specific piece of a run.

use std::fmt;

pub use pact_conformance::*;

use crate::pactd_login::{DeviceLink, LoginAccount, PactdBrowser, PageDecision};

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
