//! A Merkle tree over receipts in the manner of Certificate Transparency
//! (RFC 9162 §2.1): the Merkle Tree Hash (MTH), inclusion proofs and
//! consistency proofs, both generated and verified. Pure: no I/O, no clock.
//!
//! pactd's log leaves are the receipts' compact JWS bytes (see
//! [`receipt_leaf_hash`]), so the server (which builds proofs) and a personal
//! agent (which checks them) share this one definition.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest: a leaf hash, an inner node or a root.
pub type Hash = [u8; 32];

/// RFC 9162 §2.1.1: the hash of the empty tree is SHA-256 of the empty string.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// RFC 9162 §2.1.1: `MTH({d(0)}) = SHA-256(0x00 || d(0))`. The 0x00 prefix
/// (0x01 for inner nodes) keeps a leaf from ever being read as a node, which
/// is what stops second-preimage forgeries of proofs.
pub fn leaf_hash(leaf: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(leaf);
    h.finalize().into()
}

/// RFC 9162 §2.1.1: `SHA-256(0x01 || MTH(left) || MTH(right))`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The leaf hash of a receipt: the leaf is the receipt's compact JWS as
/// received (ASCII). The JWS, not the claims: it is the exact byte string
/// the PA holds and the store keeps, it already binds the claims and the
/// signature, and hashing it needs no canonical JSON. The tree is over the
/// JWS rather than over `receipt_hash` (the chain link) so that the 0x00
/// domain separation of RFC 9162 applies to the evidence itself.
pub fn receipt_leaf_hash(jws: &str) -> Hash {
    leaf_hash(jws.as_bytes())
}

/// base64url without padding (RFC 4648 §5), how hashes travel in JSON.
pub fn encode_hash(h: &Hash) -> String {
    URL_SAFE_NO_PAD.encode(h)
}

/// The inverse of [`encode_hash`]; `None` unless exactly 32 bytes.
pub fn decode_hash(s: &str) -> Option<Hash> {
    let bytes = URL_SAFE_NO_PAD.decode(s).ok()?;
    bytes.try_into().ok()
}

/// The largest power of two strictly less than `n` (RFC 9162 §2.1.1's `k`);
/// `n` must be at least 2.
fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1u64 << (63 - (n - 1).leading_zeros())
}

