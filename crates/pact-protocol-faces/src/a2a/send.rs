//! `POST {iface}/message:send` (PACT §4, §5.5).
//!
//! Checks in protocol order — PA-JWT (the `Caller` extractor), then the
//! delegation token, then the body — and runs the turn in three phases, so
//! that no transaction or row lock is held while an agent works (the brand's
//! own agent may take seconds, and calls back into the tool gateway):
//!
//! 1. the grant is read and must be active (with its receipt chain's head);
//!    in an existing context, one short transaction checks that the context
//!    is the caller's, answers a retried `messageId` from storage, and
//!    *claims* the turn — its message row is inserted without a reply (unique
//!    per context and `messageId`); a new context writes nothing yet;
//! 2. the brand agent runs, behind the tool gate, with nothing locked;
//! 3. one statement chains the receipt at the head read in phase 1 and stores
//!    the reply; when another turn of the grant took that chain position, it
//!    is done again under the grant's row lock.
//!
//! A retry that finds the claim still running waits for the reply (bounded),
//! so one `messageId` never makes two agent calls that both store; a failed
//! turn drops its claim, nothing half-stored, and the PA may retry; so does a
//! turn cut at the request timeout ([`ClaimGuard`]).

use std::collections::BTreeSet;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use pact_db::conversations;
use pact_db::ids::UserSub;
use pact_node::node::NodeInner;
use pact_proto::A2aError;
use pact_proto::a2a::{
    AgentMessage, IncomingMessage, SendMessageResponse, TASK_STATE_AUTH_REQUIRED, Task, TaskStatus,
    parse_send_message,
};
use serde_json::{Map, Value, json};
use tracing::Instrument;
use uuid::Uuid;

use super::delegation::{self, Presented};
use super::receipts::Head;
use crate::agent::{AgentError, Delegation, GateRecord, ToolGate, Turn, bounds};
use crate::auth::Caller;
use crate::authorizations::{self, IssueError};
use crate::domain::authz_details;
use crate::error::{ApiError, a2a_json};
use crate::merchant::live_turns::TurnEnd;
use crate::state::AppState;
use pact_db::brands::AgentKind;

/// How soon a retry first looks again for the reply of a running turn.
const RETRY_POLL: Duration = Duration::from_millis(50);
/// The longest pause between two looks of a waiting retry.
const RETRY_POLL_MAX: Duration = Duration::from_millis(800);
/// The least a retry waits for a running turn's claim to go (see `run_turn`).
const CUT_CLAIM_WAIT: Duration = Duration::from_secs(1);

pub async fn send_message(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let reply = send(&state, &caller, &headers, &body).await?;
    Ok(a2a_json(StatusCode::OK, &reply))
}

/// Send Message behind both bindings (HTTP+JSON here, JSON-RPC in
/// `jsonrpc.rs`): `body` is the `SendMessageRequest`; the answer is the
/// `SendMessageResponse` (`{"message"}` or `{"task"}`).
pub async fn send(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Value, ApiError> {
    let presented = delegation::check(state, caller, headers)?;
    let incoming = parse_send_message(body)?;
    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| Uuid::new_v4().to_string(), str::to_owned);
    run_turn(state, caller, presented.as_ref(), &incoming, &request_id).await
}

/// What phase 1 found.
enum Begin {
    /// A retry of a finished turn: its stored reply, verbatim.
    Stored(Value),
    /// Another request runs this `messageId` right now.
    Running,
    /// This request runs the turn.
    Claimed(Claim),
}

