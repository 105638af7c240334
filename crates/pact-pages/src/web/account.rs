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

use std::collections::{HashMap, HashSet};

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use pact_db::brands::Brand;
use pact_db::grants::{Grant, GrantFilter, reason as why};
use pact_db::ids::{AgentIssuer, BrandId, GrantId, UserSub};
use pact_db::parties::Connection;
use pact_db::receipts::StoredReceipt;
use pact_db::sessions::Session;
use pact_db::users::User;
use pact_node::node::{Node, NodeInner};
use pact_proto::oauth::{ReceiptAction, ReceiptClaims, ReceiptRefusal};
use serde::Deserialize;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};
use uuid::Uuid;

use super::extract::{NoFields, SessionForm};
use super::i18n;
use super::limit_words;
use super::login;
use super::page::{PageError, render};
use super::passkeys;
use super::security;
use super::session::Browser;
use crate::domain::terms::Terms;
use crate::state::AppState;

/// Receipts shown on the page.
pub const RECENT_RECEIPTS: i64 = 20;

/// Who is signed in, and how.
pub enum Person {
    /// A built-in account (password + second factor, or a passkey).
    Account(User),
    /// The brand's own login: the asserted subject.
    External(UserSub),
}

impl Person {
    /// The brand user's subject: the delegation token's `sub`, the grant's `user_sub`.
    pub fn subject(&self) -> UserSub {
        match self {
            Self::Account(user) => user.subject(),
            Self::External(sub) => sub.clone(),
        }
    }
}

/// The person a session is signed in as, at its brand; `None` when it is not
/// signed in (anonymous, or only the password is verified so far).
pub async fn signed_in_person(
    node: &NodeInner,
    session: &Session,
) -> Result<Option<(BrandId, Person)>, PageError> {
    let Some(brand) = session.brand_id.clone() else {
        return Ok(None);
    };
    if let Some(user_id) = session.user_id {
        let user = pact_db::users::find(&node.db, user_id).await?;
        return Ok(user
            .filter(|u| u.brand_id == brand && !u.is_disabled())
            .map(|u| (brand, Person::Account(u))));
    }
    Ok(session
        .external_sub
        .clone()
        .map(|sub| (brand, Person::External(sub.into()))))
}

/// How times are shown: minutes, in UTC, said so.
pub fn show_time(t: OffsetDateTime) -> String {
    // The date in words of the person's language (`Fri 1 Jan 2027`), then
    // the time: a line may break between them, never inside a date the way
    // `2027-01-01` broke at its hyphen on a phone (issue 30).
    let t = t.to_offset(UtcOffset::UTC);
    let clock = t
        .format(format_description!("[hour]:[minute]"))
        .unwrap_or_default();
    format!("{}, {clock} UTC", super::limit_words::date(t.date()))
}

pub struct ScopeView {
    pub id: String,
    pub description: String,
}

