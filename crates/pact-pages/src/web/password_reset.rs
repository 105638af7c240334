//! "Forgot your password?" for pactd's built-in accounts: a one-time link by
//! email, then a new password.
//!
//! * `GET/POST /login/forgot?brand=B` — asks for the email; always answers
//!   the same page, whether or not an account has that email, and sends the
//!   mail from a background task so the answer's timing tells nothing either
//!   (OWASP Forgot Password Cheat Sheet: "return a consistent message").
//! * `GET/POST /login/reset?token=T` — the link's page: a new password, twice.
//!
//! A link is 256 random bits stored only as its SHA-256, valid for
//! [`LINK_LIFETIME`], usable once; setting a password ends every other link
//! of the account and every browser session (whoever knew the old password is
//! signed out). It replaces the password only: the second factor is still
//! asked at the next sign-in, so a stolen mailbox alone does not open an
//! account that has one. Agents' grants are not touched (they were approved
//! by the person, and revoking them is one click on the account page).
//!
//! Offered only when mail is configured (`--smtp-url`, `--mail-from`).

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use pact_db::brands::Brand;
use pact_db::ids::BrandId;
use pact_db::users::User;
use pact_node::node::NodeInner;
use serde::Deserialize;
use sha2::Digest as _;
use time::{Duration, OffsetDateTime};

use super::extract::VisitorForm;
use super::i18n;
use super::limits;
use super::login::{brand_for, wait_message, with_headers};
use super::page::{PageError, render};
use super::session::{self, Browser};
use crate::accounts::lockout::FailureKeys;
use crate::accounts::password;
use crate::client_ip::ClientIp;
use crate::domain::secrets;
use crate::state::AppState;

/// How long a link works after it was sent.
pub const LINK_LIFETIME: Duration = Duration::minutes(30);
/// Links one account may be sent per [`MAIL_WINDOW`] at the request of one
/// address: enough for a lost mail or two, too few to flood someone's
/// mailbox through us, and not the whole budget, so someone who knows the
/// address cannot keep its owner from resetting.
pub const MAILS_PER_WINDOW: i64 = 3;
/// Links one account may be sent per [`MAIL_WINDOW`] in all.
pub const MAILS_PER_ACCOUNT: i64 = 10;
pub const MAIL_WINDOW: Duration = Duration::hours(1);

#[derive(Debug, Deserialize)]
pub struct ForgotQuery {
    pub brand: Option<String>,
}

#[derive(Template)]
#[template(path = "forgot_password.html")]
struct ForgotPage<'a> {
    brand_name: String,
    signed_in: bool,
    brand_id: &'a BrandId,
    csrf: &'a str,
    error: Option<&'a str>,
    /// Set once the request was taken: "check your email".
    sent: bool,
    look: crate::who::Look,
}

#[derive(Template)]
#[template(path = "reset_password.html")]
struct ResetPage<'a> {
    brand_name: String,
    signed_in: bool,
    brand_id: &'a BrandId,
    csrf: &'a str,
    token: &'a str,
    error: Option<&'a str>,
    min_len: usize,
    /// Set once the new password is stored.
    done: bool,
    look: crate::who::Look,
}

fn not_offered(state: &AppState) -> Result<(), PageError> {
    match state.mailer {
        Some(_) => Ok(()),
        None => Err(PageError::NotFound(i18n::t("forgot-err-not-offered"))),
    }
}

pub async fn get_forgot(
    State(state): State<AppState>,
    Query(q): Query<ForgotQuery>,
    browser: Browser,
) -> Result<Response, PageError> {
    not_offered(&state)?;
    let brand = brand_for(&state, q.brand.as_deref(), browser.session.as_ref()).await?;
    let (csrf, cookie) = session::form_csrf(&state, &browser);
    let page = ForgotPage {
        brand_name: brand.name.clone(),
        signed_in: browser.signed_in(),
        brand_id: &brand.id,
        csrf: &csrf,
        error: None,
        sent: false,
        look: crate::who::Look::of(&brand.settings),
    };
    Ok(with_headers(render(&page, StatusCode::OK), cookie, None))
}

/// What "Forgot your password?" posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct ForgotForm {
    brand: Option<String>,
    email: Option<String>,
}

