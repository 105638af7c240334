//! This node's copy of the receipt log's Merkle tree (RFC 9162 §2.1), kept
//! in step with the database by pact-server's `receipt_log.rs`.

use std::sync::Mutex;

use pact_crypto::merkle::Tree;

/// This node's copy of the log's leaf hashes and complete subtrees. The log
/// is append-only, so the copy only ever grows from the database; roots and
/// proofs then cost O(log n) hashes instead of a pass over every receipt.
#[derive(Default)]
pub struct LogCache {
    tree: Mutex<Tree>,
}

impl LogCache {
    /// Runs `f` on the tree (a poisoned lock still holds a valid tree).
    pub fn with_tree<R>(&self, f: impl FnOnce(&mut Tree) -> R) -> R {
        match self.tree.lock() {
            Ok(mut t) => f(&mut t),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}
