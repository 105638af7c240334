//! Running turns, for the tool gateway: on the node that runs a turn, and
//! on any other node its calls reach.
//!
//! A webhook turn gets a turn token (`turn_token`): signed claims naming the
//! turn, its brand, its grant, when it dies. The node that runs the turn
//! keeps the turn here and knows the token by its SHA-256; it finds the turn
//! by the id in the URL and takes the token only if it hashes to the turn's,
//! the brand in the URL is the turn's, and the turn has neither ended nor
//! expired. Ending the turn (reply stored or failed) removes it, so a token
//! is useless after its turn whatever its lifetime said.
//!
//! Another node (behind a round-robin proxy) checks the token's signature
//! (pact-server's `merchant/live_turns.rs`, which then builds the guard with
//! [`CallGuard::for_other_node`]),
//! rebuilds what the gateway needs from the database (the grant and its
//! terms, the brand's scopes and tools), and enters the turn's fence
//! (`pact_db::turn_fences`): only while the turn has not ended, and it
//! leaves it with what the call did. When the agent replies, the turn's own
//! node ends the fence, waits for the calls in flight on every node, and
//! puts theirs into the receipt with its own. Calls on the turn's own node
//! touch no database for any of this.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pact_db::PgPool;
use pact_db::ids::{AgentIssuer, BrandId};
use pact_db::merchant::BrandTool;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::turn_token::{TurnClaims, TurnKey};
use pact_core::agent::asked::AskedOperation;
use pact_core::agent::{Delegation, GateRecord};
use pact_core::domain::terms::RulesNow;

/// How often a finishing turn looks again at calls in flight on other nodes.
const FENCE_POLL: Duration = Duration::from_millis(20);

/// How long a turn that ended here is remembered as ended: longer than any
/// turn token lives (the agent timeout is at most 25 s), after which the
/// token's own expiry refuses it.
const ENDED_KEPT: Duration = Duration::from_secs(60);

/// What the gateway needs to judge and forward a tool call of one turn: its
/// setup (reached through `Deref`), its id, and its record.
#[derive(Debug)]
pub struct LiveTurn {
    pub id: Uuid,
    token_hash: [u8; 32],
    setup: TurnSetup,
    /// What ran, what was refused: shared with the turn, read when it ends.
    pub record: Mutex<GateRecord>,
    /// MCP sessions ended on this node (`DELETE`); ids are signed, so the
    /// sessions themselves need no state.
    pub closed_sessions: Mutex<HashSet<String>>,
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
    pub brand_id: BrandId,
    pub expires_at: OffsetDateTime,
    pub delegation: Option<Delegation>,
    pub offered: BTreeSet<String>,
    /// The tools' scopes and limit rules now (the gate's `RulesNow`),
    /// shared with the node's copy of the brand's setup.
    pub rules: Arc<RulesNow>,
    pub tools: Arc<Vec<BrandTool>>,
    pub tool_timeout: Duration,
    pub context_id: String,
    pub message_id: String,
    /// The personal agent's platform (its PA-JWT issuer), named to the
    /// merchant's MCP server with each call.
    pub pa_issuer: AgentIssuer,
}

pub struct LiveTurns {
    turns: Mutex<HashMap<Uuid, Arc<LiveTurn>>>,
    /// Turns that ended here, until their tokens cannot live any longer: a
    /// token of such a turn is refused here as ended, instead of being taken
    /// for another node's turn and let in through the database's fence in
    /// the moment between the agent's reply and its store.
    ended: Mutex<Ended>,
    key: TurnKey,
}

/// Turns ended on this node, oldest first (each kept [`ENDED_KEPT`]).
#[derive(Default)]
struct Ended {
    order: VecDeque<(tokio::time::Instant, Uuid)>,
    ids: HashSet<Uuid>,
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
    /// Another node's turn, and the database could not say more.
    Unavailable,
}

