//! Registered personal-agent platforms (PACT §3: issuer, jwksUri, enabled).

use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;

use crate::DbResult;
use crate::ids::AgentIssuer;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Agent {
    pub issuer: AgentIssuer,
    pub jwks_uri: String,
    pub name: String,
    pub enabled: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    /// This agent's own rate limits (requests per second and burst), when the
    /// node's defaults do not fit it; `None` keeps the defaults.
    pub pa_rate: Option<f64>,
    pub pa_burst: Option<f64>,
    pub user_rate: Option<f64>,
    pub user_burst: Option<f64>,
    /// Registered by staff, or verified by them after open admission (PACT
    /// §3.1); `false` for an agent the `open` policy let in by itself.
    pub verified: bool,
    /// The trusted registry that listed it (PACT §3.1's trusted-issuer
    /// registry), and until when: the expiry of the list in force. `None`
    /// for an agent staff registered or the `open` policy let in.
    pub registry: Option<String>,
    pub listed_until: Option<OffsetDateTime>,
}

/// A rate and its burst, as stored on the agent (`None` = the node's default).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AgentLimit {
    pub rate: f64,
    pub burst: f64,
}

impl Agent {
    /// The agent's own platform-wide limit, when it has one.
    pub fn pa_limit(&self) -> Option<AgentLimit> {
        Some(AgentLimit {
            rate: self.pa_rate?,
            burst: self.pa_burst?,
        })
    }

    /// The agent's own per-user limit, when it has one.
    pub fn user_limit(&self) -> Option<AgentLimit> {
        Some(AgentLimit {
            rate: self.user_rate?,
            burst: self.user_burst?,
        })
    }
}

