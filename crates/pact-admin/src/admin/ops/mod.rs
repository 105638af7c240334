//! Each staff action written once: the command line, the admin API and the
//! console call these functions, which check their input, act and record the
//! audit entry in the caller's transaction. The faces only decide who may
//! call them (roles and brands) and how an answer is shown.

pub mod agents;
pub mod customers;
pub mod grants;
pub mod keys;
pub mod registries;
pub mod scopes;

use pact_db::ids::BrandId;
use serde_json::Value;
use sqlx::PgConnection;

use crate::admin::role::Actor;

/// Why an action was refused (nothing was changed), or a database error.
#[derive(Debug)]
pub enum OpsError {
    Invalid(String),
    /// Well formed, but it names something that is not there yet (a scope
    /// the brand does not offer): 409 in the API.
    Conflict(String),
    /// No such thing (or none the actor may see).
    Missing,
    Db(pact_db::Error),
}

impl From<pact_db::Error> for OpsError {
    fn from(e: pact_db::Error) -> Self {
        Self::Db(e)
    }
}

/// Longest reason staff may give, in characters.
pub const MAX_REASON: usize = 200;

/// The reason staff gave for an action: trimmed, blank for none; at most
/// [`MAX_REASON`] characters, none of them a control, invisible or
/// direction-changing one (`domain::hidden_chars`: a customer whose access it
/// ended reads it on their account page), or refused (never cut short: what
/// staff typed is what is stored, or nothing is).
pub fn reason(raw: Option<&str>) -> Result<Option<String>, OpsError> {
    let Some(r) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    if r.chars().count() > MAX_REASON {
        return Err(OpsError::Invalid(format!(
            "reason: at most {MAX_REASON} characters"
        )));
    }
    if let Some(c) = crate::domain::hidden_chars::first_hidden(r) {
        return Err(OpsError::Invalid(crate::domain::hidden_chars::refusal(
            "reason", c,
        )));
    }
    Ok(Some(r.to_owned()))
}

/// The audit entry of an action, in the action's transaction.
pub(crate) async fn audit(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    action: &str,
    target: &str,
    brand_id: Option<&BrandId>,
    detail: Value,
) -> Result<(), pact_db::Error> {
    pact_db::audit::record(
        &mut *tx,
        &pact_db::audit::NewEntry {
            actor_kind: actor.kind,
            actor: &actor.name,
            action,
            target: Some(target),
            brand_id: brand_id.map(BrandId::as_str),
            detail,
            client_addr: ip,
        },
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_kept_whole_or_refused() {
        assert_eq!(reason(None).ok(), Some(None));
        assert_eq!(reason(Some("   ")).ok(), Some(None));
        assert_eq!(reason(Some(" fraud ")).ok(), Some(Some("fraud".into())));
        assert!(reason(Some(&"x".repeat(200))).is_ok());
        assert!(matches!(
            reason(Some(&"x".repeat(201))),
            Err(OpsError::Invalid(_))
        ));
        assert!(matches!(reason(Some("a\u{7}b")), Err(OpsError::Invalid(_))));
    }
}
