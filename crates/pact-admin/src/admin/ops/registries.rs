//! Staff adding and removing trusted registries of personal agents (PACT
//! §3.1's trusted-issuer registry; `crate::registry` fetches their lists).
//! Removing one ends the listing of every agent it listed and revokes their
//! grants, in the same transaction.

use pact_db::registries::Registry;
use pact_jose::ProviderKeySet;
use serde_json::{Value, json};
use sqlx::PgConnection;
use time::OffsetDateTime;

use super::{OpsError, audit};
use crate::admin::role::Actor;

/// How often a list is fetched unless staff say otherwise: hourly.
pub const DEFAULT_REFRESH_SECS: i32 = 3600;

/// The pinned keys as given: a JWKS (`{"keys": [...]}`), an array of JWKs,
/// or one JWK. Each must be a public ES256 JWK with a `kid` (what
/// `ProviderKeySet` accepts); returned as the array stored.
pub fn pinned_keys(given: &Value) -> Result<Value, OpsError> {
    let keys = match given {
        Value::Object(o) if o.contains_key("keys") => o.get("keys").cloned().unwrap_or_default(),
        Value::Object(_) => Value::Array(vec![given.clone()]),
        Value::Array(_) => given.clone(),
        _ => Value::Null,
    };
    let Value::Array(list) = &keys else {
        return Err(OpsError::Invalid(
            "keys: a JWKS, an array of JWKs or one JWK".into(),
        ));
    };
    ProviderKeySet::from_public_jwks(list).map_err(|e| {
        OpsError::Invalid(format!("keys: {e} (public ES256 JWKs, each with a kid)"))
    })?;
    Ok(keys)
}

/// A registry's name: what its agents' tier shows.
fn check_name(name: &str) -> Result<(), OpsError> {
    let fine = (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if fine {
        Ok(())
    } else {
        Err(OpsError::Invalid(
            "name: 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit".into(),
        ))
    }
}

/// `registry.add`. `allow_loopback` is the JWKS test mode: the list's URL
/// follows the same rules as a jwksUri (https, a public host).
#[allow(clippy::too_many_arguments)]
pub async fn add(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    name: &str,
    url: &str,
    keys: &Value,
    refresh_seconds: Option<i32>,
    allow_loopback: bool,
    now: OffsetDateTime,
) -> Result<Registry, OpsError> {
    check_name(name)?;
    pact_jose::check_jwks_uri(url, allow_loopback)
        .map_err(|e| OpsError::Invalid(format!("url: {e}")))?;
    let keys = pinned_keys(keys)?;
    let refresh = refresh_seconds.unwrap_or(DEFAULT_REFRESH_SECS);
    if !(60..=86_400).contains(&refresh) {
        return Err(OpsError::Invalid(
            "refresh: between 60 and 86400 seconds".into(),
        ));
    }
    let Some(registry) =
        pact_db::registries::insert(&mut *tx, name, url, &keys, refresh, now).await?
    else {
        return Err(OpsError::Invalid(format!("a registry named {name} exists")));
    };
    audit(
        tx,
        actor,
        ip,
        "registry.add",
        name,
        None,
        json!({"url": url, "refresh_seconds": refresh, "keys": keys.as_array().map_or(0, Vec::len)}),
    )
    .await?;
    Ok(registry)
}

/// `registry.remove`: the agents it listed are no longer admitted and their
/// grants are revoked. Returns how many agents and grants.
pub async fn remove(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    name: &str,
    now: OffsetDateTime,
) -> Result<(usize, u64), OpsError> {
    let reason = crate::registry::delisted_reason(name);
    let (unlisted, revoked) = pact_db::registries::remove(&mut *tx, name, &reason, now)
        .await?
        .ok_or(OpsError::Missing)?;
    audit(
        tx,
        actor,
        ip,
        "registry.remove",
        name,
        None,
        json!({"unlisted_agents": unlisted.len(), "revoked_grants": revoked}),
    )
    .await?;
    Ok((unlisted.len(), revoked))
}

/// What a refresh came to: the list applied, or refused with why (nothing
/// changed then).
pub type Refreshed = Result<pact_db::registries::Applied, String>;

/// `registry.refresh`: fetches and applies the list now and records the
/// outcome, what the list changed (it may delist agents and revoke their
/// grants) or why it was refused. The API and the CLI both refresh through
/// here, so both leave the same entry. A database failure is returned as it
/// is, unrecorded.
pub async fn refresh(
    db: &pact_db::PgPool,
    jwks: &pact_jose::JwksPolicy,
    actor: &Actor,
    ip: Option<&str>,
    registry: &Registry,
    now: OffsetDateTime,
) -> Result<Refreshed, pact_db::Error> {
    let outcome = match crate::registry::refresh(db, jwks, registry, now).await {
        Ok(applied) => Ok(applied),
        Err(crate::registry::RefreshError::Db(e)) => return Err(e),
        Err(e) => Err(format!("{e}; nothing changed")),
    };
    let detail = match &outcome {
        Ok(a) => json!({"outcome": "applied", "result": {
            "name": registry.name, "listed": a.listed, "skipped": a.skipped,
            "delisted": a.delisted, "revoked_grants": a.revoked_grants,
        }}),
        Err(reason) => json!({"outcome": "refused", "reason": reason}),
    };
    let mut conn = db.acquire().await?;
    audit(
        &mut conn,
        actor,
        ip,
        "registry.refresh",
        &registry.name,
        None,
        detail,
    )
    .await?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_checked() {
        assert!(check_name("trusted-agents.eu").is_ok());
        for bad in ["", "-x", "A", "a b", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        let key = pact_jose::ProviderKey::generate().unwrap();
        let jwk = key.public_jwk();
        assert_eq!(pinned_keys(&jwk).unwrap(), json!([jwk.clone()]));
        assert_eq!(
            pinned_keys(&json!({"keys": [jwk.clone()]})).unwrap(),
            json!([jwk])
        );
        assert!(pinned_keys(&json!({"keys": []})).is_err());
        assert!(pinned_keys(&json!("x")).is_err());
        assert!(pinned_keys(&json!({"kty": "oct", "k": "c2VjcmV0"})).is_err());
    }
}
