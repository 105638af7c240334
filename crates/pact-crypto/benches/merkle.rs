//! Cost of the receipt log (RFC 9162 §2.1): appending a leaf to the cached
//! tree, and answering and checking inclusion and consistency proofs over a
//! log of a million receipts, as the proof endpoints and a PA do.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pact_crypto::merkle::{Tree, leaf_hash, verify_consistency, verify_inclusion};

const N: u64 = 1_000_000;

fn bench(c: &mut Criterion) {
    let tree = Tree::from_leaf_hashes((0..N).map(|i| leaf_hash(&i.to_be_bytes())));
    let size = N - 3;
    let root = tree.root(size).unwrap_or_default();
    c.bench_function("merkle push (1M leaves held)", |b| {
        let mut t = tree.clone();
        b.iter(|| t.push(black_box([7; 32])));
    });
    c.bench_function("merkle root of 1M - 3", |b| {
        b.iter(|| tree.root(black_box(size)));
    });
    let index: u64 = 123_457;
    let leaf = leaf_hash(&index.to_be_bytes());
    let path = tree.inclusion_proof(index, size).unwrap_or_default();
    c.bench_function("merkle inclusion proof", |b| {
        b.iter(|| tree.inclusion_proof(black_box(index), size));
    });
    c.bench_function("merkle verify inclusion", |b| {
        b.iter(|| verify_inclusion(black_box(index), size, &leaf, &path, &root));
    });
    let first: u64 = 700_001;
    let first_root = tree.root(first).unwrap_or_default();
    let proof = tree.consistency_proof(first, size).unwrap_or_default();
    c.bench_function("merkle consistency proof", |b| {
        b.iter(|| tree.consistency_proof(black_box(first), size));
    });
    c.bench_function("merkle verify consistency", |b| {
        b.iter(|| verify_consistency(black_box(first), size, &first_root, &root, &proof));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
