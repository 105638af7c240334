//! Brands whose customers sign in with the merchant's own OpenID provider:
//! the configuration, each browser's trip to the provider, and which pactd
//! sessions came from which provider session (for back-channel logout).

use crate::ids::{BrandId, UserSub};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// The sealing context (AEAD associated data) of a brand's client secret at
/// rest: defined once, for the command that seals it, the server that opens
/// it and the rewrap that re-seals it. Binding the brand id means a sealed
/// secret copied onto another brand's row does not open.
pub fn client_secret_aad(brand_id: &BrandId) -> Vec<u8> {
    format!("pactd brand oidc client secret\n{brand_id}").into_bytes()
}

/// `client_auth`: how pactd authenticates at the provider's token endpoint.
pub mod client_auth {
    /// RFC 6749 §2.3.1: HTTP Basic with the client secret.
    pub const CLIENT_SECRET_BASIC: &str = "client_secret_basic";
    /// OpenID Connect Core 1.0 §9, RFC 7523 §2.2: a JWT signed with pactd's key.
    pub const PRIVATE_KEY_JWT: &str = "private_key_jwt";
}

/// `assertion_aud`: what a private_key_jwt assertion names as its audience.
pub mod assertion_aud {
    pub const TOKEN_ENDPOINT: &str = "token_endpoint";
    pub const ISSUER: &str = "issuer";
}

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct BrandOidc {
    pub brand_id: BrandId,
    pub issuer: String,
    pub client_id: String,
    /// Present exactly when `client_auth` is `client_secret_basic`.
    pub client_secret_sealed: Option<Vec<u8>>,
    pub client_auth: String,
    pub assertion_aud: String,
    pub scope: String,
    pub user_claim: String,
    pub mfa_acr: Vec<String>,
    pub updated_at: OffsetDateTime,
}