/// Removes the turn when dropped, so a failed or cancelled turn ends too
/// (on every node: its fence is ended).
#[derive(Debug)]
pub struct TurnGuard<'a> {
    turns: &'a LiveTurns,
    pub turn: Arc<LiveTurn>,
    pub token: String,
    fence: Option<PgPool>,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.turns.remove(self.turn.id);
        // A call already admitted here but not yet sent (the turn's request
        // was cut, or the agent failed) is no longer sent: nothing may act
        // for a turn whose record nobody will read.
        {
            let mut calls = self.turn.lock_calls();
            calls.ended = true;
            calls.closed = true;
        }
        // Not finished (the agent failed, or the request was dropped): no
        // other node may take a call of it any longer either.
        if let Some(db) = self.fence.take() {
            end_in_background(db, self.turn.id, self.turn.expires_at);
        }
    }
}

impl LiveTurns {
    pub fn new(key: TurnKey) -> Self {
        Self {
            turns: Mutex::new(HashMap::new()),
            ended: Mutex::new(Ended::default()),
            key,
        }
    }

    pub fn key(&self) -> &TurnKey {
        &self.key
    }

    /// Registers a turn; returns it with its token (the only copy). `db`
    /// (the relaxed pool) is where its fence lives.
    pub fn start(&self, setup: TurnSetup, db: &PgPool) -> Option<TurnGuard<'_>> {
        let id = Uuid::new_v4();
        let claims = TurnClaims {
            turn: id,
            brand: setup.brand_id.clone(),
            expires: setup.expires_at.unix_timestamp(),
            grant: setup.delegation.as_ref().map(|d| d.grant_id),
            scopes: setup
                .delegation
                .as_ref()
                .map(|d| d.scopes.iter().cloned().collect())
                .unwrap_or_default(),
            context: setup.context_id.clone(),
            message: setup.message_id.clone(),
            pa_issuer: setup.pa_issuer.clone(),
            tool_timeout_ms: u64::try_from(setup.tool_timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let token = self.key.issue(&claims)?;
        let turn = Arc::new(LiveTurn::new(id, hash(&token), setup));
        self.lock().insert(turn.id, turn.clone());
        Some(TurnGuard {
            turns: self,
            turn,
            token,
            fence: Some(db.clone()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<LiveTurn>>> {
        // A poisoned map still holds valid entries: a panic elsewhere must not stop turns.
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The turn is over here: gone from the running turns, and remembered
    /// as ended while its token could still live.
    fn remove(&self, id: Uuid) {
        self.lock().remove(&id);
        let now = tokio::time::Instant::now();
        let mut ended = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(&(until, old)) = ended.order.front() {
            if until > now {
                break;
            }
            ended.order.pop_front();
            ended.ids.remove(&old);
        }
        ended.order.push_back((now + ENDED_KEPT, id));
        ended.ids.insert(id);
    }

    fn ended_here(&self, id: Uuid) -> bool {
        self.ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ids
            .contains(&id)
    }

    /// The turn a gateway request may act in, when the turn runs on this
    /// node; the request counts as in flight until the guard is dropped.
    /// `brand_id` is the request path's text, compared with the turn's.
    pub fn authorize(
        &self,
        turn_id: Uuid,
        brand_id: &str,
        token: &str,
        now: OffsetDateTime,
    ) -> Result<CallGuard, TokenRefusal> {
        let turn = self.lock().get(&turn_id).cloned();
        let Some(turn) = turn else {
            return Err(if self.ended_here(turn_id) {
                TokenRefusal::Ended
            } else {
                TokenRefusal::UnknownTurn
            });
        };
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
        Ok(CallGuard { turn, remote: None })
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One request of a turn in flight; dropping it lets a finishing turn go on
/// (on another node than the turn's own: it leaves the turn's fence with
/// what the call did).
#[derive(Debug)]
pub struct CallGuard {
    turn: Arc<LiveTurn>,
    /// Another node's turn: where its fence is.
    remote: Option<PgPool>,
}

impl std::ops::Deref for CallGuard {
    type Target = LiveTurn;
    fn deref(&self) -> &LiveTurn {
        &self.turn
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(db) = self.remote.take() {
            let (id, record) = (self.turn.id, self.turn.with_record(std::mem::take));
            let record = record_json(&record);
            tokio::spawn(async move {
                if let Err(e) = pact_db::turn_fences::leave(&db, id, &record).await {
                    tracing::warn!(error = %e, turn = %id, "could not leave another node's turn");
                }
            });
            return;
        }
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
    /// Another node's turn, rebuilt from its signed token and the database,
    /// whose fence this request has entered: one call in flight, which leaves
    /// the fence with what it did when dropped.
    pub fn for_other_node(turn_id: Uuid, setup: TurnSetup, db: PgPool) -> Self {
        let turn = Arc::new(LiveTurn::new(turn_id, [0; 32], setup));
        turn.lock_calls().in_flight = 1;
        Self {
            turn,
            remote: Some(db),
        }
    }

    /// Whether a checked call may still be sent: false once the turn gave up
    /// waiting for its calls (the call is then refused, never sent unrecorded).
    pub fn may_forward(&self) -> bool {
        !self.turn.lock_calls().closed
    }

    /// Whether this request reached another node than the turn's own.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }
}

impl TurnGuard<'_> {
    /// Ends the turn here: no new request is taken on this node, the calls
    /// in flight here are waited for (at most `wait`, longer than a call may
    /// take) and their record handed over for the receipt. On the other
    /// nodes the turn ends with its reply's store ([`TurnEnd`]), which costs
    /// no statement of its own.
    pub async fn finish(&mut self, wait: Duration) -> (GateRecord, Option<TurnEnd>) {
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
        let record = self.turn.with_record(std::mem::take);
        self.turn.lock_calls().closed = true;
        let end = self.fence.take().map(|db| TurnEnd {
            db,
            turn: self.turn.id,
            expires_at: self.turn.expires_at,
            wait,
            armed: true,
        });
        (record, end)
    }
}

/// A finished turn whose end the other nodes have not been told yet. It is
/// written with the turn's reply (`pact_db::conversations::EndOfTurn`, one
/// statement); when another node took a call of the turn meanwhile, that
/// store writes nothing and [`TurnEnd::gather`] ends the fence on its own and
/// waits for those calls, so the reply is stored with everything that was
/// sent (PACT §5.6). Dropped without either (the reply was never stored),
/// it ends the fence in the background, as a failed turn's guard does.
#[derive(Debug)]
pub struct TurnEnd {
    db: PgPool,
    turn: Uuid,
    expires_at: OffsetDateTime,
    /// How long a call may still take once the fence is ended (a call that
    /// entered just before is waited for that long from then on).
    wait: Duration,
    armed: bool,
}

impl TurnEnd {
    /// What the reply's statement writes.
    pub fn end_of_turn(&self) -> pact_db::conversations::EndOfTurn {
        pact_db::conversations::EndOfTurn {
            turn_id: self.turn,
            expires_at: self.expires_at,
        }
    }

    /// The reply's statement wrote the turn's end.
    pub fn written(mut self) {
        self.armed = false;
    }

    /// Another node entered the turn: ends its fence, waits (as long as a
    /// call may still take) for the calls still in flight there and adds
    /// what they did to `record`.
    pub async fn gather(mut self, record: &mut GateRecord) {
        // From now, not from when the turn finished here: a call another
        // node let in just before the fence ends may take the full tool
        // timeout, and it is in the receipt (PACT §5.6).
        let deadline = tokio::time::Instant::now() + self.wait;
        match other_nodes(&self.db, self.turn, self.expires_at, deadline).await {
            Ok(records) => {
                self.armed = false;
                for r in records.as_array().into_iter().flatten() {
                    merge_record(record, r);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, turn = %self.turn, "could not read the calls made on other nodes");
            }
        }
    }
}

impl Drop for TurnEnd {
    fn drop(&mut self) {
        if self.armed {
            end_in_background(self.db.clone(), self.turn, self.expires_at);
        }
    }
}

/// Ends a turn's fence from a `Drop`: a turn that failed, or whose reply
/// was never stored, takes no call on any node any longer.
fn end_in_background(db: PgPool, id: Uuid, expires_at: OffsetDateTime) {
    tokio::spawn(async move {
        if let Err(e) = pact_db::turn_fences::end(&db, id, expires_at).await {
            tracing::warn!(error = %e, turn = %id, "could not end a turn's fence");
        }
    });
}

/// Ends a turn's fence and waits (until `deadline`) for the calls other
/// nodes have in flight: what they did.
async fn other_nodes(
    db: &PgPool,
    turn: Uuid,
    expires_at: OffsetDateTime,
    deadline: tokio::time::Instant,
) -> Result<Value, pact_db::Error> {
    let mut fence = pact_db::turn_fences::end(db, turn, expires_at).await?;
    while fence.in_flight > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(FENCE_POLL).await;
        match pact_db::turn_fences::read(db, turn).await? {
            Some(f) => fence = f,
            None => break,
        }
    }
    if fence.in_flight > 0 {
        tracing::warn!(%turn, "a tool call on another node was still in flight when the turn ended");
    }
    Ok(fence.records)
}

/// What one call on another node did, as its fence keeps it.
fn record_json(r: &GateRecord) -> Value {
    let beyond: Vec<AskedOperation> = r.beyond.iter().map(AskedOperation::of).collect();
    json!({
        "usedScopes": r.used_scopes,
        "actions": r.actions,
        "refused": r.refused,
        "missing": r.missing,
        "beyond": beyond,
    })
}

/// Adds what a call on another node did to the turn's record.
fn merge_record(into: &mut GateRecord, v: &Value) {
    let strings = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(|x| serde_json::from_value(x.clone()).ok())
            .unwrap_or_default()
    };
    into.used_scopes.extend(strings("usedScopes"));
    into.missing.extend(strings("missing"));
    if let Some(a) = v
        .get("actions")
        .and_then(|x| serde_json::from_value::<Vec<_>>(x.clone()).ok())
    {
        into.actions.extend(a);
    }
    if let Some(r) = v
        .get("refused")
        .and_then(|x| serde_json::from_value::<Vec<_>>(x.clone()).ok())
    {
        into.refused.extend(r);
    }
    let asked: Vec<AskedOperation> = v
        .get("beyond")
        .and_then(|x| serde_json::from_value(x.clone()).ok())
        .unwrap_or_default();
    for o in asked {
        if into
            .beyond
            .iter()
            .any(|b| b.tool == o.tool && b.args_hash == o.args_hash)
        {
            continue;
        }
        into.beyond.push(o.into_call());
    }
}

impl LiveTurn {
    fn new(id: Uuid, token_hash: [u8; 32], setup: TurnSetup) -> Self {
        Self {
            id,
            token_hash,
            setup,
            record: Mutex::new(GateRecord::default()),
            closed_sessions: Mutex::new(HashSet::new()),
            calls: Mutex::new(Calls::default()),
            idle: tokio::sync::Notify::new(),
        }
    }

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
#[allow(clippy::disallowed_methods)] // tests build rows at real times
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn setup(brand: &str, ttl: i64) -> TurnSetup {
        TurnSetup {
            brand_id: BrandId::parse(brand).unwrap(),
            expires_at: OffsetDateTime::now_utc() + time::Duration::seconds(ttl),
            delegation: None,
            offered: BTreeSet::new(),
            rules: Arc::default(),
            tools: Arc::default(),
            tool_timeout: Duration::from_secs(1),
            context_id: "c".into(),
            message_id: "m".into(),
            pa_issuer: "https://pa.example".into(),
        }
    }

    fn turns() -> LiveTurns {
        LiveTurns::new(TurnKey::for_tests(3))
    }

    /// A turn with no fence (no database in these tests).
    fn start<'a>(turns: &'a LiveTurns, s: TurnSetup) -> TurnGuard<'a> {
        let lazy = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://127.0.0.1/none")
            .unwrap();
        let mut g = turns.start(s, &lazy).unwrap();
        g.fence = None;
        g
    }

    #[tokio::test]
    async fn a_token_works_only_for_its_turn_and_brand_while_the_turn_runs() {
        let turns = turns();
        let now = OffsetDateTime::now_utc();
        let a = start(&turns, setup("shop", 20));
        let b = start(&turns, setup("shop", 20));
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
        // The token names its turn, signed: what another node checks.
        let claims = turns.key().verify(&a.token).unwrap();
        assert_eq!((claims.turn, claims.brand.as_str()), (a.turn.id, "shop"));
        let (id, token) = (a.turn.id, a.token.clone());
        drop(a);
        // Remembered as ended here, not taken for another node's turn.
        assert_eq!(
            turns.authorize(id, "shop", &token, now).unwrap_err(),
            TokenRefusal::Ended
        );
        assert_eq!(
            turns
                .authorize(Uuid::new_v4(), "shop", &token, now)
                .unwrap_err(),
            TokenRefusal::UnknownTurn
        );
        assert_eq!(turns.len(), 1);
        drop(b);
        assert!(turns.is_empty());
    }

    #[tokio::test]
    async fn a_finishing_turn_waits_for_its_calls_and_then_takes_no_more() {
        let turns = turns();
        let now = OffsetDateTime::now_utc();
        let mut t = start(&turns, setup("shop", 20));
        let call = turns.authorize(t.turn.id, "shop", &t.token, now).unwrap();
        let turn = t.turn.clone();
        let calling = async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(call.may_forward(), "still waited for");
            turn.with_record(|r| r.used_scopes.insert("orders:read".to_owned()));
            drop(call);
        };
        let (id, token) = (t.turn.id, t.token.clone());
        let ((record, _), ()) = tokio::join!(t.finish(Duration::from_secs(5)), calling);
        assert!(
            record.used_scopes.contains("orders:read"),
            "the call is in the record"
        );
        assert_eq!(
            turns.authorize(id, "shop", &token, now).unwrap_err(),
            TokenRefusal::Ended
        );
    }

    #[tokio::test]
    async fn a_call_not_yet_sent_when_its_turn_is_dropped_is_not_sent() {
        let turns = turns();
        let now = OffsetDateTime::now_utc();
        let t = start(&turns, setup("shop", 20));
        let call = turns.authorize(t.turn.id, "shop", &t.token, now).unwrap();
        assert!(call.may_forward());
        // The turn's request is cut (its future dropped) while the call waits.
        drop(t);
        assert!(!call.may_forward());
    }

    #[tokio::test]
    async fn a_call_still_running_after_the_wait_may_not_be_sent() {
        let turns = turns();
        let now = OffsetDateTime::now_utc();
        let mut t = start(&turns, setup("shop", 20));
        let call = turns.authorize(t.turn.id, "shop", &t.token, now).unwrap();
        let _ = t.finish(Duration::from_millis(20)).await;
        assert!(!call.may_forward());
    }

    #[test]
    fn what_a_call_on_another_node_did_joins_the_turns_record() {
        let mut other = GateRecord::default();
        other.used_scopes.insert("orders:read".into());
        other.missing.insert("orders:cancel".into());
        other.ran(
            "lookup_orders",
            Some("orders:read"),
            "h",
            None,
            pact_core::agent::Done::ok(),
        );
        let mut mine = GateRecord::default();
        merge_record(&mut mine, &record_json(&other));
        assert_eq!(mine.used_scopes, other.used_scopes);
        assert_eq!(mine.missing, other.missing);
        assert_eq!(mine.actions, other.actions);
    }
}
