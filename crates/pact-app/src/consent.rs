//! The user's decision on a device authorization (PACT §5.2). The browser
//! pages call these; so do tests. Approval creates the grant and marks the
//! authorization approved in one transaction, so a poller can never see an
//! approval without its grant, nor a grant exist for an undecided request.

use std::collections::BTreeSet;

use pact_db::device_authorizations::{DeviceAuthorization, Status as AuthStatus};
use pact_db::grants::{Grant, NewGrant};
use pact_db::ids::{GrantId, UserSub};
use pact_db::parties::Connection;
use pact_node::node::NodeInner;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::agent::bounds;
use crate::domain::authz_details::{self, DetailsTypes};
use crate::domain::{limits, scopes, terms::Terms};

#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    #[error("no such authorization")]
    NotFound,
    #[error("the authorization was already decided")]
    AlreadyDecided,
    #[error("the authorization has expired")]
    Expired,
    #[error("only requested scopes can be granted, and at least one")]
    ScopesNotRequested,
    #[error("only requested authorization_details can be granted, or narrower ones")]
    DetailsNotRequested,
    /// An operation asked about was called under another person's grant,
    /// or under a grant that has ended meanwhile.
    #[error("the operation's grant is not this person's or has ended")]
    OperationGrantGone,
    /// A step-up asked for another person (PACT §5.5): only they decide it.
    #[error("the request is for another person")]
    NotTheirs,
    /// Staff turned the asking agent off after it asked.
    #[error("the agent is disabled")]
    AgentOff,
    #[error("database: {0}")]
    Db(#[from] pact_db::Error),
}

/// What the user approved: a non-empty subset of the requested scopes and,
/// optionally, the requested `authorization_details` narrowed (`None` keeps
/// them as requested: a restriction is never dropped silently).
#[derive(Clone, Debug)]
pub struct Approval<'a> {
    pub authorization_id: Uuid,
    /// The user's id at the brand; the delegation token's `sub`.
    pub user_sub: &'a UserSub,
    pub scopes: BTreeSet<String>,
    pub authorization_details: Option<Value>,
}

/// Grant lifetime for a brand: its `grant_ttl_days` setting, else the default.
pub fn grant_ttl(node: &NodeInner, brand_settings: &Value) -> time::Duration {
    let default = time::Duration::try_from(node.config.delegation.grant_ttl)
        .unwrap_or(time::Duration::days(30));
    brand_grant_ttl(brand_settings, default)
}

/// `grant_ttl_days` when it is a whole number of days from 1 to 365; anything
/// else (missing, zero, negative, a string, years) falls back to `default`.
fn brand_grant_ttl(brand_settings: &Value, default: time::Duration) -> time::Duration {
    brand_settings
        .get("grant_ttl_days")
        .and_then(Value::as_i64)
        .filter(|d| (1..=365).contains(d))
        .map_or(default, time::Duration::days)
}

/// The `authorization_details` a grant gets from the person's choice
/// (RFC 9396 §7: the AS may grant less than requested, never more): `None`
/// keeps every requested entry as requested, so a restriction is never
/// dropped silently. A choice has the requested entries in their order, each
/// of the same type with the same fields set, every value narrowing the
/// requested one (a lower amount, fewer calls, a subset of listed items, a
/// window inside the requested one; `domain::limits::Limit::narrows`).
fn chosen_details(
    chosen: Option<Value>,
    requested: &Option<Value>,
    types: &DetailsTypes,
) -> Result<Option<Value>, ConsentError> {
    match (chosen, requested) {
        (None, requested) => Ok(requested.clone()),
        (Some(chosen), Some(Value::Array(requested))) => {
            let ok = chosen.as_array().is_some_and(|c| {
                c.len() == requested.len()
                    && c.iter().zip(requested).all(|(c, r)| narrows(c, r, types))
            });
            if ok {
                Ok(Some(chosen))
            } else {
                Err(ConsentError::DetailsNotRequested)
            }
        }
        (Some(_), _) => Err(ConsentError::DetailsNotRequested),
    }
}

