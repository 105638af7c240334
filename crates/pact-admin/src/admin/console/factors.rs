//! Staff second factors beyond TOTP: passkeys (WebAuthn, through the same
//! ceremony code as the customers' passkeys in web/passkeys.rs) and
//! single-use recovery codes (accounts/recovery.rs).
//!
//! * `GET  /admin/account` — the signed-in admin's own factors
//! * `POST /admin/passkeys/register/start`, `…/finish` — add a passkey (JSON,
//!   called by static/webauthn.js)
//! * `POST /admin/passkeys/{id}/delete` — remove one (a form)
//! * `POST /admin/passkeys/login/start`, `…/finish` — the second sign-in
//!   step with a passkey instead of the authenticator app (JSON)
//! * `POST /admin/recovery-codes` — a new set, shown once (a form)
//!
//! Every factor belongs to the account of the session that adds it: no
//! request names an account, so no role (an owner included) can add a
//! factor to someone else's account. Adding or removing a factor, or making
//! new codes, needs a second factor verified within the last ten minutes
//! (the session's `mfa_at`), so a session left open does not let someone
//! plant their own passkey. Ceremonies are single use, expire after five
//! minutes and are bound to the console session that started them; their
//! kinds (`admin_register`, `admin_authenticate`) are not the customers'.
//! Every change is in the audit log; no secret, code or key material is.

use askama::Template;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use pact_db::ResultExt;
use pact_db::admins::{Admin, AdminSession};
use pact_node::node::{Node, NodeInner};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;
use webauthn_rs::Webauthn;
use webauthn_rs::prelude::{PasskeyAuthentication, PasskeyRegistration};

use super::extract::{StaffForm, Viewer};
use super::session::{SignedIn, Staff};
use super::signin::{pending, second_factor_failed, sign_in};
use crate::accounts::{lockout, recovery};
use crate::state::AppState;
use crate::web::login::{see_other, wait_message};
use crate::web::passkeys::{
    self, CSRF_HEADER, LoginFinish, MAX_PASSKEYS, PasskeyError, RegisterFinish, json_ok,
};
use crate::web::{PageError, limits, render, security};

const KIND_REGISTER: &str = "admin_register";
const KIND_AUTHENTICATE: &str = "admin_authenticate";

const STEP_UP: &str = "To change your second factors, first confirm it's you: sign out and sign in again (within the last ten minutes).";

fn relying_party(state: &AppState) -> Result<&Webauthn, PasskeyError> {
    state.webauthn.as_ref().ok_or_else(|| {
        PasskeyError::new(
            StatusCode::NOT_FOUND,
            "Passkeys are not available on this site.",
        )
    })
}

/// The Origin check, then the session's CSRF token in `X-CSRF-Token` (the
/// JSON endpoints' form of the page rules, web/security.rs).
fn check_json_request<'s>(
    node: &NodeInner,
    headers: &HeaderMap,
    staff: &'s Staff,
) -> Result<&'s AdminSession, PasskeyError> {
    security::check_origin(headers, &node.config.public_url)?;
    let session = staff.session.as_ref().ok_or_else(|| {
        PasskeyError::forbidden("Your session has ended. Reload the page and sign in again.")
    })?;
    let given = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    security::check_csrf(&session.csrf_token, given)?;
    Ok(session)
}

/// The change's audit entry, written in the change's own transaction: a
/// change is never made without its entry (docs/admin.md).
async fn record(
    db: impl sqlx::PgExecutor<'_>,
    who: &SignedIn,
    ip: &str,
    action: &str,
    detail: Value,
) -> Result<(), PageError> {
    pact_db::audit::record(
        db,
        &pact_db::audit::NewEntry {
            actor_kind: "admin",
            actor: &who.actor.name,
            action,
            target: Some(&who.admin.email),
            brand_id: None,
            detail,
            client_addr: Some(ip),
        },
    )
    .await?;
    Ok(())
}

/// Whether this session verified a second factor recently enough to change
/// the account's factors (the customers' rule, web/passkeys.rs).
async fn needs_reconfirm(
    node: &NodeInner,
    who: &SignedIn,
    now: OffsetDateTime,
) -> Result<bool, PageError> {
    let count = pact_db::admin_factors::count_passkeys(&node.db, who.admin.id).await?;
    Ok(passkeys::needs_reconfirm(
        who.admin.has_totp(),
        usize::try_from(count).unwrap_or(usize::MAX),
        who.session.mfa_at,
        now,
    ))
}

// --- the account page ---------------------------------------------------------

