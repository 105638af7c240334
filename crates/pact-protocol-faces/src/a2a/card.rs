//! `GET {iface}/.well-known/agent-card.json` (PACT §2): no authentication.

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_proto::card::{AgentCard, CardInput, DeviceCodeFlow};

use crate::error::ApiError;
use crate::state::AppState;

pub async fn get_card(
    State(state): State<AppState>,
    path: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<Response, ApiError> {
    // PACT §2: an unknown brand is a bare 404, not an A2A error; so is one
    // whose name does not even decode (`%FF`), rather than axum's 400.
    let Ok(Path(brand_id)) = path else {
        return Err(ApiError::NotFound);
    };
    // From the node's copy: anyone may ask, by any name, as often as they like.
    let brand = state
        .config_cache
        .brand(&state.db, &brand_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    // The owner's skills when set (`pactd brand set --skills-json`, the API,
    // the console), otherwise the brand agent's own.
    let skills =
        crate::admin::brand_settings::card_skills(&brand).unwrap_or_else(|| match brand.agent() {
            pact_db::brands::AgentKind::Webhook => crate::merchant::skills(&brand),
            pact_db::brands::AgentKind::BuiltIn(kind) => state
                .agents
                .of_kind(kind)
                .map(|a| a.skills(&brand))
                .unwrap_or_default(),
        });
    let interface_url = state.config.interface_url(&brand.id);
    // PACT §2: a brand with scopes advertises delegation (the device-code flow).
    let scopes = state.config_cache.scopes(&state.db, &brand.id).await?;
    let delegation = (!scopes.is_empty()).then(|| {
        let issuer = state.config.oauth_issuer(&brand.id);
        DeviceCodeFlow {
            device_authorization_url: format!("{issuer}/device_authorization"),
            token_url: format!("{issuer}/token"),
            scopes: scopes
                .iter()
                .map(|s| (s.scope_id.clone(), s.description.clone()))
                .collect(),
        }
    });
    let card = AgentCard::build(CardInput {
        brand_name: &brand.name,
        brand_description: &brand.description,
        interface_url: &interface_url,
        provider_organization: &state.config.provider_name,
        provider_url: &state.config.public_url,
        version: env!("CARGO_PKG_VERSION"),
        skills,
        delegation,
    });
    let body = serde_json::to_value(&card).map_err(ApiError::internal)?;
    let mut res = crate::error::a2a_json(StatusCode::OK, &body);
    let headers = res.headers_mut();
    // The card is public and changes rarely (PACT §2, pactd choice).
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Ok(res.into_response())
}
