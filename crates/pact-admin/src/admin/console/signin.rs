//! Console sign-in: email and password, then a second factor: the
//! authenticator app, a passkey (admin/console/factors.rs) or a single-use
//! recovery code. An account with no factor sets up the app at its first
//! sign-in. No console page opens without both steps.
//!
//! * `GET/POST /admin/sign-in`
//! * `GET/POST /admin/second-factor` — a TOTP code (RFC 6238) or a recovery
//!   code; the page also offers the account's passkeys
//! * `GET/POST /admin/totp-setup` — first sign-in: scan, confirm a code
//! * `POST /admin/sign-out`
//!
//! Safety as on the customers' pages: Origin and CSRF checks on every POST,
//! the session id rotated at each step, per-address rate limit, lockout per
//! account (accounts/lockout.rs), the same answer for an unknown email and a
//! wrong password, every outcome in the audit log, no secret logged.

use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::admins::{Admin, AdminSession};
use pact_node::node::{Node, NodeInner};
use serde_json::json;
use time::OffsetDateTime;
use uuid::Uuid;

use super::audit_event;
use super::extract::CheckedForm;
use super::session::{self, Staff};
use crate::accounts::lockout::{self, FailureKeys};
use crate::accounts::sign_in::{self, PasswordStep};
use crate::accounts::totp;
use crate::state::AppState;
use crate::web::form::Fields;
use crate::web::login::{see_other, wait_message, with_headers};
use crate::web::session::{Browser, check_form_token, form_csrf};
use crate::web::{PageError, limits, render, security};

const BAD_CREDENTIALS: &str = "That email and password don't match a staff account.";

/// The lockout counters' namespace for staff: not a valid brand id, so staff
/// and customer counters never share a key.
const STAFF: &str = "(staff)";

#[derive(Template)]
#[template(path = "admin/sign_in.html")]
struct SignInPage<'a> {
    csrf: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "admin/second_factor.html")]
struct SecondFactorPage<'a> {
    csrf: &'a str,
    error: Option<&'a str>,
    has_totp: bool,
    /// The account has passkeys and this site is a WebAuthn relying party.
    passkeys: bool,
    recovery_codes: bool,
}

/// Which second factors the account has: (TOTP, passkeys, unused recovery codes).
async fn factors_of(node: &NodeInner, admin: &Admin) -> Result<(bool, i64, i64), PageError> {
    let passkeys = pact_db::admin_factors::count_passkeys(&node.db, admin.id).await?;
    let codes = pact_db::admin_factors::unused_recovery_codes(&node.db, admin.id).await?;
    Ok((admin.has_totp(), passkeys, codes))
}

/// The account can sign in with a factor it has: TOTP, or a passkey while
/// this site is a relying party. (Recovery codes are for a lost factor, not
/// a factor of their own: an account with only codes sets up the app.)
fn has_factor(state: &AppState, totp: bool, passkeys: i64) -> bool {
    totp || (passkeys > 0 && state.webauthn.is_some())
}

#[derive(Template)]
#[template(path = "admin/totp_setup.html")]
struct TotpSetupPage<'a> {
    csrf: &'a str,
    sealed: &'a str,
    qr_svg: &'a str,
    secret_text: &'a str,
    error: Option<&'a str>,
}

/// The sealing context of a console TOTP secret at rest.
pub fn stored_aad(admin: &Admin) -> Vec<u8> {
    pact_db::sealed::admin_totp_aad(admin.id)
}

/// …and in transit between the setup page and its POST (bound to the session).
fn transit_aad(admin: &Admin, s: &AdminSession) -> Vec<u8> {
    format!("pactd admin totp enrolment\n{}\n{}", admin.id, s.csrf_token).into_bytes()
}

pub async fn get_sign_in(State(node): State<Node>, browser: Browser) -> Response {
    let (csrf, set) = form_csrf(&node, &browser);
    let page = SignInPage {
        csrf: &csrf,
        email: "",
        error: None,
    };
    with_headers(render(&page, StatusCode::OK), set, None)
}

/// What the staff sign-in page posts, its form token included.
#[derive(Debug, serde::Deserialize)]
struct StaffSignInForm {
    csrf: Option<String>,
    email: Option<String>,
    password: Option<String>,
}

