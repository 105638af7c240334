//! OAuth 2.0 wire types for the Delegated profile (PACT §5): RFC 6749 errors,
//! RFC 8628 device authorization, token responses, RFC 8414 metadata, and the
//! claims of delegation tokens (§5.4) and receipts (§5.6).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// RFC 6749 §5.2 / RFC 8628 §3.5 / RFC 9396 §5 error codes. `Display` is the wire code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OAuthErrorCode {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    InvalidScope,
    UnauthorizedClient,
    UnsupportedGrantType,
    UnsupportedTokenType,
    AuthorizationPending,
    SlowDown,
    AccessDenied,
    ExpiredToken,
    InvalidAuthorizationDetails,
    ServerError,
    /// RFC 6749 §4.1.2.1: the server cannot handle the request now (overload,
    /// rate limit, maintenance); sent with 503 or 429 and `Retry-After`.
    TemporarilyUnavailable,
}

impl OAuthErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::InvalidScope => "invalid_scope",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnsupportedTokenType => "unsupported_token_type",
            Self::AuthorizationPending => "authorization_pending",
            Self::SlowDown => "slow_down",
            Self::AccessDenied => "access_denied",
            Self::ExpiredToken => "expired_token",
            Self::InvalidAuthorizationDetails => "invalid_authorization_details",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }

    /// PACT §5.3: 400, except `invalid_client` (401) and `server_error` (500).
    pub fn http_status(self) -> u16 {
        match self {
            Self::InvalidClient => 401,
            Self::ServerError => 500,
            Self::TemporarilyUnavailable => 503,
            _ => 400,
        }
    }
}

impl std::fmt::Display for OAuthErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `{error, error_description?}` (RFC 6749 §5.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthError {
    pub error: OAuthErrorCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
}

impl OAuthError {
    pub fn new(error: OAuthErrorCode, description: impl Into<String>) -> Self {
        Self {
            error,
            error_description: Some(description.into()),
        }
    }

    pub fn bare(error: OAuthErrorCode) -> Self {
        Self {
            error,
            error_description: None,
        }
    }
}

/// RFC 8628 §3.2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAuthorizationResponse {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: u64,
    pub interval: u64,
}

/// RFC 6749 §5.1, plus RFC 9396 `authorization_details`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenResponse {
    pub token_type: String,
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in: u64,
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_details: Option<Value>,
}

/// RFC 8628 §3.5: `slow_down` adds 5 seconds to the polling interval, "for
/// this and all subsequent requests". Signed because pactd stores intervals
/// in a PostgreSQL `integer`.
pub const SLOW_DOWN_STEP_SECS: i32 = 5;

/// pactd's user-code alphabet (PACT §5.1 leaves it to the Provider; RFC 8628
/// §6.1 advises a short, unambiguous one): 20 consonants, no vowels so no
/// words form, shown as `XXXX-XXXX`.
pub const USER_CODE_ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";
/// Letters in a pactd user code (about 34.5 bits with [`USER_CODE_ALPHABET`]).
pub const USER_CODE_LENGTH: usize = 8;

pub const GRANT_TYPE_DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
pub const GRANT_TYPE_REFRESH_TOKEN: &str = "refresh_token";

/// RFC 8414 authorization server metadata, as pactd publishes it per brand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthorizationServerMetadata {
    pub issuer: String,
    pub device_authorization_endpoint: String,
    pub token_endpoint: String,
    pub revocation_endpoint: String,
    pub jwks_uri: String,
    pub scopes_supported: Vec<String>,
    pub grant_types_supported: Vec<String>,
    pub token_endpoint_auth_methods_supported: Vec<String>,
    pub revocation_endpoint_auth_methods_supported: Vec<String>,
    /// RFC 7662 introspection, for the brand's own resource servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub response_types_supported: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_details_types_supported: Option<Vec<String>>,
    /// pactd extension: every public key that ever signed a receipt, kept
    /// for as long as receipts are, so a receipt stays verifiable after its
    /// key left `jwks_uri`. Never for verifying tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_keys_uri: Option<String>,
    /// pactd extension: the receipt log's newest signed tree head (RFC 9162
    /// §4.10 in JSON); its proofs are at `…/proof/inclusion` and
    /// `…/proof/consistency` beside it (docs/receipt-log.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_tree_head_uri: Option<String>,
}

