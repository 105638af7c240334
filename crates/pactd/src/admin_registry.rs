//! `pactd registry …` and `pactd agent block-host …`: trusted registries of
//! personal agents and blocked hosts (PACT §3.1, issue 31). Each action is
//! the admin ops function the API and console call too.

use anyhow::anyhow;
use pact_db::PgPool;
use pact_server::admin::ops::{self, OpsError};

use crate::admin::now;
use crate::admin_accounts::{cli_as_actor, cli_origin};
use crate::cli::RegistryCommand;

fn ops_error(e: OpsError, missing: &str) -> anyhow::Error {
    match e {
        OpsError::Missing => anyhow!("{missing}"),
        other => crate::admin_merchant::edit_error(other),
    }
}

pub async fn run(pool: &PgPool, c: &RegistryCommand) -> anyhow::Result<()> {
    match c {
        RegistryCommand::Add {
            name,
            url,
            keys,
            refresh_secs,
            allow_loopback,
        } => {
            let text = std::fs::read_to_string(keys)
                .map_err(|e| anyhow!("cannot read {}: {e}", keys.display()))?;
            let keys: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| anyhow!("{} is not JSON: {e}", keys.display()))?;
            let mut tx = pool.begin().await?;
            let added = ops::registries::add(
                &mut tx,
                &cli_as_actor(),
                cli_origin().as_deref(),
                name,
                url,
                &keys,
                *refresh_secs,
                *allow_loopback,
                now(),
            )
            .await
            .map_err(|e| ops_error(e, "not found"))?;
            tx.commit().await?;
            println!(
                "registry {} added; its list is fetched every {} s (now: pactd registry refresh {})",
                added.name, added.refresh_seconds, added.name
            );
        }
        RegistryCommand::List => {
            for r in pact_db::registries::list(pool).await? {
                let state = match (&r.last_error, r.list_expires_at) {
                    (Some(e), _) => format!("last fetch failed: {e}"),
                    (None, Some(exp)) => format!("list in force until {exp}"),
                    (None, None) => "never fetched".to_owned(),
                };
                println!("{}\t{}\t{} listed\t{}", r.name, r.url, r.listed, state);
            }
        }
        RegistryCommand::Refresh {
            name,
            allow_loopback,
        } => {
            let now = now();
            let registry = pact_db::registries::claim(pool, name, now)
                .await?
                .ok_or_else(|| anyhow!("no registry named {name:?}"))?;
            let jwks = pact_jose::JwksPolicy {
                allow_loopback: *allow_loopback,
                ..pact_jose::JwksPolicy::default()
            };
            // Recorded with its outcome, as the admin API records it.
            let applied = ops::registries::refresh(
                pool,
                &jwks,
                &cli_as_actor(),
                cli_origin().as_deref(),
                &registry,
                now,
            )
            .await?
            .map_err(|reason| anyhow!("{name}: {reason}"))?;
            println!(
                "{name}: {} listed, {} skipped (staff's own, another registry's, or a blocked host), {} no longer listed ({} grants revoked)",
                applied.listed,
                applied.skipped,
                applied.delisted.len(),
                applied.revoked_grants
            );
        }
        RegistryCommand::Remove { name } => {
            let mut tx = pool.begin().await?;
            let (agents, grants) = ops::registries::remove(
                &mut tx,
                &cli_as_actor(),
                cli_origin().as_deref(),
                name,
                now(),
            )
            .await
            .map_err(|e| ops_error(e, &format!("no registry named {name:?}")))?;
            tx.commit().await?;
            println!("removed {name}: {agents} agents no longer listed, {grants} grants revoked");
        }
    }
    Ok(())
}

pub async fn block_host(pool: &PgPool, host: &str, reason: &str) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    let (host, disabled, revoked) = ops::agents::block_host(
        &mut tx,
        &cli_as_actor(),
        cli_origin().as_deref(),
        host,
        Some(reason),
        now(),
    )
    .await
    .map_err(|e| ops_error(e, "not found"))?;
    tx.commit().await?;
    println!(
        "blocked {host}: {} agents disabled, {revoked} grants revoked",
        disabled.len()
    );
    Ok(())
}

pub async fn unblock_host(pool: &PgPool, host: &str) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    let host = ops::agents::unblock_host(&mut tx, &cli_as_actor(), cli_origin().as_deref(), host)
        .await
        .map_err(|e| ops_error(e, &format!("{host:?} is not blocked")))?;
    tx.commit().await?;
    println!("unblocked {host} (agents it disabled stay disabled: pactd agent enable)");
    Ok(())
}
