//! "Connected agents" (`/account`): the person's grants at one brand (active
//! first; revoked and expired ones listed as such), what the agents did (the
//! recent receipts), a Revoke button per grant that takes effect on the very
//! next request, and — for built-in accounts — second-factor management
//! (passkeys here; TOTP and recovery codes on `mfa.rs`'s pages).
//!
//! Which brand: the one the session is signed in to. `?brand=B` names it for
//! someone not signed in yet (they are sent to `/login?brand=B&next=/account`)
//! or signed in to another brand. Without a session and without `?brand=`
//! there is no way to know which brand's sign-in to show, so the page asks
//! the person to open the link from the brand's own site (400).

use std::collections::HashMap;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use pact_db::brands::Brand;
use pact_db::grants::{Grant, GrantFilter};
use pact_db::receipts::StoredReceipt;
use pact_db::sessions::Session;
use pact_db::users::User;
use serde::Deserialize;
use serde_json::Value;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};
use uuid::Uuid;

use super::page::{PageError, render};
use super::passkeys;
use super::security;
use super::session::Browser;
use crate::state::AppState;

/// Receipts shown on the page.
pub const RECENT_RECEIPTS: i64 = 20;

/// Who is signed in, and how.
pub enum Person {
    /// A built-in account (password + second factor, or a passkey).
    Account(User),
    /// The brand's own login: the asserted subject.
    External(String),
}

impl Person {
    /// The brand user's subject: the delegation token's `sub`, the grant's `user_sub`.
    pub fn subject(&self) -> String {
        match self {
            Self::Account(user) => user.subject(),
            Self::External(sub) => sub.clone(),
        }
    }
}

/// The person a session is signed in as, at its brand; `None` when it is not
/// signed in (anonymous, or only the password is verified so far).
pub async fn signed_in_person(
    app: &AppState,
    session: &Session,
) -> Result<Option<(String, Person)>, PageError> {
    let Some(brand) = session.brand_id.clone() else {
        return Ok(None);
    };
    if let Some(user_id) = session.user_id {
        let user = pact_db::users::find(&app.db, user_id).await?;
        return Ok(user
            .filter(|u| u.brand_id == brand)
            .map(|u| (brand, Person::Account(u))));
    }
    Ok(session
        .external_sub
        .clone()
        .map(|sub| (brand, Person::External(sub))))
}

/// How times are shown: minutes, in UTC, said so.
pub fn show_time(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC)
        .format(format_description!(
            "[year]-[month]-[day] [hour]:[minute] UTC"
        ))
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

pub struct ScopeView {
    pub id: String,
    pub description: String,
}

pub struct GrantView {
    pub id: String,
    pub agent_name: String,
    pub agent_origin: String,
    pub active: bool,
    /// "Active", "Revoked on …", "Expired on …".
    pub status: String,
    pub scopes: Vec<ScopeView>,
    /// The approved `authorization_details`, compact JSON, when there are any.
    pub conditions: Option<String>,
    pub granted: String,
    pub last_used: String,
    pub expires: String,
}

pub struct ReceiptView {
    pub time: String,
    pub agent: String,
    pub actions: Vec<String>,
    pub scopes: Vec<String>,
}

pub struct PasskeyView {
    pub id: String,
    pub name: String,
    pub added: String,
    pub last_used: String,
}

pub struct MfaView {
    pub has_totp: bool,
    pub recovery_codes_left: i64,
    pub passkeys: Vec<PasskeyView>,
    /// Adding or removing a passkey needs the second factor again first.
    pub step_up_needed: bool,
}

#[derive(Template)]
#[template(path = "account.html")]
pub struct AccountPage {
    pub brand_name: String,
    pub signed_in: bool,
    pub csrf: String,
    /// "as alice@example.com" for a built-in account.
    pub email: Option<String>,
    pub notice: Option<String>,
    pub grants: Vec<GrantView>,
    pub receipts: Vec<ReceiptView>,
    /// Second-factor management; `None` for a brand's own login.
    pub mfa: Option<MfaView>,
    /// Passkey UI (the server has a WebAuthn relying party).
    pub passkeys_enabled: bool,
}

#[derive(Deserialize)]
pub struct AccountQuery {
    brand: Option<String>,
    done: Option<String>,
}

