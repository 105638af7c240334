//! Second factors of built-in accounts: TOTP enrolment (RFC 6238, with a QR
//! code rendered server-side as inline SVG) and single-use recovery codes.
//!
//! * `GET/POST /account/totp?next=` — set up (or replace) the authenticator
//!   app. Open to a signed-in user, and to a half-signed-in one (password
//!   accepted) whose brand requires MFA and who has no factor yet: confirming
//!   the first code then completes the sign-in. Replacing an existing
//!   authenticator needs a second factor from the last ten minutes.
//! * `POST /account/recovery-codes` — a new set of recovery codes (shown
//!   once); needs sign-in and a recent second factor.
//!
//! The new secret travels between the GET and the POST sealed with the master
//! key (bound to the user and the session's CSRF token), so any node can
//! finish an enrolment another node started, and nothing is stored until the
//! person proves their app has it. Codes and secrets are never logged.

use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::sessions::Session;
use pact_db::users::User;
use pact_node::node::{Node, NodeInner};
use qrcode::render::svg;
use qrcode::{EcLevel, QrCode};
use time::OffsetDateTime;

use super::extract::SessionForm;
use super::i18n;
use super::login::{
    NextQuery, Who, brand_view, complete_sign_in, enc, login_path, see_other, wait_message, who,
    with_headers,
};
use super::page::{PageError, render};
use super::session::mfa_is_recent;
use super::session::{self, Browser};
use super::{limits, security};
use crate::accounts::{recovery, totp};
use crate::state::AppState;

#[derive(Template)]
#[template(path = "totp_setup.html")]
pub struct TotpSetupPage<'a> {
    pub brand_name: String,
    pub signed_in: bool,
    pub csrf: &'a str,
    pub next: &'a str,
    /// The new secret, sealed for the confirming POST.
    pub sealed: &'a str,
    /// `<svg …>…</svg>` of the `otpauth://` URI (no script, no style attributes).
    pub qr_svg: &'a str,
    /// The secret in base32, in groups of four, for typing in by hand.
    pub secret_text: &'a str,
    /// The same `otpauth://` URI as a link, for an authenticator app on the
    /// device showing the page (a phone cannot scan its own screen).
    pub otpauth_uri: &'a str,
    pub account: &'a str,
    pub error: Option<&'a str>,
    /// The account has an authenticator already: this replaces it.
    pub replacing: bool,
    /// Sign-in is waiting for this enrolment (the brand requires MFA).
    pub pending: bool,
    pub look: crate::who::Look,
}

#[derive(Template)]
#[template(path = "recovery_codes.html")]
pub struct RecoveryCodesPage<'a> {
    pub brand_name: String,
    pub signed_in: bool,
    pub codes: &'a [String],
    pub next: &'a str,
    /// Shown right after a new authenticator was confirmed.
    pub enrolled: bool,
    pub look: crate::who::Look,
    /// The codes as a `data:text/plain` URL for the download link (issue 30,
    /// item 9): made here, so nothing is stored or served again later.
    pub download_href: String,
    pub download_name: String,
}

/// The downloaded file: which account the codes are for, then one a line.
fn codes_file(brand_name: &str, email: &str, codes: &[String]) -> String {
    let mut text = i18n::t2("codes-file-heading", "brand", brand_name, "email", email);
    text.push_str("\n\n");
    for c in codes {
        text.push_str(c);
        text.push('\n');
    }
    text
}

/// `data:text/plain;charset=utf-8,…`, percent-encoded (RFC 2397 §2).
fn data_url(text: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    // form_urlencoded writes a space as '+', which a data URL keeps as '+'.
    format!(
        "data:text/plain;charset=utf-8,{}",
        encoded.replace('+', "%20")
    )
}

/// A file name from the brand's name: letters and digits only, so that no
/// browser has to guess at a path or an extension.
fn codes_file_name(brand_name: &str) -> String {
    let slug: String = brand_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .take(6)
        .collect::<Vec<_>>()
        .join("-");
    if slug.is_empty() {
        "recovery-codes.txt".to_owned()
    } else {
        format!("{slug}-recovery-codes.txt")
    }
}

