//! Authentication of the calling personal agent (PACT §3).
//!
//! Order matters and is the protocol's: the route is matched first (by the
//! router), then the PA-JWT is checked, and only then is the brand looked at or
//! the body read. Every PA-JWT failure is the same bare 401; the reason is
//! logged (never the token) so an operator can tell a clock-skewed PA from a
//! forged token.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use pact_db::agents::Agent;
use pact_db::brands::Brand;
use pact_db::ids::AgentIssuer;
use pact_jose::{PaClaims, parse_pa_jwt};

use crate::admission::{Policy, Refusal};
use crate::error::ApiError;
use crate::state::AppState;

/// An authenticated PA calling for `pa.sub` at `brand`.
#[derive(Clone, Debug)]
pub struct Caller {
    pub pa: PaClaims,
    pub agent: Agent,
    pub brand: Brand,
}

impl Caller {
    /// The PA-JWT's `iss` as the agent's row holds it: the agent was found
    /// by that very text (`authenticate`), so the two are equal, and this one
    /// is typed for the rows and calls that name an agent platform.
    pub fn issuer(&self) -> &AgentIssuer {
        &self.agent.issuer
    }
}

/// The single `Bearer` credential in a header, if well formed (RFC 6750 §2.1).
/// Two headers of the same name are ambiguous and refused.
pub fn bearer<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.contains(' ') {
        return None;
    }
    Some(token)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let brand_id = brand_in_path(parts, state).await;
        authenticate(state, &parts.headers, &brand_id).await
    }
}

/// The `{brand}` segment of the matched route ("" where there is none).
pub async fn brand_in_path(parts: &mut Parts, state: &AppState) -> String {
    RawPathParams::from_request_parts(parts, state)
        .await
        .ok()
        .and_then(|p| {
            p.iter()
                .find(|(k, _)| *k == "brand")
                .map(|(_, v)| v.to_owned())
        })
        .unwrap_or_default()
}

/// Which rate-limit buckets authentication charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// The PA platform's and the `(PA, sub)`'s: every request but the token
    /// endpoint's.
    PaAndUser,
    /// None yet: the handler charges both once the request reaches work worth
    /// limiting. The token endpoint: a device-code poll answered from memory
    /// costs a hash lookup after the PA-JWT check, which a 429 would not save
    /// (the limiter runs after that check too); RFC 8628 §3.5 `slow_down` is
    /// what paces it.
    Deferred,
}

/// Checks the PA-JWT (an unknown issuer is admitted only where the brand's
/// policy is `open`, `pact-node/src/admission.rs`), then the rate limits, then the brand.
/// `brand_id` is the request path's text, unchecked: one that is no brand id
/// finds no brand (404), and the caller's brand carries its checked id.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    brand_id: &str,
) -> Result<Caller, ApiError> {
    authenticate_charging(state, headers, brand_id, Charge::PaAndUser).await
}

