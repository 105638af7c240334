//! OpenID Connect tokens a relying party receives: the ID token from a
//! provider's token endpoint (OpenID Connect Core 1.0 §3.1.3.7) and the
//! logout token of a back-channel logout (OpenID Connect Back-Channel Logout
//! 1.0 §2.4, §2.6).
//!
//! Parsing is [`parse_pa_jwt`]'s: a size cap before any decoding, the compact
//! form, `alg` ES256 or RS256 only (the allow-list: `none`, the HMAC family
//! and everything else are refused), no `crit`, and keys only from the
//! provider's discovered `jwks_uri`, never from `jku`/`jwk`/`x5u`/`x5c`
//! (RFC 8725 §3.10). The caller finds the key through the SSRF-guarded JWKS
//! cache with the unverified `kid`/`alg`; the claim rules here run only
//! after the signature verifies. Errors never carry the token.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

use crate::error::PaJwtError;
use crate::keys::VerifyingKey;
use crate::pa_jwt::{PaJwtRules, UnverifiedPaJwt, parse_pa_jwt};

/// ID tokens carry more claims than PA-JWTs (names, e-mail, groups); 16 KiB
/// still bounds what a provider's answer can make us decode.
pub const MAX_OIDC_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew tolerated between pactd and the provider.
pub const OIDC_SKEW_SECS: i64 = 60;
/// How old (by `iat`) a token may be when it reaches us. An ID token comes
/// straight from the token endpoint and a logout token straight from the
/// provider, so anything older is a replay (Core §3.1.3.7 rule 10 lets the
/// client choose this bound).
pub const MAX_TOKEN_AGE_SECS: i64 = 600;
/// OpenID Connect Core §2: `sub` is at most 255 ASCII characters.
const MAX_SUB_LEN: usize = 255;
/// Back-Channel Logout §2.4: the `events` member that makes a JWT a logout token.
pub const BACKCHANNEL_LOGOUT_EVENT: &str = "http://schemas.openid.net/event/backchannel-logout";
/// Back-Channel Logout §2.4: the explicit type of a logout token.
pub const LOGOUT_TOKEN_TYP: &str = "logout+jwt";

/// Why an ID or logout token was refused. The text names the rule, never a value.
#[derive(Debug, thiserror::Error)]
pub enum OidcTokenError {
    #[error(transparent)]
    Jose(#[from] PaJwtError),
    #[error("invalid claim: {0}")]
    Claim(&'static str),
}

/// Parse a compact ID or logout token without verifying it; the unverified
/// `kid` and `alg` only choose the key.
pub fn parse_oidc_token(token: &str) -> Result<UnverifiedPaJwt, PaJwtError> {
    let rules = PaJwtRules {
        audience: String::new(),
        max_lifetime_secs: 0,
        skew_secs: OIDC_SKEW_SECS,
        max_token_bytes: MAX_OIDC_TOKEN_BYTES,
    };
    parse_pa_jwt(token, &rules)
}

/// What the relying party expects of an ID token.
#[derive(Clone, Debug)]
pub struct IdTokenExpect<'a> {
    /// The provider's issuer identifier, exactly as discovered.
    pub issuer: &'a str,
    /// Our client id at the provider.
    pub client_id: &'a str,
    /// The `nonce` sent in this browser's authentication request.
    pub nonce: &'a str,
    /// When `max_age` was sent: the earliest acceptable `auth_time` (unix
    /// seconds), which proves the person authenticated again (Core §3.1.2.1).
    pub auth_after: Option<i64>,
}

/// A verified ID token.
#[derive(Clone, Debug)]
pub struct IdToken {
    /// Every claim, for the configured user claim.
    pub claims: Map<String, Value>,
    pub sub: String,
    /// The provider's session id (Back-Channel Logout §2.1), when sent.
    pub sid: Option<String>,
    /// When the person authenticated (Core §2, unix seconds), when sent:
    /// what `amr` reports happened then, not when the token was issued.
    pub auth_time: Option<i64>,
    /// RFC 8176 authentication method references.
    pub amr: Vec<String>,
    pub acr: Option<String>,
    pub exp: i64,
}

/// The header's `typ`, if any (covered by the signature once verified).
fn header_typ(parsed: &UnverifiedPaJwt) -> Result<Option<String>, OidcTokenError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(parsed.header_segment())
        .map_err(|_| PaJwtError::Malformed("header is not base64url"))?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes)
        .map_err(|_| PaJwtError::Malformed("header is not a JSON object"))?;
    match header.get("typ") {
        None => Ok(None),
        Some(Value::String(t)) => Ok(Some(t.to_ascii_lowercase())),
        Some(_) => Err(OidcTokenError::Claim("typ is not a string")),
    }
}

