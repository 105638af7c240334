//! Sign-in with the merchant's own OpenID provider (OpenID Connect Core 1.0,
//! authorization code flow; RFC 7636 PKCE with S256; a confidential client
//! authenticating with `client_secret_basic`, RFC 6749 §2.3.1, or with
//! `private_key_jwt`, Core §9 and RFC 7523 §2.2, signed with pactd's own key).
//!
//! A brand in this mode has a `brand_oidc` row (`pactd brand set
//! --login-oidc-*`). After the person confirms a code at `/device`, the page
//! links to the provider's authorization endpoint (a plain link: the CSP's
//! `form-action 'self'` forbids sending a form's navigation elsewhere). The
//! endpoints come from OpenID Connect Discovery 1.0 at that moment and are
//! kept with the trip, so the callback talks to the same provider.
//!
//! * `state` (256 random bits) is stored only as its hash, with the session
//!   that started the trip and the device authorization being decided. The
//!   callback takes the trip only for that session and deletes it as it reads
//!   it: a state from another browser, or one used before, changes nothing
//!   (login CSRF, RFC 6749 §10.12, RFC 9700 §4.7.1).
//! * `nonce` (256 random bits) must come back in the ID token (Core
//!   §3.1.3.7 rule 11), so a token obtained for another request cannot be
//!   injected.
//! * The ID token is checked by `pact_jose::verify_id_token`: the signature
//!   with a key from the discovered `jwks_uri` through the SSRF-guarded JWKS
//!   cache, ES256/RS256 only, `iss`, `aud`, `azp`, `exp`, `iat`, `nonce`,
//!   and `auth_time` when a re-authentication was asked for.
//! * An `iss` parameter on the callback (RFC 9207) must be the provider's.
//! * The person's id at the brand (the delegation token's `sub`) is the
//!   configured claim; `email` counts only with `email_verified: true` (an
//!   unverified address is anyone's to claim at many providers).
//! * A second factor counts when `amr` (RFC 8176) holds `mfa`, `otp`, `hwk`
//!   or `sc`, or `acr` is one of the brand's `--mfa-acr` values, and it
//!   counts from the token's `auth_time` (no `auth_time`, no second factor). A scope that
//!   needs one sends the person back to the provider with `prompt=login`,
//!   `max_age=0` and the `acr_values`; if the provider still does not report
//!   a second factor, a page says so.
//! * OpenID Connect Back-Channel Logout 1.0: the provider POSTs a logout
//!   token to `/oidc/{brand}/backchannel-logout`, which ends the pactd
//!   sessions that came from that provider session (or that person).
//!
//! * `private_key_jwt`: the assertion is signed with the key that signs
//!   delegation tokens at that moment, so the provider verifies it with the
//!   brand's published JWKS (`<public URL>/a2a/<brand>/oauth/jwks.json`,
//!   registered there as the client's `jwks_uri`), which follows key
//!   rotation by itself: a new key is published before it signs anything.
//!   `iss` = `sub` = the client id, one `aud` (see [`assertion_audience`]),
//!   a random `jti`, `iat` and an `exp` a minute later. The provider's
//!   discovery document must offer the method and, when it lists them,
//!   ES256; otherwise nobody is sent to the provider and the log says why.
//!
//! Every failure is a page (in the person's language) saying nothing was changed; the session is only
//! created (rotated, `session::start`) once everything has verified, so a
//! refused callback never leaves a half-signed-in browser, and nothing is
//! ever approved here: approval stays the consent page's explicit click.
//! The client secret, the code, the tokens and the verifier are never logged.

use std::collections::BTreeSet;
use std::time::Duration;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use pact_db::brand_oidc::{BrandOidc, Trip, TripLookup, assertion_aud, client_auth};
use pact_db::brands::Brand;
use pact_db::device_authorizations::{DeviceAuthorization, Status as AuthStatus};
use pact_db::ids::BrandId;
use pact_db::sessions::{Session, SessionState};
use pact_jose::{
    CLIENT_ASSERTION_ALG, CLIENT_ASSERTION_TYPE, ClientAssertion, IdTokenExpect, OIDC_SKEW_SECS,
    OidcTokenError,
};
use pact_node::node::NodeInner;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use url::Url;

use super::i18n;
use super::page::{ErrorPage, PageError, render};
use super::session::{self, Browser};
use crate::domain::{secrets, user_code};
use crate::state::AppState;

/// How long a trip to the provider may take (longer than a device code lives).
pub const TRIP_LIFETIME: time::Duration = session::HANDOFF_LIFETIME;
/// One discovery or token call, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A discovery document or token response is a few KiB.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest user id accepted from the configured claim.
const MAX_USER_ID_LEN: usize = 256;
/// RFC 8176 methods that are a second factor, or include one.
pub const MFA_AMR: &[&str] = &["mfa", "otp", "hwk", "sc"];

/// `<public_url>/oidc/<brand>/callback`: the redirect URI to register at the provider.
pub fn redirect_uri(public_url: &str, brand_id: &BrandId) -> String {
    format!(
        "{}/oidc/{brand_id}/callback",
        public_url.trim_end_matches('/')
    )
}

/// `<public_url>/oidc/<brand>/backchannel-logout`: the back-channel logout URI to register.
pub fn backchannel_logout_uri(public_url: &str, brand_id: &BrandId) -> String {
    format!(
        "{}/oidc/{brand_id}/backchannel-logout",
        public_url.trim_end_matches('/')
    )
}

/// Whether an ID token's `amr`/`acr` report a second factor.
pub fn reports_mfa(amr: &[String], acr: Option<&str>, mfa_acr: &[String]) -> bool {
    amr.iter().any(|m| MFA_AMR.contains(&m.as_str()))
        || acr.is_some_and(|a| mfa_acr.iter().any(|v| v == a))
}

// ---------------------------------------------------------------- discovery

