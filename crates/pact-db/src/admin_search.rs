//! Read queries of the admin console and API: grant search with keyset
//! pagination, counts for the overview, customer look-up. Every query takes
//! the caller's brand limit, so rows outside it are never read.

use crate::ids::{BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::grants::{Grant, reason};
use crate::users::User;

/// A grant's state at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantState {
    Active,
    Revoked,
    /// Ended by a newer grant of the same person to the same agent (a
    /// step-up's union of scopes): not anyone's decision to cut access.
    Superseded,
    Expired,
}

impl GrantState {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "revoked" => Some(Self::Revoked),
            "superseded" => Some(Self::Superseded),
            "expired" => Some(Self::Expired),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Revoked => "revoked",
            Self::Superseded => "superseded",
            Self::Expired => "expired",
        }
    }

    pub fn of(g: &Grant, now: OffsetDateTime) -> Self {
        match (&g.revoked_at, g.expires_at <= now) {
            (Some(_), _) if g.revoked_reason.as_deref() == Some(reason::SUPERSEDED) => {
                Self::Superseded
            }
            (Some(_), _) => Self::Revoked,
            (None, true) => Self::Expired,
            (None, false) => Self::Active,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct GrantSearch<'a> {
    /// The caller's brand limit; `None`: every brand.
    pub within: Option<&'a [String]>,
    pub brand_id: Option<&'a str>,
    /// Grants to these user subjects (resolved from an email or id).
    pub user_subs: Option<&'a [String]>,
    pub pa_issuer: Option<&'a str>,
    pub state: Option<GrantState>,
    /// Keyset cursor: grants strictly after this (created_at, id) in
    /// newest-first order.
    pub after: Option<(OffsetDateTime, crate::ids::GrantId)>,
    pub limit: i64,
}

/// Newest first; `limit` rows at most.
pub async fn grants(
    db: impl PgExecutor<'_>,
    s: &GrantSearch<'_>,
    now: OffsetDateTime,
) -> DbResult<Vec<Grant>> {
    let (after_at, after_id) = s.after.unzip();
    sqlx::query_as!(
        Grant,
        "select id, brand_id, pa_issuer, user_sub, scopes, authorization_details, created_at, \
                          expires_at, last_used_at, revoked_at, revoked_reason, terms from grants \
         where ($1::text[] is null or brand_id = any($1)) and ($2::text is null or brand_id = $2) \
         and ($3::text[] is null or user_sub = any($3)) and ($4::text is null or pa_issuer = $4) \
         and ($5::text is null \
              or ($5 = 'active' and revoked_at is null and expires_at > $6) \
              or ($5 = 'revoked' and revoked_at is not null and revoked_reason is distinct from $10) \
              or ($5 = 'superseded' and revoked_at is not null and revoked_reason = $10) \
              or ($5 = 'expired' and revoked_at is null and expires_at <= $6)) \
         and ($7::timestamptz is null or (created_at, id) < ($7, $8)) \
         order by created_at desc, id desc limit $9",
        s.within,
        s.brand_id,
        s.user_subs,
        s.pa_issuer,
        s.state.map(GrantState::as_str),
        now,
        after_at,
        after_id.map(crate::ids::GrantId::as_uuid),
        s.limit,
        reason::SUPERSEDED,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// The live grants of one agent within the caller's brands, and how many
/// distinct people gave them (what disabling the agent would affect).
pub async fn active_for_agent(
    db: impl PgExecutor<'_>,
    within: Option<&[String]>,
    pa_issuer: &str,
    now: OffsetDateTime,
) -> DbResult<(i64, i64)> {
    let r = sqlx::query!(
        "select count(*) as \"grants!\", count(distinct (brand_id, user_sub)) as \"people!\" \
         from grants where pa_issuer = $1 and revoked_at is null and expires_at > $2 \
         and ($3::text[] is null or brand_id = any($3))",
        pa_issuer,
        now,
        within,
    )
    .fetch_one(db)
    .await?;
    Ok((r.grants, r.people))
}

/// Counts for the overview page.
#[derive(Clone, Debug, Default, sqlx::FromRow)]
pub struct Overview {
    pub brands: i64,
    pub agents: i64,
    pub agents_enabled: i64,
    pub active_grants: i64,
    pub approved_last_day: i64,
    pub revoked_last_day: i64,
    pub customers: i64,
}

pub async fn overview(
    db: impl PgExecutor<'_>,
    within: Option<&[String]>,
    now: OffsetDateTime,
) -> DbResult<Overview> {
    sqlx::query_as!(
        Overview,
        "select \
           (select count(*) from brands where $1::text[] is null or id = any($1)) as \"brands!\", \
           (select count(*) from agents) as \"agents!\", \
           (select count(*) from agents where enabled) as \"agents_enabled!\", \
           (select count(*) from grants where revoked_at is null and expires_at > $2 \
              and ($1::text[] is null or brand_id = any($1))) as \"active_grants!\", \
           (select count(*) from grants where created_at > $2 - interval '1 day' \
              and ($1::text[] is null or brand_id = any($1))) as \"approved_last_day!\", \
           (select count(*) from grants where revoked_at > $2 - interval '1 day' \
              and ($1::text[] is null or brand_id = any($1))) as \"revoked_last_day!\", \
           (select count(*) from users where $1::text[] is null or brand_id = any($1)) as \"customers!\"",
        within,
        now,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Customers whose email, id or external id is `query` (exact; emails
/// compared lower-cased), within the caller's brands, at most 100.
pub async fn find_customers(
    db: impl PgExecutor<'_>,
    within: Option<&[String]>,
    brand_id: Option<&str>,
    query: &str,
) -> DbResult<Vec<User>> {
    let as_id = query.parse::<Uuid>().ok();
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                         failed_logins, locked_until, created_at, disabled_at from users where ($1::text[] is null or brand_id = any($1)) \
         and ($2::text is null or brand_id = $2) \
         and (email = lower($3) or external_id = $3 or id = $4) order by brand_id, email limit 100",
        within,
        brand_id,
        query,
        as_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// The customer with this id, only if it is within the caller's brands.
pub async fn customer(
    db: impl PgExecutor<'_>,
    within: Option<&[String]>,
    id: Uuid,
) -> DbResult<Option<User>> {
    sqlx::query_as!(
        User,
        "select id, brand_id, email, external_id, password_hash, totp_secret_sealed, totp_last_step, \
                         failed_logins, locked_until, created_at, disabled_at from users where id = $1 and ($2::text[] is null or brand_id = any($2))",
        id,
        within,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// How a grant came about: its device authorization, if pactd still has it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Approval {
    pub decided_at: Option<OffsetDateTime>,
    /// Where the agent's device authorization request came from.
    pub request_ip: Option<String>,
}

pub async fn approval_of(
    db: impl PgExecutor<'_>,
    grant_id: crate::ids::GrantId,
) -> DbResult<Option<Approval>> {
    sqlx::query_as!(
        Approval,
        "select decided_at, request_ip from device_authorizations where grant_id = $1 \
         order by decided_at desc nulls last limit 1",
        grant_id.as_uuid(),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Ends every browser session of a customer (signed in or half signed in).
pub async fn sign_out_customer(db: impl PgExecutor<'_>, user_id: Uuid) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from sessions where user_id = $1 or pending_user_id = $1",
        user_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Live grants of one customer.
pub async fn active_grant_count(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    now: OffsetDateTime,
) -> DbResult<i64> {
    sqlx::query_scalar!(
        "select count(*) as \"n!\" from grants where brand_id = $1 and user_sub = $2 \
         and revoked_at is null and expires_at > $3",
        brand_id,
        user_sub,
        now,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}
