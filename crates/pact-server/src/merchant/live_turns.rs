//! Turns that are running right now on this node, for the tool gateway.
//!
//! A webhook turn gets a turn token: 32 random bytes shown to the merchant's
//! agent once, kept here only as its SHA-256. The gateway finds the turn by
//! the id in its URL and accepts the token only if it hashes to that turn's,
//! the brand in the URL is the turn's, and the turn has neither ended nor
//! expired. Ending the turn (reply stored or failed) removes it, so a token is
//! useless after its turn whatever its lifetime said.
//!
//! The record lives in this node's memory: a turn's tool calls must reach
//! the node that runs the turn (the tools URL carries this node's public URL;
//! with several nodes behind one name, route `/a2a/*/turns/` with session
//! affinity on the turn id, or run webhook brands on one node). Keeping it in
//! memory means no database write per tool call and no lock held while the
//! agent works.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::merchant::BrandTool;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::agent::{Delegation, GateRecord};
use crate::domain::terms::RulesNow;

/// What the gateway needs to judge and forward a tool call of one turn: its
/// setup (reached through `Deref`), its id and token hash, and its record.
#[derive(Debug)]
pub struct LiveTurn {
    pub id: Uuid,
    token_hash: [u8; 32],
    setup: TurnSetup,
    /// What ran, what was refused: shared with the turn, read when it ends.
    pub record: Mutex<GateRecord>,
    /// The turn's MCP sessions (`merchant::mcp`): session id → negotiated
    /// protocol version. They live inside the turn, so they die with it.
    pub mcp_sessions: Mutex<HashMap<String, String>>,
    /// Calls in flight, and whether the turn still takes new ones: when the
    /// agent replies, the turn waits for its calls before the receipt is
    /// made, so no call is carried out and left out of it.
    calls: Mutex<Calls>,
    idle: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Calls {
    in_flight: usize,
    /// The agent replied: no new request is taken.
    ended: bool,
    /// The wait for calls in flight is over: none may be forwarded now.
    closed: bool,
}

impl std::ops::Deref for LiveTurn {
    type Target = TurnSetup;
    fn deref(&self) -> &TurnSetup {
        &self.setup
    }
}

/// Everything that makes a [`LiveTurn`] except its token.
#[derive(Debug)]
pub struct TurnSetup {
    pub brand_id: String,
    pub expires_at: OffsetDateTime,
    pub delegation: Option<Delegation>,
    pub offered: BTreeSet<String>,
    /// The tools' scopes and limit rules now (the gate's `RulesNow`).
    pub rules: RulesNow,
    pub tools: Vec<BrandTool>,
    pub tool_timeout: std::time::Duration,
    pub context_id: String,
    pub message_id: String,
    /// The personal agent's platform (its PA-JWT issuer), named to the
    /// merchant's MCP server with each call.
    pub pa_issuer: String,
}

#[derive(Default)]
pub struct LiveTurns {
    turns: Mutex<HashMap<Uuid, Arc<LiveTurn>>>,
}

impl std::fmt::Debug for LiveTurns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveTurns(..)")
    }
}

fn hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Why a token was refused; all of them are the same 401 to the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    UnknownTurn,
    WrongToken,
    WrongBrand,
    Expired,
    /// The agent has replied: the turn is over.
    Ended,
}

/// Removes the turn when dropped, so a failed or cancelled turn ends too.
#[derive(Debug)]
pub struct TurnGuard<'a> {
    turns: &'a LiveTurns,
    pub turn: Arc<LiveTurn>,
    pub token: String,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.turns.remove(self.turn.id);
    }
}