/// Claims of a delegation token (PACT §5.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DelegationClaims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub client_id: String,
    pub scope: String,
    pub grant_id: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_details: Option<Value>,
}

impl DelegationClaims {
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope.split(' ').filter(|s| !s.is_empty())
    }
}

/// One action recorded in a receipt: a call that reached the business
/// (PACT §5.6 `{tool, argsHash}`). pactd adds what became of it; every
/// addition is optional, and members it does not know are kept (`extra`),
/// so a receipt verifies (its payload equals its claims) whichever version
/// wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptAction {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_hash: Option<String>,
    /// pactd: `done` (the business answered), `failed` (it answered with an
    /// error: it says it did not act), `unknown` (no answer in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// pactd: the business's HTTP status when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// pactd: the business's own error code and message when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ActionError>,
    /// pactd: the limits this call was allowed under, each
    /// `{type, field, kind, limit}` (and `budget` usage for consumed ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<Value>,
    /// pactd: allowed by the person's approval of this one call (step-up).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved_once: bool,
    /// pactd: what the business declared the call did (`pactEffect`), e.g.
    /// `{"amount": {"currency": "EUR", "amount": "15.00"}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<Value>,
    /// pactd: the declared effect exceeds a limit the call was allowed under.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beyond_limit: bool,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// The business's own words on a failed action (`error`, `message`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionError {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// pactd: a call the gateway did not forward, and why (the rule, and the
/// limit when one was reached).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptRefusal {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_hash: Option<String>,
    /// `missing_scope`, `beyond_limit`, `not_permitted`, `unavailable`,
    /// `unenforceable`, `invalid_arguments`.
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `{type, field}` of the limit reached, for `beyond_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Value>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// Receipt claims (PACT §5.6). `prev` chains the receipts of one grant (a
/// pactd extension): the base64url SHA-256 of the previous receipt's JWS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReceiptClaims {
    pub grant_id: String,
    pub user: String,
    pub pa: String,
    pub brand: String,
    pub scopes_used: Vec<String>,
    pub actions: Vec<ReceiptAction>,
    /// pactd: calls the gateway refused (never forwarded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<ReceiptRefusal>,
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// Members a later version may add, kept so the claims still equal the
    /// signed payload.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

/// The `pact.receipt` metadata value: `{jws, claims}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub jws: String,
    pub claims: ReceiptClaims,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_serialise_as_their_wire_names() {
        let e = OAuthError::new(OAuthErrorCode::SlowDown, "poll less often");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"error": "slow_down", "error_description": "poll less often"})
        );
        for code in [
            OAuthErrorCode::AuthorizationPending,
            OAuthErrorCode::InvalidAuthorizationDetails,
            OAuthErrorCode::UnsupportedGrantType,
        ] {
            assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
        }
        assert_eq!(OAuthErrorCode::InvalidClient.http_status(), 401);
        assert_eq!(OAuthErrorCode::InvalidGrant.http_status(), 400);
    }

    #[test]
    fn receipt_claims_use_the_section_5_6_names() {
        let c = ReceiptClaims {
            grant_id: "g".into(),
            user: "u".into(),
            pa: "p".into(),
            brand: "b".into(),
            scopes_used: vec!["orders:read".into()],
            actions: vec![ReceiptAction {
                tool: "list_orders".into(),
                args_hash: Some("h".into()),
                ..Default::default()
            }],
            refused: vec![],
            ts: "2026-01-01T00:00:00Z".into(),
            prev: None,
            extra: Default::default(),
        };
        let v = serde_json::to_value(c).unwrap();
        assert_eq!(v["grantId"], "g");
        assert_eq!(v["scopesUsed"][0], "orders:read");
        assert_eq!(v["actions"][0]["argsHash"], "h");
        assert!(v.get("prev").is_none());
        assert!(v.get("refused").is_none());
        assert_eq!(
            v["actions"][0],
            serde_json::json!({"tool": "list_orders", "argsHash": "h"})
        );
        // A member a later version adds is kept through a round trip.
        let mut later = v.clone();
        later["actions"][0]["newThing"] = serde_json::json!(1);
        later["newTop"] = serde_json::json!("x");
        let back: ReceiptClaims = serde_json::from_value(later.clone()).unwrap();
        assert_eq!(serde_json::to_value(back).unwrap(), later);
    }
}
