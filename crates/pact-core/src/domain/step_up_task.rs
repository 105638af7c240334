//! Where a step-up task stands (PACT §5.5), decided from its authorization's
//! stored state and `now`, and the A2A 1.0 task state that says so.
//!
//! A2A 1.0 §3.1.3 lets a client follow a task by polling Get Task; a step-up
//! task is `TASK_STATE_AUTH_REQUIRED` while the person has not decided, then
//! ends in a terminal state that tells the personal agent what to do next.

use time::OffsetDateTime;

pub use pact_db::device_authorizations::Status;
use pact_proto::a2a::{
    TASK_STATE_AUTH_REQUIRED, TASK_STATE_COMPLETED, TASK_STATE_FAILED, TASK_STATE_REJECTED,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The person has not decided; the link still works.
    Pending,
    /// Approved: for missing scopes the PA collects the token with its own
    /// device authorization for them (RFC 8628 §3.4), then sends again; for a
    /// call beyond a limit it only sends again.
    Approved,
    /// The person said no.
    Denied,
    /// Nobody decided in time, or an approval of scopes was never collected
    /// before its device code expired (RFC 8628 §3.5 `expired_token`).
    Expired,
}

/// `operation`: a step-up beyond a limit, whose approval is recorded on the
/// grant at once and so outlives the code; an approval of scopes must be
/// collected before the code expires.
pub fn outcome(
    status: Status,
    expires_at: OffsetDateTime,
    operation: bool,
    now: OffsetDateTime,
) -> Outcome {
    let expired = now >= expires_at;
    match status {
        Status::Redeemed => Outcome::Approved,
        Status::Approved if operation || !expired => Outcome::Approved,
        Status::Denied => Outcome::Denied,
        Status::Pending if !expired => Outcome::Pending,
        Status::Approved | Status::Pending => Outcome::Expired,
    }
}

impl Outcome {
    /// The A2A task state (A2A 1.0 `TaskState`).
    pub fn task_state(self) -> &'static str {
        match self {
            Self::Pending => TASK_STATE_AUTH_REQUIRED,
            Self::Approved => TASK_STATE_COMPLETED,
            Self::Denied => TASK_STATE_REJECTED,
            Self::Expired => TASK_STATE_FAILED,
        }
    }

    /// The value of the task's `pact.authorizationStatus` metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }

    /// What the task's status message says once decided (`None` while
    /// pending: the turn's own message stays).
    pub fn text(self, operation: bool) -> Option<&'static str> {
        match (self, operation) {
            (Self::Pending, _) => None,
            (Self::Approved, false) => Some(
                "Approved. Collect the new delegation token (a device authorization for the \
                 missing scopes, then the token endpoint), then send your message again with it.",
            ),
            (Self::Approved, true) => {
                Some("Approved once. Send your message again: this call now goes through.")
            }
            (Self::Denied, _) => Some("The person declined. Nothing was done."),
            (Self::Expired, _) => Some(
                "The request for permission expired before it was used. Send your message again \
                 to get a new link.",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + Duration::seconds(secs)
    }

    #[test]
    fn a_step_up_of_scopes_follows_its_device_code() {
        let exp = at(600);
        assert_eq!(
            outcome(Status::Pending, exp, false, at(10)),
            Outcome::Pending
        );
        assert_eq!(
            outcome(Status::Pending, exp, false, at(600)),
            Outcome::Expired
        );
        assert_eq!(
            outcome(Status::Approved, exp, false, at(10)),
            Outcome::Approved
        );
        // Approved but never collected: the code is gone, so is the approval.
        assert_eq!(
            outcome(Status::Approved, exp, false, at(601)),
            Outcome::Expired
        );
        assert_eq!(
            outcome(Status::Redeemed, exp, false, at(9999)),
            Outcome::Approved
        );
        assert_eq!(outcome(Status::Denied, exp, false, at(10)), Outcome::Denied);
        assert_eq!(
            outcome(Status::Denied, exp, false, at(9999)),
            Outcome::Denied
        );
    }

    #[test]
    fn an_approved_operation_outlives_its_code() {
        let exp = at(600);
        assert_eq!(
            outcome(Status::Approved, exp, true, at(9999)),
            Outcome::Approved
        );
        assert_eq!(
            outcome(Status::Pending, exp, true, at(9999)),
            Outcome::Expired
        );
    }

    #[test]
    fn each_outcome_has_its_a2a_state_and_only_decided_ones_a_new_text() {
        assert_eq!(Outcome::Pending.task_state(), "TASK_STATE_AUTH_REQUIRED");
        assert_eq!(Outcome::Approved.task_state(), "TASK_STATE_COMPLETED");
        assert_eq!(Outcome::Denied.task_state(), "TASK_STATE_REJECTED");
        assert_eq!(Outcome::Expired.task_state(), "TASK_STATE_FAILED");
        assert!(Outcome::Pending.text(false).is_none());
        assert_ne!(Outcome::Approved.text(false), Outcome::Approved.text(true));
    }
}
