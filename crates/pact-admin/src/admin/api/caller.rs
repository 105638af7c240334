//! The admin API's caller: an API credential presented as
//! `Authorization: Bearer pactd_admin_…` (RFC 6750 §2.1), its role and brand
//! limit, and the audit trail every request leaves under its name.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use pact_node::node::NodeInner;
use serde_json::Value;

use super::error::AdminApiError;
use crate::admin::credential;
use crate::admin::role::{Actor, Role};
use crate::client_ip::ClientIp;
use crate::state::AppState;

#[derive(Clone, Debug)]
pub struct ApiCaller {
    pub actor: Actor,
    pub ip: String,
}

impl FromRequestParts<AppState> for ApiCaller {
    type Rejection = AdminApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, AdminApiError> {
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                // RFC 6750 §2.1: the scheme is case-insensitive.
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            })
            .ok_or(AdminApiError::Unauthenticated)?;
        let hash = credential::hash_presented(presented).ok_or(AdminApiError::Unauthenticated)?;
        let now = state.clock.now();
        let cred = pact_db::admins::use_credential(&state.db, &hash, now)
            .await?
            .ok_or(AdminApiError::Unauthenticated)?;
        let role = cred.role;
        crate::admin::StaffRequest::proven(&parts.extensions);
        let ClientIp(ip) = match ClientIp::from_request_parts(parts, state).await {
            Ok(ip) => ip,
            Err(never) => match never {},
        };
        Ok(Self {
            actor: Actor {
                kind: "credential",
                name: cred.name,
                role,
                brands: cred.brands,
            },
            ip: ip.to_string(),
        })
    }
}

impl ApiCaller {
    /// Refuses (and records the refusal) when the role is below `needed`.
    /// Checked before any object is loaded, so the answer never depends on
    /// whether the object exists.
    pub async fn require(
        &self,
        node: &NodeInner,
        needed: Role,
        action: &str,
    ) -> Result<(), AdminApiError> {
        if self.actor.may(needed) {
            return Ok(());
        }
        self.record(
            &node.db,
            &format!("{action}.denied"),
            None,
            None,
            serde_json::json!({"needs": needed.as_str()}),
        )
        .await?;
        Err(AdminApiError::Forbidden(match needed {
            Role::Owner => "This needs the owner role.",
            _ => "This needs the operator role.",
        }))
    }

    /// Platform-wide actions need a caller limited to no brand.
    pub async fn require_unlimited(
        &self,
        node: &NodeInner,
        action: &str,
    ) -> Result<(), AdminApiError> {
        if self.actor.is_unlimited() {
            return Ok(());
        }
        self.record(
            &node.db,
            &format!("{action}.denied"),
            None,
            None,
            serde_json::json!({"needs": "every brand"}),
        )
        .await?;
        Err(AdminApiError::Forbidden(
            "This affects every brand; a brand-limited credential cannot do it.",
        ))
    }

    /// One audit entry under this caller's name (in the caller's transaction
    /// when `db` is one, so the entry and the change commit together).
    pub async fn record(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        action: &str,
        target: Option<&str>,
        brand_id: Option<&str>,
        detail: Value,
    ) -> Result<(), AdminApiError> {
        pact_db::audit::record(
            db,
            &pact_db::audit::NewEntry {
                actor_kind: self.actor.kind,
                actor: &self.actor.name,
                action,
                target,
                brand_id,
                detail,
                client_addr: Some(&self.ip),
            },
        )
        .await?;
        Ok(())
    }
}