pub struct PasskeyLine {
    pub id: String,
    pub name: String,
    pub created: String,
    pub last_used: String,
}

#[derive(Template)]
#[template(path = "admin/account.html")]
struct AccountPage {
    nav: super::pages::Nav,
    has_totp: bool,
    passkeys_enabled: bool,
    passkeys: Vec<PasskeyLine>,
    reconfirm: bool,
    codes_left: i64,
    done: Option<&'static str>,
}

#[derive(Deserialize)]
pub struct DoneQuery {
    done: Option<String>,
}

pub async fn account(
    State(state): State<AppState>,
    Viewer { who, .. }: Viewer,
    Query(q): Query<DoneQuery>,
) -> Result<Response, PageError> {
    let now = state.clock.now();
    let stored = pact_db::admin_factors::passkeys_of(&state.db, who.admin.id).await?;
    let codes_left = pact_db::admin_factors::unused_recovery_codes(&state.db, who.admin.id).await?;
    let done = match q.done.as_deref() {
        Some("passkey-added") => Some("Passkey added."),
        Some("passkey-removed") => Some("Passkey removed."),
        Some("recovery-code-used") => {
            Some("You signed in with a recovery code. It cannot be used again.")
        }
        _ => None,
    };
    let page = AccountPage {
        nav: super::pages::nav(&who),
        has_totp: who.admin.has_totp(),
        passkeys_enabled: state.webauthn.is_some(),
        passkeys: stored
            .iter()
            .map(|p| PasskeyLine {
                id: p.id.to_string(),
                name: p.name.clone(),
                created: super::pages::when(p.created_at),
                last_used: p
                    .last_used_at
                    .map_or_else(|| "never".to_owned(), super::pages::when),
            })
            .collect(),
        reconfirm: needs_reconfirm(&state, &who, now).await?,
        codes_left,
        done,
    };
    Ok(render(&page, StatusCode::OK))
}

// --- adding and removing a passkey ------------------------------------------

#[derive(Serialize, Deserialize)]
struct RegisterCeremony {
    admin: Uuid,
    registration: PasskeyRegistration,
}

/// The signed-in admin of a JSON request.
async fn signed_in_json(state: &AppState, staff: &Staff) -> Result<SignedIn, PasskeyError> {
    staff
        .signed_in(state)
        .await?
        .ok_or_else(|| PasskeyError::forbidden("Sign in to the console first."))
}

pub async fn register_start(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party(&state)?;
    let session = check_json_request(&state, &headers, &staff)?;
    let who = signed_in_json(&state, &staff).await?;
    let now = state.clock.now();
    if needs_reconfirm(&state, &who, now).await? {
        return Err(PasskeyError::forbidden(STEP_UP));
    }
    let stored = pact_db::admin_factors::passkeys_of(&state.db, who.admin.id).await?;
    if stored.len() >= MAX_PASSKEYS {
        return Err(PasskeyError::bad_request(
            "You have as many passkeys as an account can have. Remove one first.",
        ));
    }
    let exclude = stored.iter().map(|c| c.credential_id.clone()).collect();
    // The WebAuthn user handle is the staff account's id.
    let (body, registration) =
        passkeys::start_registration(webauthn, who.admin.id, &who.admin.email, exclude)?;
    let ceremony = RegisterCeremony {
        admin: who.admin.id,
        registration,
    };
    let body = passkeys::keep_ceremony(
        &state,
        &session.id_hash,
        KIND_REGISTER,
        None,
        &ceremony,
        body,
        now,
    )
    .await?;
    Ok(json_ok(body))
}

