//! A brand's own login (PACT §5.2). A brand that keeps its customers' accounts
//! elsewhere sets `login_url` and `login_jwks_uri` in its settings. After the
//! person confirms a code at `/device`, pactd links them to
//! `login_url?user_code=XXXX-XXXX&state=S&return_to=<public_url>/device/assertion`
//! (a plain link: the CSP's `form-action 'self'` forbids a cross-site form).
//! `S` binds the trip to this browser: it is derived from a secret in a
//! cookie set with the link (see `session::handoff`) and the authorization's
//! id, and the brand must echo it in the assertion. Without that binding, an
//! attacker holding a genuine assertion for their own account could make a
//! victim's browser post it (login CSRF, RFC 6749 §10.12, RFC 9700 §4.7.1):
//! the victim would be signed in as the attacker and could approve their own
//! agent onto the attacker's account.
//! The brand signs them in and sends them back by POSTing a form field
//! `assertion`: a compact JWS it signed, which must hold
//!
//! * `iss` = the brand's login issuer: the `login_issuer` setting when set,
//!   otherwise the origin (`scheme://host[:port]`) of `login_url`;
//! * `aud` = `<public_url>/device/assertion` (one string);
//! * `sub` = the person's id at the brand (becomes the delegation token's `sub`);
//! * `user_code` = the code of a live, undecided authorization of that brand
//!   (either form, `BCDF-GHJK` or `BCDFGHJK`);
//! * `state` = the `state` query parameter of the link, unchanged (it must
//!   match the browser that posts the assertion);
//! * `jti` = a string never seen before for this brand (single use);
//! * `iat`, `exp` with `exp - iat <= 300` s, 30 s clock skew; `nbf` if present;
//! * optionally `amr` (RFC 8176): when it holds `"mfa"` the brand vouches for a
//!   second factor, which satisfies the recent second factor that `requires_mfa` scopes need.
//!
//! Verification reuses pact-jose: `parse_pa_jwt` gives the strict compact-form
//! and header rules (size cap, ES256/RS256 only, no `crit`, `kid`, never `jku`/
//! `jwk`/`x5u`/`x5c`), the key comes from the brand's JWKS through the same
//! SSRF-guarded cache as PA keys, and `UnverifiedPaJwt::verify` checks the
//! signature over the exact signing input, `sub`, `aud`, `iat`/`exp`/`nbf`.
//! This module adds `iss`, `user_code`, `jti` and `amr`. The unverified
//! `user_code` is used only to find the authorization (hence the brand, its
//! issuer and its keys) — like a PA-JWT's `iss` — and trusted after the
//! signature verifies.
//!
//! The endpoint is exempt from the Origin and CSRF checks (it is cross-site by
//! design); every failure is a 400/401 page and changes nothing.

use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::brands::Brand;
use pact_db::device_authorizations::{DeviceAuthorization, Status as AuthStatus};
use pact_db::ids::BrandId;
use pact_db::sessions::SessionState;
use pact_jose::{PaJwtError, PaJwtRules};
use pact_node::node::NodeInner;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use url::Url;
use uuid::Uuid;

use super::i18n;
use super::page::{ErrorPage, PageError, render};
use super::session::{self, Browser};
use crate::domain::user_code;
use crate::state::AppState;

/// PACT §5.2: assertions live at most five minutes.
pub const MAX_LIFETIME_SECS: i64 = 300;
pub const SKEW_SECS: i64 = 30;
/// A few hundred bytes in practice; the cap is checked before any decoding.
pub const MAX_ASSERTION_BYTES: usize = 8192;
/// Longest accepted `sub` and `jti` (the accounts schema's external id bound).
const MAX_CLAIM_LEN: usize = 256;

/// A brand's own-login settings, when both are set and usable.
#[derive(Clone, Debug)]
pub struct BrandLogin {
    pub login_url: Url,
    pub jwks_uri: String,
    /// The `iss` its assertions must carry.
    pub issuer: String,
}

impl BrandLogin {
    /// `login_url` (https, or http to a loopback host for development) and
    /// `login_jwks_uri` from the brand's settings; `login_issuer` optional.
    pub fn from_settings(settings: &Value) -> Option<Self> {
        let login_url = settings.get("login_url")?.as_str()?;
        let jwks_uri = settings.get("login_jwks_uri")?.as_str()?;
        let url = Url::parse(login_url).ok()?;
        let host = url.host_str()?;
        let loopback = host == "localhost" || host == "127.0.0.1" || host == "[::1]";
        let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
        if !scheme_ok || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        if jwks_uri.is_empty() {
            return None;
        }
        let issuer = settings
            .get("login_issuer")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| url.origin().ascii_serialization());
        Some(Self {
            login_url: url,
            jwks_uri: jwks_uri.to_owned(),
            issuer,
        })
    }

    /// The link to the brand's login for this code and browser `state`.
    pub fn link(&self, public_url: &str, code: &str, state: &str) -> String {
        let mut url = self.login_url.clone();
        url.query_pairs_mut()
            .append_pair("user_code", &user_code::display(code))
            .append_pair("state", state)
            .append_pair("return_to", &assertion_url(public_url));
        url.to_string()
    }
}

