//! The A2A surface of a brand (PACT §2, §4).

pub mod card;
pub mod send;
pub mod tasks;