impl LiveTurns {
    /// Registers a turn; returns it with its token (the only copy).
    pub fn start(&self, setup: TurnSetup) -> Option<TurnGuard<'_>> {
        let mut bytes = [0u8; 32];
        openssl::rand::rand_bytes(&mut bytes).ok()?;
        let token = format!("ptt_{}", URL_SAFE_NO_PAD.encode(bytes));
        let turn = Arc::new(LiveTurn {
            id: Uuid::new_v4(),
            token_hash: hash(&token),
            setup,
            record: Mutex::new(GateRecord::default()),
            mcp_sessions: Mutex::new(HashMap::new()),
            calls: Mutex::new(Calls::default()),
            idle: tokio::sync::Notify::new(),
        });
        self.lock().insert(turn.id, turn.clone());
        Some(TurnGuard {
            turns: self,
            turn,
            token,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<LiveTurn>>> {
        // A poisoned map still holds valid entries: a panic elsewhere must not stop turns.
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remove(&self, id: Uuid) {
        self.lock().remove(&id);
    }

    /// The turn a gateway request may act in, or why not; the request
    /// counts as in flight until the guard is dropped.
    pub fn authorize(
        &self,
        turn_id: Uuid,
        brand_id: &str,
        token: &str,
        now: OffsetDateTime,
    ) -> Result<CallGuard, TokenRefusal> {
        let turn = self
            .lock()
            .get(&turn_id)
            .cloned()
            .ok_or(TokenRefusal::UnknownTurn)?;
        if !openssl::memcmp::eq(&hash(token), &turn.token_hash) {
            return Err(TokenRefusal::WrongToken);
        }
        if turn.brand_id != brand_id {
            return Err(TokenRefusal::WrongBrand);
        }
        if now >= turn.expires_at {
            return Err(TokenRefusal::Expired);
        }
        {
            let mut calls = turn.lock_calls();
            if calls.ended {
                return Err(TokenRefusal::Ended);
            }
            calls.in_flight += 1;
        }
        Ok(CallGuard { turn })
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One request of a turn in flight; dropping it lets a finishing turn go on.
#[derive(Debug)]
pub struct CallGuard {
    turn: Arc<LiveTurn>,
}

impl std::ops::Deref for CallGuard {
    type Target = LiveTurn;
    fn deref(&self) -> &LiveTurn {
        &self.turn
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let idle = {
            let mut calls = self.turn.lock_calls();
            calls.in_flight = calls.in_flight.saturating_sub(1);
            calls.in_flight == 0
        };
        if idle {
            self.turn.idle.notify_waiters();
        }
    }
}

impl CallGuard {
    /// Whether a checked call may still be sent: false once the turn gave up
    /// waiting for its calls (the call is then refused, never sent unrecorded).
    pub fn may_forward(&self) -> bool {
        !self.turn.lock_calls().closed
    }
}

impl TurnGuard<'_> {
    /// Ends the turn: no new request is taken, the calls in flight are
    /// waited for (at most `wait`, longer than a call may take), and the
    /// record is handed over for the receipt.
    pub async fn finish(&self, wait: std::time::Duration) -> GateRecord {
        self.turn.lock_calls().ended = true;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.turn.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.turn.lock_calls().in_flight == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                tracing::warn!(turn = %self.turn.id, "a tool call was still in flight when the turn ended");
                break;
            }
        }
        self.turn.lock_calls().closed = true;
        self.turn.with_record(std::mem::take)
    }
}

impl LiveTurn {
    fn lock_calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the turn's record.
    pub fn with_record<T>(&self, f: impl FnOnce(&mut GateRecord) -> T) -> T {
        let mut r = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut r)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn setup(brand: &str, ttl: i64) -> TurnSetup {
        TurnSetup {
            brand_id: brand.to_owned(),
            expires_at: OffsetDateTime::now_utc() + time::Duration::seconds(ttl),
            delegation: None,
            offered: BTreeSet::new(),
            rules: RulesNow::new(),
            tools: vec![],
            tool_timeout: std::time::Duration::from_secs(1),
            context_id: "c".into(),
            message_id: "m".into(),
            pa_issuer: "https://pa.example".into(),
        }
    }

    #[test]
    fn a_token_works_only_for_its_turn_and_brand_while_the_turn_runs() {
        let turns = LiveTurns::default();
        let now = OffsetDateTime::now_utc();
        let a = turns.start(setup("shop", 20)).unwrap();
        let b = turns.start(setup("shop", 20)).unwrap();
        assert!(turns.authorize(a.turn.id, "shop", &a.token, now).is_ok());
        assert_eq!(
            turns
                .authorize(a.turn.id, "shop", &b.token, now)
                .unwrap_err(),
            TokenRefusal::WrongToken
        );
        assert_eq!(
            turns
                .authorize(a.turn.id, "other", &a.token, now)
                .unwrap_err(),
            TokenRefusal::WrongBrand
        );
        let later = now + time::Duration::seconds(30);
        assert_eq!(
            turns
                .authorize(a.turn.id, "shop", &a.token, later)
                .unwrap_err(),
            TokenRefusal::Expired
        );
        let (id, token) = (a.turn.id, a.token.clone());
        drop(a);
        assert_eq!(
            turns.authorize(id, "shop", &token, now).unwrap_err(),
            TokenRefusal::UnknownTurn
        );
        assert_eq!(turns.len(), 1);
        drop(b);
        assert!(turns.is_empty());
    }

    #[tokio::test]
    async fn a_finishing_turn_waits_for_its_calls_and_then_takes_no_more() {
        let turns = LiveTurns::default();
        let now = OffsetDateTime::now_utc();
        let t = turns.start(setup("shop", 20)).unwrap();
        let call = turns.authorize(t.turn.id, "shop", &t.token, now).unwrap();
        let turn = t.turn.clone();
        let calling = async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(call.may_forward(), "still waited for");
            turn.with_record(|r| r.used_scopes.insert("orders:read".to_owned()));
            drop(call);
        };
        let (record, ()) = tokio::join!(t.finish(std::time::Duration::from_secs(5)), calling);
        assert!(
            record.used_scopes.contains("orders:read"),
            "the call is in the record"
        );
        assert_eq!(
            turns
                .authorize(t.turn.id, "shop", &t.token, now)
                .unwrap_err(),
            TokenRefusal::Ended
        );
    }

    #[tokio::test]
    async fn a_call_still_running_after_the_wait_may_not_be_sent() {
        let turns = LiveTurns::default();
        let now = OffsetDateTime::now_utc();
        let t = turns.start(setup("shop", 20)).unwrap();
        let call = turns.authorize(t.turn.id, "shop", &t.token, now).unwrap();
        let _ = t.finish(std::time::Duration::from_millis(20)).await;
        assert!(!call.may_forward());
    }
}
