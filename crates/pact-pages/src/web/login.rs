//! Built-in sign-in for brand customers (PACT §5.2, "pactd's built-in
//! accounts"): email + password, then a second factor when the account has
//! one (or the brand requires one), and sign-out.
//!
//! * `GET/POST /login?brand=B&next=/path`
//! * `GET/POST /login/second-factor?next=/path` — TOTP or a recovery code;
//!   also the reconfirmation ("confirm it's you") for an already signed-in session (consent sends people
//!   here when a scope `requires_mfa`).
//! * `POST /logout`
//!
//! Safety: every POST checks Origin and the CSRF token first; the session id
//! rotates whenever the authentication state rises; an unknown email and a
//! known one get the same page, status, argon2 work, database writes and
//! lockout (`accounts/lockout.rs`: counted per address and email, and per
//! email, whether or not an account has it, in the database so the counts
//! hold across nodes); sign-in is rate-limited per address. Showing the
//! sign-in page to an anonymous visitor writes nothing; the session is made
//! when the password is accepted. Passwords, codes and secrets are never
//! logged.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_db::brands::Brand;
use pact_db::ids::BrandId;
use pact_db::sessions::{Session, SessionState};
use pact_db::users::User;
use pact_node::node::{Node, NodeInner};
use serde::Deserialize;
use time::OffsetDateTime;

use super::extract::{NoFields, SessionForm, Visitor, VisitorForm};
use super::i18n;
use super::page::{PageError, render};
use super::session::{self, Browser};
use super::{limits, security};
use crate::accounts::lockout::{self, FailureKeys};
use crate::accounts::sign_in::{self, PasswordStep};
use crate::accounts::{password, recovery, totp};
use crate::client_ip::ClientIp;
use crate::state::AppState;

/// The one message for an unknown email and a wrong password.
const BAD_CREDENTIALS: &str = "login-err-credentials";

// ---------------------------------------------------------------------------
// Shared by the page modules
// ---------------------------------------------------------------------------

/// The brand a page is about: `?brand=` (or the form's `brand`), else the
/// brand of the device authorization this browser is deciding on, else the
/// brand the session is signed in (or half signed in) to.
pub async fn brand_for(
    node: &NodeInner,
    explicit: Option<&str>,
    session: Option<&Session>,
) -> Result<Brand, PageError> {
    // The page's own parameter is text from outside: parsed here.
    let mut id = explicit
        .map(|e| BrandId::parse(e).map_err(|_| unknown_brand()))
        .transpose()?;
    if id.is_none()
        && let Some(auth_id) = session.and_then(|s| s.device_authorization_id)
    {
        id = pact_db::device_authorizations::find(&node.db, auth_id)
            .await?
            .map(|a| a.brand_id);
    }
    if id.is_none() {
        id = session.and_then(|s| s.brand_id.clone());
    }
    let Some(id) = id else {
        return Err(PageError::BadRequest(i18n::t("login-err-which-service")));
    };
    let brand = pact_db::brands::find(&node.db, &id)
        .await?
        .ok_or_else(unknown_brand)?;
    // From here on, an error page is about this brand and carries its look.
    i18n::brand_known(&brand.name, crate::who::Look::of(&brand.settings));
    Ok(brand)
}

fn unknown_brand() -> PageError {
    PageError::NotFound(i18n::t("login-err-unknown-service"))
}

/// The brand's display name, or "pactd" when there is none.
pub async fn brand_name(node: &NodeInner, brand_id: Option<&BrandId>) -> Result<String, PageError> {
    Ok(brand_view(node, brand_id).await?.0)
}

/// The brand's display name and look ("pactd" and none when there is no
/// brand); error pages from here on carry them too.
pub async fn brand_view(
    node: &NodeInner,
    brand_id: Option<&BrandId>,
) -> Result<(String, crate::who::Look), PageError> {
    let Some(id) = brand_id else {
        return Ok(("pactd".to_owned(), crate::who::Look::none()));
    };
    Ok(match pact_db::brands::find(&node.db, id).await? {
        Some(b) => {
            let look = crate::who::Look::of(&b.settings);
            i18n::brand_known(&b.name, look.clone());
            (b.name, look)
        }
        None => ("pactd".to_owned(), crate::who::Look::none()),
    })
}

