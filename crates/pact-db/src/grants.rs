//! Grants (PACT §5) and their refresh tokens.

use crate::ids::{AgentIssuer, BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::ids::GrantId;

use crate::DbResult;
use crate::parties::Connection;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Grant {
    pub id: GrantId,
    pub brand_id: BrandId,
    pub pa_issuer: AgentIssuer,
    pub user_sub: UserSub,
    pub scopes: Vec<String>,
    pub authorization_details: Option<serde_json::Value>,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
    pub revoked_reason: Option<String>,
    /// What the grant was approved under (pact-server `domain::terms`);
    /// `None` on a grant made before it was recorded.
    pub terms: Option<serde_json::Value>,
}

impl Grant {
    /// Usable now: neither revoked nor expired.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        active(self.revoked_at, self.expires_at, now)
    }
}

/// The one rule for both views of a grant: neither revoked nor expired at `now`.
fn active(
    revoked_at: Option<OffsetDateTime>,
    expires_at: OffsetDateTime,
    now: OffsetDateTime,
) -> bool {
    revoked_at.is_none() && expires_at > now
}

#[derive(Clone, Debug)]
pub struct NewGrant<'a> {
    pub id: GrantId,
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub user_sub: &'a UserSub,
    pub scopes: &'a [String],
    pub authorization_details: Option<&'a serde_json::Value>,
    pub terms: &'a serde_json::Value,
    pub expires_at: OffsetDateTime,
}