async fn run_turn(
    state: &AppState,
    caller: &Caller,
    presented: Option<&Presented>,
    incoming: &IncomingMessage,
    request_id: &str,
) -> Result<Value, ApiError> {
    // A retry waits for a running turn at most as long as a turn may take,
    // and at least a moment (within its own request timeout): the claim of a
    // turn cut at the timeout is dropped on a task of its own just as the 503
    // goes out, so a retry sent at once may still meet it (`ClaimGuard`).
    let timeout = state.config.request_timeout;
    let wait = timeout
        .saturating_sub(Duration::from_secs(2))
        .max(CUT_CLAIM_WAIT.min(timeout / 2));
    let deadline = tokio::time::Instant::now() + wait;
    // Each look is a transaction that locks the conversation row the running
    // turn must update to finish: the looks space out (doubling up to
    // RETRY_POLL_MAX), so that many retries of one message cannot keep the
    // database busy for the turn they wait for.
    let mut pause = RETRY_POLL;
    loop {
        match begin(state, caller, presented, incoming).await? {
            Begin::Stored(reply) => return Ok(reply),
            Begin::Running if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_POLL_MAX);
            }
            // PACT §4: a retry without a stored reply is INVALID_PARAMS.
            Begin::Running => {
                return Err(A2aError::invalid_params(
                    "A reply to this messageId is not available yet; retry later",
                )
                .into());
            }
            Begin::Claimed(claim) => {
                // A first turn without delegation has no claim to drop:
                // nothing of it is written before its reply.
                let guard = (claim.written != Written::Nothing).then(|| ClaimGuard {
                    db: Some(state.relaxed_db.clone()),
                    conversation_id: claim.conversation_id,
                    message_id: incoming.message_id.clone(),
                    context_only: claim.written == Written::Context,
                });
                let result = run_claimed(state, caller, claim, incoming, request_id).await;
                if let Some(guard) = guard {
                    if result.is_ok() {
                        guard.keep();
                    } else {
                        // Nothing half-stored: drop the claim before answering,
                        // so the PA's retry finds the messageId free.
                        guard.release().await;
                    }
                }
                return result;
            }
        }
    }
}

/// The claim of a turn this request runs (its message row in an existing
/// context, a delegated first turn's new context), until its reply is
/// stored. A turn that fails drops its claim before the error is answered;
/// one that is cut — its future dropped at the request timeout
/// (`request_timeout.rs`) or because the client went away — drops it from
/// `Drop`, on a task of its own. Either way the PA's retry of the `messageId`
/// runs the turn at once (PACT §4: a retry is answered from a stored reply,
/// and there is none) instead of waiting for the ten-minute stale-claim sweep
/// (`housekeeping.rs`) or takeover. The delete matches only a claim still
/// without a reply, so a reply whose commit won the race is never removed.
struct ClaimGuard {
    /// `None` once kept or released.
    db: Option<sqlx::PgPool>,
    conversation_id: Uuid,
    message_id: String,
    /// The claim is the context row of a delegated first turn
    /// ([`Written::Context`]): dropping it drops the context.
    context_only: bool,
}

impl ClaimGuard {
    /// The reply is stored: the claim is the turn's message row now.
    fn keep(mut self) {
        self.db = None;
    }

    async fn release(mut self) {
        if let Some(db) = self.db.take() {
            abandon(
                &db,
                self.conversation_id,
                &self.message_id,
                self.context_only,
            )
            .await;
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        let Some(db) = self.db.take() else {
            return;
        };
        let (id, message_id) = (self.conversation_id, std::mem::take(&mut self.message_id));
        let context_only = self.context_only;
        // `Drop` cannot wait: the delete runs on its own task. Without a
        // runtime (the process is ending) the sweep removes the claim later
        // (a first turn's context: the PA's retry takes it over).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tracing::info!(conversation = %id, "a cut turn drops its claim");
                abandon(&db, id, &message_id, context_only).await;
            });
        }
    }
}

async fn abandon(db: &sqlx::PgPool, conversation_id: Uuid, message_id: &str, context_only: bool) {
    let dropped = if context_only {
        conversations::abandon_first_turn(db, conversation_id, message_id).await
    } else {
        conversations::abandon_turn(db, conversation_id, message_id).await
    };
    if let Err(e) = dropped {
        // With the database gone this is expected: the claim stays until the
        // housekeeping sweep removes it (a first turn's context: until the
        // PA's retry takes it over, CLAIM_ABANDONED_AFTER).
        if pact_db::classify(&e) == pact_db::Failure::Unavailable {
            tracing::warn!(error = %e, "could not drop the claim of a failed turn");
        } else {
            tracing::error!(error = %e, "could not drop the claim of a failed turn");
        }
    }
}

