//! The RFC 8628 §3.5 polling rules, decided from the stored state and `now`.

use time::{Duration, OffsetDateTime};

pub use pact_proto::oauth::SLOW_DOWN_STEP_SECS;
/// Upper bound, so a misbehaving client cannot grow it without limit.
pub const MAX_INTERVAL_SECS: i32 = 60;

/// The stored status, as pact-db reads it (the column's CHECK constraint admits only these).
pub use pact_db::device_authorizations::Status;

#[derive(Clone, Copy, Debug)]
pub struct PollState {
    pub status: Status,
    pub interval_secs: i32,
    pub last_polled_at: Option<OffsetDateTime>,
    pub expires_at: OffsetDateTime,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollDecision {
    /// `authorization_pending`; record the poll.
    Pending,
    /// `slow_down`; record the poll and the new interval.
    SlowDown { new_interval_secs: i32 },
    /// `access_denied`.
    Denied,
    /// `expired_token`.
    Expired,
    /// Issue the tokens and mark the authorization redeemed.
    Redeem,
    /// `invalid_grant`: a code is redeemed at most once.
    AlreadyRedeemed,
}

pub fn decide(s: PollState, now: OffsetDateTime) -> PollDecision {
    match s.status {
        Status::Redeemed => return PollDecision::AlreadyRedeemed,
        _ if now >= s.expires_at => return PollDecision::Expired,
        Status::Denied => return PollDecision::Denied,
        Status::Approved => return PollDecision::Redeem,
        Status::Pending => {}
    }
    let too_fast = s
        .last_polled_at
        .is_some_and(|last| now - last < Duration::seconds(i64::from(s.interval_secs)));
    if too_fast {
        PollDecision::SlowDown {
            new_interval_secs: (s.interval_secs + SLOW_DOWN_STEP_SECS).min(MAX_INTERVAL_SECS),
        }
    } else {
        PollDecision::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: Status, last: Option<i64>) -> (PollState, OffsetDateTime) {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::seconds(1_000);
        (
            PollState {
                status,
                interval_secs: 5,
                last_polled_at: last.map(|ago| now - Duration::seconds(ago)),
                expires_at: now + Duration::seconds(300),
            },
            now,
        )
    }

    #[test]
    fn pending_until_the_user_decides_and_slow_down_when_polled_too_fast() {
        let (s, now) = state(Status::Pending, None);
        assert_eq!(decide(s, now), PollDecision::Pending);
        let (s, now) = state(Status::Pending, Some(5));
        assert_eq!(decide(s, now), PollDecision::Pending);
        let (s, now) = state(Status::Pending, Some(4));
        assert_eq!(
            decide(s, now),
            PollDecision::SlowDown {
                new_interval_secs: 10
            }
        );
    }

    #[test]
    fn the_interval_grows_but_is_capped() {
        let (mut s, now) = state(Status::Pending, Some(0));
        s.interval_secs = 58;
        assert_eq!(
            decide(s, now),
            PollDecision::SlowDown {
                new_interval_secs: 60
            }
        );
    }

    #[test]
    fn decisions_are_final_and_expiry_wins_over_everything_but_redemption() {
        let (s, now) = state(Status::Approved, Some(0));
        assert_eq!(decide(s, now), PollDecision::Redeem);
        let (s, now) = state(Status::Denied, Some(100));
        assert_eq!(decide(s, now), PollDecision::Denied);
        let (s, now) = state(Status::Redeemed, None);
        assert_eq!(decide(s, now), PollDecision::AlreadyRedeemed);
        let (s, now) = state(Status::Approved, None);
        assert_eq!(
            decide(s, now + Duration::seconds(300)),
            PollDecision::Expired
        );
        let (s, now) = state(Status::Redeemed, None);
        assert_eq!(
            decide(s, now + Duration::seconds(301)),
            PollDecision::AlreadyRedeemed
        );
    }
}
