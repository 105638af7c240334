//! RFC 8414 metadata and the JWKS (public; PACT §1 URLs).

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use pact_proto::oauth::{
    AuthorizationServerMetadata, GRANT_TYPE_DEVICE_CODE, GRANT_TYPE_REFRESH_TOKEN,
};

use super::{OAuthFailure, offered_scopes};
use crate::domain::authz_details;
use crate::error::ApiError;
use pact_node::node::Node;

fn public_json(body: &serde_json::Value) -> Response {
    let mut res = super::oauth_json(StatusCode::OK, body);
    let h = res.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    h.remove(header::PRAGMA);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    res
}

/// The brand the path names, from the node's copy; none (or a name that
/// does not even decode, `%FF`) is the bare 404, not axum's plain-text 400.
async fn path_brand(
    node: &Node,
    path: Result<Path<String>, PathRejection>,
) -> Result<pact_db::brands::Brand, OAuthFailure> {
    let Ok(Path(brand_id)) = path else {
        return Err(OAuthFailure::Api(ApiError::NotFound));
    };
    node.config_cache
        .brand(&node.db, &brand_id)
        .await?
        .ok_or(OAuthFailure::Api(ApiError::NotFound))
}

pub async fn metadata(
    State(node): State<Node>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, OAuthFailure> {
    let brand = path_brand(&node, path).await?;
    let scopes = offered_scopes(&node, &brand.id).await?;
    let c = &node.config;
    let issuer = c.oauth_issuer(&brand.id);
    let types: Vec<String> = authz_details::types_from_settings(&brand.settings)
        .into_keys()
        .collect();
    let body = AuthorizationServerMetadata {
        device_authorization_endpoint: format!("{issuer}/device_authorization"),
        token_endpoint: format!("{issuer}/token"),
        revocation_endpoint: format!("{issuer}/revoke"),
        introspection_endpoint: Some(format!("{issuer}/introspect")),
        // RFC 7662 §2.1 with a brand API credential (`pactd brand credential add`).
        introspection_endpoint_auth_methods_supported: Some(vec!["client_secret_basic".to_owned()]),
        jwks_uri: format!("{issuer}/jwks.json"),
        receipt_keys_uri: Some(format!("{issuer}/receipt-keys.json")),
        receipt_tree_head_uri: Some(format!("{}/receipts/tree-head", c.public_url)),
        issuer,
        scopes_supported: scopes.into_iter().collect(),
        grant_types_supported: vec![
            GRANT_TYPE_DEVICE_CODE.to_owned(),
            GRANT_TYPE_REFRESH_TOKEN.to_owned(),
        ],
        // PACT §5: the client authenticates with its PA-JWT as a Bearer header.
        token_endpoint_auth_methods_supported: vec!["pa_jwt_bearer".to_owned()],
        revocation_endpoint_auth_methods_supported: vec!["pa_jwt_bearer".to_owned()],
        response_types_supported: vec![],
        authorization_details_types_supported: (!types.is_empty()).then_some(types),
    };
    let mut body = serde_json::to_value(body).map_err(OAuthFailure::internal)?;
    // pactd: what an agent nobody registered needs to talk to this brand
    // (PACT §3: the one Provider-wide `aud`; §3.1: the admission policy).
    body["pact_pa_jwt_audience"] = serde_json::json!(c.audience);
    body["pact_admission"] =
        serde_json::json!(crate::admission::policy_at(c.admission.policy, &brand).as_str());
    Ok(public_json(&body))
}

pub async fn jwks(
    State(node): State<Node>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, OAuthFailure> {
    let brand = path_brand(&node, path).await?;
    offered_scopes(&node, &brand.id).await?;
    Ok(public_json(
        &node
            .keys
            .current()
            .published(node.clock.now())
            .jwks_document(),
    ))
}

/// `GET …/oauth/receipt-keys.json`: the receipt key archive. Receipts are
/// evidence kept for years (PACT §5.6), longer than a retired key stays at
/// `jwks_uri` (which is only for tokens in flight). This JWKS holds every
/// public key pactd ever signed with, published or not, so any receipt
/// stays checkable. Only public keys; a verifier must use `jwks_uri`, never
/// this, for delegation tokens.
pub async fn receipt_keys(
    State(node): State<Node>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, OAuthFailure> {
    let brand = path_brand(&node, path).await?;
    offered_scopes(&node, &brand.id).await?;
    let keys = crate::keys::all_public_keys(&node.db)
        .await
        .map_err(OAuthFailure::internal)?;
    Ok(public_json(&keys.jwks_document()))
}
