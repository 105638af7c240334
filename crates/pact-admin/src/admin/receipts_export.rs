//! A grant's receipts as a file anyone can check offline (PACT §5.6).
//!
//! The file is a JSON array in the shape a personal agent keeps its receipts
//! (`pact-agent`'s `receipts.json`): each item holds the receipt exactly as
//! the agent was given it (`{jws, claims}`) and where the brand's keys are
//! published (`jwks_uri`, and the `receipt_keys_uri` archive that keeps a key
//! after it leaves the JWKS). So the same tools read both: `pact-agent
//! receipts` over a home holding it, and `pactd receipts verify --held`.
//! The server is not trusted by the file: a reader checks each signature
//! against the published keys and each `prev` hash against the receipt before.

use pact_db::PgPool;
use pact_db::receipts::StoredReceipt;
use serde_json::{Value, json};

use crate::config::Config;
use crate::domain::receipt_chain::{self, ChainBreak};
use crate::keys::KeyError;

/// Where a grant's receipt chain does not hold (PACT §5.6): each receipt's
/// signature against every key this server published, and each `prev` link.
/// The console and the API show the same check.
pub async fn chain_breaks(
    db: &PgPool,
    receipts: &[StoredReceipt],
) -> Result<Vec<ChainBreak>, KeyError> {
    let keys = crate::keys::all_public_keys(db).await?;
    Ok(receipt_chain::verify(receipts, &keys))
}

/// [`export`] with the server's own check of the chain done first.
pub async fn export_checked(
    db: &PgPool,
    config: &Config,
    grant: &pact_db::grants::Grant,
    receipts: &[StoredReceipt],
) -> Result<Value, KeyError> {
    let broken: Vec<i32> = chain_breaks(db, receipts)
        .await?
        .iter()
        .map(|b| b.seq)
        .collect();
    Ok(export(config, grant, receipts, &broken))
}

/// The export of `receipts` (one grant's, in chain order). `verified` says
/// whether the server's own check found the receipt sound when exporting
/// (`broken` holds the sequence numbers it did not).
pub fn export(
    config: &Config,
    grant: &pact_db::grants::Grant,
    receipts: &[StoredReceipt],
    broken: &[i32],
) -> Value {
    let issuer = config.oauth_issuer(&grant.brand_id);
    let items: Vec<Value> = receipts
        .iter()
        .map(|r| {
            json!({
                "brand": config.interface_url(&grant.brand_id),
                // The agent keeps its own `sub` here; the server knows the
                // person by the brand's user id, which the claims carry too.
                "sub": grant.user_sub,
                "jwks_uri": format!("{issuer}/jwks.json"),
                "receipt_keys_uri": format!("{issuer}/receipt-keys.json"),
                "received_at": r.created_at.unix_timestamp(),
                "receipt": { "jws": r.jws, "claims": r.claims },
                "verified": !broken.contains(&r.seq),
            })
        })
        .collect();
    Value::Array(items)
}

/// `receipts-<grant id>.json`: the download's file name.
pub fn file_name(grant: &pact_db::grants::Grant) -> String {
    format!("receipts-{}.json", grant.id)
}

/// The download's `Content-Disposition`: an attachment named [`file_name`].
pub fn disposition(grant: &pact_db::grants::Grant) -> String {
    format!("attachment; filename=\"{}\"", file_name(grant))
}