/// Phase 1. A new context without delegation is only given its id: nothing
/// is written before its reply (see `conversations::create_with_reply`). A
/// delegated one is created for its first message, in the statement that
/// reads the grant (`conversations::claim_first_turn_with_grant`). A turn in
/// an existing context is claimed in one short transaction under the
/// conversation's row lock.
///
/// Claims are written on the relaxed pool (no wait for the WAL flush): a
/// claim a crash loses takes nothing else with it, since whatever the turn
/// stores later commits after it in the same WAL, and the PA's retry of the
/// `messageId` then simply runs the turn (a durable claim would instead make
/// that retry wait for the stale-claim sweep, and then run it all the same).
async fn begin(
    node: &NodeInner,
    caller: &Caller,
    presented: Option<&Presented>,
    incoming: &IncomingMessage,
) -> Result<Begin, ApiError> {
    let brand = &caller.brand;
    let (iss, sub) = (caller.issuer(), caller.pa.sub.as_str());
    let now = node.clock.now();

    // The database is the truth about the grant (the token may outlive a
    // revocation). The chain head comes along for the turn's receipt. A
    // delegated first message's context is claimed in the same statement
    // (see below), and dropped again (`ClaimGuard`) if the turn goes no
    // further.
    let mut first_claim = None;
    let (delegation, head) = match presented {
        None => (None, Head::ReadAgain),
        Some(p) => {
            let grant = if incoming.context_id.is_none() {
                let conversation_id = Uuid::new_v4();
                let context = conversations::NewTurnContext {
                    id: conversation_id,
                    brand_id: &brand.id,
                    pa_issuer: iss,
                    pa_sub: sub,
                    user_sub: Some(&p.user_sub),
                    message_id: &incoming.message_id,
                    request_text: &incoming.text,
                    grant_id: Some(p.grant_id),
                };
                let read = conversations::claim_first_turn_with_grant(
                    &node.relaxed_db,
                    p.grant_id,
                    context,
                    now,
                )
                .await?;
                read.map(|(grant, claim)| {
                    let guard = (claim == conversations::FirstClaim::Claimed).then(|| ClaimGuard {
                        db: Some(node.relaxed_db.clone()),
                        conversation_id,
                        message_id: incoming.message_id.clone(),
                        context_only: true,
                    });
                    first_claim = Some((conversation_id, claim, guard));
                    grant
                })
            } else {
                pact_db::grants::for_turn(&node.db, p.grant_id).await?
            };
            let grant = grant.filter(|g| {
                g.is_active(now)
                    && g.brand_id == brand.id
                    && g.pa_issuer == iss
                    && g.user_sub == p.user_sub
            });
            let Some(mut grant) = grant else {
                tracing::info!(grant = %p.grant_id, "delegation token rejected: grant revoked, expired or mismatched");
                return Err(ApiError::InvalidDelegation);
            };
            let grant_scopes = std::mem::take(&mut grant.scopes);
            // The limits every call of the turn is judged against: what the
            // grant was approved under (PACT §5.7), not the token's copy.
            let terms = if grant.terms.is_some() || grant.authorization_details.is_none() {
                bounds::terms_of_recorded(grant.terms)
            } else {
                let rules = node.config_cache.brand_rules(&node.db, brand).await?;
                let types = authz_details::types_from_settings(&brand.settings);
                let mut conn = node.db.acquire().await?;
                bounds::terms_of(
                    &mut conn,
                    p.grant_id,
                    None,
                    grant.authorization_details.as_ref(),
                    &types,
                    &rules,
                )
                .await?
            };
            // The token's scopes, never more than the grant holds: a token
            // is only as good as the key that signed it, and the grant is
            // the record of what the person allowed (a refresh may narrow a
            // token, nothing widens one).
            let mut delegation = p.with_terms(terms);
            delegation.scopes.retain(|s| grant_scopes.contains(s));
            (Some(delegation), Head::Read(grant.head))
        }
    };
    // The turn goes on: its claim is the caller's to keep or drop now.
    let first_claim = first_claim.map(|(id, claim, guard)| {
        if let Some(guard) = guard {
            guard.keep();
        }
        (id, claim)
    });

    let owner = pact_db::parties::PaUser {
        brand_id: &brand.id,
        pa_issuer: iss,
        pa_sub: sub,
    };
    // PACT §4: no contextId starts a new context. Its id is new, so no earlier
    // message can exist in it and nobody else can address it before the PA
    // reads it in the reply; a turn without delegation (public tools only)
    // writes nothing before its reply. But a first message can come twice
    // without a contextId: a retry from a PA that lost the reply, or a copy
    // sent before the first reply came. A delegated turn may act for a
    // person (cancel, move, pay), so its context is created before it runs,
    // keyed by the first messageId (migration 0046), and that row is the
    // turn's claim: a retry or a copy finds it, waits while the turn runs and
    // is answered from its stored reply as in any context, and the agent
    // runs once. The claim is the lookup, made with the grant's read (one
    // statement). Identity turns keep their one statement: measured
    // (scripts/bench-merchant, ratios within each run), a lookup on every
    // webhook identity turn took it from 0.56x to 0.41x of the demo turn's
    // rate and from 1.13x to 1.77x of its PostgreSQL CPU.
    let id = match (&incoming.context_id, &delegation) {
        // An id we could never have minted is just as unknown as a foreign one.
        (Some(raw), _) => Uuid::parse_str(raw).map_err(|_| A2aError::unknown_context())?,
        (None, None) => {
            return Ok(Begin::Claimed(Claim {
                conversation_id: Uuid::new_v4(),
                delegation,
                head,
                written: Written::Nothing,
                first: true,
            }));
        }
        (None, Some(_)) => {
            let Some((conversation_id, claim)) = first_claim else {
                return Err(ApiError::Internal(
                    "a delegated first message reached its claim unread".into(),
                ));
            };
            match claim {
                conversations::FirstClaim::Claimed => {
                    return Ok(Begin::Claimed(Claim {
                        conversation_id,
                        delegation,
                        head,
                        written: Written::Context,
                        first: true,
                    }));
                }
                conversations::FirstClaim::Existing(id) => id,
                conversations::FirstClaim::Racing => return Ok(Begin::Running),
            }
        }
    };
    let delegation_ref = delegation.as_ref();
    let mut tx = node.relaxed_db.begin().await?;

    // The conversation row lock orders claims of one context across nodes.
    let conversation = match conversations::lock_owned(&mut *tx, id, owner).await? {
        Some(conversation) => conversation,
        // The context a delegated first message found was dropped since, its
        // turn failed or cut: look again (this request may run the turn).
        None if incoming.context_id.is_none() => return Ok(Begin::Running),
        None => return Err(A2aError::unknown_context().into()),
    };
    if conversation.closed {
        return Err(A2aError::unsupported("This conversation is closed").into());
    }

    // PACT §5.5: a context that has run as one user refuses another — checked
    // before the retry lookup, so a stored reply made for one user is never
    // handed out under another user's token.
    if let (Some(d), Some(bound)) = (delegation_ref, &conversation.user_sub)
        && bound != &d.user_sub
    {
        return Err(A2aError::invalid_params("This context belongs to another user").into());
    }

    if let Some(seen) =
        conversations::find_message(&mut *tx, conversation.id, &incoming.message_id).await?
    {
        // A delegated turn's stored reply holds account data and its
        // receipt: handed out again only to a retry that presents a live
        // delegation for the context's user (checked above), never to one
        // that leaves the token out (a revoked grant would otherwise still
        // read it, PACT §5.5).
        if seen.grant_id.is_some() && delegation_ref.is_none() {
            return Err(A2aError::invalid_params(
                "This message was sent with a user delegation; send it again with one",
            )
            .into());
        }
        // PACT §4: a retry gets the stored reply (same receipt).
        return Ok(match seen.reply {
            Some(reply) => Begin::Stored(reply),
            None => Begin::Running,
        });
    }
    // A delegated first turn's message is written with its reply: until
    // then its context row is its claim (`claim_first_turn_with_grant`), and
    // the turn is running, unless the claim is older than any turn can run
    // (a node that stopped mid-turn): then this retry takes the turn over,
    // with a claimed message as in any context.
    let first = conversation.first_message_id.as_deref() == Some(incoming.message_id.as_str());
    if first && !conversation.old {
        return Ok(Begin::Running);
    }

    // The first delegated turn binds the context to its user.
    if let Some(d) = delegation_ref
        && conversation.user_sub.is_none()
    {
        conversations::bind_user(&mut *tx, conversation.id, &d.user_sub).await?;
    }
    let claimed = conversations::claim_turn(
        &mut *tx,
        conversation.id,
        &incoming.message_id,
        &incoming.text,
        delegation_ref.map(|d| d.grant_id),
    )
    .await?;
    tx.commit().await?;
    Ok(if claimed {
        Begin::Claimed(Claim {
            conversation_id: conversation.id,
            delegation,
            head,
            written: Written::Message,
            first,
        })
    } else {
        Begin::Running
    })
}

