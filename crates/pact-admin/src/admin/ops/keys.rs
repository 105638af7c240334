//! Staff rotating the Provider's signing key (PACT §5.5, §5.6: the key that
//! signs delegation tokens and receipts). The new key is published at once and
//! signs only after `overlap`, so every verifier has fetched it by then; the
//! keys it replaces stay published for `retain`, so what they signed still
//! verifies. Every node picks the new key up through the `pactd_keys`
//! notification of the table trigger.

use pact_crypto::MasterKey;
use serde_json::json;
use sqlx::PgConnection;
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

use super::audit;
use crate::admin::role::Actor;
use crate::keys::{KeyError, KeyInfo};

/// Creates the next signing key and records `key.rotate` in the caller's
/// transaction, so a rotation never commits without its trace.
pub async fn rotate(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    master: &MasterKey,
    now: OffsetDateTime,
    overlap: Duration,
    retain: Duration,
) -> Result<KeyInfo, KeyError> {
    let kid = crate::keys::rotate_in(&mut *tx, master, now, overlap, retain).await?;
    let rows = pact_db::signing_keys::all(&mut *tx).await?;
    let Some(key) = crate::keys::describe(&rows, now)
        .into_iter()
        .find(|k| k.kid == kid)
    else {
        // The row was inserted by this very transaction.
        return Err(KeyError::NoActiveKey);
    };
    let signs_from = key.activates_at.format(&Rfc3339).unwrap_or_default();
    audit(
        tx,
        actor,
        ip,
        "key.rotate",
        &key.kid,
        None,
        json!({"signs_from": signs_from}),
    )
    .await?;
    Ok(key)
}
