//! Pending device authorizations, answered from memory (RFC 8628 §3.5).
//!
//! Nearly every poll finds the person still deciding. Once a node has seen a
//! code pending in the database, it keeps what the poll rules need (owner,
//! interval, last poll, expiry) and answers later polls of that code itself:
//! `authorization_pending` or `slow_down`, with no round trip.
//!
//! What keeps this right:
//! - Every change of an authorization's status (approve, deny, redeem) or of
//!   its device code (a step-up take-over) is announced on
//!   `pactd_device_authorizations` by a row trigger (migration 0024), and the
//!   change listener makes every node forget that authorization at once; the
//!   next poll reads the database again. Between the commit and the
//!   notification a poll may still hear `authorization_pending`, which only
//!   tells the PA to poll again.
//! - A node that cannot show it hears changes (listener down, or its feed not
//!   proven by a heartbeat within the bound, `feed.rs`) neither answers nor
//!   learns from memory, and a reconnect starts from an empty book, since
//!   notifications sent meanwhile are lost.
//! - A database read that began before a change can never put the old state
//!   back: every forget moves a generation forward, and what was read is kept
//!   only if the generation did not move since the read began (as the
//!   configuration cache does).
//!
//! The last poll is recorded on this node only, so a PA spreading its polls
//! over several nodes is held to the interval by each of them separately;
//! `slow_down` is a courtesy to the server (RFC 8628 §3.5), and the rate
//! limits still apply per node as before.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pact_db::ids::{AgentIssuer, BrandId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::feed::ChangeFeed;
use pact_core::domain::device_flow::{self, PollDecision, PollState, Status};

/// Past this many codes the book stops learning new ones (after dropping the
/// expired): each is a pending authorization the PA limits let through, and
/// those the book does not hold are answered from the database as before.
const MAX_ENTRIES: usize = 200_000;

/// A pending authorization as the poll rules see it.
#[derive(Clone, Debug)]
pub struct Pending {
    pub id: Uuid,
    pub pa_issuer: AgentIssuer,
    pub brand_id: BrandId,
    pub interval_secs: i32,
    pub last_polled_at: Option<OffsetDateTime>,
    pub expires_at: OffsetDateTime,
}

/// What the book says about a poll.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Decided from memory, and the poll recorded: `Pending`, `SlowDown` or
    /// `Expired`.
    Decided(PollDecision),
    /// The code belongs to another PA or brand: as unknown as a made-up one.
    NotYours,
}

/// Where a database read began, so its result is kept only if nothing changed.
#[derive(Clone, Copy, Debug)]
pub struct Ticket(Option<u64>);

pub struct PendingPolls {
    /// The listener is subscribed (set after it resynchronised).
    live: AtomicBool,
    /// Whether what it hears is proven current (checked at every use).
    feed: Arc<ChangeFeed>,
    generation: AtomicU64,
    book: Mutex<Book>,
    /// Counts forgets, so whoever waits for one (a test) is woken.
    forgets: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct Book {
    by_code: HashMap<Vec<u8>, Pending>,
    /// The code hash of each authorization, for forgetting by id.
    code_of: HashMap<Uuid, Vec<u8>>,
}

impl Book {
    fn remove_id(&mut self, id: Uuid) {
        if let Some(code) = self.code_of.remove(&id) {
            self.by_code.remove(&code);
        }
    }