/// The turn this request runs (what phase 1 decided).
struct Claim {
    delegation: Option<Delegation>,
    /// The grant's receipt chain head as phase 1 read it with the grant.
    head: Head,
    conversation_id: Uuid,
    /// What of the turn phase 1 wrote (its claim).
    written: Written,
    /// The first turn of a new context (written or not): it has no history.
    first: bool,
}

/// What of a turn is written before it runs: its claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// The first turn of a new context without delegation: nothing, until
    /// its reply (`conversations::create_with_reply`).
    Nothing,
    /// A delegated first turn: its context, created for its `messageId`; the
    /// message is written with the reply and receipt.
    Context,
    /// A turn in an existing context: its message, without a reply yet.
    Message,
}

/// Phase 2 (the agent, nothing locked) and phase 3 (store).
async fn run_claimed(
    state: &AppState,
    caller: &Caller,
    claim: Claim,
    incoming: &IncomingMessage,
    request_id: &str,
) -> Result<Value, ApiError> {
    let Claim {
        delegation,
        head,
        conversation_id,
        written,
        first,
    } = claim;
    let delegation = delegation.as_ref();
    let brand = &caller.brand;
    let (iss, sub) = (caller.issuer(), caller.pa.sub.as_str());
    let scope_rows = state.config_cache.scopes(&state.db, &brand.id).await?;
    let offered: BTreeSet<String> = scope_rows.iter().map(|s| s.scope_id.clone()).collect();
    let context_id = conversation_id.to_string();

    let (text, mut record, mut end) = match brand.agent() {
        AgentKind::Webhook => {
            let turn = crate::merchant::turn::WebhookTurn {
                caller,
                delegation,
                conversation_id,
                first,
                message_id: &incoming.message_id,
                text: &incoming.text,
                offered: &offered,
                request_id,
            };
            crate::merchant::turn::run(state, turn)
                .instrument(tracing::debug_span!(
                    "brand_agent",
                    pact.agent_kind = "webhook"
                ))
                .await
                .map_err(|e| {
                    // For the operator: the brand and the cause; never a secret or token.
                    tracing::warn!(brand = %brand.id, cause = %e, "the brand's agent failed");
                    ApiError::AgentUnavailable
                })?
        }
        AgentKind::BuiltIn(kind) => {
            let agent = state.agents.of_kind(kind).ok_or_else(|| {
                ApiError::Internal(format!("no brand agent of kind {kind:?}").into())
            })?;
            // Built-in tools run on a plain pooled connection, outside any transaction.
            let rules = bounds::builtin_rules(&crate::agent::demo_tools::all());
            let mut conn = state.db.acquire().await?;
            let mut gate = ToolGate::new(&mut conn, brand, &offered, delegation, &rules);
            let turn = Turn {
                brand,
                pa_issuer: iss,
                pa_sub: sub,
                context_id: &context_id,
                text: &incoming.text,
            };
            let text = agent
                .respond(turn, &mut gate)
                .instrument(tracing::debug_span!("brand_agent", pact.agent_kind = %kind))
                .await
                .map_err(|e| match e {
                    AgentError::DatabaseUnavailable => ApiError::Unavailable,
                    e @ AgentError::Failed(_) => ApiError::internal(e),
                })?;
            (text, gate.into_record(), None)
        }
    };

    // Phase 3. A delegated turn's receipt is chained at the head phase 1 read
    // with the grant; when another turn of the grant appended since, the store
    // is refused (unique chain position) and done again from a fresh head.
    let reply_id = Uuid::new_v4().to_string();
    let mut head = Some(head);
    for attempt in 0..STORE_ATTEMPTS {
        let reply = Reply {
            caller,
            delegation,
            conversation_id,
            written,
            first,
            message_id: &incoming.message_id,
            request_text: &incoming.text,
            reply_id: reply_id.clone(),
            text: &text,
            record: &record,
            end: end.as_ref().map(TurnEnd::end_of_turn),
        };
        // The first attempt chains at the head read with the grant and takes
        // no lock. When it met another turn of the grant (it lost the chain
        // position), the next ones lock the grant row and read the head under
        // that lock: turns of one grant sent in parallel then store one after
        // the other instead of all racing for each position again.
        let contended = attempt > 0 && delegation.is_some();
        let head = head.take().unwrap_or(Head::ReadAgain);
        let stored = if record.missing.is_empty() && record.beyond.is_empty() && !contended {
            // A reply without a receipt (an identity turn) changes nothing of
            // the person's: a crash that loses it before the WAL flush makes
            // the PA's retry run the turn again, so it does not wait for the
            // flush. A receipt is a signed record of what was done under a
            // grant (PACT §5.6): it commits durably.
            let pool = if delegation.is_some() {
                &state.db
            } else {
                &state.relaxed_db
            };
            let mut conn = pool.acquire().await?;
            store(state, &mut conn, &reply, head, None).await
        } else {
            let tx = state.db.begin().await?;
            store_in(state, tx, caller, &reply, head, contended, &scope_rows).await
        };
        match stored {
            Ok(body) => {
                if let Some(end) = end.take() {
                    end.written();
                }
                return Ok(body);
            }
            Err(Stored::Retry) => continue,
            // Another node took a call of this turn: what it did joins the
            // record (and so the receipt) before the reply is stored.
            Err(Stored::Fenced) => {
                if let Some(end) = end.take() {
                    end.gather(&mut record).await;
                }
            }
            Err(Stored::Failed(e)) => return Err(e),
        }
    }
    Err(ApiError::Internal(
        "the turn's reply could not be stored: its grant's receipt chain kept moving".into(),
    ))
}

