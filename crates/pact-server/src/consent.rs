//! The user's decision on a device authorization (PACT §5.2). The browser
//! pages call these; so do tests. Approval creates the grant and marks the
//! authorization approved in one transaction, so a poller can never see an
//! approval without its grant, nor a grant exist for an undecided request.

use std::collections::BTreeSet;

use pact_db::device_authorizations::DeviceAuthorization;
use pact_db::grants::{Grant, NewGrant};
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::domain::scopes;
use crate::state::AppState;

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
    #[error("only requested authorization_details can be granted")]
    DetailsNotRequested,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// What the user approved: a non-empty subset of the requested scopes and,
/// optionally, a subset of the requested `authorization_details` entries
/// (`None` keeps all of them: a restriction is never dropped silently).
#[derive(Clone, Debug)]
pub struct Approval<'a> {
    pub authorization_id: Uuid,
    /// The user's id at the brand; the delegation token's `sub`.
    pub user_sub: &'a str,
    pub scopes: BTreeSet<String>,
    pub authorization_details: Option<Value>,
}

/// Grant lifetime for a brand: its `grant_ttl_days` setting, else the default.
pub fn grant_ttl(state: &AppState, brand_settings: &Value) -> time::Duration {
    brand_settings
        .get("grant_ttl_days")
        .and_then(Value::as_i64)
        .filter(|d| (1..=365).contains(d))
        .map(time::Duration::days)
        .unwrap_or_else(|| {
            time::Duration::try_from(state.config.delegation.grant_ttl)
                .unwrap_or(time::Duration::days(30))
        })
}

pub async fn approve(
    state: &AppState,
    approval: Approval<'_>,
    now: OffsetDateTime,
) -> Result<Grant, ConsentError> {
    let mut tx = state.db.begin().await?;
    let auth = pact_db::device_authorizations::lock(&mut *tx, approval.authorization_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    check_decidable(&auth, now)?;
    let requested: BTreeSet<String> = auth.scopes.iter().cloned().collect();
    if !scopes::approvable(&requested, &approval.scopes) {
        return Err(ConsentError::ScopesNotRequested);
    }
    let details = match (approval.authorization_details, &auth.authorization_details) {
        (None, requested) => requested.clone(),
        (Some(chosen), Some(Value::Array(requested))) => {
            let ok = chosen
                .as_array()
                .is_some_and(|c| !c.is_empty() && c.iter().all(|e| requested.contains(e)));
            if !ok {
                return Err(ConsentError::DetailsNotRequested);
            }
            Some(chosen)
        }
        (Some(_), _) => return Err(ConsentError::DetailsNotRequested),
    };

    // A step-up adds to what the user already allowed this PA: the new grant
    // carries the union. The older grants are superseded only when the new
    // grant's tokens are issued (oauth/token.rs), so approving a link the PA
    // never redeems cannot cut the PA off.
    let brand = pact_db::brands::find(&mut *tx, &auth.brand_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    let previous = pact_db::grants::active_for(
        &mut *tx,
        &auth.brand_id,
        &auth.pa_issuer,
        approval.user_sub,
        now,
    )
    .await?;
    let mut all_scopes = approval.scopes.clone();
    let mut all_details: Vec<Value> = details
        .as_ref()
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for g in &previous {
        all_scopes.extend(g.scopes.iter().cloned());
        if let Some(Value::Array(entries)) = &g.authorization_details {
            for e in entries {
                if !all_details.contains(e) {
                    all_details.push(e.clone());
                }
            }
        }
    }
    let scopes_vec: Vec<String> = all_scopes.into_iter().collect();
    let details_value = (!all_details.is_empty()).then_some(Value::Array(all_details));
    let grant = pact_db::grants::insert(
        &mut *tx,
        NewGrant {
            id: Uuid::new_v4(),
            brand_id: &auth.brand_id,
            pa_issuer: &auth.pa_issuer,
            user_sub: approval.user_sub,
            scopes: &scopes_vec,
            authorization_details: details_value.as_ref(),
            expires_at: now + grant_ttl(state, &brand.settings),
        },
    )
    .await?;
    if !pact_db::device_authorizations::set_approved(&mut *tx, auth.id, approval.user_sub, grant.id)
        .await?
    {
        return Err(ConsentError::AlreadyDecided);
    }
    tx.commit().await?;
    Ok(grant)
}

pub async fn deny(
    state: &AppState,
    authorization_id: Uuid,
    user_sub: Option<&str>,
    now: OffsetDateTime,
) -> Result<(), ConsentError> {
    let mut tx = state.db.begin().await?;
    let auth = pact_db::device_authorizations::lock(&mut *tx, authorization_id)
        .await?
        .ok_or(ConsentError::NotFound)?;
    check_decidable(&auth, now)?;
    pact_db::device_authorizations::set_denied(&mut *tx, auth.id, user_sub).await?;
    tx.commit().await?;
    Ok(())
}

/// Looks an authorization up by the code a person typed (normalised first).
pub async fn find_by_user_code(
    state: &AppState,
    typed: &str,
) -> Result<Option<DeviceAuthorization>, ConsentError> {
    let Some(code) = crate::domain::user_code::normalise(typed) else {
        return Ok(None);
    };
    Ok(pact_db::device_authorizations::find_live_by_user_code(&state.db, &code).await?)
}

fn check_decidable(auth: &DeviceAuthorization, now: OffsetDateTime) -> Result<(), ConsentError> {
    if auth.status != "pending" {
        return Err(ConsentError::AlreadyDecided);
    }
    if auth.expires_at <= now {
        return Err(ConsentError::Expired);
    }
    Ok(())
}
