//! `POST {iface}/oauth/token` (RFC 8628 §3.4–3.5, RFC 6749 §6, PACT §5.3).

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use pact_node::node::NodeInner;
use pact_proto::oauth::{GRANT_TYPE_DEVICE_CODE, GRANT_TYPE_REFRESH_TOKEN, OAuthErrorCode};
use time::OffsetDateTime;

use super::{OAuthFailure, TokenCaller, check_client_id, form, issue, oauth_json, offered_scopes};
use crate::auth::Caller;
use crate::domain::device_flow::{self, PollDecision, PollState};
use crate::domain::secrets;
use crate::pending_polls::{Answer, Pending};
use crate::state::AppState;

fn err(code: OAuthErrorCode, description: &str) -> OAuthFailure {
    OAuthFailure::new(code, description)
}

pub async fn token(
    State(state): State<AppState>,
    TokenCaller(caller): TokenCaller,
    body: Bytes,
) -> Result<Response, OAuthFailure> {
    offered_scopes(&state, &caller.brand.id).await?;
    let form = form::decode::<form::TokenForm>(&body);
    // Everything but a device-code poll counts against the rate limits now; a
    // poll only once memory cannot answer it (`redeem_device_code`).
    let polls = matches!(&form, Ok(f) if f.grant_type.as_deref() == Some(GRANT_TYPE_DEVICE_CODE));
    if !polls {
        crate::auth::charge(&state, &caller)?;
    }
    let form = form?;
    let grant_type = form
        .grant_type
        .as_deref()
        .ok_or_else(|| err(OAuthErrorCode::InvalidRequest, "grant_type is required"))?;
    check_client_id(form.client_id.as_deref(), &caller.pa.iss, true)?;
    let now = state.clock.now();
    let details = form.authorization_details.as_deref();
    match grant_type {
        GRANT_TYPE_DEVICE_CODE => {
            let code = form
                .device_code
                .as_deref()
                .ok_or_else(|| err(OAuthErrorCode::InvalidRequest, "device_code is required"))?;
            redeem_device_code(&state, &caller, code, details, now).await
        }
        GRANT_TYPE_REFRESH_TOKEN => {
            let token = form
                .refresh_token
                .as_deref()
                .ok_or_else(|| err(OAuthErrorCode::InvalidRequest, "refresh_token is required"))?;
            let scope = form.scope.as_deref();
            with_retries(|| refresh(&state, &caller, token, scope, details, now)).await
        }
        _ => Err(err(
            OAuthErrorCode::UnsupportedGrantType,
            "unsupported grant_type",
        )),
    }
}

/// One poll. Most polls find the authorization still pending: once this node
/// has seen a code pending, it answers those from memory (`pending_polls.rs`).
/// Otherwise the row is read, and a pending poll recorded with an update that
/// only succeeds if the row is unchanged since it was read. Anything else — a
/// redemption, or a poll that raced another — goes through the row lock, which
/// makes concurrent polls of one code take turns, so exactly one of two racing
/// pollers redeems it and the other sees `redeemed`.
async fn redeem_device_code(
    state: &AppState,
    caller: &Caller,
    device_code: &str,
    details: Option<&str>,
    now: OffsetDateTime,
) -> Result<Response, OAuthFailure> {
    let hash = secrets::hash(device_code);
    match state
        .pending_polls
        .poll(&hash, caller.issuer(), &caller.brand.id, now)
    {
        Some(Answer::Decided(decision)) => return Err(unredeemed(decision)),
        Some(Answer::NotYours) => return Err(unknown_code()),
        None => {}
    }
    // Past memory, a poll costs database work: now the rate limits count it.
    crate::auth::charge(state, caller)?;
    let ticket = state.pending_polls.ticket();
    let auth = pact_db::device_authorizations::find_by_device_code(&state.db, &hash).await?;
    let auth = owned_by(auth, caller)?;
    let decision = poll_decision(&auth, now)?;
    match decision {
        PollDecision::Pending | PollDecision::SlowDown { .. } => {
            let interval = match decision {
                PollDecision::SlowDown { new_interval_secs } => new_interval_secs,
                _ => auth.interval_secs,
            };
            // When the PA last polled is RFC 8628 §3.5 bookkeeping, not a
            // decision: a crash that loses it forgives one fast poll. So its
            // commit does not wait for the WAL flush; grants, revocations
            // and receipts keep durable commits.
            let recorded = pact_db::device_authorizations::record_poll_if_unchanged(
                &state.relaxed_db,
                auth.id,
                (auth.last_polled_at, auth.interval_secs),
                now,
                interval,
            )
            .await?;
            if recorded {
                state.pending_polls.remember(
                    ticket,
                    hash,
                    Pending {
                        id: auth.id,
                        pa_issuer: auth.pa_issuer,
                        brand_id: auth.brand_id,
                        interval_secs: interval,
                        last_polled_at: Some(now),
                        expires_at: auth.expires_at,
                    },
                    now,
                );
                return Err(unredeemed(decision));
            }
        }
        PollDecision::Redeem => {}
        // Final states: nothing to record.
        other => return Err(unredeemed(other)),
    }
    with_retries(|| redeem_locked(state, caller, &hash, details, now)).await
}

