//! The brand's OAuth 2.0 authorization server (PACT §5): RFC 8414 metadata,
//! JWKS, RFC 8628 device authorization, the token endpoint, RFC 7009 revocation.
//!
//! The PA is the client; its PA-JWT authenticates every call (a failure is the
//! bare 401 of PACT §3). Protocol errors are RFC 6749 §5.2 JSON with
//! `Cache-Control: no-store`. A brand without scopes has no OAuth endpoints.

pub mod device_authorization;
pub mod form;
pub mod introspect;
pub mod issue;
pub mod metadata;
pub mod revoke;
pub mod token;

use std::collections::BTreeSet;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pact_db::ids::BrandId;
use pact_proto::oauth::{OAuthError, OAuthErrorCode};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::{Caller, Charge};
use crate::error::ApiError;
use crate::state::AppState;

/// What an OAuth endpoint can fail with.
#[derive(Debug)]
pub enum OAuthFailure {
    /// An RFC 6749 / 8628 / 9396 error body.
    Protocol(OAuthError),
    /// Authentication, brand and rate-limit failures answer as on A2A routes.
    Api(ApiError),
    /// PostgreSQL broke a deadlock or a serialization conflict by rolling
    /// the transaction back (a poll redeeming a code while the person's
    /// other grants are revoked, say): nothing was stored, and the handler
    /// runs the transaction again; after a few tries the client is told to.
    Conflict,
}

impl OAuthFailure {
    pub fn new(code: OAuthErrorCode, description: impl Into<String>) -> Self {
        Self::Protocol(OAuthError::new(code, description))
    }

    /// Anything unexpected: answered as on A2A routes (`ApiError::internal`).
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Api(ApiError::internal(e))
    }
}

