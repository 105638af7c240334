//! Checking the `X-A2A-User-Delegation` token (PACT §5.5 step 2).

use axum::http::{HeaderMap, HeaderName};
use pact_node::node::NodeInner;
use pact_proto::a2a::DELEGATION_HEADER;

use crate::agent::Delegation;
use crate::auth::{Caller, bearer};
use crate::error::ApiError;

/// A verified token, before the grant row is re-checked in the turn's
/// transaction. A type of its own, not a `Delegation`, so that nothing can
/// take a token whose grant has not been read back yet for a checked one:
/// only `send::begin` turns it into the turn's `Delegation`, with the
/// grant's terms (the limits every call is judged against).
#[derive(Clone, Debug)]
pub struct Presented {
    pub grant_id: pact_db::ids::GrantId,
    /// The user's id at the brand (the token's `sub`).
    pub user_sub: pact_db::ids::UserSub,
    pub scopes: std::collections::BTreeSet<String>,
    pub authorization_details: Option<serde_json::Value>,
}

impl Presented {
    /// The turn's delegation, once the grant was read back with its terms.
    pub fn with_terms(&self, terms: std::sync::Arc<crate::domain::terms::Terms>) -> Delegation {
        Delegation {
            grant_id: self.grant_id,
            user_sub: self.user_sub.clone(),
            scopes: self.scopes.clone(),
            authorization_details: self.authorization_details.clone(),
            terms,
        }
    }
}

/// Verifies a delegation token for this brand and this PA (signature by a
/// published key, `iss`, `aud`, `client_id`, lifetime) — not revocation.
pub fn verify_token(
    node: &NodeInner,
    caller: &Caller,
    token: &str,
) -> Result<pact_proto::oauth::DelegationClaims, pact_jose::DelegationError> {
    pact_jose::verify_delegation_token(
        token,
        node.keys.current().published(node.clock.now()),
        &node.config.oauth_issuer(&caller.brand.id),
        &node.config.interface_url(&caller.brand.id),
        &caller.pa.iss,
        node.clock.now().unix_timestamp(),
    )
}

/// `Ok(None)` when no delegation header was sent. Any defect — malformed,
/// bad signature, wrong brand (`aud`), another PA (`client_id`), expired,
/// revoked — is the 401 with `error="invalid_token"`.
pub fn check(
    node: &NodeInner,
    caller: &Caller,
    headers: &HeaderMap,
) -> Result<Option<Presented>, ApiError> {
    let name = HeaderName::from_static(DELEGATION_HEADER);
    if !headers.contains_key(&name) {
        return Ok(None);
    }
    let token = bearer(headers, &name).ok_or(ApiError::InvalidDelegation)?;
    let claims = verify_token(node, caller, token).map_err(|e| {
        tracing::info!(reason = %e, issuer = %caller.pa.iss, "delegation token rejected");
        ApiError::InvalidDelegation
    })?;
    let grant_id: pact_db::ids::GrantId = claims
        .grant_id
        .parse()
        .map_err(|_| ApiError::InvalidDelegation)?;
    // Fast path: a revocation this node has heard of needs no database round trip.
    if node.revocations.is_revoked(grant_id) {
        tracing::info!(grant = %grant_id, "delegation token rejected: grant revoked");
        return Err(ApiError::InvalidDelegation);
    }
    Ok(Some(Presented {
        grant_id,
        scopes: claims.scopes().map(str::to_owned).collect(),
        user_sub: claims.sub.into(),
        authorization_details: claims.authorization_details,
    }))
}
