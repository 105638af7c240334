//! Staff disabling and enabling a personal-agent platform: disabling refuses
//! its PA-JWTs and revokes every grant it holds, in one transaction, so it
//! needs a reason (stored with each grant, shown on the customers' account
//! pages); enabling lets it in again, revoked grants staying revoked.
//!
//! For agents the `open` policy admitted (PACT §3.1, `admission.rs`), staff
//! also verify one (it joins the verified tier: allowlisting brands admit
//! it, and it may request every scope) or forget one (its row, conversations
//! and grants go; it may knock again). Blocking one is disabling it: the row
//! stays, so the door stays shut for that issuer, and its grants are revoked
//! through the grants trigger's notification on every node.

use pact_db::grants::reason::by_admin;
use serde_json::json;
use sqlx::PgConnection;

use super::{OpsError, audit, reason};
use crate::admin::role::Actor;

/// `agent.disable` or `agent.enable`; how many grants disabling revoked.
/// An unknown issuer is [`OpsError::Missing`].
pub async fn set_enabled(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    issuer: &str,
    enabled: bool,
    why: Option<&str>,
) -> Result<u64, OpsError> {
    let why = reason(why)?;
    if !enabled && why.is_none() {
        return Err(OpsError::Invalid(
            "reason is required: it is stored with every grant this revokes".into(),
        ));
    }
    if !pact_db::agents::set_enabled(&mut *tx, issuer, enabled).await? {
        return Err(OpsError::Missing);
    }
    let (action, revoked) = match why.as_deref() {
        Some(why) if !enabled => (
            "agent.disable",
            pact_db::grants::revoke_all_for_agent(&mut *tx, issuer, &by_admin(why)).await?,
        ),
        _ => ("agent.enable", 0),
    };
    audit(
        tx,
        actor,
        ip,
        action,
        issuer,
        None,
        json!({"reason": why, "revoked_grants": revoked}),
    )
    .await?;
    Ok(revoked)
}

/// `agent.verify`: staff vouch for an agent admitted under `open`. An unknown
/// issuer is [`OpsError::Missing`].
pub async fn verify(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    issuer: &str,
) -> Result<(), OpsError> {
    if !pact_db::agents::set_verified(&mut *tx, issuer).await? {
        return Err(OpsError::Missing);
    }
    audit(tx, actor, ip, "agent.verify", issuer, None, json!({})).await?;
    Ok(())
}

/// `agent.forget`: staff drop an unverified agent with its conversations and
/// grants (the cascade). Not for a verified one (disable it instead):
/// [`OpsError::Missing`]; nor for one whose grants have receipts
/// ([`OpsError::Invalid`], saying so).
pub async fn forget(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    issuer: &str,
) -> Result<(), OpsError> {
    match pact_db::agents::forget_unverified(&mut *tx, issuer).await? {
        pact_db::agents::Forgot::Done => {}
        pact_db::agents::Forgot::Missing => return Err(OpsError::Missing),
        pact_db::agents::Forgot::HasReceipts => {
            return Err(OpsError::Invalid(
                "this agent's grants have receipts, which are kept: disable or block it instead"
                    .into(),
            ));
        }
    }
    audit(tx, actor, ip, "agent.forget", issuer, None, json!({})).await?;
    Ok(())
}

/// `agent.block_host`: no issuer on `host` or under it is admitted under
/// `open` or taken from a registry's list, and the agents already stored
/// there are disabled with their grants revoked, on every node (the grants
/// trigger announces each revocation; the agents trigger drops every node's
/// copy). A reason is required, as for disabling. Returns the host as stored,
/// the agents disabled and the grants revoked.
pub async fn block_host(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    host: &str,
    why: Option<&str>,
    now: time::OffsetDateTime,
) -> Result<(String, Vec<String>, u64), OpsError> {
    let host = crate::admission::normalize_host(host).ok_or_else(|| {
        OpsError::Invalid("host: a DNS name such as agents.example (or a URL on it)".into())
    })?;
    let Some(why) = reason(why)? else {
        return Err(OpsError::Invalid(
            "reason is required: it is stored with every grant this revokes".into(),
        ));
    };
    let (disabled, revoked) =
        pact_db::registries::block_host(&mut *tx, &host, &why, &by_admin(&why), now).await?;
    audit(
        tx,
        actor,
        ip,
        "agent.block_host",
        &host,
        None,
        json!({"reason": why, "disabled_agents": disabled, "revoked_grants": revoked}),
    )
    .await?;
    Ok((host, disabled, revoked))
}

/// `agent.unblock_host`: the host may knock again; the agents the block
/// disabled stay disabled until staff enable each.
pub async fn unblock_host(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    host: &str,
) -> Result<String, OpsError> {
    let host = crate::admission::normalize_host(host).ok_or(OpsError::Missing)?;
    if !pact_db::registries::unblock_host(&mut *tx, &host).await? {
        return Err(OpsError::Missing);
    }
    audit(tx, actor, ip, "agent.unblock_host", &host, None, json!({})).await?;
    Ok(host)
}