/// `mfa_required` in the brand's settings.
pub fn mfa_required(brand: &Brand) -> bool {
    brand
        .settings
        .get("mfa_required")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false)
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `/login?brand=B&next=…`.
pub fn login_path(brand_id: Option<&BrandId>, next: &str) -> String {
    match brand_id {
        Some(b) => format!("/login?brand={}&next={}", enc(b), enc(next)),
        None => format!("/login?next={}", enc(next)),
    }
}

/// `303 See Other` to the sign-in page of `brand_id`, back to one of our own
/// fixed paths after (`/account`, `/device/consent`: nothing to encode).
pub fn to_sign_in(brand_id: &BrandId, next: &'static str) -> Response {
    see_other(&format!("/login?brand={}&next={next}", enc(brand_id)), None)
}

/// `303 See Other` to a same-origin path, optionally setting the session cookie.
pub fn see_other(location: &str, cookie: Option<HeaderValue>) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(location) {
        h.insert(header::LOCATION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(c) = cookie {
        h.insert(header::SET_COOKIE, c);
    }
    res
}

/// Adds a `Set-Cookie` (when given) and a `Retry-After` (when given).
pub fn with_headers(
    mut res: Response,
    cookie: Option<HeaderValue>,
    retry_after: Option<u64>,
) -> Response {
    let h = res.headers_mut();
    if let Some(c) = cookie {
        h.insert(header::SET_COOKIE, c);
    }
    if let Some(secs) = retry_after {
        h.insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
    res
}

/// "Too many attempts. Please wait N minutes and try again." for a lock of
/// `secs` seconds (locks are minutes long: said in minutes, rounded up).
pub fn lock_message(secs: i64) -> String {
    let minutes = u64::try_from((secs + 59) / 60).unwrap_or(1).max(1);
    i18n::t2(
        "wait-minutes",
        "what",
        i18n::t("wait-too-many-attempts"),
        "n",
        minutes,
    )
}

/// "… Please wait N seconds and try again." for a rate limit: the same
/// sentence as a lock, so the two never read differently.
pub fn wait_message(what_key: &str, secs: u64) -> String {
    let secs = secs.max(1);
    let what = i18n::t(what_key);
    if secs < 120 {
        i18n::t2("wait-seconds", "what", what, "n", secs)
    } else {
        i18n::t2("wait-minutes", "what", what, "n", secs.div_ceil(60))
    }
}

/// Completes a sign-in with a built-in account: clears the failure count and
/// starts a new session (rotation) signed in to the user's brand, keeping the
/// device authorization this browser is deciding on.
pub async fn complete_sign_in(
    node: &NodeInner,
    old: &Session,
    user: &User,
    mfa_at: Option<OffsetDateTime>,
) -> Result<HeaderValue, PageError> {
    sign_in_as(node, Some(old), user, mfa_at).await
}

/// The sign-in itself: clears the account's failure counts (the person
/// proved everything asked of them) and rotates into a signed-in session.
async fn sign_in_as(
    node: &NodeInner,
    old: Option<&Session>,
    user: &User,
    mfa_at: Option<OffsetDateTime>,
) -> Result<HeaderValue, PageError> {
    if user.failed_logins != 0 || user.locked_until.is_some() {
        pact_db::users::clear_failures(&node.db, user.id).await?;
    }
    pact_db::sign_in_failures::clear(
        &node.db,
        &[lockout::account_key(&user.brand_id, &user.email)],
    )
    .await?;
    let (_, cookie) = session::start(
        node,
        old,
        SessionState {
            brand_id: Some(user.brand_id.clone()),
            user_id: Some(user.id),
            mfa_at,
            device_authorization_id: old.and_then(|s| s.device_authorization_id),
            ..SessionState::default()
        },
    )
    .await?;
    Ok(cookie)
}

/// Who a session belongs to, for the second-factor and enrolment pages.
#[derive(Debug)]
pub enum Who {
    /// Password accepted; a second factor (or its enrolment) is still needed.
    Pending(User),
    /// Signed in with a built-in account.
    SignedIn(User),
}

impl Who {
    pub fn user(&self) -> &User {
        match self {
            Self::Pending(u) | Self::SignedIn(u) => u,
        }
    }
}

/// Whether the account has a passkey this server can ask for (there is a
/// relying party: `state.webauthn`). Such an account has a second factor
/// even without an authenticator app: the second-factor page offers the
/// passkey, and enrolling an app first needs it.
pub async fn has_usable_passkey(state: &AppState, user: &User) -> Result<bool, PageError> {
    if state.webauthn.is_none() {
        return Ok(false);
    }
    let passkeys = pact_db::sessions::credentials_of(&state.db, user.id).await?;
    Ok(!passkeys.is_empty())
}

pub async fn who(node: &NodeInner, s: &Session) -> Result<Option<Who>, PageError> {
    let (id, pending) = match (s.user_id, s.pending_user_id) {
        (Some(id), _) => (id, false),
        (None, Some(id)) => (id, true),
        (None, None) => return Ok(None),
    };
    let Some(user) = pact_db::users::find(&node.db, id).await? else {
        return Ok(None);
    };
    if user.is_disabled() || s.brand_id.as_ref() != Some(&user.brand_id) {
        return Ok(None);
    }
    Ok(Some(if pending {
        Who::Pending(user)
    } else {
        Who::SignedIn(user)
    }))
}

/// Opens the user's sealed TOTP secret (aad: the user id).
pub fn totp_secret(node: &NodeInner, user: &User) -> Result<Option<Vec<u8>>, PageError> {
    let Some(sealed) = &user.totp_secret_sealed else {
        return Ok(None);
    };
    node.config
        .master_key
        .open(sealed, user.id.as_bytes())
        .map(Some)
        .map_err(PageError::internal)
}

// ---------------------------------------------------------------------------
// GET/POST /login
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    pub brand: Option<String>,
    pub next: Option<String>,
    /// Set by sign-out: shows "You are signed out."
    pub out: Option<String>,
}

#[derive(Template)]
#[template(path = "login.html")]
pub struct LoginPage<'a> {
    pub brand_name: String,
    pub signed_in: bool,
    pub brand_id: &'a BrandId,
    pub csrf: &'a str,
    pub next: &'a str,
    pub error: Option<&'a str>,
    pub notice: Option<String>,
    /// Passkeys can be offered (the public URL's host can be a WebAuthn RP id).
    pub passkeys: bool,
    /// "Forgot your password?" can be offered (mail is configured).
    pub forgot: bool,
    /// The brand's logo and accent.
    pub look: crate::who::Look,
    /// The agent whose request brought the person here, when the browser
    /// holds one for this brand (issue 30, item 9): who is asking is said
    /// before the password is typed, not only on the consent page after.
    pub agent_name: Option<String>,
}

