//! The device pages (RFC 8628 §3.3, PACT §5.2, §7): code entry, sign-in
//! hand-off, consent, and "done".
//!
//! * `GET /device[?user_code=]` shows the entry form (pre-filled from
//!   `verification_uri_complete`), naming the code's brand and agent when
//!   the code is live (a look-up limited like code entry); a GET never acts
//!   on the code.
//! * `POST /device` confirms the code (rate-limited per session, per IP and
//!   globally; every attempt costs a token), remembers it in the session, and
//!   sends the person to sign in — pactd's `/login` or the brand's own login —
//!   or straight to consent when already signed in for that brand.
//! * `GET /device/consent` shows who asks (the registered agent's name and its
//!   issuer origin), for which brand, when and from where, each requested scope
//!   as a pre-ticked checkbox with its description verbatim, and any
//!   `authorization_details` conditions in plain words.
//! * `POST /device/consent` approves the ticked scopes or denies — only ever on
//!   this explicit click, even when an existing grant already covers the
//!   request. Ticked `requires_mfa` scopes need a second factor verified in
//!   the last ten minutes, else the person is sent to
//!   `/login/second-factor?next=/device/consent?scopes=…` and comes back to
//!   the same form with the same ticks (scope ids are not secret).
//! * `GET /device/done` tells them to go back to their agent.

use std::collections::BTreeSet;

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_db::brands::Brand;
use pact_db::device_authorizations::{DeviceAuthorization, Status as AuthStatus};
use pact_db::ids::{BrandId, UserSub};
use pact_db::parties::Connection;
use pact_db::scopes::BrandScope;
use pact_db::sessions::{Session, SessionState};
use pact_node::node::{Node, NodeInner};
use time::OffsetDateTime;
use time::macros::format_description;

use super::brand_login::{self, BrandLogin};
use super::extract::{SessionForm, Visitor, VisitorForm};
use super::form::Fields;
use super::i18n;
use super::login;
use super::oidc_login;
use super::page::{ErrorPage, PageError, render};
use super::security;
use super::session::mfa_is_recent;
use super::session::{self, Browser};
use crate::client_ip::ClientIp;
use crate::consent::{self, Approval, ConsentError};
use crate::domain::{authz_details, hidden_chars, user_code};
use crate::state::AppState;
use crate::who;

/// The brand name shown before any code is known.
const NO_BRAND: &str = "pactd";

// ---------------------------------------------------------------- templates

#[derive(Template)]
#[template(path = "device.html")]
struct DevicePage<'a> {
    brand_name: &'a str,
    signed_in: bool,
    /// The brand's look when the browser is signed in to one.
    look: who::Look,
    csrf: &'a str,
    code: &'a str,
    /// The registered agent behind the link's code, when it is live.
    agent_name: Option<&'a str>,
    error: Option<&'a str>,
}

/// One of the platform's registered links (RFC 7591 §2 `client_uri`,
/// `policy_uri`, `tos_uri`), shown with its host so the person sees where it goes.
struct LinkRow {
    label: String,
    href: String,
    host: String,
}

struct ScopeRow {
    id: String,
    description: String,
    checked: bool,
    requires_mfa: bool,
}

#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage<'a> {
    brand_name: &'a str,
    signed_in: bool,
    csrf: &'a str,
    /// Which request this form answers: the POST is refused if the session
    /// has moved on to another code since (another tab).
    authorization: String,
    agent_name: &'a str,
    agent_origin: &'a str,
    /// The agent was admitted under the open policy and the shop's staff
    /// have not verified it (PACT §3.1; issue 31): said plainly.
    agent_unverified: bool,
    /// `/logos/{sha256}`: the platform's logo as pactd stored it.
    agent_logo: Option<String>,
    /// Shown instead of a logo: the name's first letter.
    agent_initial: String,
    links: Vec<LinkRow>,
    look: crate::who::Look,
    user_label: &'a str,
    user_code: String,
    /// "Asked … with code " and "." around the code.
    asked_before: String,
    asked_after: String,
    scopes: Vec<ScopeRow>,
    conditions: Vec<super::consent_limits::ConditionRow>,
    /// The agent holds an active grant from this person: a step-up, not a
    /// first connection.
    connected: bool,
    /// Every requested permission is already held.
    nothing_new: bool,
    /// Everything the agent may already do (all its active grants' scopes).
    already: Vec<String>,
    /// A step-up beyond a limit: the calls to allow once, each with why.
    operations: Vec<OperationRow>,
    error: Option<&'a str>,
}

/// One call the person is asked to allow once (`crate::web::operations`).
struct OperationRow {
    summary: String,
    beyond: String,
}