pub struct GrantView {
    pub id: String,
    pub agent_name: String,
    pub agent_origin: String,
    /// Admitted under open admission, not (yet) verified by the shop.
    pub unverified: bool,
    pub active: bool,
    /// "Active", "Revoked on …", "Expired on …".
    pub status: String,
    pub scopes: Vec<ScopeView>,
    /// The limits the person set, in words, each with how much is used.
    pub limits: Vec<String>,
    pub granted: String,
    pub last_used: String,
    pub expires: String,
    /// For an ended grant: who ended it and why, in words.
    pub ended_by: Option<String>,
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

/// A browser the person is signed in with.
pub struct BrowserView {
    pub since: String,
    pub last_seen: String,
    pub this_one: bool,
}

pub struct MfaView {
    pub has_totp: bool,
    pub recovery_codes_left: i64,
    pub passkeys: Vec<PasskeyView>,
    /// Adding or removing a passkey needs the second factor again first.
    pub reconfirm_needed: bool,
    /// Where the account is signed in.
    pub browsers: Vec<BrowserView>,
}

#[derive(Template)]
#[template(path = "account.html")]
pub struct AccountPage {
    pub brand_name: String,
    /// The brand's logo and accent.
    pub look: crate::who::Look,
    pub signed_in: bool,
    pub csrf: String,
    /// "as alice@example.com" for a built-in account.
    pub email: Option<String>,
    pub notice: Option<String>,
    /// One entry per agent that can act now (its active grants together).
    pub grants: Vec<GrantView>,
    /// Ended grants: revoked (by whom) or expired.
    pub past: Vec<GrantView>,
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
    let key = match done? {
        "revoked" => "acc-done-revoked",
        "passkey-added" => "acc-done-passkey-added",
        "passkey-removed" => "acc-done-passkey-removed",
        "signed-out-others" => "acc-done-signed-out-others",
        _ => return None,
    };
    Some(i18n::t(key))
}

async fn known_brand(node: &NodeInner, id: &str) -> Result<Brand, PageError> {
    let not_found = || PageError::NotFound(i18n::t("acc-err-no-store"));
    if !pact_db::brands::is_valid_brand_id(id) {
        return Err(not_found());
    }
    let brand = pact_db::brands::find(&node.db, id)
        .await?
        .ok_or_else(not_found)?;
    i18n::brand_known(&brand.name, crate::who::Look::of(&brand.settings));
    Ok(brand)
}

/// `GET /account[?brand=B]`.
pub async fn page(
    State(state): State<AppState>,
    browser: Browser,
    Query(query): Query<AccountQuery>,
) -> Result<Response, PageError> {
    let asked = match query.brand.as_deref() {
        Some(b) => Some(known_brand(&state, b).await?),
        None => None,
    };
    let signed = match &browser.session {
        Some(s) => signed_in_person(&state, s).await?.map(|p| (s, p)),
        None => None,
    };
    let (session, brand_id, person) = match (signed, &asked) {
        (Some((s, (brand_id, person))), Some(asked)) if asked.id == brand_id => {
            (s, brand_id, person)
        }
        (Some((s, (brand_id, person))), None) => (s, brand_id, person),
        (_, Some(asked)) => return Ok(login::to_sign_in(&asked.id, "/account")),
        (None, None) => {
            return Err(PageError::BadRequest(i18n::t("acc-err-which-store")));
        }
    };
    let brand = match asked {
        Some(b) => b,
        None => known_brand(&state, &brand_id).await?,
    };
    let subject = person.subject();
    let now = state.clock.now();

    let scope_text: HashMap<String, String> = pact_db::scopes::list(&state.db, &brand.id)
        .await?
        .into_iter()
        .map(|s| (s.scope_id, s.description))
        .collect();
    let mut grants = pact_db::grants::list(
        &state.db,
        GrantFilter {
            brand_id: Some(&brand.id),
            user_sub: Some(&subject),
            pa_issuer: None,
        },
    )
    .await?;
    // Active first; newest first within each group (the list's order).
    grants.sort_by_key(|g| !g.is_active(now));
    let mut agent_names: HashMap<AgentIssuer, String> = HashMap::new();
    // Agents admitted under open admission that staff have not verified
    // (issue 31: the account page shows the tier, as consent did).
    let mut unverified: HashSet<AgentIssuer> = HashSet::new();
    for g in &grants {
        if !agent_names.contains_key(&g.pa_issuer) {
            let agent = pact_db::agents::find(&state.db, &g.pa_issuer).await?;
            if agent.as_ref().is_some_and(|a| !a.verified) {
                unverified.insert(g.pa_issuer.clone());
            }
            let name = agent
                .map(|a| a.name)
                .filter(|n| !n.trim().is_empty())
                .unwrap_or_else(|| security::origin_of(&g.pa_issuer));
            agent_names.insert(g.pa_issuer.clone(), name);
        }
    }
    let receipts =
        pact_db::receipts::recent_for_user(&state.db, &brand.id, &subject, RECENT_RECEIPTS).await?;
    let receipts = receipt_views(&receipts, &grants, &agent_names, &scope_text);
    let (current, past) = split_grants(&grants, now);
    // What each active grant was approved under, and how much of each
    // consumed limit is used (one query for all of them).
    let terms: HashMap<GrantId, std::sync::Arc<Terms>> = current
        .iter()
        .map(|g| {
            (
                g.id,
                crate::agent::bounds::terms_of_recorded(g.terms.clone()),
            )
        })
        .collect();
    let budget_ids: Vec<Uuid> = terms.values().flat_map(|t| t.budget_ids()).collect();
    let usage: HashMap<Uuid, pact_db::budgets::Usage> =
        pact_db::budgets::usage(&state.db, &budget_ids)
            .await?
            .into_iter()
            .map(|u| (u.id, u))
            .collect();
    let views = |list: Vec<&Grant>| -> Vec<GrantView> {
        list.into_iter()
            .map(|g| {
                let mut v = grant_view(g, &agent_names, &scope_text, &brand.name, now);
                v.unverified = unverified.contains(&g.pa_issuer);
                v.limits = match terms.get(&g.id) {
                    Some(t) => limit_words::grant_lines(t, &usage),
                    None => older_limits(g),
                };
                v
            })
            .collect()
    };
    let (grants, past) = (views(current), views(past));

    let (email, mfa) = match &person {
        Person::Account(user) => {
            let stored = pact_db::sessions::credentials_of(&state.db, user.id).await?;
            let recovery_codes_left =
                pact_db::users::unused_recovery_codes(&state.db, user.id).await?;
            let browsers = pact_db::sessions::signed_in_of(&state.db, user.id, now)
                .await?
                .into_iter()
                .map(|b| BrowserView {
                    since: show_time(b.created_at),
                    last_seen: show_time(b.last_seen_at),
                    this_one: b.id_hash == session.id_hash,
                })
                .collect();
            let mfa = MfaView {
                browsers,
                has_totp: user.has_totp(),
                recovery_codes_left,
                reconfirm_needed: passkeys::needs_reconfirm(
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
                        last_used: c
                            .last_used_at
                            .map_or_else(|| i18n::t("acc-never"), show_time),
                    })
                    .collect(),
            };
            (Some(user.email.clone()), Some(mfa))
        }
        Person::External(_) => (None, None),
    };