pub use crate::oidc_discovery::{Discovered, DiscoveryCache};

/// Why talking to the provider failed. Logged; never shown in detail.
#[derive(Debug)]
pub struct ProviderError(pub String);

fn provider_error(what: impl Into<String>) -> ProviderError {
    ProviderError(what.into())
}

/// A URL pactd's server calls: the jwksUri rules (https, or http to
/// loopback in development; no user info) and, on every connection, the
/// guarded resolver of `state.outbound`.
fn server_url(state: &AppState, raw: &str, name: &str) -> Result<Url, ProviderError> {
    pact_jose::check_jwks_uri(raw, state.jwks.policy().allow_loopback)
        .map_err(|e| provider_error(format!("{name}: {e}")))
}

/// GET or POST with a timeout and a body cap; any status but 200 is an
/// error (no redirects are followed: a 3xx could point at a private address).
async fn bounded(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<(u16, Vec<u8>), ProviderError> {
    let exchange = async {
        let mut res = request
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .map_err(|e| provider_error(format!("{what}: {e}")))?;
        let status = res.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| provider_error(format!("{what}: {e}")))?
        {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(provider_error(format!("{what}: response too large")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    tokio::time::timeout(FETCH_TIMEOUT, exchange)
        .await
        .map_err(|_| provider_error(format!("{what}: timed out")))?
}

fn json_object(body: &[u8], what: &str) -> Result<Map<String, Value>, ProviderError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(provider_error(format!("{what}: not a JSON object"))),
    }
}

/// [`discover`], answered from [`DiscoveryCache`] while its copy is fresh:
/// what the open back-channel logout endpoint uses, so that however many
/// requests arrive, the provider is asked at most once per
/// `oidc_discovery::DISCOVERY_TTL` (issue 28, finding 7).
pub async fn discover_cached(state: &AppState, issuer: &str) -> Result<Discovered, ProviderError> {
    if let Some(found) = state.oidc_discovery.get(issuer) {
        return found.map_err(ProviderError);
    }
    discover(state, issuer).await
}

/// OpenID Connect Discovery 1.0 §4: fetch `<issuer>/.well-known/openid-configuration`
/// and keep what the code flow needs (also in [`DiscoveryCache`]). §4.3: the
/// document's `issuer` must be exactly the configured one (else a document
/// could speak for another provider). PKCE S256 must be offered when the
/// document lists methods.
pub async fn discover(state: &AppState, issuer: &str) -> Result<Discovered, ProviderError> {
    let found = fetch_discovery(state, issuer).await;
    state.oidc_discovery.put(
        issuer,
        found.as_ref().map(Clone::clone).map_err(|e| e.0.clone()),
    );
    found
}

async fn fetch_discovery(state: &AppState, issuer: &str) -> Result<Discovered, ProviderError> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let url = server_url(state, &url, "discovery URL")?;
    let (status, body) = bounded(
        state
            .outbound
            .get(url)
            .header(header::ACCEPT.as_str(), "application/json"),
        "discovery",
    )
    .await?;
    if status != 200 {
        return Err(provider_error(format!("discovery: HTTP {status}")));
    }
    let doc = json_object(&body, "discovery")?;
    let text = |name: &str| doc.get(name).and_then(Value::as_str).map(str::to_owned);
    if text("issuer").as_deref() != Some(issuer) {
        return Err(provider_error(
            "discovery: the document's issuer is not the configured issuer",
        ));
    }
    let authorization_endpoint = text("authorization_endpoint")
        .ok_or_else(|| provider_error("discovery: no authorization_endpoint"))?;
    let authorization_endpoint = browser_url(state, &authorization_endpoint)?;
    let token_endpoint =
        text("token_endpoint").ok_or_else(|| provider_error("discovery: no token_endpoint"))?;
    server_url(state, &token_endpoint, "token_endpoint")?;
    let jwks_uri = text("jwks_uri").ok_or_else(|| provider_error("discovery: no jwks_uri"))?;
    server_url(state, &jwks_uri, "jwks_uri")?;
    if let Some(Value::Array(methods)) = doc.get("code_challenge_methods_supported")
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(provider_error(
            "discovery: the provider does not offer PKCE S256",
        ));
    }
    let strings = |name: &str| match doc.get(name) {
        Some(Value::Array(items)) => Some(
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        ),
        _ => None,
    };
    Ok(Discovered {
        issuer: issuer.to_owned(),
        authorization_endpoint,
        token_endpoint,
        jwks_uri,
        token_endpoint_auth_methods: strings("token_endpoint_auth_methods_supported")
            .unwrap_or_else(|| vec![client_auth::CLIENT_SECRET_BASIC.to_owned()]),
        token_endpoint_auth_signing_algs: strings(
            "token_endpoint_auth_signing_alg_values_supported",
        ),
    })
}

/// Whether the provider takes a `private_key_jwt` client: the method among
/// `token_endpoint_auth_methods_supported` (Discovery §3: when absent, only
/// `client_secret_basic`), and ES256 among
/// `token_endpoint_auth_signing_alg_values_supported` when the provider lists
/// them (pactd's keys are P-256, so it cannot sign RS256). Checked before
/// anyone is sent to the provider: a code that could not be redeemed would be
/// a wasted sign-in. A `client_secret_basic` brand is not checked, so its
/// sign-in behaves as before this method existed.
pub fn check_client_auth(cfg: &BrandOidc, found: &Discovered) -> Result<(), ProviderError> {
    if cfg.client_auth != client_auth::PRIVATE_KEY_JWT {
        return Ok(());
    }
    if !found.token_endpoint_auth_methods.contains(&cfg.client_auth) {
        return Err(provider_error(format!(
            "discovery: the provider does not accept {} at its token endpoint \
             (token_endpoint_auth_methods_supported: {})",
            cfg.client_auth,
            found.token_endpoint_auth_methods.join(" ")
        )));
    }
    if let Some(algs) = &found.token_endpoint_auth_signing_algs
        && !algs.iter().any(|a| a == CLIENT_ASSERTION_ALG)
    {
        return Err(provider_error(format!(
            "discovery: the provider does not accept {CLIENT_ASSERTION_ALG} client assertions \
             (token_endpoint_auth_signing_alg_values_supported: {}); pactd signs them with its \
             P-256 key",
            algs.join(" ")
        )));
    }
    Ok(())
}