/// The registered name of the agent whose device authorization this browser
/// is deciding on, when that request is for `brand_id`.
pub async fn asking_agent(
    node: &NodeInner,
    session: Option<&Session>,
    brand_id: &BrandId,
) -> Result<Option<String>, PageError> {
    let Some(id) = session.and_then(|s| s.device_authorization_id) else {
        return Ok(None);
    };
    let Some(auth) = pact_db::device_authorizations::find(&node.db, id).await? else {
        return Ok(None);
    };
    if auth.brand_id != brand_id {
        return Ok(None);
    }
    // Shown visibly, as on the consent page (names are operator-registered).
    Ok(pact_db::agents::find(&node.db, &auth.pa_issuer)
        .await?
        .map(|a| crate::domain::hidden_chars::visible(&a.name)))
}

pub async fn get_login(
    State(state): State<AppState>,
    Query(q): Query<LoginQuery>,
    browser: Browser,
) -> Result<Response, PageError> {
    let brand = brand_for(&state, q.brand.as_deref(), browser.session.as_ref()).await?;
    let next = security::safe_next(q.next.as_deref());
    let already = browser.session.as_ref().is_some_and(|s| {
        s.brand_id.as_ref() == Some(&brand.id) && (s.user_id.is_some() || s.external_sub.is_some())
    });
    if already {
        return Ok(see_other(&next, None));
    }
    let (csrf, cookie) = session::form_csrf(&state, &browser);
    let agent_name = asking_agent(&state, browser.session.as_ref(), &brand.id).await?;
    let page = LoginPage {
        agent_name,
        brand_name: brand.name.clone(),
        signed_in: browser.signed_in(),
        brand_id: &brand.id,
        csrf: &csrf,
        next: &next,
        error: None,
        notice: q.out.is_some().then(|| i18n::t("login-signed-out")),
        passkeys: state.webauthn.is_some(),
        forgot: state.mailer.is_some(),
        look: crate::who::Look::of(&brand.settings),
    };
    Ok(with_headers(render(&page, StatusCode::OK), cookie, None))
}