/// Phase 3 in a transaction: after the grant's row lock when `lock_grant`,
/// and with the step-up authorization when the turn lacked scopes (PACT §5.5:
/// the task and its device authorization are stored together or not at all).
async fn store_in(
    node: &NodeInner,
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    caller: &Caller,
    reply: &Reply<'_>,
    head: Head,
    lock_grant: bool,
    scope_rows: &[pact_db::scopes::BrandScope],
) -> Result<Value, Stored> {
    if lock_grant && let Some(d) = reply.delegation {
        pact_db::grants::lock(&mut *tx, d.grant_id).await?;
    }
    // PACT §5.5: a missing scope is asked for first; once the turn holds
    // every scope, a call beyond a limit is put to the person on its own.
    // An unverified agent is not offered a step-up to a scope its tier may
    // not request (admission.rs): the person could not approve it anyway.
    let may_ask =
        crate::admission::scope_refused(&caller.agent, scope_rows, &reply.record.missing).is_none();
    // A step-up in a delegated turn is the person's the turn acted for: only
    // they see and decide it (consent.rs, `is_for`).
    let for_user = reply.delegation.map(|d| &d.user_sub);
    let link = if !reply.record.missing.is_empty() && may_ask {
        Some(step_up(node, &mut tx, caller, for_user, reply.record, scope_rows).await?)
    } else if !reply.record.beyond.is_empty() {
        Some(operation_step_up(node, &mut tx, caller, for_user, reply.record).await?)
    } else {
        None
    };
    let body = store(node, &mut tx, reply, head, link).await?;
    tx.commit().await?;
    Ok(body)
}