pub async fn post_forgot(
    State(state): State<AppState>,
    ip: ClientIp,
    VisitorForm {
        browser,
        visitor,
        form,
    }: VisitorForm<ForgotForm>,
) -> Result<Response, PageError> {
    not_offered(&state)?;
    let brand = brand_for(&state, form.brand.as_deref(), visitor.session()).await?;
    i18n::set_here(format!(
        "/login/forgot?brand={}",
        super::login::enc(&brand.id)
    ));
    let page = |error: Option<&str>, status: StatusCode, retry: Option<u64>| {
        let p = ForgotPage {
            brand_name: brand.name.clone(),
            signed_in: browser.signed_in(),
            brand_id: &brand.id,
            csrf: visitor.csrf(),
            error,
            sent: error.is_none(),
            look: crate::who::Look::of(&brand.settings),
        };
        with_headers(render(&p, status), None, retry)
    };
    let email = form
        .email
        .as_deref()
        .map(|e| e.trim().to_lowercase())
        .unwrap_or_default();
    if !plausible_email(&email) {
        return Ok(page(
            Some(&i18n::t("forgot-err-email")),
            StatusCode::BAD_REQUEST,
            None,
        ));
    }
    // The sign-in budget per address: asking for links is as costly to us
    // as guessing passwords, and an attacker could use us to flood a mailbox.
    if let Err(secs) = limits::check(
        &state.page_limits.sign_in_per_ip,
        &ip.limit_key(),
        state.clock.instant(),
    ) {
        let msg = wait_message("wait-too-many-requests", secs);
        return Ok(page(Some(&msg), StatusCode::TOO_MANY_REQUESTS, Some(secs)));
    }
    let app = state.clone();
    let brand_for_task = brand.clone();
    // Who asked, as the budget counts them: a hash of the address's limit
    // key, never the address.
    let requester: Vec<u8> = sha2::Sha256::digest(format!("reset\n{}", ip.limit_key())).to_vec();
    // The mail is in the language of the page that asked for it.
    let lang = i18n::current();
    tokio::spawn(async move {
        if let Err(e) = send_link(&app, &brand_for_task, &email, &requester, lang).await {
            // Never the address or the link: only that it failed.
            tracing::warn!(brand = %brand_for_task.id, error = %e, "password-reset mail not sent");
        }
    });
    Ok(page(None, StatusCode::OK, None))
}

/// The background half of a request: look the account up, respect the
/// account's budget (per requester and in all), store the link's hash, send
/// the mail.
async fn send_link(
    state: &AppState,
    brand: &Brand,
    email: &str,
    requester: &[u8],
    lang: i18n::Lang,
) -> Result<(), String> {
    let Some(mailer) = state.mailer.as_ref() else {
        return Ok(());
    };
    let now = state.clock.now();
    let user = pact_db::users::find_by_email(&state.db, &brand.id, email)
        .await
        .map_err(|e| e.to_string())?;
    // Unknown, disabled and passwordless accounts (those that sign in at the
    // brand's own login) get nothing, and the person saw the same page.
    let Some(user) = user.filter(|u| !u.is_disabled() && u.password_hash.is_some()) else {
        return Ok(());
    };
    let (token, hash) = secrets::new_secret();
    let mut tx = state.db.begin().await.map_err(|e| e.to_string())?;
    let stored = pact_db::password_resets::insert_within_budget(
        &mut tx,
        &hash,
        user.id,
        now,
        now + LINK_LIFETIME,
        pact_db::password_resets::Budget {
            since: now - MAIL_WINDOW,
            from: requester,
            per_requester: MAILS_PER_WINDOW,
            per_account: MAILS_PER_ACCOUNT,
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;
    if !stored {
        tracing::info!(brand = %brand.id, user = %user.id, "password-reset mail budget spent");
        return Ok(());
    }
    let link = format!("{}/login/reset?token={token}", state.config.public_url);
    let body = mail_body(lang, &brand.name, &link, LINK_LIFETIME.whole_minutes());
    let subject = lang.message(
        "mail-reset-subject",
        &[("brand", brand.name.as_str().into())],
    );
    mailer
        .send(&user.email, &subject, body)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(brand = %brand.id, user = %user.id, "password-reset link sent");
    Ok(())
}

/// The mail's text: who sends it, the link, when it dies, and what to do when
/// the person did not ask.
pub fn mail_body(lang: i18n::Lang, brand_name: &str, link: &str, minutes: i64) -> String {
    let brand = || [("brand", i18n::Arg::from(brand_name))];
    format!(
        "{}\n\n{}\n\n{link}\n\n{}\n\n{}\n",
        lang.message("mail-reset-asked", &brand()),
        lang.message("mail-reset-open", &[("n", i18n::Arg::from(minutes))]),
        lang.message("mail-reset-once", &[]),
        lang.message("mail-reset-ignore", &[]),
    )
}

/// Enough to refuse obvious typos; the mail server has the last word.
fn plausible_email(email: &str) -> bool {
    (3..=254).contains(&email.len())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && !domain.is_empty() && !domain.starts_with('.')
        })
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[derive(Debug, Deserialize)]
pub struct ResetQuery {
    pub token: Option<String>,
}

/// The account behind a live link, with its brand.
async fn link_owner(
    node: &NodeInner,
    token: &str,
    now: OffsetDateTime,
) -> Result<Option<(User, Brand)>, PageError> {
    if token.is_empty() || token.len() > 128 {
        return Ok(None);
    }
    let hash = secrets::hash(token);
    let Some(user_id) = pact_db::password_resets::live_user(&node.db, &hash, now).await? else {
        return Ok(None);
    };
    let Some(user) = pact_db::users::find(&node.db, user_id)
        .await?
        .filter(|u| !u.is_disabled())
    else {
        return Ok(None);
    };
    let brand = brand_for(node, Some(&user.brand_id), None).await?;
    Ok(Some((user, brand)))
}

fn dead_link() -> PageError {
    PageError::BadRequest(i18n::t("reset-err-dead-link"))
}

pub async fn get_reset(
    State(state): State<AppState>,
    Query(q): Query<ResetQuery>,
    browser: Browser,
) -> Result<Response, PageError> {
    not_offered(&state)?;
    let token = q.token.unwrap_or_default();
    let Some((_, brand)) = link_owner(&state, &token, state.clock.now()).await? else {
        return Err(dead_link());
    };
    let (csrf, cookie) = session::form_csrf(&state, &browser);
    let page = ResetPage {
        brand_name: brand.name.clone(),
        signed_in: browser.signed_in(),
        brand_id: &brand.id,
        csrf: &csrf,
        token: &token,
        error: None,
        min_len: password::MIN_LEN,
        done: false,
        look: crate::who::Look::of(&brand.settings),
    };
    Ok(with_headers(render(&page, StatusCode::OK), cookie, None))
}

/// What the new-password page posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct ResetForm {
    token: Option<String>,
    password: Option<String>,
    confirm: Option<String>,
}