/// What the sign-in page posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct SignInForm {
    brand: Option<String>,
    next: Option<String>,
    email: Option<String>,
    password: Option<String>,
}

pub async fn post_login(
    State(state): State<AppState>,
    ip: ClientIp,
    VisitorForm {
        browser,
        visitor,
        form,
    }: VisitorForm<SignInForm>,
) -> Result<Response, PageError> {
    let old = visitor.session();
    let brand = brand_for(&state, form.brand.as_deref(), old).await?;
    let next = security::safe_next(form.next.as_deref());
    i18n::set_here(login_path(Some(&brand.id), &next));
    let agent_name = asking_agent(&state, old, &brand.id).await?;
    let page = |error: &str, status: StatusCode, retry: Option<u64>| {
        let p = LoginPage {
            agent_name: agent_name.clone(),
            brand_name: brand.name.clone(),
            signed_in: browser.signed_in(),
            brand_id: &brand.id,
            csrf: visitor.csrf(),
            next: &next,
            error: Some(error),
            notice: None,
            passkeys: state.webauthn.is_some(),
            forgot: state.mailer.is_some(),
            look: crate::who::Look::of(&brand.settings),
        };
        with_headers(render(&p, status), None, retry)
    };
    let locked = |secs: i64| {
        let retry = u64::try_from(secs).unwrap_or(60);
        page(
            &lock_message(secs),
            StatusCode::TOO_MANY_REQUESTS,
            Some(retry),
        )
    };

    let email = form
        .email
        .as_deref()
        .map(|e| e.trim().to_lowercase())
        .unwrap_or_default();
    let given = form.password.as_deref().unwrap_or("");
    if email.is_empty() || given.is_empty() {
        return Ok(page(
            &i18n::t("login-err-empty"),
            StatusCode::BAD_REQUEST,
            None,
        ));
    }

    if let Err(secs) = limits::check(
        &state.page_limits.sign_in_per_ip,
        &ip.limit_key(),
        state.clock.instant(),
    ) {
        let msg = wait_message("wait-too-many-sign-ins", secs);
        return Ok(page(&msg, StatusCode::TOO_MANY_REQUESTS, Some(secs)));
    }

    // Everything below treats a known and an unknown email alike: the same
    // counters, the same queries, the same argon2 work, the same answers.
    let now = state.clock.now();
    let keys = FailureKeys::new(&brand.id, &email, &ip.limit_key());
    // A disabled account answers exactly as an unknown email.
    let user = pact_db::users::find_by_email(&state.db, &brand.id, &email)
        .await?
        .filter(|u| !u.is_disabled());
    let hash_of = |u: &User| u.password_hash.clone();
    let step = sign_in::check_password(&state.db, &keys, user, hash_of, given.to_owned(), now);
    let (user, account_lock) = match step.await? {
        PasswordStep::AddressLocked(secs) => return Ok(locked(secs)),
        PasswordStep::Right {
            account,
            rehash,
            account_locked,
        } => {
            if rehash {
                rehash_password(&state, &account, given).await;
            }
            (account, account_locked)
        }
        PasswordStep::Wrong { account_locked } => {
            return Ok(match account_locked {
                Some(secs) => locked(secs),
                None => page(&i18n::t(BAD_CREDENTIALS), StatusCode::BAD_REQUEST, None),
            });
        }
    };
    // A passkey is a second factor as much as an authenticator app is (it
    // verifies the person): an account that has either is not signed in by
    // its password alone (PACT §5.2, password + MFA).
    let has_factor = user.has_totp() || has_usable_passkey(&state, &user).await?;
    if let Some(secs) = account_lock
        && !has_factor
    {
        // Someone has been guessing this email from many addresses. The
        // right password alone is not enough now; a second factor would be.
        return Ok(locked(secs));
    }
    sign_in::passed(&state.db, &keys).await?;

    if has_factor {
        // Failures are cleared only once the second factor is in, so a known
        // password does not buy unlimited second-factor guesses.
        let cookie = start_pending(&state, &visitor, &user).await?;
        return Ok(see_other(
            &format!("/login/second-factor?next={}", enc(&next)),
            Some(cookie),
        ));
    }
    if mfa_required(&brand) {
        let cookie = start_pending(&state, &visitor, &user).await?;
        return Ok(see_other(
            &format!("/account/totp?next={}", enc(&next)),
            Some(cookie),
        ));
    }
    let cookie = sign_in_as(&state, old, &user, None).await?;
    tracing::info!(brand = %brand.id, user = %user.id, "signed in with a password");
    Ok(see_other(&next, Some(cookie)))
}