/// Renders `data` as a QR code: an `<svg>` element to inline in a page. The
/// CSP forbids inline style attributes, so any are removed (qrcode 0.14 emits
/// none; this keeps it true), as is the XML prolog.
pub fn qr_svg(data: &str) -> Result<String, PageError> {
    let code = QrCode::with_error_correction_level(data.as_bytes(), EcLevel::M)
        .map_err(PageError::internal)?;
    let xml = code
        .render::<svg::Color<'_>>()
        .min_dimensions(200, 200)
        .quiet_zone(true)
        .build();
    let Some(start) = xml.find("<svg") else {
        return Err(PageError::Internal(
            "the QR renderer produced no <svg>".into(),
        ));
    };
    let labelled = xml[start..].replacen(
        "<svg ",
        "<svg role=\"img\" aria-label=\"QR code to scan with your authenticator app\" ",
        1,
    );
    Ok(strip_style_attributes(&labelled))
}

/// Removes every ` style="…"` (or `'…'`) attribute.
fn strip_style_attributes(markup: &str) -> String {
    let mut out = String::with_capacity(markup.len());
    let mut rest = markup;
    while let Some(at) = rest.find(" style=") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " style=".len()..];
        let quote = after.chars().next();
        rest = match quote {
            Some(q @ ('"' | '\'')) => match after[1..].find(q) {
                Some(end) => &after[end + 2..],
                None => "",
            },
            _ => after.trim_start_matches(|c: char| !c.is_whitespace() && c != '>' && c != '/'),
        };
    }
    out.push_str(rest);
    out
}

/// Base32 in groups of four, as authenticator apps show it.
fn grouped(b32: &str) -> String {
    b32.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The associated data of a secret in transit: the user and this session.
fn transit_aad(user: &User, session: &Session) -> Vec<u8> {
    format!("pactd totp enrolment\n{}\n{}", user.id, session.csrf_token).into_bytes()
}

/// Who may use the enrolment page, or where to send them instead.
async fn enroller(
    state: &AppState,
    browser: &Browser,
    next: &str,
    now: OffsetDateTime,
) -> Result<Result<(Who, Session), Response>, PageError> {
    let here = format!("/account/totp?next={}", enc(next));
    let Some(s) = &browser.session else {
        return Ok(Err(see_other(&login_path(None, &here), None)));
    };
    if s.external_sub.is_some() && s.user_id.is_none() {
        return Err(PageError::BadRequest(i18n::t("totp-err-external")));
    }
    let Some(who) = who(state, s).await? else {
        return Ok(Err(see_other(
            &login_path(s.brand_id.as_ref(), &here),
            None,
        )));
    };
    let to_second_factor = see_other(&format!("/login/second-factor?next={}", enc(&here)), None);
    // A passkey is a factor too: an account that has one proves it before
    // an app is added, or a password alone could add the attacker's app.
    let has_factor =
        who.user().has_totp() || super::login::has_usable_passkey(state, who.user()).await?;
    match &who {
        // Has a factor: prove it first (sign-in, or a recent reconfirmation to replace it).
        Who::Pending(_) if has_factor => Ok(Err(to_second_factor)),
        Who::SignedIn(_) if has_factor && !mfa_is_recent(s, now) => Ok(Err(to_second_factor)),
        // No factor yet: the first is bound only by a recent sign-in
        // (session.rs, `signed_in_recently`).
        Who::SignedIn(_) if !has_factor && !super::session::signed_in_recently(s, now) => {
            Err(PageError::Forbidden(i18n::t("mfa-err-sign-in-again")))
        }
        _ => Ok(Ok((who, s.clone()))),
    }
}

struct Setup<'a> {
    state: &'a AppState,
    browser: &'a Browser,
    session: &'a Session,
    user: &'a User,
    pending: bool,
    next: &'a str,
}

impl Setup<'_> {
    async fn render(
        &self,
        secret: &[u8],
        sealed: &str,
        error: Option<&str>,
        status: StatusCode,
        retry: Option<u64>,
    ) -> Result<Response, PageError> {
        let (name, look) = brand_view(self.state, Some(&self.user.brand_id)).await?;
        let uri = totp::otpauth_uri(&name, &self.user.email, secret);
        let qr = qr_svg(&uri)?;
        let text = grouped(&totp::base32(secret));
        let page = TotpSetupPage {
            brand_name: name,
            signed_in: self.browser.signed_in(),
            csrf: &self.session.csrf_token,
            next: self.next,
            sealed,
            qr_svg: &qr,
            secret_text: &text,
            otpauth_uri: &uri,
            account: &self.user.email,
            error,
            replacing: self.user.has_totp(),
            look,
            pending: self.pending,
        };
        Ok(with_headers(render(&page, status), None, retry))
    }
}

