//! `POST {iface}/oauth/device_authorization` (RFC 8628 §3.1–3.2, PACT §5.1).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use pact_proto::oauth::{DeviceAuthorizationResponse, OAuthErrorCode};
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{OAuthCaller, OAuthFailure, check_client_id, form, oauth_json, offered_scopes};
use crate::auth::Caller;
use crate::client_ip::ClientIp;
use crate::domain::scopes::{self, ScopeError};
use crate::domain::{authz_details, secrets, user_code};
use crate::state::AppState;

pub async fn device_authorization(
    State(state): State<AppState>,
    ip: ClientIp,
    OAuthCaller(caller): OAuthCaller,
    body: Bytes,
) -> Result<Response, OAuthFailure> {
    let offered = offered_scopes(&state, &caller.brand.id).await?;
    let form = form::parse(&body)?;
    check_client_id(
        form.get("client_id").map(String::as_str),
        &caller.pa.iss,
        true,
    )?;
    let requested = scopes::parse_requested(
        form.get("scope").map(String::as_str).unwrap_or(""),
        &offered,
    )
    .map_err(|e| match e {
        ScopeError::Empty => OAuthFailure::new(OAuthErrorCode::InvalidScope, "scope is required"),
        ScopeError::Unknown(s) => {
            OAuthFailure::new(OAuthErrorCode::InvalidScope, format!("unknown scope {s:?}"))
        }
    })?;
    let details = match form.get("authorization_details") {
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

/// The link a step-up task shows (PACT §5.5).
#[derive(Clone, Debug)]
pub struct StepUpLink {
    pub user_code: String,
    pub verification_uri_complete: String,
    /// The person already approved these scopes; the PA only has to collect
    /// them (its device authorization for the same scopes takes this one over).
    pub already_approved: bool,
}

/// The step-up authorization for `missing`: the live one for exactly these
/// scopes when there is one (approved first), so that a person who approved
/// and asks again is never sent round to approve a second code; otherwise a
/// new one. Runs on the turn's own connection, inside the transaction that
/// stores the turn's reply: the task and its authorization are stored
/// together or not at all, and a turn never waits for a second pooled
/// connection while holding the first. A unique violation (a drawn user
/// code already live) has aborted that transaction: the caller retries it.
pub async fn step_up_link(
    state: &AppState,
    conn: &mut PgConnection,
    caller: &Caller,
    missing: &BTreeSet<String>,
    now: OffsetDateTime,
) -> Result<StepUpLink, sqlx::Error> {
    let scopes: Vec<String> = missing.iter().cloned().collect();
    let link = |code: &str| {
        let shown = user_code::display(code);
        (
            format!("{}?user_code={shown}", state.config.verification_uri()),
            shown,
        )
    };
    if let Some(live) = pact_db::device_authorizations::live_step_up(
        &mut *conn,
        &caller.brand.id,
        &caller.pa.iss,
        &caller.pa.sub,
        &scopes,
        now,
    )
    .await?
    {
        let (verification_uri_complete, user_code) = link(&live.user_code);
        return Ok(StepUpLink {
            user_code,
            verification_uri_complete,
            already_approved: live.status == "approved",
        });
    }
    let settings = &state.config.delegation;
    let ttl =
        time::Duration::try_from(settings.device_code_ttl).unwrap_or(time::Duration::minutes(10));
    // Nobody holds this device code: the PA's own request for the same
    // scopes takes the authorization over with a code of its own.
    let (_, device_code_hash) = secrets::new_secret();
    let code = user_code::generate();
    pact_db::device_authorizations::insert(
        &mut *conn,
        pact_db::device_authorizations::NewDeviceAuthorization {
            id: Uuid::new_v4(),
            brand_id: &caller.brand.id,
            pa_issuer: &caller.pa.iss,
            pa_sub: &caller.pa.sub,
            device_code_hash: &device_code_hash,
            user_code: &code,
            scopes: &scopes,
            authorization_details: None,
            interval_secs: settings.poll_interval_secs,
            expires_at: now + ttl,
            request_ip: None,
            step_up: true,
        },
    )
    .await?;
    let (verification_uri_complete, user_code) = link(&code);
    Ok(StepUpLink {
        user_code,
        verification_uri_complete,
        already_approved: false,
    })
}

/// Creates a pending authorization for the PA's own request (RFC 8628 §3.1),
/// from `request_ip`, or — without `authorization_details` — takes over the
/// step-up authorization its last task linked to (one statement either way).
pub async fn create(
    state: &AppState,
    caller: &Caller,
    requested: &BTreeSet<String>,
    details: Option<&serde_json::Value>,
    request_ip: &str,
) -> Result<DeviceAuthorizationResponse, OAuthFailure> {
    let settings = &state.config.delegation;
    let now = OffsetDateTime::now_utc();
    let ttl =
        time::Duration::try_from(settings.device_code_ttl).unwrap_or(time::Duration::minutes(10));
    let scopes: Vec<String> = requested.iter().cloned().collect();
    let (device_code, device_code_hash) = secrets::new_secret();
    let verification_uri = state.config.verification_uri();
    // A live user code must be unique; on the rare collision, draw again.
    for _ in 0..8 {
        let code = user_code::generate();
        let new = pact_db::device_authorizations::NewDeviceAuthorization {
            id: Uuid::new_v4(),
            brand_id: &caller.brand.id,
            pa_issuer: &caller.pa.iss,
            pa_sub: &caller.pa.sub,
            device_code_hash: &device_code_hash,
            user_code: &code,
            scopes: &scopes,
            authorization_details: details,
            interval_secs: settings.poll_interval_secs,
            expires_at: now + ttl,
            request_ip: Some(request_ip),
            step_up: false,
        };
        // A step-up link never carries authorization_details, so a request
        // with them never takes one over.
        let created = match details {
            None => pact_db::device_authorizations::take_over_or_insert(&state.db, new, now)
                .await
                // A new one lives the full TTL (the stored time is rounded to
                // microseconds); a taken-over one what it has left.
                .map(|c| {
                    let expires_at = if c.taken_over {
                        c.expires_at
                    } else {
                        now + ttl
                    };
                    (c.user_code, expires_at, c.interval_secs)
                }),
            Some(_) => pact_db::device_authorizations::insert(&state.db, new)
                .await
                .map(|()| (code.clone(), now + ttl, settings.poll_interval_secs)),
        };
        match created {
            Ok((code, expires_at, interval_secs)) => {
                metrics::counter!("pactd_device_authorizations_total").increment(1);
                let shown = user_code::display(&code);
                return Ok(DeviceAuthorizationResponse {
                    device_code,
                    verification_uri_complete: format!("{verification_uri}?user_code={shown}"),
                    user_code: shown,
                    verification_uri,
                    expires_in: u64::try_from((expires_at - now).whole_seconds()).unwrap_or(0),
                    interval: u64::try_from(interval_secs).unwrap_or(5),
                });
            }
            Err(e) if pact_db::is_unique_violation(&e) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(OAuthFailure::new(
        OAuthErrorCode::ServerError,
        "could not allocate a user code",
    ))
}
