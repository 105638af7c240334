//! `pact-client`: the personal agent's (PA) side of PACT 1.0 as a library,
//! shared by the `pact-agent` command and the `pact-conformance` suite.
//!
//! * [`keys`] and [`jwt`] — the agent's ES256 identity (`kid` = RFC 7638
//!   thumbprint) and the PA-JWTs it signs (§3: fresh `jti`, 120 s lifetime);
//! * [`state`] — the state directory (`--home`, `PACT_AGENT_HOME`,
//!   `~/.pact-agent`), every file mode 0600;
//! * [`card`] — fetching and validating an Agent Card (§2);
//! * [`oauth`] — RFC 8414 metadata, the RFC 8628 device flow as a careful
//!   client (§5.1, §5.3), refresh, revocation, and receipt verification (§5.6);
//! * [`http`] — requests that keep what was sent and answered, as evidence;
//! * [`jwks_server`] — publishing the agent's JWKS;
//! * [`qr`] — the verification link as a terminal QR code.
//!
//! Nothing here logs or prints a token, a refresh token or a device code.

pub mod card;
pub mod http;
pub mod jwks_server;
pub mod jwt;
pub mod keys;
pub mod oauth;
pub mod qr;
pub mod state;