pub async fn find(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<Option<BrandOidc>> {
    sqlx::query_as!(
        BrandOidc,
        "select brand_id, issuer, client_id, client_secret_sealed, client_auth, assertion_aud, \
         scope, user_claim, mfa_acr, updated_at from brand_oidc where brand_id = $1",
        brand_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// What `pactd brand set --login-oidc-*` stores.
#[derive(Clone, Debug)]
pub struct NewBrandOidc<'a> {
    pub brand_id: &'a BrandId,
    pub issuer: &'a str,
    pub client_id: &'a str,
    /// `None` for `private_key_jwt`.
    pub client_secret_sealed: Option<&'a [u8]>,
    pub client_auth: &'a str,
    pub assertion_aud: &'a str,
    pub scope: &'a str,
    pub user_claim: &'a str,
    pub mfa_acr: &'a [String],
}

pub async fn upsert(db: impl PgExecutor<'_>, c: &NewBrandOidc<'_>) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_oidc (brand_id, issuer, client_id, client_secret_sealed, client_auth, \
         assertion_aud, scope, user_claim, mfa_acr) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict (brand_id) do update set \
         issuer = excluded.issuer, client_id = excluded.client_id, \
         client_secret_sealed = excluded.client_secret_sealed, client_auth = excluded.client_auth, \
         assertion_aud = excluded.assertion_aud, scope = excluded.scope, \
         user_claim = excluded.user_claim, mfa_acr = excluded.mfa_acr, updated_at = now()",
        c.brand_id,
        c.issuer,
        c.client_id,
        c.client_secret_sealed,
        c.client_auth,
        c.assertion_aud,
        c.scope,
        c.user_claim,
        c.mfa_acr,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Leaves the mode; true when the brand was in it.
pub async fn remove(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<bool> {
    let done = sqlx::query!("delete from brand_oidc where brand_id = $1", brand_id,)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Every sealed client secret, locked until the transaction ends (`pactd keys rewrap`).
/// A brand using `private_key_jwt` has none.
pub async fn lock_client_secrets(db: &mut sqlx::PgConnection) -> DbResult<Vec<(BrandId, Vec<u8>)>> {
    let rows = sqlx::query!(
        "select brand_id, client_secret_sealed as \"client_secret_sealed!\" from brand_oidc \
         where client_secret_sealed is not null order by brand_id for update",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.brand_id.into(), r.client_secret_sealed))
        .collect())
}

pub async fn set_client_secret(
    db: &mut sqlx::PgConnection,
    brand_id: &BrandId,
    sealed: &[u8],
) -> DbResult<()> {
    sqlx::query!(
        "update brand_oidc set client_secret_sealed = $2 where brand_id = $1",
        brand_id,
        sealed,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// One browser's trip to the provider.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Trip {
    pub state_hash: Vec<u8>,
    pub session_hash: Vec<u8>,
    pub brand_id: BrandId,
    pub device_authorization_id: Uuid,
    pub nonce: String,
    pub code_verifier: String,
    pub issuer: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    pub mfa_requested: bool,
    pub return_scopes: String,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// Records a trip. A session has at most one trip under way: starting another
/// (a reload, a step-up) ends the earlier one, so an older `state` cannot be
/// used any more. Expired trips of anyone are swept on the way.
pub async fn begin_trip(db: &mut sqlx::PgConnection, t: &Trip) -> DbResult<()> {
    sqlx::query!(
        "delete from brand_oidc_logins where session_hash = $1 or expires_at <= $2",
        &t.session_hash,
        t.created_at,
    )
    .execute(&mut *db)
    .await?;
    sqlx::query!(
        "insert into brand_oidc_logins (state_hash, session_hash, brand_id, device_authorization_id, nonce, \
         code_verifier, issuer, token_endpoint, jwks_uri, mfa_requested, return_scopes, created_at, expires_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        &t.state_hash,
        &t.session_hash,
        &t.brand_id,
        t.device_authorization_id,
        &t.nonce,
        &t.code_verifier,
        &t.issuer,
        &t.token_endpoint,
        &t.jwks_uri,
        t.mfa_requested,
        &t.return_scopes,
        t.created_at,
        t.expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// What a `state` coming back refers to.
#[derive(Debug)]
pub enum TripLookup {
    /// This session's live trip, now spent (single use).
    Taken(Box<Trip>),
    /// A live trip, but another browser's: left in place, changed nothing.
    OtherSession,
    /// No such trip: never issued, already used, or expired.
    Unknown,
}

/// Takes the trip `state_hash` names if it belongs to `session_hash`.
pub async fn take_trip(
    db: &mut sqlx::PgConnection,
    state_hash: &[u8],
    session_hash: Option<&[u8]>,
    now: OffsetDateTime,
) -> DbResult<TripLookup> {
    if let Some(session_hash) = session_hash {
        let taken: Option<Trip> = sqlx::query_as!(
            Trip,
            "delete from brand_oidc_logins where state_hash = $1 and session_hash = $2 \
             and expires_at > $3 returning state_hash, session_hash, brand_id, device_authorization_id, nonce, \
     code_verifier, issuer, token_endpoint, jwks_uri, mfa_requested, return_scopes, created_at, expires_at",
            state_hash,
            session_hash,
            now,
        )
        .fetch_optional(&mut *db)
        .await?;
        if let Some(t) = taken {
            return Ok(TripLookup::Taken(Box::new(t)));
        }
    }
    let other: Option<bool> = sqlx::query_scalar!(
        "select true as \"found!\" from brand_oidc_logins where state_hash = $1 and expires_at > $2",
        state_hash,
        now,
    )
    .fetch_optional(db)
    .await?;
    Ok(if other.is_some() {
        TripLookup::OtherSession
    } else {
        TripLookup::Unknown
    })
}

/// Remembers which provider session a pactd session came from.
pub async fn link_session(
    db: impl PgExecutor<'_>,
    session_hash: &[u8],
    brand_id: &BrandId,
    provider_sub: &str,
    sid: Option<&str>,
) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_oidc_sessions (session_hash, brand_id, provider_sub, sid) values ($1, $2, $3, $4) \
         on conflict (session_hash) do update set brand_id = excluded.brand_id, \
         provider_sub = excluded.provider_sub, sid = excluded.sid",
        session_hash,
        brand_id,
        provider_sub,
        sid,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Back-Channel Logout 1.0 §2.7: ends the pactd sessions at `brand_id` that
/// came from the provider session `sid` when the logout token names one
/// (and, with a `sub` too, only that person's), otherwise every session of
/// the provider's `sub`; a session whose ID token carried no `sid` is
/// matched by `sub`. Returns how many.
pub async fn end_sessions(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    provider_sub: Option<&str>,
    sid: Option<&str>,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from sessions where id_hash in (select session_hash from brand_oidc_sessions \
         where brand_id = $1 and ( \
           ($3::text is not null and sid = $3 and ($2::text is null or provider_sub = $2)) \
           or ($2::text is not null and provider_sub = $2 and ($3::text is null or sid is null))))",
        brand_id,
        provider_sub,
        sid,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Ends every pactd session at `brand_id` signed in as `user_sub` (the id
/// delegation tokens carry), whatever the login mode. Returns how many.
pub async fn end_user_sessions(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from sessions s where s.brand_id = $1 and (s.external_sub = $2 or s.user_id in \
         (select u.id from users u where u.brand_id = $1 and coalesce(u.external_id, u.id::text) = $2))",
        brand_id,
        user_sub,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Ends every session at `brand_id` signed in as a person the brand's login
/// named (`external_sub`): when the provider or the claim that names people
/// changes, a name the old one gave means nothing any more, and under the
/// new one it may be someone else's.
pub async fn end_external_sessions(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from sessions where brand_id = $1 and external_sub is not null",
        brand_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