/// An append-only tree that keeps, besides the leaf hashes, the hash of
/// every complete aligned subtree (level `k` holds the subtrees of `2^k`
/// leaves). With those, the MTH of any range the RFC's recursions visit
/// costs O(log n) hashes, so roots and proofs for any size up to `len` are
/// cheap and nothing is recomputed per request. Memory is about twice the
/// leaf hashes.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_leaf_hashes(leaves: impl IntoIterator<Item = Hash>) -> Self {
        let mut t = Self::new();
        for l in leaves {
            t.push(l);
        }
        t
    }

    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The leaf hash at `index`.
    pub fn leaf(&self, index: u64) -> Option<Hash> {
        self.levels
            .first()?
            .get(usize::try_from(index).ok()?)
            .copied()
    }

    /// Appends a leaf hash (already `leaf_hash`ed) and completes every
    /// subtree it closes.
    pub fn push(&mut self, leaf: Hash) {
        let mut level = 0;
        let mut carry = leaf;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            let Some(row) = self.levels.get_mut(level) else {
                return;
            };
            row.push(carry);
            // An even count means the last two close a subtree one level up.
            if !row.len().is_multiple_of(2) {
                return;
            }
            let (Some(right), Some(left)) = (row.last(), row.get(row.len().wrapping_sub(2))) else {
                return;
            };
            carry = node_hash(left, right);
            level += 1;
        }
    }

    /// MTH of the leaves `[start, start + len)`; the range must be non-empty
    /// and inside the tree (callers check).
    fn range_hash(&self, start: u64, len: u64) -> Hash {
        // A complete aligned subtree is stored as it is.
        if len.is_power_of_two() && start.is_multiple_of(len) {
            let level = len.trailing_zeros() as usize;
            if let Some(h) = self
                .levels
                .get(level)
                .and_then(|row| row.get(usize::try_from(start >> level).ok()?))
            {
                return *h;
            }
        }
        if len <= 1 {
            // Unreachable for ranges inside the tree (a single leaf is a
            // complete subtree); the empty hash keeps this total.
            return self.leaf(start).unwrap_or_else(empty_root);
        }
        // RFC 9162 §2.1.1: MTH(D[n]) = node(MTH(D[0:k]), MTH(D[k:n])).
        let k = split_point(len);
        node_hash(
            &self.range_hash(start, k),
            &self.range_hash(start + k, len - k),
        )
    }

    /// The root of the tree of the first `size` leaves (RFC 9162 §2.1.1);
    /// `None` when `size` exceeds the leaves held.
    pub fn root(&self, size: u64) -> Option<Hash> {
        if size > self.len() {
            return None;
        }
        if size == 0 {
            return Some(empty_root());
        }
        Some(self.range_hash(0, size))
    }

    /// RFC 9162 §2.1.3.1: the inclusion proof (audit path) of leaf `index`
    /// in the tree of the first `size` leaves, nearest sibling first.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Option<Vec<Hash>> {
        if index >= size || size > self.len() {
            return None;
        }
        let mut path = Vec::new();
        self.path(index, 0, size, &mut path);
        Some(path)
    }

    /// PATH(m, D[start:start+n]), appending in the RFC's order (deepest first).
    fn path(&self, m: u64, start: u64, n: u64, out: &mut Vec<Hash>) {
        if n <= 1 {
            return;
        }
        let k = split_point(n);
        if m < k {
            self.path(m, start, k, out);
            out.push(self.range_hash(start + k, n - k));
        } else {
            self.path(m - k, start + k, n - k, out);
            out.push(self.range_hash(start, k));
        }
    }

    /// RFC 9162 §2.1.4.1: the consistency proof from the tree of the first
    /// `first` leaves to that of the first `second`. Defined for
    /// `0 < first <= second <= len`; empty when the sizes are equal.
    pub fn consistency_proof(&self, first: u64, second: u64) -> Option<Vec<Hash>> {
        if first == 0 || first > second || second > self.len() {
            return None;
        }
        let mut proof = Vec::new();
        if first < second {
            self.subproof(first, 0, second, true, &mut proof);
        }
        Some(proof)
    }

    /// SUBPROOF(m, D[start:start+n], b).
    fn subproof(&self, m: u64, start: u64, n: u64, b: bool, out: &mut Vec<Hash>) {
        if m == n {
            if !b {
                out.push(self.range_hash(start, n));
            }
            return;
        }
        let k = split_point(n);
        if m <= k {
            self.subproof(m, start, k, b, out);
            out.push(self.range_hash(start + k, n - k));
        } else {
            self.subproof(m - k, start + k, n - k, false, out);
            out.push(self.range_hash(start, k));
        }
    }
}

/// RFC 9162 §2.1.3.2: does `proof` show that `leaf` is at `index` in the
/// tree of `size` leaves whose root is `root`?
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut fnode, mut snode) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if snode == 0 {
            // The proof is longer than the path: refuse, never ignore extras.
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            r = node_hash(p, &r);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    snode == 0 && r == *root
}

/// RFC 9162 §2.1.4.2: does `proof` show that the tree of `first` leaves with
/// root `first_root` is a prefix of the tree of `second` leaves with root
/// `second_root`? `first` must be at least 1 (every tree extends the empty
/// one; there is nothing to prove).
pub fn verify_consistency(
    first: u64,
    second: u64,
    first_root: &Hash,
    second_root: &Hash,
    proof: &[Hash],
) -> bool {
    if first == 0 || first > second {
        return false;
    }
    if first == second {
        return proof.is_empty() && first_root == second_root;
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    // If `first` is a power of two, the old root is itself a node of the new
    // tree and the proof leaves it out.
    if first.is_power_of_two() {
        path.push(*first_root);
    }
    path.extend_from_slice(proof);
    let Some((seed, rest)) = path.split_first() else {
        return false;
    };
    let (mut fnode, mut snode) = (first - 1, second - 1);
    while fnode & 1 == 1 {
        fnode >>= 1;
        snode >>= 1;
    }
    let (mut fr, mut sr) = (*seed, *seed);
    for c in rest {
        if snode == 0 {
            return false;
        }
        if fnode & 1 == 1 || fnode == snode {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if fnode & 1 == 0 {
                while fnode & 1 == 0 && fnode != 0 {
                    fnode >>= 1;
                    snode >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fnode >>= 1;
        snode >>= 1;
    }
    fr == *first_root && sr == *second_root && snode == 0
}