/// Sets (or, with `None`, clears) an agent's own limits; false when the issuer is unknown.
pub async fn set_limits(
    db: impl PgExecutor<'_>,
    issuer: &str,
    pa: Option<AgentLimit>,
    user: Option<AgentLimit>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update agents set pa_rate = $2, pa_burst = $3, user_rate = $4, user_burst = $5, \
         updated_at = now() where issuer = $1",
        issuer,
        pa.map(|l| l.rate),
        pa.map(|l| l.burst),
        user.map(|l| l.rate),
        user.map(|l| l.burst),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Registers a PA, or updates its JWKS URI and name when the issuer is known
/// (re-registering is how an operator moves a PA to a new JWKS URI). Staff
/// registering an agent admitted under `open` verifies it, and one a registry
/// listed becomes staff's own (the registry no longer decides for it).
pub async fn upsert(
    db: impl PgExecutor<'_>,
    issuer: &str,
    jwks_uri: &str,
    name: &str,
) -> DbResult<Agent> {
    sqlx::query_as!(
        Agent,
        "insert into agents (issuer, jwks_uri, name) values ($1, $2, $3) \
         on conflict (issuer) do update set jwks_uri = excluded.jwks_uri, name = excluded.name, \
         verified = true, registry = null, listed_until = null, updated_at = now() \
         returning issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, user_rate, user_burst, verified, registry, listed_until",
        issuer,
        jwks_uri,
        name,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn find(db: impl PgExecutor<'_>, issuer: &str) -> DbResult<Option<Agent>> {
    sqlx::query_as!(
        Agent,
        "select issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, user_rate, user_burst, verified, registry, listed_until from agents where issuer = $1",
        issuer,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// The agent as it is now, its row held (`for share`) until the transaction
/// ends: a consent that grants to it waits for a disable (or a block) under
/// way, and a disable waits for the consent, whose grant it then revokes.
pub async fn find_held(db: impl PgExecutor<'_>, issuer: &str) -> DbResult<Option<Agent>> {
    sqlx::query_as!(
        Agent,
        "select issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, user_rate, user_burst, verified, registry, listed_until from agents where issuer = $1 for share",
        issuer,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn list(db: impl PgExecutor<'_>) -> DbResult<Vec<Agent>> {
    sqlx::query_as!(
        Agent,
        "select issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, user_rate, user_burst, verified, registry, listed_until from agents order by issuer",
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Enables or disables a PA; false when the issuer is unknown. The table
/// trigger announces the change so every node drops its cached view at once.
pub async fn set_enabled(db: impl PgExecutor<'_>, issuer: &str, enabled: bool) -> DbResult<bool> {
    let done = sqlx::query!(
        "update agents set enabled = $2, updated_at = now() where issuer = $1",
        issuer,
        enabled,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The registered PA and the addressed brand, fetched together in one round
/// trip because every authenticated A2A request needs both. The caller still
/// decides in protocol order: 401 for the PA first, 404 for the brand after.
#[derive(Clone, Debug, Default)]
pub struct AgentAndBrand {
    pub agent: Option<Agent>,
    pub brand: Option<crate::brands::Brand>,
}

#[derive(sqlx::FromRow)]
struct AgentAndBrandRow {
    issuer: Option<String>,
    jwks_uri: Option<String>,
    agent_name: Option<String>,
    enabled: Option<bool>,
    agent_created_at: Option<OffsetDateTime>,
    agent_updated_at: Option<OffsetDateTime>,
    pa_rate: Option<f64>,
    pa_burst: Option<f64>,
    user_rate: Option<f64>,
    user_burst: Option<f64>,
    verified: Option<bool>,
    registry: Option<String>,
    listed_until: Option<OffsetDateTime>,
    brand_id: Option<String>,
    brand_name: Option<String>,
    description: Option<String>,
    agent_kind: Option<String>,
    settings: Option<serde_json::Value>,
    brand_created_at: Option<OffsetDateTime>,
}

/// The agent `issuer` and the brand named `brand_id` in a request's path,
/// unchecked: a text that is no brand id finds no brand.
pub async fn find_with_brand(
    db: impl PgExecutor<'_>,
    issuer: &str,
    brand_id: &str,
) -> DbResult<AgentAndBrand> {
    let row: AgentAndBrandRow = sqlx::query_as!(
        AgentAndBrandRow,
        "select a.issuer, a.jwks_uri, a.name as agent_name, a.enabled, \
                a.created_at as agent_created_at, a.updated_at as agent_updated_at, \
                a.pa_rate, a.pa_burst, a.user_rate, a.user_burst, a.verified, a.registry, \
                a.listed_until, \
                b.id as brand_id, b.name as brand_name, b.description, b.agent_kind, b.settings, \
                b.created_at as brand_created_at \
         from (select 1) as one \
         left join agents a on a.issuer = $1 \
         left join brands b on b.id = $2",
        issuer,
        brand_id,
    )
    .fetch_one(db)
    .await?;
    let agent = match (
        row.issuer,
        row.jwks_uri,
        row.agent_name,
        row.enabled,
        row.agent_created_at,
        row.agent_updated_at,
        row.verified,
    ) {
        (
            Some(issuer),
            Some(jwks_uri),
            Some(name),
            Some(enabled),
            Some(created_at),
            Some(updated_at),
            Some(verified),
        ) => Some(Agent {
            issuer: issuer.into(),
            jwks_uri,
            name,
            enabled,
            created_at,
            updated_at,
            pa_rate: row.pa_rate,
            pa_burst: row.pa_burst,
            user_rate: row.user_rate,
            user_burst: row.user_burst,
            verified,
            registry: row.registry,
            listed_until: row.listed_until,
        }),
        _ => None,
    };
    let brand = match (
        row.brand_id,
        row.brand_name,
        row.description,
        row.agent_kind,
        row.settings,
        row.brand_created_at,
    ) {
        (
            Some(id),
            Some(name),
            Some(description),
            Some(agent_kind),
            Some(settings),
            Some(created_at),
        ) => Some(crate::brands::Brand {
            id: id.into(),
            name,
            description,
            agent_kind,
            settings,
            created_at,
        }),
        _ => None,
    };
    Ok(AgentAndBrand { agent, brand })
}

/// What the consent page shows about a platform besides its name (RFC 7591
/// §2 client metadata: `client_uri`, `logo_uri`, `policy_uri`, `tos_uri`).
#[derive(Clone, Debug, Default, sqlx::FromRow)]
pub struct AgentMetadata {
    pub homepage_uri: Option<String>,
    pub logo_uri: Option<String>,
    pub policy_uri: Option<String>,
    pub tos_uri: Option<String>,
    /// The stored copy of the logo (`logos.sha256`), when one was accepted.
    pub logo_sha256: Option<String>,
    pub logo_fetched_at: Option<OffsetDateTime>,
}

pub async fn metadata(db: impl PgExecutor<'_>, issuer: &str) -> DbResult<Option<AgentMetadata>> {
    sqlx::query_as!(
        AgentMetadata,
        "select homepage_uri, logo_uri, policy_uri, tos_uri, logo_sha256, logo_fetched_at \
         from agents where issuer = $1",
        issuer,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Sets the platform's links. A changed `logo_uri` forgets the stored logo
/// (it belonged to the old URI); `logo` is the copy just fetched from the new
/// one, if any. False when the issuer is unknown.
pub async fn set_metadata(
    db: impl PgExecutor<'_>,
    issuer: &str,
    m: &AgentMetadata,
    fetched_at: Option<OffsetDateTime>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update agents set homepage_uri = $2, logo_uri = $3, policy_uri = $4, tos_uri = $5, \
         logo_sha256 = $6, logo_fetched_at = $7, updated_at = now() where issuer = $1",
        issuer,
        m.homepage_uri,
        m.logo_uri,
        m.policy_uri,
        m.tos_uri,
        m.logo_sha256,
        fetched_at,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Claims the refresh of a platform's logo when its last attempt is older
/// than `stale_before` (or there was none): returns the `logo_uri` to fetch.
/// The conditional update makes one node, one request, do each refresh.
pub async fn claim_logo_refresh(
    db: impl PgExecutor<'_>,
    issuer: &str,
    now: OffsetDateTime,
    stale_before: OffsetDateTime,
) -> DbResult<Option<String>> {
    sqlx::query_scalar!(
        "update agents set logo_fetched_at = $2 where issuer = $1 and logo_uri is not null \
         and (logo_fetched_at is null or logo_fetched_at < $3) returning logo_uri as \"logo_uri!\"",
        issuer,
        now,
        stale_before,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Stores a refreshed logo, unless `logo_uri` changed meanwhile.
pub async fn set_logo(
    db: impl PgExecutor<'_>,
    issuer: &str,
    logo_uri: &str,
    sha256: &str,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update agents set logo_sha256 = $3 where issuer = $1 and logo_uri = $2 \
         and logo_sha256 is distinct from $3",
        issuer,
        logo_uri,
        sha256,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// What an agent admitted under `open` claims of itself (its discovery
/// document's `client_name` and `logo_uri`), for staff.
#[derive(Clone, Copy, Debug, Default)]
pub struct Claimed<'a> {
    pub name: Option<&'a str>,
    pub logo_uri: Option<&'a str>,
}

/// Stores an agent the `open` policy admitted (PACT §3.1), unverified, once
/// its PA-JWT verified; nothing is stored for an issuer before that. Another
/// node (or staff) may have stored it meanwhile: then the stored row is
/// returned as it is. With it, the first sighting. `None` when the issuer's
/// host is blocked (checked in the same statement, so a block committed
/// after the caller's own check still holds).
pub async fn insert_admitted(
    db: impl PgExecutor<'_>,
    issuer: &str,
    jwks_uri: &str,
    name: &str,
    claimed: Claimed<'_>,
    now: OffsetDateTime,
) -> DbResult<Option<Agent>> {
    sqlx::query_as!(
        Agent,
        "with new as (insert into agents (issuer, jwks_uri, name, verified, created_at, updated_at) \
             select $1, $2, $3, false, $4, $4 where not pactd_host_blocked(pactd_issuer_host($1)) \
             on conflict (issuer) do nothing \
             returning issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, \
             user_rate, user_burst, verified, registry, listed_until), \
         seen as (insert into agent_sightings (issuer, first_seen_at, last_seen_at, requests, \
                                                claimed_name, claimed_logo_uri) \
             select issuer, $4, $4, 1, $5, $6 from new) \
         select issuer as \"issuer!\", jwks_uri as \"jwks_uri!\", name as \"name!\", \
                enabled as \"enabled!\", created_at as \"created_at!\", updated_at as \"updated_at!\", \
                pa_rate, pa_burst, user_rate, user_burst, verified as \"verified!\", registry, \
                listed_until from new \
         union all \
         select issuer, jwks_uri, name, enabled, created_at, updated_at, pa_rate, pa_burst, \
                user_rate, user_burst, verified, registry, listed_until from agents \
         where issuer = $1 and not exists (select 1 from new)",
        issuer,
        jwks_uri,
        name,
        now,
        claimed.name,
        claimed.logo_uri,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Forgets the unverified agents beyond the `keep` most recently seen (with
/// their conversations and grants, by the tables' cascade): the bound on what
/// open admission can make the database hold. Blocked (disabled) agents are
/// kept whatever their number, so a block is never forgotten; so are agents
/// a person approved: those with a grant not revoked (a flood of admissions
/// must not take away what someone allowed and has not used yet), and those
/// with receipts, which are append-only and refer to their grants. Such an
/// agent is forgotten only by staff. The JWKS URIs of those that went, for
/// the node's JWKS cache to forget too.
pub async fn prune_unverified(db: impl PgExecutor<'_>, keep: i64) -> DbResult<Vec<String>> {
    sqlx::query_scalar!(
        "delete from agents where issuer in ( \
             select a.issuer from agents a left join agent_sightings s on s.issuer = a.issuer \
             where not a.verified and a.enabled and a.registry is null \
               and not exists (select 1 from grants g where g.pa_issuer = a.issuer \
                               and (g.revoked_at is null \
                                    or exists (select 1 from receipts r where r.grant_id = g.id))) \
             order by coalesce(s.last_seen_at, a.created_at) desc offset $1) \
         returning jwks_uri",
        keep,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Adds requests seen since the last write to an unverified agent's sighting.
pub async fn record_sighting(
    db: impl PgExecutor<'_>,
    issuer: &str,
    requests: i64,
    now: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into agent_sightings (issuer, first_seen_at, last_seen_at, requests) \
         select issuer, $3, $3, $2 from agents where issuer = $1 \
         on conflict (issuer) do update set requests = agent_sightings.requests + excluded.requests, \
         last_seen_at = greatest(agent_sightings.last_seen_at, excluded.last_seen_at)",
        issuer,
        requests,
        now,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// An agent admitted under `open`, as staff see it (issue 31: who knocks).
#[derive(Clone, Debug, sqlx::FromRow, serde::Serialize)]
pub struct Sighting {
    pub issuer: AgentIssuer,
    pub name: String,
    pub jwks_uri: String,
    pub verified: bool,
    pub enabled: bool,
    #[serde(with = "time::serde::rfc3339")]
    pub first_seen_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub last_seen_at: OffsetDateTime,
    pub requests: i64,
    pub grants: i64,
    /// What it claims to be called and its logo's URL (not fetched).
    pub claimed_name: Option<String>,
    pub claimed_logo_uri: Option<String>,
}

/// The agents seen under `open` (those with a sighting), most recent first,
/// with their live grants (not revoked, not expired at `now`) at the brands
/// in `within` (`None`: every brand): staff limited to some brands learn
/// nothing of the others, not even a count.
pub async fn sightings(
    db: impl PgExecutor<'_>,
    limit: i64,
    within: Option<&[String]>,
    now: OffsetDateTime,
) -> DbResult<Vec<Sighting>> {
    sqlx::query_as!(
        Sighting,
        "select a.issuer, a.name, a.jwks_uri, a.verified, a.enabled, s.first_seen_at, s.last_seen_at, \
                s.requests, (select count(*) from grants g where g.pa_issuer = a.issuer \
                             and g.revoked_at is null and g.expires_at > $3 \
                             and ($2::text[] is null or g.brand_id = any($2))) as \"grants!\", \
                s.claimed_name, s.claimed_logo_uri \
         from agent_sightings s join agents a on a.issuer = s.issuer \
         order by s.last_seen_at desc limit $1",
        limit,
        within,
        now,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Staff verify an agent admitted under `open`; false when the issuer is unknown.
pub async fn set_verified(db: impl PgExecutor<'_>, issuer: &str) -> DbResult<bool> {
    let done = sqlx::query!(
        "update agents set verified = true, updated_at = now() where issuer = $1",
        issuer,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// What [`forget_unverified`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forgot {
    Done,
    /// No unverified agent of that issuer outside a registry's list.
    Missing,
    /// Its grants have receipts: they are append-only and refer to their
    /// grants (PACT §5.6), so the agent stays; staff disable it instead.
    HasReceipts,
}

/// Staff forget an unverified agent (its conversations and grants go with it,
/// by the cascade). A verified one is not forgotten this way (staff disable
/// it), nor one whose grants have receipts.
pub async fn forget_unverified(conn: &mut PgConnection, issuer: &str) -> DbResult<Forgot> {
    let done = sqlx::query!(
        "delete from agents a where a.issuer = $1 and not a.verified and a.registry is null \
           and not exists (select 1 from grants g join receipts r on r.grant_id = g.id \
                           where g.pa_issuer = a.issuer)",
        issuer,
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        return Ok(Forgot::Done);
    }
    let held = sqlx::query_scalar!(
        "select exists (select 1 from agents where issuer = $1 and not verified \
                        and registry is null) as \"held!\"",
        issuer,
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(if held {
        Forgot::HasReceipts
    } else {
        Forgot::Missing
    })
}