/// The `aud` of a client assertion. OpenID Connect Core §9 says it SHOULD be
/// the token endpoint's URL; RFC 7523 §3 only asks for a value that
/// identifies the authorization server, which the issuer identifier does.
/// Providers disagree (Entra ID wants the token endpoint, Auth0 its issuer),
/// so the brand chooses; the default is Core's. Either way it is one string,
/// and the assertion is only ever sent to the token endpoint of the
/// discovery document whose `issuer` is the configured one, so it names the
/// server that receives it.
pub fn assertion_audience<'a>(cfg: &BrandOidc, trip: &'a Trip) -> &'a str {
    if cfg.assertion_aud == assertion_aud::ISSUER {
        &trip.issuer
    } else {
        &trip.token_endpoint
    }
}

/// Where the person's browser is sent: https (http only to loopback, in
/// development), no user info, no fragment (RFC 6749 §3.1).
fn browser_url(state: &AppState, raw: &str) -> Result<Url, ProviderError> {
    let url = Url::parse(raw).map_err(|_| provider_error("authorization_endpoint: not a URL"))?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    let scheme_ok = url.scheme() == "https"
        || (url.scheme() == "http" && loopback && state.jwks.policy().allow_loopback);
    if !scheme_ok
        || !url.username().is_empty()
        || url.password().is_some()
        || url.fragment().is_some()
    {
        return Err(provider_error(
            "authorization_endpoint: not https, or has user info or a fragment",
        ));
    }
    Ok(url)
}

// ---------------------------------------------------------------- the trip out

#[derive(Template)]
#[template(path = "device_external_login.html")]
struct LeavePage<'a> {
    brand_name: &'a str,
    signed_in: bool,
    agent_name: &'a str,
    user_code: String,
    link: String,
    notice: Option<String>,
    look: crate::who::Look,
}

#[derive(Template)]
#[template(path = "oidc_no_mfa.html")]
struct NoMfaPage<'a> {
    brand_name: &'a str,
    signed_in: bool,
}

/// RFC 7636 §4.2: `BASE64URL(SHA256(code_verifier))`.
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn unreachable_provider(brand_name: &str, e: &ProviderError) -> Response {
    tracing::warn!(error = %e.0, "OpenID provider unavailable");
    let page = ErrorPage {
        brand_name,
        title: &i18n::t("oidc-err-unavailable-title"),
        message: &i18n::t("oidc-err-unreachable"),
        signed_in: false,
        look: i18n::known_look(),
    };
    render(&page, StatusCode::BAD_GATEWAY)
}

/// The page that sends the person to the provider for `auth`. With
/// `step_up`, the trip asks for a fresh sign-in with a second factor and
/// brings the ticked scopes back to the consent page.
pub async fn login_page(
    state: &AppState,
    session: &Session,
    brand: &Brand,
    cfg: &BrandOidc,
    auth: &DeviceAuthorization,
    step_up: Option<&BTreeSet<String>>,
) -> Result<Response, PageError> {
    let found = match discover(state, &cfg.issuer)
        .await
        .and_then(|d| check_client_auth(cfg, &d).map(|()| d))
    {
        Ok(d) => d,
        Err(e) => return Ok(unreachable_provider(&brand.name, &e)),
    };
    let now = state.clock.now();
    let (oauth_state, state_hash) = secrets::new_secret();
    let (nonce, _) = secrets::new_secret();
    let (verifier, _) = secrets::new_secret();
    let mut db = state.db.acquire().await?;
    pact_db::brand_oidc::begin_trip(
        &mut db,
        &Trip {
            state_hash,
            session_hash: session.id_hash.clone(),
            brand_id: brand.id.clone(),
            device_authorization_id: auth.id,
            nonce: nonce.clone(),
            code_verifier: verifier.clone(),
            issuer: found.issuer.clone(),
            token_endpoint: found.token_endpoint.clone(),
            jwks_uri: found.jwks_uri.clone(),
            mfa_requested: step_up.is_some(),
            return_scopes: step_up
                .map(|t| t.iter().cloned().collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
            created_at: now,
            expires_at: now + TRIP_LIFETIME,
        },
    )
    .await?;
    let mut link = found.authorization_endpoint.clone();
    {
        let mut q = link.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &cfg.client_id)
            .append_pair(
                "redirect_uri",
                &redirect_uri(&state.config.public_url, &brand.id),
            )
            .append_pair("scope", &cfg.scope)
            .append_pair("state", &oauth_state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &s256_challenge(&verifier))
            .append_pair("code_challenge_method", "S256");
        if step_up.is_some() {
            // Core §3.1.2.1: prompt=login and max_age=0 ask for a new
            // authentication (checked through auth_time), acr_values for
            // the level that includes a second factor.
            q.append_pair("prompt", "login").append_pair("max_age", "0");
            if !cfg.mfa_acr.is_empty() {
                q.append_pair("acr_values", &cfg.mfa_acr.join(" "));
            }
        }
    }
    let agent = pact_db::agents::find(&state.db, &auth.pa_issuer).await?;
    let agent_name = agent.map_or_else(|| i18n::t("ext-an-agent"), |a| a.name);
    let page = LeavePage {
        brand_name: &brand.name,
        signed_in: session.user_id.is_some() || session.external_sub.is_some(),
        agent_name: &agent_name,
        user_code: user_code::display(&auth.user_code),
        link: link.to_string(),
        notice: step_up.map(|_| i18n::t("oidc-step-up-notice")),
        look: crate::who::Look::of(&brand.settings),
    };
    let status = if step_up.is_some() {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::OK
    };
    Ok(render(&page, status))
}