/// What the second-factor and authenticator set-up pages post (besides
/// their CSRF token): a code, or a recovery code, and on set-up the sealed
/// secret the page was shown.
#[derive(Debug, serde::Deserialize)]
struct CodeForm {
    code: Option<String>,
    recovery_code: Option<String>,
    sealed: Option<String>,
}

pub async fn post_sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    browser: Browser,
    staff: Staff,
    body: Bytes,
) -> Result<Response, PageError> {
    security::check_origin(&headers, &state.config.public_url)?;
    // Every field is optional text, so decoding refuses nothing: the token
    // is checked before any field is used.
    let form: StaffSignInForm = Fields::parse(&body).decode()?;
    let token = check_form_token(&browser, form.csrf.as_deref())?;
    let email = form.email.as_deref().unwrap_or("").trim().to_lowercase();
    let again = |error: &str, status: StatusCode, retry: Option<u64>| {
        let page = SignInPage {
            csrf: token.as_str(),
            email: &email,
            error: Some(error),
        };
        with_headers(render(&page, status), None, retry)
    };
    if let Err(secs) = limits::check(
        &state.page_limits.sign_in_per_ip,
        &staff.limit_key,
        state.clock.instant(),
    ) {
        let msg = wait_message("Too many sign-in attempts.", secs);
        return Ok(again(&msg, StatusCode::TOO_MANY_REQUESTS, Some(secs)));
    }
    // Everything below treats a known and an unknown email alike: the same
    // counters (accounts/lockout.rs, kept in the database so they hold
    // across nodes), the same argon2 work, the same answers.
    let now = state.clock.now();
    let keys = FailureKeys::new(STAFF, &email, &staff.limit_key);
    let locked = |secs: i64| {
        let secs = secs.unsigned_abs();
        let msg = wait_message("Too many failed sign-ins.", secs);
        again(&msg, StatusCode::TOO_MANY_REQUESTS, Some(secs))
    };
    // A disabled account answers exactly as an unknown email.
    let admin = if email.is_empty() || email.len() > 254 {
        None
    } else {
        pact_db::admins::find_by_email(&state.db, &email)
            .await?
            .filter(|a| a.disabled_at.is_none())
    };
    let hash_of = |a: &Admin| Some(a.password_hash.clone());
    let attempt = form.password.clone().unwrap_or_default();
    let step = sign_in::check_password(&state.db, &keys, admin, hash_of, attempt, now);
    let (admin, account_lock) = match step.await? {
        PasswordStep::AddressLocked(secs) => return Ok(locked(secs)),
        // A staff hash of older parameters is not rehashed here: staff
        // passwords are set only through `pactd admin`.
        PasswordStep::Right {
            account,
            account_locked,
            ..
        } => (account, account_locked),
        PasswordStep::Wrong { account_locked } => {
            audit_event(
                &state,
                "admin",
                &email,
                "admin.sign_in_failed",
                &staff.ip,
                json!({"step": "password"}),
            )
            .await?;
            return Ok(match account_locked {
                Some(secs) => locked(secs),
                None => again(BAD_CREDENTIALS, StatusCode::UNAUTHORIZED, None),
            });
        }
    };
    // While the email is locked (guessed at from many addresses), the right
    // password leads on only to an existing second factor.
    let (totp_on, passkeys, _) = factors_of(&state, &admin).await?;
    let enrolled = has_factor(&state, totp_on, passkeys);
    if let Some(secs) = account_lock
        && !enrolled
    {
        return Ok(locked(secs));
    }
    sign_in::passed(&state.db, &keys).await?;
    if let Some(secs) = lockout::locked_for(admin.locked_until, now) {
        // Second-factor failures lock the account itself.
        return Ok(locked(secs));
    }
    let cookie = session::start(&state, staff.session.as_ref(), admin.id, true, now).await?;
    let next = if enrolled {
        "/admin/second-factor"
    } else {
        "/admin/totp-setup"
    };
    Ok(see_other(next, Some(cookie)))
}

/// The half-signed-in admin of this session, or where to go instead.
pub(super) async fn pending(
    node: &NodeInner,
    staff: &Staff,
) -> Result<Result<(AdminSession, Admin), Response>, PageError> {
    let Some(s) = &staff.session else {
        return Ok(Err(see_other("/admin/sign-in", None)));
    };
    let Some(id) = s.pending_admin_id else {
        return Ok(Err(see_other("/admin", None)));
    };
    match pact_db::admins::find(&node.db, id).await? {
        Some(a) if a.disabled_at.is_none() => Ok(Ok((s.clone(), a))),
        _ => Ok(Err(see_other("/admin/sign-in", None))),
    }
}

