//! `POST {iface}/oauth/introspect`: RFC 7662 token introspection for the
//! merchant's own resource servers, so an existing API can accept
//! delegation tokens directly.
//!
//! The caller authenticates with a brand API credential by HTTP Basic (RFC
//! 7662 §2.1; RFC 6749 §2.3.1); a missing or wrong one is 401 with
//! `WWW-Authenticate: Basic`. Any token that is not valid right now for this
//! brand — malformed, bad signature, another brand's, expired, revoked — is
//! just `{"active": false}` (RFC 7662 §2.2: nothing more is said about it).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_node::node::Node;
use serde_json::{Value, json};

use super::{OAuthFailure, oauth_json};
use crate::merchant::credentials;

fn unauthenticated() -> Response {
    let mut res = oauth_json(
        StatusCode::UNAUTHORIZED,
        &json!({"error": "invalid_client"}),
    );
    res.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(r#"Basic realm="introspection""#),
    );
    res
}

fn inactive() -> Response {
    oauth_json(StatusCode::OK, &json!({"active": false}))
}

/// The `client_id` claim, read before verification only to know which PA
/// to verify it for; the signature and every claim are checked after.
fn unverified_client_id(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.get("client_id")?.as_str().map(str::to_owned)
}

pub async fn introspect(
    State(node): State<Node>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // No credential is of a brand whose name does not decode (`%FF`): the
    // client is not authenticated here (RFC 7662 §2.1), not axum's 400.
    let Ok(Path(brand_id)) = path else {
        return unauthenticated();
    };
    let Some((client_id, secret)) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(credentials::parse_basic)
    else {
        return unauthenticated();
    };
    let credential = match pact_db::merchant::find_credential(&node.db, &client_id).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "introspection: loading the credential failed");
            // An outage is 503 temporarily_unavailable with Retry-After, as
            // on every OAuth endpoint, and tells the node's health guard.
            return OAuthFailure::from(e).into_response();
        }
    };
    let authenticated = credential.as_ref().is_some_and(|c| {
        c.brand_id == brand_id
            && c.revoked_at.is_none()
            && credentials::secret_matches(&secret, &c.secret_hash)
    });
    if !authenticated {
        // `?`: the path's brand is unproven text (no forged log lines).
        tracing::info!(brand = ?brand_id, "introspection: client authentication failed");
        return unauthenticated();
    }
    let form = match super::form::decode::<super::form::IntrospectForm>(&body) {
        Ok(f) => f,
        Err(_) => {
            return oauth_json(
                StatusCode::BAD_REQUEST,
                &json!({"error": "invalid_request"}),
            );
        }
    };
    let Some(token) = form.token.as_deref() else {
        return oauth_json(
            StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_request", "error_description": "token is required"}),
        );
    };
    let Some(pa) = unverified_client_id(token) else {
        return inactive();
    };
    // Authenticated: the credential is the path's brand's, whose id it carries.
    let Some(brand_id) = credential.map(|c| c.brand_id) else {
        return unauthenticated();
    };
    let issuer = node.config.oauth_issuer(&brand_id);
    let iface = node.config.interface_url(&brand_id);
    let Ok(claims) = pact_jose::verify_delegation_token(
        token,
        node.keys.current().published(node.clock.now()),
        &issuer,
        &iface,
        &pa,
        node.clock.now().unix_timestamp(),
    ) else {
        return inactive();
    };
    let Ok(grant_id) = claims.grant_id.parse::<pact_db::ids::GrantId>() else {
        return inactive();
    };
    if node.revocations.is_revoked(grant_id) {
        return inactive();
    }
    let grant = match pact_db::grants::find(&node.db, grant_id).await {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "introspection: loading the grant failed");
            // An outage is 503 temporarily_unavailable with Retry-After, as
            // on every OAuth endpoint, and tells the node's health guard.
            return OAuthFailure::from(e).into_response();
        }
    };
    let Some(grant) = grant.filter(|g| {
        g.is_active(node.clock.now())
            && g.brand_id == brand_id
            && g.pa_issuer == claims.client_id.as_str()
            && g.user_sub == claims.sub.as_str()
    }) else {
        return inactive();
    };
    // What the token may do: its scopes the grant holds (a turn acts with no
    // more, a2a/send.rs), whatever key signed it.
    let scope = claims
        .scope
        .split(' ')
        .filter(|s| grant.scopes.iter().any(|g| g == s))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = json!({
        "active": true,
        "sub": claims.sub,
        "client_id": claims.client_id,
        "scope": scope,
        "grant_id": claims.grant_id,
        "exp": claims.exp,
        "iat": claims.iat,
        "iss": claims.iss,
        "aud": claims.aud,
        "token_type": "Bearer",
    });
    if let Some(d) = claims.authorization_details {
        out["authorization_details"] = d;
    }
    oauth_json(StatusCode::OK, &out)
}
