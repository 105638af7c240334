//! The primitives pactd's JOSE and storage stand on, with no JOSE, HTTP or
//! database of their own:
//!
//! - [`MasterKey`] seals secrets at rest (AES-256-GCM under a key from
//!   configuration, never from the database): the Provider's signing keys,
//!   TOTP secrets, webhook and client secrets;
//! - [`merkle`], the receipt log's Merkle tree (RFC 9162 §2.1), shared by the
//!   server that builds proofs and the personal agent that checks them.

pub mod merkle;
mod seal;

#[cfg(test)]
mod merkle_tests;

pub use seal::{MasterKey, SealError};
