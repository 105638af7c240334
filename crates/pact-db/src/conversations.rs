//! Conversations (A2A contexts) and their messages (PACT §4).
//!
//! A delegated turn stamps its grant's `last_used_at` at most once a minute
//! (people read "last used" to the minute). Writing the grant row on every
//! turn made each turn of a busy grant a new row version and WAL record, and
//! queued the grant's turns behind that row's lock; the order of a grant's
//! receipts is kept by their unique chain position, not by that lock.
//!
//! The stamp is skipped when the grant's row is locked (`skip locked`): by
//! another turn's stamp, or by a turn that lost its chain position and
//! stores under the grant's lock (`grants::lock`). A turn that waited there
//! after appending its receipt would wait for a turn that waits for its
//! receipt row: a deadlock, which PostgreSQL breaks only after
//! `deadlock_timeout` (1 s) by failing one of them. The holder stamps the
//! grant itself.

use crate::ids::{AgentIssuer, BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::ids::GrantId;
use crate::parties::PaUser;

/// The end of a merchant agent's turn, written with its reply: the turn's
/// fence row (`turn_fences`, migration 0026) as a tombstone, so that no node
/// takes a call of the turn any more. Written in the reply's own statement,
/// the end costs no round trip of its own; when another node already entered
/// the turn (the row exists), nothing of the reply is written and the caller
/// is told (`Finished::Fenced`): it ends the fence on its own, waits for
/// those calls and stores the reply with what they did, so every call that
/// was sent is in the receipt (PACT §5.6).
#[derive(Clone, Copy, Debug)]
pub struct EndOfTurn {
    pub turn_id: Uuid,
    pub expires_at: OffsetDateTime,
}

/// What became of a reply's store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    Stored,
    /// The claim (for a new context: its grant) is gone: nothing written.
    Gone,
    /// Another node took a call of the turn: nothing written (see [`EndOfTurn`]).
    Fenced,
}

impl Finished {
    fn of(stored: bool, fence_ok: bool) -> Self {
        match (stored, fence_ok) {
            (true, _) => Self::Stored,
            (false, false) => Self::Fenced,
            (false, true) => Self::Gone,
        }
    }
}

fn end_parts(end: Option<EndOfTurn>) -> (Option<Uuid>, Option<OffsetDateTime>) {
    (end.map(|e| e.turn_id), end.map(|e| e.expires_at))
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Conversation {
    pub id: Uuid,
    pub brand_id: BrandId,
    pub pa_issuer: AgentIssuer,
    pub pa_sub: String,
    pub user_sub: Option<UserSub>,
    pub closed: bool,
    /// The `messageId` a delegated context was created for ([`claim_first_turn_with_grant`]).
    pub first_message_id: Option<String>,
    /// Created longer than [`CLAIM_ABANDONED_AFTER`] ago (by the database's clock).
    pub old: bool,
}

/// How long a claim may stay without its reply before it counts as left by a
/// node that stopped mid-turn: the longest turn is bounded by the agent
/// timeout (at most 25 s), so after ten minutes nobody will finish it. The
/// housekeeping sweep drops such claims; a retry takes over a first turn's.
pub const CLAIM_ABANDONED_AFTER: time::Duration = time::Duration::minutes(10);

/// The first turn of a new context (PACT §4, no `contextId`), bound to
/// `user_sub` under delegation (PACT §5.5).
#[derive(Clone, Debug)]
pub struct NewTurnContext<'a> {
    pub id: Uuid,
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub pa_sub: &'a str,
    pub user_sub: Option<&'a UserSub>,
    pub message_id: &'a str,
    pub request_text: &'a str,
    pub grant_id: Option<GrantId>,
}

