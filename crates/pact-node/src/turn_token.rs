//! Turn tokens and MCP session ids that any node can check, so a turn's
//! tool calls may reach any node behind a plain round-robin proxy.
//!
//! A turn token says which turn it is for and what a node needs to judge
//! the turn's calls without the node that runs it: the brand, when the
//! token dies, the grant the turn runs under, the context and message, the
//! personal agent's platform and the tool timeout. It is signed with a key
//! derived from the master key every node holds (HMAC-SHA256), so it cannot
//! be forged or altered; it ends with its turn (the turn's fence,
//! `pact_db::turn_fences`) whatever its expiry says. An MCP session id is
//! the turn, a nonce and the negotiated protocol version under the same key.
//!
//! Form: `ptt2.` base64url(JSON claims) `.` base64url(HMAC over
//! `ptt2.` + the encoded claims). Comparison of tags is constant-time.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use pact_db::ids::{AgentIssuer, BrandId};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

const PREFIX: &str = "ptt2.";
/// Longest token read: claims are a few hundred bytes, and a delegated turn's
/// scopes (each a scope-token the brand offers) rarely more than a few
/// hundred more.
const MAX_TOKEN: usize = 16 * 1024;

/// What a turn token carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnClaims {
    #[serde(rename = "t")]
    pub turn: Uuid,
    #[serde(rename = "b")]
    pub brand: BrandId,
    /// Unix seconds; the token is refused from then on.
    #[serde(rename = "e")]
    pub expires: i64,
    #[serde(rename = "g")]
    pub grant: Option<pact_db::ids::GrantId>,
    /// The delegation token's scope (PACT §5.5: the turn runs "limited to
    /// `scope`", which a refresh may have narrowed below the grant's), so
    /// that a node that rebuilds the turn from the grant row holds its calls
    /// to the same scopes as the node that runs it. Empty without a grant
    /// (and in a token from before it was carried: fail closed).
    #[serde(rename = "s", default)]
    pub scopes: Vec<String>,
    #[serde(rename = "c")]
    pub context: String,
    #[serde(rename = "m")]
    pub message: String,
    #[serde(rename = "p")]
    pub pa_issuer: AgentIssuer,
    #[serde(rename = "tt")]
    pub tool_timeout_ms: u64,
}

/// The key turn tokens and session ids are signed with.
pub struct TurnKey([u8; 32]);

impl std::fmt::Debug for TurnKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnKey(..)")
    }
}

impl TurnKey {
    pub fn from_master(master: &pact_crypto::MasterKey) -> Result<Self, pact_crypto::SealError> {
        master.derive(b"pactd turn token v1").map(Self)
    }

    #[cfg(test)]
    pub(crate) fn for_tests(byte: u8) -> Self {
        Self([byte; 32])
    }

