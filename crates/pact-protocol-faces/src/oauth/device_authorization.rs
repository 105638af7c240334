//! `POST {iface}/oauth/device_authorization` (RFC 8628 §3.1–3.2, PACT §5.1).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use pact_node::node::NodeInner;
use pact_proto::oauth::{DeviceAuthorizationResponse, OAuthErrorCode};

use super::{OAuthCaller, OAuthFailure, check_client_id, form, oauth_json, offered_scopes};
use crate::auth::Caller;
use crate::authorizations::{self, IssueError};
use crate::client_ip::ClientIp;
use crate::domain::authz_details;
use crate::domain::scopes::{self, ScopeError};
use crate::state::AppState;

pub async fn device_authorization(
    State(state): State<AppState>,
    ip: ClientIp,
    OAuthCaller(caller): OAuthCaller,
    body: Bytes,
) -> Result<Response, OAuthFailure> {
    let offered = offered_scopes(&state, &caller.brand.id).await?;
    let form: form::DeviceAuthorizationForm = form::decode(&body)?;
    check_client_id(form.client_id.as_deref(), &caller.pa.iss, true)?;
    let requested = scopes::parse_requested(form.scope.as_deref().unwrap_or(""), &offered)
        .map_err(|e| match e {
            ScopeError::Empty => {
                OAuthFailure::new(OAuthErrorCode::InvalidScope, "scope is required")
            }
            ScopeError::Unknown(s) => {
                OAuthFailure::new(OAuthErrorCode::InvalidScope, format!("unknown scope {s:?}"))
            }
        })?;
    // Trust tiers: an agent the open policy admitted, not yet verified by
    // staff, may ask only for the scopes the brand marked for it (PACT §3.1
    // leaves trust to the Provider).
    let rows = state
        .config_cache
        .scopes(&state.db, &caller.brand.id)
        .await?;
    if let Some(s) = crate::admission::scope_refused(&caller.agent, &rows, &requested) {
        return Err(OAuthFailure::new(
            OAuthErrorCode::InvalidScope,
            format!("scope {s:?} is not offered to agents the brand has not verified"),
        ));
    }
    let details = match &form.authorization_details {
        None => None,
        Some(raw) => {
            let types = authz_details::types_from_settings(&caller.brand.settings);
            Some(
                authz_details::validate(raw, &types, &requested).map_err(|why| {
                    OAuthFailure::new(OAuthErrorCode::InvalidAuthorizationDetails, why)
                })?,
            )
        }
    };
    let created = create(
        &state,
        &caller,
        &requested,
        details.as_ref(),
        &ip.0.to_string(),
    )
    .await?;
    Ok(oauth_json(StatusCode::OK, &created))
}

/// Creates a pending authorization for the PA's own request (RFC 8628 §3.1),
/// from `request_ip`, or — without `authorization_details` — takes over the
/// step-up authorization its last task linked to (one statement either way).
pub async fn create(
    node: &NodeInner,
    caller: &Caller,
    requested: &BTreeSet<String>,
    details: Option<&serde_json::Value>,
    request_ip: &str,
) -> Result<DeviceAuthorizationResponse, OAuthFailure> {
    let now = node.clock.now();
    let request = authorizations::Request {
        brand_id: &caller.brand.id,
        pa_issuer: caller.issuer(),
        pa_sub: &caller.pa.sub,
        scopes: requested,
        for_user: None,
        kind: authorizations::Kind::Pa {
            request_ip,
            details,
        },
    };
    // A new authorization is not a decision: should a crash lose it before
    // the WAL reaches the disk (at most a few wal_writer_delay), the PA's next
    // poll is `invalid_grant` and it asks again. Anything that acts on it —
    // the person's approval, a redemption — commits durably, which flushes
    // the WAL up to and past this insert. So it is written on the relaxed
    // pool, in one statement.
    let mut conn = node.relaxed_db.acquire().await?;
    // A live user code must be unique; on the rare collision, draw again.
    for _ in 0..8 {
        let issued = authorizations::issue(&mut conn, &node.config, request, now).await;
        match issued {
            Ok(issued) => {
                metrics::counter!("pactd_device_authorizations_total").increment(1);
                return Ok(DeviceAuthorizationResponse {
                    device_code: issued.device_code.unwrap_or_default(),
                    verification_uri_complete: issued.verification_uri_complete,
                    user_code: issued.user_code,
                    verification_uri: issued.verification_uri,
                    expires_in: u64::try_from((issued.expires_at - now).whole_seconds())
                        .unwrap_or(0),
                    interval: u64::try_from(issued.interval_secs).unwrap_or(5),
                });
            }
            Err(IssueError::CodeTaken) => continue,
            Err(IssueError::Database(e)) => return Err(e.into()),
        }
    }
    Err(OAuthFailure::new(
        OAuthErrorCode::ServerError,
        "could not allocate a user code",
    ))
}
