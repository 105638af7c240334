//! The Provider's signing keys as one node holds them.
//!
//! Keys live in Postgres with their private parts sealed by the master key.
//! A node keeps a decrypted snapshot and picks the signing key by `now`, so a
//! rotated key starts signing at its activation time on every node without a
//! reload, and the JWKS publishes it from its creation (the overlap lets PA
//! caches fetch it before anything it signed arrives) until `unpublish_at`.

use std::sync::{Arc, RwLock};

use pact_db::PgPool;
use pact_db::signing_keys::SigningKeyRow;
use pact_jose::{MasterKey, ProviderKey, ProviderKeySet};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("signing key {kid} cannot be unsealed with the configured master key")]
    Unseal { kid: String },
    #[error("key material: {0}")]
    Key(#[from] pact_jose::ProviderKeyError),
    #[error("sealing: {0}")]
    Seal(#[from] pact_jose::SealError),
    #[error("no signing key is active")]
    NoActiveKey,
}

struct LoadedKey {
    key: Arc<ProviderKey>,
    activates_at: OffsetDateTime,
}

/// One consistent view of the keys.
pub struct KeySnapshot {
    /// Newest activation first.
    signing: Vec<LoadedKey>,
    /// Published keys: what tokens and receipts are verified against.
    pub published: ProviderKeySet,
}

impl KeySnapshot {
    /// The key that signs at `now`: the most recently activated one.
    pub fn signing_key(&self, now: OffsetDateTime) -> Result<Arc<ProviderKey>, KeyError> {
        self.signing
            .iter()
            .find(|k| k.activates_at <= now)
            .map(|k| k.key.clone())
            .ok_or(KeyError::NoActiveKey)
    }
}

pub struct KeyStore {
    master: Arc<MasterKey>,
    snapshot: RwLock<Arc<KeySnapshot>>,
}

impl KeyStore {
    /// Loads the keys, creating the first one if there is none yet.
    pub async fn load(db: &PgPool, master: Arc<MasterKey>) -> Result<Self, KeyError> {
        let now = OffsetDateTime::now_utc();
        ensure_first_key(db, &master, now).await?;
        let snapshot = build_snapshot(db, &master, now).await?;
        Ok(Self {
            master,
            snapshot: RwLock::new(Arc::new(snapshot)),
        })
    }

    pub fn current(&self) -> Arc<KeySnapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the keys (on a `pactd_keys` notification, or periodically).
    pub async fn refresh(&self, db: &PgPool) -> Result<(), KeyError> {
        let snapshot = Arc::new(build_snapshot(db, &self.master, OffsetDateTime::now_utc()).await?);
        match self.snapshot.write() {
            Ok(mut s) => *s = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
        Ok(())
    }
}

async fn build_snapshot(
    db: &PgPool,
    master: &MasterKey,
    now: OffsetDateTime,
) -> Result<KeySnapshot, KeyError> {
    let rows = pact_db::signing_keys::all(db).await?;
    let mut signing = Vec::new();
    let mut published = Vec::new();
    for row in rows {
        if row.unpublish_at.is_none_or(|t| t > now) {
            published.push(row.public_jwk.clone());
        }
        // A retired key never signs again; only live keys are unsealed.
        if row.retired_at.is_none_or(|t| t > now) {
            signing.push(LoadedKey {
                key: Arc::new(unseal(master, &row)?),
                activates_at: row.activates_at,
            });
        }
    }
    signing.sort_by_key(|k| std::cmp::Reverse(k.activates_at));
    Ok(KeySnapshot {
        signing,
        published: ProviderKeySet::from_public_jwks(&published)?,
    })
}

fn unseal(master: &MasterKey, row: &SigningKeyRow) -> Result<ProviderKey, KeyError> {
    let der = master
        .open(&row.private_sealed, row.kid.as_bytes())
        .map_err(|_| KeyError::Unseal {
            kid: row.kid.clone(),
        })?;
    Ok(ProviderKey::from_pkcs8_der(&der)?)
}

/// Every key ever made, for verifying old receipts (`pactd receipts verify`).
pub async fn all_public_keys(db: &PgPool) -> Result<ProviderKeySet, KeyError> {
    let rows = pact_db::signing_keys::all(db).await?;
    let jwks: Vec<_> = rows.into_iter().map(|r| r.public_jwk).collect();
    Ok(ProviderKeySet::from_public_jwks(&jwks)?)
}

/// Creates the first key unless one exists. Nodes starting together on an
/// empty database serialise on an advisory lock, so exactly one key is made.
async fn ensure_first_key(
    db: &PgPool,
    master: &MasterKey,
    now: OffsetDateTime,
) -> Result<(), KeyError> {
    let mut tx = db.begin().await?;
    sqlx::query("select pg_advisory_xact_lock(hashtext('pactd:signing_keys'))")
        .execute(&mut *tx)
        .await?;
    if pact_db::signing_keys::all(&mut *tx).await?.is_empty() {
        let key = ProviderKey::generate()?;
        let sealed = master.seal(&key.private_pkcs8_der(), key.kid().as_bytes())?;
        pact_db::signing_keys::insert(&mut *tx, key.kid(), &key.public_jwk(), &sealed, now).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Rotation: the new key is published now and signs after `overlap`; older
/// keys stop signing then and stay published for `retain` more, which must
/// outlast every token and receipt they signed.
pub async fn rotate(
    db: &PgPool,
    master: &MasterKey,
    now: OffsetDateTime,
    overlap: Duration,
    retain: Duration,
) -> Result<String, KeyError> {
    let mut tx = db.begin().await?;
    let key = ProviderKey::generate()?;
    let sealed = master.seal(&key.private_pkcs8_der(), key.kid().as_bytes())?;
    let activates_at = now + overlap;
    pact_db::signing_keys::insert(
        &mut *tx,
        key.kid(),
        &key.public_jwk(),
        &sealed,
        activates_at,
    )
    .await?;
    pact_db::signing_keys::retire_older(&mut *tx, key.kid(), activates_at, activates_at + retain)
        .await?;
    tx.commit().await?;
    Ok(key.kid().to_owned())
}
