//! WebAuthn passkeys (webauthn-rs): registration from the account page and
//! sign-in with a passkey instead of password + TOTP. Ceremony state is kept
//! in Postgres so any node can finish a ceremony another node started.
//!
//! The JSON endpoints are called by `static/webauthn.js`. They follow the
//! page rules: the Origin check first, then the session's CSRF token (sent
//! as `X-CSRF-Token`). A ceremony is single use, expires after five minutes
//! and can only be finished by the browser session that started it. The
//! WebAuthn user handle is `users.id`, so a discoverable sign-in names its
//! account; the credential must then be one of that account's passkeys.
//!
//! When the public URL's host is an IP address there is no relying party
//! (`state.webauthn` is `None`): the passkey UI is hidden and every endpoint
//! here answers 404.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use pact_db::ResultExt;
use pact_db::sessions::{Session, SessionState};
use pact_db::users::User;
use pact_node::node::NodeInner;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;
use webauthn_rs::Webauthn;
use webauthn_rs::prelude::{
    CredentialID, DiscoverableAuthentication, Passkey, PasskeyRegistration, PublicKeyCredential,
    RegisterPublicKeyCredential,
};

use super::extract::{NoFields, SessionForm};
use super::i18n;
use super::page::PageError;
use super::session::{self, Browser};
use super::{limits, security};
use crate::client_ip::ClientIp;
use crate::state::AppState;

/// How long a started ceremony can be finished.
pub const CEREMONY_LIFETIME: Duration = Duration::minutes(5);

/// Passkeys per account.
pub const MAX_PASSKEYS: usize = 20;

/// Longest passkey name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// The header the script sends the CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

const KIND_REGISTER: &str = "register";
const KIND_AUTHENTICATE: &str = "authenticate";

/// Whether adding or removing a passkey must first verify a second factor
/// again: the account has one (TOTP or a passkey) and none was verified in
/// this session within [`super::session::RECONFIRM_WINDOW`].
pub fn needs_reconfirm(
    has_totp: bool,
    passkeys: usize,
    mfa_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> bool {
    let has_factor = has_totp || passkeys > 0;
    has_factor && !super::session::mfa_at_is_recent(mfa_at, now)
}

/// What the passkey endpoints fail with: a JSON `{"error": message}` for the
/// page's script to show (the pages themselves answer with `PageError`).
#[derive(Debug)]
pub struct PasskeyError {
    status: StatusCode,
    message: String,
    retry_after_secs: Option<u64>,
}

impl PasskeyError {
    pub fn new(status: StatusCode, message: &str) -> Self {
        Self {
            status,
            message: message.to_owned(),
            retry_after_secs: None,
        }
    }

    fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, &i18n::t("pk-err-unavailable"))
    }

    pub fn bad_request(message: &str) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn forbidden(message: &str) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    /// Anything unexpected: logged, answered with a generic message.
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        PageError::internal(e).into()
    }
}

impl From<PageError> for PasskeyError {
    fn from(e: PageError) -> Self {
        match e {
            PageError::BadRequest(m) => Self::new(StatusCode::BAD_REQUEST, &m),
            PageError::Forbidden(m) => Self::new(StatusCode::FORBIDDEN, &m),
            PageError::NotFound(m) => Self::new(StatusCode::NOT_FOUND, &m),
            PageError::TooMany {
                retry_after_secs,
                message,
            } => Self {
                status: StatusCode::TOO_MANY_REQUESTS,
                message,
                retry_after_secs: Some(retry_after_secs.max(1)),
            },
            PageError::Unavailable => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: i18n::t("pk-err-db"),
                retry_after_secs: Some(crate::error::UNAVAILABLE_RETRY_SECS),
            },
            PageError::TimedOut => Self {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: i18n::t("err-timed-out"),
                retry_after_secs: Some(crate::error::UNAVAILABLE_RETRY_SECS),
            },
            PageError::Internal(cause) => {
                tracing::error!(error = %cause, "passkey request failed");
                Self::new(StatusCode::INTERNAL_SERVER_ERROR, &i18n::t("err-internal"))
            }
        }
    }
}

