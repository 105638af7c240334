//! Console sessions: like the customers' (web/session.rs) — 256 random bits
//! in an HttpOnly cookie, only the SHA-256 stored, a new id whenever the
//! authentication state rises — but in their own table and cookie, with
//! `SameSite=Strict` (no console page is ever the target of a cross-site
//! link that must keep the session) and a shorter life.

use axum::extract::FromRequestParts;
use axum::http::HeaderValue;
use axum::http::request::Parts;
use pact_db::admins::{Admin, AdminSession};
use pact_node::node::NodeInner;
use time::{Duration, OffsetDateTime};

use crate::admin::role::Actor;
use crate::client_ip::ClientIp;
use crate::domain::secrets;
use crate::state::AppState;
use crate::web::PageError;
use crate::web::session::{cookie_value, is_secure};

/// A staff session lasts a working day at most.
pub const LIFETIME: Duration = Duration::hours(8);
/// Password accepted, second factor to come.
pub const PENDING_LIFETIME: Duration = Duration::minutes(10);

pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-pactd_admin"
    } else {
        "pactd_admin"
    }
}

fn cookie(node: &NodeInner, value: &str, max_age: i64) -> HeaderValue {
    let s = is_secure(node);
    let line = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
        cookie_name(s),
        if s { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&line).unwrap_or_else(|_| HeaderValue::from_static(""))
}

pub fn clear_cookie(node: &NodeInner) -> HeaderValue {
    cookie(node, "", 0)
}

/// The console session of a request, if any, and the client address.
#[derive(Clone, Debug)]
pub struct Staff {
    pub session: Option<AdminSession>,
    pub ip: String,
    /// The address as per-address limits key it (an IPv6 /64).
    pub limit_key: String,
}

impl FromRequestParts<AppState> for Staff {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, PageError> {
        let now = state.clock.now();
        let session = match cookie_value(&parts.headers, cookie_name(is_secure(state))) {
            Some(raw) if raw.len() == 43 => {
                pact_db::admins::find_session(&state.db, &secrets::hash(raw), now).await?
            }
            _ => None,
        };
        let client = match ClientIp::from_request_parts(parts, state).await {
            Ok(ip) => ip,
            Err(never) => match never {},
        };
        Ok(Self {
            session,
            ip: client.0.to_string(),
            limit_key: client.limit_key(),
        })
    }
}

/// A signed-in staff member: the account and the actor it acts as.
#[derive(Clone, Debug)]
pub struct SignedIn {
    pub session: AdminSession,
    pub admin: Admin,
    pub actor: Actor,
}

impl Staff {
    /// The signed-in admin (password and second factor), if the account is
    /// still there and enabled.
    pub async fn signed_in(&self, state: &AppState) -> Result<Option<SignedIn>, PageError> {
        let Some(s) = &self.session else {
            return Ok(None);
        };
        let Some(id) = s.admin_id else {
            return Ok(None);
        };
        let Some(admin) = pact_db::admins::find(&state.db, id).await? else {
            return Ok(None);
        };
        if admin.disabled_at.is_some() {
            return Ok(None);
        }
        let role = admin.role;
        Ok(Some(SignedIn {
            session: s.clone(),
            actor: Actor {
                kind: "admin",
                name: admin.email.clone(),
                role,
                brands: admin.brands.clone(),
            },
            admin,
        }))
    }
}

/// Starts a new session (deleting `old`): pending when `pending`, else
/// signed in with a second factor verified now. Returns the `Set-Cookie`.
pub async fn start(
    node: &NodeInner,
    old: Option<&AdminSession>,
    admin_id: uuid::Uuid,
    pending: bool,
    now: OffsetDateTime,
) -> Result<HeaderValue, PageError> {
    let (raw, hash) = secrets::new_secret();
    let (csrf, _) = secrets::new_secret();
    let lifetime = if pending { PENDING_LIFETIME } else { LIFETIME };
    let mut tx = node.db.begin().await?;
    if let Some(old) = old {
        pact_db::admins::delete_session(&mut *tx, &old.id_hash).await?;
    }
    pact_db::admins::delete_expired_sessions(&mut *tx, now).await?;
    pact_db::admins::insert_session(
        &mut *tx,
        &hash,
        &csrf,
        (!pending).then_some(admin_id),
        pending.then_some(admin_id),
        (!pending).then_some(now),
        now + lifetime,
    )
    .await?;
    tx.commit().await?;
    Ok(cookie(node, &raw, lifetime.whole_seconds()))
}