// ---------------------------------------------------------------- the callback

/// Why a callback was refused: logged by reason, shown as a calm page.
#[derive(Debug)]
enum Refusal {
    /// 400: not a callback we understand.
    Malformed(&'static str),
    /// 400: no such trip (never issued, already used, expired).
    Unknown,
    /// 403: a trip started by another browser.
    NotThisBrowser(&'static str),
    /// 400: the request being decided is no longer this one, or is over.
    Stale(&'static str),
    /// 401: the provider's answer does not verify.
    Invalid(String),
    /// 400: the provider refused or the person cancelled (its error code).
    ProviderSaid(String),
    /// 502: the provider could not be reached or answered nonsense.
    Provider(ProviderError),
    Page(PageError),
}

impl From<pact_db::Error> for Refusal {
    fn from(e: pact_db::Error) -> Self {
        Self::Page(PageError::from(e))
    }
}

impl From<PageError> for Refusal {
    fn from(e: PageError) -> Self {
        Self::Page(e)
    }
}

impl From<ProviderError> for Refusal {
    fn from(e: ProviderError) -> Self {
        Self::Provider(e)
    }
}

/// The page for a refused callback, in the person's language; the reason
/// (never a secret) goes to the log only.
fn refused(r: Refusal) -> Result<Response, PageError> {
    let not_accepted = || i18n::t("oidc-err-not-accepted-title");
    let (status, reason, title, message): (StatusCode, String, String, String) = match r {
        Refusal::Page(e) => return Err(e),
        Refusal::Malformed(why) => (
            StatusCode::BAD_REQUEST,
            why.to_owned(),
            not_accepted(),
            i18n::t("oidc-err-malformed"),
        ),
        Refusal::Unknown => (
            StatusCode::BAD_REQUEST,
            "unknown, used or expired state".to_owned(),
            not_accepted(),
            i18n::t("oidc-err-unknown"),
        ),
        Refusal::NotThisBrowser(why) => (
            StatusCode::FORBIDDEN,
            why.to_owned(),
            not_accepted(),
            i18n::t("oidc-err-not-this-browser"),
        ),
        Refusal::Stale(why) => (
            StatusCode::BAD_REQUEST,
            why.to_owned(),
            i18n::t("oidc-err-stale-title"),
            i18n::t("oidc-err-stale"),
        ),
        Refusal::Invalid(why) => (
            StatusCode::UNAUTHORIZED,
            why,
            not_accepted(),
            i18n::t("oidc-err-invalid"),
        ),
        Refusal::ProviderSaid(code) => (
            StatusCode::BAD_REQUEST,
            format!("provider error {code}"),
            i18n::t("oidc-err-provider-said-title"),
            i18n::t1("oidc-err-provider-said", "code", &code),
        ),
        Refusal::Provider(e) => (
            StatusCode::BAD_GATEWAY,
            e.0,
            i18n::t("oidc-err-unavailable-title"),
            i18n::t("oidc-err-provider"),
        ),
    };
    tracing::info!(reason = %reason, "OpenID sign-in refused");
    let (brand_name, look) = i18n::ctx()
        .brand
        .unwrap_or_else(|| ("pactd".to_owned(), crate::who::Look::none()));
    let page = ErrorPage {
        brand_name: &brand_name,
        title: &title,
        message: &message,
        signed_in: false,
        look,
    };
    Ok(render(&page, status))
}

/// The one value of `name` in a query; `None` when absent or empty, and an
/// error when repeated (RFC 6749 §3.1: parameters must not be included more than once).
fn single(query: &str, name: &str) -> Result<Option<String>, Refusal> {
    let mut found = None;
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        if k == name {
            if found.is_some() {
                return Err(Refusal::Malformed("a parameter is repeated"));
            }
            found = Some(v.into_owned());
        }
    }
    Ok(found.filter(|v| !v.is_empty()))
}

/// What a verified callback establishes.
struct SignedIn {
    brand_id: BrandId,
    user_id: String,
    provider_sub: String,
    sid: Option<String>,
    mfa: bool,
    /// When the second factor was proven, as far as the provider says.
    mfa_at: Option<OffsetDateTime>,
    trip: Trip,
}

/// When the second factor an ID token reports was proven: at its
/// `auth_time` (Core §2), never when the token was issued. A provider's
/// single sign-on session can hand out tokens with `amr: ["mfa"]` for days
/// after the one time the person used their factor; counting such a token as
/// a second factor "now" would let an old session approve a scope that asks
/// for a recent one (the session's RECONFIRM_WINDOW). Without `auth_time`
/// the moment is unknown and nothing is counted: a scope that needs it sends
/// the person back with `max_age=0`, whose answer must carry a fresh
/// `auth_time`. A time in the future counts as `now`.
pub fn second_factor_at(
    mfa: bool,
    auth_time: Option<i64>,
    now: OffsetDateTime,
) -> Option<OffsetDateTime> {
    if !mfa {
        return None;
    }
    let at = OffsetDateTime::from_unix_timestamp(auth_time?).ok()?;
    Some(at.min(now))
}

/// `GET /oidc/{brand}/callback?code=…&state=…[&iss=…]` (or `error=…`).
pub async fn callback(
    State(state): State<AppState>,
    Path(brand_id): Path<String>,
    browser: Browser,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let now = state.clock.now();
    let done = match verify_callback(
        &state,
        &brand_id,
        &browser,
        query.as_deref().unwrap_or(""),
        now,
    )
    .await
    {
        Ok(s) => s,
        Err(r) => return refused(r),
    };
    let (new_session, cookie) = session::start(
        &state,
        browser.session.as_ref(),
        SessionState {
            brand_id: Some(done.brand_id.clone()),
            external_sub: Some(done.user_id.clone()),
            mfa_at: done.mfa_at,
            device_authorization_id: Some(done.trip.device_authorization_id),
            ..SessionState::default()
        },
    )
    .await?;
    pact_db::brand_oidc::link_session(
        &state.db,
        &new_session.id_hash,
        &done.brand_id,
        &done.provider_sub,
        done.sid.as_deref(),
    )
    .await?;
    tracing::info!(brand = %done.brand_id, mfa = done.mfa, "signed in through the brand's OpenID provider");
    let mut res = if done.trip.mfa_requested && !done.mfa {
        let brand = pact_db::brands::find(&state.db, &done.brand_id).await?;
        let page = NoMfaPage {
            brand_name: brand.as_ref().map_or("pactd", |b| b.name.as_str()),
            signed_in: true,
        };
        render(&page, StatusCode::FORBIDDEN)
    } else {
        let to = if done.trip.return_scopes.is_empty() {
            "/device/consent".to_owned()
        } else {
            format!(
                "/device/consent?{}",
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("scopes", &done.trip.return_scopes)
                    .finish()
            )
        };
        Redirect::to(&to).into_response()
    };
    res.headers_mut().append(header::SET_COOKIE, cookie);
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

async fn verify_callback(
    state: &AppState,
    brand_id: &str,
    browser: &Browser,
    query: &str,
    now: OffsetDateTime,
) -> Result<SignedIn, Refusal> {
    let oauth_state = single(query, "state")?.ok_or(Refusal::Malformed("no state"))?;
    let session_hash = browser.session.as_ref().map(|s| s.id_hash.as_slice());
    // The trip is spent here whatever follows: a code or state seen once is
    // never good again (RFC 9700 §4.5.3, §2.1.1).
    let mut db = state.db.acquire().await?;
    let trip = match pact_db::brand_oidc::take_trip(
        &mut db,
        &secrets::hash(&oauth_state),
        session_hash,
        now,
    )
    .await?
    {
        TripLookup::Taken(t) => *t,
        TripLookup::OtherSession => {
            return Err(Refusal::NotThisBrowser("state of another browser's trip"));
        }
        TripLookup::Unknown => return Err(Refusal::Unknown),
    };
    drop(db);
    // The path's text is compared with the trip's brand, which the trip was
    // made for; from here on the brand is the trip's.
    if trip.brand_id != brand_id {
        return Err(Refusal::Malformed("callback path names another brand"));
    }
    let brand_id = &trip.brand_id.clone();
    // RFC 9207 §2.4: when the provider names itself, it must be the one this
    // trip went to (mix-up defence).
    if let Some(iss) = single(query, "iss")?
        && iss != trip.issuer
    {
        return Err(Refusal::Invalid(
            "iss parameter is not the provider's".to_owned(),
        ));
    }
    if let Some(error) = single(query, "error")? {
        // Shown to the person: keep it to the RFC 6749 §4.1.2.1 code alphabet.
        let code: String = error
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        return Err(Refusal::ProviderSaid(code));
    }
    let code = single(query, "code")?.ok_or(Refusal::Malformed("no code"))?;
    let session = browser
        .session
        .as_ref()
        .ok_or(Refusal::NotThisBrowser("no session"))?;
    if session.device_authorization_id != Some(trip.device_authorization_id) {
        return Err(Refusal::Stale("the session moved on to another request"));
    }
    let auth = pact_db::device_authorizations::find(&state.db, trip.device_authorization_id)
        .await?
        .ok_or(Refusal::Stale("authorization gone"))?;
    if auth.status != AuthStatus::Pending || auth.expires_at <= now || auth.brand_id != brand_id {
        return Err(Refusal::Stale("authorization not pending"));
    }
    let cfg = pact_db::brand_oidc::find(&state.db, brand_id)
        .await?
        .ok_or(Refusal::Stale(
            "brand no longer signs in through a provider",
        ))?;
    if cfg.issuer != trip.issuer {
        return Err(Refusal::Stale("brand's provider changed during the trip"));
    }
    let client = client_authentication(state, &cfg, &trip, now)?;
    let id_token = redeem(state, &cfg, &trip, &code, &client).await?;
    let parsed =
        pact_jose::parse_oidc_token(&id_token).map_err(|e| Refusal::Invalid(e.to_string()))?;
    let key = state
        .jwks
        .key_for(&trip.jwks_uri, parsed.kid(), parsed.alg())
        .await
        .map_err(|e| {
            tracing::warn!(brand = %brand_id, error = %e, "OpenID provider key unavailable");
            Refusal::Invalid("no key for the ID token".to_owned())
        })?;
    let expect = IdTokenExpect {
        issuer: &trip.issuer,
        client_id: &cfg.client_id,
        nonce: &trip.nonce,
        auth_after: trip.mfa_requested.then(|| trip.created_at.unix_timestamp()),
    };
    let token = pact_jose::verify_id_token(&parsed, &key, &expect, now.unix_timestamp())
        .map_err(|e: OidcTokenError| Refusal::Invalid(e.to_string()))?;
    let user_id = user_id_from(&token.claims, &cfg.user_claim)
        .map_err(|why| Refusal::Invalid(why.to_owned()))?;
    let mfa = reports_mfa(&token.amr, token.acr.as_deref(), &cfg.mfa_acr);
    Ok(SignedIn {
        brand_id: brand_id.clone(),
        user_id,
        provider_sub: token.sub,
        sid: token.sid,
        mfa,
        mfa_at: second_factor_at(mfa, token.auth_time, now),
        trip,
    })
}

/// What an ID token claim is worth as the person's id at the brand (the
/// delegation token's `sub`: it decides whose grants these are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserClaim {
    /// `sub`: the provider's stable, never reassigned id (Core §2, §5.7).
    Stable,
    /// A claim the person can set at many providers, usable only when the
    /// provider says it verified it, with this companion claim set to `true`
    /// (Core §5.1): `email` with `email_verified`, `phone_number` with
    /// `phone_number_verified`.
    Verified(&'static str),
    /// A claim of the merchant's own (an employee number, Entra's `oid`):
    /// the operator chose it and vouches for it.
    Custom,
}

/// Core §5.1 profile claims the person edits freely and that are not unique
/// (§5.7: "MUST NOT" be relied upon as identifiers), and the protocol claims
/// of the token itself: none names a person, so none may be the user claim.
const NOT_AN_IDENTIFIER: &[&str] = &[
    "name",
    "given_name",
    "family_name",
    "middle_name",
    "nickname",
    "preferred_username",
    "profile",
    "picture",
    "website",
    "gender",
    "birthdate",
    "zoneinfo",
    "locale",
    "updated_at",
    "address",
    "email_verified",
    "phone_number_verified",
    "iss",
    "aud",
    "exp",
    "iat",
    "nbf",
    "jti",
    "nonce",
    "auth_time",
    "acr",
    "amr",
    "azp",
    "at_hash",
    "c_hash",
    "sid",
    "events",
];

/// The rule for `claim` as the user claim, or why it cannot be one. Checked
/// when it is configured (`pactd brand set --user-claim`) and again at every
/// sign-in (a row stored before this rule).
pub fn user_claim_rule(claim: &str) -> Result<UserClaim, String> {
    match claim {
        "sub" => Ok(UserClaim::Stable),
        "email" => Ok(UserClaim::Verified("email_verified")),
        "phone_number" => Ok(UserClaim::Verified("phone_number_verified")),
        c if NOT_AN_IDENTIFIER.contains(&c) => Err(format!(
            "the claim {c:?} cannot be the user claim: the person can change it or it does not              name a person (OpenID Connect Core §5.1, §5.7); use sub, email (verified),              phone_number (verified) or a claim of your own"
        )),
        _ => Ok(UserClaim::Custom),
    }
}

/// The person's id at the brand: the configured claim, a non-empty string,
/// under [`user_claim_rule`]: `email` and `phone_number` only when the
/// provider says it verified them (at many providers anyone can put any
/// address or number on an account), profile and protocol claims never.
pub fn user_id_from(claims: &Map<String, Value>, claim: &str) -> Result<String, &'static str> {
    let rule =
        user_claim_rule(claim).map_err(|_| "the configured user claim cannot name a person")?;
    let value = match claims.get(claim) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_USER_ID_LEN => s.clone(),
        Some(Value::Number(n)) if rule == UserClaim::Custom => n.to_string(),
        Some(_) => return Err("the user claim is not a usable string"),
        None => return Err("the ID token lacks the user claim"),
    };
    if let UserClaim::Verified(flag) = rule
        && claims.get(flag) != Some(&Value::Bool(true))
    {
        return Err(if claim == "email" {
            "the e-mail address is not verified by the provider"
        } else {
            "the user claim is not verified by the provider"
        });
    }
    Ok(value)
}

/// How the token request proves it comes from pactd (RFC 6749 §2.3).
enum ClientAuth {
    /// `client_secret_basic`: the `Authorization` header's credentials.
    Basic(String),
    /// `private_key_jwt`: the signed client assertion.
    Assertion(String),
}

/// The brand's client authentication for one token request: the secret
/// opened with the master key, or a fresh assertion signed with the key that
/// signs at `now` (published at the brand's JWKS, which the provider knows
/// as this client's `jwks_uri`).
fn client_authentication(
    node: &NodeInner,
    cfg: &BrandOidc,
    trip: &Trip,
    now: OffsetDateTime,
) -> Result<ClientAuth, Refusal> {
    let internal = |why: &str| Refusal::Page(PageError::Internal(why.to_owned().into()));
    if cfg.client_auth == client_auth::PRIVATE_KEY_JWT {
        let key = node
            .keys
            .current()
            .signing_key(now)
            .map_err(|e| Refusal::Page(PageError::internal(e)))?;
        // Core §9: a jti the provider has not seen; 256 random bits.
        let (jti, _) = secrets::new_secret();
        let assertion = ClientAssertion::new(
            &cfg.client_id,
            assertion_audience(cfg, trip),
            &jti,
            now.unix_timestamp(),
        )
        .sign(&key)
        .map_err(|e| Refusal::Page(PageError::internal(e)))?;
        return Ok(ClientAuth::Assertion(assertion));
    }
    let sealed = cfg
        .client_secret_sealed
        .as_deref()
        .ok_or_else(|| internal("the brand has no client secret"))?;
    let secret = node
        .config
        .master_key
        .open(
            sealed,
            &pact_db::brand_oidc::client_secret_aad(&cfg.brand_id),
        )
        .map_err(|_| internal("the brand's client secret does not open with the master key"))?;
    let secret =
        String::from_utf8(secret).map_err(|_| internal("the client secret is not UTF-8"))?;
    // RFC 6749 §2.3.1: both parts form-urlencoded before base64.
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    Ok(ClientAuth::Basic(STANDARD.encode(format!(
        "{}:{}",
        enc(&cfg.client_id),
        enc(&secret)
    ))))
}

/// RFC 6749 §4.1.3 with RFC 7636 §4.5: trade the code for tokens at the
/// token endpoint, authenticating as [`client_authentication`] made ready.
/// Returns the ID token.
async fn redeem(
    state: &AppState,
    cfg: &BrandOidc,
    trip: &Trip,
    code: &str,
    client: &ClientAuth,
) -> Result<String, Refusal> {
    let url = server_url(state, &trip.token_endpoint, "token_endpoint")?;
    // The serializer is not `Send`: it lives only in this block, not across
    // the request's await.
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair(
                "redirect_uri",
                &redirect_uri(&state.config.public_url, &cfg.brand_id),
            )
            .append_pair("code_verifier", &trip.code_verifier);
        if let ClientAuth::Assertion(assertion) = client {
            // RFC 7521 §4.2 / RFC 7523 §2.2: the assertion and its type in
            // the form; client_id too, which RFC 7521 §4.2 allows and some
            // providers expect.
            form.append_pair("client_id", &cfg.client_id)
                .append_pair("client_assertion_type", CLIENT_ASSERTION_TYPE)
                .append_pair("client_assertion", assertion);
        }
        form.finish()
    };
    let mut request = state.outbound.post(url);
    if let ClientAuth::Basic(credentials) = client {
        request = request.header(
            header::AUTHORIZATION.as_str(),
            format!("Basic {credentials}"),
        );
    }
    let (status, body) = bounded(
        request
            .header(
                header::CONTENT_TYPE.as_str(),
                "application/x-www-form-urlencoded",
            )
            .header(header::ACCEPT.as_str(), "application/json")
            .body(form),
        "token endpoint",
    )
    .await?;
    let answer = json_object(&body, "token endpoint")?;
    if status != 200 {
        // Only the RFC 6749 §5.2 error code is logged, never the body.
        let error = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect::<String>();
        return Err(Refusal::Invalid(format!(
            "token endpoint answered HTTP {status} {error}"
        )));
    }
    match answer.get("id_token") {
        Some(Value::String(t)) if !t.is_empty() => Ok(t.clone()),
        _ => Err(Refusal::Invalid(
            "no id_token in the token response".to_owned(),
        )),
    }
}

