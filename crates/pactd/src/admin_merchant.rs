//! Admin commands for a merchant's own agent: the agent URL and its webhook
//! secret, the tools behind the gateway, and API credentials.

use anyhow::{Context, bail};
use pact_crypto::MasterKey;
use pact_db::PgPool;
use pact_db::ids::BrandId;
use pact_server::admin::brand_settings;
use pact_server::merchant::credentials;
use pact_server::merchant::signing::WebhookSecret;
use serde_json::json;
use sqlx::PgConnection;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::admin_accounts::audit_cli;
use crate::cli::{BrandSetArgs, CredentialCommand, ToolCommand};

/// An agent or tool URL: https, no credentials or fragment, not a private
/// address (the JWKS rules). Loopback is accepted here, as for JWKS URIs;
/// the server calls it only when it runs with `--allow-loopback-jwks` or as
/// `pactd dev`, and checks every URL again, per call, by its resolved address.
pub fn check_merchant_url(what: &str, url: &str) -> anyhow::Result<()> {
    pact_jose::check_jwks_uri(url, true).map_err(|e| anyhow::anyhow!("invalid {what}: {e}"))?;
    if pact_jose::check_jwks_uri(url, false).is_err() {
        eprintln!(
            "note: {what} {url} is a loopback address; pactd calls it only when it runs with \
             --allow-loopback-jwks (or as `pactd dev`)"
        );
    }
    Ok(())
}

/// `import-mcp --url`: the command itself calls the server, so a loopback
/// URL is refused here, before any connection, unless `--allow-loopback` is
/// given, and the message names the MCP server URL and that flag (the shared
/// guard's own words are about a jwksUri, issue 30, item 10).
fn check_import_url(url: &str, allow_loopback: bool) -> anyhow::Result<()> {
    pact_jose::check_jwks_uri(url, true).map_err(|e| {
        let why = e.to_string();
        let why = why.strip_prefix("invalid jwksUri: ").unwrap_or(&why);
        let why = why.replace("jwksUri host", "its host");
        anyhow::anyhow!("invalid --url {url} (the MCP server URL): {why}")
    })?;
    if pact_jose::check_jwks_uri(url, false).is_err() {
        if !allow_loopback {
            bail!(
                "the MCP server URL {url} is a loopback address; to import from a development \
                 server on this machine, add --allow-loopback"
            );
        }
        eprintln!(
            "note: the MCP server URL {url} is a loopback address; the server calls it only \
             when it runs with --allow-loopback-jwks (or as `pactd dev`)"
        );
    }
    Ok(())
}

/// Makes, seals and stores a new current secret in the caller's
/// transaction, retiring the old one at `retire_at`, with its audit entry
/// (`action`; the secret's row id, never the secret); returns the `whsec_…`
/// to show once.
async fn new_secret(
    tx: &mut PgConnection,
    master: &MasterKey,
    brand_id: &BrandId,
    retire_at: OffsetDateTime,
    action: &str,
) -> anyhow::Result<String> {
    let secret = WebhookSecret::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
    let id = Uuid::new_v4();
    let sealed = secret
        .seal(master, brand_id, id)
        .map_err(|e| anyhow::anyhow!("sealing the secret: {e}"))?;
    pact_db::merchant::retire_current_secret(&mut *tx, brand_id, retire_at).await?;
    pact_db::merchant::insert_secret(&mut *tx, id, brand_id, &sealed).await?;
    audit_cli(
        &mut *tx,
        action,
        brand_id,
        Some(brand_id),
        json!({"secret_id": id, "previous_signs_until": retire_at.format(&Rfc3339).unwrap_or_default()}),
    )
    .await?;
    Ok(secret.to_whsec())
}