    let page = AccountPage {
        brand_name: brand.name.clone(),
        look: crate::who::Look::of(&brand.settings),
        signed_in: true,
        csrf: session.csrf_token.clone(),
        email,
        notice: notice_for(query.done.as_deref()),
        grants,
        past,
        receipts,
        mfa,
        passkeys_enabled: state.webauthn.is_some(),
    };
    Ok(render(&page, StatusCode::OK))
}

/// One grant per agent that can act now — the newest active one, which holds
/// what the person allowed (an approval extends the earlier grant) — and the
/// ended ones. An older active grant of the same agent is folded into it.
pub fn split_grants(grants: &[Grant], now: OffsetDateTime) -> (Vec<&Grant>, Vec<&Grant>) {
    let mut current: Vec<&Grant> = Vec::new();
    let mut past = Vec::new();
    for g in grants {
        if !g.is_active(now) {
            past.push(g);
        } else if let Some(seen) = current.iter_mut().find(|c| c.pa_issuer == g.pa_issuer) {
            if g.created_at > seen.created_at {
                *seen = g;
            }
        } else {
            current.push(g);
        }
    }
    past.sort_by_key(|g| std::cmp::Reverse(g.revoked_at.unwrap_or(g.expires_at)));
    (current, past)
}

/// Who ended a grant, in words, from the reason stored with the revocation.
pub fn ended_by(g: &Grant, brand_name: &str, now: OffsetDateTime) -> Option<String> {
    let Some(at) = g.revoked_at else {
        return (g.expires_at <= now)
            .then(|| i18n::t1("ended-expired", "when", show_time(g.expires_at)));
    };
    let when = show_time(at);
    let reason = g.revoked_reason.as_deref().unwrap_or("");
    Some(match reason {
        why::BY_USER => i18n::t1("ended-by-you", "when", when),
        why::ACCOUNT_DELETED => i18n::t1("ended-account-deleted", "when", when),
        why::BY_AGENT => i18n::t1("ended-by-agent", "when", when),
        why::TOKEN_REUSE => i18n::t1("ended-token-reuse", "when", when),
        why::SUPERSEDED => i18n::t1("ended-superseded", "when", when),
        staff if staff.starts_with(why::BY_ADMIN) => {
            let given = staff
                .trim_start_matches(why::BY_ADMIN)
                .trim_start_matches(':')
                .trim();
            if given.is_empty() {
                i18n::t2("ended-by-staff", "brand", brand_name, "when", when)
            } else {
                i18n::t3(
                    "ended-by-staff-reason",
                    "brand",
                    brand_name,
                    "when",
                    when,
                    "reason",
                    // Refused on the way in now; one stored before is
                    // shown with its hidden characters made visible.
                    crate::domain::hidden_chars::visible(given),
                )
            }
        }
        other if !other.is_empty() => i18n::t2("ended-other", "when", when, "reason", other),
        _ => i18n::t1("ended-plain", "when", when),
    })
}

