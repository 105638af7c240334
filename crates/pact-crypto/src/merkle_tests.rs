//! Tests of the Merkle tree (RFC 9162 §2.1) against a brute-force reference:
//! the RFC's recursive definitions written out directly over leaf lists.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sha2::{Digest as _, Sha256};

use crate::merkle::{
    Hash, Tree, decode_hash, empty_root, encode_hash, leaf_hash, node_hash, receipt_leaf_hash,
    verify_consistency, verify_inclusion,
};

const MAX: usize = 64;

fn leaves(n: usize) -> Vec<Hash> {
    (0..n)
        .map(|i| leaf_hash(format!("leaf {i}").as_bytes()))
        .collect()
}

/// The largest power of two strictly less than n, by counting.
fn k_of(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// RFC 9162 §2.1.1 MTH, recursively over the list.
fn mth(d: &[Hash]) -> Hash {
    match d.len() {
        0 => Sha256::digest([]).into(),
        1 => d[0],
        n => {
            let k = k_of(n);
            node_hash(&mth(&d[..k]), &mth(&d[k..]))
        }
    }
}

/// RFC 9162 §2.1.3.1 PATH.
fn path(m: usize, d: &[Hash]) -> Vec<Hash> {
    let n = d.len();
    if n <= 1 {
        return vec![];
    }
    let k = k_of(n);
    if m < k {
        let mut p = path(m, &d[..k]);
        p.push(mth(&d[k..]));
        p
    } else {
        let mut p = path(m - k, &d[k..]);
        p.push(mth(&d[..k]));
        p
    }
}

/// RFC 9162 §2.1.4.1 SUBPROOF.
fn subproof(m: usize, d: &[Hash], b: bool) -> Vec<Hash> {
    let n = d.len();
    if m == n {
        return if b { vec![] } else { vec![mth(d)] };
    }
    let k = k_of(n);
    if m <= k {
        let mut p = subproof(m, &d[..k], b);
        p.push(mth(&d[k..]));
        p
    } else {
        let mut p = subproof(m - k, &d[k..], false);
        p.push(mth(&d[..k]));
        p
    }
}

#[test]
fn hashes_follow_rfc_9162_domain_separation() {
    let expected: Hash = Sha256::digest([0x00, b'x']).into();
    assert_eq!(leaf_hash(b"x"), expected);
    let l = leaf_hash(b"l");
    let r = leaf_hash(b"r");
    let mut input = vec![0x01];
    input.extend_from_slice(&l);
    input.extend_from_slice(&r);
    let expected: Hash = Sha256::digest(&input).into();
    assert_eq!(node_hash(&l, &r), expected);
    assert_eq!(empty_root(), <Hash>::from(Sha256::digest(b"")));
    assert_eq!(Tree::new().root(0), Some(empty_root()));
    assert_eq!(receipt_leaf_hash("a.b.c"), leaf_hash(b"a.b.c"));
    let h = leaf_hash(b"x");
    assert_eq!(decode_hash(&encode_hash(&h)), Some(h));
    assert_eq!(decode_hash("AAAA"), None);
    assert_eq!(decode_hash("not base64!"), None);
}

/// A known answer: the RFC 6962/9162 reference test vector's root for the
/// eight leaves "", 0x00, 0x10, 0x2021, 0x3031, 0x40414243, 0x5051525354555657,
/// 0x606162636465666768696a6b6c6d6e6f (as in Certificate Transparency's
/// reference implementations).
#[test]
fn known_answer_eight_leaves() {
    let data: [&[u8]; 8] = [
        b"",
        &[0x00],
        &[0x10],
        &[0x20, 0x21],
        &[0x30, 0x31],
        &[0x40, 0x41, 0x42, 0x43],
        &[0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57],
        &[
            0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d,
            0x6e, 0x6f,
        ],
    ];
    let tree = Tree::from_leaf_hashes(data.iter().map(|d| leaf_hash(d)));
    let hex = |h: Hash| h.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(
        hex(tree.root(8).unwrap()),
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
    );
    assert_eq!(
        hex(tree.root(1).unwrap()),
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    );
}

#[test]
fn roots_match_the_reference_for_every_size() {
    let all = leaves(MAX);
    let tree = Tree::from_leaf_hashes(all.clone());
    assert_eq!(tree.len(), MAX as u64);
    for n in 0..=MAX {
        assert_eq!(tree.root(n as u64), Some(mth(&all[..n])), "size {n}");
    }
    assert_eq!(tree.root(MAX as u64 + 1), None);
}

#[test]
fn inclusion_proofs_match_the_reference_and_verify() {
    let all = leaves(MAX);
    let tree = Tree::from_leaf_hashes(all.clone());
    for n in 1..=MAX {
        let root = mth(&all[..n]);
        for m in 0..n {
            let proof = tree.inclusion_proof(m as u64, n as u64).unwrap();
            assert_eq!(proof, path(m, &all[..n]), "leaf {m} of {n}");
            assert!(verify_inclusion(m as u64, n as u64, &all[m], &proof, &root));
            // Wrong leaf, wrong index, wrong root: refused. (A wrong size with the
            // same root is not a meaningful claim: the root binds the size.)
            let other = leaf_hash(b"other");
            assert!(!verify_inclusion(m as u64, n as u64, &other, &proof, &root));
            if n > 1 {
                let wrong = (m as u64 + 1) % n as u64;
                assert!(!verify_inclusion(wrong, n as u64, &all[m], &proof, &root));
            }
            assert!(!verify_inclusion(
                m as u64, n as u64, &all[m], &proof, &other
            ));
            // Every single flipped bit, a dropped or an extra hash: refused.
            for i in 0..proof.len() {
                let mut bad = proof.clone();
                bad[i][i % 32] ^= 1;
                assert!(!verify_inclusion(m as u64, n as u64, &all[m], &bad, &root));
            }
            if !proof.is_empty() {
                let short = &proof[..proof.len() - 1];
                assert!(!verify_inclusion(m as u64, n as u64, &all[m], short, &root));
            }
            let mut long = proof.clone();
            long.push(other);
            assert!(!verify_inclusion(m as u64, n as u64, &all[m], &long, &root));
        }
        assert_eq!(tree.inclusion_proof(n as u64, n as u64), None);
        assert!(!verify_inclusion(n as u64, n as u64, &all[0], &[], &root));
    }
}

#[test]
fn consistency_proofs_match_the_reference_and_verify() {
    let all = leaves(MAX);
    let tree = Tree::from_leaf_hashes(all.clone());
    for n in 1..=MAX {
        let second = mth(&all[..n]);
        for m in 1..=n {
            let first = mth(&all[..m]);
            let proof = tree.consistency_proof(m as u64, n as u64).unwrap();
            let expected = if m == n {
                vec![]
            } else {
                subproof(m, &all[..n], true)
            };
            assert_eq!(proof, expected, "{m} to {n}");
            assert!(verify_consistency(
                m as u64, n as u64, &first, &second, &proof
            ));
            // A different old root (a rewritten history) is refused.
            let other = leaf_hash(b"other");
            assert!(!verify_consistency(
                m as u64, n as u64, &other, &second, &proof
            ));
            assert!(!verify_consistency(
                m as u64, n as u64, &first, &other, &proof
            ));
            for i in 0..proof.len() {
                let mut bad = proof.clone();
                bad[i][(i * 7) % 32] ^= 0x80;
                assert!(!verify_consistency(
                    m as u64, n as u64, &first, &second, &bad
                ));
            }
            if !proof.is_empty() {
                let short = &proof[..proof.len() - 1];
                assert!(!verify_consistency(
                    m as u64, n as u64, &first, &second, short
                ));
            }
            let mut long = proof.clone();
            long.push(other);
            assert!(!verify_consistency(
                m as u64, n as u64, &first, &second, &long
            ));
            if m < n {
                // Sizes swapped: refused.
                assert!(!verify_consistency(
                    n as u64, m as u64, &second, &first, &proof
                ));
            }
        }
        assert_eq!(tree.consistency_proof(0, n as u64), None);
        assert_eq!(tree.consistency_proof(n as u64 + 1, n as u64), None);
        assert!(!verify_consistency(
            0,
            n as u64,
            &empty_root(),
            &second,
            &[]
        ));
    }
}

/// A tree cut back (the newest leaves removed) and regrown to the old size
/// with other leaves cannot prove consistency with a head taken before.
#[test]
fn truncated_and_regrown_history_is_refused() {
    let all = leaves(20);
    let before = Tree::from_leaf_hashes(all[..12].to_vec());
    let old_root = before.root(12).unwrap();
    let mut rewritten: Vec<Hash> = all[..9].to_vec();
    rewritten.extend((0..10).map(|i| leaf_hash(format!("new {i}").as_bytes())));
    let after = Tree::from_leaf_hashes(rewritten);
    let new_root = after.root(19).unwrap();
    let proof = after.consistency_proof(12, 19).unwrap();
    assert!(!verify_consistency(12, 19, &old_root, &new_root, &proof));
}

/// The tree grown one leaf at a time gives the same answers as one built at once.
#[test]
fn incremental_pushes_equal_bulk_build() {
    let all = leaves(MAX);
    let mut tree = Tree::new();
    for (i, l) in all.iter().enumerate() {
        tree.push(*l);
        assert_eq!(tree.root(i as u64 + 1), Some(mth(&all[..=i])));
        assert_eq!(tree.leaf(i as u64), Some(*l));
    }
}
