//! RFC 8628 device authorizations. Only the device code's hash is stored.

use crate::ids::{AgentIssuer, BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::ids::GrantId;
use crate::parties::PaUser;

/// Where a request stands (RFC 8628 §3.5), stored as the text of the `status` column, whose
/// CHECK constraint (migrations/0002) allows exactly these four.
#[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Status {
    /// Waiting for the person.
    Pending,
    /// The person approved; the next poll redeems it.
    Approved,
    /// The person said no.
    Denied,
    /// The tokens were issued; a code is redeemed at most once.
    Redeemed,
}

impl Status {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Redeemed => "redeemed",
        }
    }
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeviceAuthorization {
    pub id: Uuid,
    pub brand_id: BrandId,
    pub pa_issuer: AgentIssuer,
    pub pa_sub: String,
    pub user_code: String,
    pub scopes: Vec<String>,
    pub authorization_details: Option<serde_json::Value>,
    pub status: Status,
    pub interval_secs: i32,
    pub last_polled_at: Option<OffsetDateTime>,
    pub expires_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub request_ip: Option<String>,
    pub decided_at: Option<OffsetDateTime>,
    pub user_sub: Option<UserSub>,
    pub grant_id: Option<GrantId>,
    /// A step-up beyond a limit: the operations to approve one by one
    /// (migration 0025); `None` for every other authorization.
    pub operations: Option<serde_json::Value>,
    /// A step-up asked in a delegated turn: the person it is for, the only
    /// one who may see and decide it (migration 0047).
    pub for_user_sub: Option<UserSub>,
}

#[derive(Clone, Debug)]
pub struct NewDeviceAuthorization<'a> {
    pub id: Uuid,
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub pa_sub: &'a str,
    pub device_code_hash: &'a [u8],
    pub user_code: &'a str,
    pub scopes: &'a [String],
    pub authorization_details: Option<&'a serde_json::Value>,
    pub interval_secs: i32,
    pub expires_at: OffsetDateTime,
    pub request_ip: Option<&'a str>,
    /// True for the authorization behind a step-up task's link.
    pub step_up: bool,
    /// The operations of a step-up beyond a limit.
    pub operations: Option<&'a serde_json::Value>,
    /// A step-up asked in a delegated turn: the person it is for.
    pub for_user_sub: Option<&'a UserSub>,
}