fn grant_view(
    g: &Grant,
    agent_names: &HashMap<AgentIssuer, String>,
    scope_text: &HashMap<String, String>,
    brand_name: &str,
    now: OffsetDateTime,
) -> GrantView {
    let status = match g.revoked_at {
        Some(at) => i18n::t1("status-revoked", "when", show_time(at)),
        None if g.expires_at <= now => i18n::t1("status-expired", "when", show_time(g.expires_at)),
        None => i18n::t("status-active"),
    };
    GrantView {
        id: g.id.to_string(),
        agent_name: agent_names
            .get(&g.pa_issuer)
            .cloned()
            .unwrap_or_else(|| g.pa_issuer.to_string()),
        agent_origin: security::origin_of(&g.pa_issuer),
        unverified: false,
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
        limits: Vec::new(),
        granted: show_time(g.created_at),
        last_used: g
            .last_used_at
            .map_or_else(|| i18n::t("acc-never"), show_time),
        expires: show_time(g.expires_at),
        ended_by: ended_by(g, brand_name, now),
    }
}

/// An ended grant's limits, in words, as far as its record tells.
fn older_limits(g: &Grant) -> Vec<String> {
    let t = crate::agent::bounds::terms_of_recorded(g.terms.clone());
    limit_words::grant_lines(&t, &HashMap::new())
}

fn receipt_views(
    receipts: &[StoredReceipt],
    grants: &[Grant],
    agent_names: &HashMap<AgentIssuer, String>,
    scope_text: &HashMap<String, String>,
) -> Vec<ReceiptView> {
    let issuer_of: HashMap<GrantId, &str> = grants
        .iter()
        .map(|g| (g.id, g.pa_issuer.as_str()))
        .collect();
    receipts
        .iter()
        .map(|r| {
            // Stored as the signed payload; read as the claims type the
            // receipt was written from (PACT §5.6 and pactd's additions).
            // Claims that do not read (none pactd wrote) show no actions,
            // and say so to the operator.
            let claims = ReceiptClaims::deserialize(&r.claims)
                .inspect_err(|_| {
                    // The id only: serde's message may quote a claim's value.
                    tracing::warn!(receipt = r.id, "a stored receipt's claims do not read");
                })
                .ok();
            let issuer = issuer_of
                .get(&r.grant_id)
                .copied()
                .or_else(|| claims.as_ref().map(|c| c.pa.as_str()))
                .unwrap_or("");
            let agent = agent_names
                .get(issuer)
                .cloned()
                .unwrap_or_else(|| security::origin_of(issuer));
            let (actions, scopes) = match &claims {
                None => (Vec::new(), Vec::new()),
                Some(c) => (
                    c.actions
                        .iter()
                        .map(action_line)
                        .chain(c.refused.iter().map(refusal_line))
                        .collect(),
                    c.scopes_used
                        .iter()
                        .map(|id| scope_text.get(id).cloned().unwrap_or_else(|| id.clone()))
                        .collect(),
                ),
            };
            ReceiptView {
                time: show_time(r.created_at),
                agent,
                actions,
                scopes,
            }
        })
        .collect()
}

/// One action of a receipt in words: what was done, and whether the
/// business refused it, did not answer, or reported more than was allowed.
fn action_line(a: &ReceiptAction) -> String {
    let done = action_in_words(&a.tool);
    let once = if a.approved_once {
        format!(" {}", i18n::t("action-approved-once"))
    } else {
        String::new()
    };
    match a.outcome.as_deref() {
        Some("failed") => {
            let why = a
                .error
                .as_ref()
                .and_then(|e| e.message.as_deref().or(e.code.as_deref()))
                .map_or_else(|| i18n::t("action-no-reason"), hidden_chars_visible);
            i18n::t2("action-failed", "action", done, "why", why)
        }
        Some("unknown") => i18n::t1("action-unknown", "action", done),
        _ if a.beyond_limit => {
            let effect = a
                .effect
                .as_ref()
                .and_then(|e| e.get("amount"))
                .map(limit_words::value)
                .unwrap_or_default();
            i18n::t2(
                "action-beyond-effect",
                "action",
                format!("{done}{once}"),
                "effect",
                effect,
            )
        }
        _ => format!("{done}{once}"),
    }
}

