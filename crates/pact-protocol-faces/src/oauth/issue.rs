//! Minting a delegation token and a refresh token for a grant (PACT §5.3–5.4).

use std::collections::BTreeSet;

use pact_db::grants::Grant;
use pact_node::node::NodeInner;
use pact_proto::oauth::{DelegationClaims, TokenResponse};
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::OAuthFailure;
use crate::domain::{scopes, secrets};

/// Issues a pair inside the caller's transaction. `scope` narrows the access
/// token (RFC 6749 §6) but never widens it; the refresh token keeps the grant's.
pub async fn token_pair(
    node: &NodeInner,
    tx: &mut PgConnection,
    grant: &Grant,
    scope: Option<&BTreeSet<String>>,
    now: OffsetDateTime,
) -> Result<TokenResponse, OAuthFailure> {
    let granted: BTreeSet<String> = grant.scopes.iter().cloned().collect();
    let scope = scope.cloned().unwrap_or(granted);
    let ttl = time::Duration::try_from(node.config.delegation.access_token_ttl)
        .unwrap_or(time::Duration::minutes(15));
    let exp = (now + ttl).min(grant.expires_at);
    let claims = DelegationClaims {
        iss: node.config.oauth_issuer(&grant.brand_id),
        aud: node.config.interface_url(&grant.brand_id),
        sub: grant.user_sub.to_string(),
        client_id: grant.pa_issuer.to_string(),
        scope: scopes::join(&scope),
        grant_id: grant.id.to_string(),
        iat: now.unix_timestamp(),
        exp: exp.unix_timestamp(),
        jti: Uuid::new_v4().to_string(),
        authorization_details: grant.authorization_details.clone(),
    };
    let key = node
        .keys
        .current()
        .signing_key(now)
        .map_err(OAuthFailure::internal)?;
    let access_token =
        pact_jose::sign_delegation_token(&key, &claims).map_err(OAuthFailure::internal)?;
    let (refresh_token, refresh_hash) = secrets::new_secret();
    pact_db::grants::insert_refresh_token(&mut *tx, &refresh_hash, grant.id, grant.expires_at)
        .await?;
    Ok(TokenResponse {
        token_type: "Bearer".to_owned(),
        access_token,
        refresh_token,
        expires_in: u64::try_from(claims.exp - claims.iat).unwrap_or(0),
        scope: claims.scope,
        authorization_details: grant.authorization_details.clone(),
    })
}
