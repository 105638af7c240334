//! `POST {iface}/oauth/revoke` (RFC 7009). A refresh or delegation token of
//! the calling PA revokes its grant; anything else still gets 200 (§2.2: the
//! client cannot learn whether a token existed).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use pact_node::node::NodeInner;
use pact_proto::oauth::OAuthErrorCode;

use super::{OAuthCaller, OAuthFailure, check_client_id, form, oauth_json};
use crate::auth::Caller;
use crate::domain::secrets;
use crate::state::AppState;

pub async fn revoke(
    State(state): State<AppState>,
    OAuthCaller(caller): OAuthCaller,
    body: Bytes,
) -> Result<Response, OAuthFailure> {
    // Not gated on the brand offering scopes, as the other OAuth endpoints
    // are: a brand whose staff removed every scope still holds its grants
    // (they come back with a scope), and an agent must always be able to
    // give its access up (RFC 7009 §1).
    let form: form::RevokeForm = form::decode(&body)?;
    check_client_id(form.client_id.as_deref(), &caller.pa.iss, false)?;
    let token = form
        .token
        .as_deref()
        .ok_or_else(|| OAuthFailure::new(OAuthErrorCode::InvalidRequest, "token is required"))?;
    let Some(grant_id) = grant_of(&state, &caller, token).await? else {
        return Ok(oauth_json(StatusCode::OK, &serde_json::json!({})));
    };
    if pact_db::grants::revoke(&state.db, grant_id, pact_db::grants::reason::BY_AGENT).await? {
        state.revocations.insert(grant_id);
        tracing::info!(grant = %grant_id, "grant revoked by its PA");
    }
    Ok(oauth_json(StatusCode::OK, &serde_json::json!({})))
}

/// The grant a token belongs to, if it is a token of this PA at this brand.
async fn grant_of(
    node: &NodeInner,
    caller: &Caller,
    token: &str,
) -> Result<Option<pact_db::ids::GrantId>, OAuthFailure> {
    if let Some(stored) =
        pact_db::grants::find_refresh_token(&node.db, &secrets::hash(token)).await?
    {
        let grant = pact_db::grants::find(&node.db, stored.grant_id).await?;
        return Ok(grant
            .filter(|g| g.pa_issuer == *caller.issuer() && g.brand_id == caller.brand.id)
            .map(|g| g.id));
    }
    let verified = crate::a2a::delegation::verify_token(node, caller, token);
    Ok(verified.ok().and_then(|c| c.grant_id.parse().ok()))
}