pub async fn get_second_factor(
    State(state): State<AppState>,
    staff: Staff,
) -> Result<Response, PageError> {
    let (s, admin) = match pending(&state, &staff).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    let (totp_on, passkeys, codes) = factors_of(&state, &admin).await?;
    if !has_factor(&state, totp_on, passkeys) {
        return Ok(see_other("/admin/totp-setup", None));
    }
    let page = SecondFactorPage {
        csrf: &s.csrf_token,
        error: None,
        has_totp: totp_on,
        passkeys: passkeys > 0 && state.webauthn.is_some(),
        recovery_codes: codes > 0,
    };
    Ok(render(&page, StatusCode::OK))
}

pub async fn post_second_factor(
    State(state): State<AppState>,
    CheckedForm { staff, fields }: CheckedForm,
) -> Result<Response, PageError> {
    let form: CodeForm = fields.decode()?;
    let (s, admin) = match pending(&state, &staff).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    let (totp_on, passkeys, codes) = factors_of(&state, &admin).await?;
    let again = |error: &str, status: StatusCode, retry: Option<u64>| {
        let page = SecondFactorPage {
            csrf: &s.csrf_token,
            error: Some(error),
            has_totp: totp_on,
            passkeys: passkeys > 0 && state.webauthn.is_some(),
            recovery_codes: codes > 0,
        };
        with_headers(render(&page, status), None, retry)
    };
    let now = state.clock.now();
    // The lock is read, the code checked and a failure counted under the
    // account's row lock, so codes sent at once (to any node) are checked
    // one after another and a burst gets no more checks than the lock allows.
    let mut tx = state.db.begin().await?;
    let Some(locked) = pact_db::admins::lock(&mut tx, admin.id).await? else {
        return Ok(see_other("/admin/sign-in", None));
    };
    if let Some(secs) = lockout::locked_for(locked.locked_until, now) {
        let msg = wait_message(
            "This account is locked after failed sign-ins.",
            secs.unsigned_abs(),
        );
        return Ok(again(
            &msg,
            StatusCode::TOO_MANY_REQUESTS,
            Some(secs.unsigned_abs()),
        ));
    }
    // Codes of either kind are limited per account, on top of the lock.
    if let Err(secs) = limits::check(
        &state.page_limits.second_factor_per_user,
        &admin.id.to_string(),
        state.clock.instant(),
    ) {
        let msg = wait_message("Too many code attempts.", secs);
        return Ok(again(&msg, StatusCode::TOO_MANY_REQUESTS, Some(secs)));
    }
    let recovery = form.recovery_code.as_deref();
    let right = if let Some(typed) = recovery {
        let forms =
            crate::accounts::recovery::stored_forms(&state.config.master_key, admin.id, typed)
                .map_err(PageError::internal)?;
        pact_db::admin_factors::use_recovery_code(&mut *tx, admin.id, &forms, now).await?
    } else {
        let Some(sealed) = &locked.totp_secret_sealed else {
            return Ok(again(
                "This account has no authenticator app: use a passkey or a recovery code.",
                StatusCode::BAD_REQUEST,
                None,
            ));
        };
        let secret = state
            .config
            .master_key
            .open(sealed, &stored_aad(&locked))
            .map_err(PageError::internal)?;
        let step = totp::verify(
            &secret,
            form.code.as_deref().unwrap_or(""),
            now.unix_timestamp(),
        );
        match step {
            Some(step) => pact_db::admins::advance_totp_step(&mut *tx, admin.id, step).await?,
            None => false,
        }
    };
    if !right {
        count_failure(&mut tx, admin.id, now).await?;
    }
    tx.commit().await?;
    match (right, recovery) {
        (false, Some(_)) => {
            failure_audited(&state, &staff, &admin, "recovery code").await?;
            Ok(again(
                "That recovery code didn't work: it is wrong or was already used.",
                StatusCode::UNAUTHORIZED,
                None,
            ))
        }
        (false, None) => {
            failure_audited(&state, &staff, &admin, "second factor").await?;
            Ok(again(
                "That code didn't work. Check your phone's clock and try the next code.",
                StatusCode::UNAUTHORIZED,
                None,
            ))
        }
        (true, Some(_)) => recovery_signed_in(&state, &staff, &s, &admin, now).await,
        (true, None) => complete(&state, &staff, &s, &admin, now, "totp").await,
    }
}