/// Confirmations after a redirect back here: fixed texts, nothing reflected.
fn notice_for(done: Option<&str>) -> Option<String> {
    let text = match done? {
        "revoked" => "Access removed. That agent can no longer act for you.",
        "passkey-added" => "Passkey added. You can now sign in with it.",
        "passkey-removed" => "Passkey removed.",
        _ => return None,
    };
    Some(text.to_owned())
}

async fn known_brand(app: &AppState, id: &str) -> Result<Brand, PageError> {
    let not_found = || PageError::NotFound("There is no such store here.".into());
    if !pact_db::brands::is_valid_brand_id(id) {
        return Err(not_found());
    }
    pact_db::brands::find(&app.db, id)
        .await?
        .ok_or_else(not_found)
}

fn login_redirect(brand: &str) -> Response {
    // Brand ids are URL-safe by construction (checked in `known_brand`).
    Redirect::to(&format!("/login?brand={brand}&next=/account")).into_response()
}

/// `GET /account[?brand=B]`.
pub async fn page(
    State(app): State<AppState>,
    browser: Browser,
    Query(query): Query<AccountQuery>,
) -> Result<Response, PageError> {
    let asked = match query.brand.as_deref() {
        Some(b) => Some(known_brand(&app, b).await?),
        None => None,
    };
    let signed = match &browser.session {
        Some(s) => signed_in_person(&app, s).await?.map(|p| (s, p)),
        None => None,
    };
    let (session, brand_id, person) = match (signed, &asked) {
        (Some((s, (brand_id, person))), Some(asked)) if asked.id == brand_id => {
            (s, brand_id, person)
        }
        (Some((s, (brand_id, person))), None) => (s, brand_id, person),
        (_, Some(asked)) => return Ok(login_redirect(&asked.id)),
        (None, None) => {
            return Err(PageError::BadRequest(
                "Open this page from the link on your store's website, so we know where to sign you in."
                    .into(),
            ));
        }
    };
    let brand = match asked {
        Some(b) => b,
        None => known_brand(&app, &brand_id).await?,
    };
    let subject = person.subject();
    let now = OffsetDateTime::now_utc();

    let scope_text: HashMap<String, String> = pact_db::scopes::list(&app.db, &brand.id)
        .await?
        .into_iter()
        .map(|s| (s.scope_id, s.description))
        .collect();
    let mut grants = pact_db::grants::list(
        &app.db,
        GrantFilter {
            brand_id: Some(&brand.id),
            user_sub: Some(&subject),
            pa_issuer: None,
        },
    )
    .await?;
    // Active first; newest first within each group (the list's order).
    grants.sort_by_key(|g| !g.is_active(now));
    let mut agent_names: HashMap<String, String> = HashMap::new();
    for g in &grants {
        if !agent_names.contains_key(&g.pa_issuer) {
            let name = pact_db::agents::find(&app.db, &g.pa_issuer)
                .await?
                .map(|a| a.name)
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| security::origin_of(&g.pa_issuer));
            agent_names.insert(g.pa_issuer.clone(), name);
        }
    }
    let receipts =
        pact_db::receipts::recent_for_user(&app.db, &brand.id, &subject, RECENT_RECEIPTS).await?;
    let receipts = receipt_views(&receipts, &grants, &agent_names, &scope_text);
    let grants = grants
        .iter()
        .map(|g| grant_view(g, &agent_names, &scope_text, now))
        .collect();

    let (email, mfa) = match &person {
        Person::Account(user) => {
            let stored = pact_db::sessions::credentials_of(&app.db, user.id).await?;
            let recovery_codes_left =
                pact_db::users::unused_recovery_codes(&app.db, user.id).await?;
            let mfa = MfaView {
                has_totp: user.has_totp(),
                recovery_codes_left,
                step_up_needed: passkeys::needs_step_up(
                    user.has_totp(),
                    stored.len(),
                    session.mfa_at,
                    now,
                ),
                passkeys: stored
                    .iter()
                    .map(|c| PasskeyView {
                        id: c.id.to_string(),
                        name: c.name.clone(),
                        added: show_time(c.created_at),
                        last_used: c.last_used_at.map_or_else(|| "never".into(), show_time),
                    })
                    .collect(),
            };
            (Some(user.email.clone()), Some(mfa))
        }
        Person::External(_) => (None, None),
    };

    let page = AccountPage {
        brand_name: brand.name.clone(),
        signed_in: true,
        csrf: session.csrf_token.clone(),
        email,
        notice: notice_for(query.done.as_deref()),
        grants,
        receipts,
        mfa,
        passkeys_enabled: app.webauthn.is_some(),
    };
    Ok(render(&page, StatusCode::OK))
}