fn string<'a>(
    claims: &'a Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<Option<&'a str>, OidcTokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(_) => Err(OidcTokenError::Claim(bad)),
    }
}

fn integer(
    claims: &Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<Option<i64>, OidcTokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or(OidcTokenError::Claim(bad)),
        Some(_) => Err(OidcTokenError::Claim(bad)),
    }
}

/// Comparison whose time does not depend on where the inputs differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The rules ID and logout tokens share: `iss` exactly the provider's,
/// `aud` naming us and no one else (Core §3.1.3.7 rule 3: a token listing
/// audiences we do not trust is refused), `azp` if present our client id
/// (rule 5), `exp` in the future (rule 9), `iat` recent (rule 10), `nbf` if
/// present reached. Returns `exp`.
fn common(
    claims: &Map<String, Value>,
    issuer: &str,
    client_id: &str,
    now: i64,
) -> Result<i64, OidcTokenError> {
    match claims.get("iss") {
        Some(Value::String(iss)) if !issuer.is_empty() && iss == issuer => {}
        _ => return Err(OidcTokenError::Claim("iss is not the provider's issuer")),
    }
    let aud_ok = match claims.get("aud") {
        Some(Value::String(aud)) => aud == client_id,
        Some(Value::Array(list)) => {
            list.len() == 1 && list.first().and_then(Value::as_str) == Some(client_id)
        }
        _ => false,
    };
    if client_id.is_empty() || !aud_ok {
        return Err(OidcTokenError::Jose(PaJwtError::AudienceMismatch));
    }
    if let Some(azp) = string(claims, "azp", "azp is not a string")?
        && azp != client_id
    {
        return Err(OidcTokenError::Claim("azp is not our client id"));
    }
    let exp = integer(claims, "exp", "exp is not an integer")?
        .ok_or(OidcTokenError::Claim("exp is missing"))?;
    let iat = integer(claims, "iat", "iat is not an integer")?
        .ok_or(OidcTokenError::Claim("iat is missing"))?;
    let (now128, skew) = (i128::from(now), i128::from(OIDC_SKEW_SECS));
    if i128::from(exp) <= now128 - skew {
        return Err(PaJwtError::Expired.into());
    }
    if i128::from(iat) > now128 + skew {
        return Err(PaJwtError::IssuedInFuture.into());
    }
    if now128 - i128::from(iat) > i128::from(MAX_TOKEN_AGE_SECS) {
        return Err(OidcTokenError::Claim("iat is too old"));
    }
    if let Some(nbf) = integer(claims, "nbf", "nbf is not an integer")?
        && i128::from(nbf) > now128 + skew
    {
        return Err(PaJwtError::NotYetValid.into());
    }
    Ok(exp)
}

/// Verify an ID token received from the token endpoint (Core §3.1.3.7),
/// `now` in unix seconds.
pub fn verify_id_token(
    parsed: &UnverifiedPaJwt,
    key: &VerifyingKey,
    expect: &IdTokenExpect<'_>,
    now: i64,
) -> Result<IdToken, OidcTokenError> {
    let claims = parsed.verify_signature(key)?;
    // A logout token is not an ID token, whatever its claims (Back-Channel
    // Logout §2.4 gives it its own type so the two cannot be swapped).
    if header_typ(parsed)?.as_deref() == Some(LOGOUT_TOKEN_TYP) || claims.contains_key("events") {
        return Err(OidcTokenError::Claim("a logout token is not an ID token"));
    }
    let exp = common(claims, expect.issuer, expect.client_id, now)?;
    let sub = string(claims, "sub", "sub is not a string")?
        .ok_or(OidcTokenError::Claim("sub is missing"))?;
    if sub.len() > MAX_SUB_LEN {
        return Err(OidcTokenError::Claim("sub is too long"));
    }
    // Rule 11: the nonce ties the token to this browser's request; without
    // it a token obtained elsewhere could be injected (Core §15.5.2).
    match string(claims, "nonce", "nonce is not a string")? {
        Some(n) if !expect.nonce.is_empty() && same(n, expect.nonce) => {}
        Some(_) => return Err(OidcTokenError::Claim("nonce does not match")),
        None => return Err(OidcTokenError::Claim("nonce is missing")),
    }
    let auth_time = integer(claims, "auth_time", "auth_time is not an integer")?;
    if let Some(after) = expect.auth_after {
        let auth_time = auth_time.ok_or(OidcTokenError::Claim("auth_time is missing"))?;
        if i128::from(auth_time) < i128::from(after) - i128::from(OIDC_SKEW_SECS) {
            return Err(OidcTokenError::Claim(
                "auth_time is before the re-authentication was asked for",
            ));
        }
    }
    let amr = match claims.get("amr") {
        None => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(OidcTokenError::Claim("amr is not an array of strings"))?,
        Some(_) => return Err(OidcTokenError::Claim("amr is not an array of strings")),
    };
    let acr = string(claims, "acr", "acr is not a string")?.map(str::to_owned);
    let sid = string(claims, "sid", "sid is not a string")?.map(str::to_owned);
    Ok(IdToken {
        sub: sub.to_owned(),
        sid,
        auth_time,
        amr,
        acr,
        exp,
        claims: claims.clone(),
    })
}