pub async fn insert(db: impl PgExecutor<'_>, g: NewGrant<'_>) -> DbResult<Grant> {
    sqlx::query_as!(
        Grant,
        "insert into grants (id, brand_id, pa_issuer, user_sub, scopes, authorization_details, expires_at, terms) \
         values ($1, $2, $3, $4, $5, $6, $7, $8) returning id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                    expires_at, last_used_at, revoked_at, revoked_reason, terms",
        g.id.as_uuid(),
        g.brand_id,
        g.pa_issuer,
        g.user_sub,
        g.scopes,
        g.authorization_details,
        g.expires_at,
        g.terms,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn find(db: impl PgExecutor<'_>, id: GrantId) -> DbResult<Option<Grant>> {
    sqlx::query_as!(
        Grant,
        "select id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                    expires_at, last_used_at, revoked_at, revoked_reason, terms from grants where id = $1",
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// What a delegated turn checks of its grant before it runs (PACT §5.5
/// step 2), read together with the head of the grant's receipt chain so that
/// the turn's receipt needs no read of its own when nothing else of the grant
/// was stored meanwhile (the chain's unique position catches that case).
#[derive(Clone, Debug)]
pub struct TurnGrant {
    pub brand_id: BrandId,
    pub pa_issuer: AgentIssuer,
    pub user_sub: UserSub,
    pub scopes: Vec<String>,
    pub expires_at: OffsetDateTime,
    pub revoked_at: Option<OffsetDateTime>,
    pub authorization_details: Option<serde_json::Value>,
    pub terms: Option<serde_json::Value>,
    pub head: Option<crate::receipts::ChainHead>,
}

impl TurnGrant {
    /// Usable now: neither revoked nor expired.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        active(self.revoked_at, self.expires_at, now)
    }
}

/// A [`TurnGrant`] from a query row holding the grant's columns and its
/// chain head as `head_seq` and `head_jws` ([`for_turn`], and the delegated
/// first message's claim, `conversations::claim_first_turn_with_grant`): each
/// `query!` has a record type of its own, so the mapping is written once here.
macro_rules! turn_grant_of_row {
    ($r:expr) => {{
        let r = $r;
        $crate::grants::TurnGrant {
            brand_id: r.brand_id.into(),
            pa_issuer: r.pa_issuer.into(),
            user_sub: r.user_sub.into(),
            scopes: r.scopes,
            expires_at: r.expires_at,
            revoked_at: r.revoked_at,
            authorization_details: r.authorization_details,
            terms: r.terms,
            head: r
                .head_seq
                .zip(r.head_jws)
                .map(|(seq, jws)| $crate::receipts::ChainHead { seq, jws }),
        }
    }};
}
pub(crate) use turn_grant_of_row;

/// The grant and its chain head in one round trip (`receipts (grant_id, seq)`
/// is unique, so the head is one index probe).
pub async fn for_turn(db: impl PgExecutor<'_>, id: GrantId) -> DbResult<Option<TurnGrant>> {
    let row = sqlx::query!(
        r#"select g.brand_id, g.pa_issuer, g.user_sub, g.scopes, g.expires_at, g.revoked_at,
                  g.authorization_details, g.terms,
                  h.seq as "head_seq?", h.jws as "head_jws?"
           from grants g
           left join lateral (select seq, jws from receipts r
                              where r.grant_id = g.id order by seq desc limit 1) h on true
           where g.id = $1"#,
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| turn_grant_of_row!(r)))
}

/// Records the terms of a grant made before they were recorded, once: a
/// concurrent first use that recorded them already wins. Returns the terms
/// the grant holds now.
pub async fn record_terms(
    db: impl PgExecutor<'_>,
    id: GrantId,
    terms: &serde_json::Value,
) -> DbResult<Option<serde_json::Value>> {
    sqlx::query_scalar!(
        "with set as (update grants set terms = $2 where id = $1 and terms is null returning terms) \
         select coalesce((select terms from set), (select terms from grants where id = $1))",
        id.as_uuid(),
        terms,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Adds an operation the person approved on its own (PACT §5.5 step-up
/// beyond a limit) to every live grant of that person for that platform at
/// that brand that holds its scope and has its terms recorded. Returns the
/// grants it was added to.
pub async fn add_operation(
    db: impl PgExecutor<'_>,
    connection: Connection<'_>,
    scope: &str,
    operation: &serde_json::Value,
    now: OffsetDateTime,
) -> DbResult<Vec<GrantId>> {
    let Connection {
        brand_id,
        pa_issuer,
        user_sub,
    } = connection;
    sqlx::query_scalar!(
        "update grants set terms = jsonb_set(terms, '{operations}', \
                coalesce(terms -> 'operations', '[]'::jsonb) || jsonb_build_array($5::jsonb)) \
         where brand_id = $1 and pa_issuer = $2 and user_sub = $3 and $4 = any(scopes) \
           and revoked_at is null and expires_at > $6 and terms is not null \
         returning id",
        brand_id,
        pa_issuer,
        user_sub,
        scope,
        operation,
        now,
    )
    .fetch_all(db)
    .await
    .map(ids)
    .map_err(Into::into)
}

/// Locks the grant row: receipts of one grant are chained, so turns under one
/// grant append in order. `for no key update`, the lock an UPDATE of
/// non-key columns takes: it keeps other lockers out but not the foreign-key
/// checks (`for key share`) of rows that reference the grant, so a turn that
/// appends its receipt without this lock never waits for one that holds it
/// (with `for update` they could deadlock, see `conversations`).
pub async fn lock(db: impl PgExecutor<'_>, id: GrantId) -> DbResult<Option<Grant>> {
    sqlx::query_as!(
        Grant,
        "select id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                    expires_at, last_used_at, revoked_at, revoked_reason, terms from grants where id = $1 \
                    for no key update",
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// The live grants of one user for one PA at one brand, newest first.
pub async fn active_for(
    db: impl PgExecutor<'_>,
    connection: Connection<'_>,
    now: OffsetDateTime,
) -> DbResult<Vec<Grant>> {
    let Connection {
        brand_id,
        pa_issuer,
        user_sub,
    } = connection;
    sqlx::query_as!(
        Grant,
        "select id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                    expires_at, last_used_at, revoked_at, revoked_reason, terms from grants where brand_id = $1 and pa_issuer = $2 and user_sub = $3 \
         and revoked_at is null and expires_at > $4 order by created_at desc",
        brand_id,
        pa_issuer,
        user_sub,
        now,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

#[derive(Clone, Debug, Default)]
pub struct GrantFilter<'a> {
    pub brand_id: Option<&'a str>,
    pub user_sub: Option<&'a UserSub>,
    pub pa_issuer: Option<&'a AgentIssuer>,
}

pub async fn list(db: impl PgExecutor<'_>, f: GrantFilter<'_>) -> DbResult<Vec<Grant>> {
    sqlx::query_as!(
        Grant,
        "select id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                    expires_at, last_used_at, revoked_at, revoked_reason, terms from grants where ($1::text is null or brand_id = $1) \
         and ($2::text is null or user_sub = $2) and ($3::text is null or pa_issuer = $3) \
         order by created_at desc",
        f.brand_id,
        f.user_sub.map(UserSub::as_str),
        f.pa_issuer.map(AgentIssuer::as_str),
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Why a grant was revoked, as stored in `revoked_reason`. The account page
/// reads these back to say who ended the access, so writers use these and
/// nothing else.
pub mod reason {
    pub const BY_USER: &str = "revoked by the user on the account page";
    pub const BY_AGENT: &str = "revoked by the personal agent";
    pub const TOKEN_REUSE: &str = "refresh token reuse";
    pub const SUPERSEDED: &str = "superseded by a wider grant";
    pub const ACCOUNT_DELETED: &str = "the person deleted their account";
    /// The brand's OpenID provider or the claim that names people changed,
    /// or the brand left that sign-in ([`super::revoke_external_names`]).
    pub const SIGN_IN_CHANGED: &str =
        "the brand's sign-in changed: the name the grant was given to means nothing now";
    /// Staff revocations start with this; `: <why>` may follow.
    pub const BY_ADMIN: &str = "revoked by an administrator";

    /// `BY_ADMIN` with the reason the staff gave.
    pub fn by_admin(why: &str) -> String {
        format!("{BY_ADMIN}: {why}")
    }
}

/// Revokes one grant; false when it was unknown or already revoked. The table
/// trigger announces it on `pactd_revocations`.
pub async fn revoke(db: impl PgExecutor<'_>, id: GrantId, reason: &str) -> DbResult<bool> {
    let done = sqlx::query!(
        "update grants set revoked_at = now(), revoked_reason = $2 where id = $1 and revoked_at is null",
        id.as_uuid(),
        reason,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Revokes the live grants at `brand_id` of people named by the brand's
/// external sign-in (an OpenID provider's claim, or the brand's own login):
/// those whose user id is no account of the brand's (an account is named by
/// `users::User::subject`). When the provider or the naming claim changes, a
/// name the old one gave means nothing any more, and the new one may give it
/// to someone else, who would then hold the grant (and see its receipts on
/// the account page). Each revocation is announced by the table's trigger,
/// as one revoked alone is. Returns how many.
pub async fn revoke_external_names(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<u64> {
    let done = sqlx::query!(
        "update grants g set revoked_at = now(), revoked_reason = $2 \
         where g.brand_id = $1 and g.revoked_at is null \
         and not exists (select 1 from users u where u.brand_id = $1 \
                         and coalesce(u.external_id, u.id::text) = g.user_sub)",
        brand_id,
        reason::SIGN_IN_CHANGED,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Revokes the live grants of the same (brand, PA, user) created before `newer`.
pub async fn supersede_older(db: impl PgExecutor<'_>, newer: &Grant) -> DbResult<u64> {
    let done = sqlx::query!(
        "update grants set revoked_at = now(), revoked_reason = $6 \
         where brand_id = $1 and pa_issuer = $2 and user_sub = $3 and id <> $4 \
         and created_at <= $5 and revoked_at is null",
        &newer.brand_id,
        &newer.pa_issuer,
        &newer.user_sub,
        newer.id.as_uuid(),
        newer.created_at,
        reason::SUPERSEDED,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Revokes every live grant one person gave one agent at one brand (what the
/// account page shows as one connection); returns their ids.
pub async fn revoke_connection(
    db: impl PgExecutor<'_>,
    connection: Connection<'_>,
    reason: &str,
) -> DbResult<Vec<GrantId>> {
    let Connection {
        brand_id,
        pa_issuer,
        user_sub,
    } = connection;
    sqlx::query_scalar!(
        "update grants set revoked_at = now(), revoked_reason = $4 \
         where brand_id = $1 and pa_issuer = $2 and user_sub = $3 and revoked_at is null returning id",
        brand_id,
        pa_issuer,
        user_sub,
        reason,
    )
    .fetch_all(db)
    .await
    .map(ids)
    .map_err(Into::into)
}

/// Revokes every live grant of one person at a brand (their account was
/// disabled or removed); returns their ids. The table trigger announces each
/// on `pactd_revocations`, so every node refuses them at once.
pub async fn revoke_all_for_user(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    reason: &str,
) -> DbResult<Vec<GrantId>> {
    sqlx::query_scalar!(
        "update grants set revoked_at = now(), revoked_reason = $3 \
         where brand_id = $1 and user_sub = $2 and revoked_at is null returning id",
        brand_id,
        user_sub,
        reason,
    )
    .fetch_all(db)
    .await
    .map(ids)
    .map_err(Into::into)
}

/// Revokes every live grant of a PA (when the PA is disabled).
pub async fn revoke_all_for_agent(
    db: impl PgExecutor<'_>,
    pa_issuer: &str,
    reason: &str,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "update grants set revoked_at = now(), revoked_reason = $2 where pa_issuer = $1 and revoked_at is null",
        pa_issuer,
        reason,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Revoked grant ids whose tokens may still be unexpired (for a node's revocation view).
pub async fn recently_revoked(
    db: impl PgExecutor<'_>,
    since: OffsetDateTime,
) -> DbResult<Vec<GrantId>> {
    sqlx::query_scalar!(
        "select id from grants where revoked_at is not null and revoked_at > $1",
        since,
    )
    .fetch_all(db)
    .await
    .map(ids)
    .map_err(Into::into)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RefreshToken {
    pub token_hash: Vec<u8>,
    pub grant_id: GrantId,
    pub expires_at: OffsetDateTime,
    pub used_at: Option<OffsetDateTime>,
}

pub async fn insert_refresh_token(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
    grant_id: GrantId,
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into refresh_tokens (token_hash, grant_id, expires_at) values ($1, $2, $3)",
        token_hash,
        grant_id.as_uuid(),
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Locks a refresh token row so two concurrent uses serialise: one wins, the
/// other sees `used_at` and is treated as reuse.
pub async fn lock_refresh_token(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
) -> DbResult<Option<RefreshToken>> {
    sqlx::query_as!(
        RefreshToken,
        "select token_hash, grant_id, expires_at, used_at from refresh_tokens where token_hash = $1 for update",
        token_hash,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn mark_refresh_token_used(db: impl PgExecutor<'_>, token_hash: &[u8]) -> DbResult<()> {
    sqlx::query!(
        "update refresh_tokens set used_at = now() where token_hash = $1",
        token_hash,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn find_refresh_token(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
) -> DbResult<Option<RefreshToken>> {
    sqlx::query_as!(
        RefreshToken,
        "select token_hash, grant_id, expires_at, used_at from refresh_tokens where token_hash = $1",
        token_hash,
    )
        .fetch_optional(db)
        .await
    .map_err(Into::into)
}

/// Grant ids as a statement returns them (`returning id`).
fn ids(ids: Vec<Uuid>) -> Vec<GrantId> {
    ids.into_iter().map(GrantId::from).collect()
}