/// Runs a token transaction again when PostgreSQL rolled it back to break a
/// deadlock or a serialization conflict (nothing of it was stored): a poll
/// that redeems a code supersedes the person's older grants while a
/// revocation may be locking them in another order. Three tries, then the
/// client hears 503 and retries itself.
async fn with_retries<F, Fut>(mut run: F) -> Result<Response, OAuthFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Response, OAuthFailure>>,
{
    for _ in 0..2 {
        match run().await {
            Err(OAuthFailure::Conflict) => continue,
            done => return done,
        }
    }
    run().await
}

/// RFC 9396 §6: `authorization_details` in a token request ask what the
/// token is to carry. A token carries its grant's details whole (the tool
/// gate holds a call to the grant's terms, not to a token's), so the
/// details may be asked for unchanged — entries in any order, as the token
/// response returned them — and anything else is refused with
/// `invalid_authorization_details` rather than answered with more than was
/// asked. A narrower set is a new device authorization.
fn check_asked_details(
    asked: Option<&str>,
    grant: &pact_db::grants::Grant,
) -> Result<(), OAuthFailure> {
    let Some(raw) = asked else {
        return Ok(());
    };
    let refuse = |why: &str| err(OAuthErrorCode::InvalidAuthorizationDetails, why);
    let Ok(serde_json::Value::Array(asked)) = serde_json::from_str::<serde_json::Value>(raw) else {
        return Err(refuse("authorization_details is not a JSON array"));
    };
    let granted = match &grant.authorization_details {
        Some(serde_json::Value::Array(entries)) => entries.as_slice(),
        _ => &[],
    };
    let same = asked.len() == granted.len()
        && asked.iter().all(|a| granted.contains(a))
        && granted.iter().all(|g| asked.contains(g));
    if same {
        Ok(())
    } else {
        Err(refuse(
            "a token carries its grant's authorization_details unchanged: leave the parameter \
             out, or send them as the token response gave them; fewer need a new authorization",
        ))
    }
}

/// A code issued to another PA, or at another brand, is as unknown as a made-up one.
fn owned_by(
    auth: Option<pact_db::device_authorizations::DeviceAuthorization>,
    caller: &Caller,
) -> Result<pact_db::device_authorizations::DeviceAuthorization, OAuthFailure> {
    auth.filter(|a| a.pa_issuer == *caller.issuer() && a.brand_id == caller.brand.id)
        .ok_or_else(unknown_code)
}

fn unknown_code() -> OAuthFailure {
    err(OAuthErrorCode::InvalidGrant, "unknown device_code")
}

fn poll_decision(
    auth: &pact_db::device_authorizations::DeviceAuthorization,
    now: OffsetDateTime,
) -> Result<PollDecision, OAuthFailure> {
    let status = auth.status;
    Ok(device_flow::decide(
        PollState {
            status,
            interval_secs: auth.interval_secs,
            last_polled_at: auth.last_polled_at,
            expires_at: auth.expires_at,
        },
        now,
    ))
}

/// The RFC 8628 §3.5 error for every decision but `Redeem`.
fn unredeemed(decision: PollDecision) -> OAuthFailure {
    match decision {
        PollDecision::Pending => err(
            OAuthErrorCode::AuthorizationPending,
            "the user has not decided yet",
        ),
        PollDecision::SlowDown { new_interval_secs } => err(
            OAuthErrorCode::SlowDown,
            &format!("polling too fast; wait {new_interval_secs} s between requests"),
        ),
        PollDecision::Denied => err(OAuthErrorCode::AccessDenied, "the user denied the request"),
        PollDecision::Expired => err(OAuthErrorCode::ExpiredToken, "the device_code has expired"),
        PollDecision::AlreadyRedeemed | PollDecision::Redeem => err(
            OAuthErrorCode::InvalidGrant,
            "the device_code was already used",
        ),
    }
}

