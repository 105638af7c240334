//! Staff acting on a customer's account: unlock it, remove its second
//! factors, sign it out everywhere, disable or enable it, remove it.
//!
//! Disabling and removing end every grant the customer gave at once, on every
//! node (PACT §5.7: the table trigger announces each revocation), in the same
//! transaction as the account change, so no agent keeps acting for an account
//! that can no longer sign in. Receipts and the revoked grants stay as
//! evidence; they name only the opaque brand user id.

use pact_db::grants::reason::by_admin;
use pact_db::users::User;
use serde::Serialize;
use sqlx::PgConnection;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{OpsError, audit};
use crate::accounts::lockout;
use crate::admin::role::Actor;
use pact_db::admin_search;

/// The reason the customer's account page gives for grants ended by
/// disabling the account.
pub const DISABLED: &str = "the account was disabled";
/// ... and by removing it (which no page of the customer's shows any more,
/// but the grant rows keep).
pub const REMOVED: &str = "the account was removed";

/// What staff do to one customer account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Clears failed sign-ins and the lock they set.
    Unlock,
    /// Removes TOTP, passkeys and recovery codes, and ends every session.
    ResetSecondFactors,
    /// Ends every session.
    SignOut,
    /// The account cannot sign in; its sessions and grants end.
    Disable,
    /// The account can sign in again; revoked grants stay revoked.
    Enable,
    /// The account, its factors and sessions are erased; its grants end.
    Remove,
}

impl Action {
    /// The audit log's name for the action.
    pub fn audit_name(self) -> &'static str {
        match self {
            Self::Unlock => "customer.unlock",
            Self::ResetSecondFactors => "customer.reset_second_factors",
            Self::SignOut => "customer.sign_out",
            Self::Disable => "customer.disable",
            Self::Enable => "customer.enable",
            Self::Remove => "customer.remove",
        }
    }
}

/// What one action did to the account: only the fields of the action taken
/// are present. It is the audit entry's detail and the admin API's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct Change {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unlocked: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub second_factors_removed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_out: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions_ended: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_grants: Option<usize>,
}

/// Does `action` to `user` and records it as `actor` did it, in the caller's
/// transaction: what it did, as the audit entry's detail (the admin API
/// answers with it). Nothing is written when it fails.
pub async fn apply(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    user: &User,
    action: Action,
    now: OffsetDateTime,
) -> Result<Change, OpsError> {
    let detail = match action {
        Action::Unlock => {
            pact_db::users::clear_failures(&mut *tx, user.id).await?;
            // The per-email counter of password sign-ins (accounts/lockout.rs);
            // per-address counters expire on their own.
            pact_db::sign_in_failures::clear(
                &mut *tx,
                &[lockout::account_key(&user.brand_id, &user.email)],
            )
            .await?;
            Change {
                unlocked: Some(true),
                ..Change::default()
            }
        }
        Action::ResetSecondFactors => {
            pact_db::users::reset_mfa(tx, user.id).await?;
            Change {
                second_factors_removed: Some(true),
                signed_out: Some(true),
                ..Change::default()
            }
        }
        Action::SignOut => {
            let n = admin_search::sign_out_customer(&mut *tx, user.id).await?;
            Change {
                sessions_ended: Some(n),
                ..Change::default()
            }
        }
        Action::Disable => {
            pact_db::users::set_disabled(tx, user.id, Some(now)).await?;
            // Staff disable an account they fear is taken over: a reset link
            // mailed before must not work again once it is enabled.
            pact_db::password_resets::end_all_for(&mut *tx, user.id, now).await?;
            let revoked = revoke_every_grant(tx, user, DISABLED).await?;
            Change {
                disabled: Some(true),
                signed_out: Some(true),
                revoked_grants: Some(revoked),
                ..Change::default()
            }
        }
        Action::Enable => {
            pact_db::users::set_disabled(tx, user.id, None).await?;
            Change {
                disabled: Some(false),
                ..Change::default()
            }
        }
        Action::Remove => {
            let revoked = revoke_every_grant(tx, user, REMOVED).await?;
            if !pact_db::users::delete(&mut *tx, user.id).await? {
                return Err(OpsError::Missing);
            }
            Change {
                removed: Some(true),
                revoked_grants: Some(revoked),
                ..Change::default()
            }
        }
    };
    audit(
        tx,
        actor,
        ip,
        action.audit_name(),
        &user.id.to_string(),
        Some(&user.brand_id),
        serde_json::to_value(&detail).unwrap_or_default(),
    )
    .await?;
    Ok(detail)
}

/// Revokes every live grant of the account with `why` as the reason the
/// customer's account page shows; how many it revoked.
async fn revoke_every_grant(
    tx: &mut PgConnection,
    user: &User,
    why: &str,
) -> Result<usize, OpsError> {
    let revoked = pact_db::grants::revoke_all_for_user(
        &mut *tx,
        &user.brand_id,
        &user.subject(),
        &by_admin(why),
    )
    .await?;
    Ok(revoked.len())
}
