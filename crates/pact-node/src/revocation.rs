//! A node's in-memory view of revoked grants.
//!
//! Fed by `LISTEN pactd_revocations` (a trigger announces every revocation)
//! and reloaded from the database whenever the listening connection is
//! (re)established, since notifications sent while disconnected are lost.
//! It lets a node refuse a revoked token before opening a transaction; the
//! database stays the truth: every delegated turn re-checks the grant row
//! under lock, so a revocation is refused on the very next request even if a
//! notification is late.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use pact_db::ids::GrantId;

/// How long a grant heard of as revoked (or deleted) is remembered across
/// reloads: longer than any access token lives (an hour), so no token of it
/// can still be presented once it is forgotten. A reload reads revocations
/// back from the database, but a deleted grant has no row to read: dropping
/// everything at a reconnect would forget it while its turn still runs.
const KEEP: Duration = Duration::from_secs(2 * 60 * 60);

#[derive(Default)]
pub struct RevocationView {
    /// Each grant with when this node learnt it was revoked.
    revoked: RwLock<HashMap<GrantId, Instant>>,
    /// Counts changes, so that whoever waits for one (a test watching a
    /// revocation reach a node) is woken instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
}

impl RevocationView {
    pub fn is_revoked(&self, grant: GrantId) -> bool {
        match self.revoked.read() {
            Ok(set) => set.contains_key(&grant),
            Err(poisoned) => poisoned.into_inner().contains_key(&grant),
        }
    }

    pub fn insert(&self, grant: GrantId) {
        let now = Instant::now();
        match self.revoked.write() {
            Ok(mut set) => set.insert(grant, now),
            Err(poisoned) => poisoned.into_inner().insert(grant, now),
        };
        self.changes.send_modify(|n| *n += 1);
    }

    /// After a reconnect: adds the revocations read back from the database
    /// and forgets only what was learnt longer than [`KEEP`] ago (so grants
    /// heard of as deleted stay refused while a token of theirs may live).
    pub fn reload(&self, grants: impl IntoIterator<Item = GrantId>) {
        let now = Instant::now();
        let mut set = match self.revoked.write() {
            Ok(set) => set,
            Err(poisoned) => poisoned.into_inner(),
        };
        set.retain(|_, at| now.saturating_duration_since(*at) < KEEP);
        for grant in grants {
            set.insert(grant, now);
        }
        drop(set);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Wakes on every change of the view.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn len(&self) -> usize {
        match self.revoked.read() {
            Ok(set) => set.len(),
            Err(poisoned) => poisoned.into_inner().len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reconnect's reload adds what the database says and keeps what was
    /// heard: a grant announced as deleted has no row to read back.
    #[test]
    fn a_reload_keeps_grants_heard_of_as_deleted() {
        let view = RevocationView::default();
        let (deleted, revoked) = (GrantId::new_random(), GrantId::new_random());
        view.insert(deleted);
        view.reload([revoked]);
        assert!(view.is_revoked(deleted) && view.is_revoked(revoked));
        assert_eq!(view.len(), 2);
    }
}