pub async fn post_reset(
    State(state): State<AppState>,
    ip: ClientIp,
    VisitorForm {
        browser,
        visitor,
        form,
    }: VisitorForm<ResetForm>,
) -> Result<Response, PageError> {
    not_offered(&state)?;
    let token = form.token.clone().unwrap_or_default();
    let now = state.clock.now();
    let Some((user, brand)) = link_owner(&state, &token, now).await? else {
        return Err(dead_link());
    };
    i18n::set_here(format!("/login/reset?token={}", super::login::enc(&token)));
    let page = |error: Option<&str>, status: StatusCode| {
        let p = ResetPage {
            brand_name: brand.name.clone(),
            signed_in: error.is_some() && browser.signed_in(),
            brand_id: &brand.id,
            csrf: visitor.csrf(),
            token: &token,
            error,
            min_len: password::MIN_LEN,
            done: error.is_none(),
            look: crate::who::Look::of(&brand.settings),
        };
        with_headers(render(&p, status), None, None)
    };
    let new = form.password.as_deref().unwrap_or("");
    if new != form.confirm.as_deref().unwrap_or("") {
        return Ok(page(
            Some(&i18n::t("reset-err-mismatch")),
            StatusCode::BAD_REQUEST,
        ));
    }
    let owned = new.to_owned();
    let hashed = tokio::task::spawn_blocking(move || password::hash(&owned))
        .await
        .map_err(PageError::internal)?;
    let Ok(hash) = hashed else {
        let msg = i18n::t1("reset-err-short", "n", password::MIN_LEN);
        return Ok(page(Some(&msg), StatusCode::BAD_REQUEST));
    };

    // One transaction: the link is used exactly once (a concurrent second use
    // finds it gone), and the password, the other links and the sessions
    // change together or not at all.
    let mut tx = state.db.begin().await?;
    let consumed = pact_db::password_resets::consume(&mut *tx, &secrets::hash(&token), now).await?;
    if consumed != Some(user.id) {
        return Err(dead_link());
    }
    pact_db::users::set_password_hash(&mut *tx, user.id, &hash).await?;
    pact_db::password_resets::end_all_for(&mut *tx, user.id, now).await?;
    let ended = pact_db::sessions::delete_others(&mut *tx, user.id, &[]).await?;
    // The person proved they hold the mailbox: the lockout that guessing may
    // have put on the email no longer stands between them and signing in.
    let keys = FailureKeys::new(&brand.id, &user.email, &ip.limit_key());
    pact_db::sign_in_failures::clear(&mut *tx, &[keys.account, keys.from_address]).await?;
    tx.commit().await?;
    tracing::info!(brand = %brand.id, user = %user.id, sessions_ended = ended, "password reset by email link");
    Ok(page(None, StatusCode::OK))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mail_says_who_asks_how_long_the_link_works_and_what_to_do_otherwise() {
        let body = mail_body(
            i18n::Lang::En,
            "Demo Shop",
            "https://id.example/login/reset?token=x",
            30,
        );
        assert!(body.contains("Demo Shop"));
        assert!(body.contains("https://id.example/login/reset?token=x"));
        assert!(body.contains("within 30 minutes"));
        assert!(body.contains("If you did not ask for this"));
    }

    #[test]
    fn only_plausible_addresses_are_taken() {
        for ok in ["a@b", "ann@example.com", "x.y+z@sub.example.org"] {
            assert!(plausible_email(ok), "{ok}");
        }
        for bad in [
            "",
            "ab",
            "annexample.com",
            "@example.com",
            "ann@",
            "ann@.com",
            "a b@c.d",
            "a@b\n",
        ] {
            assert!(!plausible_email(bad), "{bad:?}");
        }
    }
}