    fn drop_expired_before(&mut self, before: OffsetDateTime) {
        self.by_code.retain(|_, p| p.expires_at >= before);
        let by_code = &self.by_code;
        self.code_of.retain(|_, code| by_code.contains_key(code));
    }
}

impl PendingPolls {
    pub fn new(feed: Arc<ChangeFeed>) -> Self {
        Self {
            live: AtomicBool::new(false),
            feed,
            generation: AtomicU64::new(0),
            book: Mutex::default(),
            forgets: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Subscribed, and the feed proven within its bound.
    fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire) && self.feed.is_live()
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        match self.book.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The change listener subscribed and reloaded: the book starts empty
    /// (what it held may be stale) and may fill again.
    pub fn resume(&self) {
        self.set_live(true);
    }

    /// The change listener lost its connection (or stopped): the book is
    /// emptied and neither answers nor learns until [`Self::resume`].
    pub fn suspend(&self) {
        self.set_live(false);
    }

    /// Something may have changed that no notification names: forget every
    /// authorization, staying live (or not) as before.
    pub fn forget_all(&self) {
        let mut book = self.book();
        self.generation.fetch_add(1, Ordering::AcqRel);
        *book = Book::default();
        drop(book);
        self.forgets.send_modify(|n| *n += 1);
    }

    fn set_live(&self, live: bool) {
        let mut book = self.book();
        self.generation.fetch_add(1, Ordering::AcqRel);
        *book = Book::default();
        self.live.store(live, Ordering::Release);
    }

    /// An authorization changed (its notification arrived): forget it.
    pub fn forget(&self, id: Uuid) {
        let mut book = self.book();
        self.generation.fetch_add(1, Ordering::AcqRel);
        book.remove_id(id);
        drop(book);
        self.forgets.send_modify(|n| *n += 1);
    }

    /// Wakes on every forget.
    pub fn forgets(&self) -> tokio::sync::watch::Receiver<u64> {
        self.forgets.subscribe()
    }

    /// Whether the book holds the authorization `id`.
    pub fn holds(&self, id: Uuid) -> bool {
        self.book().code_of.contains_key(&id)
    }

    /// Taken before the database read whose result may be kept.
    pub fn ticket(&self) -> Ticket {
        Ticket(
            self.is_live()
                .then(|| self.generation.load(Ordering::Acquire)),
        )
    }

    /// Answers a poll of the code hashed `code` by `pa_issuer` at `brand_id`
    /// from memory, recording it; `None` when the book does not hold the code
    /// (ask the database).
    pub fn poll(
        &self,
        code: &[u8],
        pa_issuer: &AgentIssuer,
        brand_id: &BrandId,
        now: OffsetDateTime,
    ) -> Option<Answer> {
        if !self.is_live() {
            return None;
        }
        let mut book = self.book();
        let entry = book.by_code.get_mut(code)?;
        if entry.pa_issuer != pa_issuer || entry.brand_id != *brand_id {
            return Some(Answer::NotYours);
        }
        let decision = device_flow::decide(
            PollState {
                status: Status::Pending,
                interval_secs: entry.interval_secs,
                last_polled_at: entry.last_polled_at,
                expires_at: entry.expires_at,
            },
            now,
        );
        match decision {
            PollDecision::Pending => entry.last_polled_at = Some(now),
            PollDecision::SlowDown { new_interval_secs } => {
                entry.last_polled_at = Some(now);
                entry.interval_secs = new_interval_secs;
            }
            // Expired (the only other answer for a pending one): final, and the
            // database would say the same until housekeeping removes the row.
            _ => {}
        }
        Some(Answer::Decided(decision))
    }

    /// Keeps a pending authorization just read (and its poll recorded) from
    /// the database, unless anything was forgotten since `ticket` was taken.
    pub fn remember(&self, ticket: Ticket, code: Vec<u8>, pending: Pending, now: OffsetDateTime) {
        let Ticket(Some(generation)) = ticket else {
            return;
        };
        let mut book = self.book();
        // Checked under the lock that `forget` takes: no change can slip in between.
        if !self.is_live() || self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if book.by_code.len() >= MAX_ENTRIES {
            book.drop_expired_before(now);
            if book.by_code.len() >= MAX_ENTRIES {
                return;
            }
        }
        book.remove_id(pending.id);
        book.code_of.insert(pending.id, code.clone());
        book.by_code.insert(code, pending);
    }

    /// Drops the codes that expired before `before` (housekeeping removes
    /// their rows at the same age).
    pub fn drop_expired_before(&self, before: OffsetDateTime) {
        self.book().drop_expired_before(before);
    }

    /// How many codes the book holds (the tests read it).
    pub fn len(&self) -> usize {
        self.book().by_code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    fn brand(id: &str) -> BrandId {
        BrandId::parse(id).unwrap()
    }

    const CODE: &[u8] = b"hash-of-a-device-code";

    fn pending(now: OffsetDateTime) -> Pending {
        Pending {
            id: Uuid::from_u128(7),
            pa_issuer: "https://pa.example".into(),
            brand_id: brand("demo"),
            interval_secs: 5,
            last_polled_at: Some(now),
            expires_at: now + Duration::seconds(600),
        }
    }

    /// A book whose feed was proven just now (and stays so for the test).
    fn live_book() -> PendingPolls {
        let feed = Arc::new(ChangeFeed::new(&pact_core::config::ListenerSettings {
            heartbeat_every: std::time::Duration::from_secs(600),
            heartbeat_timeout: std::time::Duration::from_secs(600),
        }));
        feed.proven(std::time::Instant::now());
        let book = PendingPolls::new(feed);
        book.resume();
        book
    }

    fn live_book_holding(now: OffsetDateTime) -> PendingPolls {
        let book = live_book();
        book.remember(book.ticket(), CODE.to_vec(), pending(now), now);
        book
    }

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + Duration::seconds(1_000 + secs)
    }

    #[test]
    fn a_held_code_is_answered_by_the_poll_rules_and_each_poll_is_recorded() {
        let book = live_book_holding(at(0));
        let poll = |t| book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(t));
        assert_eq!(poll(5), Some(Answer::Decided(PollDecision::Pending)));
        // 2 s after the recorded poll, with a 5 s interval: slow down, interval 10.
        assert_eq!(
            poll(7),
            Some(Answer::Decided(PollDecision::SlowDown {
                new_interval_secs: 10
            }))
        );
        assert_eq!(
            poll(16),
            Some(Answer::Decided(PollDecision::SlowDown {
                new_interval_secs: 15
            }))
        );
        assert_eq!(poll(31), Some(Answer::Decided(PollDecision::Pending)));
        assert_eq!(poll(600), Some(Answer::Decided(PollDecision::Expired)));
    }