/// The whole first turn of a new context without delegation, written once its
/// reply is known: the conversation, its message and the reply, in one
/// statement. Such a context needs no claim while its turn runs: no request
/// can address it before the PA reads its id in this reply (PACT §4), so
/// nothing is written until there is something to keep. A delegated first
/// turn, which may act for a person, is claimed before it runs instead
/// ([`claim_first_turn_with_grant`]), so that a copy of it sent at once waits for its
/// reply rather than acting again.
pub async fn create_with_reply(
    db: impl PgExecutor<'_>,
    c: NewTurnContext<'_>,
    reply_message_id: &str,
    reply: &serde_json::Value,
    end: Option<EndOfTurn>,
) -> DbResult<Finished> {
    let (turn_id, expires_at) = end_parts(end);
    let row = sqlx::query!(
        "with f as (insert into turn_fences (turn_id, ended, expires_at) \
                    select $11::uuid, true, $12::timestamptz where $11::uuid is not null \
                    on conflict (turn_id) do nothing returning turn_id), \
         ok as (select $11::uuid is null or exists (select 1 from f) as fine), \
         c as (insert into conversations (id, brand_id, pa_issuer, pa_sub, user_sub) \
               select $1, $2, $3, $4, $5 from ok where ok.fine returning id), \
         m as (insert into messages (conversation_id, message_id, request_text, grant_id, \
                                     reply_message_id, reply, replied_at) \
               select id, $6, $7, $8, $9, $10, now() from c returning 1) \
         select exists (select 1 from m) as \"stored!\", (select fine from ok) as \"fence_ok!\"",
        c.id,
        c.brand_id,
        c.pa_issuer,
        c.pa_sub,
        c.user_sub.map(UserSub::as_str),
        c.message_id,
        c.request_text,
        c.grant_id.map(GrantId::as_uuid),
        reply_message_id,
        reply,
        turn_id,
        expires_at,
    )
    .fetch_one(db)
    .await?;
    Ok(Finished::of(row.stored, row.fence_ok))
}

/// What claiming a new context's first message found
/// ([`claim_first_turn_with_grant`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstClaim {
    /// The context is created for this message: the caller runs the turn,
    /// and stores it with [`finish_first_turn_with_receipt`].
    Claimed,
    /// This (brand, PA issuer, PA sub) already started a context with this
    /// first message: the caller answers from it, as for any retry.
    Existing(Uuid),
    /// Another request is creating that context right now (its insert had not
    /// committed when this statement looked): look again.
    Racing,
}

/// Creates the context `c` for its first message, unless this (brand, PA
/// issuer, PA sub) started one with the same first message id already (the
/// unique index of migration 0046), in one statement. A turn that acts for a
/// person is claimed before it runs, like a turn in an existing context, so
/// that the same first message sent twice at once (a personal agent that
/// retried before the reply came) runs once: the copy finds the context and
/// waits for its reply (PACT §4).
///
/// The context row is the claim: the message is written once, with its reply
/// and receipt ([`finish_first_turn_with_receipt`]). A context whose first
/// message has no row yet is a turn still running (or abandoned, see
/// [`CLAIM_ABANDONED_AFTER`]). Claiming with a message row too, and updating
/// it with the reply, wrote the message twice and its index entries three
/// times for every delegated first turn.
///
/// The turn's grant and its receipt chain's head are read in the same
/// statement (as [`crate::grants::for_turn`] reads them), so that a
/// delegated first message costs one round trip before its agent runs. The
/// context is created only while the grant is live at `now` and is this
/// brand's, PA's and user's (`c`'s parties); the caller checks the grant it
/// gets back by its own rule and drops the context when the two disagree.
/// `None` when there is no such grant.
pub async fn claim_first_turn_with_grant(
    db: impl PgExecutor<'_>,
    grant_id: GrantId,
    c: NewTurnContext<'_>,
    now: OffsetDateTime,
) -> DbResult<Option<(crate::grants::TurnGrant, FirstClaim)>> {
    let row = sqlx::query!(
        r#"with g as (select g.brand_id, g.pa_issuer, g.user_sub, g.scopes, g.expires_at,
                             g.revoked_at, g.authorization_details, g.terms,
                             h.seq as head_seq, h.jws as head_jws
                      from grants g
                      left join lateral (select seq, jws from receipts r
                                         where r.grant_id = g.id order by seq desc limit 1) h on true
                      where g.id = $1),
                c as (insert into conversations (id, brand_id, pa_issuer, pa_sub, user_sub,
                                                 first_message_id)
                      select $2, $3, $4, $5, $6, $7 from g
                      where g.revoked_at is null and g.expires_at > $8
                        and g.brand_id = $3 and g.pa_issuer = $4 and g.user_sub = $6
                      on conflict (brand_id, pa_issuer, pa_sub, first_message_id)
                        where first_message_id is not null do nothing
                      returning id)
           select g.brand_id as "brand_id!", g.pa_issuer as "pa_issuer!",
                  g.user_sub as "user_sub!", g.scopes as "scopes!",
                  g.expires_at as "expires_at!", g.revoked_at, g.authorization_details, g.terms,
                  g.head_seq as "head_seq?", g.head_jws as "head_jws?",
                  exists (select 1 from c) as "claimed!",
                  (select id from conversations where brand_id = $3 and pa_issuer = $4
                   and pa_sub = $5 and first_message_id = $7) as existing
           from g"#,
        grant_id.as_uuid(),
        c.id,
        c.brand_id,
        c.pa_issuer,
        c.pa_sub,
        c.user_sub.map(UserSub::as_str),
        c.message_id,
        now,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| {
        let claim = match (r.claimed, r.existing) {
            (true, _) => FirstClaim::Claimed,
            (false, Some(id)) => FirstClaim::Existing(id),
            (false, None) => FirstClaim::Racing,
        };
        (crate::grants::turn_grant_of_row!(r), claim)
    }))
}

