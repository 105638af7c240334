//! `pact-agent`: a personal agent (PA) on the command line, and a
//! conformance suite that checks any PACT 1.0 provider.
//!
//! The PA side of PACT (docs/protocol.md):
//!
//! * [`keys`] and [`jwt`] — the agent's ES256 identity (`kid` = RFC 7638
//!   thumbprint) and the PA-JWTs it signs (§3: fresh `jti`, 120 s lifetime);
//! * [`state`] — the state directory (`--home`, `PACT_AGENT_HOME`,
//!   `~/.pact-agent`), every file mode 0600;
//! * [`card`] — fetching and validating an Agent Card (§2);
//! * [`oauth`] — RFC 8414 metadata, the RFC 8628 device flow as a careful
//!   client (§5.1, §5.3), refresh, revocation, and receipt verification (§5.6);
//! * [`client`] — `send` and `connect` as the command line runs them;
//! * [`receipt_log`] — signed tree heads, inclusion and consistency proofs
//!   of a Provider's receipt log (RFC 9162), kept and checked;
//! * [`jwks_server`] — publishing the agent's JWKS;
//! * [`conformance`] — one check per rule of docs/protocol.md §2–6;
//! * [`pactd_login`] and [`totp`] — deciding a device authorization on
//!   pactd's own pages (sign-in, RFC 6238 second factor, consent), for
//!   `conformance --approve pactd-login`.
//!
//! Nothing here logs or prints a token, a refresh token or a device code,
//! except where the user asks for it (`--show-tokens`).

pub mod card;
pub mod client;
pub mod conformance;
pub mod http;
pub mod jwks_server;
pub mod jwt;
pub mod keys;
pub mod oauth;
pub mod pactd_login;
pub mod qr;
pub mod receipt_log;
pub mod state;
pub mod totp;

/// The A2A content type (PACT §4: exactly this, no charset).
pub use pact_proto::A2A_CONTENT_TYPE;
