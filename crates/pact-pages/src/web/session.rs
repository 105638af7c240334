//! Browser sessions. The cookie holds 256 random bits; the database holds
//! only their SHA-256, so a database leak yields no usable session. A new id
//! is issued whenever the authentication state rises (sign-in, second factor,
//! brand assertion) — session fixation cannot carry over.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use pact_db::sessions::{Session, SessionState};
use pact_node::node::NodeInner;
use time::{Duration, OffsetDateTime};

use super::page::PageError;
use crate::domain::secrets;
use crate::state::AppState;

/// Absolute session lifetime.
pub const LIFETIME: Duration = Duration::hours(12);
/// How long a browser may spend at a brand's own login (longer than a
/// device code lives).
pub const HANDOFF_LIFETIME: Duration = Duration::minutes(15);
/// A half-finished sign-in (password accepted, second factor to come) lives briefly.
pub const PENDING_LIFETIME: Duration = Duration::minutes(15);
/// How recent a second factor must be to reconfirm ("confirm it's you": consent to a
/// `requires_mfa` scope, changing second factors).
pub const RECONFIRM_WINDOW: Duration = Duration::minutes(10);

/// A second factor was verified in this session within [`RECONFIRM_WINDOW`]
/// (a minute of clock skew between nodes tolerated).
pub fn mfa_is_recent(session: &Session, now: OffsetDateTime) -> bool {
    mfa_at_is_recent(session.mfa_at, now)
}

/// The session began within [`RECONFIRM_WINDOW`]: a session is made anew at
/// every sign-in (its id rotates whenever the authentication state rises), so
/// its age is the time since the person last proved who they are. Adding an
/// account's first second factor asks for this (NIST SP 800-63B §6.1.2.1:
/// binding an authenticator needs an authenticated session, and a browser left
/// signed in for hours is not one): a factor an attacker binds from a left-open
/// browser would outlive a password reset and lock the owner out.
pub fn signed_in_recently(session: &Session, now: OffsetDateTime) -> bool {
    // The same window and clock skew as a reconfirmed second factor.
    mfa_at_is_recent(Some(session.created_at), now)
}

pub fn mfa_at_is_recent(mfa_at: Option<OffsetDateTime>, now: OffsetDateTime) -> bool {
    mfa_at.is_some_and(|at| at <= now + Duration::minutes(1) && now - at <= RECONFIRM_WINDOW)
}

/// What the request's cookies refer to, if anything live.
#[derive(Clone, Debug)]
pub struct Browser {
    pub session: Option<Session>,
    /// The anonymous form token (see [`form_token`]), when the browser has one.
    pub form_token: Option<String>,
    /// The brand-login hand-off secret (see [`handoff_cookie_name`]), when the
    /// browser has one.
    pub handoff: Option<String>,
}

/// `__Host-` binds the cookie to this exact origin, but requires `Secure`.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_session"
    } else {
        "pactd_session"
    }
}

pub fn is_secure(node: &NodeInner) -> bool {
    node.config.public_url.starts_with("https://")
}

/// The cookie of an anonymous visitor's form token. Like the session cookie,
/// `__Host-` on HTTPS, so neither a sibling subdomain nor plain HTTP can
/// plant one (the weakness of a naive double-submit token).
pub fn form_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_form"
    } else {
        "pactd_form"
    }
}

/// 43 characters of base64url: the shape of every secret we issue.
fn well_formed(raw: &str) -> bool {
    raw.len() == 43
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The cookie that binds a trip to a brand's own login to this browser
/// (login CSRF defence, RFC 6749 §10.12 and RFC 9700 §4.7.1 applied to the
/// PACT §5.2 hand-off). The brand's login POSTs the person back from its own
/// site, so on HTTPS the cookie is `SameSite=None` (the session cookie, being
/// `Lax`, does not travel on a cross-site POST); on plain HTTP, which only
/// development uses, browsers refuse `None` without `Secure`, so it is `Lax`.
pub fn handoff_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_handoff"
    } else {
        "pactd_handoff"
    }
}

/// A cookie's value as the request carries it (the console's session reads
/// its own cookie with the same rule).
pub fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

impl FromRequestParts<AppState> for Browser {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, PageError> {
        let secure = is_secure(state);
        let form_token = cookie_value(&parts.headers, form_cookie_name(secure))
            .filter(|raw| well_formed(raw))
            .map(str::to_owned);
        let handoff = cookie_value(&parts.headers, handoff_cookie_name(secure))
            .filter(|raw| well_formed(raw))
            .map(str::to_owned);
        let session = match cookie_value(&parts.headers, cookie_name(secure)) {
            Some(raw) if well_formed(raw) => {
                pact_db::sessions::find_live(&state.db, &secrets::hash(raw), state.clock.now())
                    .await?
            }
            _ => None,
        };
        Ok(Self {
            session,
            form_token,
            handoff,
        })
    }
}