/// A recovery code in place of the second factor was right (it was spent in
/// the statement that checked it; a wrong one counts towards the lock like a
/// wrong TOTP code): the audit log says one was used and how many are left,
/// never which.
async fn recovery_signed_in(
    state: &AppState,
    staff: &Staff,
    s: &AdminSession,
    admin: &Admin,
    now: OffsetDateTime,
) -> Result<Response, PageError> {
    let left = pact_db::admin_factors::unused_recovery_codes(&state.db, admin.id).await?;
    audit_event(
        state,
        "admin",
        &admin.email,
        "admin.recovery_code_used",
        &staff.ip,
        json!({"left": left}),
    )
    .await?;
    let cookie = sign_in(state, staff, s, admin, now, "recovery code").await?;
    // To the account page, which says how many codes are left: a code used
    // by someone else is how an admin learns the codes leaked.
    Ok(see_other(
        "/admin/account?done=recovery-code-used",
        Some(cookie),
    ))
}

/// Counts one failed second factor towards the account's own lock
/// (accounts/lockout.rs), in the row, not from a count read earlier: codes
/// sent at once must all count.
async fn count_failure(
    conn: &mut sqlx::PgConnection,
    admin: Uuid,
    now: OffsetDateTime,
) -> Result<(), PageError> {
    if let Some(failed) = pact_db::admins::count_failure(&mut *conn, admin).await?
        && let (_, Some(until)) = lockout::after_failure(failed.saturating_sub(1), now)
    {
        pact_db::admins::lock_until(&mut *conn, admin, until).await?;
    }
    Ok(())
}

/// Records a failed second factor as `admin.sign_in_failed` with the step.
async fn failure_audited(
    node: &NodeInner,
    staff: &Staff,
    admin: &Admin,
    step: &str,
) -> Result<(), PageError> {
    audit_event(
        node,
        "admin",
        &admin.email,
        "admin.sign_in_failed",
        &staff.ip,
        json!({ "step": step }),
    )
    .await
}

/// A second factor that did not work (a code, a recovery code, a passkey):
/// it counts towards the account's own lock (accounts/lockout.rs) and is
/// recorded as `admin.sign_in_failed` with the step.
pub(super) async fn second_factor_failed(
    node: &NodeInner,
    staff: &Staff,
    admin: &Admin,
    now: OffsetDateTime,
    step: &str,
) -> Result<(), PageError> {
    let mut conn = node.db.acquire().await?;
    count_failure(&mut conn, admin.id, now).await?;
    drop(conn);
    failure_audited(node, staff, admin, step).await
}

/// Both factors proven: a new session id, signed in; failures forgotten.
async fn complete(
    node: &NodeInner,
    staff: &Staff,
    s: &AdminSession,
    admin: &Admin,
    now: OffsetDateTime,
    factor: &str,
) -> Result<Response, PageError> {
    let cookie = sign_in(node, staff, s, admin, now, factor).await?;
    Ok(see_other("/admin", Some(cookie)))
}

/// Signs the pending session in (a new id, `mfa_at = now`), clears the
/// failure count, records `admin.sign_in` with the factor used. Returns the
/// new cookie.
pub(super) async fn sign_in(
    node: &NodeInner,
    staff: &Staff,
    s: &AdminSession,
    admin: &Admin,
    now: OffsetDateTime,
    factor: &str,
) -> Result<axum::http::HeaderValue, PageError> {
    pact_db::admins::clear_failures(&node.db, admin.id).await?;
    let cookie = session::start(node, Some(s), admin.id, false, now).await?;
    audit_event(
        node,
        "admin",
        &admin.email,
        "admin.sign_in",
        &staff.ip,
        json!({"factor": factor}),
    )
    .await?;
    Ok(cookie)
}

