//! The Provider's signing keys as one node holds them.
//!
//! Keys live in Postgres with their private parts sealed by the master key.
//! A node keeps a decrypted snapshot and picks the signing key by `now`, so a
//! rotated key starts signing at its activation time on every node without a
//! reload, and the JWKS publishes it from its creation (the overlap lets PA
//! caches fetch it before anything it signed arrives) until `unpublish_at`.
//! The published set is likewise chosen by `now` at each use, so a retired
//! key stops being published and accepted at its exact `unpublish_at`, not
//! at the next reload.

use std::sync::{Arc, RwLock};

use pact_crypto::MasterKey;
use pact_db::PgPool;
use pact_db::signing_keys::SigningKeyRow;
use pact_jose::{ProviderKey, ProviderKeySet};
use time::{Duration, OffsetDateTime};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("database: {0}")]
    Db(#[from] pact_db::Error),
    #[error("signing key {kid} cannot be unsealed with the configured master key")]
    Unseal { kid: String },
    #[error("key material: {0}")]
    Key(#[from] pact_jose::ProviderKeyError),
    #[error("sealing: {0}")]
    Seal(#[from] pact_crypto::SealError),
    #[error("no signing key is active")]
    NoActiveKey,
}

struct LoadedKey {
    key: Arc<ProviderKey>,
    activates_at: OffsetDateTime,
}

/// The keys published during one stretch of time.
struct PublishedPhase {
    /// The first instant this set no longer holds.
    until: OffsetDateTime,
    keys: ProviderKeySet,
}

/// What is published from a snapshot's build time on.
struct Published {
    /// Earliest first: one set per stretch between the `unpublish_at`s still
    /// ahead when the snapshot was built.
    phases: Vec<PublishedPhase>,
    /// After the last of them (until the next reload).
    after: ProviderKeySet,
}

/// One consistent view of the keys.
pub struct KeySnapshot {
    /// Newest activation first.
    signing: Vec<LoadedKey>,
    published: Published,
}

impl KeySnapshot {
    /// The published keys at `now`: what tokens and receipts are verified
    /// against, and what the JWKS serves. A key whose `unpublish_at` is
    /// `now` or earlier is not among them.
    pub fn published(&self, now: OffsetDateTime) -> &ProviderKeySet {
        self.published
            .phases
            .iter()
            .find(|p| now < p.until)
            .map_or(&self.published.after, |p| &p.keys)
    }

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
    /// When the snapshot was last read from the database (real time): while
    /// the change listener cannot prove it hears `pactd_keys`, the listener
    /// reloads a snapshot older than the feed's bound (`listener.rs`).
    loaded_at: std::sync::Mutex<std::time::Instant>,
}

impl KeyStore {
    /// Loads the keys, creating the first one if there is none yet.
    pub async fn load(
        db: &PgPool,
        master: Arc<MasterKey>,
        now: OffsetDateTime,
    ) -> Result<Self, KeyError> {
        ensure_first_key(db, &master, now).await?;
        let snapshot = build_snapshot(db, &master, now).await?;
        Ok(Self {
            master,
            snapshot: RwLock::new(Arc::new(snapshot)),
            loaded_at: std::sync::Mutex::new(std::time::Instant::now()),
        })
    }

    pub fn current(&self) -> Arc<KeySnapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Re-reads the keys (on a `pactd_keys` notification, or periodically).
    pub async fn refresh(&self, db: &PgPool, now: OffsetDateTime) -> Result<(), KeyError> {
        let started = std::time::Instant::now();
        let snapshot = Arc::new(build_snapshot(db, &self.master, now).await?);
        let mut loaded = match self.loaded_at.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        // A reload that began earlier and ended later (housekeeping's, say,
        // behind the listener's after a rotation) must not put back the keys
        // the newer one replaced: a retired key would be trusted again.
        if started < *loaded {
            return Ok(());
        }
        match self.snapshot.write() {
            Ok(mut s) => *s = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
        // What the read began with is what the snapshot is current as of.
        *loaded = started;
        Ok(())
    }

    /// How long ago the snapshot was read from the database.
    pub fn age(&self) -> std::time::Duration {
        match self.loaded_at.lock() {
            Ok(g) => g.elapsed(),
            Err(poisoned) => poisoned.into_inner().elapsed(),
        }
    }
}

async fn build_snapshot(
    db: &PgPool,
    master: &MasterKey,
    now: OffsetDateTime,
) -> Result<KeySnapshot, KeyError> {
    let rows = pact_db::signing_keys::all(db).await?;
    let published = published_phases(&rows, now)?;
    let mut signing = Vec::new();
    for row in rows {
        // A retired key never signs again; only live keys are unsealed.
        if row.retired_at.is_none_or(|t| t > now) {
            signing.push(LoadedKey {
                key: Arc::new(unseal(master, &row)?),
                activates_at: row.activates_at,
            });
        }
    }
    signing.sort_by_key(|k| std::cmp::Reverse(k.activates_at));
    Ok(KeySnapshot { signing, published })
}

/// The published sets from `now` on: the keys not yet unpublished at `now`,
/// then one set after each later `unpublish_at`, so that the answer at any
/// instant needs no reload.
fn published_phases(rows: &[SigningKeyRow], now: OffsetDateTime) -> Result<Published, KeyError> {
    let mut cuts: Vec<OffsetDateTime> = rows
        .iter()
        .filter_map(|r| r.unpublish_at)
        .filter(|t| *t > now)
        .collect();
    cuts.sort();
    cuts.dedup();
    let at = |from: OffsetDateTime| {
        let jwks: Vec<_> = rows
            .iter()
            .filter(|r| r.unpublish_at.is_none_or(|t| t > from))
            .map(|r| r.public_jwk.clone())
            .collect();
        ProviderKeySet::from_public_jwks(&jwks)
    };
    let mut phases = Vec::with_capacity(cuts.len());
    let mut from = now;
    for until in cuts {
        phases.push(PublishedPhase {
            until,
            keys: at(from)?,
        });
        from = until;
    }
    Ok(Published {
        phases,
        after: at(from)?,
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
    pact_db::signing_keys::lock_creation(&mut *tx).await?;
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
    let kid = rotate_in(&mut tx, master, now, overlap, retain).await?;
    tx.commit().await?;
    Ok(kid)
}

/// [`rotate`] in the caller's transaction (the admin API and console commit
/// it together with its audit entry). The table trigger announces the new
/// key on `pactd_keys` at commit, so every node reloads.
pub async fn rotate_in(
    tx: &mut sqlx::PgConnection,
    master: &MasterKey,
    now: OffsetDateTime,
    overlap: Duration,
    retain: Duration,
) -> Result<String, KeyError> {
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
    Ok(key.kid().to_owned())
}

/// Where a key is in its life, as staff see it (`pactd keys list`, the
/// console, the admin API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyStatus {
    /// The key new tokens and receipts are signed with now.
    Active,
    /// In the JWKS for verification only: waiting for its activation (the
    /// overlap lets PA caches fetch it first), or retired but still needed
    /// for the tokens and receipts it signed.
    Published,
    /// No longer published: nothing it signed is accepted any more.
    Retired,
}

impl KeyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Published => "published",
            Self::Retired => "retired",
        }
    }
}

/// One key without its private part (never shown, never leaves the node).
#[derive(Clone, Debug)]
pub struct KeyInfo {
    pub kid: String,
    pub status: KeyStatus,
    pub created_at: OffsetDateTime,
    pub activates_at: OffsetDateTime,
    pub retired_at: Option<OffsetDateTime>,
    pub unpublish_at: Option<OffsetDateTime>,
}

/// Every key with its status at `now`, newest activation first. The active
/// key is chosen as [`KeySnapshot::signing_key`] chooses it: the newest
/// activated key not yet retired.
pub fn describe(rows: &[SigningKeyRow], now: OffsetDateTime) -> Vec<KeyInfo> {
    let signs = |r: &SigningKeyRow| r.activates_at <= now && r.retired_at.is_none_or(|t| t > now);
    let active = rows
        .iter()
        .filter(|r| signs(r))
        .max_by_key(|r| r.activates_at)
        .map(|r| r.kid.clone());
    rows.iter()
        .map(|r| KeyInfo {
            kid: r.kid.clone(),
            status: if active.as_deref() == Some(r.kid.as_str()) {
                KeyStatus::Active
            } else if r.unpublish_at.is_none_or(|t| t > now) {
                KeyStatus::Published
            } else {
                KeyStatus::Retired
            },
            created_at: r.created_at,
            activates_at: r.activates_at,
            retired_at: r.retired_at,
            unpublish_at: r.unpublish_at,
        })
        .collect()
}

/// [`describe`] of the keys in the database.
pub async fn list(db: &PgPool, now: OffsetDateTime) -> Result<Vec<KeyInfo>, pact_db::Error> {
    Ok(describe(&pact_db::signing_keys::all(db).await?, now))
}

/// Transactions (`begin`, `commit`) fail with sqlx's own error; it is sorted the same way.
impl From<sqlx::Error> for KeyError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(unpublish_at: Option<OffsetDateTime>) -> (String, SigningKeyRow) {
        let key = ProviderKey::generate().unwrap();
        let t = OffsetDateTime::UNIX_EPOCH;
        let row = SigningKeyRow {
            kid: key.kid().to_owned(),
            public_jwk: key.public_jwk(),
            private_sealed: Vec::new(),
            created_at: t,
            activates_at: t,
            retired_at: unpublish_at,
            unpublish_at,
        };
        (key.kid().to_owned(), row)
    }

    fn kids(set: &ProviderKeySet) -> Vec<String> {
        let doc = set.jwks_document();
        let mut kids: Vec<String> = doc["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect();
        kids.sort();
        kids
    }

    /// A retired key leaves the published set at its exact `unpublish_at`,
    /// with no reload: one nanosecond before, it is there; at it, gone.
    #[test]
    fn a_key_is_unpublished_at_the_instant_without_a_reload() {
        let built = OffsetDateTime::UNIX_EPOCH + Duration::days(1);
        let first = built + Duration::seconds(1);
        let second = built + Duration::seconds(2);
        let (live, live_row) = row(None);
        let (a, a_row) = row(Some(first));
        let (b, b_row) = row(Some(second));
        let (_, gone_row) = row(Some(built));
        let published = published_phases(&[live_row, a_row, b_row, gone_row], built).unwrap();
        let snapshot = KeySnapshot {
            signing: Vec::new(),
            published,
        };
        let tick = Duration::nanoseconds(1);
        let mut all = vec![live.clone(), a.clone(), b.clone()];
        all.sort();
        assert_eq!(kids(snapshot.published(built)), all);
        assert_eq!(kids(snapshot.published(first - tick)), all);
        let mut two = vec![live.clone(), b];
        two.sort();
        assert_eq!(kids(snapshot.published(first)), two);
        assert_eq!(kids(snapshot.published(second - tick)), two);
        assert_eq!(kids(snapshot.published(second)), vec![live.clone()]);
        assert_eq!(
            kids(snapshot.published(second + Duration::days(400))),
            vec![live]
        );
    }

    /// The status staff see follows the snapshot's choice: during the
    /// overlap the old key is still active and the new one only published.
    #[test]
    fn a_rotated_key_is_published_then_active_and_the_old_one_retires() {
        let t = OffsetDateTime::UNIX_EPOCH + Duration::days(1);
        let (old, mut old_row) = row(None);
        let (new, mut new_row) = row(None);
        let (gone, mut gone_row) = row(Some(t));
        gone_row.activates_at = t - Duration::days(60);
        old_row.activates_at = t - Duration::days(30);
        new_row.activates_at = t + Duration::minutes(10);
        old_row.retired_at = Some(new_row.activates_at);
        old_row.unpublish_at = Some(new_row.activates_at + Duration::days(30));
        let rows = [new_row, old_row, gone_row];
        let status = |now| {
            describe(&rows, now)
                .into_iter()
                .map(|k| (k.kid, k.status))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            status(t),
            vec![
                (new.clone(), KeyStatus::Published),
                (old.clone(), KeyStatus::Active),
                (gone.clone(), KeyStatus::Retired),
            ]
        );
        assert_eq!(
            status(t + Duration::minutes(10)),
            vec![
                (new, KeyStatus::Active),
                (old, KeyStatus::Published),
                (gone, KeyStatus::Retired),
            ]
        );
    }
}
