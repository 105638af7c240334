//! Wire types of PACT 1.0 on A2A 1.0 (HTTP+JSON binding), with no I/O.
//!
//! Everything here serialises to exactly what docs/protocol.md prescribes, so the
//! server, the personal-agent client and the conformance runner share one
//! definition of the wire. Validation that is a pure function of the request
//! bytes (e.g. [`a2a::parse_send_message`]) lives here too.

pub mod a2a;
pub mod card;
pub mod error;
pub mod jsonrpc;
pub mod oauth;

pub use error::{A2aError, ErrorReason};

/// The A2A content type of every A2A response (PACT §4: exactly this, no charset).
pub const A2A_CONTENT_TYPE: &str = "application/a2a+json";