/// How often phase 3 is tried before giving up (each retry means another turn
/// of the same grant stored first, so every retry is someone's progress).
const STORE_ATTEMPTS: usize = 8;

/// What phase 3 stores.
struct Reply<'a> {
    caller: &'a Caller,
    delegation: Option<&'a Delegation>,
    conversation_id: Uuid,
    /// What of the turn its claim wrote (see `Claim::written`).
    written: Written,
    /// The first turn of its context (see `Claim::first`).
    first: bool,
    message_id: &'a str,
    request_text: &'a str,
    reply_id: String,
    text: &'a str,
    record: &'a GateRecord,
    /// A merchant agent's turn: its end, written with the reply.
    end: Option<pact_db::conversations::EndOfTurn>,
}

/// Why a store did not happen.
enum Stored {
    /// A unique violation: the receipt's chain position (or a drawn user
    /// code) was taken meanwhile; or a deadlock between two turns of the
    /// grant, which PostgreSQL broke by rolling this one back. Nothing was
    /// stored; do it again.
    Retry,
    /// Another node took a call of the turn: nothing was stored; gather
    /// what it did and do it again.
    Fenced,
    Failed(ApiError),
}

impl From<pact_db::Error> for Stored {
    fn from(e: pact_db::Error) -> Self {
        // A deadlock or serialization failure rolled back the whole store,
        // so it is safe to do again. Turns of one grant no longer wait for
        // each other's grant lock after appending (`pact_db::grants::lock`),
        // which is how two of them deadlocked; this stays for any other.
        if pact_db::is_unique_violation(&e) || e.is_serialization_failure() {
            Self::Retry
        } else {
            Self::Failed(e.into())
        }
    }
}

