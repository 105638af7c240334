//! `pactd keys rewrap`: re-seals every stored secret under a new master key.
//!
//! Everything happens in one transaction with the rows locked, so the database
//! is never half old key, half new: either every value opens with the new key,
//! or (on any error) nothing changed. A value that already opens with the new
//! key is left as it is, so running the command again after a lost answer is
//! harmless. The secrets themselves do not change (signing keys keep their
//! kid), so tokens and receipts signed before the rewrap still verify.

use std::path::Path;

use anyhow::{Context, bail};
use pact_crypto::MasterKey;
use pact_db::PgPool;
use pact_server::merchant::signing::WebhookSecret;

use crate::master_key;

/// What one stored value needed.
enum Resealed {
    /// Sealed under the new key now.
    Now(Vec<u8>),
    /// Already sealed under the new key (an earlier run).
    Already,
}

/// Opens `sealed` with `old` and seals the plaintext with `new`, under the
/// same additional data (the row it belongs to); `None` when neither key opens it.
fn reseal(
    old: &MasterKey,
    new: &MasterKey,
    sealed: &[u8],
    aad: &[u8],
) -> anyhow::Result<Option<Resealed>> {
    match old.open(sealed, aad) {
        Ok(plain) => Ok(Some(Resealed::Now(new.seal(&plain, aad)?))),
        Err(_) if new.open(sealed, aad).is_ok() => Ok(Some(Resealed::Already)),
        Err(_) => Ok(None),
    }
}

#[derive(Default)]
struct Counts {
    resealed: usize,
    already: usize,
}

impl Counts {
    fn add(&mut self, outcome: &Resealed) {
        match outcome {
            Resealed::Now(_) => self.resealed += 1,
            Resealed::Already => self.already += 1,
        }
    }
}

pub async fn run(
    pool: &PgPool,
    old: &MasterKey,
    new_key_file: &Path,
    forget_recovery_codes: bool,
) -> anyhow::Result<()> {
    let new = master_key::read_file(new_key_file)?;
    // The same key twice would "succeed" and leave the operator believing the
    // old key is retired.
    let probe = old.seal(b"probe", b"rewrap")?;
    if new.open(&probe, b"rewrap").is_ok() {
        bail!("the new master key is the current one: generate a new key first");
    }
    let unreadable = |what: String| {
        anyhow::anyhow!(
            "{what} opens with neither the current nor the new master key; nothing was changed"
        )
    };

    let mut tx = pool.begin().await?;
    let mut counts = Counts::default();

    // Recovery codes are checked by an HMAC under the master key: under a
    // new key every unused one would silently stop working. They are
    // forgotten only when the operator says so; people and staff keep their
    // other factors and make new codes on their account pages.
    let codes = pact_db::sealed::unused_recovery_codes(&mut tx).await?;
    if codes > 0 && !forget_recovery_codes {
        bail!(
            "{codes} unused recovery code(s) are keyed by the current master key and would stop \
             working under the new one; nothing was changed. Run again with \
             --forget-recovery-codes to delete them in the same transaction (their owners keep \
             their other factors and make new codes on their account pages)"
        );
    }
    if codes > 0 {
        pact_db::sealed::forget_unused_recovery_codes(&mut tx).await?;
    }

    for (kid, sealed) in pact_db::sealed::lock_signing_keys(&mut tx).await? {
        let outcome = reseal(old, &new, &sealed, kid.as_bytes())?
            .ok_or_else(|| unreadable(format!("signing key {kid}")))?;
        if let Resealed::Now(value) = &outcome {
            pact_db::sealed::set_signing_key(&mut tx, &kid, value).await?;
        }
        counts.add(&outcome);
    }
    for (id, sealed) in pact_db::sealed::lock_totp_secrets(&mut tx).await? {
        let outcome = reseal(old, &new, &sealed, id.as_bytes())?
            .ok_or_else(|| unreadable(format!("the TOTP secret of user {id}")))?;
        if let Resealed::Now(value) = &outcome {
            pact_db::sealed::set_totp_secret(&mut tx, id, value).await?;
        }
        counts.add(&outcome);
    }
    for (id, sealed) in pact_db::sealed::lock_admin_totp_secrets(&mut tx).await? {
        let aad = pact_db::sealed::admin_totp_aad(id);
        let outcome = reseal(old, &new, &sealed, &aad)?
            .ok_or_else(|| unreadable(format!("the TOTP secret of console account {id}")))?;
        if let Resealed::Now(value) = &outcome {
            pact_db::sealed::set_admin_totp_secret(&mut tx, id, value).await?;
        }
        counts.add(&outcome);
    }
    for (id, brand_id, sealed) in pact_db::sealed::lock_webhook_secrets(&mut tx).await? {
        let outcome = match WebhookSecret::open(old, &sealed, &brand_id, id) {
            Ok(secret) => Resealed::Now(secret.seal(&new, &brand_id, id)?),
            Err(_) if WebhookSecret::open(&new, &sealed, &brand_id, id).is_ok() => {
                Resealed::Already
            }
            Err(_) => {
                return Err(unreadable(format!(
                    "webhook secret {id} of brand {brand_id}"
                )));
            }
        };
        if let Resealed::Now(value) = &outcome {
            pact_db::sealed::set_webhook_secret(&mut tx, id, value).await?;
        }
        counts.add(&outcome);
    }
    for (brand_id, sealed) in pact_db::brand_oidc::lock_client_secrets(&mut tx).await? {
        let aad = pact_db::brand_oidc::client_secret_aad(&brand_id);
        let outcome = reseal(old, &new, &sealed, &aad)?
            .ok_or_else(|| unreadable(format!("the OpenID client secret of brand {brand_id}")))?;
        if let Resealed::Now(value) = &outcome {
            pact_db::brand_oidc::set_client_secret(&mut tx, &brand_id, value).await?;
        }
        counts.add(&outcome);
    }
    // Committed with the re-sealing: which key sealed the secrets is part of
    // the key history an auditor reads (counts only, no key material).
    crate::admin_accounts::audit_cli(
        &mut *tx,
        "key.rewrap",
        "master key",
        None,
        serde_json::json!({"resealed": counts.resealed, "already": counts.already,
                           "recovery_codes_forgotten": codes}),
    )
    .await?;
    tx.commit()
        .await
        .context("the rewrap was not committed; nothing was changed")?;
    println!(
        "re-sealed {} secret(s) under the new master key ({} already were). \
         Start every node with the new key; the old one no longer opens them.",
        counts.resealed, counts.already
    );
    if codes > 0 {
        println!("forgot {codes} unused recovery code(s): their owners make new ones.");
    }
    Ok(())
}