/// The agent part of `brand set`; true when something was changed.
pub async fn set_agent(
    pool: &PgPool,
    master: impl FnOnce() -> anyhow::Result<std::sync::Arc<MasterKey>>,
    a: &BrandSetArgs,
) -> anyhow::Result<bool> {
    let brand_id = &a.brand_id;
    if a.demo_agent {
        let mut tx = pool.begin().await?;
        pact_db::merchant::use_demo_agent(&mut *tx, brand_id).await?;
        audit_cli(
            &mut *tx,
            "brand.demo_agent",
            brand_id,
            Some(brand_id),
            json!({}),
        )
        .await?;
        tx.commit().await?;
        println!("{brand_id}: answered by the built-in demo agent");
        return Ok(true);
    }
    if let Some(url) = &a.agent_url {
        check_merchant_url("--agent-url", url)?;
        // The URL, the first secret and their entries commit together.
        let mut tx = pool.begin().await?;
        pact_db::merchant::set_agent(
            &mut *tx,
            brand_id,
            url,
            a.agent_timeout_ms,
            a.tool_timeout_ms,
        )
        .await?;
        audit_cli(
            &mut *tx,
            "brand.agent_url",
            brand_id,
            Some(brand_id),
            json!({"url": url, "agent_timeout_ms": a.agent_timeout_ms,
                   "tool_timeout_ms": a.tool_timeout_ms}),
        )
        .await?;
        let shown = if pact_db::merchant::has_current_secret(&mut *tx, brand_id).await? {
            None
        } else {
            let master = master()?;
            Some(
                new_secret(
                    &mut tx,
                    &master,
                    brand_id,
                    crate::admin::now(),
                    "webhook_secret.create",
                )
                .await?,
            )
        };
        tx.commit().await?;
        println!("{brand_id}: answered by the agent at {url}");
        if let Some(shown) = shown {
            println!("webhook signing secret (shown once; verify pactd's calls with it):");
            println!("{shown}");
        }
        return Ok(true);
    }
    if a.agent_timeout_ms.is_some() || a.tool_timeout_ms.is_some() {
        let mut tx = pool.begin().await?;
        if !pact_db::merchant::set_timeouts(
            &mut *tx,
            brand_id,
            a.agent_timeout_ms,
            a.tool_timeout_ms,
        )
        .await?
        {
            bail!("brand {brand_id:?} has no agent URL; give --agent-url");
        }
        audit_cli(
            &mut *tx,
            "brand.agent_timeouts",
            brand_id,
            Some(brand_id),
            json!({"agent_timeout_ms": a.agent_timeout_ms, "tool_timeout_ms": a.tool_timeout_ms}),
        )
        .await?;
        tx.commit().await?;
        println!("{brand_id}: timeouts updated");
        return Ok(true);
    }
    Ok(false)
}

/// `24h`, `30m`, `90s`, `2d` (or plain seconds).
pub fn parse_duration(raw: &str) -> anyhow::Result<time::Duration> {
    let raw = raw.trim();
    let (num, unit) = raw.split_at(raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len()));
    let n: i64 = num
        .parse()
        .with_context(|| format!("invalid duration {raw:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("invalid duration {raw:?}: use a number with s, m, h or d"),
    };
    Ok(time::Duration::seconds(secs))
}

pub async fn rotate_secret(
    pool: &PgPool,
    master: &MasterKey,
    brand_id: &BrandId,
    grace: &str,
) -> anyhow::Result<()> {
    let grace = parse_duration(grace)?;
    if pact_db::merchant::find_agent(pool, brand_id)
        .await?
        .is_none()
    {
        bail!(
            "brand {brand_id:?} has no agent URL; set one with `pactd brand set {brand_id} --agent-url URL`"
        );
    }
    let retire_at = crate::admin::now() + grace;
    let mut tx = pool.begin().await?;
    let shown = new_secret(
        &mut tx,
        master,
        brand_id,
        retire_at,
        "webhook_secret.rotate",
    )
    .await?;
    tx.commit().await?;
    println!(
        "new webhook signing secret for {brand_id} (shown once); the previous one also signs until {}:",
        retire_at.format(&Rfc3339).unwrap_or_default()
    );
    println!("{shown}");
    Ok(())
}

/// A refused brand-settings edit as the command line reports it.
pub(crate) fn edit_error(e: brand_settings::EditError) -> anyhow::Error {
    match e {
        brand_settings::EditError::Invalid(m) | brand_settings::EditError::Conflict(m) => {
            anyhow::anyhow!(m)
        }
        brand_settings::EditError::Missing => anyhow::anyhow!("not found"),
        brand_settings::EditError::Db(e) => anyhow::Error::new(e),
    }
}