/// The poll under the row lock.
async fn redeem_locked(
    node: &NodeInner,
    caller: &Caller,
    hash: &[u8],
    details: Option<&str>,
    now: OffsetDateTime,
) -> Result<Response, OAuthFailure> {
    let mut tx = node.db.begin().await?;
    let auth = pact_db::device_authorizations::lock_by_device_code(&mut *tx, hash).await?;
    let auth = owned_by(auth, caller)?;
    let decision = poll_decision(&auth, now)?;
    match decision {
        PollDecision::Pending | PollDecision::SlowDown { .. } => {
            let interval = match decision {
                PollDecision::SlowDown { new_interval_secs } => new_interval_secs,
                _ => auth.interval_secs,
            };
            pact_db::device_authorizations::record_poll(&mut *tx, auth.id, now, interval).await?;
            tx.commit().await?;
            Err(unredeemed(decision))
        }
        PollDecision::Redeem => {
            let grant_id = auth
                .grant_id
                .ok_or_else(|| err(OAuthErrorCode::ServerError, "approved without a grant"))?;
            let grant = pact_db::grants::lock(&mut *tx, grant_id)
                .await?
                .filter(|g| g.is_active(now))
                .ok_or_else(|| err(OAuthErrorCode::InvalidGrant, "the grant is no longer valid"))?;
            // Before anything is spent: a refused request leaves the code
            // to be redeemed.
            check_asked_details(details, &grant)?;
            let pair = issue::token_pair(node, &mut tx, &grant, None, now).await?;
            pact_db::device_authorizations::set_redeemed(&mut *tx, auth.id, now).await?;
            // The PA now holds the wider grant: older grants of the same user for
            // this PA are superseded, so one grant per agent remains to revoke.
            pact_db::grants::supersede_older(&mut *tx, &grant).await?;
            tx.commit().await?;
            metrics::counter!("pactd_tokens_issued_total", "grant_type" => "device_code")
                .increment(1);
            Ok(oauth_json(StatusCode::OK, &pair))
        }
        other => Err(unredeemed(other)),
    }
}

/// Refresh with rotation (RFC 9700 §4.14.2): each refresh token works once;
/// presenting a used one means it leaked, so the whole grant is revoked.
async fn refresh(
    node: &NodeInner,
    caller: &Caller,
    token: &str,
    scope: Option<&str>,
    details: Option<&str>,
    now: OffsetDateTime,
) -> Result<Response, OAuthFailure> {
    let hash = secrets::hash(token);
    let mut tx = node.db.begin().await?;
    let stored = pact_db::grants::lock_refresh_token(&mut *tx, &hash)
        .await?
        .ok_or_else(|| err(OAuthErrorCode::InvalidGrant, "unknown refresh_token"))?;
    let grant = pact_db::grants::lock(&mut *tx, stored.grant_id)
        .await?
        .filter(|g| g.pa_issuer == *caller.issuer() && g.brand_id == caller.brand.id)
        .ok_or_else(|| err(OAuthErrorCode::InvalidGrant, "unknown refresh_token"))?;
    if stored.used_at.is_some() {
        if pact_db::grants::revoke(&mut *tx, grant.id, pact_db::grants::reason::TOKEN_REUSE).await?
        {
            tracing::warn!(grant = %grant.id, "refresh token reused: grant revoked");
            metrics::counter!("pactd_refresh_token_reuse_total").increment(1);
        }
        tx.commit().await?;
        return Err(err(
            OAuthErrorCode::InvalidGrant,
            "refresh_token already used; the grant is revoked",
        ));
    }
    if !grant.is_active(now) || stored.expires_at <= now {
        return Err(err(
            OAuthErrorCode::InvalidGrant,
            "the grant is no longer valid",
        ));
    }
    let narrowed = match scope {
        None => None,
        Some(raw) => {
            let granted: BTreeSet<String> = grant.scopes.iter().cloned().collect();
            let asked: BTreeSet<String> = raw
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            if asked.is_empty() || !asked.is_subset(&granted) {
                return Err(err(
                    OAuthErrorCode::InvalidScope,
                    "refresh cannot widen the granted scope",
                ));
            }
            Some(asked)
        }
    };
    check_asked_details(details, &grant)?;
    pact_db::grants::mark_refresh_token_used(&mut *tx, &hash).await?;
    let pair = issue::token_pair(node, &mut tx, &grant, narrowed.as_ref(), now).await?;
    tx.commit().await?;
    metrics::counter!("pactd_tokens_issued_total", "grant_type" => "refresh_token").increment(1);
    Ok(oauth_json(StatusCode::OK, &pair))
}