impl From<ApiError> for Stored {
    fn from(e: ApiError) -> Self {
        Self::Failed(e)
    }
}

/// Builds and stores the reply (with its receipt under delegation, PACT §5.6;
/// as an `auth-required` task when `step_up` is given, PACT §5.5).
async fn store(
    node: &NodeInner,
    conn: &mut sqlx::PgConnection,
    r: &Reply<'_>,
    head: Head,
    step_up: Option<StepUp>,
) -> Result<Value, Stored> {
    let brand = &r.caller.brand;
    let context_id = r.conversation_id.to_string();
    let mut message = AgentMessage::new(r.reply_id.clone(), context_id.clone(), r.text.to_owned());
    let now = node.clock.now();
    let receipt = match r.delegation {
        None => None,
        Some(d) => {
            let (receipt, row) = super::receipts::build(
                node,
                &mut *conn,
                d,
                super::receipts::TurnRef {
                    pa_issuer: r.caller.issuer(),
                    brand_id: &brand.id,
                    conversation_id: r.conversation_id,
                    message_id: r.message_id,
                },
                head,
                r.record,
                now,
            )
            .await?;
            let mut metadata = Map::new();
            metadata.insert(
                "pact.receipt".to_owned(),
                serde_json::to_value(receipt).map_err(ApiError::internal)?,
            );
            message.metadata = Some(metadata);
            Some(row)
        }
    };
    let response = match step_up {
        None => SendMessageResponse::Message(message),
        Some(StepUp {
            authorization_id,
            link,
            text,
            missing_details,
        }) => {
            message.parts[0].text = text;
            let mut metadata = Map::new();
            metadata.insert("pact.missingScopes".to_owned(), json!(r.record.missing));
            if let Some(details) = missing_details {
                // What the person is asked to allow once, in words a
                // personal agent can pass on.
                metadata.insert("pact.missingAuthorizationDetails".to_owned(), details);
            }
            metadata.insert("pact.verificationUriComplete".to_owned(), json!(link));
            let task_id = Uuid::new_v4();
            let task = Task {
                id: task_id.to_string(),
                context_id,
                status: TaskStatus {
                    state: TASK_STATE_AUTH_REQUIRED.to_owned(),
                    message: Some(message),
                },
                metadata: Some(metadata),
            };
            // Kept for Get Task (A2A 1.0 §3.1.3), in the turn's transaction:
            // a task that was returned can always be followed.
            let stored = serde_json::to_value(&task).map_err(ApiError::internal)?;
            pact_db::step_up_tasks::insert(&mut *conn, task_id, authorization_id, &stored, now)
                .await?;
            SendMessageResponse::Task(task)
        }
    };
    let body = serde_json::to_value(&response).map_err(ApiError::internal)?;
    let new_context = conversations::NewTurnContext {
        id: r.conversation_id,
        brand_id: &brand.id,
        pa_issuer: r.caller.issuer(),
        pa_sub: &r.caller.pa.sub,
        user_sub: r.delegation.map(|d| &d.user_sub),
        message_id: r.message_id,
        request_text: r.request_text,
        grant_id: r.delegation.map(|d| d.grant_id),
    };
    let finished = match (&receipt, r.written) {
        (None, Written::Nothing) => {
            conversations::create_with_reply(&mut *conn, new_context, &r.reply_id, &body, r.end)
                .await?
        }
        (None, Written::Message) => {
            conversations::finish_turn(
                &mut *conn,
                r.conversation_id,
                r.message_id,
                &r.reply_id,
                &body,
                r.end,
            )
            .await?
        }
        // A delegated first turn was claimed before it ran (`begin`), and
        // only a delegated one by its context alone.
        (Some(_), Written::Nothing) | (None, Written::Context) => {
            return Err(Stored::Failed(ApiError::Internal(
                "a turn reached its store without the claim its kind needs".into(),
            )));
        }
        (Some(row), Written::Context) => {
            conversations::finish_first_turn_with_receipt(
                &mut *conn,
                r.request_text,
                &r.reply_id,
                &body,
                &row.as_new(),
                r.end,
            )
            .await?
        }
        (Some(row), Written::Message) => {
            conversations::finish_turn_with_receipt(
                &mut *conn,
                &r.reply_id,
                &body,
                &row.as_new(),
                r.end,
                r.first,
            )
            .await?
        }
    };
    match finished {
        conversations::Finished::Stored => {}
        conversations::Finished::Fenced => return Err(Stored::Fenced),
        conversations::Finished::Gone => {
            return Err(Stored::Failed(ApiError::Internal(
                "the turn's claim (for a new context: its grant) disappeared before its reply was stored".into(),
            )));
        }
    }
    Ok(body)
}

