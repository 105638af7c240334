//! The A2A surface of a brand (PACT §2, §4).

pub mod card;
pub mod delegation;
pub mod jsonrpc;
pub mod receipts;
pub mod send;
pub mod tasks;