/// Whether entry `chosen` allows nothing entry `requested` does not.
fn narrows(chosen: &Value, requested: &Value, types: &DetailsTypes) -> bool {
    let (Some(c), Some(r)) = (chosen.as_object(), requested.as_object()) else {
        return false;
    };
    if c.get("type") != r.get("type") || c.len() != r.len() {
        return false;
    }
    let Some(t) = r
        .get("type")
        .and_then(Value::as_str)
        .and_then(|n| types.get(n))
    else {
        // A type no longer declared: only the request exactly as it was.
        return c == r;
    };
    r.iter().all(|(field, rv)| {
        if field == "type" {
            return true;
        }
        let Some(cv) = c.get(field) else {
            return false;
        };
        match t.fields.get(field) {
            Some(spec) => {
                let parse = |v| limits::parse(spec.kind, &spec.values, v);
                matches!((parse(cv), parse(rv)), (Some(a), Some(b)) if a.narrows(&b))
            }
            None => cv == rv,
        }
    })
}

/// A step-up adds to what the person already allowed this PA (PACT §5.5):
/// the new grant carries the union of scopes and of details entries (each
/// entry once, in the order first seen).
fn union_with_previous(
    approved: &BTreeSet<String>,
    details: Option<Value>,
    previous: &[Grant],
) -> (Vec<String>, Option<Value>) {
    let mut all_scopes = approved.clone();
    let mut all_details: Vec<Value> = details
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for g in previous {
        all_scopes.extend(g.scopes.iter().cloned());
        if let Some(Value::Array(entries)) = &g.authorization_details {
            for e in entries {
                if !all_details.contains(e) {
                    all_details.push(e.clone());
                }
            }
        }
    }
    let details = (!all_details.is_empty()).then_some(Value::Array(all_details));
    (all_scopes.into_iter().collect(), details)
}

pub async fn approve(
    node: &NodeInner,
    approval: Approval<'_>,
    now: OffsetDateTime,
) -> Result<Grant, ConsentError> {
    approve_for(node, approval, None, now).await
}

