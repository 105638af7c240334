//! A person deletes their own built-in account (`/account/delete`).
//!
//! The confirmation page asks for the password again (or, for an account
//! without one, a second factor verified in the last ten minutes): a browser
//! left signed in must not be enough to erase someone (the re-authentication
//! NIST SP 800-63B §7.1 asks for before sensitive changes). Deleting revokes
//! every grant of the person at the brand in the same transaction — the
//! grants table's trigger announces each on `pactd_revocations`, so every
//! node refuses their tokens at once — and removes the account row, whose
//! foreign keys cascade to second factors, recovery codes, sessions and
//! ceremonies. Grants and receipts name only the opaque brand user id and
//! are kept, revoked, as evidence.

use askama::Template;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use pact_db::grants::reason as why;
use pact_db::sessions::Session;
use pact_db::users::User;
use pact_node::node::{Node, NodeInner};
use time::OffsetDateTime;

use super::account::{Person, signed_in_person};
use super::extract::SessionForm;
use super::i18n;
use super::page::{ErrorPage, PageError, render};
use super::session::{self, Browser};
use crate::accounts::lockout::FailureKeys;
use crate::accounts::sign_in::{self, PasswordStep};
use crate::client_ip::ClientIp;

#[derive(Template)]
#[template(path = "account_delete.html")]
struct DeletePage<'a> {
    brand_name: &'a str,
    signed_in: bool,
    csrf: &'a str,
    active_grants: usize,
    needs_password: bool,
    error: Option<&'a str>,
}

/// The signed-in built-in account of this session, with its brand's name.
async fn own_account(node: &NodeInner, session: &Session) -> Result<(String, User), PageError> {
    match signed_in_person(node, session).await? {
        Some((brand_id, Person::Account(user))) => {
            let (name, _) = super::login::brand_view(node, Some(&brand_id)).await?;
            Ok((name, user))
        }
        Some((_, Person::External(_))) => Err(PageError::BadRequest(i18n::t("del-err-external"))),
        None => Err(PageError::Forbidden(i18n::t("del-err-signed-out"))),
    }
}

async fn page(
    node: &NodeInner,
    session: &Session,
    brand_name: &str,
    user: &User,
    error: Option<&str>,
    status: StatusCode,
) -> Result<Response, PageError> {
    let now = node.clock.now();
    let active = pact_db::grants::list(
        &node.db,
        pact_db::grants::GrantFilter {
            brand_id: Some(&user.brand_id),
            user_sub: Some(&user.subject()),
            pa_issuer: None,
        },
    )
    .await?
    .into_iter()
    .filter(|g| g.is_active(now))
    .count();
    let page = DeletePage {
        brand_name,
        signed_in: true,
        csrf: &session.csrf_token,
        active_grants: active,
        needs_password: user.password_hash.is_some(),
        error,
    };
    Ok(render(&page, status))
}

/// `GET /account/delete`: what deleting means, and the confirmation form.
pub async fn confirm(State(node): State<Node>, browser: Browser) -> Result<Response, PageError> {
    let Some(session) = &browser.session else {
        return Ok(Redirect::to("/account").into_response());
    };
    let (brand_name, user) = own_account(&node, session).await?;
    page(&node, session, &brand_name, &user, None, StatusCode::OK).await
}

/// Whether this request proves it is the person, not only their browser.
enum Proof {
    Proven,
    /// The wrong password, or no recent second factor.
    Wrong,
    /// Too many wrong passwords for this account or from this address: the
    /// sign-in's own lock, for this many seconds.
    Locked(i64),
}