pub async fn register_finish(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    body: Result<Json<RegisterFinish>, JsonRejection>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party(&state)?;
    let session = check_json_request(&state, &headers, &staff)?;
    let who = signed_in_json(&state, &staff).await?;
    let Json(body) =
        body.map_err(|_| PasskeyError::bad_request("The passkey answer was not understood."))?;
    let name = passkeys::passkey_name(body.name.as_deref())?;
    let now = state.clock.now();
    if needs_reconfirm(&state, &who, now).await? {
        return Err(PasskeyError::forbidden(STEP_UP));
    }
    let expired = || {
        PasskeyError::bad_request(
            "This passkey request has expired or was already used. Please try again.",
        )
    };
    let ceremony: RegisterCeremony = passkeys::take_ceremony(
        &state,
        body.ceremony_id,
        &session.id_hash,
        KIND_REGISTER,
        None,
        now,
        expired,
    )
    .await?;
    if ceremony.admin != who.admin.id {
        return Err(expired());
    }
    let (passkey, stored) =
        passkeys::finish_registration(webauthn, &body.credential, &ceremony.registration)?;
    let mut tx = state.db.begin().await.map_err(pact_db::Error::from)?;
    let row = pact_db::admin_factors::insert_passkey(
        &mut *tx,
        who.admin.id,
        passkey.cred_id(),
        &stored,
        &name,
    )
    .await
    .on_constraint("admin_passkeys_credential_id_key", |_| {
        PasskeyError::new(StatusCode::CONFLICT, "This passkey is already registered.")
    })?;
    record(
        &mut *tx,
        &who,
        &staff.ip,
        "admin.passkey_add",
        json!({"passkey": row.id, "name": name}),
    )
    .await?;
    tx.commit().await.map_err(pact_db::Error::from)?;
    Ok(json_ok(
        json!({ "ok": true, "redirect": "/admin/account?done=passkey-added" }),
    ))
}

pub async fn delete_passkey(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm { staff, who, .. }: StaffForm,
) -> Result<Response, PageError> {
    let none = || PageError::NotFound("You have no such passkey.".into());
    let id = id.parse::<Uuid>().map_err(|_| none())?;
    let stored = pact_db::admin_factors::passkeys_of(&node.db, who.admin.id).await?;
    if !stored.iter().any(|p| p.id == id) {
        return Err(none());
    }
    let now = node.clock.now();
    if needs_reconfirm(&node, &who, now).await? {
        return Err(PageError::Forbidden(STEP_UP.into()));
    }
    // The console needs a second factor: the last one is not removed. The
    // account's row is locked and its factors read again under the lock, so
    // two removals at once cannot each see the other passkey and leave none.
    let mut tx = node.db.begin().await?;
    let admin = pact_db::admins::lock(&mut tx, who.admin.id)
        .await?
        .ok_or_else(none)?;
    let left = pact_db::admin_factors::count_passkeys(&mut *tx, admin.id).await?;
    if !admin.has_totp() && left <= 1 {
        return Err(PageError::BadRequest(
            "This is your only second factor. Add another passkey first.".into(),
        ));
    }
    let Some(name) = pact_db::admin_factors::delete_passkey(&mut *tx, admin.id, id).await? else {
        return Err(none());
    };
    record(
        &mut *tx,
        &who,
        &staff.ip,
        "admin.passkey_remove",
        json!({"passkey": id, "name": name}),
    )
    .await?;
    tx.commit().await?;
    Ok(see_other("/admin/account?done=passkey-removed", None))
}

// --- recovery codes -------------------------------------------------------------

#[derive(Template)]
#[template(path = "admin/recovery_codes.html")]
struct RecoveryCodesPage<'a> {
    nav: super::pages::Nav,
    codes: &'a [String],
}

/// `POST /admin/recovery-codes`: a new set replaces the old one (which
/// stops working), shown on this one response and stored only as hashes.
pub async fn new_recovery_codes(
    State(node): State<Node>,
    StaffForm { staff, who, .. }: StaffForm,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    if needs_reconfirm(&node, &who, now).await? {
        return Err(PageError::Forbidden(STEP_UP.into()));
    }
    let codes = recovery::generate();
    let hashes = recovery::hash_all(&node.config.master_key, who.admin.id, &codes)
        .map_err(PageError::internal)?;
    let mut tx = node.db.begin().await?;
    pact_db::admin_factors::replace_recovery_codes(&mut tx, who.admin.id, &hashes).await?;
    record(
        &mut *tx,
        &who,
        &staff.ip,
        "admin.recovery_codes_new",
        json!({"count": codes.len()}),
    )
    .await?;
    tx.commit().await?;
    let page = RecoveryCodesPage {
        nav: super::pages::nav(&who),
        codes: &codes,
    };
    let mut res = render(&page, StatusCode::OK);
    // Shown once: no cache (nor the back button's) keeps them.
    res.headers_mut().insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    Ok(res)
}

// --- signing in with a passkey ----------------------------------------------------

#[derive(Serialize, Deserialize)]
struct LoginCeremony {
    admin: Uuid,
    authentication: PasskeyAuthentication,
}