/// A step-up task's link, its message, and (beyond a limit) the operations
/// the person is asked to allow.
struct StepUp {
    /// The device authorization the task follows.
    authorization_id: Uuid,
    link: String,
    text: String,
    missing_details: Option<Value>,
}

/// PACT §5.5 step-up: the device authorization for the missing scopes —
/// the live one for this PA and user when there is one, so that a person who
/// approved and asks again is not sent to approve a second code — and a
/// message saying what is needed.
async fn step_up(
    node: &NodeInner,
    conn: &mut sqlx::PgConnection,
    caller: &Caller,
    for_user: Option<&UserSub>,
    record: &GateRecord,
    scope_rows: &[pact_db::scopes::BrandScope],
) -> Result<StepUp, Stored> {
    let now = node.clock.now();
    let request = authorizations::Request {
        brand_id: &caller.brand.id,
        pa_issuer: caller.issuer(),
        pa_sub: &caller.pa.sub,
        scopes: &record.missing,
        for_user,
        kind: authorizations::Kind::StepUp,
    };
    // Inside the transaction that stores the turn's reply: the task and its
    // authorization are stored together or not at all. A drawn user code
    // already live has aborted that transaction: the caller runs it again.
    let link = match authorizations::issue(conn, &node.config, request, now).await {
        Ok(link) => link,
        Err(IssueError::CodeTaken) => return Err(Stored::Retry),
        Err(IssueError::Database(e)) => return Err(Stored::from(e)),
    };
    metrics::counter!("pactd_step_ups_total").increment(1);
    let wanted: Vec<&str> = scope_rows
        .iter()
        .filter(|s| record.missing.contains(&s.scope_id))
        .map(|s| s.description.as_str())
        .collect();
    let text = if link.already_approved {
        format!(
            "You have already approved this ({}, code {}). Your agent only has to collect \
             that permission (its device authorization for these scopes), then ask again.",
            wanted.join("; "),
            link.user_code
        )
    } else {
        format!(
            "I need your permission first: {}. Open {} to approve (code {}), then ask again.",
            wanted.join("; "),
            link.verification_uri_complete,
            link.user_code
        )
    };
    Ok(StepUp {
        authorization_id: link.id,
        link: link.verification_uri_complete,
        text,
        missing_details: None,
    })
}

/// A step-up beyond a limit (PACT §5.5 for `authorization_details`): the
/// calls that went beyond are put to the person one by one, each in plain
/// words with the limit it goes beyond. Approving allows exactly that call
/// (its `argsHash`), once, on the grant it was made under; the merchant
/// agent's retry with the same arguments then goes through. No new token:
/// the personal agent only sends the message again.
async fn operation_step_up(
    node: &NodeInner,
    conn: &mut sqlx::PgConnection,
    caller: &Caller,
    for_user: Option<&UserSub>,
    record: &GateRecord,
) -> Result<StepUp, Stored> {
    let now = node.clock.now();
    let asked = crate::web::operations::Asked::of(&record.beyond);
    let request = authorizations::Request {
        brand_id: &caller.brand.id,
        pa_issuer: caller.issuer(),
        pa_sub: &caller.pa.sub,
        scopes: &asked.scopes(),
        for_user,
        kind: authorizations::Kind::Operation {
            details: &asked.entries,
            operations: &asked.stored,
        },
    };
    let link = match authorizations::issue(conn, &node.config, request, now).await {
        Ok(link) => link,
        Err(IssueError::CodeTaken) => return Err(Stored::Retry),
        Err(IssueError::Database(e)) => return Err(Stored::from(e)),
    };
    metrics::counter!("pactd_step_ups_total").increment(1);
    let text = format!(
        "This needs your approval first, because it goes beyond what you allowed: {}. \
         Open {} to approve it once (code {}), then ask again.",
        asked.sentences.join("; "),
        link.verification_uri_complete,
        link.user_code
    );
    Ok(StepUp {
        authorization_id: link.id,
        link: link.verification_uri_complete,
        text,
        missing_details: Some(asked.entries),
    })
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for Stored {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}