pub async fn get_totp(
    State(state): State<AppState>,
    Query(q): Query<NextQuery>,
    browser: Browser,
) -> Result<Response, PageError> {
    let next = security::safe_next(q.next.as_deref());
    let now = state.clock.now();
    let (who, s) = match enroller(&state, &browser, &next, now).await? {
        Ok(v) => v,
        Err(redirect) => return Ok(redirect),
    };
    let user = who.user();
    let secret = totp::new_secret().map_err(PageError::internal)?;
    let sealed = state
        .config
        .master_key
        .seal(&secret, &transit_aad(user, &s))
        .map_err(PageError::internal)?;
    let setup = Setup {
        state: &state,
        browser: &browser,
        session: &s,
        user,
        pending: matches!(who, Who::Pending(_)),
        next: &next,
    };
    setup
        .render(
            &secret,
            &URL_SAFE_NO_PAD.encode(sealed),
            None,
            StatusCode::OK,
            None,
        )
        .await
}

/// What the authenticator set-up page posts (besides its CSRF token): the
/// sealed secret it was shown, and the first code from it.
#[derive(Debug, serde::Deserialize)]
pub struct TotpForm {
    next: Option<String>,
    sealed: Option<String>,
    code: Option<String>,
}

/// A form that posts only where to go next.
#[derive(Debug, serde::Deserialize)]
pub struct NextForm {
    next: Option<String>,
}

pub async fn post_totp(
    State(state): State<AppState>,
    SessionForm { browser, form, .. }: SessionForm<TotpForm>,
) -> Result<Response, PageError> {
    let next = security::safe_next(form.next.as_deref());
    let now = state.clock.now();
    let (who, s) = match enroller(&state, &browser, &next, now).await? {
        Ok(v) => v,
        Err(redirect) => return Ok(redirect),
    };
    let user = who.user();
    let expired = || PageError::BadRequest(i18n::t("totp-err-expired"));
    let sealed_text = form.sealed.as_deref().ok_or_else(expired)?;
    let sealed = URL_SAFE_NO_PAD
        .decode(sealed_text.trim())
        .map_err(|_| expired())?;
    let secret = state
        .config
        .master_key
        .open(&sealed, &transit_aad(user, &s))
        .map_err(|_| expired())?;
    let setup = Setup {
        state: &state,
        browser: &browser,
        session: &s,
        user,
        pending: matches!(who, Who::Pending(_)),
        next: &next,
    };

    if let Err(secs) = limits::check(
        &state.page_limits.second_factor_per_user,
        &user.id.to_string(),
        state.clock.instant(),
    ) {
        let msg = wait_message("wait-too-many-codes", secs);
        return setup
            .render(
                &secret,
                sealed_text,
                Some(&msg),
                StatusCode::TOO_MANY_REQUESTS,
                Some(secs),
            )
            .await;
    }
    let Some(code) = form.code.as_deref() else {
        return setup
            .render(
                &secret,
                sealed_text,
                Some(&i18n::t("totp-err-empty")),
                StatusCode::BAD_REQUEST,
                None,
            )
            .await;
    };
    let Some(step) = totp::verify(&secret, code, now.unix_timestamp()) else {
        return setup
            .render(
                &secret,
                sealed_text,
                Some(&i18n::t("totp-err-wrong")),
                StatusCode::BAD_REQUEST,
                None,
            )
            .await;
    };

    // Stored under the user id; the confirming code is spent at once.
    let stored = state
        .config
        .master_key
        .seal(&secret, user.id.as_bytes())
        .map_err(PageError::internal)?;
    let codes = recovery::generate();
    let hashes = recovery::hash_all(&state.config.master_key, user.id, &codes)
        .map_err(PageError::internal)?;
    let mut tx = state.db.begin().await?;
    pact_db::users::set_totp(&mut *tx, user.id, Some(&stored)).await?;
    pact_db::users::advance_totp_step(&mut *tx, user.id, step).await?;
    pact_db::users::replace_recovery_codes(&mut tx, user.id, &hashes).await?;
    tx.commit().await?;
    tracing::info!(user = %user.id, replaced = user.has_totp(), "authenticator app set up");

    let cookie = rotate_after_factor(&state, &s, &who, now).await?;
    show_codes(&state, &browser, user, &codes, &next, true, Some(cookie)).await
}