/// Password accepted, second factor to come: a new session id carrying only
/// the pending user (and the device authorization being decided).
async fn start_pending(
    node: &NodeInner,
    visitor: &Visitor,
    user: &User,
) -> Result<HeaderValue, PageError> {
    let pending = |device_authorization_id| SessionState {
        brand_id: Some(user.brand_id.clone()),
        pending_user_id: Some(user.id),
        device_authorization_id,
        ..SessionState::default()
    };
    let (_, cookie) = match visitor {
        Visitor::Session(old) => {
            session::start(node, Some(&**old), pending(old.device_authorization_id)).await?
        }
        // A fresh CSRF token too: the form token was in the page.
        Visitor::Anonymous(_) => session::start(node, None, pending(None)).await?,
    };
    Ok(cookie)
}

/// Stores a hash with today's parameters; a failure here must not fail the sign-in.
async fn rehash_password(node: &NodeInner, user: &User, given: &str) {
    let pw = given.to_owned();
    match tokio::task::spawn_blocking(move || password::hash(&pw)).await {
        Ok(Ok(h)) => match pact_db::users::set_password_hash(&node.db, user.id, &h).await {
            Ok(()) => tracing::info!(user = %user.id, "password rehashed with current parameters"),
            Err(e) => {
                tracing::warn!(user = %user.id, error = %e, "storing the rehashed password failed")
            }
        },
        Ok(Err(e)) => tracing::warn!(user = %user.id, error = %e, "rehashing the password failed"),
        Err(e) => tracing::warn!(user = %user.id, error = %e, "rehashing the password failed"),
    }
}

// ---------------------------------------------------------------------------
// GET/POST /login/second-factor
// ---------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    pub next: Option<String>,
}

#[derive(Template)]
#[template(path = "second_factor.html")]
pub struct SecondFactorPage<'a> {
    pub brand_name: String,
    pub signed_in: bool,
    pub csrf: &'a str,
    pub next: &'a str,
    pub error: Option<&'a str>,
    /// The account has an authenticator app.
    pub has_totp: bool,
    /// The account has a passkey it may use instead (`passkey_signin.html`,
    /// which reads `passkeys`, `brand_id`, `next` and `csrf`). With neither,
    /// the page says to set up an app first.
    pub passkeys: bool,
    pub brand_id: String,
    /// Already signed in: this reconfirms the second factor ("confirm it's you"),
    /// not the scope step-up of PACT §5.5.
    pub reconfirm: bool,
    pub enrol_path: String,
    pub look: crate::who::Look,
}

/// Where a session that cannot use the second-factor page is sent.
fn not_for_second_factor(s: Option<&Session>, next: &str) -> Result<Response, PageError> {
    if s.is_some_and(|s| s.external_sub.is_some()) {
        return Err(PageError::BadRequest(i18n::t("mfa-err-external")));
    }
    let brand = s.and_then(|s| s.brand_id.as_ref());
    let back = format!("/login/second-factor?next={}", enc(next));
    Ok(see_other(&login_path(brand, &back), None))
}

