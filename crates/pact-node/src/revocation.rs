//! A node's in-memory view of revoked grants.
//!
//! Fed by `LISTEN pactd_revocations` (a trigger announces every revocation)
//! and reloaded from the database whenever the listening connection is
//! (re)established, since notifications sent while disconnected are lost.
//! It lets a node refuse a revoked token before opening a transaction; the
//! database stays the truth: every delegated turn re-checks the grant row
//! under lock, so a revocation is refused on the very next request even if a
//! notification is late.

use std::collections::HashSet;
use std::sync::RwLock;

use pact_db::ids::GrantId;

#[derive(Default)]
pub struct RevocationView {
    revoked: RwLock<HashSet<GrantId>>,
    /// Counts changes, so that whoever waits for one (a test watching a
    /// revocation reach a node) is woken instead of polling.
    changes: tokio::sync::watch::Sender<u64>,
}

impl RevocationView {
    pub fn is_revoked(&self, grant: GrantId) -> bool {
        match self.revoked.read() {
            Ok(set) => set.contains(&grant),
            Err(poisoned) => poisoned.into_inner().contains(&grant),
        }
    }

    pub fn insert(&self, grant: GrantId) {
        match self.revoked.write() {
            Ok(mut set) => set.insert(grant),
            Err(poisoned) => poisoned.into_inner().insert(grant),
        };
        self.changes.send_modify(|n| *n += 1);
    }

    /// Replaces the whole view (after a reconnect).
    pub fn replace(&self, grants: impl IntoIterator<Item = GrantId>) {
        let fresh: HashSet<GrantId> = grants.into_iter().collect();
        match self.revoked.write() {
            Ok(mut set) => *set = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
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