/// A verified logout token: whose sessions to end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogoutToken {
    pub sub: Option<String>,
    pub sid: Option<String>,
    pub jti: String,
    pub exp: i64,
}

/// Verify a logout token (Back-Channel Logout §2.6): the signature and the
/// `iss`/`aud`/`iat` rules of an ID token; `sub` or `sid` (or both); an
/// `events` object holding the back-channel-logout member; no `nonce` (an
/// ID token must never pass as a logout token); `typ`, when present,
/// `logout+jwt`; `exp` and `jti` present.
pub fn verify_logout_token(
    parsed: &UnverifiedPaJwt,
    key: &VerifyingKey,
    issuer: &str,
    client_id: &str,
    now: i64,
) -> Result<LogoutToken, OidcTokenError> {
    let claims = parsed.verify_signature(key)?;
    check_logout_claims(parsed, claims, issuer, client_id, now)
}

/// Every rule of [`verify_logout_token`] but the signature, on a token not
/// verified yet. The logout endpoint is open to anyone (Back-Channel Logout
/// §2.5: the token is the authentication), and checking a signature needs
/// the provider's keys, fetched from its discovery document: a token that
/// could never pass is refused first, so junk POSTs make pactd fetch
/// nothing (issue 28, finding 7). Passing this proves nothing.
pub fn precheck_logout_token(
    parsed: &UnverifiedPaJwt,
    issuer: &str,
    client_id: &str,
    now: i64,
) -> Result<(), OidcTokenError> {
    check_logout_claims(parsed, parsed.unverified_payload(), issuer, client_id, now).map(|_| ())
}

fn check_logout_claims(
    parsed: &UnverifiedPaJwt,
    claims: &Map<String, Value>,
    issuer: &str,
    client_id: &str,
    now: i64,
) -> Result<LogoutToken, OidcTokenError> {
    match header_typ(parsed)?.as_deref() {
        None | Some(LOGOUT_TOKEN_TYP) => {}
        Some(_) => return Err(OidcTokenError::Claim("typ is not logout+jwt")),
    }
    let exp = common(claims, issuer, client_id, now)?;
    let sub = string(claims, "sub", "sub is not a string")?.map(str::to_owned);
    let sid = string(claims, "sid", "sid is not a string")?.map(str::to_owned);
    if sub.is_none() && sid.is_none() {
        return Err(OidcTokenError::Claim("neither sub nor sid"));
    }
    match claims.get("events") {
        Some(Value::Object(events))
            if matches!(events.get(BACKCHANNEL_LOGOUT_EVENT), Some(Value::Object(_))) => {}
        _ => {
            return Err(OidcTokenError::Claim(
                "events has no back-channel logout event",
            ));
        }
    }
    if claims.contains_key("nonce") {
        return Err(OidcTokenError::Claim("a logout token has no nonce"));
    }
    let jti = string(claims, "jti", "jti is not a string")?
        .ok_or(OidcTokenError::Claim("jti is missing"))?
        .to_owned();
    Ok(LogoutToken { sub, sid, jti, exp })
}

// ---------------------------------------------------------------- private_key_jwt

/// RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion.
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long a client assertion lives. It is made just before the one token
/// request that carries it; a minute covers the request and modest clock
/// skew at the provider (RFC 7523 §3 rule 4 asks for an `exp`; Auth0 and
/// Entra ID accept at most a few minutes).
pub const CLIENT_ASSERTION_LIFETIME_SECS: i64 = 60;
/// The JWS `alg` pactd signs client assertions with: its own keys are P-256.
pub const CLIENT_ASSERTION_ALG: &str = "ES256";

/// What a `private_key_jwt` client assertion says (OpenID Connect Core 1.0
/// §9; RFC 7523 §3). `iss` and `sub` are both the client id: the client
/// asserts its own identity (RFC 7523 §2.2, RFC 7521 §5.2).
#[derive(Debug, serde::Serialize)]
pub struct ClientAssertion<'a> {
    pub iss: &'a str,
    pub sub: &'a str,
    /// One audience, never a list: a single value leaves no room for an
    /// assertion meant for one server to be accepted by another
    /// (draft-ietf-oauth-rfc7523bis makes this a MUST).
    pub aud: &'a str,
    /// Unique per assertion, so the provider can refuse a replay (Core §9).
    pub jti: &'a str,
    pub iat: i64,
    pub exp: i64,
}

impl<'a> ClientAssertion<'a> {
    pub fn new(client_id: &'a str, aud: &'a str, jti: &'a str, now: i64) -> Self {
        Self {
            iss: client_id,
            sub: client_id,
            aud,
            jti,
            iat: now,
            exp: now + CLIENT_ASSERTION_LIFETIME_SECS,
        }
    }

    /// The compact JWS, signed with `key` (ES256, header `kid` = the key's
    /// thumbprint, which the provider finds at pactd's published JWKS).
    /// `typ` is `JWT` (RFC 7519 §5.1): pactd's own tokens carry their own
    /// explicit types, which their verifiers require, so an assertion can
    /// never pass for one of them.
    pub fn sign(&self, key: &crate::ProviderKey) -> Result<String, crate::ProviderKeyError> {
        let payload = serde_json::to_vec(self).map_err(|_| crate::ProviderKeyError::Encode)?;
        key.sign_compact("JWT", &payload)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::test_keys::TestPa;

    const ISS: &str = "https://id.shop.example";
    const CLIENT: &str = "pactd-demo";

    /// One way of breaking a token's claims.
    type Edit = Box<dyn Fn(&mut Value)>;
    const NOW: i64 = 1_750_000_000;

    fn id_claims() -> Value {
        json!({"iss": ISS, "aud": CLIENT, "sub": "u-1", "nonce": "n-123",
               "iat": NOW - 5, "exp": NOW + 300, "amr": ["pwd", "otp"], "acr": "urn:x:mfa", "sid": "s-9"})
    }

    fn expect() -> IdTokenExpect<'static> {
        IdTokenExpect {
            issuer: ISS,
            client_id: CLIENT,
            nonce: "n-123",
            auth_after: None,
        }
    }

    fn check(key: &TestPa, header: &Value, claims: &Value) -> Result<IdToken, OidcTokenError> {
        let token = key.token(header, claims);
        let parsed = parse_oidc_token(&token)?;
        verify_id_token(&parsed, &key.key(), &expect(), NOW)
    }

    #[test]
    fn a_good_id_token_passes_with_its_claims() {
        let key = TestPa::rs256("k1");
        let t = check(&key, &key.header(), &id_claims()).unwrap();
        assert_eq!(t.sub, "u-1");
        assert_eq!(t.amr, ["pwd", "otp"]);
        assert_eq!(t.acr.as_deref(), Some("urn:x:mfa"));
        assert_eq!(t.sid.as_deref(), Some("s-9"));
        let mut one = id_claims();
        one["aud"] = json!([CLIENT]);
        one["azp"] = json!(CLIENT);
        check(&key, &key.header(), &one).unwrap();
    }