/// Drops the context a failed first turn created ([`claim_first_turn_with_grant`]), so
/// the PA's retry of its `messageId` runs: only while no message of it is
/// stored (a reply whose commit won the race stays).
pub async fn abandon_first_turn(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
) -> DbResult<()> {
    sqlx::query!(
        "delete from conversations where id = $1 and first_message_id = $2 \
         and not exists (select 1 from messages where conversation_id = $1)",
        conversation_id,
        message_id,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Locks the conversation for this turn, but only when it belongs to this
/// exact (brand, PA issuer, PA sub): anyone else's context reads as absent, so
/// the caller answers `Unknown contextId` for both (PACT §4). The row lock
/// serialises turns in one context across nodes, which is what makes retries
/// by `messageId` idempotent.
pub async fn lock_owned(
    db: impl PgExecutor<'_>,
    id: Uuid,
    owner: PaUser<'_>,
) -> DbResult<Option<Conversation>> {
    let PaUser {
        brand_id,
        pa_issuer,
        pa_sub,
    } = owner;
    sqlx::query_as!(
        Conversation,
        "select id, brand_id, pa_issuer, pa_sub, user_sub as \"user_sub: UserSub\", closed, \
                first_message_id, created_at < now() - make_interval(secs => $5) as \"old!\" \
         from conversations \
         where id = $1 and brand_id = $2 and pa_issuer = $3 and pa_sub = $4 for update",
        id,
        brand_id,
        pa_issuer,
        pa_sub,
        CLAIM_ABANDONED_AFTER.as_seconds_f64(),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Closes a conversation; later turns get `UNSUPPORTED_OPERATION`.
pub async fn close(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<bool> {
    let done = sqlx::query!(
        "update conversations set closed = true, updated_at = now() where id = $1",
        id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A message already seen in a context: its stored reply, if the turn finished.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SeenMessage {
    pub reply: Option<serde_json::Value>,
    /// The grant the message was sent under, when it was delegated.
    pub grant_id: Option<Uuid>,
}

pub async fn find_message(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
) -> DbResult<Option<SeenMessage>> {
    sqlx::query_as!(
        SeenMessage,
        "select reply, grant_id from messages where conversation_id = $1 and message_id = $2",
        conversation_id,
        message_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Binds the context to the brand user it first ran as under delegation (PACT §5.5).
pub async fn bind_user(db: impl PgExecutor<'_>, id: Uuid, user_sub: &UserSub) -> DbResult<()> {
    sqlx::query!(
        "update conversations set user_sub = $2 where id = $1 and user_sub is null",
        id,
        user_sub,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Claims a turn: inserts the message without a reply (a running turn). False
/// when this `messageId` is already known in the context — someone else runs
/// or ran it. The row is what makes a retry during a running turn wait rather
/// than call the agent a second time (PACT §4).
pub async fn claim_turn(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
    request_text: &str,
    grant_id: Option<GrantId>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "insert into messages (conversation_id, message_id, request_text, grant_id) \
         values ($1, $2, $3, $4) on conflict (conversation_id, message_id) do nothing",
        conversation_id,
        message_id,
        request_text,
        grant_id.map(GrantId::as_uuid),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Stores the reply of a claimed turn (and the turn's end, see [`EndOfTurn`]).
pub async fn finish_turn(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
    reply_message_id: &str,
    reply: &serde_json::Value,
    end: Option<EndOfTurn>,
) -> DbResult<Finished> {
    let (turn_id, expires_at) = end_parts(end);
    let row = sqlx::query!(
        "with f as (insert into turn_fences (turn_id, ended, expires_at) \
                    select $5::uuid, true, $6::timestamptz where $5::uuid is not null \
                    on conflict (turn_id) do nothing returning turn_id), \
         ok as (select $5::uuid is null or exists (select 1 from f) as fine), \
         touched as (update conversations set updated_at = now() where id = $1 \
                     and (select fine from ok)), \
         m as (update messages set reply_message_id = $3, reply = $4, replied_at = now() \
               where conversation_id = $1 and message_id = $2 and reply is null \
               and (select fine from ok) returning 1) \
         select exists (select 1 from m) as \"stored!\", (select fine from ok) as \"fence_ok!\"",
        conversation_id,
        message_id,
        reply_message_id,
        reply,
        turn_id,
        expires_at,
    )
    .fetch_one(db)
    .await?;
    Ok(Finished::of(row.stored, row.fence_ok))
}

/// Stores the reply of a claimed delegated turn together with its receipt,
/// in one statement: the receipt is appended at `receipt.seq`, the reply
/// stored only if it was, and the grant's last use stamped (at most once a
/// minute, see above). `Ok(false)` when the claim is gone. A unique violation
/// means another turn of the grant took that `seq` since the caller read the
/// chain's head: read it again and retry (the chain never forks, PACT §5.6).
///
/// The context's `updated_at` is moved on, except for its `first` turn: its
/// claim created the row moments before (`claim_first_turn_with_grant`), and a second
/// version of the row (and its index entries) would only say the same.
pub async fn finish_turn_with_receipt(
    db: impl PgExecutor<'_>,
    reply_message_id: &str,
    reply: &serde_json::Value,
    receipt: &crate::receipts::NewReceipt<'_>,
    end: Option<EndOfTurn>,
    first: bool,
) -> DbResult<Finished> {
    let (turn_id, expires_at) = end_parts(end);
    let row = sqlx::query!(
        "with f as (insert into turn_fences (turn_id, ended, expires_at) \
                    select $9::uuid, true, $10::timestamptz where $9::uuid is not null \
                    on conflict (turn_id) do nothing returning turn_id), \
         ok as (select $9::uuid is null or exists (select 1 from f) as fine), \
         g as (select id from grants where id = $1 and (select fine from ok)), \
         t as (update grants set last_used_at = now() where id in \
               (select id from grants where id = $1 and (select fine from ok) \
                and (last_used_at is null or last_used_at < now() - interval '1 minute') \
                for no key update skip locked)), \
         r as (insert into receipts (grant_id, seq, conversation_id, message_id, jws, claims) \
               select g.id, $2, $3, $4, $5, $6 from g \
               where exists (select 1 from messages where conversation_id = $3 \
                             and message_id = $4 and reply is null) returning id), \
         c as (update conversations set updated_at = now() where id = $3 and not $11 \
               and exists (select 1 from r)), \
         m as (update messages set reply_message_id = $7, reply = $8, replied_at = now() \
               where conversation_id = $3 and message_id = $4 and reply is null \
               and exists (select 1 from r) returning 1) \
         select exists (select 1 from m) as \"stored!\", (select fine from ok) as \"fence_ok!\"",
        receipt.grant_id.as_uuid(),
        receipt.seq,
        receipt.conversation_id,
        receipt.message_id,
        receipt.jws,
        receipt.claims,
        reply_message_id,
        reply,
        turn_id,
        expires_at,
        first,
    )
    .fetch_one(db)
    .await?;
    Ok(Finished::of(row.stored, row.fence_ok))
}

/// Stores a delegated first turn, whose claim is its context row
/// ([`claim_first_turn_with_grant`]): its message with the reply, and its receipt, in
/// one statement, as [`finish_turn_with_receipt`] does for a claimed message.
/// `Gone` when the context was dropped meanwhile (its turn abandoned); a
/// unique violation, as there, means the receipt's chain position was taken.
///
/// A statement of its own, although it shares its first lines with
/// [`finish_turn_with_receipt`]: one statement for both, choosing by a
/// parameter, was measured (scripts/bench-merchant, side by side) at 844 µs
/// of PostgreSQL CPU a delegated first turn against 556 µs for the two.
pub async fn finish_first_turn_with_receipt(
    db: impl PgExecutor<'_>,
    request_text: &str,
    reply_message_id: &str,
    reply: &serde_json::Value,
    receipt: &crate::receipts::NewReceipt<'_>,
    end: Option<EndOfTurn>,
) -> DbResult<Finished> {
    let (turn_id, expires_at) = end_parts(end);
    let row = sqlx::query!(
        "with f as (insert into turn_fences (turn_id, ended, expires_at) \
                    select $9::uuid, true, $10::timestamptz where $9::uuid is not null \
                    on conflict (turn_id) do nothing returning turn_id), \
         ok as (select $9::uuid is null or exists (select 1 from f) as fine), \
         g as (select id from grants where id = $1 and (select fine from ok)), \
         t as (update grants set last_used_at = now() where id in \
               (select id from grants where id = $1 and (select fine from ok) \
                and (last_used_at is null or last_used_at < now() - interval '1 minute') \
                for no key update skip locked)), \
         r as (insert into receipts (grant_id, seq, conversation_id, message_id, jws, claims) \
               select g.id, $2, $3, $4, $5, $6 from g \
               where exists (select 1 from conversations where id = $3) returning id), \
         m as (insert into messages (conversation_id, message_id, request_text, grant_id, \
                                     reply_message_id, reply, replied_at) \
               select $3, $4, $11, $1, $7, $8, now() from r returning 1) \
         select exists (select 1 from m) as \"stored!\", (select fine from ok) as \"fence_ok!\"",
        receipt.grant_id.as_uuid(),
        receipt.seq,
        receipt.conversation_id,
        receipt.message_id,
        receipt.jws,
        receipt.claims,
        reply_message_id,
        reply,
        turn_id,
        expires_at,
        request_text,
    )
    .fetch_one(db)
    .await?;
    Ok(Finished::of(row.stored, row.fence_ok))
}

/// Drops a claimed turn that failed, so the PA may retry the `messageId`.
pub async fn abandon_turn(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    message_id: &str,
) -> DbResult<()> {
    sqlx::query!(
        "delete from messages where conversation_id = $1 and message_id = $2 and reply is null",
        conversation_id,
        message_id,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Claims left behind by a node that stopped mid-turn: older than `before`
/// and still without a reply. Deleting them lets the `messageId` be retried.
/// `replied_at is null` is what the sweep's index is declared on (migration
/// 0049: an index on `reply is null` was read by every turn's store).
pub async fn delete_stale_claims(
    db: impl PgExecutor<'_>,
    before: time::OffsetDateTime,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from messages where replied_at is null and reply is null and created_at < $1",
        before,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// One earlier finished turn of a context, oldest first.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PastTurn {
    pub message_id: String,
    pub request_text: String,
    pub reply: serde_json::Value,
}

/// The last `limit` finished turns of a context, oldest first.
/// The last `limit` answered turns of a conversation, oldest first; with
/// `delegated` false, only the turns sent without a delegation: a turn
/// without a token does not hand the merchant's agent what delegated turns
/// said (account data the token guarded).
pub async fn history(
    db: impl PgExecutor<'_>,
    conversation_id: Uuid,
    limit: i64,
    delegated: bool,
) -> DbResult<Vec<PastTurn>> {
    sqlx::query_as!(
        PastTurn,
        "select message_id, request_text, reply from ( \
           select id, message_id, request_text, reply from messages \
           where conversation_id = $1 and reply is not null and ($3 or grant_id is null) \
           order by id desc limit $2 \
         ) t order by id",
        conversation_id,
        limit,
        delegated,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}