/// [`approve`], by a person signed in with pactd's own account `account`:
/// the account's row is locked for the approval, as its deletion and its
/// disabling lock it, so that an approval in another tab cannot slip a grant
/// past them (they revoke every grant of the account), and an account
/// deleted or disabled meanwhile approves nothing.
pub async fn approve_for(
    node: &NodeInner,
    approval: Approval<'_>,
    account: Option<Uuid>,
    now: OffsetDateTime,
) -> Result<Grant, ConsentError> {
    let mut tx = node.db.begin().await?;
    let auth = pact_db::device_authorizations::lock(&mut *tx, approval.authorization_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    check_decidable(&auth, now)?;
    if !is_for(&auth, approval.user_sub) {
        return Err(ConsentError::NotTheirs);
    }
    if let Some(id) = account {
        let held = pact_db::users::lock(&mut *tx, id).await?;
        if !held.is_some_and(|u| {
            !u.is_disabled() && u.brand_id == auth.brand_id && u.subject() == *approval.user_sub
        }) {
            return Err(ConsentError::NotFound);
        }
    }
    let requested: BTreeSet<String> = auth.scopes.iter().cloned().collect();
    if !scopes::approvable(&requested, &approval.scopes) {
        return Err(ConsentError::ScopesNotRequested);
    }
    let brand = pact_db::brands::find(&mut *tx, &auth.brand_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    // The one place a grant gets its scopes: an agent admitted under `open`
    // and not verified gets only those the brand marked for it, whatever
    // asked for them (admission.rs, issue 31's trust tiers).
    // An agent staff disabled (or whose host they blocked) after it asked
    // gets nothing: its pending code would otherwise become a grant that
    // re-enabling it revives. Held, so a disable under way is waited for,
    // and a disable that comes later sees this grant and revokes it.
    let agent = pact_db::agents::find_held(&mut *tx, &auth.pa_issuer)
        .await?
        .filter(|a| a.enabled)
        .ok_or(ConsentError::AgentOff)?;
    let offered = pact_db::scopes::list(&mut *tx, &auth.brand_id).await?;
    if crate::admission::scope_refused(&agent, &offered, &approval.scopes).is_some() {
        return Err(ConsentError::ScopesNotRequested);
    }
    let types = authz_details::types_from_settings(&brand.settings);
    let details = chosen_details(
        approval.authorization_details,
        &auth.authorization_details,
        &types,
    )?;

    // A step-up adds to what the user already allowed this PA: the new grant
    // carries the union. The older grants are superseded only when the new
    // grant's tokens are issued (oauth/token.rs), so approving a link the PA
    // never redeems cannot cut the PA off.
    let previous = pact_db::grants::active_for(
        &mut *tx,
        Connection {
            brand_id: &auth.brand_id,
            pa_issuer: &auth.pa_issuer,
            user_sub: approval.user_sub,
        },
        now,
    )
    .await?;
    // What the person approves now is recorded with the types and tools of
    // this moment (PACT §5.7: no later edit may widen it); the earlier
    // grants' records come along with their budgets.
    let rules = node.config_cache.brand_rules(&node.db, &brand).await?;
    let entries: Vec<Value> = details
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (mine, new_budgets) = Terms::approve(&entries, &types, &rules, Uuid::new_v4);
    let mut earlier = Vec::with_capacity(previous.len());
    for g in &previous {
        let t = bounds::terms_of(
            &mut tx,
            g.id,
            g.terms.clone(),
            g.authorization_details.as_ref(),
            &types,
            &rules,
        )
        .await?;
        earlier.push((*t).clone());
    }
    let mut terms = mine.with_previous(&earlier);
    drop_used_operations(&mut tx, &mut terms).await?;
    let expires_at = now + grant_ttl(node, &brand.settings);
    let budgets: Vec<pact_db::budgets::NewBudget<'_>> = new_budgets
        .iter()
        .map(|b| pact_db::budgets::NewBudget {
            id: b.id,
            cap: b.cap,
            currency: b.currency,
        })
        .collect();
    pact_db::budgets::insert(&mut *tx, &budgets, expires_at).await?;
    pact_db::budgets::extend(&mut *tx, &terms.budget_ids(), expires_at).await?;

    let (mut scopes_vec, details_value) = union_with_previous(&approval.scopes, details, &previous);
    // The earlier scopes come along under today's rules: one the brand no
    // longer offers to an unverified agent is not renewed with the rest.
    scopes_vec.retain(|s| {
        approval.scopes.contains(s)
            || crate::admission::scope_refused(&agent, &offered, [s]).is_none()
    });
    let grant = pact_db::grants::insert(
        &mut *tx,
        NewGrant {
            id: GrantId::new_random(),
            brand_id: &auth.brand_id,
            pa_issuer: &auth.pa_issuer,
            user_sub: approval.user_sub,
            scopes: &scopes_vec,
            authorization_details: details_value.as_ref(),
            terms: &terms.to_json(),
            expires_at,
        },
    )
    .await?;
    if !pact_db::device_authorizations::set_approved(&mut *tx, auth.id, approval.user_sub, grant.id)
        .await?
    {
        return Err(ConsentError::AlreadyDecided);
    }
    tx.commit().await?;
    // Every node forgets it when the notification arrives; this one at once,
    // so a PA polling this node cannot hear "pending" after the decision.
    node.pending_polls.forget(auth.id);
    Ok(grant)
}

/// One-off approvals already used need not be carried into a new grant.
async fn drop_used_operations(
    conn: &mut sqlx::PgConnection,
    terms: &mut Terms,
) -> Result<(), ConsentError> {
    if terms.operations.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = terms.operations.iter().map(|o| o.budget).collect();
    let usage = pact_db::budgets::usage(&mut *conn, &ids).await?;
    terms
        .operations
        .retain(|o| usage.iter().any(|u| u.id == o.budget && u.used < u.cap));
    Ok(())
}

/// The person's decision on a step-up beyond a limit (`pact_core::agent::asked`):
/// each operation asked about is added, with a budget of one use, to the
/// live grants of this person for this platform at this brand that hold its
/// scope (PACT §5.5: the person approves what the turn lacked; the personal
/// agent then sends the message again, and the merchant agent's retry with
/// the same arguments goes through, once). Only the person whose grant the
/// call was made under can approve it.
pub async fn approve_operations(
    node: &NodeInner,
    authorization_id: Uuid,
    user_sub: &UserSub,
    now: OffsetDateTime,
) -> Result<Vec<GrantId>, ConsentError> {
    let mut tx = node.db.begin().await?;
    let auth = pact_db::device_authorizations::lock(&mut *tx, authorization_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    check_decidable(&auth, now)?;
    if !is_for(&auth, user_sub) {
        return Err(ConsentError::NotTheirs);
    }
    let asked = crate::agent::asked::asked_of(auth.operations.as_ref())
        .filter(|a| !a.is_empty())
        .ok_or(ConsentError::NotFound)?;
    let mut granted = Vec::new();
    for op in &asked {
        let grant = pact_db::grants::find(&mut *tx, op.grant_id)
            .await?
            .filter(|g| g.is_active(now) && is_theirs(g, &auth, user_sub))
            .ok_or(ConsentError::OperationGrantGone)?;
        let budget = Uuid::new_v4();
        pact_db::budgets::insert(
            &mut *tx,
            &[pact_db::budgets::NewBudget {
                id: budget,
                cap: 1,
                currency: None,
            }],
            grant.expires_at,
        )
        .await?;
        // `domain::terms::Operation`, as the grant's terms hold it.
        let value = serde_json::json!({
            "tool": op.tool,
            "scope": op.scope,
            "argsHash": op.args_hash,
            "budget": budget,
            "amounts": op.amounts,
        });
        let ids = pact_db::grants::add_operation(
            &mut *tx,
            Connection {
                brand_id: &auth.brand_id,
                pa_issuer: &auth.pa_issuer,
                user_sub,
            },
            &op.scope,
            &value,
            now,
        )
        .await?;
        if ids.is_empty() {
            return Err(ConsentError::OperationGrantGone);
        }
        granted.extend(ids);
    }
    granted.sort();
    granted.dedup();
    let first = asked
        .first()
        .map(|o| o.grant_id)
        .ok_or(ConsentError::NotFound)?;
    if !pact_db::device_authorizations::set_approved(&mut *tx, auth.id, user_sub, first).await? {
        return Err(ConsentError::AlreadyDecided);
    }
    tx.commit().await?;
    node.pending_polls.forget(auth.id);
    Ok(granted)
}

/// Whether `grant` is `user_sub`'s, at the authorization's brand, for its
/// agent: an "Allow once" request is the person's whose grant the call was
/// made under (PACT §5.5), and nobody else's to see, approve or deny.
fn is_theirs(grant: &Grant, auth: &DeviceAuthorization, user_sub: &UserSub) -> bool {
    grant.brand_id == auth.brand_id
        && grant.pa_issuer == auth.pa_issuer
        && grant.user_sub == user_sub
}

/// Whether a step-up is for `user_sub`: one asked in a delegated turn is the
/// person's the turn acted for (PACT §5.5), anyone's otherwise (RFC 8628:
/// whoever the device's person signs in as).
fn is_for(auth: &DeviceAuthorization, user_sub: &UserSub) -> bool {
    auth.for_user_sub.as_ref().is_none_or(|u| u == user_sub)
}

/// Whether `user_sub` may see and decide `auth`: a step-up asked for another
/// person is not theirs ([`is_for`]), nor an "Allow once" request unless
/// every operation it asks about was made under one of their grants.
pub async fn is_theirs_to_decide(
    node: &NodeInner,
    auth: &DeviceAuthorization,
    user_sub: &UserSub,
) -> Result<bool, pact_db::Error> {
    if !is_for(auth, user_sub) {
        return Ok(false);
    }
    let asked = crate::agent::asked::asked_of(auth.operations.as_ref()).unwrap_or_default();
    for op in &asked {
        let grant = pact_db::grants::find(&node.db, op.grant_id).await?;
        if !grant.is_some_and(|g| is_theirs(&g, auth, user_sub)) {
            return Ok(false);
        }
    }
    Ok(true)
}

pub async fn deny(
    node: &NodeInner,
    authorization_id: Uuid,
    user_sub: Option<&UserSub>,
    now: OffsetDateTime,
) -> Result<(), ConsentError> {
    let mut tx = node.db.begin().await?;
    let auth = pact_db::device_authorizations::lock(&mut *tx, authorization_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    check_decidable(&auth, now)?;
    // A step-up asked for a person is denied by that person only.
    let theirs = match user_sub {
        Some(u) => is_for(&auth, u),
        None => auth.for_user_sub.is_none(),
    };
    if !theirs {
        return Err(ConsentError::NotTheirs);
    }
    pact_db::device_authorizations::set_denied(&mut *tx, auth.id, user_sub).await?;
    tx.commit().await?;
    node.pending_polls.forget(auth.id);
    Ok(())
}

/// Looks an authorization up by the code a person typed (normalised first).
pub async fn find_by_user_code(
    node: &NodeInner,
    typed: &str,
) -> Result<Option<DeviceAuthorization>, ConsentError> {
    let Some(code) = crate::domain::user_code::normalise(typed) else {
        return Ok(None);
    };
    Ok(pact_db::device_authorizations::find_live_by_user_code(&node.db, &code).await?)
}

fn check_decidable(auth: &DeviceAuthorization, now: OffsetDateTime) -> Result<(), ConsentError> {
    if auth.status != AuthStatus::Pending {
        return Err(ConsentError::AlreadyDecided);
    }
    if auth.expires_at <= now {
        return Err(ConsentError::Expired);
    }
    Ok(())
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for ConsentError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e.into())
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests build rows at real times
mod tests {
    //! The decision's rules as plain functions: what may be decided, which
    //! details a grant keeps, what a step-up's grant carries, how long it lives.

    use serde_json::json;
    use time::Duration;

    use super::*;

    fn authorization(
        status: AuthStatus,
        expires_in: Duration,
        now: OffsetDateTime,
    ) -> DeviceAuthorization {
        DeviceAuthorization {
            id: Uuid::new_v4(),
            brand_id: pact_db::ids::BrandId::parse("demo").unwrap(),
            pa_issuer: "https://pa.example".into(),
            pa_sub: "pa-u".to_owned(),
            user_code: "BCDF-GHJK".to_owned(),
            scopes: vec!["orders:read".to_owned()],
            authorization_details: None,
            status,
            interval_secs: 5,
            last_polled_at: None,
            expires_at: now + expires_in,
            created_at: now - Duration::minutes(1),
            request_ip: None,
            decided_at: None,
            user_sub: None,
            grant_id: None,
            operations: None,
            for_user_sub: None,
        }
    }

    #[test]
    fn only_a_pending_unexpired_authorization_can_be_decided() {
        let now = OffsetDateTime::now_utc();
        let cases = [
            (AuthStatus::Pending, Duration::minutes(5), true),
            (AuthStatus::Pending, Duration::ZERO, false), // expires_at == now is expired (RFC 8628 §3.5)
            (AuthStatus::Pending, Duration::seconds(-1), false),
            (AuthStatus::Approved, Duration::minutes(5), false),
            (AuthStatus::Denied, Duration::minutes(5), false),
        ];
        for (status, expires_in, decidable) in cases {
            let auth = authorization(status, expires_in, now);
            assert_eq!(
                check_decidable(&auth, now).is_ok(),
                decidable,
                "{status:?} expiring in {expires_in}"
            );
        }
        assert!(matches!(
            check_decidable(
                &authorization(AuthStatus::Approved, Duration::minutes(5), now),
                now
            ),
            Err(ConsentError::AlreadyDecided)
        ));
        assert!(matches!(
            check_decidable(
                &authorization(AuthStatus::Pending, Duration::ZERO, now),
                now
            ),
            Err(ConsentError::Expired)
        ));
    }

    fn booking_types() -> DetailsTypes {
        serde_json::from_value(
            json!({"booking_change": {"scope": "bookings:change", "fields": {
                "booking_ids": {"type": "string_array"},
                "max_fee": {"type": "amount"},
                "moves": {"type": "count"}
            }}}),
        )
        .unwrap()
    }

    #[test]
    fn a_grant_keeps_every_requested_restriction_unless_the_person_narrows_it() {
        let types = booking_types();
        let entry = |ids: Value, fee: &str, moves: i64| {
            json!({"type": "booking_change", "booking_ids": ids,
                   "max_fee": {"currency": "EUR", "amount": fee}, "moves": moves})
        };
        let requested = Some(json!([entry(json!(["A", "B"]), "20.00", 3)]));
        // Nothing chosen: all of it as requested, never less restrictive.
        assert_eq!(
            chosen_details(None, &requested, &types).unwrap(),
            requested.clone()
        );
        assert_eq!(chosen_details(None, &None, &types).unwrap(), None);
        // Narrower values are kept as chosen.
        let narrower = json!([entry(json!(["B"]), "5.00", 1)]);
        assert_eq!(
            chosen_details(Some(narrower.clone()), &requested, &types).unwrap(),
            Some(narrower)
        );
        // Never wider values, never a limit dropped or entries left out (which
        // would lift restrictions), never details where none were requested.
        let mut no_fee = entry(json!(["A"]), "1.00", 1);
        no_fee.as_object_mut().unwrap().remove("max_fee");
        for chosen in [
            json!([entry(json!(["A", "C"]), "20.00", 3)]),
            json!([entry(json!(["A"]), "20.01", 3)]),
            json!([entry(json!(["A"]), "20.00", 4)]),
            json!([no_fee]),
            json!([]),
            json!([
                entry(json!(["A"]), "1.00", 1),
                entry(json!(["B"]), "1.00", 1)
            ]),
            entry(json!(["A"]), "1.00", 1),
            json!("x"),
        ] {
            assert!(
                matches!(
                    chosen_details(Some(chosen.clone()), &requested, &types),
                    Err(ConsentError::DetailsNotRequested)
                ),
                "{chosen}"
            );
        }
        assert!(chosen_details(Some(json!([entry(json!(["A"]), "1", 1)])), &None, &types).is_err());
    }

    fn grant(scopes: &[&str], details: Option<Value>) -> Grant {
        let now = OffsetDateTime::now_utc();
        Grant {
            id: GrantId::new_random(),
            brand_id: pact_db::ids::BrandId::parse("demo").unwrap(),
            pa_issuer: "https://pa.example".to_owned().into(),
            user_sub: "u-1".to_owned().into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            authorization_details: details,
            created_at: now,
            expires_at: now + Duration::days(30),
            last_used_at: None,
            revoked_at: None,
            revoked_reason: None,
            terms: None,
        }
    }

    #[test]
    fn a_step_up_grant_carries_the_union_of_what_was_allowed_before() {
        let approved: BTreeSet<String> = ["orders:cancel".to_owned()].into();
        let one = json!({"type": "order_cancellation", "order_ids": ["DEMO-1"]});
        let two = json!({"type": "order_cancellation", "order_ids": ["DEMO-2"]});
        let previous = [
            grant(&["orders:read"], None),
            grant(
                &["orders:read", "orders:cancel"],
                Some(json!([one.clone()])),
            ),
        ];
        let (scopes, details) = union_with_previous(
            &approved,
            Some(json!([two.clone(), one.clone()])),
            &previous,
        );
        assert_eq!(scopes, ["orders:cancel", "orders:read"]);
        assert_eq!(details, Some(json!([two, one])), "each entry once");
        // No details anywhere: none on the grant (not an empty list).
        let (scopes, details) = union_with_previous(&approved, None, &previous[..1]);
        assert_eq!(scopes, ["orders:cancel", "orders:read"]);
        assert_eq!(details, None);
        // No earlier grant: exactly what was approved.
        let (scopes, _) = union_with_previous(&approved, None, &[]);
        assert_eq!(scopes, ["orders:cancel"]);
    }

    #[test]
    fn a_brands_grant_lifetime_is_whole_days_from_1_to_365_else_the_default() {
        let default = Duration::days(30);
        for (settings, days) in [
            (json!({}), 30),
            (json!({"grant_ttl_days": 7}), 7),
            (json!({"grant_ttl_days": 1}), 1),
            (json!({"grant_ttl_days": 365}), 365),
            (json!({"grant_ttl_days": 366}), 30),
            (json!({"grant_ttl_days": 0}), 30),
            (json!({"grant_ttl_days": -5}), 30),
            (json!({"grant_ttl_days": "7"}), 30),
            (json!({"grant_ttl_days": 7.5}), 30),
        ] {
            assert_eq!(
                brand_grant_ttl(&settings, default),
                Duration::days(days),
                "{settings}"
            );
        }
    }
}