/// The `state` a browser holding hand-off secret `handoff` must get back for
/// authorization `authorization_id`: a one-way function of both, so the value
/// the brand sees reveals nothing of the cookie, and a state made for one
/// authorization is no use for another.
pub fn handoff_state(handoff: &str, authorization_id: Uuid) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"pactd brand login state\0");
    h.update(handoff.as_bytes());
    h.update(b"\0");
    h.update(authorization_id.as_bytes());
    URL_SAFE_NO_PAD.encode(h.finalize())
}

/// The assertion's audience and the `return_to` the brand posts to.
pub fn assertion_url(public_url: &str) -> String {
    format!("{}/device/assertion", public_url.trim_end_matches('/'))
}

#[derive(Template)]
#[template(path = "device_external_login.html")]
struct ExternalLoginPage<'a> {
    brand_name: &'a str,
    signed_in: bool,
    agent_name: &'a str,
    user_code: String,
    link: String,
    notice: Option<&'a str>,
    look: crate::who::Look,
}

/// The page that sends the person to the brand's own login for `auth`, and
/// the hand-off cookie that binds the trip to this browser.
pub async fn login_page(
    node: &NodeInner,
    browser: &Browser,
    brand: &Brand,
    login: &BrandLogin,
    auth: &DeviceAuthorization,
    notice: Option<&str>,
    status: StatusCode,
) -> Result<Response, PageError> {
    let agent = pact_db::agents::find(&node.db, &auth.pa_issuer).await?;
    let agent_name = agent.map_or_else(|| i18n::t("ext-an-agent"), |a| a.name);
    let (handoff, cookie) = session::handoff(node, browser);
    let page = ExternalLoginPage {
        brand_name: &brand.name,
        signed_in: browser.signed_in(),
        agent_name: &agent_name,
        user_code: user_code::display(&auth.user_code),
        link: login.link(
            &node.config.public_url,
            &auth.user_code,
            &handoff_state(&handoff, auth.id),
        ),
        notice,
        look: crate::who::Look::of(&brand.settings),
    };
    let mut res = render(&page, status);
    if let Some(c) = cookie {
        res.headers_mut().append(header::SET_COOKIE, c);
    }
    Ok(res)
}