impl From<ApiError> for OAuthFailure {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<pact_db::Error> for OAuthFailure {
    fn from(e: pact_db::Error) -> Self {
        if e.is_serialization_failure() {
            tracing::info!(error = %e, "an OAuth transaction lost to a concurrent one");
            return Self::Conflict;
        }
        match ApiError::from(e) {
            // RFC 6749 §5.2: input we cannot use is the client's invalid_request.
            ApiError::A2a(_) => Self::new(OAuthErrorCode::InvalidRequest, crate::error::BAD_INPUT),
            other => Self::Api(other),
        }
    }
}

/// The authenticated PA on an OAuth endpoint: the same checks as [`Caller`],
/// but a refusal other than the bare 401 (a rate limit, an outage) answers
/// in RFC 6749's JSON rather than the A2A envelope.
pub struct OAuthCaller(pub Caller);

impl FromRequestParts<AppState> for OAuthCaller {
    type Rejection = OAuthFailure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, OAuthFailure> {
        Caller::from_request_parts(parts, state)
            .await
            .map(Self)
            .map_err(OAuthFailure::Api)
    }
}

/// The token endpoint's caller: authenticated, not yet charged to any rate
/// limit; the handler charges both buckets once the request is more than a
/// poll answered from memory (see `token.rs`).
pub struct TokenCaller(pub Caller);

impl FromRequestParts<AppState> for TokenCaller {
    type Rejection = OAuthFailure;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, OAuthFailure> {
        let brand_id = crate::auth::brand_in_path(parts, state).await;
        crate::auth::authenticate_charging(state, &parts.headers, &brand_id, Charge::Deferred)
            .await
            .map(Self)
            .map_err(OAuthFailure::Api)
    }
}

/// JSON with the no-store headers RFC 6749 §5.1 requires on token responses.
pub use crate::error::json_no_store as oauth_json;

impl IntoResponse for OAuthFailure {
    fn into_response(self) -> Response {
        match self {
            Self::Protocol(e) => {
                let status =
                    StatusCode::from_u16(e.error.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
                let mut res = oauth_json(status, &e);
                if e.error == OAuthErrorCode::InvalidClient {
                    res.headers_mut().insert(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static(r#"Bearer realm="a2a", error="invalid_client""#),
                    );
                }
                res
            }
            Self::Api(ApiError::Internal(cause)) => {
                tracing::error!(error = %cause, "internal error on an OAuth endpoint");
                oauth_json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &OAuthError::bare(OAuthErrorCode::ServerError),
                )
            }
            Self::Api(ApiError::RateLimited { retry_after_secs }) => {
                let secs = retry_after_secs.max(1);
                let body = OAuthError::new(
                    OAuthErrorCode::TemporarilyUnavailable,
                    format!("Too many requests; retry after {secs} s"),
                );
                crate::error::rate_limited(oauth_json(StatusCode::TOO_MANY_REQUESTS, &body), secs)
            }
            Self::Api(ApiError::Unavailable) => crate::error::unavailable(oauth_json(
                StatusCode::SERVICE_UNAVAILABLE,
                &OAuthError::new(
                    OAuthErrorCode::TemporarilyUnavailable,
                    "The service is temporarily unavailable; retry shortly",
                ),
            )),
            // Transient, and not an outage: 503 with a short Retry-After but
            // without the marker that tells the health guard the database
            // is down.
            Self::Conflict => {
                let mut res = oauth_json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &OAuthError::new(
                        OAuthErrorCode::TemporarilyUnavailable,
                        "A concurrent change got in the way; retry shortly",
                    ),
                );
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                res
            }
            Self::Api(e) => e.into_response(),
        }
    }
}

/// The brand's scope ids; a brand without any offers no delegation (404).
pub async fn offered_scopes(
    node: &pact_node::node::NodeInner,
    brand_id: &BrandId,
) -> Result<BTreeSet<String>, OAuthFailure> {
    let scopes: BTreeSet<String> = node
        .config_cache
        .scopes(&node.db, brand_id)
        .await?
        .iter()
        .map(|s| s.scope_id.clone())
        .collect();
    if scopes.is_empty() {
        return Err(OAuthFailure::Api(ApiError::NotFound));
    }
    Ok(scopes)
}

/// PACT §5: `client_id` is the PA's issuer and must equal the PA-JWT's `iss`.
pub fn check_client_id(
    client_id: Option<&str>,
    pa_iss: &str,
    required: bool,
) -> Result<(), OAuthFailure> {
    match client_id {
        Some(c) if c == pa_iss => Ok(()),
        Some(_) => Err(OAuthFailure::new(
            OAuthErrorCode::InvalidClient,
            "client_id does not match the authenticated personal agent",
        )),
        None if required => Err(OAuthFailure::new(
            OAuthErrorCode::InvalidRequest,
            "client_id is required",
        )),
        None => Ok(()),
    }
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for OAuthFailure {
    fn from(e: sqlx::Error) -> Self {
        pact_db::Error::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RFC 6749 error a token or device request gets for its `client_id`.
    fn client_id_error(client_id: Option<&str>, required: bool) -> Option<OAuthErrorCode> {
        match check_client_id(client_id, "https://pa.example", required) {
            Ok(()) => None,
            Err(OAuthFailure::Protocol(e)) => Some(e.error),
            Err(OAuthFailure::Api(e)) => panic!("not an OAuth error: {e:?}"),
            Err(OAuthFailure::Conflict) => panic!("not an OAuth error: a conflict"),
        }
    }

    /// A deadlock broken by PostgreSQL is a conflict to run again, then a
    /// 503 with Retry-After that does not tell the health guard the
    /// database is down; any other database error is not.
    #[test]
    fn a_deadlock_is_a_conflict_not_an_outage() {
        let deadlock =
            pact_db::Error::SerializationFailure(sqlx::Error::Protocol("40P01".to_owned()));
        let failure = OAuthFailure::from(deadlock);
        assert!(matches!(failure, OAuthFailure::Conflict));
        let res = failure.into_response();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers()[header::RETRY_AFTER], "1");
        assert!(
            res.extensions()
                .get::<crate::error::DbUnavailable>()
                .is_none()
        );
        let other = pact_db::Error::Other(sqlx::Error::Protocol("x".to_owned()));
        assert!(!matches!(OAuthFailure::from(other), OAuthFailure::Conflict));
    }

    #[test]
    fn client_id_is_the_authenticated_pas_issuer() {
        use OAuthErrorCode::{InvalidClient, InvalidRequest};
        // (client_id sent, required by the endpoint, the error or None)
        let rules = [
            (Some("https://pa.example"), true, None),
            (Some("https://pa.example"), false, None),
            // Another PA's id, even a prefix or a case variant of ours, is not ours.
            (Some("https://other.example"), true, Some(InvalidClient)),
            (Some("https://pa.example/"), false, Some(InvalidClient)),
            (Some("HTTPS://PA.EXAMPLE"), true, Some(InvalidClient)),
            (Some(""), true, Some(InvalidClient)),
            // Absent: refused where RFC 8628 §3.4 requires it, else the PA-JWT says who.
            (None, true, Some(InvalidRequest)),
            (None, false, None),
        ];
        for (sent, required, want) in rules {
            assert_eq!(
                client_id_error(sent, required),
                want,
                "client_id {sent:?}, required {required}"
            );
        }
    }
}