fn hidden_chars_visible(s: &str) -> String {
    crate::domain::hidden_chars::visible(s)
}

/// A call that was not done, in words.
fn refusal_line(r: &ReceiptRefusal) -> String {
    let action = action_in_words(&r.tool);
    let why = match r.reason.as_str() {
        "beyond_limit" => i18n::t("refused-beyond"),
        "missing_scope" => i18n::t("refused-scope"),
        _ => i18n::t("refused-other"),
    };
    i18n::t2("action-refused", "action", action, "why", why)
}

/// What a tool call did, in words a person reads on the activity list.
pub fn action_in_words(tool: &str) -> String {
    match tool {
        "list_orders" => i18n::t("action-list-orders"),
        "order_status" => i18n::t("action-order-status"),
        "cancel_order" => i18n::t("action-cancel-order"),
        other => {
            // A brand's own tool: its name, made readable ("track_parcel" → "Used “track parcel”").
            let words = other.replace(['_', '-'], " ");
            i18n::t1("action-other", "tool", words.trim())
        }
    }
}

/// `POST /account/sessions/sign-out-others`: ends every other browser's
/// session of this account (a lost laptop, a shared computer).
pub async fn sign_out_others(
    State(node): State<Node>,
    SessionForm { session, .. }: SessionForm<NoFields>,
) -> Result<Response, PageError> {
    let Some((_, Person::Account(user))) = signed_in_person(&node, &session).await? else {
        return Err(PageError::Forbidden(i18n::t("acc-err-sessions-signed-out")));
    };
    let ended = pact_db::sessions::delete_others(&node.db, user.id, &session.id_hash).await?;
    tracing::info!(user = %user.id, ended, "signed out of the other browsers");
    Ok(Redirect::to("/account?done=signed-out-others").into_response())
}

#[derive(Template)]
#[template(path = "revoke_confirm.html")]
struct RevokeConfirmPage {
    brand_name: String,
    signed_in: bool,
    csrf: String,
    grant_id: String,
    agent_name: String,
    scopes: Vec<String>,
    look: crate::who::Look,
}

/// The person's own grant `id` at their brand, or a 404 page.
async fn own_grant(
    node: &NodeInner,
    session: &Session,
    id: &str,
) -> Result<(Brand, Person, Grant), PageError> {
    let Some((brand_id, person)) = signed_in_person(node, session).await? else {
        return Err(PageError::Forbidden(i18n::t("acc-err-signed-out")));
    };
    // The brand first: a 404 below is then shown in the brand's look.
    let brand = known_brand(node, &brand_id).await?;
    let not_found = || PageError::NotFound(i18n::t("acc-err-no-grant"));
    let id: GrantId = id.parse().map_err(|_| not_found())?;
    let grant = pact_db::grants::find(&node.db, id)
        .await?
        .filter(|g| g.brand_id == brand_id && g.user_sub == person.subject())
        .ok_or_else(not_found)?;
    Ok((brand, person, grant))
}

/// `GET /account/grants/{id}/revoke`: asks before removing access (a form,
/// so it works without JavaScript).
pub async fn confirm_revoke(
    State(node): State<Node>,
    browser: Browser,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let Some(session) = &browser.session else {
        return Err(PageError::Forbidden(i18n::t("acc-err-signed-out")));
    };
    let (brand, _, grant) = own_grant(&node, session, &id).await?;
    if !grant.is_active(node.clock.now()) {
        return Ok(Redirect::to("/account").into_response());
    }
    let agent_name = pact_db::agents::find(&node.db, &grant.pa_issuer)
        .await?
        .map(|a| a.name)
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| security::origin_of(&grant.pa_issuer));
    let scope_text: HashMap<String, String> = pact_db::scopes::list(&node.db, &brand.id)
        .await?
        .into_iter()
        .map(|s| (s.scope_id, s.description))
        .collect();
    let page = RevokeConfirmPage {
        brand_name: brand.name.clone(),
        signed_in: true,
        csrf: session.csrf_token.clone(),
        grant_id: grant.id.to_string(),
        agent_name,
        scopes: grant
            .scopes
            .iter()
            .map(|id| scope_text.get(id).cloned().unwrap_or_else(|| id.clone()))
            .collect(),
        look: crate::who::Look::of(&brand.settings),
    };
    Ok(render(&page, StatusCode::OK))
}