fn grant_view(
    g: &Grant,
    agent_names: &HashMap<String, String>,
    scope_text: &HashMap<String, String>,
    now: OffsetDateTime,
) -> GrantView {
    let status = match g.revoked_at {
        Some(at) => format!("Revoked on {}", show_time(at)),
        None if g.expires_at <= now => format!("Expired on {}", show_time(g.expires_at)),
        None => "Active".to_owned(),
    };
    GrantView {
        id: g.id.to_string(),
        agent_name: agent_names
            .get(&g.pa_issuer)
            .cloned()
            .unwrap_or_else(|| g.pa_issuer.clone()),
        agent_origin: security::origin_of(&g.pa_issuer),
        active: g.is_active(now),
        status,
        scopes: g
            .scopes
            .iter()
            .map(|id| ScopeView {
                id: id.clone(),
                description: scope_text.get(id).cloned().unwrap_or_else(|| id.clone()),
            })
            .collect(),
        conditions: g
            .authorization_details
            .as_ref()
            .filter(|d| !d.is_null())
            .map(Value::to_string),
        granted: show_time(g.created_at),
        last_used: g.last_used_at.map_or_else(|| "never".into(), show_time),
        expires: show_time(g.expires_at),
    }
}

fn receipt_views(
    receipts: &[StoredReceipt],
    grants: &[Grant],
    agent_names: &HashMap<String, String>,
    scope_text: &HashMap<String, String>,
) -> Vec<ReceiptView> {
    let issuer_of: HashMap<Uuid, &str> = grants
        .iter()
        .map(|g| (g.id, g.pa_issuer.as_str()))
        .collect();
    receipts
        .iter()
        .map(|r| {
            let issuer = issuer_of
                .get(&r.grant_id)
                .copied()
                .or_else(|| r.claims.get("pa").and_then(Value::as_str))
                .unwrap_or("");
            let agent = agent_names
                .get(issuer)
                .cloned()
                .unwrap_or_else(|| security::origin_of(issuer));
            let actions = r
                .claims
                .get("actions")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.get("tool").and_then(Value::as_str))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let scopes = r
                .claims
                .get("scopesUsed")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(|id| scope_text.get(id).cloned().unwrap_or_else(|| id.to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            ReceiptView {
                time: show_time(r.created_at),
                agent,
                actions,
                scopes,
            }
        })
        .collect()
}

/// `POST /account/grants/{id}/revoke`: revoked now, on every node — the
/// row is the truth every delegated turn re-checks, the table trigger
/// notifies the other nodes, and this node's view learns it at once.
pub async fn revoke(
    State(app): State<AppState>,
    headers: HeaderMap,
    browser: Browser,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (session, _) = security::guard_post(&app, &headers, &browser, &body)?;
    let Some((brand, person)) = signed_in_person(&app, session).await? else {
        return Err(PageError::Forbidden(
            "Sign in to manage your connected agents.".into(),
        ));
    };
    let not_found = || PageError::NotFound("There is no such connection on your account.".into());
    let id: Uuid = id.parse().map_err(|_| not_found())?;
    let grant = pact_db::grants::find(&app.db, id)
        .await?
        .filter(|g| g.brand_id == brand && g.user_sub == person.subject())
        .ok_or_else(not_found)?;
    if pact_db::grants::revoke(&app.db, grant.id, "revoked by the user on the account page").await?
    {
        tracing::info!(grant = %grant.id, "grant revoked by the user");
    }
    app.revocations.insert(grant.id);
    Ok(Redirect::to("/account?done=revoked").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_in_utc_minutes() {
        let t = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        assert_eq!(show_time(t), "2023-11-14 22:13 UTC");
    }

    #[test]
    fn only_known_notices_are_shown() {
        assert!(notice_for(Some("revoked")).is_some());
        assert!(notice_for(Some("<script>")).is_none());
        assert!(notice_for(None).is_none());
    }
}