impl From<pact_db::Error> for PasskeyError {
    fn from(e: pact_db::Error) -> Self {
        PageError::from(e).into()
    }
}

impl IntoResponse for PasskeyError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(json!({ "error": self.message }))).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            res = crate::error::unavailable(res);
        }
        let h = res.headers_mut();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = self.retry_after_secs {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

/// A JSON answer that no cache keeps.
pub fn json_ok(body: Value) -> Response {
    let mut res = Json(body).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn relying_party_of(state: &AppState) -> Result<&Webauthn, PasskeyError> {
    state.webauthn.as_ref().ok_or_else(PasskeyError::not_found)
}

/// Origin, then a live session whose CSRF token the script sent.
fn check_request(
    node: &NodeInner,
    headers: &HeaderMap,
    browser: Result<Browser, PageError>,
) -> Result<Session, PasskeyError> {
    security::check_origin(headers, &node.config.public_url)?;
    let session = browser?
        .session
        .ok_or_else(|| PasskeyError::forbidden(&i18n::t("pk-err-session")))?;
    let given = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    security::check_csrf(&session.csrf_token, given)?;
    Ok(session)
}

/// The built-in account the session is signed in with, at its brand.
async fn account_of(node: &NodeInner, session: &Session) -> Result<User, PasskeyError> {
    let (Some(user_id), Some(brand)) = (session.user_id, session.brand_id.as_deref()) else {
        return Err(PasskeyError::forbidden(&i18n::t("pk-err-signed-out")));
    };
    match pact_db::users::find(&node.db, user_id).await? {
        Some(user) if user.brand_id == brand => Ok(user),
        _ => Err(PasskeyError::forbidden(&i18n::t("pk-err-signed-out"))),
    }
}

fn parse_passkey(stored: &pact_db::sessions::Credential) -> Option<Passkey> {
    parse_stored(&stored.id, &stored.passkey)
}

/// A stored passkey (webauthn-rs's serialisation), `None` when it does not
/// parse. Shared with the console's staff passkeys (admin/console/passkeys.rs).
pub fn parse_stored(id: &Uuid, passkey: &Value) -> Option<Passkey> {
    match serde_json::from_value(passkey.clone()) {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::error!(credential = %id, error = %e, "stored passkey does not parse");
            None
        }
    }
}

const RECONFIRM_MESSAGE: &str = "pk-err-reconfirm";

/// Whether this session may add a passkey to `user` now: the passkeys it has
/// when it may. Asked when the ceremony starts and again when it finishes, so
/// that what changed between (a factor removed or added in another tab, the
/// ten minutes run out) counts.
async fn may_add_passkey(
    node: &NodeInner,
    session: &Session,
    user: &User,
    now: OffsetDateTime,
) -> Result<Vec<pact_db::sessions::Credential>, PasskeyError> {
    let stored = pact_db::sessions::credentials_of(&node.db, user.id).await?;
    // A first factor is bound only by a recent sign-in (session.rs).
    if !user.has_totp() && stored.is_empty() && !super::session::signed_in_recently(session, now) {
        return Err(PasskeyError::forbidden(&i18n::t("mfa-err-sign-in-again")));
    }
    if needs_reconfirm(user.has_totp(), stored.len(), session.mfa_at, now) {
        return Err(PasskeyError::forbidden(&i18n::t(RECONFIRM_MESSAGE)));
    }
    if stored.len() >= MAX_PASSKEYS {
        return Err(PasskeyError::bad_request(&i18n::t("pk-err-too-many")));
    }
    Ok(stored)
}

/// `POST /passkeys/register/start` → the `CreationChallengeResponse` for
/// `navigator.credentials.create`, plus `ceremonyId`.
pub async fn register_start(
    State(state): State<AppState>,
    headers: HeaderMap,
    browser: Result<Browser, PageError>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party_of(&state)?;
    let session = check_request(&state, &headers, browser)?;
    let user = account_of(&state, &session).await?;
    let now = state.clock.now();
    let stored = may_add_passkey(&state, &session, &user, now).await?;
    let exclude = stored.iter().map(|c| c.credential_id.clone()).collect();
    let (body, registration) = start_registration(webauthn, user.id, &user.email, exclude)?;
    let body = keep_ceremony(
        &state,
        &session.id_hash,
        KIND_REGISTER,
        Some(user.id),
        &registration,
        body,
        now,
    )
    .await?;
    Ok(json_ok(body))
}

/// Keeps a started ceremony's state for the browser session that started it
/// (single use, for [`CEREMONY_LIFETIME`]) and gives the page its id as
/// `ceremonyId` beside the WebAuthn options. Shared with the console's staff
/// passkeys, whose kinds are their own.
pub async fn keep_ceremony(
    node: &NodeInner,
    session_hash: &[u8],
    kind: &str,
    user_id: Option<Uuid>,
    ceremony_state: &impl Serialize,
    mut options: Value,
    now: OffsetDateTime,
) -> Result<Value, PasskeyError> {
    let ceremony_state = serde_json::to_value(ceremony_state).map_err(PasskeyError::internal)?;
    let ceremony = Uuid::new_v4();
    pact_db::sessions::insert_ceremony(
        &node.db,
        ceremony,
        session_hash,
        kind,
        user_id,
        &ceremony_state,
        now + CEREMONY_LIFETIME,
    )
    .await?;
    options["ceremonyId"] = json!(ceremony);
    Ok(options)
}

/// Takes (deletes) a ceremony of this kind that the browser session started,
/// before anything is checked, and reads its state; `gone` when it expired,
/// was already used, or (with `owner`) was started for another account.
pub async fn take_ceremony<T: DeserializeOwned>(
    node: &NodeInner,
    id: Uuid,
    session_hash: &[u8],
    kind: &str,
    owner: Option<Uuid>,
    now: OffsetDateTime,
    gone: impl FnOnce() -> PasskeyError,
) -> Result<T, PasskeyError> {
    let ceremony = pact_db::sessions::take_ceremony(&node.db, id, session_hash, kind, now)
        .await?
        .filter(|c| owner.is_none_or(|o| c.user_id == Some(o)))
        .ok_or_else(gone)?;
    serde_json::from_value(ceremony.state).map_err(PasskeyError::internal)
}

/// Starts a passkey registration for the account whose WebAuthn user handle
/// is `handle`: the options for `navigator.credentials.create` (as JSON) and
/// the state that finishes it. Shared with the console's staff passkeys.
pub fn start_registration(
    webauthn: &Webauthn,
    handle: Uuid,
    account_name: &str,
    exclude: Vec<CredentialID>,
) -> Result<(Value, PasskeyRegistration), PasskeyError> {
    let (challenge, registration) = webauthn
        .start_passkey_registration(handle, account_name, account_name, Some(exclude))
        .map_err(PasskeyError::internal)?;
    let mut body = serde_json::to_value(&challenge).map_err(PasskeyError::internal)?;
    // Sign-in is discoverable (the authenticator names the account), so the
    // credential must be discoverable too. webauthn-rs asks for
    // `residentKey: "discouraged"`; verification does not depend on it.
    if let Some(selection) = body
        .get_mut("publicKey")
        .and_then(|p| p.get_mut("authenticatorSelection"))
        .and_then(Value::as_object_mut)
    {
        selection.insert("residentKey".into(), json!("required"));
        selection.insert("requireResidentKey".into(), json!(true));
    }
    Ok((body, registration))
}

/// Verifies the browser's answer to a registration (WebAuthn §7.1): the new
/// passkey and its serialisation to store.
pub fn finish_registration(
    webauthn: &Webauthn,
    credential: &RegisterPublicKeyCredential,
    registration: &PasskeyRegistration,
) -> Result<(Passkey, Value), PasskeyError> {
    let passkey = webauthn
        .finish_passkey_registration(credential, registration)
        .map_err(|e| {
            tracing::info!(error = %e, "passkey registration refused");
            PasskeyError::bad_request(&i18n::t("pk-err-verify"))
        })?;
    let stored = serde_json::to_value(&passkey).map_err(PasskeyError::internal)?;
    Ok((passkey, stored))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterFinish {
    pub ceremony_id: Uuid,
    #[serde(default)]
    pub name: Option<String>,
    pub credential: RegisterPublicKeyCredential,
}

/// A passkey's name as the person typed it: trimmed, "Passkey" when empty.
pub fn passkey_name(given: Option<&str>) -> Result<String, PasskeyError> {
    let name = given.map(str::trim).unwrap_or("");
    if name.is_empty() {
        return Ok("Passkey".to_owned());
    }
    // Shown on the account page: no control, invisible or direction-changing
    // character (`domain::hidden_chars`), as other shown text.
    if name.chars().count() > MAX_NAME_CHARS
        || crate::domain::hidden_chars::first_hidden(name).is_some()
    {
        return Err(PasskeyError::bad_request(&i18n::t("pk-err-name")));
    }
    Ok(name.to_owned())
}

/// `POST /passkeys/register/finish` ← `{ceremonyId, name, credential}`.
pub async fn register_finish(
    State(state): State<AppState>,
    headers: HeaderMap,
    browser: Result<Browser, PageError>,
    body: Result<Json<RegisterFinish>, JsonRejection>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party_of(&state)?;
    let session = check_request(&state, &headers, browser)?;
    let Json(body) = body.map_err(|_| PasskeyError::bad_request(&i18n::t("pk-err-answer")))?;
    let user = account_of(&state, &session).await?;
    let name = passkey_name(body.name.as_deref())?;
    let now = state.clock.now();
    let registration: PasskeyRegistration = take_ceremony(
        &state,
        body.ceremony_id,
        &session.id_hash,
        KIND_REGISTER,
        Some(user.id),
        now,
        || PasskeyError::bad_request(&i18n::t("pk-err-ceremony")),
    )
    .await?;
    may_add_passkey(&state, &session, &user, now).await?;
    let (passkey, stored) = finish_registration(webauthn, &body.credential, &registration)?;
    // The same authenticator registered twice: a credential id belongs to one account only
    // (WebAuthn §7.1, "Registering a New Credential").
    pact_db::sessions::insert_credential(&state.db, user.id, passkey.cred_id(), &stored, &name)
        .await
        .on_constraint("webauthn_credentials_credential_id_key", |_| {
            PasskeyError::new(StatusCode::CONFLICT, &i18n::t("pk-err-duplicate"))
        })?;
    tracing::info!(user = %user.id, "passkey added");
    Ok(json_ok(
        json!({ "ok": true, "redirect": "/account?done=passkey-added" }),
    ))
}

#[derive(Deserialize)]
pub struct LoginQuery {
    brand: Option<String>,
    next: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct LoginCeremony {
    brand: String,
    next: Option<String>,
    authentication: DiscoverableAuthentication,
}

/// The rate-limit key: the client's address, apart from the password sign-in's.
fn client_key(ip: &ClientIp) -> String {
    format!("passkey {}", ip.limit_key())
}

fn rate_limit(state: &AppState, key: &str) -> Result<(), PasskeyError> {
    limits::check(
        &state.page_limits.sign_in_per_ip,
        key,
        state.clock.instant(),
    )
    .map_err(|secs| {
        PageError::TooMany {
            retry_after_secs: secs,
            message: i18n::t("pk-err-too-many-attempts"),
        }
        .into()
    })
}

/// `POST /passkeys/login/start?brand=B&next=/path` → a discoverable
/// `RequestChallengeResponse` for `navigator.credentials.get`, plus
/// `ceremonyId`.
pub async fn login_start(
    State(state): State<AppState>,
    ip: ClientIp,
    headers: HeaderMap,
    browser: Result<Browser, PageError>,
    Query(query): Query<LoginQuery>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party_of(&state)?;
    security::check_origin(&headers, &state.config.public_url)?;
    let browser = browser?;
    let given = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    rate_limit(&state, &client_key(&ip))?;
    // An anonymous visitor's first session starts here, where a ceremony
    // needs somewhere to live; its CSRF token stays the page's form token.
    let (session, cookie) = match browser.session {
        Some(s) => {
            security::check_csrf(&s.csrf_token, given)?;
            (s, None)
        }
        None => {
            let token = session::check_form_token(&browser, given)?;
            let (s, c) = session::start_from_form(&state, &token, SessionState::default()).await?;
            (s, Some(c))
        }
    };
    let brand = query
        .brand
        .filter(|b| pact_db::brands::is_valid_brand_id(b))
        .ok_or_else(|| PasskeyError::bad_request(&i18n::t("pk-err-no-brand")))?;
    if pact_db::brands::find(&state.db, &brand).await?.is_none() {
        return Err(PasskeyError::new(
            StatusCode::NOT_FOUND,
            &i18n::t("pk-err-unknown-brand"),
        ));
    }
    let (mut challenge, authentication) = webauthn
        .start_discoverable_authentication()
        .map_err(PasskeyError::internal)?;
    // The page asks from a button (a modal request), not from autofill.
    challenge.mediation = None;
    let ceremony = LoginCeremony {
        brand,
        next: query.next.map(|n| security::safe_next(Some(&n))),
        authentication,
    };
    let options = serde_json::to_value(&challenge).map_err(PasskeyError::internal)?;
    let body = keep_ceremony(
        &state,
        &session.id_hash,
        KIND_AUTHENTICATE,
        None,
        &ceremony,
        options,
        state.clock.now(),
    )
    .await?;
    let mut res = json_ok(body);
    if let Some(c) = cookie {
        res.headers_mut().insert(header::SET_COOKIE, c);
    }
    Ok(res)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginFinish {
    pub ceremony_id: Uuid,
    pub credential: PublicKeyCredential,
}

const NOT_RECOGNISED: &str = "pk-err-unknown-passkey";

/// `POST /passkeys/login/finish` ← `{ceremonyId, credential}` →
/// `{"redirect": next}` with a new, signed-in session cookie.
pub async fn login_finish(
    State(state): State<AppState>,
    ip: ClientIp,
    headers: HeaderMap,
    browser: Result<Browser, PageError>,
    body: Result<Json<LoginFinish>, JsonRejection>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party_of(&state)?;
    let session = check_request(&state, &headers, browser)?;
    rate_limit(&state, &client_key(&ip))?;
    let Json(body) = body.map_err(|_| PasskeyError::bad_request(&i18n::t("pk-err-answer")))?;
    let now = state.clock.now();
    let ceremony: LoginCeremony = take_ceremony(
        &state,
        body.ceremony_id,
        &session.id_hash,
        KIND_AUTHENTICATE,
        None,
        now,
        || PasskeyError::bad_request(&i18n::t("pk-err-login-ceremony")),
    )
    .await?;
    let refused = || PasskeyError::new(StatusCode::UNAUTHORIZED, &i18n::t(NOT_RECOGNISED));
    let (user_id, credential_id) = webauthn
        .identify_discoverable_authentication(&body.credential)
        .map_err(|_| refused())?;
    let user = pact_db::users::find(&state.db, user_id)
        .await?
        .filter(|u| u.brand_id == ceremony.brand && !u.is_disabled())
        .ok_or_else(refused)?;
    let stored = pact_db::sessions::credentials_of(&state.db, user.id)
        .await?
        .into_iter()
        .find(|c| c.credential_id == credential_id)
        .ok_or_else(refused)?;
    let mut passkey = parse_passkey(&stored).ok_or_else(refused)?;
    let result = webauthn
        .finish_discoverable_authentication_v2(&body.credential, ceremony.authentication, &passkey)
        .map_err(|e| {
            tracing::info!(user = %user.id, error = %e, "passkey sign-in refused");
            refused()
        })?;
    // The counter (a clone shows as a counter that did not grow, which
    // webauthn-rs refuses) and the backup flags; also records last use.
    passkey.update_credential(&result);
    let updated = serde_json::to_value(&passkey).map_err(PasskeyError::internal)?;
    pact_db::sessions::update_credential(&state.db, &stored.credential_id, &updated).await?;
    let (_, cookie) = session::start(
        &state,
        Some(&session),
        SessionState {
            brand_id: Some(user.brand_id.clone()),
            user_id: Some(user.id),
            external_sub: None,
            pending_user_id: None,
            // A passkey verifies the person (user verification is required), so
            // it counts as the second factor too.
            mfa_at: Some(now),
            device_authorization_id: session.device_authorization_id,
        },
    )
    .await?;
    tracing::info!(user = %user.id, "signed in with a passkey");
    let mut res = json_ok(json!({ "redirect": security::safe_next(ceremony.next.as_deref()) }));
    res.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(res)
}

/// `POST /account/passkeys/{id}/delete` (a form on the account page).
pub async fn delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
    SessionForm { session, .. }: SessionForm<NoFields>,
) -> Result<Response, PageError> {
    if state.webauthn.is_none() {
        return Err(PageError::NotFound(i18n::t("pk-err-unavailable")));
    }
    let user = account_of(&state, &session)
        .await
        .map_err(|e| PageError::Forbidden(e.message))?;
    let Ok(id) = id.parse::<Uuid>() else {
        return Err(PageError::NotFound(i18n::t("pk-err-no-such")));
    };
    let stored = pact_db::sessions::credentials_of(&state.db, user.id).await?;
    if !stored.iter().any(|c| c.id == id) {
        return Err(PageError::NotFound(i18n::t("pk-err-no-such")));
    }
    let now = state.clock.now();
    if needs_reconfirm(user.has_totp(), stored.len(), session.mfa_at, now) {
        return Err(PageError::Forbidden(i18n::t(RECONFIRM_MESSAGE)));
    }
    if !pact_db::sessions::delete_credential(&state.db, user.id, id).await? {
        return Err(PageError::NotFound(i18n::t("pk-err-no-such")));
    }
    tracing::info!(user = %user.id, "passkey removed");
    Ok(Redirect::to("/account?done=passkey-removed").into_response())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests build rows at real times
mod tests {
    use super::*;

    #[test]
    fn step_up_is_needed_only_with_a_factor_and_no_recent_verification() {
        let now = OffsetDateTime::now_utc();
        assert!(!needs_reconfirm(false, 0, None, now));
        assert!(needs_reconfirm(true, 0, None, now));
        assert!(needs_reconfirm(false, 1, None, now));
        assert!(!needs_reconfirm(
            true,
            1,
            Some(now - Duration::minutes(5)),
            now
        ));
        assert!(needs_reconfirm(
            true,
            1,
            Some(now - Duration::minutes(11)),
            now
        ));
    }

    #[test]
    fn passkey_names_are_trimmed_and_bounded() {
        assert_eq!(passkey_name(None).ok().as_deref(), Some("Passkey"));
        assert_eq!(passkey_name(Some("  ")).ok().as_deref(), Some("Passkey"));
        assert_eq!(
            passkey_name(Some(" Laptop ")).ok().as_deref(),
            Some("Laptop")
        );
        assert!(passkey_name(Some(&"x".repeat(65))).is_err());
        assert!(passkey_name(Some("a\u{7}b")).is_err());
    }
}