/// What a confirmation page's button posts (besides its CSRF token).
#[derive(Debug, serde::Deserialize)]
pub struct ConfirmForm {
    confirm: Option<String>,
}

/// `POST /account/grants/{id}/revoke` (from the confirmation page): the
/// agent's access ends now, on every node — the rows are the truth every
/// delegated turn re-checks, the table trigger notifies the other nodes, and
/// this node's view learns it at once. Every live grant of that agent for
/// this person goes, since the page shows them as one connection.
pub async fn revoke(
    State(node): State<Node>,
    Path(id): Path<String>,
    SessionForm { session, form, .. }: SessionForm<ConfirmForm>,
) -> Result<Response, PageError> {
    let (brand, person, grant) = own_grant(&node, &session, &id).await?;
    if form.confirm.as_deref() != Some("yes") {
        // Only the confirmation page's button says yes.
        return Ok(Redirect::to(&format!("/account/grants/{}/revoke", grant.id)).into_response());
    }
    let revoked = pact_db::grants::revoke_connection(
        &node.db,
        Connection {
            brand_id: &brand.id,
            pa_issuer: &grant.pa_issuer,
            user_sub: &person.subject(),
        },
        why::BY_USER,
    )
    .await?;
    for id in &revoked {
        node.revocations.insert(*id);
    }
    node.revocations.insert(grant.id);
    tracing::info!(grant = %grant.id, revoked = revoked.len(), "agent access revoked by the user");
    Ok(Redirect::to("/account?done=revoked").into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shown_in_utc_minutes_with_the_date_in_words() {
        let t = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        assert_eq!(show_time(t), "Tue 14 Nov 2023, 22:13 UTC");
        // No hyphen a narrow line could break a date at.
        assert!(!show_time(t).contains('-'));
    }

    fn grant(revoked: Option<&str>, now: OffsetDateTime) -> Grant {
        Grant {
            id: GrantId::from(Uuid::nil()),
            brand_id: BrandId::parse("demo").unwrap(),
            pa_issuer: "https://pa.example".into(),
            user_sub: "u".into(),
            scopes: vec![],
            authorization_details: None,
            created_at: now,
            expires_at: now + time::Duration::days(1),
            last_used_at: None,
            revoked_at: revoked.map(|_| now),
            revoked_reason: revoked.map(str::to_owned),
            terms: None,
        }
    }

    #[test]
    fn every_stored_reason_says_who_ended_the_access() {
        let now = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        let said = |r: &str| ended_by(&grant(Some(r), now), "Shop", now).unwrap();
        assert!(said(why::BY_USER).starts_with("You removed"));
        assert!(said(why::BY_AGENT).starts_with("The agent gave up"));
        assert!(said(why::TOKEN_REUSE).contains("used twice"));
        assert!(said(why::SUPERSEDED).starts_with("Replaced"));
        assert!(said(why::ACCOUNT_DELETED).starts_with("Your account was deleted"));
        assert!(said(why::BY_ADMIN).starts_with("Shop's staff removed"));
        assert!(said(&why::by_admin("fraud report")).ends_with("Reason given: fraud report"));
        assert!(said("something else").contains("(something else)"));
        assert_eq!(ended_by(&grant(None, now), "Shop", now), None);
    }

    #[test]
    fn actions_read_as_sentences() {
        assert_eq!(action_in_words("cancel_order"), "Cancelled an order");
        assert_eq!(
            action_in_words("track_parcel"),
            "Used \u{201c}track parcel\u{201d}"
        );
    }

    #[test]
    fn only_known_notices_are_shown() {
        assert!(notice_for(Some("revoked")).is_some());
        assert!(notice_for(Some("<script>")).is_none());
        assert!(notice_for(None).is_none());
    }
}