    #[test]
    fn another_pa_or_brand_is_told_nothing_and_records_nothing() {
        let book = live_book_holding(at(0));
        assert_eq!(
            book.poll(CODE, &"https://thief.example".into(), &brand("demo"), at(1)),
            Some(Answer::NotYours)
        );
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("other"), at(1)),
            Some(Answer::NotYours)
        );
        // The owner's last poll is still the one at 0: polling at 5 is on time.
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(5)),
            Some(Answer::Decided(PollDecision::Pending))
        );
    }

    #[test]
    fn a_forgotten_or_unknown_code_goes_to_the_database() {
        let book = live_book_holding(at(0));
        assert_eq!(
            book.poll(
                b"other",
                &"https://pa.example".into(),
                &brand("demo"),
                at(5)
            ),
            None
        );
        book.forget(Uuid::from_u128(7));
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(5)),
            None
        );
        assert!(book.is_empty());
    }

    #[test]
    fn a_read_that_began_before_a_change_is_not_kept() {
        let book = live_book();
        let ticket = book.ticket();
        // The approval's notification arrives while the poll reads the row.
        book.forget(Uuid::from_u128(7));
        book.remember(ticket, CODE.to_vec(), pending(at(0)), at(0));
        assert!(book.is_empty());
    }

    #[test]
    fn a_node_that_cannot_hear_changes_neither_answers_nor_learns() {
        let book = live_book_holding(at(0));
        book.suspend();
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(5)),
            None
        );
        book.remember(book.ticket(), CODE.to_vec(), pending(at(0)), at(0));
        assert!(book.is_empty());
        // Reconnected: starts empty, and learns again.
        book.resume();
        assert!(book.is_empty());
        book.remember(book.ticket(), CODE.to_vec(), pending(at(0)), at(0));
        assert_eq!(book.len(), 1);
    }

    #[test]
    fn a_subscribed_book_whose_feed_is_not_proven_neither_answers_nor_learns() {
        let book = live_book_holding(at(0));
        book.feed.lost();
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(5)),
            None
        );
        book.forget(Uuid::from_u128(7));
        book.remember(book.ticket(), CODE.to_vec(), pending(at(0)), at(0));
        assert!(book.is_empty());
        // Proven again (the next heartbeat's echo): it answers and learns.
        book.feed.proven(std::time::Instant::now());
        book.remember(book.ticket(), CODE.to_vec(), pending(at(0)), at(0));
        assert_eq!(
            book.poll(CODE, &"https://pa.example".into(), &brand("demo"), at(5)),
            Some(Answer::Decided(PollDecision::Pending))
        );
    }
}