#[derive(Template)]
#[template(path = "device_done.html")]
struct DonePage<'a> {
    brand_name: &'a str,
    /// For the "Connected agents" link, which must work after sign-out too.
    brand_id: &'a BrandId,
    signed_in: bool,
    approved: bool,
    agent_name: &'a str,
    granted: Vec<String>,
    look: crate::who::Look,
}

// ---------------------------------------------------------------- helpers

fn query_param(raw: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(raw.unwrap_or("").as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn with_cookie(mut res: Response, cookie: Option<HeaderValue>) -> Response {
    if let Some(c) = cookie {
        res.headers_mut().append(header::SET_COOKIE, c);
    }
    res
}

/// `303 See Other` to one of our own pages, never cached.
fn see_other(to: &str) -> Response {
    login::see_other(to, None)
}

/// A calm page for a state the person cannot act on (expired, used…), in
/// the brand's look when the brand is known.
fn notice(brand: Option<&Brand>, signed_in: bool, title: &str, message: &str) -> Response {
    let page = ErrorPage {
        brand_name: brand.map_or(NO_BRAND, |b| b.name.as_str()),
        title,
        message,
        signed_in,
        look: brand.map_or_else(who::Look::none, |b| who::Look::of(&b.settings)),
    };
    render(&page, StatusCode::GONE)
}

fn expired_code(brand: Option<&Brand>, signed_in: bool) -> Response {
    notice(
        brand,
        signed_in,
        &i18n::t("device-expired-title"),
        &i18n::t("device-expired"),
    )
}

fn used_code(brand: Option<&Brand>, signed_in: bool) -> Response {
    notice(
        brand,
        signed_in,
        &i18n::t("device-used-title"),
        &i18n::t("device-used"),
    )
}

/// The brand the browser is signed in to, for the code-entry page's look.
async fn signed_in_brand(
    node: &NodeInner,
    browser: &Browser,
) -> Result<(String, who::Look), PageError> {
    let brand_id = browser
        .session
        .as_ref()
        .filter(|_| browser.signed_in())
        .and_then(|s| s.brand_id.as_ref());
    super::login::brand_view(node, brand_id).await
}

fn consent_error(e: ConsentError) -> PageError {
    match e {
        ConsentError::Db(e) => PageError::from(e),
        ConsentError::OperationGrantGone => {
            PageError::Forbidden(i18n::t("consent-err-operation-gone"))
        }
        ConsentError::NotTheirs => PageError::Forbidden(i18n::t("consent-err-other-account")),
        ConsentError::AgentOff => PageError::Forbidden(i18n::t("consent-err-agent-off")),
        ConsentError::ScopesNotRequested | ConsentError::DetailsNotRequested => {
            PageError::BadRequest(i18n::t("consent-err-not-requested"))
        }
        ConsentError::NotFound => PageError::NotFound(i18n::t("consent-err-gone")),
        // Raced with another tab or with expiry: the next GET explains which.
        ConsentError::AlreadyDecided | ConsentError::Expired => {
            PageError::BadRequest(i18n::t("consent-err-decided"))
        }
    }
}

/// The session's user id at the brand, when it is signed in for `brand_id`.
/// The second element labels the person on the page.
async fn signed_in_as(
    node: &NodeInner,
    s: &Session,
    brand_id: &BrandId,
) -> Result<Option<(UserSub, String)>, PageError> {
    if s.brand_id.as_deref() != Some(brand_id) {
        return Ok(None);
    }
    if let Some(uid) = s.user_id {
        return Ok(pact_db::users::find(&node.db, uid)
            .await?
            .filter(|u| u.brand_id == brand_id)
            .map(|u| (u.subject(), u.email)));
    }
    Ok(s.external_sub.clone().map(|sub| (sub.clone().into(), sub)))
}

/// Where to go to sign in for this authorization's brand: its OpenID
/// provider, its own login, or pactd's `/login`.
async fn sign_in_first(
    state: &AppState,
    browser: &Browser,
    session: &Session,
    brand: &Brand,
    auth: &DeviceAuthorization,
) -> Result<Response, PageError> {
    if let Some(cfg) = pact_db::brand_oidc::find(&state.db, &brand.id).await? {
        return oidc_login::login_page(state, session, brand, &cfg, auth, None).await;
    }
    match BrandLogin::from_settings(&brand.settings) {
        Some(login) => {
            brand_login::login_page(state, browser, brand, &login, auth, None, StatusCode::OK).await
        }
        None => Ok(login::to_sign_in(&brand.id, "/device/consent")),
    }
}

fn absolute(t: OffsetDateTime) -> String {
    let f = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    t.to_offset(time::UtcOffset::UTC)
        .format(&f)
        .unwrap_or_default()
}

fn relative(then: OffsetDateTime, now: OffsetDateTime) -> String {
    let secs = (now - then).whole_seconds().max(0);
    match secs {
        0..60 => i18n::t("ago-now"),
        60..3600 => i18n::t1("ago-minutes", "n", secs / 60),
        3600..86_400 => i18n::t1("ago-hours", "n", secs / 3600),
        _ => i18n::t1("ago-days", "n", secs / 86_400),
    }
}

/// `/login/second-factor?next=<encoded /device/consent?scopes=a+b>`.
fn reconfirm_url(ticked: &BTreeSet<String>) -> String {
    let joined = ticked.iter().cloned().collect::<Vec<_>>().join(" ");
    let back = format!(
        "/device/consent?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("scopes", &joined)
            .finish()
    );
    format!(
        "/login/second-factor?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("next", &back)
            .finish()
    )
}

/// Code entry's limits (see `web/limits.rs` for why a flood of wrong codes
/// cannot refuse a person with a valid one).
fn limit_code_entry(state: &AppState, visitor: &Visitor, ip: &ClientIp) -> Result<(), PageError> {
    let visitor_key = match visitor {
        Visitor::Session(s) => URL_SAFE_NO_PAD.encode(&s.id_hash),
        Visitor::Anonymous(t) => t.limit_key(),
    };
    state
        .page_limits
        .code_attempt(&visitor_key, &ip.limit_key(), state.clock.instant())
        .map_err(|secs| PageError::TooMany {
            retry_after_secs: secs,
            message: i18n::t1("device-err-too-many", "n", secs),
        })
}

// ---------------------------------------------------------------- /device

/// `GET /device` and `GET /device?user_code=…` (never acts on the code).
pub async fn entry(
    State(state): State<AppState>,
    ip: ClientIp,
    browser: Browser,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let (csrf, cookie) = session::form_csrf(&state, &browser);
    let typed = query_param(query.as_deref(), "user_code").unwrap_or_default();
    let code = match user_code::normalise(&typed) {
        Some(c) => user_code::display(&c),
        None => typed.chars().take(32).collect(),
    };
    let (mut brand_name, mut look) = signed_in_brand(&state, &browser).await?;
    let mut agent_name = None;
    if let Some((brand, agent)) = named_by_link(&state, &ip, &typed).await? {
        brand_name = brand.name.clone();
        look = who::Look::of(&brand.settings);
        i18n::brand_known(&brand.name, look.clone());
        agent_name = agent;
    }
    let page = DevicePage {
        brand_name: &brand_name,
        signed_in: browser.signed_in(),
        look,
        csrf: &csrf,
        code: &code,
        agent_name: agent_name.as_deref(),
        error: None,
    };
    Ok(with_cookie(render(&page, StatusCode::OK), cookie))
}

/// The brand (and the registered agent) of the code in the link, so that
/// the first page names the shop and who is asking (issue 30, item 9). The
/// look-up is limited per address at the rate of code attempts and stops
/// while wrong codes are over the shared budget, which a miss here spends
/// too (`PageLimits::link_lookup`), so a link cannot test codes faster than
/// the form; beyond the limits, or for a code that is not live, the page is
/// the generic one, naming nothing. Nothing is stored: the code is still
/// confirmed by the person's click (RFC 8628 §3.3.1).
async fn named_by_link(
    state: &AppState,
    ip: &ClientIp,
    typed: &str,
) -> Result<Option<(Brand, Option<String>)>, PageError> {
    let Some(code) = user_code::normalise(typed) else {
        return Ok(None);
    };
    let now = state.clock.instant();
    if !state.page_limits.link_lookup(&ip.limit_key(), now) {
        return Ok(None);
    }
    let Some(auth) = consent::find_by_user_code(state, &code)
        .await
        .map_err(consent_error)?
    else {
        state.page_limits.code_missed(now);
        return Ok(None);
    };
    if auth.status != AuthStatus::Pending || auth.expires_at <= state.clock.now() {
        return Ok(None);
    }
    let Some(brand) = pact_db::brands::find(&state.db, &auth.brand_id).await? else {
        return Ok(None);
    };
    let agent = pact_db::agents::find(&state.db, &auth.pa_issuer)
        .await?
        .map(|a| hidden_chars::visible(&a.name));
    Ok(Some((brand, agent)))
}

async fn entry_again(
    node: &NodeInner,
    browser: &Browser,
    csrf: &str,
    typed: &str,
    error: &str,
    status: StatusCode,
) -> Result<Response, PageError> {
    let typed: String = typed.chars().take(32).collect();
    let (brand_name, look) = signed_in_brand(node, browser).await?;
    let page = DevicePage {
        brand_name: &brand_name,
        signed_in: browser.signed_in(),
        look,
        csrf,
        code: &typed,
        agent_name: None,
        error: Some(error),
    };
    Ok(render(&page, status))
}

/// Whether a code was used by an authorization that is no longer live
/// (denied or redeemed); such codes are not found by the live lookup.
async fn code_was_used(node: &NodeInner, code: &str) -> Result<bool, pact_db::Error> {
    pact_db::device_authorizations::user_code_was_used(&node.db, code).await
}

/// `POST /device`: confirm the code. An anonymous visitor gets a session
/// only here, once a valid code gives it something to remember.
/// What the code-entry page posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct CodeForm {
    user_code: Option<String>,
}

pub async fn confirm(
    State(state): State<AppState>,
    ip: ClientIp,
    VisitorForm {
        browser,
        visitor,
        form,
    }: VisitorForm<CodeForm>,
) -> Result<Response, PageError> {
    limit_code_entry(&state, &visitor, &ip)?;

    let typed = form.user_code.as_deref().unwrap_or("");
    let signed_in = browser.signed_in();
    let Some(code) = user_code::normalise(typed) else {
        return entry_again(
            &state,
            &browser,
            visitor.csrf(),
            typed,
            &i18n::t("device-err-malformed"),
            StatusCode::BAD_REQUEST,
        )
        .await;
    };
    let Some(auth) = consent::find_by_user_code(&state, &code)
        .await
        .map_err(consent_error)?
    else {
        if code_was_used(&state, &code).await? {
            return Ok(used_code(None, signed_in));
        }
        state.page_limits.code_missed(state.clock.instant());
        return entry_again(
            &state,
            &browser,
            visitor.csrf(),
            typed,
            &i18n::t("device-err-unknown"),
            StatusCode::NOT_FOUND,
        )
        .await;
    };
    let brand = pact_db::brands::find(&state.db, &auth.brand_id)
        .await?
        .ok_or_else(|| PageError::NotFound(i18n::t("device-err-no-brand")))?;
    i18n::brand_known(&brand.name, who::Look::of(&brand.settings));
    if auth.status != AuthStatus::Pending {
        return Ok(used_code(Some(&brand), signed_in));
    }
    if auth.expires_at <= state.clock.now() {
        return Ok(expired_code(Some(&brand), signed_in));
    }
    let (session, cookie) = match visitor {
        Visitor::Session(s) => {
            pact_db::sessions::set_device_authorization(&state.db, &s.id_hash, Some(auth.id))
                .await?;
            (*s, None)
        }
        Visitor::Anonymous(token) => {
            let (s, cookie) = session::start_from_form(
                &state,
                &token,
                SessionState {
                    device_authorization_id: Some(auth.id),
                    ..SessionState::default()
                },
            )
            .await?;
            (s, Some(cookie))
        }
    };
    let res = if signed_in_as(&state, &session, &brand.id).await?.is_some() {
        see_other("/device/consent")
    } else {
        sign_in_first(&state, &browser, &session, &brand, &auth).await?
    };
    Ok(with_cookie(res, cookie))
}

// ---------------------------------------------------------------- consent

/// Everything the consent page and its POST need.
struct Deciding {
    session: Session,
    auth: DeviceAuthorization,
    brand: Brand,
    user_sub: UserSub,
    user_label: String,
}

enum Loaded {
    Ready(Box<Deciding>),
    Respond(Response),
}

/// The authorization this browser is deciding on, if it can be decided and
/// the person is signed in for its brand; otherwise the page to show instead.
async fn load(state: &AppState, browser: &Browser) -> Result<Loaded, PageError> {
    let Some(s) = browser.session.clone() else {
        return Ok(Loaded::Respond(see_other("/device")));
    };
    let Some(id) = s.device_authorization_id else {
        return Ok(Loaded::Respond(see_other("/device")));
    };
    let Some(auth) = pact_db::device_authorizations::find(&state.db, id).await? else {
        return Ok(Loaded::Respond(see_other("/device")));
    };
    let signed_in = browser.signed_in();
    let brand = pact_db::brands::find(&state.db, &auth.brand_id)
        .await?
        .ok_or_else(|| PageError::NotFound(i18n::t("device-err-no-brand")))?;
    i18n::brand_known(&brand.name, who::Look::of(&brand.settings));
    if auth.status != AuthStatus::Pending {
        return Ok(Loaded::Respond(used_code(Some(&brand), signed_in)));
    }
    if auth.expires_at <= state.clock.now() {
        return Ok(Loaded::Respond(expired_code(Some(&brand), signed_in)));
    }
    let Some((user_sub, user_label)) = signed_in_as(state, &s, &brand.id).await? else {
        return Ok(Loaded::Respond(
            sign_in_first(state, browser, &s, &brand, &auth).await?,
        ));
    };
    // A step-up asked in a delegated turn belongs to the person the turn
    // acted for, and an "Allow once" request to the person whose grant the
    // call was made under: nobody else sees what it asks or decides it
    // (deciding checks it again under the authorization's lock).
    if !consent::is_theirs_to_decide(state, &auth, &user_sub).await? {
        let key = if auth.operations.is_some() {
            "consent-err-operation-gone"
        } else {
            "consent-err-other-account"
        };
        return Err(PageError::Forbidden(i18n::t(key)));
    }
    Ok(Loaded::Ready(Box::new(Deciding {
        session: s,
        auth,
        brand,
        user_sub,
        user_label,
    })))
}

async fn brand_scopes(node: &NodeInner, brand_id: &BrandId) -> Result<Vec<BrandScope>, PageError> {
    Ok(pact_db::scopes::list(&node.db, brand_id).await?)
}

async fn consent_page(
    state: &AppState,
    d: &Deciding,
    chosen: Option<&BTreeSet<String>>,
    chosen_details: Option<&serde_json::Value>,
    error: Option<&str>,
    status: StatusCode,
) -> Result<Response, PageError> {
    let now = state.clock.now();
    let agent = pact_db::agents::find(&state.db, &d.auth.pa_issuer).await?;
    let agent_unverified = agent.as_ref().is_some_and(|a| !a.verified);
    // Names and descriptions are registered by operators, but shown visibly
    // all the same: the person must see what the text really holds.
    let agent_name = agent.map_or_else(
        || i18n::t("consent-unregistered-agent"),
        |a| hidden_chars::visible(&a.name),
    );
    let meta = pact_db::agents::metadata(&state.db, &d.auth.pa_issuer)
        .await?
        .unwrap_or_default();
    who::refresh_in_background(state, &d.auth.pa_issuer, &meta, now);
    let links = [
        ("consent-homepage", &meta.homepage_uri),
        ("consent-privacy", &meta.policy_uri),
        ("consent-terms", &meta.tos_uri),
    ]
    .into_iter()
    .filter_map(|(label, uri)| {
        uri.as_ref().map(|u| LinkRow {
            label: i18n::t(label),
            href: u.clone(),
            host: who::link_host(u),
        })
    })
    .collect();
    let agent_initial = agent_name
        .chars()
        .find(|c| c.is_alphanumeric())
        .map_or_else(|| "?".to_owned(), |c| c.to_uppercase().collect());
    let offered = brand_scopes(state, &d.brand.id).await?;
    let describe = |id: &str| {
        let text = offered
            .iter()
            .find(|s| s.scope_id == id)
            .map_or_else(|| id.to_owned(), |s| s.description.clone());
        hidden_chars::visible(&text)
    };
    let scopes = d
        .auth
        .scopes
        .iter()
        .map(|id| ScopeRow {
            id: id.clone(),
            description: describe(id),
            checked: chosen.is_none_or(|c| c.contains(id)),
            requires_mfa: offered.iter().any(|s| s.scope_id == *id && s.requires_mfa),
        })
        .collect();
    let types = authz_details::types_from_settings(&d.brand.settings);
    let operations: Vec<OperationRow> = crate::agent::asked::asked_of(d.auth.operations.as_ref())
        .unwrap_or_default()
        .iter()
        .map(|o| OperationRow {
            summary: crate::web::operations::summary_text(o),
            beyond: crate::web::operations::beyond_text(o),
        })
        .collect();
    // The entries of a one-off approval are its operations, shown above.
    let conditions = if operations.is_empty() {
        super::consent_limits::rows(
            d.auth.authorization_details.as_ref(),
            &types,
            chosen_details,
        )
    } else {
        Vec::new()
    };
    // Information only: an existing grant never approves anything by itself.
    // Everything the agent may already do is listed (issue 30, item 8), so
    // a step-up reads as "this, and now also that" (PACT §5.5).
    let mut already_ids = BTreeSet::new();
    let mut connected = false;
    let connection = Connection {
        brand_id: &d.brand.id,
        pa_issuer: &d.auth.pa_issuer,
        user_sub: &d.user_sub,
    };
    for g in pact_db::grants::active_for(&state.db, connection, now).await? {
        connected = true;
        already_ids.extend(g.scopes);
    }
    let nothing_new = d.auth.scopes.iter().all(|s| already_ids.contains(s));
    // Where the request came from, in words that are true for both kinds:
    // the agent's own device authorization request has the address it came
    // from; a step-up link was made by the agent's message to the brand
    // (a2a/send.rs), which has no address worth showing.
    let asked = match &d.auth.request_ip {
        Some(ip) => i18n::t4(
            "consent-asked",
            "ago",
            relative(d.auth.created_at, now),
            "at",
            absolute(d.auth.created_at),
            "ip",
            ip.as_str(),
            "code",
            i18n::CODE_MARK,
        ),
        None => i18n::t4(
            "consent-asked-by-agent",
            "ago",
            relative(d.auth.created_at, now),
            "at",
            absolute(d.auth.created_at),
            "brand",
            d.brand.name.as_str(),
            "code",
            i18n::CODE_MARK,
        ),
    };
    // The code goes in its own element so that it never breaks across
    // lines (white-space: nowrap); the sentence around it stays translated.
    let (asked_before, asked_after) = i18n::around_code(&asked);
    let page = ConsentPage {
        brand_name: &d.brand.name,
        signed_in: true,
        csrf: &d.session.csrf_token,
        authorization: d.auth.id.to_string(),
        agent_name: &agent_name,
        agent_origin: &security::origin_of(&d.auth.pa_issuer),
        agent_unverified,
        agent_logo: meta
            .logo_sha256
            .as_deref()
            .filter(|s| who::is_logo_name(s))
            .map(|s| format!("/logos/{s}")),
        agent_initial,
        links,
        look: who::Look::of(&d.brand.settings),
        user_label: &d.user_label,
        user_code: user_code::display(&d.auth.user_code),
        asked_before,
        asked_after,
        scopes,
        conditions,
        connected,
        nothing_new,
        already: already_ids.iter().map(|id| describe(id)).collect(),
        operations,
        error,
    };
    Ok(render(&page, status))
}

/// `GET /device/consent[?scopes=a+b]` (the ticks to restore after step-up).
pub async fn show(
    State(state): State<AppState>,
    browser: Browser,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let d = match load(&state, &browser).await? {
        Loaded::Ready(d) => d,
        Loaded::Respond(res) => return Ok(res),
    };
    let mut chosen: Option<BTreeSet<String>> = query_param(query.as_deref(), "scopes").map(|s| {
        s.split(' ')
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect()
    });
    let offered = brand_scopes(&state, &d.brand.id).await?;
    let needs_mfa = |id: &String| offered.iter().any(|s| s.scope_id == *id && s.requires_mfa);
    // "Decide without it" (the second-factor page's way back): the request
    // with the permissions that need a second factor unticked.
    if chosen.is_none() && query_param(query.as_deref(), "mfa").as_deref() == Some("skip") {
        chosen = Some(
            d.auth
                .scopes
                .iter()
                .filter(|id| !needs_mfa(id))
                .cloned()
                .collect(),
        );
    }
    // Issue 30, item 7: the second factor a ticked permission requires is
    // asked for before the page, not after Approve, so that one Approve is
    // the person's whole decision. Only pactd's own accounts are sent ahead:
    // the brand's OpenID provider and the brand's own login are asked on
    // Approve, as before (their sign-in is a trip elsewhere). A one-off
    // approval asks for its scopes as they are (Approve checks the same).
    let ticked: BTreeSet<String> = match &chosen {
        Some(c) if d.auth.operations.is_none() => c.clone(),
        _ => d.auth.scopes.iter().cloned().collect(),
    };
    if d.session.user_id.is_some()
        && ticked.iter().any(needs_mfa)
        && !mfa_is_recent(&d.session, state.clock.now())
    {
        return Ok(see_other(&reconfirm_url(&ticked)));
    }
    consent_page(&state, &d, chosen.as_ref(), None, None, StatusCode::OK).await
}

/// What the consent form posts besides its ticked `scope` boxes (read with
/// `Fields::all`) and its limits (`consent_limits::chosen`): which request
/// it showed and the button pressed.
#[derive(Debug, serde::Deserialize)]
struct Decision {
    authorization: Option<String>,
    action: Option<String>,
}

/// `POST /device/consent`: Approve (the ticked scopes) or Deny.
pub async fn decide(
    State(state): State<AppState>,
    SessionForm { browser, form, .. }: SessionForm<Fields>,
) -> Result<Response, PageError> {
    let d = match load(&state, &browser).await? {
        Loaded::Ready(d) => d,
        Loaded::Respond(res) => return Ok(res),
    };
    // The decision is about the request this form showed, never about
    // whatever code the session holds now (one entered in another tab).
    let decision: Decision = form.decode()?;
    if decision.authorization.as_deref() != Some(d.auth.id.to_string().as_str()) {
        tracing::info!(authorization = %d.auth.id, "consent refused: the form was for another request");
        return Err(PageError::Forbidden(i18n::t("consent-err-other-request")));
    }
    let now = state.clock.now();
    match decision.action.as_deref() {
        Some("deny") => {
            consent::deny(&state, d.auth.id, Some(&d.user_sub), now)
                .await
                .map_err(consent_error)?;
            tracing::info!(authorization = %d.auth.id, brand = %d.brand.id, "device authorization denied");
            Ok(see_other("/device/done"))
        }
        Some("approve") => approve(&state, &browser, &d, &form, now).await,
        _ => Err(PageError::BadRequest(i18n::t("consent-err-no-action"))),
    }
}

async fn approve(
    state: &AppState,
    browser: &Browser,
    d: &Deciding,
    form: &Fields,
    now: OffsetDateTime,
) -> Result<Response, PageError> {
    // A one-off approval has no choices: its operations are allowed or not.
    let once = d.auth.operations.is_some();
    let ticked: BTreeSet<String> = if once {
        d.auth.scopes.iter().cloned().collect()
    } else {
        form.all("scope").map(str::to_owned).collect()
    };
    if ticked.is_empty() {
        return consent_page(
            state,
            d,
            Some(&ticked),
            None,
            Some(&i18n::t("consent-err-none-ticked")),
            StatusCode::BAD_REQUEST,
        )
        .await;
    }
    // The limits as the person set them (narrower only, RFC 9396 §7).
    let types = authz_details::types_from_settings(&d.brand.settings);
    let chosen =
        match super::consent_limits::chosen(form, d.auth.authorization_details.as_ref(), &types) {
            Ok(chosen) => chosen,
            Err(message) => {
                return consent_page(
                    state,
                    d,
                    Some(&ticked),
                    None,
                    Some(&message),
                    StatusCode::BAD_REQUEST,
                )
                .await;
            }
        };
    let requested: BTreeSet<String> = d.auth.scopes.iter().cloned().collect();
    if !ticked.is_subset(&requested) {
        return Err(consent_error(ConsentError::ScopesNotRequested));
    }
    let offered = brand_scopes(state, &d.brand.id).await?;
    // A step-up's grant carries the agent's earlier scopes on with a new
    // lifetime (consent::approve): a scope among them that needs a second
    // factor needs a recent one now too, or approving anything small would
    // renew it without one, again and again.
    let carried: BTreeSet<String> = pact_db::grants::active_for(
        &state.db,
        Connection {
            brand_id: &d.auth.brand_id,
            pa_issuer: &d.auth.pa_issuer,
            user_sub: &d.user_sub,
        },
        now,
    )
    .await?
    .into_iter()
    .flat_map(|g| g.scopes)
    .collect();
    let needs_mfa = offered
        .iter()
        .any(|s| s.requires_mfa && (ticked.contains(&s.scope_id) || carried.contains(&s.scope_id)));
    if needs_mfa && !mfa_is_recent(&d.session, now) {
        if d.session.user_id.is_some() {
            return Ok(see_other(&reconfirm_url(&ticked)));
        }
        // The brand's OpenID provider: ask it for a sign-in with a second factor.
        if let Some(cfg) = pact_db::brand_oidc::find(&state.db, &d.brand.id).await? {
            return oidc_login::login_page(
                state,
                &d.session,
                &d.brand,
                &cfg,
                &d.auth,
                Some(&ticked),
            )
            .await;
        }
        // Brand's own login: only the brand can check a second factor.
        if let Some(login) = BrandLogin::from_settings(&d.brand.settings) {
            return brand_login::login_page(
                state,
                browser,
                &d.brand,
                &login,
                &d.auth,
                Some(&i18n::t("consent-err-mfa-brand-login")),
                StatusCode::FORBIDDEN,
            )
            .await;
        }
        return Err(PageError::Forbidden(i18n::t("consent-err-mfa")));
    }
    if once {
        return approve_operations(state, d, now).await;
    }
    let grant = consent::approve_for(
        state,
        Approval {
            authorization_id: d.auth.id,
            user_sub: &d.user_sub,
            scopes: ticked.clone(),
            authorization_details: chosen.clone(),
        },
        d.session.user_id,
        now,
    )
    .await;
    let grant = match grant {
        Err(ConsentError::DetailsNotRequested) => {
            return consent_page(
                state,
                d,
                Some(&ticked),
                chosen.as_ref(),
                Some(&i18n::t("consent-err-narrow-only")),
                StatusCode::BAD_REQUEST,
            )
            .await;
        }
        other => other.map_err(consent_error)?,
    };
    tracing::info!(authorization = %d.auth.id, grant = %grant.id, brand = %d.brand.id, "device authorization approved");
    Ok(see_other("/device/done"))
}

/// Allows the operations of a step-up beyond a limit, once each, on the
/// person's own grants (`consent::approve_operations`).
async fn approve_operations(
    node: &NodeInner,
    d: &Deciding,
    now: OffsetDateTime,
) -> Result<Response, PageError> {
    match consent::approve_operations(node, d.auth.id, &d.user_sub, now).await {
        Ok(grants) => {
            tracing::info!(authorization = %d.auth.id, brand = %d.brand.id, grants = grants.len(), "operations allowed once");
            Ok(see_other("/device/done"))
        }
        Err(ConsentError::OperationGrantGone) => {
            Err(PageError::Forbidden(i18n::t("consent-err-operation-gone")))
        }
        Err(e) => Err(consent_error(e)),
    }
}

// ---------------------------------------------------------------- not you

/// `POST /device/not-you`: the person on the consent page is signed in as
/// someone else (a shared computer). Sign out, keep only the request being
/// decided, and go back to it: the consent page then asks to sign in again
/// (PACT §5.2: the grant is for the person who approves). A plain form, so
/// it works without JavaScript.
/// What "Not you?" on the consent page posts (besides its CSRF token): the
/// request the page showed.
#[derive(Debug, serde::Deserialize)]
pub struct NotYouForm {
    authorization: Option<String>,
}

pub async fn not_you(
    State(node): State<Node>,
    SessionForm {
        session: old, form, ..
    }: SessionForm<NotYouForm>,
) -> Result<Response, PageError> {
    let Some(id) = old.device_authorization_id else {
        return Ok(see_other("/device"));
    };
    // Like Approve: the form must be for the request the session holds.
    if form.authorization.as_deref() != Some(id.to_string().as_str()) {
        return Err(PageError::Forbidden(i18n::t(
            "consent-err-other-request-not-you",
        )));
    }
    // A new session id (rotation), signed out, carrying only the request.
    let (_, cookie) = session::start(
        &node,
        Some(&old),
        SessionState {
            device_authorization_id: Some(id),
            ..SessionState::default()
        },
    )
    .await?;
    tracing::info!(authorization = %id, "signed out from the consent page (\"not you\")");
    Ok(with_cookie(see_other("/device/consent"), Some(cookie)))
}

// ---------------------------------------------------------------- done

/// `GET /device/done`.
pub async fn done(State(node): State<Node>, browser: Browser) -> Result<Response, PageError> {
    let signed_in = browser.signed_in();
    let auth = match browser
        .session
        .as_ref()
        .and_then(|s| s.device_authorization_id)
    {
        Some(id) => pact_db::device_authorizations::find(&node.db, id).await?,
        None => None,
    };
    let Some(auth) = auth.filter(|a| a.status != AuthStatus::Pending) else {
        return Ok(see_other("/device"));
    };
    let brand = pact_db::brands::find(&node.db, &auth.brand_id).await?;
    let brand_name = brand.as_ref().map_or(NO_BRAND, |b| b.name.as_str());
    let look = brand
        .as_ref()
        .map_or_else(who::Look::none, |b| who::Look::of(&b.settings));
    let agent = pact_db::agents::find(&node.db, &auth.pa_issuer).await?;
    let agent_name = agent.map_or_else(|| i18n::t("done-your-agent"), |a| a.name);
    let approved = auth.status == AuthStatus::Approved || auth.status == AuthStatus::Redeemed;
    // What the agent may now do is the decider's to read: anyone may type a
    // code at /device without signing in, and must not learn from this page
    // what someone else allowed (their earlier grants included).
    let decider = match &browser.session {
        Some(s) => signed_in_as(&node, s, &auth.brand_id)
            .await?
            .map(|(sub, _)| sub),
        None => None,
    };
    let theirs = decider.is_some() && decider == auth.user_sub;
    let granted = match (approved && theirs, auth.grant_id) {
        (true, Some(gid)) => {
            let scopes = pact_db::grants::find(&node.db, gid)
                .await?
                .map(|g| g.scopes)
                .unwrap_or_default();
            let offered = brand_scopes(&node, &auth.brand_id).await?;
            // Everything the agent may now do, not only this request's part:
            // an approval can extend an earlier grant.
            scopes
                .iter()
                .map(|id| {
                    offered
                        .iter()
                        .find(|s| s.scope_id == *id)
                        .map_or_else(|| id.clone(), |s| s.description.clone())
                })
                .collect()
        }
        _ => Vec::new(),
    };
    let page = DonePage {
        brand_name,
        brand_id: &auth.brand_id,
        signed_in,
        approved,
        agent_name: &agent_name,
        granted,
        look,
    };
    Ok(render(&page, StatusCode::OK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::Duration;

    #[test]
    fn relative_times_read_naturally() {
        let t = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(relative(t, t + Duration::seconds(5)), "just now");
        assert_eq!(relative(t, t + Duration::seconds(61)), "1 minute ago");
        assert_eq!(relative(t, t + Duration::minutes(9)), "9 minutes ago");
        assert_eq!(relative(t, t + Duration::hours(2)), "2 hours ago");
        assert_eq!(relative(t + Duration::seconds(3), t), "just now");
        assert_eq!(absolute(t), "1970-01-01 00:00:00 UTC");
    }

    #[test]
    fn reconfirm_keeps_the_ticks_in_an_encoded_next() {
        let ticked: BTreeSet<String> = ["orders:read", "a&b"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        let url = reconfirm_url(&ticked);
        let q = url.strip_prefix("/login/second-factor?").unwrap();
        let next = query_param(Some(q), "next").unwrap();
        assert_eq!(security::safe_next(Some(&next)), next);
        let back = next.strip_prefix("/device/consent?").unwrap();
        assert_eq!(
            query_param(Some(back), "scopes").unwrap(),
            "a&b orders:read"
        );
    }
}
