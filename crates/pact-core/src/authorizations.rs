//! Issuing a device authorization (RFC 8628 §3.1–3.2, PACT §5.1): the one
//! place that draws a user code and stores a pending authorization, for the
//! PA's own request (`oauth/device_authorization.rs`) and for the link of a
//! step-up task (`a2a/send.rs`, PACT §5.5) alike.

use std::collections::BTreeSet;

use pact_db::device_authorizations::Status as AuthStatus;
use pact_db::ids::{AgentIssuer, BrandId, UserSub};
use sqlx::PgConnection;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::Config;
use crate::domain::{secrets, user_code};

/// Who asks, for what.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub pa_sub: &'a str,
    pub scopes: &'a BTreeSet<String>,
    /// A step-up asked in a delegated turn: the person the turn acted for,
    /// the only one who may see and decide it (PACT §5.5). `None` for the
    /// PA's own request (RFC 8628: the device does not know who approves).
    pub for_user: Option<&'a UserSub>,
    pub kind: Kind<'a>,
}

/// Why an authorization is issued.
#[derive(Clone, Copy, Debug)]
pub enum Kind<'a> {
    /// The PA's own request, from `request_ip`, with its validated
    /// `authorization_details` (RFC 9396). Without details it takes over the
    /// step-up authorization its last task linked to, when there is one.
    Pa {
        request_ip: &'a str,
        details: Option<&'a serde_json::Value>,
    },
    /// The link of an `auth-required` task (PACT §5.5): the live step-up
    /// authorization for exactly these scopes when there is one, so that a
    /// person who approved and asks again is never sent to approve a second
    /// code. Nobody holds its device code: the PA's own request for the same
    /// scopes takes it over with a code of its own.
    StepUp,
    /// The link of a step-up beyond a limit: the operations to approve one
    /// by one (`pact_server::web::operations`). The live one for exactly these is
    /// reused. Nobody holds its device code, and no PA takes it over: its
    /// approval adds to the grants the calls were made under.
    Operation {
        details: &'a serde_json::Value,
        operations: &'a serde_json::Value,
    },
}

/// The authorization as the PA (or the person, through the task) sees it.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The authorization's row (a step-up task follows its state).
    pub id: Uuid,
    /// The PA's device code; `None` for a step-up link.
    pub device_code: Option<String>,
    /// The user code as shown (RFC 8628 §6.1: grouped for reading).
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
    /// A step-up the person already approved: the PA only has to collect it.
    pub already_approved: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// The drawn user code (or device code) is live already. Nothing was
    /// stored; inside a transaction, the transaction is aborted and must be
    /// run again; otherwise, draw again.
    #[error("the drawn user code is already live")]
    CodeTaken,
    #[error("database: {0}")]
    Database(#[source] pact_db::Error),
}

impl From<pact_db::Error> for IssueError {
    fn from(e: pact_db::Error) -> Self {
        if pact_db::is_unique_violation(&e) {
            Self::CodeTaken
        } else {
            Self::Database(e)
        }
    }
}

/// Issues one authorization on `conn` (one draw of the user code: the caller
/// decides whether to draw again on [`IssueError::CodeTaken`]).
pub async fn issue(
    conn: &mut PgConnection,
    config: &Config,
    request: Request<'_>,
    now: OffsetDateTime,
) -> Result<Issued, IssueError> {
    let settings = &config.delegation;
    let ttl =
        time::Duration::try_from(settings.device_code_ttl).unwrap_or(time::Duration::minutes(10));
    let scopes: Vec<String> = request.scopes.iter().cloned().collect();
    let verification_uri = config.verification_uri();
    // The step-ups this one may point at again are only this PA user's.
    let owner = pact_db::parties::PaUser {
        brand_id: request.brand_id,
        pa_issuer: request.pa_issuer,
        pa_sub: request.pa_sub,
    };
    let issued =
        |id, device_code: Option<String>, code: &str, expires_at, interval_secs, approved| {
            let shown = user_code::display(code);
            Issued {
                id,
                device_code,
                verification_uri_complete: format!("{verification_uri}?user_code={shown}"),
                verification_uri: verification_uri.clone(),
                user_code: shown,
                expires_at,
                interval_secs,
                already_approved: approved,
            }
        };
    if let Kind::StepUp = request.kind
        && let Some(live) = pact_db::device_authorizations::live_step_up(
            &mut *conn,
            owner,
            &scopes,
            request.for_user,
            now,
        )
        .await?
    {
        let approved = live.status == AuthStatus::Approved;
        return Ok(issued(
            live.id,
            None,
            &live.user_code,
            live.expires_at,
            live.interval_secs,
            approved,
        ));
    }
    if let Kind::Operation { details, .. } = request.kind
        && let Some(live) =
            pact_db::device_authorizations::live_operation_step_up(&mut *conn, owner, details, now)
                .await?
    {
        return Ok(issued(
            live.id,
            None,
            &live.user_code,
            live.expires_at,
            live.interval_secs,
            false,
        ));
    }
    let (device_code, device_code_hash) = secrets::new_secret();
    let code = user_code::generate();
    let (request_ip, details, operations) = match request.kind {
        Kind::Pa {
            request_ip,
            details,
        } => (Some(request_ip), details, None),
        Kind::StepUp => (None, None, None),
        Kind::Operation {
            details,
            operations,
        } => (None, Some(details), Some(operations)),
    };
    let id = Uuid::new_v4();
    let new = pact_db::device_authorizations::NewDeviceAuthorization {
        id,
        brand_id: request.brand_id,
        pa_issuer: request.pa_issuer,
        pa_sub: request.pa_sub,
        device_code_hash: &device_code_hash,
        user_code: &code,
        scopes: &scopes,
        authorization_details: details,
        interval_secs: settings.poll_interval_secs,
        expires_at: now + ttl,
        request_ip,
        step_up: matches!(request.kind, Kind::StepUp | Kind::Operation { .. }),
        operations,
        for_user_sub: request.for_user,
    };
    match request.kind {
        // A step-up link never carries authorization_details, so a request
        // with them never takes one over.
        Kind::Pa { details: None, .. } => {
            let c =
                pact_db::device_authorizations::take_over_or_insert(&mut *conn, new, now).await?;
            // A new one lives the full TTL (the stored time is rounded to
            // microseconds); a taken-over one what it has left.
            let expires_at = if c.taken_over {
                c.expires_at
            } else {
                now + ttl
            };
            Ok(issued(
                c.id,
                Some(device_code),
                &c.user_code,
                expires_at,
                c.interval_secs,
                false,
            ))
        }
        Kind::Pa { .. } => {
            pact_db::device_authorizations::insert(&mut *conn, new).await?;
            Ok(issued(
                id,
                Some(device_code),
                &code,
                now + ttl,
                settings.poll_interval_secs,
                false,
            ))
        }
        Kind::StepUp | Kind::Operation { .. } => {
            pact_db::device_authorizations::insert(&mut *conn, new).await?;
            Ok(issued(
                id,
                None,
                &code,
                now + ttl,
                settings.poll_interval_secs,
                false,
            ))
        }
    }
}