/// A second factor was just proven: a new session id with `mfa_at = now`
/// (completing a pending sign-in).
async fn rotate_after_factor(
    node: &NodeInner,
    old: &Session,
    who: &Who,
    now: OffsetDateTime,
) -> Result<HeaderValue, PageError> {
    match who {
        Who::Pending(u) => complete_sign_in(node, old, u, Some(now)).await,
        Who::SignedIn(_) => {
            let mut carried = session::carry(old);
            carried.mfa_at = Some(now);
            let (_, cookie) = session::start(node, Some(old), carried).await?;
            Ok(cookie)
        }
    }
}

async fn show_codes(
    node: &NodeInner,
    browser: &Browser,
    user: &User,
    codes: &[String],
    next: &str,
    enrolled: bool,
    cookie: Option<HeaderValue>,
) -> Result<Response, PageError> {
    let (brand_name, look) = brand_view(node, Some(&user.brand_id)).await?;
    let download_href = data_url(&codes_file(&brand_name, &user.email, codes));
    let download_name = codes_file_name(&brand_name);
    let page = RecoveryCodesPage {
        download_href,
        download_name,
        brand_name,
        look,
        // Signed in after this response even when the request was pending.
        signed_in: browser.signed_in() || cookie.is_some(),
        codes,
        next,
        enrolled,
    };
    Ok(with_headers(render(&page, StatusCode::OK), cookie, None))
}

pub async fn post_recovery_codes(
    State(node): State<Node>,
    SessionForm {
        browser,
        session: s,
        form,
    }: SessionForm<NextForm>,
) -> Result<Response, PageError> {
    let next = security::safe_next(form.next.as_deref());
    let now = node.clock.now();
    let Some(Who::SignedIn(user)) = who(&node, &s).await? else {
        return Ok(see_other(&login_path(s.brand_id.as_ref(), &next), None));
    };
    if !mfa_is_recent(&s, now) {
        return Ok(see_other(
            &format!("/login/second-factor?next={}", enc(&next)),
            None,
        ));
    }
    let codes = recovery::generate();
    let hashes = recovery::hash_all(&node.config.master_key, user.id, &codes)
        .map_err(PageError::internal)?;
    let mut tx = node.db.begin().await?;
    pact_db::users::replace_recovery_codes(&mut tx, user.id, &hashes).await?;
    tx.commit().await?;
    tracing::info!(user = %user.id, "new recovery codes issued");
    show_codes(&node, &browser, &user, &codes, &next, false, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_qr_code_is_an_inline_svg_without_style_attributes() {
        let svg = qr_svg("otpauth://totp/Demo:a%40b.example?secret=ABCDEFGH&issuer=Demo").unwrap();
        assert!(svg.starts_with("<svg "), "{}", &svg[..40]);
        assert!(svg.ends_with("</svg>"));
        assert!(!svg.contains("style="));
        assert!(!svg.contains("<?xml"));
        assert!(!svg.contains("<script"));
        assert!(svg.contains("aria-label="));
    }

    #[test]
    fn style_attributes_are_stripped() {
        assert_eq!(
            strip_style_attributes(r#"<svg style="fill:red" a="1"><p style='x'/></svg>"#),
            r#"<svg a="1"><p/></svg>"#
        );
        assert_eq!(strip_style_attributes("<svg style=x>"), "<svg>");
        assert_eq!(strip_style_attributes("<svg>"), "<svg>");
    }

    #[test]
    fn recovery_codes_download_as_plain_text() {
        let codes = vec!["abcd-efgh".to_owned(), "ijkl-mnop".to_owned()];
        let url = data_url(&codes_file("Tea & Co", "a+b@x.example", &codes));
        let body = url.strip_prefix("data:text/plain;charset=utf-8,").unwrap();
        assert!(!body.contains(' ') && !body.contains('+') && !body.contains('&'));
        let query = format!("x={body}");
        let (_, decoded) = url::form_urlencoded::parse(query.as_bytes())
            .next()
            .unwrap();
        assert!(decoded.contains("a+b@x.example"), "{decoded}");
        assert!(decoded.ends_with("\n\nabcd-efgh\nijkl-mnop\n"), "{decoded}");
        assert_eq!(codes_file_name("Tea & Co"), "tea-co-recovery-codes.txt");
        assert_eq!(codes_file_name("Ünï"), "n-recovery-codes.txt");
        assert_eq!(codes_file_name("日本"), "recovery-codes.txt");
    }

    #[test]
    fn secrets_are_shown_in_groups_of_four() {
        assert_eq!(grouped("ABCDEFGHIJ"), "ABCD EFGH IJ");
    }
}
