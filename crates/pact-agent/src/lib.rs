//! `pact-agent`: a personal agent (PA) on the command line, the entry point
//! of the conformance suite, and a driver for pactd's own pages.
//!
//! The PA side of PACT (docs/protocol.md) is the `pact-client` library,
//! re-exported here under the same module names; this crate adds:
//!
//! * [`client`] — `send` and `connect` as the command line runs them;
//! * [`receipt_log`] — signed tree heads, inclusion and consistency proofs
//!   of a Provider's receipt log (RFC 9162), kept and checked;
//! * [`conformance`] — the `pact-conformance` suite, plus
//!   [`conformance::PactdLoginApprover`], which decides on pactd's pages;
//! * [`pactd_login`] and [`totp`] — deciding a device authorization on
//!   pactd's own pages (sign-in, RFC 6238 second factor, consent), for
//!   `conformance --approve pactd-login`.
//!
//! Nothing here logs or prints a token, a refresh token or a device code,
//! except where the user asks for it (`--show-tokens`).

pub use pact_client::{card, http, jwks_server, jwt, keys, oauth, qr, state};

pub mod client;
pub mod conformance;
pub mod pactd_login;
pub mod receipt_log;
pub mod totp;

/// The A2A content type (PACT §4: exactly this, no charset).
pub use pact_proto::A2A_CONTENT_TYPE;
