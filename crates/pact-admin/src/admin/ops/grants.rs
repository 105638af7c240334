//! Staff revoking grants (PACT §5.7: at once, on every node — the table
//! trigger announces each revocation on `pactd_revocations`).
//!
//! The stored reason is what the customer's account page shows after "the
//! shop's staff removed its access": the reason staff gave, or none. It never
//! names the staff member; the audit entry does.

use pact_db::grants::{Grant, reason::BY_ADMIN, reason::by_admin};
use pact_db::users::User;
use serde_json::json;
use sqlx::PgConnection;

use super::{OpsError, audit, reason};
use crate::admin::role::Actor;

/// What the grant row records.
fn stored(why: Option<&str>) -> String {
    why.map_or_else(|| BY_ADMIN.to_owned(), by_admin)
}

/// Revokes one grant with `grant.revoke`; false when it had already ended by
/// revocation (nothing recorded). `why` is checked as [`reason`] checks it.
pub async fn revoke(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    grant: &Grant,
    why: Option<&str>,
) -> Result<bool, OpsError> {
    let why = reason(why)?;
    if !pact_db::grants::revoke(&mut *tx, grant.id, &stored(why.as_deref())).await? {
        return Ok(false);
    }
    audit(
        tx,
        actor,
        ip,
        "grant.revoke",
        &grant.id.to_string(),
        Some(&grant.brand_id),
        json!({"customer": grant.user_sub, "agent": grant.pa_issuer, "reason": why}),
    )
    .await?;
    Ok(true)
}

/// Revokes every live grant a customer gave, to any agent, with
/// `customer.revoke_grants`: how many.
pub async fn revoke_for_customer(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    user: &User,
    why: Option<&str>,
) -> Result<usize, OpsError> {
    let why = reason(why)?;
    let revoked = pact_db::grants::revoke_all_for_user(
        &mut *tx,
        &user.brand_id,
        &user.subject(),
        &stored(why.as_deref()),
    )
    .await?;
    audit(
        tx,
        actor,
        ip,
        "customer.revoke_grants",
        &user.id.to_string(),
        Some(&user.brand_id),
        json!({"revoked": revoked.len(), "reason": why}),
    )
    .await?;
    Ok(revoked.len())
}