pub async fn get_second_factor(
    State(state): State<AppState>,
    Query(q): Query<NextQuery>,
    browser: Browser,
) -> Result<Response, PageError> {
    let next = security::safe_next(q.next.as_deref());
    let Some(s) = &browser.session else {
        return not_for_second_factor(None, &next);
    };
    let Some(who) = who(&state, s).await? else {
        return not_for_second_factor(Some(s), &next);
    };
    let enrol_path = format!("/account/totp?next={}", enc(&next));
    let passkeys = has_usable_passkey(&state, who.user()).await?;
    if let Who::Pending(u) = &who
        && !u.has_totp()
        && !passkeys
    {
        return Ok(see_other(&enrol_path, None));
    }
    let (brand_name, look) = brand_view(&state, s.brand_id.as_ref()).await?;
    let page = SecondFactorPage {
        brand_name,
        look,
        signed_in: browser.signed_in(),
        csrf: &s.csrf_token,
        next: &next,
        error: None,
        has_totp: who.user().has_totp(),
        passkeys,
        brand_id: who.user().brand_id.to_string(),
        reconfirm: matches!(who, Who::SignedIn(_)),
        enrol_path,
    };
    Ok(render(&page, StatusCode::OK))
}

enum Checked {
    Ok,
    Wrong,
    Reused,
}

/// What the second-factor page posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct SecondFactorForm {
    next: Option<String>,
    code: Option<String>,
    recovery_code: Option<String>,
}

pub async fn post_second_factor(
    State(state): State<AppState>,
    SessionForm {
        browser,
        session: old,
        form,
    }: SessionForm<SecondFactorForm>,
) -> Result<Response, PageError> {
    let next = security::safe_next(form.next.as_deref());
    let Some(who) = who(&state, &old).await? else {
        return not_for_second_factor(Some(&old), &next);
    };
    let user = who.user();
    let enrol_path = format!("/account/totp?next={}", enc(&next));
    let passkeys = has_usable_passkey(&state, user).await?;
    if let Who::Pending(u) = &who
        && !u.has_totp()
    {
        // No code to check: the passkey is asked for on the page itself.
        if passkeys {
            let here = format!("/login/second-factor?next={}", enc(&next));
            return Ok(see_other(&here, None));
        }
        return Ok(see_other(&enrol_path, None));
    }
    let (name, look) = brand_view(&state, old.brand_id.as_ref()).await?;
    i18n::set_here(format!("/login/second-factor?next={}", enc(&next)));
    let page = |error: &str, status: StatusCode, retry: Option<u64>| {
        let p = SecondFactorPage {
            brand_name: name.clone(),
            look: look.clone(),
            signed_in: browser.signed_in(),
            csrf: &old.csrf_token,
            next: &next,
            error: Some(error),
            has_totp: user.has_totp(),
            passkeys,
            brand_id: user.brand_id.to_string(),
            reconfirm: matches!(who, Who::SignedIn(_)),
            enrol_path: enrol_path.clone(),
        };
        with_headers(render(&p, status), None, retry)
    };

    let code = form.code.as_deref();
    let recovery_code = form.recovery_code.as_deref();
    if code.is_none() && recovery_code.is_none() {
        return Ok(page(
            &i18n::t("mfa-err-empty"),
            StatusCode::BAD_REQUEST,
            None,
        ));
    }
    if let Err(secs) = limits::check(
        &state.page_limits.second_factor_per_user,
        &user.id.to_string(),
        state.clock.instant(),
    ) {
        let msg = wait_message("wait-too-many-codes", secs);
        return Ok(page(&msg, StatusCode::TOO_MANY_REQUESTS, Some(secs)));
    }
    let now = state.clock.now();
    // The lock is read, the code checked and a failure counted under the
    // account's row lock: codes sent at once are checked one after another,
    // each seeing the failures before it, so a burst (from any number of
    // nodes) gets no more checks than the lock allows (OWASP Authentication
    // Cheat Sheet, account lockout).
    let mut tx = state.db.begin().await?;
    let Some(locked) = pact_db::users::lock(&mut *tx, user.id).await? else {
        return not_for_second_factor(Some(&old), &next);
    };
    if let Some(secs) = lockout::locked_for(locked.locked_until, now) {
        let retry = u64::try_from(secs).unwrap_or(60);
        return Ok(page(
            &lock_message(secs),
            StatusCode::TOO_MANY_REQUESTS,
            Some(retry),
        ));
    }

    let checked = if let Some(code) = code {
        match totp_secret(&state, &locked)? {
            None => Checked::Wrong,
            Some(secret) => match totp::verify(&secret, code, now.unix_timestamp()) {
                None => Checked::Wrong,
                Some(step) => {
                    if pact_db::users::advance_totp_step(&mut *tx, user.id, step).await? {
                        Checked::Ok
                    } else {
                        Checked::Reused
                    }
                }
            },
        }
    } else {
        let forms = recovery::stored_forms(
            &state.config.master_key,
            user.id,
            recovery_code.unwrap_or(""),
        )
        .map_err(PageError::internal)?;
        if pact_db::users::use_recovery_code(&mut *tx, user.id, &forms).await? {
            tracing::info!(user = %user.id, "a recovery code was used");
            Checked::Ok
        } else {
            Checked::Wrong
        }
    };

    if !matches!(checked, Checked::Ok) {
        let (failed, until) = lockout::after_failure(locked.failed_logins, now);
        pact_db::users::record_failure(&mut *tx, user.id, failed, until).await?;
    }
    tx.commit().await?;
    match checked {
        Checked::Ok => {}
        Checked::Wrong => {
            return Ok(page(
                &i18n::t("mfa-err-wrong"),
                StatusCode::BAD_REQUEST,
                None,
            ));
        }
        Checked::Reused => {
            return Ok(page(
                &i18n::t("mfa-err-replayed"),
                StatusCode::BAD_REQUEST,
                None,
            ));
        }
    }

    let cookie = match &who {
        Who::Pending(u) => {
            let c = complete_sign_in(&state, &old, u, Some(now)).await?;
            tracing::info!(user = %u.id, "signed in with a password and a second factor");
            c
        }
        Who::SignedIn(u) => {
            if u.failed_logins != 0 || u.locked_until.is_some() {
                pact_db::users::clear_failures(&state.db, u.id).await?;
            }
            let mut carried = session::carry(&old);
            carried.mfa_at = Some(now);
            let (_, c) = session::start(&state, Some(&old), carried).await?;
            c
        }
    };
    if recovery_code.is_some() {
        // Say so: a recovery code used by someone else is how a person
        // learns their codes leaked, and they need to know how many are left.
        let left = pact_db::users::unused_recovery_codes(&state.db, who.user().id).await?;
        let (brand_name, look) = brand_view(&state, Some(&who.user().brand_id)).await?;
        let page = RecoveryUsedPage {
            brand_name,
            look,
            signed_in: true,
            left,
            next: &next,
        };
        return Ok(with_headers(
            render(&page, StatusCode::OK),
            Some(cookie),
            None,
        ));
    }
    Ok(see_other(&next, Some(cookie)))
}