impl Browser {
    pub fn signed_in(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.user_id.is_some() || s.external_sub.is_some())
    }
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, whole site, `Secure` on HTTPS.
fn cookie(
    node: &NodeInner,
    name: fn(bool) -> &'static str,
    value: &str,
    max_age: i64,
) -> HeaderValue {
    let secure = is_secure(node);
    let line = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        name(secure),
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&line).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The browser's hand-off secret, with the `Set-Cookie` that creates it when
/// it has none yet. An existing one is kept, so two tabs on their way to the
/// brand's login do not undo each other.
pub fn handoff(node: &NodeInner, browser: &Browser) -> (String, Option<HeaderValue>) {
    if let Some(raw) = &browser.handoff {
        return (raw.clone(), None);
    }
    let (raw, _) = secrets::new_secret();
    let secure = is_secure(node);
    let line = format!(
        "{}={raw}; Path=/; HttpOnly; Max-Age={}{}",
        handoff_cookie_name(secure),
        HANDOFF_LIFETIME.whole_seconds(),
        if secure {
            "; SameSite=None; Secure"
        } else {
            "; SameSite=Lax"
        }
    );
    let set = HeaderValue::from_str(&line).unwrap_or_else(|_| HeaderValue::from_static(""));
    (raw, Some(set))
}

/// The `Set-Cookie` that removes the hand-off secret once it has been used.
pub fn clear_handoff(node: &NodeInner) -> HeaderValue {
    let secure = is_secure(node);
    let line = format!(
        "{}=; Path=/; HttpOnly; Max-Age=0{}",
        handoff_cookie_name(secure),
        if secure {
            "; SameSite=None; Secure"
        } else {
            "; SameSite=Lax"
        }
    );
    HeaderValue::from_str(&line).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A `Set-Cookie` value for a session id.
pub fn set_cookie(node: &NodeInner, raw_id: &str) -> HeaderValue {
    cookie(node, cookie_name, raw_id, LIFETIME.whole_seconds())
}

/// The `Set-Cookie` that removes the session cookie.
pub fn clear_cookie(node: &NodeInner) -> HeaderValue {
    cookie(node, cookie_name, "", 0)
}

/// Starts a new session at `level` (replacing `old` if given) and returns
/// it with the `Set-Cookie` header value. Used for every rotation.
pub async fn start(
    node: &NodeInner,
    old: Option<&Session>,
    level: SessionState,
) -> Result<(Session, HeaderValue), PageError> {
    let (csrf, _) = secrets::new_secret();
    insert(node, old, level, &csrf).await
}

/// The first session of an anonymous visitor, made only once they do
/// something that needs state (a code entered, a sign-in begun). It keeps
/// the form token as its CSRF token, so pages already open stay usable.
pub async fn start_from_form(
    node: &NodeInner,
    form: &FormToken,
    level: SessionState,
) -> Result<(Session, HeaderValue), PageError> {
    insert(node, None, level, &form.0).await
}

async fn insert(
    node: &NodeInner,
    old: Option<&Session>,
    level: SessionState,
    csrf: &str,
) -> Result<(Session, HeaderValue), PageError> {
    let (raw, hash) = secrets::new_secret();
    let mut tx = node.db.begin().await?;
    if let Some(old) = old {
        pact_db::sessions::delete(&mut *tx, &old.id_hash).await?;
    }
    // A half-finished sign-in is no sign-in: it lives only as long as the
    // second factor may take, not a signed-in session's twelve hours.
    let lifetime = if level.pending_user_id.is_some() && level.user_id.is_none() {
        PENDING_LIFETIME
    } else {
        LIFETIME
    };
    let session =
        pact_db::sessions::insert(&mut *tx, &hash, csrf, &level, node.clock.now() + lifetime)
            .await?;
    tx.commit().await?;
    Ok((session, set_cookie(node, &raw)))
}

/// An anonymous visitor's form token: 256 random bits in a cookie that the
/// form repeats (a double-submit CSRF token). Showing a form to someone
/// without a session writes nothing to the database, so a flood of
/// cookie-less GETs costs us no rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormToken(String);

impl FormToken {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A stable key for per-visitor limits (the token's hash, not the token).
    pub fn limit_key(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secrets::hash(&self.0))
    }
}

/// The CSRF token for a form on this page: the session's when there is one,
/// otherwise the anonymous form token (with the `Set-Cookie` that creates it
/// when the browser has none yet).
pub fn form_csrf(node: &NodeInner, browser: &Browser) -> (String, Option<HeaderValue>) {
    if let Some(s) = &browser.session {
        return (s.csrf_token.clone(), None);
    }
    if let Some(t) = &browser.form_token {
        return (t.clone(), None);
    }
    let (raw, _) = secrets::new_secret();
    let set = cookie(node, form_cookie_name, &raw, LIFETIME.whole_seconds());
    (raw, Some(set))
}

/// The anonymous form token, if the browser has one and it matches what the
/// form (or the `X-CSRF-Token` header) repeats.
pub fn check_form_token(browser: &Browser, given: Option<&str>) -> Result<FormToken, PageError> {
    let expected = browser.form_token.as_deref().unwrap_or("");
    super::security::check_csrf(expected, given)?;
    Ok(FormToken(expected.to_owned()))
}

/// The state carried into a rotated session.
pub fn carry(s: &Session) -> SessionState {
    SessionState {
        brand_id: s.brand_id.clone(),
        user_id: s.user_id,
        external_sub: s.external_sub.clone(),
        pending_user_id: s.pending_user_id,
        mfa_at: s.mfa_at,
        device_authorization_id: s.device_authorization_id,
    }
}
