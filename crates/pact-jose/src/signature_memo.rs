//! Signatures that have verified once, remembered so the same bytes are not
//! verified again.
//!
//! A PA reuses one PA-JWT for up to its lifetime (PACT §3 requires no replay
//! tracking), and a delegation token travels with every turn for up to 15
//! minutes (PACT §5.4): a busy node sees the same token many times a second.
//! An ES256 verification costs tens of microseconds; a SHA-256 of the token
//! and a set lookup cost about one.
//!
//! What is remembered is a pure fact: "this signature over this signing
//! input verifies under the key with these public parameters". Nothing
//! about time, audience or revocation is kept: every claim is checked again
//! on every request, and a key that leaves its JWKS is never asked again (the
//! lookup goes through the key). Only successes are kept, so bytes an
//! attacker makes up cost a full verification each time, as before, and can
//! never fill the memo; evicting only ever costs a verification.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{LazyLock, Mutex, MutexGuard};

use sha2::{Digest as _, Sha256};

/// Entries per generation: two generations hold at most twice this, about
/// 64 bytes each — some 4 MiB at most however many tokens are seen.
const GENERATION_ENTRIES: usize = 32_768;

/// The identity of a public key: SHA-256 over its type and public members as
/// published (base64url is canonical here, so equal strings are equal keys).
pub(crate) type KeyIdentity = [u8; 32];

pub(crate) fn key_identity(kty: &str, members: &[&str]) -> KeyIdentity {
    let mut h = Sha256::new();
    h.update(b"pactd key identity v1");
    for part in std::iter::once(kty).chain(members.iter().copied()) {
        // Length-prefixed, so no two member lists hash the same input.
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

/// One remembered verification: SHA-256 over the key identity, the signing
/// input and the signature.
type Entry = [u8; 32];

fn entry(key: &KeyIdentity, message: &[u8], signature: &[u8]) -> Entry {
    let mut h = Sha256::new();
    h.update(key);
    h.update((message.len() as u64).to_be_bytes());
    h.update(message);
    h.update(signature);
    h.finalize().into()
}

/// The entries are SHA-256 outputs already: their first eight bytes are as
/// good a hash as any, and cost nothing to compute (no SipHash per lookup).
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // `[u8; 32]` hashes as its length (the same for every entry) and then
        // one `write` of its 32 bytes: XOR keeps the digest's bits, and the
        // constant length only flips the same bits of every hash.
        let mut first = [0u8; 8];
        let n = bytes.len().min(8);
        first[..n].copy_from_slice(&bytes[..n]);
        self.0 ^= u64::from_ne_bytes(first);
    }
}

type Set = HashSet<Entry, BuildHasherDefault<DigestHasher>>;

/// Two generations: entries go into `current`; when it is full it becomes
/// `previous` and the older one is dropped. A hit in `previous` moves the
/// entry back, so tokens in use stay and tokens no longer presented age out,
/// in bounded memory and without per-entry timestamps.
#[derive(Default)]
struct Generations {
    current: Set,
    previous: Set,
    /// Checks answered from the memo, and full verifications that succeeded
    /// (counted under the lock already taken, so they cost no atomics).
    remembered: u64,
    verified: u64,
}

impl Generations {
    fn contains(&mut self, e: &Entry) -> bool {
        if self.current.contains(e) {
            return true;
        }
        if self.previous.remove(e) {
            self.insert(*e);
            return true;
        }
        false
    }

    fn insert(&mut self, e: Entry) {
        if self.current.len() >= GENERATION_ENTRIES {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(e);
    }
}

static MEMO: LazyLock<Mutex<Generations>> = LazyLock::new(Mutex::default);

fn memo() -> MutexGuard<'static, Generations> {
    // The sets are valid after any panic (each operation leaves them whole).
    MEMO.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `verify` (the real check) unless this exact verification succeeded before.
pub(crate) fn verify_once(
    key: &KeyIdentity,
    message: &[u8],
    signature: &[u8],
    verify: impl FnOnce() -> bool,
) -> bool {
    let e = entry(key, message, signature);
    {
        let mut memo = memo();
        if memo.contains(&e) {
            memo.remembered += 1;
            return true;
        }
    }
    // Verified without the lock held: two cores may verify the same token at
    // once the first time, which is cheaper than making one wait.
    let ok = verify();
    if ok {
        let mut memo = memo();
        memo.verified += 1;
        memo.insert(e);
    }
    ok
}

/// What the memo has done since the process started, for the metrics page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SignatureMemoStats {
    /// Signature checks answered from the memo.
    pub remembered: u64,
    /// Full verifications that succeeded (and were remembered).
    pub verified: u64,
    /// Entries held now.
    pub entries: usize,
}

pub fn signature_memo_stats() -> SignatureMemoStats {
    let memo = memo();
    SignatureMemoStats {
        remembered: memo.remembered,
        verified: memo.verified,
        entries: memo.current.len() + memo.previous.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_generation_moves_to_previous_and_a_hit_there_comes_back() {
        let mut g = Generations::default();
        let first = [1u8; 32];
        g.insert(first);
        for i in 0..GENERATION_ENTRIES {
            let mut e = [0u8; 32];
            e[..8].copy_from_slice(&(i as u64 + 2).to_be_bytes());
            g.insert(e);
        }
        assert!(!g.current.contains(&first), "the full generation moved");
        assert!(g.contains(&first), "still known from the previous one");
        assert!(g.current.contains(&first), "and promoted back");
        assert!(g.current.len() + g.previous.len() <= 2 * GENERATION_ENTRIES);
    }

    #[test]
    fn only_successes_are_remembered() {
        let key = key_identity("EC", &["memo-test-x", "memo-test-y"]);
        assert!(!verify_once(&key, b"m", b"s", || false));
        let mut asked = false;
        assert!(verify_once(&key, b"m", b"s", || {
            asked = true;
            true
        }));
        assert!(asked, "a failure was not remembered");
        assert!(verify_once(&key, b"m", b"s", || panic!("asked again")));
    }

    #[test]
    fn an_entry_is_bound_to_its_key_its_message_and_its_signature() {
        let a = key_identity("EC", &["memo-bind-x", "memo-bind-y"]);
        let b = key_identity("EC", &["memo-bind-x", "memo-bind-z"]);
        assert!(verify_once(&a, b"msg", b"sig", || true));
        assert!(!verify_once(&b, b"msg", b"sig", || false), "another key");
        assert!(
            !verify_once(&a, b"msg2", b"sig", || false),
            "another message"
        );
        assert!(
            !verify_once(&a, b"msg", b"sig2", || false),
            "another signature"
        );
        // Moving a byte between message and signature is another entry too.
        assert!(!verify_once(&a, b"msgs", b"ig", || false));
        assert_ne!(
            key_identity("EC", &["ab", "c"]),
            key_identity("EC", &["a", "bc"])
        );
    }
}