/// As [`authenticate`], charging the buckets `charge` names.
pub async fn authenticate_charging(
    state: &AppState,
    headers: &HeaderMap,
    brand_id: &str,
    charge: Charge,
) -> Result<Caller, ApiError> {
    let now = state.clock.now().unix_timestamp();
    let token = bearer(headers, &header::AUTHORIZATION).ok_or_else(|| {
        tracing::debug!("PA-JWT rejected: no single Bearer credential");
        ApiError::Unauthorized
    })?;
    let jwt = parse_pa_jwt(token, &state.pa_rules).map_err(|e| {
        tracing::info!(reason = %e, "PA-JWT rejected");
        ApiError::Unauthorized
    })?;
    let found = state
        .config_cache
        .agent_and_brand(&state.db, jwt.issuer(), brand_id)
        .await?;
    // The policy is the addressed brand's (PACT §3.1). A brand that does not
    // exist has none but the Provider's allowlist, so an unknown issuer is
    // never discovered for it: 401 first, as for any unknown issuer.
    let policy = found.brand.as_ref().map_or(Policy::Allowlist, |b| {
        crate::admission::policy_at(state.config.admission.policy, b)
    });
    let (agent, pa) = match found.agent {
        Some(agent) if crate::admission::admits(policy, &agent, state.clock.now()) => {
            let key = state
                .jwks
                .key_for(&agent.jwks_uri, jwt.kid(), jwt.alg())
                .await
                .map_err(|e| {
                    tracing::info!(issuer = %agent.issuer, reason = %e, "PA-JWT rejected: no key");
                    ApiError::Unauthorized
                })?;
            let pa = jwt.verify(&key, &state.pa_rules, now).map_err(|e| {
                tracing::info!(issuer = %agent.issuer, reason = %e, "PA-JWT rejected");
                ApiError::Unauthorized
            })?;
            // Staff's "who knocks" (unverified agents only); the request
            // that admitted an agent is its first sighting already.
            state.door.seen(&door_around(state), &agent);
            (agent, pa)
        }
        Some(agent) => {
            tracing::info!(
                issuer = %agent.issuer,
                verified = agent.verified,
                "PA-JWT rejected: issuer disabled, unverified or listed where the brand's policy does not admit it, or its listing expired"
            );
            return Err(ApiError::Unauthorized);
        }
        None if policy == Policy::Open => match state.door.admit(&door_around(state), &jwt).await {
            Ok(admitted) => admitted,
            // Attacker-chosen issuers: logged at debug, so a spray does not
            // flood the log; the metric counts every refusal by reason.
            Err(Refusal::Db(e)) => return Err(e.into()),
            Err(e) => {
                tracing::debug!(reason = %e, "PA-JWT rejected: not admitted under open");
                return Err(ApiError::Unauthorized);
            }
        },
        None => {
            tracing::info!("PA-JWT rejected: unknown issuer");
            return Err(ApiError::Unauthorized);
        }
    };
    let own = state.config.admission.limits_of(&agent);
    let now = state.clock.instant();
    match charge {
        Charge::PaAndUser => state.limiter.check_with(&pa.iss, &pa.sub, own, now),
        Charge::Deferred => Ok(()),
    }
    .map_err(rate_limited)?;
    let brand = found.brand.ok_or(ApiError::NotFound)?;
    Ok(Caller { pa, agent, brand })
}

/// Charges the caller's buckets (after [`Charge::Deferred`]).
pub fn charge(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    state
        .limiter
        .check_with(
            &caller.pa.iss,
            &caller.pa.sub,
            state.config.admission.limits_of(&caller.agent),
            state.clock.instant(),
        )
        .map_err(rate_limited)
}

fn rate_limited(wait: std::time::Duration) -> ApiError {
    ApiError::RateLimited {
        retry_after_secs: wait.as_secs().saturating_add(1),
    }
}

/// What the open door uses of this node (`admission::Around`).
fn door_around(state: &AppState) -> crate::admission::Around<'_> {
    crate::admission::Around {
        db: &state.db,
        relaxed_db: &state.relaxed_db,
        clock: &state.clock,
        config_cache: &state.config_cache,
        jwks: &state.jwks,
        pa_rules: &state.pa_rules,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn bearer_takes_exactly_one_well_formed_credential() {
        assert_eq!(
            bearer(&headers(&["Bearer abc"]), &header::AUTHORIZATION),
            Some("abc")
        );
        assert_eq!(
            bearer(&headers(&["bearer abc"]), &header::AUTHORIZATION),
            Some("abc")
        );
        for bad in [
            &["Basic abc"][..],
            &["Bearer"],
            &["Bearer "],
            &["Bearer a b"],
            &["Bearer a", "Bearer b"],
            &[],
        ] {
            assert_eq!(
                bearer(&headers(bad), &header::AUTHORIZATION),
                None,
                "{bad:?}"
            );
        }
    }
}
