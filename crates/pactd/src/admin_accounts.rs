//! `pactd admin ...`: the staff's console accounts and admin API credentials.
//! Each change is written to the audit log as done from the command line.

use anyhow::{Context, bail};
use pact_db::PgPool;
use pact_server::admin::credential;
use pact_server::admin::role::{Role, brand_limit};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::cli::{AdminCommand, AdminCredentialCommand};

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

/// The command line as an actor of the brand-settings edits the console and
/// the API make too: whoever can run `pactd` with the database's credentials
/// holds every role for every brand.
pub(crate) fn cli_as_actor() -> pact_server::admin::role::Actor {
    pact_server::admin::role::Actor {
        kind: "cli",
        name: cli_actor(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    }
}

/// Who ran the command, as the audit log shows it: the operating-system user.
fn cli_actor() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty() && u.len() <= 64 && !u.chars().any(char::is_control))
        .unwrap_or_else(|| "cli".to_owned())
}

async fn audit(
    db: impl sqlx::PgExecutor<'_>,
    action: &str,
    target: &str,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    audit_cli(db, action, target, None, detail).await
}

/// Where a command ran, as the audit log's origin (`client_addr`): the
/// machine's host name, so an entry says which operator's machine it came
/// from as an API or console entry says which address.
pub(crate) fn cli_origin() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    let name = name.trim();
    (!name.is_empty() && name.len() <= 253 && !name.chars().any(char::is_control))
        .then(|| format!("host {name}"))
}

/// An audit entry for a staff action taken on the command line (the other
/// `pactd` commands use it too, so the log holds every staff action).
pub(crate) async fn audit_cli(
    db: impl sqlx::PgExecutor<'_>,
    action: &str,
    target: &str,
    brand_id: Option<&str>,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    record_cli(db, action, Some(target), brand_id, detail).await
}

/// [`audit_cli`] for an entry without one object acted on: a search or
/// list, as the admin API records its lists (`target` empty).
pub(crate) async fn record_cli(
    db: impl sqlx::PgExecutor<'_>,
    action: &str,
    target: Option<&str>,
    brand_id: Option<&str>,
    detail: serde_json::Value,
) -> anyhow::Result<()> {
    pact_db::audit::record(
        db,
        &pact_db::audit::NewEntry {
            actor_kind: "cli",
            actor: &cli_actor(),
            action,
            target,
            brand_id,
            detail,
            client_addr: cli_origin().as_deref(),
        },
    )
    .await?;
    Ok(())
}

fn parse_role(raw: &str) -> anyhow::Result<Role> {
    Role::parse(raw).with_context(|| format!("invalid role {raw:?}: owner, operator or viewer"))
}

/// The brand limit, every brand known.
async fn checked_brands(pool: &PgPool, brands: &[String]) -> anyhow::Result<Option<Vec<String>>> {
    let limit = brand_limit(brands).map_err(anyhow::Error::msg)?;
    if let Some(list) = &limit {
        for b in list {
            if pact_db::brands::find(pool, b).await?.is_none() {
                bail!("no brand {b:?}");
            }
        }
    }
    Ok(limit)
}

fn brands_text(brands: Option<&[String]>) -> String {
    brands.map_or_else(|| "all-brands".to_owned(), |b| b.join(","))
}

