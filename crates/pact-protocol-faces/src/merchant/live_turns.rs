//! The tool gateway's door to a running turn: a request's turn token checked
//! against this node's own turns (`pact_node::live_turns`, re-exported here),
//! else against its signature, with the turn rebuilt from the database and its
//! fence entered when the turn runs on another node.

use std::time::Duration;

use pact_node::node::NodeInner;
use time::OffsetDateTime;
use uuid::Uuid;

pub use pact_node::live_turns::*;
use pact_node::turn_token::TurnClaims;

use crate::agent::Delegation;
use crate::state::AppState;

/// The turn a gateway request may act in, on whichever node it runs: this
/// node's own turn from memory, another node's from its signed token and
/// the database (entering the turn's fence). `brand_id` is the request
/// path's text: the turn's own brand must be it.
///
/// Once the token is proven, the request's `traceparent` becomes its span's
/// parent (`trace_context::start_turn_call_span`): the merchant's agent
/// passes on the one pactd sent with the turn, and its tool call joins the
/// turn's trace. That is done before anything here reads the database, whose
/// statements' spans would start the request span first.
pub async fn authorize(
    state: &AppState,
    turn_id: Uuid,
    brand_id: &str,
    token: &str,
    headers: &http::HeaderMap,
    now: OffsetDateTime,
) -> Result<CallGuard, TokenRefusal> {
    let result = match this_node(state, turn_id, brand_id, token, headers, now) {
        Some(local) => local,
        None => match state.live_turns.key().verify(token) {
            Some(claims) if claims.turn == turn_id => {
                other_node(state, &claims, brand_id, headers, now).await
            }
            _ => Err(TokenRefusal::WrongToken),
        },
    };
    refused_without_parent(result)
}

/// The same where the request names no turn (the brand's shared MCP
/// endpoint): the turn is the one the token was signed for, its signature
/// checked once.
pub async fn authorize_token(
    state: &AppState,
    brand_id: &str,
    token: &str,
    headers: &http::HeaderMap,
    now: OffsetDateTime,
) -> Result<CallGuard, TokenRefusal> {
    let result = match state.live_turns.key().verify(token) {
        None => Err(TokenRefusal::WrongToken),
        Some(claims) => match this_node(state, claims.turn, brand_id, token, headers, now) {
            Some(local) => local,
            None => other_node(state, &claims, brand_id, headers, now).await,
        },
    };
    refused_without_parent(result)
}

/// No proven caller: its span starts without the caller's parent.
fn refused_without_parent(
    result: Result<CallGuard, TokenRefusal>,
) -> Result<CallGuard, TokenRefusal> {
    if result.is_err() {
        crate::trace_context::start_turn_call_span(None);
    }
    result
}

/// The turn from this node's memory; `None` when it does not run here.
fn this_node(
    state: &AppState,
    turn_id: Uuid,
    brand_id: &str,
    token: &str,
    headers: &http::HeaderMap,
    now: OffsetDateTime,
) -> Option<Result<CallGuard, TokenRefusal>> {
    match state.live_turns.authorize(turn_id, brand_id, token, now) {
        Err(TokenRefusal::UnknownTurn) => None,
        other => {
            if other.is_ok() {
                crate::trace_context::start_turn_call_span(Some(headers));
            }
            Some(other)
        }
    }
}

/// Another node's turn, from its verified claims and the database (entering
/// the turn's fence).
async fn other_node(
    node: &NodeInner,
    claims: &TurnClaims,
    brand_id: &str,
    headers: &http::HeaderMap,
    now: OffsetDateTime,
) -> Result<CallGuard, TokenRefusal> {
    let turn_id = claims.turn;
    if claims.brand != brand_id {
        return Err(TokenRefusal::WrongBrand);
    }
    let expires_at = OffsetDateTime::from_unix_timestamp(claims.expires)
        .map_err(|_| TokenRefusal::WrongToken)?;
    if now >= expires_at {
        return Err(TokenRefusal::Expired);
    }
    // Signed by a node for this turn and brand, and not expired: proven.
    crate::trace_context::start_turn_call_span(Some(headers));
    let setup = remote_setup(node, claims, expires_at, now)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, turn = %turn_id, "could not load another node's turn");
            TokenRefusal::Unavailable
        })?;
    let entered = pact_db::turn_fences::enter(&node.relaxed_db, turn_id, expires_at)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, turn = %turn_id, "could not enter another node's turn");
            TokenRefusal::Unavailable
        })?;
    if !entered {
        return Err(TokenRefusal::Ended);
    }
    Ok(CallGuard::for_other_node(
        turn_id,
        setup,
        node.relaxed_db.clone(),
    ))
}

/// What another node's turn needs, from its claims and the database: the
/// grant as the turn's own node read it (and its terms), the brand's
/// scopes and tools.
async fn remote_setup(
    node: &NodeInner,
    claims: &TurnClaims,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> Result<TurnSetup, pact_db::Error> {
    let scopes = node.config_cache.scopes(&node.db, &claims.brand).await?;
    let merchant = node.config_cache.merchant(&node.db, &claims.brand).await?;
    let delegation = match claims.grant {
        None => None,
        Some(id) => {
            let grant = pact_db::grants::for_turn(&node.db, id).await?.filter(|g| {
                g.is_active(now) && g.brand_id == claims.brand && g.pa_issuer == claims.pa_issuer
            });
            match grant {
                // Ended meanwhile: the call has no delegation (as on the
                // turn's own node once it hears of the revocation).
                None => None,
                Some(g) => {
                    let terms = if g.terms.is_some() || g.authorization_details.is_none() {
                        crate::agent::bounds::terms_of_recorded(g.terms.clone())
                    } else {
                        let brand = pact_db::brands::find(&node.db, &claims.brand).await?;
                        let types = brand
                            .map(|b| crate::domain::authz_details::types_from_settings(&b.settings))
                            .unwrap_or_default();
                        let mut conn = node.db.acquire().await?;
                        crate::agent::bounds::terms_of(
                            &mut conn,
                            id,
                            None,
                            g.authorization_details.as_ref(),
                            &types,
                            &merchant.rules,
                        )
                        .await?
                    };
                    Some(Delegation {
                        grant_id: id,
                        user_sub: g.user_sub,
                        // The token's scope, which may be narrower than the
                        // grant's (a refresh: RFC 6749 §6), as on the node
                        // that runs the turn.
                        scopes: g
                            .scopes
                            .into_iter()
                            .filter(|s| claims.scopes.contains(s))
                            .collect(),
                        authorization_details: g.authorization_details,
                        terms,
                    })
                }
            }
        }
    };
    Ok(TurnSetup {
        brand_id: claims.brand.clone(),
        expires_at,
        delegation,
        offered: scopes.iter().map(|s| s.scope_id.clone()).collect(),
        rules: merchant.rules.clone(),
        tools: merchant.tools.clone(),
        tool_timeout: Duration::from_millis(claims.tool_timeout_ms),
        context_id: claims.context.clone(),
        message_id: claims.message.clone(),
        pa_issuer: claims.pa_issuer.clone(),
    })
}
