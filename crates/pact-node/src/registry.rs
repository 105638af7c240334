//! Trusted registries of personal agents (PACT §3.1: "a trusted-issuer
//! registry"; issue 31's `registry` policy). A registry publishes a signed
//! list of agents (format and rules: `pact-jose/src/registry_list.rs`); the
//! merchant adds it with its URL and pinned keys (`pactd registry add`), and
//! housekeeping fetches each list when it is due. A list that verifies is
//! applied in one transaction (`pact_db::registries::apply_list`); one that
//! does not — unreachable, a bad signature, expired, older than the list in
//! force, a bad entry — changes nothing: the error is stored on the registry
//! for staff (`pactd registry list`, the admin API and console), logged,
//! and counted by `pactd_registry_refresh_total{result}`.
//!
//! A listed agent is admitted where the brand's policy is `registry` or
//! `open`, while the list that listed it is in force (`admission::admits`);
//! it is verified (every scope may be requested).

use pact_db::PgPool;
use pact_db::registries::{Applied, ApplyError, Listing, Registry};
use pact_jose::{JwksPolicy, ProviderKeySet, RegistryFetcher, RegistryListError};
use time::OffsetDateTime;

use crate::node::Node;

/// Most registries one housekeeping pass refreshes.
const PER_PASS: i64 = 8;

/// Why a refresh changed nothing. The text is what staff see.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("the pinned keys are unusable: {0}")]
    Keys(pact_jose::ProviderKeyError),
    #[error("fetch failed: {0}")]
    Fetch(pact_jose::JwksError),
    #[error("list refused: {0}")]
    List(#[from] RegistryListError),
    #[error("the registry was removed meanwhile")]
    Missing,
    #[error("database: {0}")]
    Db(#[from] pact_db::Error),
}

impl RefreshError {
    fn label(&self) -> &'static str {
        match self {
            Self::Keys(_) => "keys",
            Self::Fetch(_) => "fetch",
            Self::List(RegistryListError::Jws(_)) => "signature",
            Self::List(RegistryListError::Expired) => "expired",
            Self::List(RegistryListError::Rollback) => "rollback",
            Self::List(_) => "list",
            Self::Missing => "missing",
            Self::Db(_) => "db",
        }
    }
}

/// The revoke reason of the grants of an agent a registry stopped listing.
pub fn delisted_reason(registry: &str) -> String {
    format!("the agent is no longer listed by the trusted registry {registry}")
}

/// Refreshes the registries due at `now` (housekeeping).
pub async fn refresh_due(node: &Node, now: OffsetDateTime) {
    let (db, jwks) = (&node.db, &node.config.jwks);
    let due = match pact_db::registries::claim_due(db, now, PER_PASS).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "registry claim failed");
            return;
        }
    };
    for registry in due {
        // The outcome is stored, logged and counted by `refresh`.
        let _ = refresh(db, jwks, &registry, now).await;
    }
}

/// Fetches, verifies and applies one registry's list; on failure stores the
/// error on the registry. Either way the outcome is logged and counted.
/// `jwks` is the node's fetch policy (timeouts, the loopback test mode).
pub async fn refresh(
    db: &PgPool,
    jwks: &JwksPolicy,
    registry: &Registry,
    now: OffsetDateTime,
) -> Result<Applied, RefreshError> {
    let outcome = fetch_and_apply(db, jwks, registry, now).await;
    let result = match &outcome {
        Ok(applied) => {
            tracing::info!(
                registry = %registry.name,
                listed = applied.listed,
                skipped = applied.skipped,
                delisted = applied.delisted.len(),
                revoked_grants = applied.revoked_grants,
                "registry list applied"
            );
            "applied"
        }
        Err(e) => {
            tracing::warn!(registry = %registry.name, error = %e, "registry list not applied");
            if let Err(db) =
                pact_db::registries::record_failure(db, &registry.name, &e.to_string(), now).await
            {
                tracing::warn!(registry = %registry.name, error = %db, "registry failure not recorded");
            }
            e.label()
        }
    };
    metrics::counter!("pactd_registry_refresh_total", "result" => result).increment(1);
    outcome
}

async fn fetch_and_apply(
    db: &PgPool,
    jwks: &JwksPolicy,
    registry: &Registry,
    now: OffsetDateTime,
) -> Result<Applied, RefreshError> {
    let keys = registry.keys.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let pinned = ProviderKeySet::from_public_jwks(keys).map_err(RefreshError::Keys)?;
    let policy = jwks.clone();
    let allow_loopback = policy.allow_loopback;
    let fetcher = RegistryFetcher::new(policy).map_err(RefreshError::Fetch)?;
    let jws = fetcher
        .fetch(&registry.url)
        .await
        .map_err(RefreshError::Fetch)?;
    let list =
        pact_jose::verify_registry_list(&jws, &pinned, now.unix_timestamp(), allow_loopback)?;
    let at =
        |secs| OffsetDateTime::from_unix_timestamp(secs).map_err(|_| RegistryListError::Payload);
    let (issued_at, expires_at) = (at(list.iat)?, at(list.exp)?);
    let listings: Vec<Listing<'_>> = list
        .agents
        .iter()
        .map(|a| Listing {
            issuer: &a.issuer,
            jwks_uri: &a.jwks_uri,
            name: a.name.trim(),
            logo_uri: a.logo_uri.as_deref(),
        })
        .collect();
    let mut tx = db.begin().await.map_err(pact_db::Error::from)?;
    let applied = pact_db::registries::apply_list(
        &mut tx,
        &registry.name,
        issued_at,
        expires_at,
        &listings,
        &delisted_reason(&registry.name),
        now,
    )
    .await
    .map_err(|e| match e {
        ApplyError::Missing => RefreshError::Missing,
        ApplyError::Rollback => RefreshError::List(RegistryListError::Rollback),
        ApplyError::Db(e) => RefreshError::Db(e),
    })?;
    tx.commit().await.map_err(pact_db::Error::from)?;
    Ok(applied)
}
