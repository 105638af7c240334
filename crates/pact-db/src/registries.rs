//! Trusted registries of personal agents and the hosts staff blocked (PACT
//! §3.1; issue 31). The list itself is verified in pact-jose
//! (`registry_list.rs`); what is stored here is what a verified list says,
//! applied in one transaction.

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct Registry {
    pub name: String,
    pub url: String,
    /// The pinned public JWKs.
    pub keys: serde_json::Value,
    pub refresh_seconds: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub next_fetch_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_fetched_at: Option<OffsetDateTime>,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub list_issued_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub list_expires_at: Option<OffsetDateTime>,
    pub listed: i32,
}

/// Adds a registry, due at once; `None` when the name is taken.
pub async fn insert(
    db: impl PgExecutor<'_>,
    name: &str,
    url: &str,
    keys: &serde_json::Value,
    refresh_seconds: i32,
    now: OffsetDateTime,
) -> DbResult<Option<Registry>> {
    sqlx::query_as!(
        Registry,
        "insert into agent_registries (name, url, keys, refresh_seconds, created_at, next_fetch_at) \
         values ($1, $2, $3, $4, $5, $5) on conflict (name) do nothing \
         returning name, url, keys, refresh_seconds, created_at, next_fetch_at, last_fetched_at, \
                   last_error, list_issued_at, list_expires_at, listed",
        name,
        url,
        keys,
        refresh_seconds,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<Registry>> {
    sqlx::query_as!(
        Registry,
        "select name, url, keys, refresh_seconds, created_at, next_fetch_at, last_fetched_at, \
                last_error, list_issued_at, list_expires_at, listed \
         from agent_registries order by name",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Claims the registries due at `now` (at most `limit`): each one's next
/// fetch moves a period ahead in the same statement, so two nodes never
/// fetch the same list for the same period.
pub async fn claim_due(
    db: impl PgExecutor<'_>,
    now: OffsetDateTime,
    limit: i64,
) -> DbResult<Vec<Registry>> {
    sqlx::query_as!(
        Registry,
        "update agent_registries r set next_fetch_at = $1::timestamptz + r.refresh_seconds * interval '1 second' \
         where r.name in (select name from agent_registries where next_fetch_at <= $1 \
                          order by next_fetch_at limit $2 for update skip locked) \
         returning r.name, r.url, r.keys, r.refresh_seconds, r.created_at, r.next_fetch_at, \
                   r.last_fetched_at, r.last_error, r.list_issued_at, r.list_expires_at, r.listed",
        now,
        limit,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Claims one registry now, whether due or not (staff asked for a refresh).
pub async fn claim(
    db: impl PgExecutor<'_>,
    name: &str,
    now: OffsetDateTime,
) -> DbResult<Option<Registry>> {
    sqlx::query_as!(
        Registry,
        "update agent_registries set next_fetch_at = $2::timestamptz + refresh_seconds * interval '1 second' \
         where name = $1 \
         returning name, url, keys, refresh_seconds, created_at, next_fetch_at, last_fetched_at, \
                   last_error, list_issued_at, list_expires_at, listed",
        name,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Notes a refused or unreachable list; nothing else changes.
pub async fn record_failure(
    db: impl PgExecutor<'_>,
    name: &str,
    error: &str,
    now: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "update agent_registries set last_fetched_at = $2, last_error = $3 where name = $1",
        name,
        now,
        error,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// One agent as a list names it.
#[derive(Clone, Debug)]
pub struct Listing<'a> {
    pub issuer: &'a str,
    pub jwks_uri: &'a str,
    pub name: &'a str,
    /// Shown on consent once fetched (the logo refresh of `agents.rs`).
    pub logo_uri: Option<&'a str>,
}

/// What applying a list changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Applied {
    /// Agents the list names that are now listed by this registry.
    pub listed: u64,
    /// Named but not taken: staff's own, another registry's, or on a blocked host.
    pub skipped: u64,
    /// Listed before and not any more (their grants were revoked).
    pub delisted: Vec<String>,
    pub revoked_grants: u64,
}

/// Why a verified list was not applied.
#[derive(Debug)]
pub enum ApplyError {
    /// The registry is gone.
    Missing,
    /// The list was issued before the one in force (a replayed older list).
    Rollback,
    Db(crate::Error),
}

impl From<sqlx::Error> for ApplyError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e.into())
    }
}

impl From<crate::Error> for ApplyError {
    fn from(e: crate::Error) -> Self {
        Self::Db(e)
    }
}

/// Applies a verified list, in the caller's transaction: refuses one older
/// than the list in force; lists the named agents (new ones, ones the `open`
/// policy let in, and this registry's own; never staff's, another
/// registry's, or one on a blocked host), refreshing their key URI, name and
/// listing expiry; ends the listing of those it no longer names, revoking
/// their grants with `revoke_reason`; and records the list as the one in force.
pub async fn apply_list(
    tx: &mut PgConnection,
    registry: &str,
    issued_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    agents: &[Listing<'_>],
    revoke_reason: &str,
    now: OffsetDateTime,
) -> Result<Applied, ApplyError> {
    let in_force = sqlx::query_scalar!(
        "select list_issued_at from agent_registries where name = $1 for update",
        registry,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(ApplyError::Missing)?;
    if in_force.is_some_and(|at| issued_at < at) {
        return Err(ApplyError::Rollback);
    }
    hold_blocks(&mut *tx).await?;
    let issuers: Vec<String> = agents.iter().map(|a| a.issuer.to_owned()).collect();
    let uris: Vec<String> = agents.iter().map(|a| a.jwks_uri.to_owned()).collect();
    let names: Vec<String> = agents.iter().map(|a| a.name.to_owned()).collect();
    let logos: Vec<Option<String>> = agents
        .iter()
        .map(|a| a.logo_uri.map(str::to_owned))
        .collect();
    let listed = sqlx::query!(
        "insert into agents (issuer, jwks_uri, name, logo_uri, verified, registry, listed_until, \
                             created_at, updated_at) \
         select t.issuer, t.jwks_uri, t.name, t.logo_uri, true, $4, $5, $6, $6 \
         from unnest($1::text[], $2::text[], $3::text[], $7::text[]) as t(issuer, jwks_uri, name, logo_uri) \
         where not pactd_host_blocked(pactd_issuer_host(t.issuer)) \
         on conflict (issuer) do update set jwks_uri = excluded.jwks_uri, name = excluded.name, \
             verified = true, registry = excluded.registry, listed_until = excluded.listed_until, \
             updated_at = excluded.updated_at, logo_uri = excluded.logo_uri, \
             logo_sha256 = case when agents.logo_uri is not distinct from excluded.logo_uri \
                                then agents.logo_sha256 end, \
             logo_fetched_at = case when agents.logo_uri is not distinct from excluded.logo_uri \
                                    then agents.logo_fetched_at end \
         where agents.registry = excluded.registry or (agents.registry is null and not agents.verified)",
        &issuers,
        &uris,
        &names,
        registry,
        expires_at,
        now,
        &logos as &[Option<String>],
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let delisted = sqlx::query_scalar!(
        "update agents set listed_until = $3, updated_at = $3 \
         where registry = $1 and listed_until > $3 and issuer <> all($2::text[]) returning issuer",
        registry,
        &issuers,
        now,
    )
    .fetch_all(&mut *tx)
    .await?;
    let revoked_grants = revoke_grants_of(&mut *tx, &delisted, revoke_reason).await?;
    sqlx::query!(
        "update agent_registries set list_issued_at = $2, list_expires_at = $3, listed = $4, \
         last_fetched_at = $5, last_error = null where name = $1",
        registry,
        issued_at,
        expires_at,
        i32::try_from(listed).unwrap_or(i32::MAX),
        now,
    )
    .execute(&mut *tx)
    .await?;
    Ok(Applied {
        listed,
        skipped: (agents.len() as u64).saturating_sub(listed),
        delisted,
        revoked_grants,
    })
}

async fn revoke_grants_of(
    tx: &mut PgConnection,
    issuers: &[String],
    reason: &str,
) -> DbResult<u64> {
    if issuers.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query!(
        "update grants set revoked_at = now(), revoked_reason = $2 \
         where pa_issuer = any($1::text[]) and revoked_at is null",
        issuers,
        reason,
    )
    .execute(tx)
    .await?;
    Ok(done.rows_affected())
}

/// Removes a registry, in the caller's transaction: its agents are no longer
/// listed (their rows stay, see the migration) and their grants are revoked.
/// `None` when there is no such registry; else the agents it had listed.
pub async fn remove(
    tx: &mut PgConnection,
    name: &str,
    revoke_reason: &str,
    now: OffsetDateTime,
) -> DbResult<Option<(Vec<String>, u64)>> {
    let gone = sqlx::query!("delete from agent_registries where name = $1", name)
        .execute(&mut *tx)
        .await?;
    if gone.rows_affected() == 0 {
        return Ok(None);
    }
    let unlisted = sqlx::query_scalar!(
        "update agents set listed_until = $2, updated_at = $2 \
         where registry = $1 and listed_until > $2 returning issuer",
        name,
        now,
    )
    .fetch_all(&mut *tx)
    .await?;
    let revoked = revoke_grants_of(&mut *tx, &unlisted, revoke_reason).await?;
    Ok(Some((unlisted, revoked)))
}

/// A host staff blocked.
#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct BlockedHost {
    pub host: String,
    pub reason: String,
    #[serde(with = "time::serde::rfc3339")]
    pub blocked_at: OffsetDateTime,
}

/// The advisory lock that orders host blocks against the statements that
/// store agents where a block would refuse them: an agent stored (open
/// admission, a registry's list) while a block of its host commits would
/// otherwise be read by neither (each statement sees only what committed
/// before it began) and stay enabled on a blocked host.
const BLOCKS_LOCK: i64 = 0x7061_6374_626c_6b73; // "pactblks"

/// Holds the host blocks still for the caller's transaction: a block under
/// way is waited for, and one that comes later waits for this transaction
/// (and then finds and disables what it stored).
pub async fn hold_blocks(tx: &mut PgConnection) -> DbResult<()> {
    sqlx::query!("select pg_advisory_xact_lock_shared($1)", BLOCKS_LOCK)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Blocks `host` (and every domain under it), in the caller's transaction:
/// the agents stored there are disabled and their grants revoked with
/// `revoke_reason`. Returns the issuers disabled and the grants revoked.
pub async fn block_host(
    tx: &mut PgConnection,
    host: &str,
    reason: &str,
    revoke_reason: &str,
    now: OffsetDateTime,
) -> DbResult<(Vec<String>, u64)> {
    // Alone: agents being stored meanwhile are waited for (`hold_blocks`).
    sqlx::query!("select pg_advisory_xact_lock($1)", BLOCKS_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::query!(
        "insert into blocked_hosts (host, reason, blocked_at) values ($1, $2, $3) \
         on conflict (host) do update set reason = excluded.reason",
        host,
        reason,
        now,
    )
    .execute(&mut *tx)
    .await?;
    let disabled = sqlx::query_scalar!(
        "update agents set enabled = false, updated_at = $2 \
         where enabled and pactd_host_blocked(pactd_issuer_host(issuer)) \
           and (pactd_issuer_host(issuer) = $1 or pactd_issuer_host(issuer) like '%.' || $1) \
         returning issuer",
        host,
        now,
    )
    .fetch_all(&mut *tx)
    .await?;
    let revoked = revoke_grants_of(&mut *tx, &disabled, revoke_reason).await?;
    Ok((disabled, revoked))
}

/// Lifts a block; the agents it disabled stay disabled (staff enable each).
pub async fn unblock_host(db: impl PgExecutor<'_>, host: &str) -> DbResult<bool> {
    let done = sqlx::query!("delete from blocked_hosts where host = $1", host)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn blocked_hosts(db: impl PgExecutor<'_>) -> DbResult<Vec<BlockedHost>> {
    sqlx::query_as!(
        BlockedHost,
        "select host, reason, blocked_at from blocked_hosts order by host",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}
