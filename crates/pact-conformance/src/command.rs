//! `--approve command -- <program> [args]`: decide device authorizations
//! with any program, so any provider's login and consent pages can be
//! driven (a Playwright script, curl, anything).
//!
//! The program gets the request in its environment and the runner waits
//! for it to exit:
//!
//! | Variable | Value |
//! |---|---|
//! | `PACT_VERIFICATION_URI` | RFC 8628 `verification_uri` |
//! | `PACT_VERIFICATION_URI_COMPLETE` | `verification_uri_complete` (may be empty) |
//! | `PACT_USER_CODE` | the user code |
//! | `PACT_REQUESTED_SCOPES` | the scopes requested, space-separated |
//! | `PACT_DECISION` | `approve` or `deny` |
//! | `PACT_APPROVE_SCOPES` | the scopes to leave ticked, space-separated (empty on deny) |
//! | `PACT_DENY_SCOPES` | the requested scopes to untick, space-separated (all on deny) |
//! | `PACT_ACCOUNT` | `primary`, or `secondary`: a different account at the brand |
//! | `PACT_BRAND` | the brand's interface URL |
//! | `PACT_BRAND_NAME` | the brand's name from its card |
//! | `PACT_PURPOSE` | the check that needs the decision |
//!
//! Its stdout is discarded; its stderr is kept for the report. Exit 0:
//! decided (the runner then polls the token endpoint). Exit 3:
//! this program cannot decide this request (e.g. no second account): the
//! checks needing it SKIP, with the last line of its stderr as the reason.
//! Anything else, or no exit within the timeout: the checks needing it
//! FAIL, with the tail of its stderr.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::process::Command;

use crate::{Account, ApprovalRequest, ApprovalStatus, Approver, BoxFuture, Decision};

/// The exit status that means "cannot decide this one" (SKIP, not FAIL).
pub const EXIT_UNAVAILABLE: i32 = 3;
/// Longest stderr excerpt quoted in a reason.
const MAX_STDERR: usize = 1500;

/// Runs `program args…` for each decision.
#[derive(Clone, Debug)]
pub struct CommandApprover {
    pub program: String,
    pub args: Vec<String>,
    /// How long one decision may take before the program is killed.
    pub timeout: Duration,
    /// More environment for the program (its own settings), besides the
    /// runner's own and the request's.
    pub env: Vec<(String, String)>,
}

impl CommandApprover {
    pub fn new(program: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            program: program.into(),
            args,
            timeout: Duration::from_secs(120),
            env: Vec::new(),
        }
    }

    /// The environment the program gets for `r`.
    pub fn environment(r: &ApprovalRequest) -> Vec<(&'static str, String)> {
        let (decision, approve) = match &r.decision {
            Decision::Approve { scopes } => ("approve", scopes.clone()),
            Decision::Deny => ("deny", Vec::new()),
        };
        let deny: Vec<String> = r
            .requested_scopes
            .iter()
            .filter(|s| !approve.contains(s))
            .cloned()
            .collect();
        vec![
            ("PACT_VERIFICATION_URI", r.verification_uri.clone()),
            (
                "PACT_VERIFICATION_URI_COMPLETE",
                r.verification_uri_complete.clone(),
            ),
            ("PACT_USER_CODE", r.user_code.clone()),
            ("PACT_REQUESTED_SCOPES", r.requested_scopes.join(" ")),
            ("PACT_DECISION", decision.to_owned()),
            ("PACT_APPROVE_SCOPES", approve.join(" ")),
            ("PACT_DENY_SCOPES", deny.join(" ")),
            (
                "PACT_ACCOUNT",
                match r.account {
                    Account::Primary => "primary",
                    Account::Secondary => "secondary",
                }
                .to_owned(),
            ),
            ("PACT_BRAND", r.brand.clone()),
            ("PACT_BRAND_NAME", r.brand_name.clone()),
            ("PACT_PURPOSE", r.purpose.clone()),
        ]
    }

    async fn run(&self, r: &ApprovalRequest) -> ApprovalStatus {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(Self::environment(r))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                return ApprovalStatus::Failed(format!("cannot run {:?}: {e}", self.program));
            }
        };
        let mut stderr = child.stderr.take();
        let read_stderr = async {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                s.read_to_end(&mut buf).await.ok();
            }
            buf
        };
        let waited = tokio::time::timeout(self.timeout, async {
            let (status, err) = tokio::join!(child.wait(), read_stderr);
            (status, err)
        })
        .await;
        let (status, err) = match waited {
            Ok(x) => x,
            Err(_) => {
                child.kill().await.ok();
                return ApprovalStatus::Failed(format!(
                    "{:?} did not finish within {} s",
                    self.program,
                    self.timeout.as_secs()
                ));
            }
        };
        let err = String::from_utf8_lossy(&err);
        let tail = tail(&err);
        match status {
            Ok(s) if s.success() => ApprovalStatus::Done,
            Ok(s) if s.code() == Some(EXIT_UNAVAILABLE) => ApprovalStatus::Unavailable(format!(
                "{:?} cannot decide this request: {}",
                self.program,
                err.lines().last().unwrap_or("(no reason given)")
            )),
            Ok(s) => ApprovalStatus::Failed(format!("{:?} exited with {s}: {tail}", self.program)),
            Err(e) => ApprovalStatus::Failed(format!("waiting for {:?}: {e}", self.program)),
        }
    }
}