/// The password is checked as sign-in checks it (`sign_in::check_password`):
/// off the async threads, and each wrong one counted against the same
/// address and account locks, so a browser left signed in is no unlimited
/// password oracle. An account without a password needs a recent second
/// factor instead.
async fn reauthenticate(
    node: &NodeInner,
    user: &User,
    session: &Session,
    given: &str,
    ip: &ClientIp,
    now: OffsetDateTime,
) -> Result<Proof, PageError> {
    if user.password_hash.is_none() {
        return Ok(if session::mfa_is_recent(session, now) {
            Proof::Proven
        } else {
            Proof::Wrong
        });
    }
    let keys = FailureKeys::new(&user.brand_id, &user.email, &ip.limit_key());
    let hash_of = |u: &User| u.password_hash.clone();
    let step = sign_in::check_password(
        &node.db,
        &keys,
        Some(user.clone()),
        hash_of,
        given.to_owned(),
        now,
    );
    Ok(match step.await? {
        PasswordStep::AddressLocked(secs) => Proof::Locked(secs),
        // Someone has been guessing this account's password: the right one
        // alone does not erase it until the lock ends.
        PasswordStep::Right {
            account_locked: Some(secs),
            ..
        }
        | PasswordStep::Wrong {
            account_locked: Some(secs),
        } => Proof::Locked(secs),
        PasswordStep::Right { .. } => Proof::Proven,
        PasswordStep::Wrong { .. } => Proof::Wrong,
    })
}

/// What the confirmation page posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct DeleteForm {
    confirm: Option<String>,
    password: Option<String>,
}

/// `POST /account/delete` (from the confirmation page).
pub async fn delete(
    State(node): State<Node>,
    client: ClientIp,
    SessionForm { session, form, .. }: SessionForm<DeleteForm>,
) -> Result<Response, PageError> {
    let (brand_name, user) = own_account(&node, &session).await?;
    if form.confirm.as_deref() != Some("yes") {
        return Ok(Redirect::to("/account/delete").into_response());
    }
    let now = node.clock.now();
    let given = form.password.as_deref().unwrap_or("");
    let refusal = match reauthenticate(&node, &user, &session, given, &client, now).await? {
        Proof::Proven => None,
        Proof::Wrong if user.password_hash.is_some() => {
            Some((i18n::t("del-err-password"), StatusCode::FORBIDDEN, None))
        }
        Proof::Wrong => Some((i18n::t("del-err-reconfirm"), StatusCode::FORBIDDEN, None)),
        Proof::Locked(secs) => Some((
            super::login::lock_message(secs),
            StatusCode::TOO_MANY_REQUESTS,
            Some(secs),
        )),
    };
    if let Some((why, status, retry)) = refusal {
        let mut res = page(&node, &session, &brand_name, &user, Some(&why), status).await?;
        if let Some(secs) = retry
            && let Ok(v) = header::HeaderValue::from_str(&secs.to_string())
        {
            res.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return Ok(res);
    }
    let ip = client.0;
    let mut tx = node.db.begin().await?;
    // Locked so that a grant approved in another tab cannot slip between the
    // revocation and the removal.
    pact_db::users::lock(&mut *tx, user.id).await?;
    let revoked = pact_db::grants::revoke_all_for_user(
        &mut *tx,
        &user.brand_id,
        &user.subject(),
        why::ACCOUNT_DELETED,
    )
    .await?;
    pact_db::users::delete(&mut *tx, user.id).await?;
    // The account's end is in the audit log as staff removals are
    // (`customer.remove`); each grant it ended has its own entry (table trigger).
    pact_db::audit::record(
        &mut *tx,
        &pact_db::audit::NewEntry {
            actor_kind: "customer",
            actor: &user.subject(),
            action: "customer.delete",
            target: Some(&user.id.to_string()),
            brand_id: Some(&user.brand_id),
            detail: serde_json::json!({"revoked_grants": revoked.len()}),
            client_addr: Some(&ip.to_string()),
        },
    )
    .await?;
    tx.commit().await?;
    for id in &revoked {
        node.revocations.insert(*id);
    }
    tracing::info!(brand = %user.brand_id, revoked = revoked.len(), "account deleted by its owner");
    let done = ErrorPage {
        brand_name: &brand_name,
        title: &i18n::t("del-done-title"),
        message: &i18n::t("del-done"),
        signed_in: false,
        look: i18n::known_look(),
    };
    let mut res = render(&done, StatusCode::OK);
    res.headers_mut()
        .append(header::SET_COOKIE, session::clear_cookie(&node));
    Ok(res)
}
