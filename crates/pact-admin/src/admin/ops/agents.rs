//! Staff registering a personal-agent platform (its issuer, JWKS URI, name
//! and the links and logo shown on consent, RFC 7591 §2), disabling and
//! enabling it: disabling refuses
//! its PA-JWTs and revokes every grant it holds, in one transaction, so it
//! needs a reason (stored with each grant, shown on the customers' account
//! pages); enabling lets it in again, revoked grants staying revoked.
//!
//! For agents the `open` policy admitted (PACT §3.1, `pact-node/src/admission.rs`), staff
//! also verify one (it joins the verified tier: allowlisting brands admit
//! it, and it may request every scope) or forget one (its row, conversations
//! and grants go; it may knock again). Blocking one is disabling it: the row
//! stays, so the door stays shut for that issuer, and its grants are revoked
//! through the grants trigger's notification on every node.

use pact_db::agents::{Agent, AgentLimit, AgentMetadata};
use pact_db::grants::reason::by_admin;
use pact_node::logo_fetch::Logo;
use serde_json::json;
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::{OpsError, audit, reason};
use crate::admin::role::Actor;
use crate::domain::hidden_chars;
use crate::who::LinkFlags;

/// Checks a registration before anything is fetched or written; returns the
/// display name (the issuer when none is given). The issuer is compared
/// exactly (PACT §3), so it must carry no surrounding space; the name is shown
/// on consent, so it must look like what it is. A refusal names the JSON or
/// form field; [`check_registration_named`] names others (the CLI's flags).
pub fn check_registration(
    issuer: &str,
    jwks_uri: &str,
    name: Option<&str>,
) -> Result<String, String> {
    check_registration_named(issuer, jwks_uri, name, ["issuer", "jwks_uri", "name"])
}

/// [`check_registration`], its refusals naming `fields` (issuer, JWKS URI,
/// name).
pub fn check_registration_named(
    issuer: &str,
    jwks_uri: &str,
    name: Option<&str>,
    [issuer_field, jwks_field, name_field]: [&str; 3],
) -> Result<String, String> {
    if issuer.trim().is_empty()
        || issuer.trim() != issuer
        || issuer.chars().count() > 512
        || issuer.chars().any(char::is_control)
    {
        return Err(format!(
            "{issuer_field}: a non-empty string of at most 512 characters without surrounding spaces \
             or control characters (it is compared exactly, PACT §3)"
        ));
    }
    // Loopback URIs are accepted at registration; the server fetches them
    // only with --allow-loopback-jwks.
    pact_jose::check_jwks_uri(jwks_uri, true).map_err(|e| format!("{jwks_field}: {e}"))?;
    match name.map(str::trim) {
        Some(n) if n.is_empty() || n.chars().count() > 200 || n.chars().any(char::is_control) => {
            Err(format!(
                "{name_field}: 1–200 characters, no control characters"
            ))
        }
        Some(n) => match hidden_chars::first_hidden(n) {
            Some(c) => Err(format!(
                "{name_field}: {}",
                hidden_chars::refusal("the agent name", c)
            )),
            None => Ok(n.to_owned()),
        },
        None => Ok(issuer.to_owned()),
    }
}

/// A registration as [`check_registration`] passed it, with the logo already
/// fetched (a refused logo leaves the registration as it was).
pub struct Registration<'a> {
    pub issuer: &'a str,
    pub jwks_uri: &'a str,
    pub name: &'a str,
    pub links: &'a LinkFlags,
    pub logo: Option<&'a Logo>,
    /// Rate limits (`pactd agent add --rate-limit-pa/--rate-limit-user`);
    /// `None` keeps what a known issuer has.
    pub pa_limit: Option<AgentLimit>,
    pub user_limit: Option<AgentLimit>,
}

/// Registers the platform, or moves a known issuer to a new JWKS URI, with
/// `agent.register` in the same transaction.
pub async fn register(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    r: &Registration<'_>,
    now: OffsetDateTime,
) -> Result<(Agent, Option<AgentMetadata>), OpsError> {
    let (agent, meta) =
        crate::who::register_platform(&mut *tx, r.issuer, r.jwks_uri, r.name, r.links, r.logo, now)
            .await?;
    let mut detail = json!({"jwks_uri": agent.jwks_uri, "name": agent.name,
        "homepage": r.links.homepage, "logo_uri": r.links.logo,
        "policy_uri": r.links.policy, "tos_uri": r.links.tos});
    if r.pa_limit.is_some() || r.user_limit.is_some() {
        let (pa, user) = (
            r.pa_limit.or(agent.pa_limit()),
            r.user_limit.or(agent.user_limit()),
        );
        pact_db::agents::set_limits(&mut *tx, r.issuer, pa, user).await?;
        detail["pa_limit"] = json!(pa);
        detail["user_limit"] = json!(user);
    }
    audit(tx, actor, ip, "agent.register", &agent.issuer, None, detail).await?;
    Ok((agent, meta))
}

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