async fn render_setup(
    s: &AdminSession,
    admin: &Admin,
    secret: &[u8],
    sealed: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Result<Response, PageError> {
    let uri = totp::otpauth_uri("pactd admin", &admin.email, secret);
    let qr = crate::web::mfa::qr_svg(&uri)?;
    let b32 = totp::base32(secret);
    let text = b32
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let page = TotpSetupPage {
        csrf: &s.csrf_token,
        sealed,
        qr_svg: &qr,
        secret_text: &text,
        error,
    };
    Ok(render(&page, status))
}

pub async fn get_totp_setup(
    State(state): State<AppState>,
    staff: Staff,
) -> Result<Response, PageError> {
    let (s, admin) = match pending(&state, &staff).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    // Setting up the app completes the sign-in, so it is open only to an
    // account with no factor: with a passkey, the passkey must be used.
    let (totp_on, passkeys, _) = factors_of(&state, &admin).await?;
    if has_factor(&state, totp_on, passkeys) {
        return Ok(see_other("/admin/second-factor", None));
    }
    let secret = totp::new_secret().map_err(PageError::internal)?;
    let sealed = state
        .config
        .master_key
        .seal(&secret, &transit_aad(&admin, &s))
        .map_err(PageError::internal)?;
    render_setup(
        &s,
        &admin,
        &secret,
        &URL_SAFE_NO_PAD.encode(sealed),
        None,
        StatusCode::OK,
    )
    .await
}

pub async fn post_totp_setup(
    State(state): State<AppState>,
    CheckedForm { staff, fields }: CheckedForm,
) -> Result<Response, PageError> {
    let form: CodeForm = fields.decode()?;
    let (s, admin) = match pending(&state, &staff).await? {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    // Setting up the app completes the sign-in, so it is open only to an
    // account with no factor: with a passkey, the passkey must be used.
    let (totp_on, passkeys, _) = factors_of(&state, &admin).await?;
    if has_factor(&state, totp_on, passkeys) {
        return Ok(see_other("/admin/second-factor", None));
    }
    let expired = || PageError::BadRequest("This setup page has expired. Open it again.".into());
    let sealed_text = form.sealed.as_deref().ok_or_else(expired)?;
    let sealed = URL_SAFE_NO_PAD
        .decode(sealed_text.trim())
        .map_err(|_| expired())?;
    let secret = state
        .config
        .master_key
        .open(&sealed, &transit_aad(&admin, &s))
        .map_err(|_| expired())?;
    if let Err(secs) = limits::check(
        &state.page_limits.second_factor_per_user,
        &admin.id.to_string(),
        state.clock.instant(),
    ) {
        let msg = wait_message("Too many code attempts.", secs);
        return render_setup(
            &s,
            &admin,
            &secret,
            sealed_text,
            Some(&msg),
            StatusCode::TOO_MANY_REQUESTS,
        )
        .await;
    }
    let now = state.clock.now();
    let Some(step) = totp::verify(
        &secret,
        form.code.as_deref().unwrap_or(""),
        now.unix_timestamp(),
    ) else {
        return render_setup(
            &s,
            &admin,
            &secret,
            sealed_text,
            Some("That code didn't work. Check your phone's clock and try the next code."),
            StatusCode::BAD_REQUEST,
        )
        .await;
    };
    let stored = state
        .config
        .master_key
        .seal(&secret, &stored_aad(&admin))
        .map_err(PageError::internal)?;
    let mut tx = state.db.begin().await?;
    pact_db::admins::set_totp(&mut *tx, admin.id, Some(&stored)).await?;
    pact_db::admins::advance_totp_step(&mut *tx, admin.id, step).await?;
    tx.commit().await?;
    audit_event(
        &state,
        "admin",
        &admin.email,
        "admin.totp_enrolled",
        &staff.ip,
        json!({}),
    )
    .await?;
    complete(&state, &staff, &s, &admin, now, "totp").await
}

pub async fn post_sign_out(
    State(state): State<AppState>,
    CheckedForm { staff, .. }: CheckedForm,
) -> Result<Response, PageError> {
    let who = staff.signed_in(&state).await?;
    if let Some(s) = &staff.session {
        let mut tx = state.db.begin().await?;
        pact_db::admins::delete_session(&mut *tx, &s.id_hash).await?;
        if let Some(who) = &who {
            pact_db::audit::record(
                &mut *tx,
                &pact_db::audit::NewEntry {
                    actor_kind: "admin",
                    actor: &who.actor.name,
                    action: "admin.sign_out",
                    target: None,
                    brand_id: None,
                    detail: serde_json::json!({}),
                    client_addr: Some(&staff.ip),
                },
            )
            .await?;
        }
        tx.commit().await?;
    }
    Ok(see_other(
        "/admin/sign-in",
        Some(session::clear_cookie(&state)),
    ))
}