/// Inserts; a unique violation on the live user code means the caller drew a
/// code already in use and should draw again.
pub async fn insert(db: impl PgExecutor<'_>, d: NewDeviceAuthorization<'_>) -> DbResult<()> {
    sqlx::query!(
        "insert into device_authorizations (id, brand_id, pa_issuer, pa_sub, device_code_hash, user_code, \
         scopes, authorization_details, interval_secs, expires_at, request_ip, origin, operations, \
         for_user_sub) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        d.id,
        d.brand_id,
        d.pa_issuer,
        d.pa_sub,
        d.device_code_hash,
        d.user_code,
        d.scopes,
        d.authorization_details,
        d.interval_secs,
        d.expires_at,
        d.request_ip,
        if d.step_up { "step_up" } else { "client" },
        d.operations,
        d.for_user_sub.map(UserSub::as_str),
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// PACT §5.5: after a step-up task the PA runs §5.1 again for the missing
/// scopes. When the task's link still names a live authorization for exactly
/// those scopes, for this PA and its user, that authorization gets the PA's
/// new device code, so the code the person sees in the link and the one the
/// PA shows are the same request, approved once. An approved one is taken
/// first (the person already said yes), and a row being approved right now is
/// waited for rather than skipped, so the approval is never left behind.
///
/// An approved one whose grant has ended meanwhile (the person revoked it, or
/// it expired) is no approval any more: it is neither taken over (its code
/// would be `invalid_grant` on the first poll) nor pointed at; a new request
/// is made instead.
///
/// In one statement: the take-over when there is a live step-up
/// authorization for exactly these scopes, otherwise the insert of `d`. Returns what the PA is told; `taken_over` says
/// which happened. A unique violation means `d.user_code` is live already:
/// draw another and call again.
pub async fn take_over_or_insert(
    db: impl PgExecutor<'_>,
    d: NewDeviceAuthorization<'_>,
    now: OffsetDateTime,
) -> DbResult<Created> {
    sqlx::query_as!(
        Created,
        "with taken as ( \
           update device_authorizations set device_code_hash = $5, origin = 'client' \
           where id = (select id from device_authorizations \
                       where brand_id = $2 and pa_issuer = $3 and pa_sub = $4 and origin = 'step_up' \
                       and status in ('pending', 'approved') and expires_at > $12 \
                       and scopes @> $7 and scopes <@ $7 and authorization_details is null \
                       and (status = 'pending' or exists (select 1 from grants g \
                            where g.id = device_authorizations.grant_id \
                            and g.revoked_at is null and g.expires_at > $12)) \
                       order by status = 'approved' desc, created_at desc limit 1 for update) \
           returning id, user_code, expires_at, interval_secs, true as taken_over), \
         inserted as ( \
           insert into device_authorizations (id, brand_id, pa_issuer, pa_sub, device_code_hash, \
             user_code, scopes, authorization_details, interval_secs, expires_at, request_ip, origin) \
           select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'client' \
           where not exists (select 1 from taken) \
           returning id, user_code, expires_at, interval_secs, false as taken_over) \
         select id as \"id!\", user_code as \"user_code!\", expires_at as \"expires_at!\", \
           interval_secs as \"interval_secs!\", taken_over as \"taken_over!\" from taken \
         union all select * from inserted",
        d.id,
        d.brand_id,
        d.pa_issuer,
        d.pa_sub,
        d.device_code_hash,
        d.user_code,
        d.scopes,
        d.authorization_details,
        d.interval_secs,
        d.expires_at,
        d.request_ip,
        now,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// What [`take_over_or_insert`] did.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Created {
    pub id: Uuid,
    pub user_code: String,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
    pub taken_over: bool,
}

/// A live step-up authorization (pending, or approved, its grant still
/// active, and not yet taken over) for exactly these scopes and the same
/// person (`for_user`), the approved one first: a turn that needs the
/// same scopes again points at it instead of minting another code (PACT §5.5).
pub async fn live_step_up(
    db: impl PgExecutor<'_>,
    owner: PaUser<'_>,
    scopes: &[String],
    for_user: Option<&UserSub>,
    now: OffsetDateTime,
) -> DbResult<Option<LiveStepUp>> {
    let PaUser {
        brand_id,
        pa_issuer,
        pa_sub,
    } = owner;
    sqlx::query_as!(
        LiveStepUp,
        "select id, user_code, status as \"status: Status\", expires_at, interval_secs from device_authorizations \
         where brand_id = $1 and pa_issuer = $2 and pa_sub = $3 and origin = 'step_up' \
         and status in ('pending', 'approved') and expires_at > $5 \
         and scopes @> $4 and scopes <@ $4 and authorization_details is null and operations is null \
         and for_user_sub is not distinct from $6 \
         and (status = 'pending' or exists (select 1 from grants g \
              where g.id = device_authorizations.grant_id \
              and g.revoked_at is null and g.expires_at > $5)) \
         order by status = 'approved' desc, created_at desc limit 1",
        brand_id,
        pa_issuer,
        pa_sub,
        scopes,
        now,
        for_user.map(UserSub::as_str),
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// A live step-up beyond a limit for exactly these operations (their
/// `authorization_details` entries name the tool and `argsHash`): a turn that
/// goes beyond the same limit the same way points at it again.
pub async fn live_operation_step_up(
    db: impl PgExecutor<'_>,
    owner: PaUser<'_>,
    details: &serde_json::Value,
    now: OffsetDateTime,
) -> DbResult<Option<LiveStepUp>> {
    let PaUser {
        brand_id,
        pa_issuer,
        pa_sub,
    } = owner;
    sqlx::query_as!(
        LiveStepUp,
        "select id, user_code, status as \"status: Status\", expires_at, interval_secs from device_authorizations \
         where brand_id = $1 and pa_issuer = $2 and pa_sub = $3 and origin = 'step_up' \
         and status = 'pending' and expires_at > $5 \
         and operations is not null and authorization_details = $4 \
         order by created_at desc limit 1",
        brand_id,
        pa_issuer,
        pa_sub,
        details,
        now,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct LiveStepUp {
    pub id: Uuid,
    pub user_code: String,
    pub status: Status,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
}

/// Locks the authorization a device code names, for one poll: concurrent polls
/// of the same code serialise here, so exactly one can redeem it.
pub async fn lock_by_device_code(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as!(
        DeviceAuthorization,
        "select id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, \
                    status as \"status: Status\", interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub as \"user_sub: UserSub\", grant_id as \"grant_id: GrantId\", operations, \
                    for_user_sub as \"for_user_sub: UserSub\" from device_authorizations where device_code_hash = $1 for update",
        hash,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// The authorization a device code names, without a lock: a poll reads it,
/// decides, and records the poll with [`record_poll_if_unchanged`].
pub async fn find_by_device_code(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as!(
        DeviceAuthorization,
        "select id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, \
                    status as \"status: Status\", interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub as \"user_sub: UserSub\", grant_id as \"grant_id: GrantId\", operations, \
                    for_user_sub as \"for_user_sub: UserSub\" from device_authorizations where device_code_hash = $1",
        hash,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Records a pending poll, only if the row is still as it was read (still
/// pending, last polled at `seen.0` with interval `seen.1`): false when another poll or a
/// decision came in between, and the caller then polls again under
/// [`lock_by_device_code`]. `interval_secs` grows on `slow_down` (RFC 8628 §3.5).
pub async fn record_poll_if_unchanged(
    db: impl PgExecutor<'_>,
    id: Uuid,
    seen: (Option<OffsetDateTime>, i32),
    at: OffsetDateTime,
    interval_secs: i32,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update device_authorizations set last_polled_at = $3, interval_secs = $4 \
         where id = $1 and status = 'pending' and last_polled_at is not distinct from $2 \
         and interval_secs = $5",
        id,
        seen.0,
        at,
        interval_secs,
        seen.1,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The live (pending or approved) authorization with this normalised user code.
pub async fn find_live_by_user_code(
    db: impl PgExecutor<'_>,
    user_code: &str,
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as!(
        DeviceAuthorization,
        "select id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, \
                    status as \"status: Status\", interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub as \"user_sub: UserSub\", grant_id as \"grant_id: GrantId\", operations, \
                    for_user_sub as \"for_user_sub: UserSub\" from device_authorizations where user_code = $1 and status in ('pending', 'approved') \
         order by created_at desc limit 1",
        user_code,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Whether a decided authorization (denied or redeemed) used this code; such
/// codes are no longer live but deserve a clearer page than "unknown".
pub async fn user_code_was_used(db: impl PgExecutor<'_>, user_code: &str) -> DbResult<bool> {
    sqlx::query_scalar!(
        "select exists (select 1 from device_authorizations \
         where user_code = $1 and status in ('denied', 'redeemed')) as \"used!\"",
        user_code,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

pub async fn lock(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as!(
        DeviceAuthorization,
        "select id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, \
                    status as \"status: Status\", interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub as \"user_sub: UserSub\", grant_id as \"grant_id: GrantId\", operations, \
                    for_user_sub as \"for_user_sub: UserSub\" from device_authorizations where id = $1 for update",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn find(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as!(
        DeviceAuthorization,
        "select id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, \
                    status as \"status: Status\", interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub as \"user_sub: UserSub\", grant_id as \"grant_id: GrantId\", operations, \
                    for_user_sub as \"for_user_sub: UserSub\" from device_authorizations where id = $1",
        id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Records a poll; `interval_secs` grows on `slow_down` (RFC 8628 §3.5).
pub async fn record_poll(
    db: impl PgExecutor<'_>,
    id: Uuid,
    at: OffsetDateTime,
    interval_secs: i32,
) -> DbResult<()> {
    sqlx::query!(
        "update device_authorizations set last_polled_at = $2, interval_secs = $3 where id = $1",
        id,
        at,
        interval_secs,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn set_approved(
    db: impl PgExecutor<'_>,
    id: Uuid,
    user_sub: &UserSub,
    grant_id: GrantId,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update device_authorizations set status = 'approved', decided_at = now(), user_sub = $2, grant_id = $3 \
         where id = $1 and status = 'pending'",
        id,
        user_sub,
        grant_id.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_denied(
    db: impl PgExecutor<'_>,
    id: Uuid,
    user_sub: Option<&UserSub>,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update device_authorizations set status = 'denied', decided_at = now(), user_sub = $2 \
         where id = $1 and status = 'pending'",
        id,
        user_sub.map(UserSub::as_str),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_redeemed(db: impl PgExecutor<'_>, id: Uuid, at: OffsetDateTime) -> DbResult<()> {
    sqlx::query!(
        "update device_authorizations set status = 'redeemed', last_polled_at = $2 where id = $1",
        id,
        at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Deletes authorizations that expired more than `grace` ago, and redeemed or
/// denied ones older than that: nothing can be done with them any more.
pub async fn delete_stale(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from device_authorizations where expires_at < $1 \
         or (status in ('redeemed', 'denied') and coalesce(decided_at, created_at) < $1)",
        before,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