/// The half-signed-in admin (password accepted) of a JSON request, not locked.
async fn pending_json(
    state: &AppState,
    staff: &Staff,
    now: OffsetDateTime,
) -> Result<(AdminSession, Admin), PasskeyError> {
    let (s, admin) = pending(state, staff)
        .await?
        .map_err(|_| PasskeyError::forbidden("Your sign-in has expired. Start again."))?;
    if let Some(secs) = lockout::locked_for(admin.locked_until, now) {
        return Err(PageError::TooMany {
            retry_after_secs: secs.unsigned_abs(),
            message: wait_message(
                "This account is locked after failed sign-ins.",
                secs.unsigned_abs(),
            ),
        }
        .into());
    }
    if let Err(secs) = limits::check(
        &state.page_limits.second_factor_per_user,
        &admin.id.to_string(),
        state.clock.instant(),
    ) {
        return Err(PageError::TooMany {
            retry_after_secs: secs,
            message: wait_message("Too many attempts.", secs),
        }
        .into());
    }
    Ok((s, admin))
}

/// `POST /admin/passkeys/login/start`: a challenge that only the account's
/// own passkeys can answer (`allowCredentials` lists them), so a passkey of
/// another staff member or of a customer is refused by the browser already
/// and by the server in any case.
pub async fn login_start(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party(&state)?;
    let session = check_json_request(&state, &headers, &staff)?;
    let now = state.clock.now();
    let (_, admin) = pending_json(&state, &staff, now).await?;
    let stored = pact_db::admin_factors::passkeys_of(&state.db, admin.id).await?;
    let keys: Vec<_> = stored
        .iter()
        .filter_map(|p| passkeys::parse_stored(&p.id, &p.passkey))
        .collect();
    if keys.is_empty() {
        return Err(PasskeyError::bad_request("This account has no passkey."));
    }
    let (challenge, authentication) = webauthn
        .start_passkey_authentication(&keys)
        .map_err(PasskeyError::internal)?;
    let ceremony = LoginCeremony {
        admin: admin.id,
        authentication,
    };
    let options = serde_json::to_value(&challenge).map_err(PasskeyError::internal)?;
    let body = passkeys::keep_ceremony(
        &state,
        &session.id_hash,
        KIND_AUTHENTICATE,
        None,
        &ceremony,
        options,
        now,
    )
    .await?;
    Ok(json_ok(body))
}

/// `POST /admin/passkeys/login/finish`: the assertion verified (WebAuthn
/// §7.2, user verification required), the pending session becomes signed in
/// as with a TOTP code. A refused assertion counts as a failed sign-in.
pub async fn login_finish(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    body: Result<Json<LoginFinish>, JsonRejection>,
) -> Result<Response, PasskeyError> {
    let webauthn = relying_party(&state)?;
    let session = check_json_request(&state, &headers, &staff)?;
    let now = state.clock.now();
    let (s, admin) = pending_json(&state, &staff, now).await?;
    let Json(body) =
        body.map_err(|_| PasskeyError::bad_request("The passkey answer was not understood."))?;
    let ceremony: LoginCeremony = passkeys::take_ceremony(
        &state,
        body.ceremony_id,
        &session.id_hash,
        KIND_AUTHENTICATE,
        None,
        now,
        || {
            PasskeyError::bad_request(
                "This sign-in request has expired or was already used. Please try again.",
            )
        },
    )
    .await?;
    let verified = if ceremony.admin == admin.id {
        webauthn
            .finish_passkey_authentication(&body.credential, &ceremony.authentication)
            .ok()
    } else {
        None
    };
    let stored = pact_db::admin_factors::passkeys_of(&state.db, admin.id).await?;
    let found = verified.and_then(|result| {
        stored
            .iter()
            .find(|p| p.credential_id.as_slice() == result.cred_id().as_slice())
            .and_then(|p| Some((p, passkeys::parse_stored(&p.id, &p.passkey)?, result)))
    });
    let Some((row, mut passkey, result)) = found else {
        second_factor_failed(&state, &staff, &admin, now, "passkey").await?;
        return Err(PasskeyError::new(
            StatusCode::UNAUTHORIZED,
            "This passkey was not recognised. Use another passkey or your authenticator app.",
        ));
    };
    // The signature counter (a cloned authenticator shows as a counter that
    // did not grow, which webauthn-rs refuses) and the backup flags.
    passkey.update_credential(&result);
    let updated = serde_json::to_value(&passkey).map_err(PasskeyError::internal)?;
    pact_db::admin_factors::update_passkey(&state.db, admin.id, &row.credential_id, &updated, now)
        .await?;
    let cookie = sign_in(&state, &staff, &s, &admin, now, "passkey").await?;
    let mut res = json_ok(json!({ "redirect": "/admin" }));
    res.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(res)
}
