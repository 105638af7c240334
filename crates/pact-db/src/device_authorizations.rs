//! RFC 8628 device authorizations. Only the device code's hash is stored.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeviceAuthorization {
    pub id: Uuid,
    pub brand_id: String,
    pub pa_issuer: String,
    pub pa_sub: String,
    pub user_code: String,
    pub scopes: Vec<String>,
    pub authorization_details: Option<serde_json::Value>,
    pub status: String,
    pub interval_secs: i32,
    pub last_polled_at: Option<OffsetDateTime>,
    pub expires_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub request_ip: Option<String>,
    pub decided_at: Option<OffsetDateTime>,
    pub user_sub: Option<String>,
    pub grant_id: Option<Uuid>,
}

const COLS: &str = "id, brand_id, pa_issuer, pa_sub, user_code, scopes, authorization_details, status, \
                    interval_secs, last_polled_at, expires_at, created_at, request_ip, decided_at, \
                    user_sub, grant_id";

#[derive(Clone, Debug)]
pub struct NewDeviceAuthorization<'a> {
    pub id: Uuid,
    pub brand_id: &'a str,
    pub pa_issuer: &'a str,
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
}

/// Inserts; a unique violation on the live user code means the caller drew a
/// code already in use and should draw again.
pub async fn insert(db: impl PgExecutor<'_>, d: NewDeviceAuthorization<'_>) -> DbResult<()> {
    sqlx::query(
        "insert into device_authorizations (id, brand_id, pa_issuer, pa_sub, device_code_hash, user_code, \
         scopes, authorization_details, interval_secs, expires_at, request_ip, origin) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(d.id)
    .bind(d.brand_id)
    .bind(d.pa_issuer)
    .bind(d.pa_sub)
    .bind(d.device_code_hash)
    .bind(d.user_code)
    .bind(d.scopes)
    .bind(d.authorization_details)
    .bind(d.interval_secs)
    .bind(d.expires_at)
    .bind(d.request_ip)
    .bind(if d.step_up { "step_up" } else { "client" })
    .execute(db)
    .await
    .map(|_| ())
}

/// PACT §5.5: after a step-up task the PA runs §5.1 again for the missing
/// scopes. When the task's link still names a live authorization for exactly
/// those scopes, for this PA and its user, that authorization gets the PA's
/// new device code, so the code the person sees in the link and the one the
/// PA shows are the same request, approved once. An approved one is taken
/// first (the person already said yes), and a row being approved right now is
/// waited for rather than skipped, so the approval is never left behind.
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
    sqlx::query_as(
        "with taken as ( \
           update device_authorizations set device_code_hash = $5, origin = 'client' \
           where id = (select id from device_authorizations \
                       where brand_id = $2 and pa_issuer = $3 and pa_sub = $4 and origin = 'step_up' \
                       and status in ('pending', 'approved') and expires_at > $12 \
                       and scopes @> $7 and scopes <@ $7 and authorization_details is null \
                       order by status = 'approved' desc, created_at desc limit 1 for update) \
           returning user_code, expires_at, interval_secs, true as taken_over), \
         inserted as ( \
           insert into device_authorizations (id, brand_id, pa_issuer, pa_sub, device_code_hash, \
             user_code, scopes, authorization_details, interval_secs, expires_at, request_ip, origin) \
           select $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'client' \
           where not exists (select 1 from taken) \
           returning user_code, expires_at, interval_secs, false as taken_over) \
         select * from taken union all select * from inserted",
    )
    .bind(d.id)
    .bind(d.brand_id)
    .bind(d.pa_issuer)
    .bind(d.pa_sub)
    .bind(d.device_code_hash)
    .bind(d.user_code)
    .bind(d.scopes)
    .bind(d.authorization_details)
    .bind(d.interval_secs)
    .bind(d.expires_at)
    .bind(d.request_ip)
    .bind(now)
    .fetch_one(db)
    .await
}

/// What [`take_over_or_insert`] did.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Created {
    pub user_code: String,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
    pub taken_over: bool,
}