    #[test]
    fn every_id_token_rule_refuses_what_breaks_it() {
        let key = TestPa::es256("k1");
        let cases: Vec<(&str, Edit)> = vec![
            (
                "wrong iss",
                Box::new(|c: &mut Value| c["iss"] = json!("https://id.shop.example/")),
            ),
            (
                "no iss",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("iss");
                }),
            ),
            (
                "wrong aud",
                Box::new(|c: &mut Value| c["aud"] = json!("someone-else")),
            ),
            (
                "extra aud",
                Box::new(|c: &mut Value| c["aud"] = json!([CLIENT, "someone-else"])),
            ),
            (
                "no aud",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("aud");
                }),
            ),
            (
                "wrong azp",
                Box::new(|c: &mut Value| c["azp"] = json!("someone-else")),
            ),
            (
                "expired",
                Box::new(|c: &mut Value| c["exp"] = json!(NOW - 61)),
            ),
            (
                "no exp",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
            ),
            (
                "iat future",
                Box::new(|c: &mut Value| c["iat"] = json!(NOW + 120)),
            ),
            (
                "iat old",
                Box::new(|c: &mut Value| c["iat"] = json!(NOW - 601)),
            ),
            (
                "nbf future",
                Box::new(|c: &mut Value| c["nbf"] = json!(NOW + 120)),
            ),
            (
                "wrong nonce",
                Box::new(|c: &mut Value| c["nonce"] = json!("n-124")),
            ),
            (
                "no nonce",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("nonce");
                }),
            ),
            (
                "no sub",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("sub");
                }),
            ),
            (
                "long sub",
                Box::new(|c: &mut Value| c["sub"] = json!("x".repeat(256))),
            ),
            (
                "amr type",
                Box::new(|c: &mut Value| c["amr"] = json!("mfa")),
            ),
            (
                "events",
                Box::new(|c: &mut Value| c["events"] = json!({BACKCHANNEL_LOGOUT_EVENT: {}})),
            ),
        ];
        for (name, edit) in cases {
            let mut c = id_claims();
            edit(&mut c);
            assert!(check(&key, &key.header(), &c).is_err(), "{name} passed");
        }
    }

    #[test]
    fn forged_and_confused_id_tokens_are_refused() {
        let key = TestPa::es256("k1");
        let other = TestPa::es256("k1");
        // Signed by another key under the same kid: a forgery.
        let token = other.token(&other.header(), &id_claims());
        let parsed = parse_oidc_token(&token).unwrap();
        assert!(matches!(
            verify_id_token(&parsed, &key.key(), &expect(), NOW),
            Err(OidcTokenError::Jose(PaJwtError::BadSignature))
        ));
        // alg none and HS256 never get as far as a key.
        for alg in ["none", "HS256", "PS256"] {
            let t = key.token(&json!({"alg": alg, "kid": "k1"}), &id_claims());
            assert!(parse_oidc_token(&t).is_err(), "{alg}");
        }
        // A logout token's type.
        let mut h = key.header();
        h["typ"] = json!("logout+jwt");
        assert!(check(&key, &h, &id_claims()).is_err());
    }

    #[test]
    fn a_re_authentication_needs_a_fresh_auth_time() {
        let key = TestPa::rs256("k1");
        let token = key.token(&key.header(), &id_claims());
        let parsed = parse_oidc_token(&token).unwrap();
        let mut e = expect();
        e.auth_after = Some(NOW - 10);
        assert!(
            verify_id_token(&parsed, &key.key(), &e, NOW).is_err(),
            "no auth_time"
        );
        let mut c = id_claims();
        c["auth_time"] = json!(NOW - 200);
        let parsed = parse_oidc_token(&key.token(&key.header(), &c)).unwrap();
        assert!(
            verify_id_token(&parsed, &key.key(), &e, NOW).is_err(),
            "old auth_time"
        );
        c["auth_time"] = json!(NOW - 3);
        let parsed = parse_oidc_token(&key.token(&key.header(), &c)).unwrap();
        let token = verify_id_token(&parsed, &key.key(), &e, NOW).unwrap();
        assert_eq!(token.auth_time, Some(NOW - 3));
    }

    #[test]
    fn auth_time_is_returned_when_sent_and_must_be_a_number() {
        let key = TestPa::rs256("k1");
        let verify = |c: &Value| {
            let parsed = parse_oidc_token(&key.token(&key.header(), c)).unwrap();
            verify_id_token(&parsed, &key.key(), &expect(), NOW)
        };
        assert_eq!(verify(&id_claims()).unwrap().auth_time, None);
        let mut c = id_claims();
        c["auth_time"] = json!(NOW - 86_400);
        assert_eq!(verify(&c).unwrap().auth_time, Some(NOW - 86_400));
        c["auth_time"] = json!("yesterday");
        assert!(verify(&c).is_err());
    }

    fn logout_claims() -> Value {
        json!({"iss": ISS, "aud": CLIENT, "sub": "u-1", "sid": "s-9", "jti": "j-1",
               "iat": NOW - 2, "exp": NOW + 120,
               "events": {BACKCHANNEL_LOGOUT_EVENT: {}}})
    }

    fn logout(key: &TestPa, header: &Value, claims: &Value) -> Result<LogoutToken, OidcTokenError> {
        let parsed = parse_oidc_token(&key.token(header, claims))?;
        verify_logout_token(&parsed, &key.key(), ISS, CLIENT, NOW)
    }

    #[test]
    fn logout_tokens_follow_back_channel_logout_2_6() {
        let key = TestPa::rs256("k1");
        let mut h = key.header();
        h["typ"] = json!("logout+jwt");
        let t = logout(&key, &h, &logout_claims()).unwrap();
        assert_eq!(t.sub.as_deref(), Some("u-1"));
        assert_eq!(t.sid.as_deref(), Some("s-9"));
        let cases: Vec<(&str, Edit)> = vec![
            (
                "wrong iss",
                Box::new(|c: &mut Value| c["iss"] = json!("https://evil.example")),
            ),
            (
                "wrong aud",
                Box::new(|c: &mut Value| c["aud"] = json!("other")),
            ),
            (
                "no events",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("events");
                }),
            ),
            (
                "other event",
                Box::new(|c: &mut Value| c["events"] = json!({"urn:other": {}})),
            ),
            ("nonce", Box::new(|c: &mut Value| c["nonce"] = json!("n"))),
            (
                "neither sub nor sid",
                Box::new(|c: &mut Value| {
                    let o = c.as_object_mut().unwrap();
                    o.remove("sub");
                    o.remove("sid");
                }),
            ),
            (
                "no jti",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("jti");
                }),
            ),
            (
                "no exp",
                Box::new(|c: &mut Value| {
                    c.as_object_mut().unwrap().remove("exp");
                }),
            ),
            ("old", Box::new(|c: &mut Value| c["iat"] = json!(NOW - 700))),
        ];
        for (name, edit) in cases {
            let mut c = logout_claims();
            edit(&mut c);
            assert!(logout(&key, &h, &c).is_err(), "{name} passed");
            // The same rules before any key is fetched (issue 28, finding 7).
            let parsed = parse_oidc_token(&key.token(&h, &c)).unwrap();
            assert!(
                precheck_logout_token(&parsed, ISS, CLIENT, NOW).is_err(),
                "{name} passed the precheck"
            );
        }
        let mut jwt = key.header();
        jwt["typ"] = json!("JWT");
        assert!(logout(&key, &jwt, &logout_claims()).is_err(), "typ JWT");
        // The precheck passes what verification would, whoever signed it:
        // it saves fetches, it proves nothing.
        let forger = TestPa::rs256("k1");
        let forged = parse_oidc_token(&forger.token(&h, &logout_claims())).unwrap();
        precheck_logout_token(&forged, ISS, CLIENT, NOW).unwrap();
        assert!(verify_logout_token(&forged, &key.key(), ISS, CLIENT, NOW).is_err());
    }

    #[test]
    fn a_client_assertion_names_the_client_twice_and_lives_a_minute() {
        let key = crate::ProviderKey::generate().unwrap();
        let jws = ClientAssertion::new("pactd-demo", "https://id.shop.example/token", "j-1", NOW)
            .sign(&key)
            .unwrap();
        let part = |i: usize| -> Value {
            serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(jws.split('.').nth(i).unwrap())
                    .unwrap(),
            )
            .unwrap()
        };
        assert_eq!(
            part(0),
            json!({"alg": "ES256", "typ": "JWT", "kid": key.kid()})
        );
        assert_eq!(
            part(1),
            json!({"iss": "pactd-demo", "sub": "pactd-demo", "aud": "https://id.shop.example/token",
                   "jti": "j-1", "iat": NOW, "exp": NOW + 60})
        );
        // It verifies with the published key, and only as a plain JWT.
        let set = crate::ProviderKeySet::from_public_jwks(&[key.public_jwk()]).unwrap();
        assert!(set.verify_compact(&jws, "JWT").is_ok());
        assert!(set.verify_compact(&jws, crate::DELEGATION_TYP).is_err());
    }
}