pub async fn tool(pool: &PgPool, c: &ToolCommand) -> anyhow::Result<()> {
    match c {
        ToolCommand::Add {
            brand_id,
            name,
            scope,
            url,
            description,
            enforce,
            input_schema,
            summary,
        } => {
            let brand = pact_db::brands::find(pool, brand_id)
                .await?
                .with_context(|| format!("no brand {brand_id:?}"))?;
            check_merchant_url("--url", url)?;
            let schema = input_schema
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
                .transpose()
                .context("invalid --input-schema JSON")?;
            // Checked here too, to name the flag; brand_settings checks it again.
            if let Some(schema) = &schema {
                pact_server::tool_schema::check(schema)
                    .map_err(|e| anyhow::anyhow!("invalid --input-schema: {e}"))?;
            }
            let mut tx = pool.begin().await?;
            brand_settings::upsert_tool(
                &mut tx,
                &crate::admin_accounts::cli_as_actor(),
                crate::admin_accounts::cli_origin().as_deref(),
                &brand,
                brand_settings::ToolDefinition {
                    name: name.clone(),
                    scope: scope.clone(),
                    url: url.clone(),
                    description: description.clone(),
                    enforce: enforce.clone(),
                    input_schema: schema,
                    summary: summary.clone(),
                },
            )
            .await
            .map_err(edit_error)?;
            tx.commit().await?;
            println!(
                "tool {name} on {brand_id}: {} → {url}",
                scope.as_deref().unwrap_or("public")
            );
        }
        ToolCommand::SetRules {
            brand_id,
            name,
            enforce,
            summary,
        } => {
            let brand = pact_db::brands::find(pool, brand_id)
                .await?
                .with_context(|| format!("no brand {brand_id:?}"))?;
            let mut tx = pool.begin().await?;
            brand_settings::set_tool_rules(
                &mut tx,
                &crate::admin_accounts::cli_as_actor(),
                crate::admin_accounts::cli_origin().as_deref(),
                &brand,
                name,
                enforce.clone(),
                summary.clone(),
            )
            .await
            .map_err(|e| match e {
                brand_settings::EditError::Missing => {
                    anyhow::anyhow!("brand {brand_id:?} has no tool {name:?}")
                }
                other => edit_error(other),
            })?;
            tx.commit().await?;
            println!(
                "set the rules of tool {name} on {brand_id}: {}",
                enforce.join(", ")
            );
        }
        ToolCommand::List { brand_id } => {
            for t in pact_db::merchant::list_tools(pool, brand_id).await? {
                let scope = if t.mapped {
                    t.scope.as_deref().unwrap_or("public")
                } else {
                    "UNMAPPED"
                };
                let at = match &t.remote_name {
                    Some(remote) => format!("mcp:{remote}@{}", t.url),
                    None => t.url.clone(),
                };
                println!(
                    "{}\t{scope}\t{at}\t{}\t{}",
                    t.name, t.enforce, t.description
                );
            }
        }
        ToolCommand::SetScope {
            brand_id,
            name,
            scope,
            public,
        } => {
            let scope = if *public { None } else { scope.as_deref() };
            let mut tx = pool.begin().await?;
            if let Some(s) = scope {
                brand_settings::require_offered_scope(&mut tx, brand_id, s)
                    .await
                    .map_err(edit_error)?;
            }
            if !pact_db::merchant::set_tool_scope(&mut *tx, brand_id, name, scope).await? {
                bail!("brand {brand_id:?} has no tool {name:?}");
            }
            audit_cli(
                &mut *tx,
                "tool.set_scope",
                name,
                Some(brand_id),
                serde_json::json!({"scope": scope}),
            )
            .await?;
            tx.commit().await?;
            println!(
                "tool {name} on {brand_id}: {}",
                scope.unwrap_or("public (anyone's turn may call it)")
            );
        }
        ToolCommand::ImportMcp { .. } => {
            bail!("import-mcp needs the master key; run through `pactd brand tool import-mcp`")
        }
        ToolCommand::Remove { brand_id, name } => {
            let brand = pact_db::brands::find(pool, brand_id)
                .await?
                .with_context(|| format!("no brand {brand_id:?}"))?;
            let mut tx = pool.begin().await?;
            brand_settings::remove_tool(
                &mut tx,
                &crate::admin_accounts::cli_as_actor(),
                crate::admin_accounts::cli_origin().as_deref(),
                &brand,
                name,
            )
            .await
            .map_err(|e| match e {
                brand_settings::EditError::Missing => {
                    anyhow::anyhow!("brand {brand_id:?} has no tool {name:?}")
                }
                other => edit_error(other),
            })?;
            tx.commit().await?;
            println!("removed tool {name} from {brand_id}");
        }
    }
    Ok(())
}