#[derive(Template)]
#[template(path = "recovery_used.html")]
struct RecoveryUsedPage<'a> {
    brand_name: String,
    signed_in: bool,
    left: i64,
    next: &'a str,
    look: crate::who::Look,
}

// ---------------------------------------------------------------------------
// POST /logout
// ---------------------------------------------------------------------------

pub async fn post_logout(
    State(node): State<Node>,
    SessionForm { session: old, .. }: SessionForm<NoFields>,
) -> Result<Response, PageError> {
    let brand = old.brand_id.clone();
    // The old id is deleted; the browser gets a fresh anonymous session.
    let (_, cookie) = session::start(&node, Some(&old), SessionState::default()).await?;
    let to = match &brand {
        Some(b) => format!("/login?brand={}&out=1", enc(b)),
        None => "/device".to_owned(),
    };
    Ok(see_other(&to, Some(cookie)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_messages_round_up_to_minutes() {
        let says = |m: &str| format!("Too many attempts. Please wait {m} and try again.");
        assert_eq!(lock_message(1), says("1 minute"));
        assert_eq!(lock_message(60), says("1 minute"));
        assert_eq!(lock_message(61), says("2 minutes"));
        assert_eq!(lock_message(15 * 60), says("15 minutes"));
        // A rate limit says it the same way.
        assert_eq!(
            wait_message("wait-too-many-attempts", 5),
            "Too many attempts. Please wait 5 seconds and try again."
        );
        assert_eq!(
            wait_message("wait-too-many-attempts", 600),
            says("10 minutes")
        );
    }

    #[test]
    fn login_paths_encode_their_values() {
        assert_eq!(
            login_path(Some(&BrandId::parse("demo").unwrap()), "/a?b=c&d"),
            "/login?brand=demo&next=%2Fa%3Fb%3Dc%26d"
        );
        assert_eq!(login_path(None, "/x"), "/login?next=%2Fx");
    }
}