// ---------------------------------------------------------------- back-channel logout

fn logout_answer(status: StatusCode, error: Option<&str>) -> Response {
    // Back-Channel Logout §2.8: 200 on success, 400 with an OAuth error
    // otherwise; never cached.
    let mut res = match error {
        None => status.into_response(),
        Some(description) => (
            status,
            axum::Json(serde_json::json!({
                "error": "invalid_request",
                "error_description": description,
            })),
        )
            .into_response(),
    };
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// `POST /oidc/{brand}/backchannel-logout` with a form field `logout_token`
/// (Back-Channel Logout §2.5). Server to server: no cookie, Origin or CSRF
/// token; the signed, single-use logout token is the authentication.
pub async fn backchannel_logout(
    State(state): State<AppState>,
    Path(brand_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let mut token = None;
    for (k, v) in url::form_urlencoded::parse(&body) {
        if k == "logout_token" {
            if token.is_some() {
                return Ok(logout_answer(
                    StatusCode::BAD_REQUEST,
                    Some("logout_token repeated"),
                ));
            }
            token = Some(v.into_owned());
        }
    }
    let Some(token) = token.filter(|t| !t.is_empty()) else {
        return Ok(logout_answer(
            StatusCode::BAD_REQUEST,
            Some("no logout_token"),
        ));
    };
    let cfg = match BrandId::parse(&brand_id) {
        Ok(id) => pact_db::brand_oidc::find(&state.db, &id).await?,
        Err(_) => None,
    };
    let Some(cfg) = cfg else {
        return Ok(logout_answer(
            StatusCode::BAD_REQUEST,
            Some("this brand does not sign in through an OpenID provider"),
        ));
    };
    let now = state.clock.now();
    let parsed = match pact_jose::parse_oidc_token(&token) {
        Ok(p) => p,
        Err(e) => {
            tracing::info!(brand = %brand_id, reason = %e, "logout token refused");
            return Ok(logout_answer(
                StatusCode::BAD_REQUEST,
                Some("malformed logout token"),
            ));
        }
    };
    // Everything that can be checked without the provider's keys, before
    // anything is fetched: junk costs nothing but this request. The answer
    // is the one a bad signature gets.
    if let Err(e) =
        pact_jose::precheck_logout_token(&parsed, &cfg.issuer, &cfg.client_id, now.unix_timestamp())
    {
        tracing::info!(brand = %brand_id, reason = %e, "logout token refused before any fetch");
        return Ok(logout_answer(
            StatusCode::BAD_REQUEST,
            Some("invalid logout token"),
        ));
    }
    let found = match discover_cached(&state, &cfg.issuer).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(brand = %brand_id, error = %e.0, "OpenID provider unavailable for a logout");
            return Ok(logout_answer(
                StatusCode::BAD_GATEWAY,
                Some("the provider's keys cannot be fetched now"),
            ));
        }
    };
    let key = match state
        .jwks
        .key_for(&found.jwks_uri, parsed.kid(), parsed.alg())
        .await
    {
        Ok(k) => k,
        Err(e) => {
            tracing::info!(brand = %brand_id, error = %e, "logout token key unavailable");
            return Ok(logout_answer(
                StatusCode::BAD_REQUEST,
                Some("unknown signing key"),
            ));
        }
    };
    let logout = match pact_jose::verify_logout_token(
        &parsed,
        &key,
        &cfg.issuer,
        &cfg.client_id,
        now.unix_timestamp(),
    ) {
        Ok(l) => l,
        Err(e) => {
            tracing::info!(brand = %brand_id, reason = %e, "logout token refused");
            return Ok(logout_answer(
                StatusCode::BAD_REQUEST,
                Some("invalid logout token"),
            ));
        }
    };
    // §2.6 step 7: a logout token is used once. Kept (in the brand-assertion
    // jti table, under its own prefix) until it would fail `exp` anyway.
    let keep_until = OffsetDateTime::from_unix_timestamp(logout.exp.saturating_add(OIDC_SKEW_SECS))
        .unwrap_or(now);
    // The token is spent and the sessions end in one transaction: a failure
    // between the two would otherwise answer the provider's retry of the same
    // token as a replay, and the sessions would never end.
    let jti = format!("oidc-logout\n{}", logout.jti);
    let mut tx = state.db.begin().await?;
    if !pact_db::users::claim_assertion_jti(&mut *tx, &cfg.brand_id, &jti, keep_until).await? {
        tracing::info!(brand = %brand_id, "logout token replayed");
        return Ok(logout_answer(
            StatusCode::BAD_REQUEST,
            Some("logout token replayed"),
        ));
    }
    let ended = pact_db::brand_oidc::end_sessions(
        &mut *tx,
        &cfg.brand_id,
        logout.sub.as_deref(),
        logout.sid.as_deref(),
    )
    .await?;
    tx.commit().await?;
    tracing::info!(brand = %brand_id, sessions = ended, "back-channel logout");
    Ok(logout_answer(StatusCode::OK, None))
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for Refusal {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pkce_s256_matches_rfc_7636_appendix_b() {
        assert_eq!(
            s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_user_id_comes_from_the_chosen_claim() {
        let c = |v: Value| v.as_object().unwrap().clone();
        let claims =
            c(json!({"sub": "u-1", "email": "ann@shop.example", "email_verified": true, "n": 42}));
        assert_eq!(user_id_from(&claims, "sub").unwrap(), "u-1");
        assert_eq!(user_id_from(&claims, "email").unwrap(), "ann@shop.example");
        assert_eq!(user_id_from(&claims, "n").unwrap(), "42");
        assert!(user_id_from(&claims, "missing").is_err());
        let unverified =
            c(json!({"sub": "u-1", "email": "ann@shop.example", "email_verified": false}));
        assert!(user_id_from(&unverified, "email").is_err());
        let unsaid = c(json!({"sub": "u-1", "email": "ann@shop.example"}));
        assert!(user_id_from(&unsaid, "email").is_err());
        let empty = c(json!({"sub": ""}));
        assert!(user_id_from(&empty, "sub").is_err());
        let long = c(json!({"sub": "x".repeat(257)}));
        assert!(user_id_from(&long, "sub").is_err());
    }

    /// Issue 28, finding 7: every claim usable as the user claim is checked,
    /// not only `email`.
    #[test]
    fn every_claim_usable_as_the_user_claim_is_checked() {
        let c = |v: Value| v.as_object().unwrap().clone();
        let phone = c(json!({"sub": "u-1", "phone_number": "+49 30 1234"}));
        assert!(user_id_from(&phone, "phone_number").is_err(), "unverified");
        let phone = c(json!({"sub": "u-1", "phone_number": "+49 30 1234",
                             "phone_number_verified": true}));
        assert_eq!(user_id_from(&phone, "phone_number").unwrap(), "+49 30 1234");
        let profile = c(
            json!({"sub": "u-1", "preferred_username": "ann", "name": "Ann",
                               "nickname": "a", "email_verified": true, "sid": "s-1",
                               "iss": "https://idp.example"}),
        );
        for claim in [
            "preferred_username",
            "name",
            "nickname",
            "email_verified",
            "sid",
            "iss",
        ] {
            assert!(user_id_from(&profile, claim).is_err(), "{claim}");
            assert!(user_claim_rule(claim).is_err(), "{claim}");
        }
        // The merchant's own claim, as the operator chose it.
        let own = c(json!({"sub": "u-1", "employee_id": 4711}));
        assert_eq!(user_id_from(&own, "employee_id").unwrap(), "4711");
        assert_eq!(user_claim_rule("oid"), Ok(UserClaim::Custom));
        assert_eq!(
            user_claim_rule("email"),
            Ok(UserClaim::Verified("email_verified"))
        );
    }

    #[test]
    fn a_second_factor_counts_from_when_it_was_proven() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let t = now.unix_timestamp();
        // Proven a day ago in the provider's session: not recent here.
        let old = second_factor_at(true, Some(t - 86_400), now).unwrap();
        assert_eq!(old.unix_timestamp(), t - 86_400);
        assert!(!crate::web::session::mfa_at_is_recent(Some(old), now));
        // Proven just now: recent.
        let fresh = second_factor_at(true, Some(t - 5), now);
        assert!(crate::web::session::mfa_at_is_recent(fresh, now));
        // Unknown when, or none reported: nothing counts.
        assert_eq!(second_factor_at(true, None, now), None);
        assert_eq!(second_factor_at(false, Some(t), now), None);
        // A clock ahead of ours does not stretch the window.
        assert_eq!(second_factor_at(true, Some(t + 3_600), now), Some(now));
        assert_eq!(second_factor_at(true, Some(i64::MAX), now), None);
    }

    #[test]
    fn a_second_factor_is_what_amr_or_a_listed_acr_says() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert!(reports_mfa(&s(&["pwd", "mfa"]), None, &[]));
        assert!(reports_mfa(&s(&["otp"]), None, &[]));
        assert!(reports_mfa(&s(&["hwk"]), None, &[]));
        assert!(!reports_mfa(&s(&["pwd"]), None, &[]));
        assert!(!reports_mfa(&s(&["pwd"]), Some("urn:x:gold"), &[]));
        assert!(reports_mfa(
            &s(&["pwd"]),
            Some("urn:x:gold"),
            &s(&["urn:x:gold"])
        ));
        assert!(!reports_mfa(&[], Some("urn:x:silver"), &s(&["urn:x:gold"])));
    }

    #[test]
    fn the_registered_uris_are_under_the_public_url() {
        assert_eq!(
            redirect_uri("https://pactd.example/", &BrandId::parse("shop").unwrap()),
            "https://pactd.example/oidc/shop/callback"
        );
        assert_eq!(
            backchannel_logout_uri("https://pactd.example", &BrandId::parse("shop").unwrap()),
            "https://pactd.example/oidc/shop/backchannel-logout"
        );
    }

    #[test]
    fn repeated_callback_parameters_are_refused() {
        assert_eq!(
            single("state=a&code=b", "state").unwrap().as_deref(),
            Some("a")
        );
        assert!(single("state=a&state=b", "state").is_err());
        assert_eq!(single("state=", "state").unwrap(), None);
    }
}
