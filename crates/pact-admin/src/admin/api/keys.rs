//! `/admin/api/v1/keys`: the Provider's signing keys (public facts only: kid,
//! status and times; the private part never leaves the sealed column) and
//! their rotation, through the same function as `pactd keys rotate`.

use axum::Json;
use axum::extract::State;
use pact_node::node::{Node, NodeInner};
use serde::Serialize;
use serde_json::json;
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::answer::{self, Time, time};
use super::caller::ApiCaller;
use super::error::AdminApiError;
use crate::admin::ops;
use crate::admin::role::{Actor, Role};
use crate::keys::KeyInfo;

/// A signing key's public facts (never private material).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Key)]
pub struct KeyView {
    pub kid: String,
    /// `active`: it signs now; `published`: in the JWKS for verification
    /// only; `retired`: no longer published.
    #[schema(schema_with = answer::key_status)]
    pub status: &'static str,
    pub created_at: Time,
    pub activates_at: Time,
    pub retired_at: Option<Time>,
    pub unpublish_at: Option<Time>,
}

impl From<&KeyInfo> for KeyView {
    fn from(k: &KeyInfo) -> Self {
        Self {
            kid: k.kid.clone(),
            status: k.status.as_str(),
            created_at: Time(k.created_at),
            activates_at: Time(k.activates_at),
            retired_at: time(k.retired_at),
            unpublish_at: time(k.unpublish_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub items: Vec<KeyView>,
}

/// `GET /keys` (viewer): the keys are public (they are in every brand's
/// JWKS), so a brand-limited caller may read them too.
pub async fn list(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<KeyList>, AdminApiError> {
    caller.require(&node, Role::Viewer, "key.list").await?;
    let now = node.clock.now();
    let items = crate::keys::list(&node.db, now)
        .await?
        .iter()
        .map(KeyView::from)
        .collect();
    caller
        .record(&node.db, "key.list", None, None, json!({}))
        .await?;
    Ok(Json(KeyList { items }))
}

/// Rotates as `pactd keys rotate` does without flags (the same function,
/// with the server's overlap and retention): the new key is published now
/// and signs after the overlap; the old ones stay published for the
/// retention. The audit entry (`key.rotate`, under `actor`) commits with the
/// key, and every node picks the key up through the `pactd_keys`
/// notification of the table trigger. Shared with the console.
pub async fn rotate_now(
    node: &NodeInner,
    actor: &Actor,
    ip: &str,
    now: OffsetDateTime,
) -> Result<KeyInfo, AdminApiError> {
    let d = &node.config.delegation;
    let overlap = time::Duration::try_from(d.key_overlap).map_err(AdminApiError::internal)?;
    let retain = time::Duration::try_from(d.key_retention).map_err(AdminApiError::internal)?;
    let key_error = |e| match e {
        crate::keys::KeyError::Db(e) => AdminApiError::from(e),
        other => AdminApiError::internal(other),
    };
    let mut tx = node.db.begin().await?;
    let master = &node.config.master_key;
    let key = ops::keys::rotate(&mut tx, actor, Some(ip), master, now, overlap, retain)
        .await
        .map_err(key_error)?;
    tx.commit().await?;
    Ok(key)
}

/// `POST /keys/rotate` (owner, every brand: the keys sign for all brands).
pub async fn rotate(
    State(node): State<Node>,
    caller: ApiCaller,
) -> Result<Json<KeyView>, AdminApiError> {
    caller.require(&node, Role::Owner, "key.rotate").await?;
    caller.require_unlimited(&node, "key.rotate").await?;
    let key = rotate_now(&node, &caller.actor, &caller.ip, node.clock.now()).await?;
    Ok(Json(KeyView::from(&key)))
}