    /// HMAC-SHA256 (RFC 2104) under the node-shared key.
    fn tag(&self, data: &[u8]) -> Option<Vec<u8>> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).ok()?;
        mac.update(data);
        Some(mac.finalize().into_bytes().to_vec())
    }

    /// The token of a turn; `None` only if OpenSSL fails.
    pub fn issue(&self, claims: &TurnClaims) -> Option<String> {
        let json = serde_json::to_vec(claims).ok()?;
        let signed = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(json));
        let tag = self.tag(signed.as_bytes())?;
        Some(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag)))
    }

    /// The claims of a token this key signed, unaltered; expiry and the
    /// turn's end are the caller's checks.
    pub fn verify(&self, token: &str) -> Option<TurnClaims> {
        if token.len() > MAX_TOKEN || !token.starts_with(PREFIX) {
            return None;
        }
        let (signed, tag) = token.rsplit_once('.')?;
        let given = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let expected = self.tag(signed.as_bytes())?;
        if given.len() != expected.len() || !openssl::memcmp::eq(&given, &expected) {
            return None;
        }
        let json = URL_SAFE_NO_PAD.decode(signed.strip_prefix(PREFIX)?).ok()?;
        serde_json::from_slice(&json).ok()
    }

    /// A new MCP session id of `turn` for `version` (visible ASCII only, as
    /// the transport requires).
    pub fn session_id(&self, turn: Uuid, version: &str) -> Option<String> {
        self.new_session(&turn.to_string(), "", version)
    }

    /// The protocol version of a session id this key made for `turn`.
    pub fn session_version(&self, turn: Uuid, id: &str) -> Option<String> {
        let head = self.session_head(&turn.to_string(), id)?;
        head.split_once('.').map(|(_, version)| version.to_owned())
    }

    /// A new MCP session id of the brand's shared endpoint for `version`,
    /// refused from `expires` (Unix seconds) on. It names no turn: a
    /// long-running MCP client keeps one session over many turns and proves
    /// each request's turn with that turn's token. The tag covers
    /// `brand:{brand}`, which no turn id (a UUID) can spell, so a turn's
    /// session id never passes as a brand's, nor the reverse.
    pub fn brand_session_id(&self, brand: &BrandId, version: &str, expires: i64) -> Option<String> {
        self.new_session(&format!("brand:{brand}"), &format!("{expires}-"), version)
    }

    /// The protocol version of a session id this key made for `brand`'s
    /// shared endpoint, while it has not expired at `now` (Unix seconds).
    pub fn brand_session_version(&self, brand: &BrandId, id: &str, now: i64) -> Option<String> {
        let head = self.session_head(&format!("brand:{brand}"), id)?;
        let (nonce, version) = head.split_once('.')?;
        let expires: i64 = nonce.split_once('-')?.0.parse().ok()?;
        (now < expires).then(|| version.to_owned())
    }

    /// `{prefix}{nonce}.{version}.{tag}`, the tag over `{owner}.` and the rest.
    fn new_session(&self, owner: &str, prefix: &str, version: &str) -> Option<String> {
        // The thread's CSPRNG (ChaCha, seeded from the OS), as for device
        // codes, refresh tokens and user codes (`pact_core::domain`): OpenSSL's
        // shared DRBG took a lock and ~1.6 % of a session-per-turn MCP
        // load's CPU for these 12 bytes (issue 27).
        let mut nonce = [0u8; 12];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut nonce);
        let head = format!("{prefix}{}.{version}", URL_SAFE_NO_PAD.encode(nonce));
        let tag = self.tag(format!("{owner}.{head}").as_bytes())?;
        Some(format!("{head}.{}", URL_SAFE_NO_PAD.encode(&tag[..16])))
    }

    /// The signed part of a session id, when its tag is this key's for `owner`.
    fn session_head<'a>(&self, owner: &str, id: &'a str) -> Option<&'a str> {
        if id.len() > 128 {
            return None;
        }
        let (head, tag) = id.rsplit_once('.')?;
        let given = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let expected = self.tag(format!("{owner}.{head}").as_bytes())?;
        (given.len() == 16 && openssl::memcmp::eq(&given, &expected[..16])).then_some(head)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn brand(id: &str) -> BrandId {
        BrandId::parse(id).unwrap()
    }

    fn claims() -> TurnClaims {
        TurnClaims {
            turn: Uuid::from_u128(7),
            brand: brand("shop"),
            expires: 1_800_000_000,
            grant: Some(Uuid::from_u128(9).into()),
            scopes: vec!["orders:read".into()],
            context: "c".into(),
            message: "m".into(),
            pa_issuer: "https://pa.example".into(),
            tool_timeout_ms: 10_000,
        }
    }

    #[test]
    fn a_token_reads_back_only_unaltered_and_under_its_key() {
        let key = TurnKey::for_tests(1);
        let token = key.issue(&claims()).unwrap();
        assert!(token.starts_with("ptt2."));
        assert_eq!(key.verify(&token), Some(claims()));
        assert_eq!(TurnKey::for_tests(2).verify(&token), None, "another key");
        // Another brand in the claims, with the old tag.
        let (signed, tag) = token.rsplit_once('.').unwrap();
        let mut other = claims();
        other.brand = brand("acme");
        let forged = format!(
            "ptt2.{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&other).unwrap())
        );
        assert_eq!(key.verify(&forged), None);
        assert_eq!(key.verify(&format!("{signed}.")), None);
        assert_eq!(key.verify(&format!("{signed}.{tag}x")), None);
        assert_eq!(key.verify("ptt_abc"), None, "a first-version token");
        assert_eq!(key.verify(&"p".repeat(5000)), None);
    }

    #[test]
    fn a_session_id_names_its_turn_and_version() {
        let key = TurnKey::for_tests(1);
        let id = key.session_id(Uuid::from_u128(7), "2025-11-25").unwrap();
        assert!(id.bytes().all(|b| b.is_ascii_graphic()));
        assert_eq!(
            key.session_version(Uuid::from_u128(7), &id).as_deref(),
            Some("2025-11-25")
        );
        assert_eq!(
            key.session_version(Uuid::from_u128(8), &id),
            None,
            "another turn"
        );
        let changed = id.replace("2025-11-25", "2025-06-18");
        assert_eq!(key.session_version(Uuid::from_u128(7), &changed), None);
        assert_ne!(
            id,
            key.session_id(Uuid::from_u128(7), "2025-11-25").unwrap()
        );
    }

    #[test]
    fn a_brand_session_id_names_its_brand_and_dies_at_its_expiry() {
        let key = TurnKey::for_tests(1);
        let id = key
            .brand_session_id(&brand("shop"), "2025-11-25", 1_000)
            .unwrap();
        assert!(id.bytes().all(|b| b.is_ascii_graphic()));
        assert_eq!(
            key.brand_session_version(&brand("shop"), &id, 999)
                .as_deref(),
            Some("2025-11-25")
        );
        assert_eq!(
            key.brand_session_version(&brand("shop"), &id, 1_000),
            None,
            "expired"
        );
        assert_eq!(
            key.brand_session_version(&brand("acme"), &id, 999),
            None,
            "another brand"
        );
        assert_eq!(
            TurnKey::for_tests(2).brand_session_version(&brand("shop"), &id, 999),
            None,
            "another key"
        );
        // A later expiry written in, with the old tag.
        let stretched = id.replacen("1000-", "9000-", 1);
        assert_eq!(
            key.brand_session_version(&brand("shop"), &stretched, 999),
            None
        );
        // Neither kind passes as the other.
        let turn = Uuid::from_u128(7);
        let turn_session = key.session_id(turn, "2025-11-25").unwrap();
        assert_eq!(
            key.brand_session_version(&brand("shop"), &turn_session, 0),
            None
        );
        assert_eq!(key.session_version(turn, &id), None);
    }
}