/// A live step-up authorization (pending, or approved and not yet taken over)
/// for exactly these scopes, the approved one first: a turn that needs the
/// same scopes again points at it instead of minting another code (PACT §5.5).
pub async fn live_step_up(
    db: impl PgExecutor<'_>,
    brand_id: &str,
    pa_issuer: &str,
    pa_sub: &str,
    scopes: &[String],
    now: OffsetDateTime,
) -> DbResult<Option<LiveStepUp>> {
    sqlx::query_as(
        "select user_code, status, expires_at, interval_secs from device_authorizations \
         where brand_id = $1 and pa_issuer = $2 and pa_sub = $3 and origin = 'step_up' \
         and status in ('pending', 'approved') and expires_at > $5 \
         and scopes @> $4 and scopes <@ $4 and authorization_details is null \
         order by status = 'approved' desc, created_at desc limit 1",
    )
    .bind(brand_id)
    .bind(pa_issuer)
    .bind(pa_sub)
    .bind(scopes)
    .bind(now)
    .fetch_optional(db)
    .await
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct LiveStepUp {
    pub user_code: String,
    pub status: String,
    pub expires_at: OffsetDateTime,
    pub interval_secs: i32,
}

/// Locks the authorization a device code names, for one poll: concurrent polls
/// of the same code serialise here, so exactly one can redeem it.
pub async fn lock_by_device_code(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {COLS} from device_authorizations where device_code_hash = $1 for update"
    )))
    .bind(hash)
    .fetch_optional(db)
    .await
}

/// The authorization a device code names, without a lock: a poll reads it,
/// decides, and records the poll with [`record_poll_if_unchanged`].
pub async fn find_by_device_code(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {COLS} from device_authorizations where device_code_hash = $1"
    )))
    .bind(hash)
    .fetch_optional(db)
    .await
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
    let done = sqlx::query(
        "update device_authorizations set last_polled_at = $3, interval_secs = $4 \
         where id = $1 and status = 'pending' and last_polled_at is not distinct from $2 \
         and interval_secs = $5",
    )
    .bind(id)
    .bind(seen.0)
    .bind(at)
    .bind(interval_secs)
    .bind(seen.1)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The live (pending or approved) authorization with this normalised user code.
pub async fn find_live_by_user_code(
    db: impl PgExecutor<'_>,
    user_code: &str,
) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {COLS} from device_authorizations where user_code = $1 and status in ('pending', 'approved') \
         order by created_at desc limit 1"
    )))
    .bind(user_code)
    .fetch_optional(db)
    .await
}

/// Whether a decided authorization (denied or redeemed) used this code; such
/// codes are no longer live but deserve a clearer page than "unknown".
pub async fn user_code_was_used(db: impl PgExecutor<'_>, user_code: &str) -> DbResult<bool> {
    sqlx::query_scalar(
        "select exists (select 1 from device_authorizations \
         where user_code = $1 and status in ('denied', 'redeemed'))",
    )
    .bind(user_code)
    .fetch_one(db)
    .await
}

pub async fn lock(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {COLS} from device_authorizations where id = $1 for update"
    )))
    .bind(id)
    .fetch_optional(db)
    .await
}

pub async fn find(db: impl PgExecutor<'_>, id: Uuid) -> DbResult<Option<DeviceAuthorization>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "select {COLS} from device_authorizations where id = $1"
    )))
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Records a poll; `interval_secs` grows on `slow_down` (RFC 8628 §3.5).
pub async fn record_poll(
    db: impl PgExecutor<'_>,
    id: Uuid,
    at: OffsetDateTime,
    interval_secs: i32,
) -> DbResult<()> {
    sqlx::query(
        "update device_authorizations set last_polled_at = $2, interval_secs = $3 where id = $1",
    )
    .bind(id)
    .bind(at)
    .bind(interval_secs)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn set_approved(
    db: impl PgExecutor<'_>,
    id: Uuid,
    user_sub: &str,
    grant_id: Uuid,
) -> DbResult<bool> {
    let done = sqlx::query(
        "update device_authorizations set status = 'approved', decided_at = now(), user_sub = $2, grant_id = $3 \
         where id = $1 and status = 'pending'",
    )
    .bind(id)
    .bind(user_sub)
    .bind(grant_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_denied(
    db: impl PgExecutor<'_>,
    id: Uuid,
    user_sub: Option<&str>,
) -> DbResult<bool> {
    let done = sqlx::query(
        "update device_authorizations set status = 'denied', decided_at = now(), user_sub = $2 \
         where id = $1 and status = 'pending'",
    )
    .bind(id)
    .bind(user_sub)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_redeemed(db: impl PgExecutor<'_>, id: Uuid, at: OffsetDateTime) -> DbResult<()> {
    sqlx::query(
        "update device_authorizations set status = 'redeemed', last_polled_at = $2 where id = $1",
    )
    .bind(id)
    .bind(at)
    .execute(db)
    .await
    .map(|_| ())
}

/// Deletes authorizations that expired more than `grace` ago, and redeemed or
/// denied ones older than that: nothing can be done with them any more.
pub async fn delete_stale(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query(
        "delete from device_authorizations where expires_at < $1 \
         or (status in ('redeemed', 'denied') and coalesce(decided_at, created_at) < $1)",
    )
    .bind(before)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