/// The end of a program's stderr, for a reason.
fn tail(s: &str) -> String {
    let s = s.trim();
    if s.is_empty() {
        return "(no output on stderr)".to_owned();
    }
    let n = s.chars().count();
    if n <= MAX_STDERR {
        s.to_owned()
    } else {
        let cut: String = s.chars().skip(n - MAX_STDERR).collect();
        format!("…{cut}")
    }
}

impl Approver for CommandApprover {
    fn approve<'a>(&'a self, r: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalStatus> {
        Box::pin(self.run(r))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn request(decision: Decision) -> ApprovalRequest {
        ApprovalRequest {
            brand: "http://p.example/a2a/demo".into(),
            brand_name: "Demo".into(),
            user_code: "BCDF-GHJK".into(),
            verification_uri: "http://p.example/device".into(),
            verification_uri_complete: "http://p.example/device?user_code=BCDF-GHJK".into(),
            requested_scopes: vec!["orders:read".into(), "orders:cancel".into()],
            decision,
            account: Account::Secondary,
            purpose: "§5.5.context-other-user".into(),
        }
    }

    fn sh(script: &str) -> CommandApprover {
        CommandApprover::new("sh", vec!["-c".into(), script.into()])
    }

    #[tokio::test]
    async fn the_program_gets_the_request_and_its_exit_status_decides() {
        let r = request(Decision::Approve {
            scopes: vec!["orders:read".into()],
        });
        let check = r#"test "$PACT_USER_CODE" = BCDF-GHJK && test "$PACT_DECISION" = approve \
            && test "$PACT_APPROVE_SCOPES" = orders:read && test "$PACT_DENY_SCOPES" = orders:cancel \
            && test "$PACT_REQUESTED_SCOPES" = "orders:read orders:cancel" \
            && test "$PACT_ACCOUNT" = secondary \
            && test "$PACT_VERIFICATION_URI_COMPLETE" = "http://p.example/device?user_code=BCDF-GHJK""#;
        assert_eq!(sh(check).approve(&r).await, ApprovalStatus::Done);

        let deny = request(Decision::Deny);
        let check = r#"test "$PACT_DECISION" = deny && test -z "$PACT_APPROVE_SCOPES" \
            && test "$PACT_DENY_SCOPES" = "orders:read orders:cancel""#;
        assert_eq!(sh(check).approve(&deny).await, ApprovalStatus::Done);

        match sh("echo one >&2; echo 'no second account' >&2; exit 3")
            .approve(&r)
            .await
        {
            ApprovalStatus::Unavailable(why) => assert!(why.ends_with("no second account")),
            other => panic!("{other:?}"),
        }
        match sh("echo 'the login page changed' >&2; exit 1")
            .approve(&r)
            .await
        {
            ApprovalStatus::Failed(why) => assert!(why.contains("the login page changed"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut slow = sh("sleep 5");
        slow.timeout = Duration::from_millis(200);
        match slow.approve(&r).await {
            ApprovalStatus::Failed(why) => assert!(why.contains("did not finish"), "{why}"),
            other => panic!("{other:?}"),
        }
        match CommandApprover::new("/nonexistent/approver", vec![])
            .approve(&r)
            .await
        {
            ApprovalStatus::Failed(why) => assert!(why.contains("cannot run"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
