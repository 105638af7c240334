//! Browser sessions. The cookie holds 256 random bits; the database holds
//! only their SHA-256, so a database leak yields no usable session. A new id
//! is issued whenever the authentication state rises (sign-in, second factor,
//! brand assertion) — session fixation cannot carry over.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use pact_db::sessions::{Session, SessionState};
use time::{Duration, OffsetDateTime};

use super::page::PageError;
use crate::domain::secrets;
use crate::state::AppState;

/// Absolute session lifetime.
pub const LIFETIME: Duration = Duration::hours(12);
/// A half-finished sign-in (password accepted, second factor to come) lives briefly.
pub const PENDING_LIFETIME: Duration = Duration::minutes(15);
/// How recent a second factor must be for a step-up (consent to a
/// `requires_mfa` scope, changing second factors).
pub const STEP_UP_WINDOW: Duration = Duration::minutes(10);

/// A second factor was verified in this session within [`STEP_UP_WINDOW`]
/// (a minute of clock skew between nodes tolerated).
pub fn mfa_is_recent(session: &Session, now: OffsetDateTime) -> bool {
    mfa_at_is_recent(session.mfa_at, now)
}

pub fn mfa_at_is_recent(mfa_at: Option<OffsetDateTime>, now: OffsetDateTime) -> bool {
    mfa_at.is_some_and(|at| at <= now + Duration::minutes(1) && now - at <= STEP_UP_WINDOW)
}

/// What the request's cookie refers to, if anything live.
#[derive(Clone, Debug)]
pub struct Browser {
    pub session: Option<Session>,
}

/// `__Host-` binds the cookie to this exact origin, but requires `Secure`.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_session"
    } else {
        "pactd_session"
    }
}

pub fn is_secure(state: &AppState) -> bool {
    state.config.public_url.starts_with("https://")
}

fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
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
        let Some(raw) = cookie_value(&parts.headers, cookie_name(is_secure(state))) else {
            return Ok(Self { session: None });
        };
        if raw.len() != 43 {
            return Ok(Self { session: None });
        }
        let session =
            pact_db::sessions::find_live(&state.db, &secrets::hash(raw), OffsetDateTime::now_utc())
                .await?;
        Ok(Self { session })
    }
}

impl Browser {
    pub fn signed_in(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| s.user_id.is_some() || s.external_sub.is_some())
    }
}

/// A `Set-Cookie` value for a session id.
pub fn set_cookie(state: &AppState, raw_id: &str) -> HeaderValue {
    let secure = is_secure(state);
    let value = format!(
        "{}={raw_id}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
        cookie_name(secure),
        LIFETIME.whole_seconds(),
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The `Set-Cookie` that removes the session cookie.
pub fn clear_cookie(state: &AppState) -> HeaderValue {
    let secure = is_secure(state);
    let value = format!(
        "{}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        cookie_name(secure),
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Starts a new session with `state` (replacing `old` if given) and returns
/// it with the `Set-Cookie` header value. Used for a first visit and for
/// every rotation.
pub async fn start(
    app: &AppState,
    old: Option<&Session>,
    state: SessionState,
) -> Result<(Session, HeaderValue), PageError> {
    let (raw, hash) = secrets::new_secret();
    let (csrf, _) = secrets::new_secret();
    let mut tx = app.db.begin().await?;
    if let Some(old) = old {
        pact_db::sessions::delete(&mut *tx, &old.id_hash).await?;
    }
    let session = pact_db::sessions::insert(
        &mut *tx,
        &hash,
        &csrf,
        &state,
        OffsetDateTime::now_utc() + LIFETIME,
    )
    .await?;
    tx.commit().await?;
    Ok((session, set_cookie(app, &raw)))
}

/// The session, creating an anonymous one when there is none (forms need a
/// CSRF token before anyone signs in). The header is `Some` when a cookie
/// must be set.
pub async fn ensure(
    app: &AppState,
    browser: &Browser,
) -> Result<(Session, Option<HeaderValue>), PageError> {
    match &browser.session {
        Some(s) => Ok((s.clone(), None)),
        None => {
            let (s, cookie) = start(app, None, SessionState::default()).await?;
            Ok((s, Some(cookie)))
        }
    }
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