/// `brand tool import-mcp`: reads the server's tools (signed with the
/// brand's webhook secret, so the server can tell the request is pactd's),
/// checks them all, and registers them in one transaction with its audit
/// entry; prints what is still unmapped and how to map it.
pub async fn import_mcp(
    pool: &PgPool,
    master: &MasterKey,
    brand_id: &BrandId,
    url: &str,
    scope_map: &[String],
    allow_loopback: bool,
) -> anyhow::Result<()> {
    use pact_server::merchant::mcp_import;
    let edit = edit_error;
    pact_db::brands::find(pool, brand_id)
        .await?
        .with_context(|| format!("no brand {brand_id:?}"))?;
    check_import_url(url, allow_loopback)?;
    let pairs = mcp_import::parse_scope_map(scope_map).map_err(edit)?;
    let now = crate::admin::now();
    let mut secrets = Vec::new();
    for r in pact_db::merchant::signing_secrets(pool, brand_id, now).await? {
        secrets.push(
            WebhookSecret::open(master, &r.sealed, brand_id, r.id)
                .map_err(|e| anyhow::anyhow!("opening the webhook secret: {e}"))?,
        );
    }
    if secrets.is_empty() {
        bail!(
            "brand {brand_id:?} has no webhook secret to sign with; set its agent first \
             (pactd brand set {brand_id} --agent-url URL)"
        );
    }
    let http = pact_server::merchant::http::build_client(allow_loopback)
        .context("building the HTTP client")?;
    let tools = mcp_import::fetch(
        &http,
        url,
        allow_loopback,
        &secrets,
        brand_id,
        now.unix_timestamp(),
        std::time::Duration::from_secs(15),
    )
    .await
    .map_err(edit)?;
    let mut tx = pool.begin().await?;
    let report = mcp_import::apply(&mut tx, brand_id, url, &tools, &pairs)
        .await
        .map_err(edit)?;
    let mut detail = report.to_json();
    detail["url"] = serde_json::json!(url);
    audit_cli(&mut *tx, "tool.import_mcp", url, Some(brand_id), detail).await?;
    tx.commit().await?;
    for (name, scope) in &report.added {
        println!(
            "added {name}: {}",
            scope
                .as_deref()
                .unwrap_or("UNMAPPED (refused for everyone)")
        );
    }
    for name in &report.updated {
        println!("updated {name} (description and input schema)");
    }
    for (name, old, new) in &report.rescoped {
        println!(
            "scope of {name}: {} → {new}",
            old.as_deref().unwrap_or("unmapped")
        );
    }
    for name in &report.gone {
        println!(
            "note: the server no longer lists {name}; calls to it will fail \
             (pactd brand tool remove {brand_id} {name})"
        );
    }
    if !report.unmapped.is_empty() {
        println!(
            "{} tool(s) stay unusable until you give each a scope:",
            report.unmapped.len()
        );
        for name in &report.unmapped {
            println!("  pactd brand tool set-scope {brand_id} {name} SCOPE   (or --public)");
        }
    }
    Ok(())
}

pub async fn credential(pool: &PgPool, c: &CredentialCommand) -> anyhow::Result<()> {
    match c {
        CredentialCommand::Add { brand_id, name } => {
            pact_db::brands::find(pool, brand_id)
                .await?
                .with_context(|| format!("no brand {brand_id:?}"))?;
            if name.trim().is_empty() || name.len() > 200 {
                bail!("--name must be 1–200 characters");
            }
            let c = credentials::generate().context("random generator failed")?;
            let mut tx = pool.begin().await?;
            pact_db::merchant::insert_credential(
                &mut *tx,
                &c.client_id,
                brand_id,
                name,
                &c.secret_hash,
            )
            .await?;
            // The client id and name; the secret is only ever printed.
            audit_cli(
                &mut *tx,
                "introspection_credential.add",
                &c.client_id,
                Some(brand_id),
                json!({"name": name}),
            )
            .await?;
            tx.commit().await?;
            println!("client_id: {}", c.client_id);
            println!("client_secret: {}", c.secret);
            println!("(the secret is shown once; use HTTP Basic at the brand's /oauth/introspect)");
        }
        CredentialCommand::List { brand_id } => {
            for c in pact_db::merchant::list_credentials(pool, brand_id).await? {
                let state = match c.revoked_at {
                    Some(t) => format!("revoked {}", t.format(&Rfc3339).unwrap_or_default()),
                    None => "active".to_owned(),
                };
                println!(
                    "{}\t{}\t{}\t{state}",
                    c.client_id,
                    c.name,
                    c.created_at.format(&Rfc3339).unwrap_or_default()
                );
            }
        }
        CredentialCommand::Revoke {
            brand_id,
            client_id,
        } => {
            let mut tx = pool.begin().await?;
            if !pact_db::merchant::revoke_credential(&mut *tx, brand_id, client_id).await? {
                bail!("brand {brand_id:?} has no active credential {client_id:?}");
            }
            audit_cli(
                &mut *tx,
                "introspection_credential.revoke",
                client_id,
                Some(brand_id),
                json!({}),
            )
            .await?;
            tx.commit().await?;
            println!("revoked {client_id}");
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h").unwrap(), time::Duration::hours(24));
        assert_eq!(parse_duration("30m").unwrap(), time::Duration::minutes(30));
        assert_eq!(parse_duration("90").unwrap(), time::Duration::seconds(90));
        assert_eq!(parse_duration("0s").unwrap(), time::Duration::ZERO);
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("h").is_err());
    }
}