pub async fn run(pool: &PgPool, c: &AdminCommand) -> anyhow::Result<()> {
    match c {
        AdminCommand::Add { email, role, brand } => {
            let role = parse_role(role)?;
            let email = crate::admin::normalise_email(email)?;
            let brands = checked_brands(pool, brand).await?;
            let (password, generated) = crate::admin::password_for_new_user()?;
            let hash = pact_server::accounts::password::hash(&password)
                .map_err(|e| anyhow::anyhow!("cannot use that password: {e}"))?;
            let mut tx = pool.begin().await?;
            let admin = match pact_db::admins::insert(
                &mut *tx,
                Uuid::new_v4(),
                &email,
                &hash,
                role,
                brands.as_deref(),
            )
            .await
            {
                Ok(a) => a,
                Err(e) if pact_db::is_unique_violation(&e) => {
                    bail!("there is already an admin with email {email:?}")
                }
                Err(e) => return Err(e.into()),
            };
            audit(
                &mut *tx,
                "admin.add",
                &admin.email,
                json!({"role": admin.role, "brands": admin.brands}),
            )
            .await?;
            tx.commit().await?;
            println!(
                "added admin {} ({}, {}); an authenticator app is set up at the first console sign-in",
                admin.email,
                admin.role,
                brands_text(admin.brands.as_deref())
            );
            if generated {
                println!("password: {password}");
                println!("(shown once; it is stored only as an argon2id hash)");
            }
        }
        AdminCommand::List => {
            for a in pact_db::admins::list(pool).await? {
                let passkeys = pact_db::admin_factors::count_passkeys(pool, a.id).await?;
                let factor = match (a.has_totp(), passkeys) {
                    (true, 0) => "totp".to_owned(),
                    (true, n) => format!("totp+{n}-passkey(s)"),
                    (false, 0) => "no-totp-yet".to_owned(),
                    (false, n) => format!("{n}-passkey(s)"),
                };
                let state = a.disabled_at.map_or_else(
                    || "-".to_owned(),
                    |t| format!("disabled-since {}", rfc3339(t)),
                );
                println!(
                    "{}\t{}\t{}\t{factor}\t{state}",
                    a.email,
                    a.role,
                    brands_text(a.brands.as_deref())
                );
            }
        }
        AdminCommand::Remove { email } => {
            let email = crate::admin::normalise_email(email)?;
            let mut tx = pool.begin().await?;
            if !pact_db::admins::delete(&mut *tx, &email).await? {
                bail!("no admin with email {email:?}");
            }
            audit(&mut *tx, "admin.remove", &email, json!({})).await?;
            tx.commit().await?;
            println!("removed admin {email}; their console sessions are ended");
        }
        AdminCommand::ResetFactors { email } => {
            let email = crate::admin::normalise_email(email)?;
            let mut tx = pool.begin().await?;
            let Some(admin) = pact_db::admins::find_by_email(&mut *tx, &email).await? else {
                bail!("no admin with email {email:?}");
            };
            pact_db::admins::set_totp(&mut *tx, admin.id, None).await?;
            let passkeys = pact_db::admin_factors::passkeys_of(&mut *tx, admin.id).await?;
            for p in &passkeys {
                pact_db::admin_factors::delete_passkey(&mut *tx, admin.id, p.id).await?;
            }
            pact_db::admin_factors::replace_recovery_codes(&mut tx, admin.id, &[]).await?;
            // A session signed in with the old factors must not outlive them.
            let sessions = pact_db::admins::delete_sessions_of(&mut *tx, admin.id).await?;
            audit(
                &mut *tx,
                "admin.reset_factors",
                &email,
                json!({ "passkeys": passkeys.len(), "sessions": sessions }),
            )
            .await?;
            tx.commit().await?;
            println!(
                "removed the second factors of {email} ({} passkey(s)); {sessions} session(s) ended; \
                 the next sign-in sets up an authenticator app",
                passkeys.len()
            );
        }
        AdminCommand::Credential(c) => credential_command(pool, c).await?,
    }
    Ok(())
}

async fn credential_command(pool: &PgPool, c: &AdminCredentialCommand) -> anyhow::Result<()> {
    match c {
        AdminCredentialCommand::Add { name, role, brand } => {
            let role = parse_role(role)?;
            if !credential::is_valid_name(name) {
                bail!("invalid --name {name:?}: 1–64 of a-z, 0-9, '-', '_', '.'");
            }
            let brands = checked_brands(pool, brand).await?;
            let (secret, hash) = credential::new_secret();
            let mut tx = pool.begin().await?;
            let cred = match pact_db::admins::insert_credential(
                &mut *tx,
                Uuid::new_v4(),
                name,
                role,
                brands.as_deref(),
                &hash,
            )
            .await
            {
                Ok(c) => c,
                Err(e) if pact_db::is_unique_violation(&e) => {
                    bail!("there is already a credential named {name:?}")
                }
                Err(e) => return Err(e.into()),
            };
            audit(
                &mut *tx,
                "credential.add",
                &cred.name,
                json!({"role": cred.role, "brands": cred.brands}),
            )
            .await?;
            tx.commit().await?;
            println!(
                "added admin API credential {} ({}, {})",
                cred.name,
                cred.role,
                brands_text(cred.brands.as_deref())
            );
            println!("{secret}");
            println!(
                "(shown once: send it as `Authorization: Bearer <secret>`; only its hash is stored)"
            );
        }
        AdminCredentialCommand::List => {
            for c in pact_db::admins::list_credentials(pool).await? {
                let state = match c.revoked_at {
                    Some(t) => format!("revoked {}", rfc3339(t)),
                    None => "active".to_owned(),
                };
                println!(
                    "{}\t{}\t{}\t{state}\tlast-used {}",
                    c.name,
                    c.role,
                    brands_text(c.brands.as_deref()),
                    c.last_used_at.map_or_else(|| "never".to_owned(), rfc3339)
                );
            }
        }
        AdminCredentialCommand::Revoke { name } => {
            let mut tx = pool.begin().await?;
            if !pact_db::admins::revoke_credential(&mut *tx, name).await? {
                bail!("no active credential named {name:?}");
            }
            audit(&mut *tx, "credential.revoke", name, json!({})).await?;
            tx.commit().await?;
            println!("revoked admin API credential {name}: refused from the next request on");
        }
    }
    Ok(())
}