/// Why an assertion was refused. The reason is logged, never the token.
#[derive(Debug)]
enum Refusal {
    /// 400: not an assertion at all.
    Malformed(&'static str),
    /// 401: well formed, but not acceptable.
    Invalid(&'static str),
    /// 403: a genuine assertion, but not for this browser (no `state`, or
    /// one made for another browser's trip to the brand's login).
    NotThisBrowser(&'static str),
    Db(pact_db::Error),
}

impl From<pact_db::Error> for Refusal {
    fn from(e: pact_db::Error) -> Self {
        Self::Db(e)
    }
}

/// What an accepted assertion establishes.
#[derive(Debug)]
struct Accepted {
    brand_id: BrandId,
    sub: String,
    authorization_id: Uuid,
    mfa: bool,
}

/// `POST /device/assertion`.
pub async fn assertion(
    State(state): State<AppState>,
    browser: Browser,
    body: Bytes,
) -> Result<Response, PageError> {
    let token = match single_field(&body, "assertion") {
        Some(t) => t,
        None => return Ok(refused(Refusal::Malformed("no assertion field"))),
    };
    let now = state.clock.now();
    let accepted = match verify(&state, &token, browser.handoff.as_deref(), now).await {
        Ok(a) => a,
        Err(Refusal::Db(e)) => return Err(PageError::from(e)),
        Err(r) => return Ok(refused(r)),
    };
    let (_, cookie) = session::start(
        &state,
        browser.session.as_ref(),
        SessionState {
            brand_id: Some(accepted.brand_id),
            external_sub: Some(accepted.sub),
            mfa_at: accepted.mfa.then_some(now),
            device_authorization_id: Some(accepted.authorization_id),
            ..SessionState::default()
        },
    )
    .await?;
    let mut res = Redirect::to("/device/consent").into_response();
    res.headers_mut().append(header::SET_COOKIE, cookie);
    res.headers_mut()
        .append(header::SET_COOKIE, session::clear_handoff(&state));
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// The one value of `name` in a form body; `None` when absent, empty or repeated.
fn single_field(body: &[u8], name: &str) -> Option<String> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(body) {
        if k == name {
            if found.is_some() {
                return None;
            }
            found = Some(v.into_owned());
        }
    }
    found.filter(|v| !v.is_empty())
}

fn refused(r: Refusal) -> Response {
    let (status, reason, message) = match r {
        Refusal::Malformed(why) => (StatusCode::BAD_REQUEST, why, "ext-err-malformed"),
        Refusal::Invalid(why) => (StatusCode::UNAUTHORIZED, why, "ext-err-invalid"),
        Refusal::NotThisBrowser(why) => (StatusCode::FORBIDDEN, why, "ext-err-not-this-browser"),
        Refusal::Db(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "database",
            "err-internal",
        ),
    };
    tracing::info!(reason, "brand login assertion refused");
    let page = ErrorPage {
        brand_name: "pactd",
        title: &i18n::t("ext-err-title"),
        message: &i18n::t(message),
        signed_in: false,
        look: crate::who::Look::none(),
    };
    render(&page, status)
}

fn jose_refusal(e: PaJwtError) -> Refusal {
    match e {
        PaJwtError::TooLarge => Refusal::Malformed("assertion too large"),
        PaJwtError::Malformed(why) => Refusal::Malformed(why),
        PaJwtError::AlgNotAllowed => Refusal::Invalid("alg not allowed"),
        PaJwtError::CritHeader => Refusal::Invalid("crit header"),
        PaJwtError::KeyAlgMismatch => Refusal::Invalid("key alg mismatch"),
        PaJwtError::KidMismatch => Refusal::Invalid("kid mismatch"),
        PaJwtError::BadSignature => Refusal::Invalid("bad signature"),
        PaJwtError::Claim(why) => Refusal::Invalid(why),
        PaJwtError::AudienceMismatch => Refusal::Invalid("audience mismatch"),
        PaJwtError::IssuedInFuture => Refusal::Invalid("issued in the future"),
        PaJwtError::Expired => Refusal::Invalid("expired"),
        PaJwtError::NotYetValid => Refusal::Invalid("not yet valid"),
        PaJwtError::LifetimeTooLong => Refusal::Invalid("lifetime too long"),
    }
}

/// The payload of a compact JWS as a JSON object (decoded again by
/// `parse_pa_jwt`'s rules: base64url without padding, an object).
fn payload_of(token: &str) -> Result<Map<String, Value>, Refusal> {
    let segment = token
        .split('.')
        .nth(1)
        .ok_or(Refusal::Malformed("not three segments"))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| Refusal::Malformed("payload is not base64url"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Refusal::Malformed("payload is not a JSON object")),
    }
}

fn bounded_string<'a>(
    payload: &'a Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<&'a str, Refusal> {
    match payload.get(name) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_CLAIM_LEN => Ok(s),
        _ => Err(Refusal::Invalid(bad)),
    }
}

async fn verify(
    state: &AppState,
    token: &str,
    handoff: Option<&str>,
    now: OffsetDateTime,
) -> Result<Accepted, Refusal> {
    let audience = assertion_url(&state.config.public_url);
    let rules = PaJwtRules {
        audience,
        max_lifetime_secs: MAX_LIFETIME_SECS,
        skew_secs: SKEW_SECS,
        max_token_bytes: MAX_ASSERTION_BYTES,
    };
    let parsed = pact_jose::parse_pa_jwt(token, &rules).map_err(jose_refusal)?;
    // Unverified: used only to find the authorization, and with it the brand
    // whose issuer and keys the assertion must match.
    let payload = payload_of(token)?;
    let typed = bounded_string(&payload, "user_code", "user_code missing")?;
    let code = user_code::normalise(typed).ok_or(Refusal::Invalid("user_code malformed"))?;
    let auth = pact_db::device_authorizations::find_live_by_user_code(&state.db, &code)
        .await?
        .ok_or(Refusal::Invalid("unknown user_code"))?;
    if auth.status != AuthStatus::Pending || auth.expires_at <= now {
        return Err(Refusal::Invalid("authorization not pending"));
    }
    let brand = pact_db::brands::find(&state.db, &auth.brand_id)
        .await?
        .ok_or(Refusal::Invalid("unknown brand"))?;
    let login =
        BrandLogin::from_settings(&brand.settings).ok_or(Refusal::Invalid("brand has no login"))?;
    if parsed.issuer() != login.issuer {
        return Err(Refusal::Invalid("iss is not the brand's login issuer"));
    }
    let key = state
        .jwks
        .key_for(&login.jwks_uri, parsed.kid(), parsed.alg())
        .await
        .map_err(|e| {
            tracing::warn!(brand = %brand.id, error = %e, "brand login key unavailable");
            Refusal::Invalid("no key")
        })?;
    let claims = parsed
        .verify(&key, &rules, now.unix_timestamp())
        .map_err(jose_refusal)?;
    // The signature covers the payload decoded above: from here it is trusted.
    if claims.sub.len() > MAX_CLAIM_LEN {
        return Err(Refusal::Invalid("sub too long"));
    }
    let jti = bounded_string(&payload, "jti", "jti missing")?;
    // The browser binding, checked before the jti is spent so that a posted
    // stranger's assertion changes nothing at all.
    let returned_state = match payload.get("state") {
        Some(Value::String(s)) if !s.is_empty() => s.as_str(),
        _ => return Err(Refusal::NotThisBrowser("state missing")),
    };
    let Some(handoff) = handoff else {
        return Err(Refusal::NotThisBrowser("no hand-off cookie"));
    };
    let expected = handoff_state(handoff, auth.id);
    if expected.len() != returned_state.len()
        || !openssl::memcmp::eq(expected.as_bytes(), returned_state.as_bytes())
    {
        return Err(Refusal::NotThisBrowser("state is not this browser's"));
    }
    let mfa = match payload.get("amr") {
        None => false,
        Some(Value::Array(methods)) if methods.iter().all(Value::is_string) => {
            methods.iter().any(|m| m == "mfa")
        }
        Some(_) => return Err(Refusal::Invalid("amr is not an array of strings")),
    };
    let keep_until = OffsetDateTime::from_unix_timestamp(claims.exp.saturating_add(SKEW_SECS))
        .map_err(|_| Refusal::Invalid("exp out of range"))?;
    if !pact_db::users::claim_assertion_jti(&state.db, &brand.id, jti, keep_until).await? {
        return Err(Refusal::Invalid("jti replayed"));
    }
    Ok(Accepted {
        brand_id: brand.id,
        sub: claims.sub,
        authorization_id: auth.id,
        mfa,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_need_both_urls_and_the_issuer_defaults_to_the_login_origin() {
        let s = json!({"login_url": "https://id.shop.example/signin?x=1",
                       "login_jwks_uri": "https://id.shop.example/jwks.json"});
        let login = BrandLogin::from_settings(&s).unwrap();
        assert_eq!(login.issuer, "https://id.shop.example");
        let link = login.link("https://pactd.example/", "BCDFGHJK", "s-1");
        assert_eq!(
            link,
            "https://id.shop.example/signin?x=1&user_code=BCDF-GHJK&state=s-1&return_to=https%3A%2F%2Fpactd.example%2Fdevice%2Fassertion"
        );
        let mut with_issuer = s.clone();
        with_issuer["login_issuer"] = json!("https://issuer.shop.example");
        assert_eq!(
            BrandLogin::from_settings(&with_issuer).unwrap().issuer,
            "https://issuer.shop.example"
        );
        assert!(BrandLogin::from_settings(&json!({"login_url": "https://a.example"})).is_none());
        for bad in [
            "http://id.shop.example/",
            "javascript:alert(1)",
            "https://u:p@id.shop.example/",
        ] {
            let s = json!({"login_url": bad, "login_jwks_uri": "https://a.example/j"});
            assert!(BrandLogin::from_settings(&s).is_none(), "{bad}");
        }
        let dev = json!({"login_url": "http://127.0.0.1:9/login", "login_jwks_uri": "x"});
        assert!(BrandLogin::from_settings(&dev).is_some());
    }

    #[test]
    fn the_state_depends_on_both_the_browser_and_the_authorization() {
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let s = handoff_state("secret-1", a);
        assert_eq!(s, handoff_state("secret-1", a));
        assert_ne!(s, handoff_state("secret-2", a));
        assert_ne!(s, handoff_state("secret-1", b));
        assert!(!s.contains("secret"));
        assert_eq!(s.len(), 43);
    }

    #[test]
    fn the_assertion_field_must_appear_once() {
        assert_eq!(
            single_field(b"assertion=a.b.c", "assertion").as_deref(),
            Some("a.b.c")
        );
        assert_eq!(single_field(b"assertion=a&assertion=b", "assertion"), None);
        assert_eq!(single_field(b"assertion=", "assertion"), None);
        assert_eq!(single_field(b"other=1", "assertion"), None);
    }
}
