//! The admin commands: they talk to the database directly.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use pact_db::ids::{AgentIssuer, BrandId, UserSub};
use pact_db::{PgPool, ResultExt};
use pact_server::admin::ops::customers::{self, Action};
use pact_server::admin::ops::{self, scopes::ScopeDefinition};
use pact_server::agent::demo_tools::DEMO_SCOPES;
use pact_server::domain::authz_details::{self, DetailsType};
use pact_server::who;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::admin_accounts::audit_cli as audit;
use crate::cli::{
    AgentCommand, BrandCommand, BrandSetArgs, Cli, Command, DetailsTypeCommand, GrantsCommand,
    KeysCommand, ReceiptsCommand, ScopeCommand, UserCommand,
};
use crate::master_key;

pub async fn run(
    pool: &PgPool,
    cli: &Cli,
    data_dir: &Path,
    command: &Command,
) -> anyhow::Result<()> {
    match command {
        Command::Migrate => println!("migrations applied"),
        Command::Brand(c) => brand(pool, cli, data_dir, c).await?,
        Command::Agent(c) => agent(pool, c).await?,
        Command::Registry(c) => crate::admin_registry::run(pool, c).await?,
        Command::Keys(c) => keys(pool, cli, data_dir, c).await?,
        Command::Grants(c) => grants(pool, c).await?,
        Command::Receipts(c) => receipts(pool, c).await?,
        Command::User(c) => user(pool, c).await?,
        Command::Admin(c) => crate::admin_accounts::run(pool, c).await?,
        Command::Serve(_) | Command::Dev(_) | Command::Healthcheck(_) => {}
    }
    Ok(())
}

/// The time for an operator command: the node's clock (`pact_clock`), as
/// `serve` reads it, never the system clock directly (clippy.toml).
pub(crate) fn now() -> OffsetDateTime {
    pact_clock::Clock::system().now()
}

/// The demo brand, its scopes and its authorization_details type, seeded once.
pub async fn seed_demo(pool: &PgPool) -> anyhow::Result<()> {
    let demo = BrandId::parse("demo")?;
    let created = pact_db::brands::insert_if_missing(
        pool,
        &demo,
        "Demo Store",
        "A small demo store: opening hours, returns and orders.",
    )
    .await?;
    if created || pact_db::scopes::list(pool, &demo).await?.is_empty() {
        for (id, description) in DEMO_SCOPES {
            pact_db::scopes::upsert(pool, &demo, id, description, false).await?;
        }
        let types = serde_json::to_value(authz_details::demo_types())?;
        pact_db::brands::set_setting(pool, &demo, authz_details::SETTINGS_KEY, &types).await?;
        tracing::info!("seeded the demo brand `demo` with its scopes");
    }
    Ok(())
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

async fn brand(pool: &PgPool, cli: &Cli, data_dir: &Path, c: &BrandCommand) -> anyhow::Result<()> {
    match c {
        BrandCommand::Add {
            brand_id,
            name,
            description,
        } => {
            // The id was parsed by clap (`BrandId::parse`); the texts follow
            // the card's rules, as `brand set --name --description` does.
            let (name, description) = (name.trim(), description.trim());
            pact_server::admin::brand_settings::check_new_card_text(name, description)
                .map_err(crate::admin_merchant::edit_error)?;
            let mut tx = pool.begin().await?;
            let b = pact_db::brands::insert(&mut *tx, brand_id, name, description)
                .await
                .on_constraint("brands_pkey", |_| {
                    anyhow!("brand {brand_id:?} already exists")
                })?;
            audit(
                &mut *tx,
                "brand.add",
                &b.id,
                Some(&b.id),
                serde_json::json!({"name": b.name, "description": b.description}),
            )
            .await?;
            tx.commit().await?;
            println!("added brand {} ({})", b.id, b.name);
        }
        BrandCommand::List => {
            for b in pact_db::brands::list(pool).await? {
                println!("{}\t{}\t{}", b.id, b.name, b.description);
            }
        }
        BrandCommand::Scope(ScopeCommand::Add {
            brand_id,
            scope_id,
            description,
            requires_mfa,
            unverified_allowed,
        }) => {
            require_brand(pool, brand_id).await?;
            // The same function as the API's and the console's scope edit.
            let mut tx = pool.begin().await?;
            let def = ScopeDefinition {
                scope_id: scope_id.clone(),
                description: description.clone(),
                requires_mfa: *requires_mfa,
                unverified_allowed: *unverified_allowed,
            };
            let (who, at) = cli_who();
            ops::scopes::upsert(&mut tx, &who, at.as_deref(), brand_id, &def)
                .await
                .map_err(crate::admin_merchant::edit_error)?;
            tx.commit().await?;
            println!("scope {scope_id} on {brand_id}: {description}");
        }
        BrandCommand::Scope(ScopeCommand::Remove { brand_id, scope_id }) => {
            let mut tx = pool.begin().await?;
            let (who, at) = cli_who();
            if !ops::scopes::remove(&mut tx, &who, at.as_deref(), brand_id, scope_id)
                .await
                .map_err(crate::admin_merchant::edit_error)?
            {
                bail!("brand {brand_id:?} has no scope {scope_id:?}");
            }
            tx.commit().await?;
            println!(
                "removed scope {scope_id} from {brand_id} (existing grants keep it until they end or are revoked)"
            );
        }
        BrandCommand::Scope(ScopeCommand::List { brand_id }) => {
            require_brand(pool, brand_id).await?;
            for s in pact_db::scopes::list(pool, brand_id).await? {
                let mfa = if s.requires_mfa { "\trequires-mfa" } else { "" };
                println!("{}\t{}{mfa}", s.scope_id, s.description);
            }
        }
        BrandCommand::DetailsType(c) => details_type(pool, c).await?,
        BrandCommand::Set(args) => {
            require_brand(pool, &args.brand_id).await?;
            // Checked against the database before anything is sealed with it;
            // its error (no key, or another database's) counts only if a
            // setting needs the key.
            let master = master_key::for_admin_on(cli, data_dir, pool).await;
            let key = || {
                master
                    .as_ref()
                    .map(std::sync::Arc::clone)
                    .map_err(|e| anyhow::anyhow!("{e:#}"))
            };
            let agent_changed = crate::admin_merchant::set_agent(pool, key, args).await?;
            let oidc_changed = crate::admin_oidc::set(pool, key, args).await?;
            let card_changed = brand_card_text(pool, args).await?;
            if !(agent_changed || oidc_changed || card_changed) || has_settings(args) {
                brand_set(pool, args).await?;
            }
        }
        BrandCommand::WebhookSecret(crate::cli::WebhookSecretCommand::Rotate {
            brand_id,
            grace,
        }) => {
            let master = master_key::for_admin_on(cli, data_dir, pool).await?;
            crate::admin_merchant::rotate_secret(pool, &master, brand_id, grace).await?;
        }
        BrandCommand::Tool(crate::cli::ToolCommand::ImportMcp {
            brand_id,
            url,
            scope_map,
            allow_loopback,
        }) => {
            let master = master_key::for_admin_on(cli, data_dir, pool).await?;
            crate::admin_merchant::import_mcp(
                pool,
                &master,
                brand_id,
                url,
                scope_map,
                *allow_loopback,
            )
            .await?;
        }
        BrandCommand::Tool(c) => crate::admin_merchant::tool(pool, c).await?,
        BrandCommand::Credential(c) => crate::admin_merchant::credential(pool, c).await?,
    }
    Ok(())
}

async fn require_brand(
    pool: &PgPool,
    brand_id: &BrandId,
) -> anyhow::Result<pact_db::brands::Brand> {
    pact_db::brands::find(pool, brand_id)
        .await?
        .with_context(|| format!("no brand {brand_id:?}"))
}

async fn details_type(pool: &PgPool, c: &DetailsTypeCommand) -> anyhow::Result<()> {
    use pact_server::admin::brand_settings;
    let brand_id = match c {
        DetailsTypeCommand::Add { brand_id, .. }
        | DetailsTypeCommand::Remove { brand_id, .. }
        | DetailsTypeCommand::List { brand_id } => brand_id,
    };
    let brand = require_brand(pool, brand_id).await?;
    let actor = crate::admin_accounts::cli_as_actor();
    let origin = crate::admin_accounts::cli_origin();
    let origin = origin.as_deref();
    match c {
        DetailsTypeCommand::List { .. } => {
            for (name, t) in &authz_details::types_from_settings(&brand.settings) {
                println!("{name}\t{}\t{}", t.scope, serde_json::to_string(t)?);
            }
        }
        DetailsTypeCommand::Add {
            type_name, json, ..
        } => {
            let t: DetailsType = serde_json::from_str(json).context("invalid type declaration")?;
            let mut tx = pool.begin().await?;
            brand_settings::upsert_details_type(&mut tx, &actor, origin, &brand, type_name, t)
                .await
                .map_err(crate::admin_merchant::edit_error)?;
            tx.commit().await?;
            println!("declared authorization_details type {type_name} on {brand_id}");
        }
        DetailsTypeCommand::Remove { type_name, .. } => {
            let mut tx = pool.begin().await?;
            brand_settings::remove_details_type(&mut tx, &actor, origin, &brand, type_name)
                .await
                .map_err(|e| match e {
                    brand_settings::EditError::Missing => {
                        anyhow!("brand {brand_id:?} has no type {type_name:?}")
                    }
                    other => crate::admin_merchant::edit_error(other),
                })?;
            tx.commit().await?;
            println!("removed authorization_details type {type_name} from {brand_id}");
        }
    }
    Ok(())
}

/// A `RATE,BURST` flag of `pactd agent` (the same form as `serve`'s limits).
fn agent_limit(
    value: Option<&str>,
    flag: &str,
) -> anyhow::Result<Option<pact_db::agents::AgentLimit>> {
    value
        .map(|v| {
            let r = pact_server::web::limits::Rate::parse(v)
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
            Ok(pact_db::agents::AgentLimit {
                rate: r.per_second,
                burst: r.burst,
            })
        })
        .transpose()
}

async fn agent(pool: &PgPool, c: &AgentCommand) -> anyhow::Result<()> {
    match c {
        AgentCommand::Add {
            issuer,
            jwks_uri,
            name,
            rate_limit_pa,
            rate_limit_user,
            logo_uri,
            homepage,
            policy_uri,
            tos_uri,
            allow_loopback,
        } => {
            let pa = agent_limit(rate_limit_pa.as_deref(), "--rate-limit-pa")?;
            let user = agent_limit(rate_limit_user.as_deref(), "--rate-limit-user")?;
            let links = who::LinkFlags {
                homepage: homepage.clone(),
                logo: logo_uri.clone(),
                policy: policy_uri.clone(),
                tos: tos_uri.clone(),
            };
            links.check().map_err(anyhow::Error::msg)?;
            // The one check the admin API and the console make too.
            let name = ops::agents::check_registration_named(
                issuer,
                jwks_uri,
                name.as_deref(),
                ["--issuer", "--jwks-uri", "--name"],
            )
            .map_err(|e| anyhow!("invalid {e}"))?;
            // Fetched before anything is written: a logo that is refused
            // (SVG, HTML, too large, a redirect, a private address) leaves
            // the registration as it was.
            let logo = match links.logo_to_fetch() {
                Some(uri) => Some(
                    who::fetch_for_registration(uri, *allow_loopback)
                        .await
                        .map_err(anyhow::Error::msg)?,
                ),
                None => None,
            };
            let mut tx = pool.begin().await?;
            let registration = ops::agents::Registration {
                issuer,
                jwks_uri,
                name: &name,
                links: &links,
                logo: logo.as_ref(),
                // Re-registering without the flags keeps the limits it has.
                pa_limit: pa,
                user_limit: user,
            };
            let (who, at) = cli_who();
            let (agent, meta) =
                ops::agents::register(&mut tx, &who, at.as_deref(), &registration, now())
                    .await
                    .map_err(crate::admin_merchant::edit_error)?;
            tx.commit().await?;
            if let (Some(logo), Some(m)) = (&logo, &meta) {
                println!(
                    "logo: {} bytes of {} stored as /logos/{}",
                    logo.bytes.len(),
                    logo.content_type,
                    m.logo_sha256.as_deref().unwrap_or("-")
                );
            }
            println!(
                "registered {} (jwks {}), {}",
                agent.issuer,
                agent.jwks_uri,
                if agent.enabled { "enabled" } else { "disabled" }
            );
        }
        AgentCommand::Limits {
            issuer,
            rate_limit_pa,
            rate_limit_user,
        } => {
            let pa = agent_limit(rate_limit_pa.as_deref(), "--rate-limit-pa")?;
            let user = agent_limit(rate_limit_user.as_deref(), "--rate-limit-user")?;
            let mut tx = pool.begin().await?;
            if !pact_db::agents::set_limits(&mut *tx, issuer, pa, user).await? {
                bail!("no registered agent with issuer {issuer:?}");
            }
            audit(
                &mut *tx,
                "agent.limits",
                issuer,
                None,
                serde_json::json!({"pa_limit": pa, "user_limit": user}),
            )
            .await?;
            tx.commit().await?;
            let show = |l: Option<pact_db::agents::AgentLimit>| {
                l.map_or_else(
                    || "the node's default".to_owned(),
                    |l| format!("{}/s, burst {}", l.rate, l.burst),
                )
            };
            println!(
                "{issuer}: platform limit {}; per-user limit {}",
                show(pa),
                show(user)
            );
        }
        AgentCommand::Disable { issuer, reason } => {
            set_agent_enabled(pool, issuer, false, Some(reason)).await?;
        }
        AgentCommand::Enable { issuer } => {
            set_agent_enabled(pool, issuer, true, None).await?;
        }
        AgentCommand::Verify { issuer } => {
            decide_agent(pool, issuer, true).await?;
            println!("verified {issuer}");
        }
        AgentCommand::Forget { issuer } => {
            decide_agent(pool, issuer, false).await?;
            println!("forgot {issuer} with its conversations and grants");
        }
        AgentCommand::BlockHost { host, reason } => {
            crate::admin_registry::block_host(pool, host, reason).await?;
        }
        AgentCommand::UnblockHost { host } => {
            crate::admin_registry::unblock_host(pool, host).await?;
        }
        AgentCommand::BlockedHosts => {
            for b in pact_db::registries::blocked_hosts(pool).await? {
                println!("{}\t{}\t{}", b.host, b.blocked_at, b.reason);
            }
        }
        AgentCommand::List => {
            for a in pact_db::agents::list(pool).await? {
                let state = if a.enabled { "enabled" } else { "disabled" };
                let tier = match (pact_server::admission::Tier::of(&a), &a.registry) {
                    (pact_server::admission::Tier::Listed(until), Some(r)) => {
                        format!("listed by {r} until {until}")
                    }
                    (t, _) => t.label().to_owned(),
                };
                // The tier last, so scripts reading the first four columns
                // keep working.
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    a.issuer, state, a.jwks_uri, a.name, tier
                );
            }
        }
    }
    Ok(())
}

async fn keys(pool: &PgPool, cli: &Cli, data_dir: &Path, c: &KeysCommand) -> anyhow::Result<()> {
    let defaults = pact_server::config::DelegationSettings::default();
    match c {
        KeysCommand::Rotate {
            overlap_secs,
            retain_secs,
        } => {
            let master = master_key::for_admin_on(cli, data_dir, pool).await?;
            let overlap = overlap_secs.map_or(defaults.key_overlap, std::time::Duration::from_secs);
            let retain = retain_secs.map_or(defaults.key_retention, std::time::Duration::from_secs);
            let now = now();
            // The same function as the console's and the admin API's
            // rotation: the key and its audit entry commit together.
            let mut tx = pool.begin().await?;
            let key = pact_server::admin::ops::keys::rotate(
                &mut tx,
                &crate::admin_accounts::cli_as_actor(),
                crate::admin_accounts::cli_origin().as_deref(),
                &master,
                now,
                time::Duration::try_from(overlap)?,
                time::Duration::try_from(retain)?,
            )
            .await?;
            tx.commit().await?;
            println!(
                "new signing key {}: published now, signs from {}",
                key.kid,
                rfc3339(key.activates_at)
            );
        }
        KeysCommand::List => {
            for k in pact_server::keys::list(pool, now()).await? {
                println!(
                    "{}\t{}\tactivates {}\tretired {}\tunpublished {}",
                    k.kid,
                    k.status.as_str(),
                    rfc3339(k.activates_at),
                    k.retired_at.map(rfc3339).unwrap_or_else(|| "-".into()),
                    k.unpublish_at.map(rfc3339).unwrap_or_else(|| "-".into()),
                );
            }
        }
        KeysCommand::Rewrap {
            new_master_key_file,
            forget_recovery_codes,
        } => {
            let old = master_key::for_admin(cli, data_dir)?;
            crate::rewrap::run(pool, &old, new_master_key_file, *forget_recovery_codes).await?;
        }
        KeysCommand::GenerateMasterKey | KeysCommand::InitMasterKey => {}
    }
    Ok(())
}

async fn grants(pool: &PgPool, c: &GrantsCommand) -> anyhow::Result<()> {
    match c {
        GrantsCommand::List { brand, user, agent } => {
            // The flags name the person by their `sub` at the brand and the
            // platform by its issuer, as the grant rows hold them.
            let user = user.as_deref().map(UserSub::from);
            let agent = agent.as_deref().map(AgentIssuer::from);
            let list = pact_db::grants::list(
                pool,
                pact_db::grants::GrantFilter {
                    brand_id: brand.as_deref(),
                    user_sub: user.as_ref(),
                    pa_issuer: agent.as_ref(),
                },
            )
            .await?;
            // A staff read of customer data, as the API's `grant.list`.
            crate::admin_accounts::record_cli(
                pool,
                "grant.list",
                None,
                brand.as_deref(),
                serde_json::json!({"brand": brand, "customer": user, "agent": agent,
                                   "found": list.len()}),
            )
            .await?;
            let now = now();
            for g in list {
                let state = pact_db::admin_search::GrantState::of(&g, now).as_str();
                println!(
                    "{}\t{state}\t{}\t{}\t{}\t{}\texpires {}",
                    g.id,
                    g.brand_id,
                    g.user_sub,
                    g.pa_issuer,
                    g.scopes.join(" "),
                    rfc3339(g.expires_at)
                );
            }
        }
        GrantsCommand::Revoke { grant_id, reason } => {
            let id: pact_db::ids::GrantId = grant_id.parse().context("a grant id is a UUID")?;
            let mut tx = pool.begin().await?;
            let grant = pact_db::grants::find(&mut *tx, id)
                .await?
                .with_context(|| format!("no active grant {id}"))?;
            let revoked = pact_server::admin::ops::grants::revoke(
                &mut tx,
                &crate::admin_accounts::cli_as_actor(),
                crate::admin_accounts::cli_origin().as_deref(),
                &grant,
                reason.as_deref(),
            )
            .await
            .map_err(crate::admin_merchant::edit_error)?;
            if !revoked {
                bail!("no active grant {id}");
            }
            tx.commit().await?;
            println!("revoked {id}");
        }
        GrantsCommand::RevokeUser { brand_id, user_id } => {
            // The person as delegation tokens name them (their `sub`).
            crate::admin_oidc::revoke_user(pool, brand_id, &user_id.as_str().into()).await?;
        }
    }
    Ok(())
}

async fn receipts(pool: &PgPool, c: &ReceiptsCommand) -> anyhow::Result<()> {
    let ReceiptsCommand::Verify { grant, held } = c;
    let grant_id = grant
        .as_deref()
        .map(str::parse::<pact_db::ids::GrantId>)
        .transpose()
        .context("a grant id is a UUID")?;
    let keys = pact_server::keys::all_public_keys(pool).await?;
    // It reads every customer's receipts (or one grant's): a staff read.
    crate::admin_accounts::record_cli(
        pool,
        "receipt.verify",
        grant_id.map(|g| g.to_string()).as_deref(),
        None,
        serde_json::json!({"grant": grant_id, "held": held.is_some()}),
    )
    .await?;
    if let Some(path) = held {
        held_receipts_are_stored(pool, &keys, path).await?;
    }
    // The log is global: checked even with --grant, because a grant whose
    // whole chain was deleted has no receipts left to select.
    let log_problems = receipt_log_is_reproduced(pool, &keys).await?;
    let list = pact_db::receipts::list(pool, grant_id).await?;
    if list.is_empty() {
        println!("no receipts");
        if log_problems > 0 {
            bail!("{log_problems} problem(s) in the receipt log");
        }
        return Ok(());
    }
    let breaks = pact_server::domain::receipt_chain::verify(&list, &keys);
    let grants: std::collections::BTreeSet<pact_db::ids::GrantId> =
        list.iter().map(|r| r.grant_id).collect();
    if breaks.is_empty() && log_problems == 0 {
        println!(
            "OK: {} receipt(s) in {} chain(s) verified",
            list.len(),
            grants.len()
        );
        return Ok(());
    }
    for b in &breaks {
        println!(
            "BROKEN: grant {} receipt #{}: {}",
            b.grant_id, b.seq, b.problem
        );
    }
    bail!(
        "{} problem(s) in {} receipt(s), {log_problems} in the receipt log",
        breaks.len(),
        list.len()
    )
}

/// The stored receipts must reproduce every signed tree head pactd
/// published (docs/receipt-log.md): the chains alone cannot show that their
/// newest receipts or a whole chain were cut, a head covering them can.
/// Prints what it finds; returns the number of problems.
async fn receipt_log_is_reproduced(
    pool: &PgPool,
    keys: &pact_jose::ProviderKeySet,
) -> anyhow::Result<usize> {
    let audit = pact_server::receipt_log::audit(pool, keys).await?;
    for p in &audit.problems {
        println!("BROKEN: receipt log: {p}");
    }
    match audit.newest {
        None => println!("log: {} entr(ies), no signed tree head yet", audit.entries),
        Some(size) => println!(
            "log: {} entr(ies), {} signed tree head(s) checked, the newest of size {size}",
            audit.entries, audit.heads
        ),
    }
    Ok(audit.problems.len())
}

/// The receipts in `path` that pactd signed must all be in the store. The
/// store's own chains cannot show that their newest receipts, or a whole
/// grant's chain, were cut; a receipt held elsewhere (by the PA it was given
/// to, PACT §5.6) and signed by us can. Items are `{jws, claims}` or a
/// `pact-agent` record holding one under `receipt`.
async fn held_receipts_are_stored(
    pool: &PgPool,
    keys: &pact_jose::ProviderKeySet,
    path: &Path,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let doc: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let items = doc
        .as_array()
        .with_context(|| format!("{} is not a JSON array of receipts", path.display()))?;
    let stored: std::collections::BTreeSet<String> = pact_db::receipts::list(pool, None)
        .await?
        .into_iter()
        .map(|r| r.jws)
        .collect();
    let (mut ours, mut missing, mut foreign) = (0usize, 0usize, 0usize);
    for item in items {
        let value = item.get("receipt").unwrap_or(item);
        let Ok(receipt) = serde_json::from_value::<pact_proto::oauth::Receipt>(value.clone())
        else {
            foreign += 1;
            continue;
        };
        let Ok(claims) = pact_jose::verify_receipt(&receipt, keys) else {
            // Not provably ours: proves nothing either way.
            foreign += 1;
            continue;
        };
        ours += 1;
        if !stored.contains(&receipt.jws) {
            missing += 1;
            println!(
                "MISSING: a receipt pactd signed is not in the store (grant {}, {}): the store was cut or a chain deleted",
                claims.grant_id, claims.ts
            );
        }
    }
    println!(
        "held: {ours} receipt(s) signed by pactd, {missing} missing from the store; {foreign} not verifiable with pactd's keys (ignored)"
    );
    if missing > 0 {
        bail!("{missing} receipt(s) signed by pactd are missing from the store");
    }
    Ok(())
}

/// `brand set --name/--description`: what the brand's card says, through the
/// function the console and the admin API use (same checks, same audit entry).
async fn brand_card_text(pool: &PgPool, a: &BrandSetArgs) -> anyhow::Result<bool> {
    if a.name.is_none() && a.description.is_none() && a.skills_json.is_none() {
        return Ok(false);
    }
    let skills = match &a.skills_json {
        None => None,
        Some(raw) => Some(
            serde_json::from_str(raw)
                .map_err(|e| anyhow!("--skills-json is not a JSON array of skills: {e}"))?,
        ),
    };
    let brand = pact_db::brands::find(pool, &a.brand_id)
        .await?
        .with_context(|| format!("no brand {:?}", a.brand_id))?;
    let mut tx = pool.begin().await?;
    pact_server::admin::brand_settings::set_card_text(
        &mut tx,
        &crate::admin_accounts::cli_as_actor(),
        crate::admin_accounts::cli_origin().as_deref(),
        &brand,
        pact_server::admin::brand_settings::CardEdit {
            name: a.name.as_deref(),
            description: a.description.as_deref(),
            skills,
        },
    )
    .await
    .map_err(crate::admin_merchant::edit_error)?;
    tx.commit().await?;
    if let Some(name) = &a.name {
        println!("{}: name = {:?}", a.brand_id, name.trim());
    }
    if let Some(description) = &a.description {
        println!("{}: description = {:?}", a.brand_id, description.trim());
    }
    if a.skills_json.is_some() {
        println!("{}: skills set", a.brand_id);
    }
    Ok(true)
}

/// `agent disable|enable`: through the function the console and the API use.
/// Disabling cuts the PA off entirely: its PA-JWTs are refused and every
/// grant it holds is revoked, in one transaction.
/// `agent verify` / `agent forget`, through the staff actions the API and
/// the console use.
async fn decide_agent(pool: &PgPool, issuer: &str, verify: bool) -> anyhow::Result<()> {
    use pact_server::admin::ops::{self, OpsError};
    let actor = crate::admin_accounts::cli_as_actor();
    let origin = crate::admin_accounts::cli_origin();
    let mut tx = pool.begin().await?;
    if verify {
        ops::agents::verify(&mut tx, &actor, origin.as_deref(), issuer).await
    } else {
        ops::agents::forget(&mut tx, &actor, origin.as_deref(), issuer).await
    }
    .map_err(|e| match e {
        OpsError::Missing if verify => anyhow!("no agent with issuer {issuer:?}"),
        OpsError::Missing => anyhow!("no unverified agent with issuer {issuer:?}"),
        other => crate::admin_merchant::edit_error(other),
    })?;
    tx.commit().await?;
    Ok(())
}

async fn set_agent_enabled(
    pool: &PgPool,
    issuer: &str,
    enabled: bool,
    reason: Option<&str>,
) -> anyhow::Result<()> {
    use pact_server::admin::ops::{self, OpsError};
    let mut tx = pool.begin().await?;
    let revoked = ops::agents::set_enabled(
        &mut tx,
        &crate::admin_accounts::cli_as_actor(),
        crate::admin_accounts::cli_origin().as_deref(),
        issuer,
        enabled,
        reason,
    )
    .await
    .map_err(|e| match e {
        OpsError::Missing => anyhow!("no registered agent with issuer {issuer:?}"),
        other => crate::admin_merchant::edit_error(other),
    })?;
    tx.commit().await?;
    if enabled {
        println!("enabled {issuer} (revoked grants stay revoked)");
    } else {
        println!("disabled {issuer}; revoked {revoked} grant(s)");
    }
    Ok(())
}

/// Whether `brand set` was given any of the settings `brand_set` stores.
fn has_settings(a: &BrandSetArgs) -> bool {
    a.mfa_required.is_some()
        || a.login_url.is_some()
        || a.no_external_login
        || a.grant_ttl_days.is_some()
        || a.admission.is_some()
        || a.logo.is_some()
        || a.no_logo
        || a.accent.is_some()
}

async fn brand_set(pool: &PgPool, a: &BrandSetArgs) -> anyhow::Result<()> {
    use serde_json::{Value, json};
    require_brand(pool, &a.brand_id).await?;
    let mut changes: Vec<(&str, Value)> = Vec::new();
    if let Some(required) = a.mfa_required {
        changes.push(("mfa_required", json!(required)));
    }
    if let (Some(url), Some(jwks_uri)) = (&a.login_url, &a.login_jwks_uri) {
        check_login_url(url)?;
        pact_jose::check_jwks_uri(jwks_uri, true)
            .map_err(|e| anyhow::anyhow!("invalid --login-jwks-uri: {e}"))?;
        changes.push(("login_url", json!(url)));
        changes.push(("login_jwks_uri", json!(jwks_uri)));
    }
    if a.no_external_login {
        changes.push(("login_url", Value::Null));
        changes.push(("login_jwks_uri", Value::Null));
    }
    if let Some(days) = a.grant_ttl_days {
        changes.push(("grant_ttl_days", json!(days)));
    }
    if let Some(policy) = &a.admission {
        // "default" removes the brand's own choice (the Provider's applies).
        let value = pact_server::admission::Policy::parse(policy)
            .map_or(Value::Null, |p| json!(p.as_str()));
        changes.push((pact_server::admission::SETTING_KEY, value));
    }
    if let Some(accent) = &a.accent {
        if accent == "none" {
            changes.push((who::ACCENT_KEY, Value::Null));
        } else {
            let accent = who::check_accent(accent).map_err(anyhow::Error::msg)?;
            changes.push((who::ACCENT_KEY, json!(accent)));
        }
    }
    if a.no_logo {
        changes.push((who::LOGO_KEY, Value::Null));
    }
    let mut logo_file = None;
    if let Some(path) = &a.logo {
        let bytes = read_logo_file(path)?;
        let content_type = who::check_brand_logo(&bytes).map_err(anyhow::Error::msg)?;
        let name = who::sha256_hex(&bytes);
        changes.push((who::LOGO_KEY, json!(name)));
        logo_file = Some((name, content_type, bytes));
    }
    if changes.is_empty() {
        bail!(
            "nothing to change: give --name, --description, --skills-json, --mfa-required, --login-url with --login-jwks-uri, \
             --login-oidc-issuer with --login-oidc-client-id and --login-oidc-client-secret-file, \
             --no-external-login, --grant-ttl-days, --admission, --agent-url, --agent-timeout-ms, \
             --tool-timeout-ms, --demo-agent, --logo, --no-logo or --accent"
        );
    }
    let mut tx = pool.begin().await?;
    if let Some((name, content_type, bytes)) = &logo_file {
        pact_db::logos::put(&mut *tx, name, content_type, bytes).await?;
    }
    // One entry per kind of setting, committed with it; the lifetime under
    // the name the API and the console use for it.
    let mut entries: std::collections::BTreeMap<&str, serde_json::Map<String, Value>> =
        std::collections::BTreeMap::new();
    for (key, value) in &changes {
        pact_db::brands::set_setting(&mut *tx, &a.brand_id, key, value).await?;
        entries
            .entry(setting_action(key))
            .or_default()
            // `days`, as the API's and the console's entry says it.
            .insert(
                if *key == "grant_ttl_days" {
                    "days"
                } else {
                    key
                }
                .to_owned(),
                value.clone(),
            );
    }
    for (action, detail) in entries {
        audit(
            &mut *tx,
            action,
            &a.brand_id,
            Some(&a.brand_id),
            Value::Object(detail),
        )
        .await?;
    }
    tx.commit().await?;
    for (key, value) in &changes {
        let shown = if value.is_null() {
            "(removed)".to_owned()
        } else {
            value.to_string()
        };
        println!("{}: {key} = {shown}", a.brand_id);
    }
    Ok(())
}

/// The audit action of a `brand set` setting.
fn setting_action(key: &str) -> &'static str {
    match key {
        "grant_ttl_days" => "brand.grant_lifetime",
        "mfa_required" => "brand.mfa_required",
        k if k == pact_server::admission::SETTING_KEY => "brand.admission",
        "login_url" | "login_jwks_uri" => "brand.login_url",
        k if k == who::LOGO_KEY => "brand.logo",
        k if k == who::ACCENT_KEY => "brand.accent",
        _ => "brand.setting",
    }
}

/// Reads a brand logo file, refusing anything larger than the cap before
/// reading it whole.
fn read_logo_file(path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .with_context(|| format!("--logo: cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(who::MAX_BRAND_LOGO_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("--logo: cannot read {}", path.display()))?;
    Ok(bytes)
}

/// A brand's own login page: https, or http on a loopback host (development);
/// no credentials in it.
fn check_login_url(raw: &str) -> anyhow::Result<()> {
    let url = url::Url::parse(raw).map_err(|e| anyhow::anyhow!("invalid --login-url: {e}"))?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) {
        bail!("invalid --login-url: use https (http only for localhost / 127.0.0.1 / [::1])");
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        bail!("invalid --login-url: no user name, password or #fragment");
    }
    Ok(())
}

/// Emails are stored trimmed and lower-cased, as the sign-in page compares them.
pub(crate) fn normalise_email(raw: &str) -> anyhow::Result<String> {
    let email = raw.trim().to_lowercase();
    let valid = (3..=254).contains(&email.len())
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && !domain.is_empty() && !domain.contains('@')
        })
        && !email.chars().any(|c| c.is_whitespace() || c.is_control());
    if !valid {
        bail!("invalid email {raw:?}");
    }
    Ok(email)
}

/// The new account's password: standard input when it is not a terminal
/// (one line; the line ending is dropped), otherwise a generated one.
pub(crate) fn password_for_new_user() -> anyhow::Result<(String, bool)> {
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        // 24 base64url characters: 144 random bits.
        let (secret, _) = pact_server::domain::secrets::new_secret();
        return Ok((secret.chars().take(24).collect(), true));
    }
    let mut raw = String::new();
    stdin
        .lock()
        .take(64 * 1024)
        .read_to_string(&mut raw)
        .context("cannot read the password from standard input")?;
    let line = raw.strip_suffix('\n').unwrap_or(&raw);
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.is_empty() {
        bail!(
            "no password on standard input: pipe one in (at least {} characters), \
             or run from a terminal to have one generated",
            pact_server::accounts::password::MIN_LEN
        );
    }
    Ok((line.to_owned(), false))
}

async fn user(pool: &PgPool, c: &UserCommand) -> anyhow::Result<()> {
    match c {
        UserCommand::Add {
            brand_id,
            email,
            external_id,
        } => {
            require_brand(pool, brand_id).await?;
            let email = normalise_email(email)?;
            if let Some(x) = external_id
                && (x.is_empty() || x.len() > 256 || x.trim() != x)
            {
                bail!("invalid --external-id: 1–256 characters without surrounding spaces");
            }
            let (password, generated) = password_for_new_user()?;
            let hash = pact_server::accounts::password::hash(&password)
                .map_err(|e| anyhow::anyhow!("cannot use that password: {e}"))?;
            let id = Uuid::new_v4();
            let mut tx = pool.begin().await?;
            let user = match pact_db::users::insert(
                &mut *tx,
                id,
                brand_id,
                &email,
                external_id.as_deref(),
                &hash,
            )
            .await
            {
                Ok(u) => u,
                Err(e) if pact_db::is_unique_violation(&e) => match external_id {
                    Some(x) => bail!(
                        "brand {brand_id:?} already has an account with email {email:?} or external id {x:?}"
                    ),
                    None => bail!("brand {brand_id:?} already has an account with email {email:?}"),
                },
                Err(e) => return Err(e.into()),
            };
            audit(
                &mut *tx,
                "customer.add",
                &user.id.to_string(),
                Some(brand_id),
                serde_json::json!({"external_id": user.external_id.is_some(),
                                   "password": if generated { "generated" } else { "given" }}),
            )
            .await?;
            tx.commit().await?;
            println!(
                "added user {} to {} (id {}, subject {})",
                user.email,
                user.brand_id,
                user.id,
                user.subject()
            );
            if generated {
                println!("password: {password}");
                println!("(shown once; it is stored only as an argon2id hash)");
            }
        }
        UserCommand::List { brand } => {
            if let Some(b) = brand {
                require_brand(pool, &BrandId::parse(b)?).await?;
            }
            let now = now();
            let users = pact_db::users::list(pool, brand.as_deref()).await?;
            // Emails and sign-in state of customers: a staff read.
            crate::admin_accounts::record_cli(
                pool,
                "customer.list",
                None,
                brand.as_deref(),
                serde_json::json!({"brand": brand, "found": users.len()}),
            )
            .await?;
            for u in users {
                let passkeys = pact_db::sessions::credentials_of(pool, u.id).await?.len();
                let recovery = pact_db::users::unused_recovery_codes(pool, u.id).await?;
                let mut factors = Vec::new();
                if u.has_totp() {
                    factors.push("totp".to_owned());
                }
                if passkeys > 0 {
                    factors.push(format!("passkeys:{passkeys}"));
                }
                if recovery > 0 {
                    factors.push(format!("recovery-codes:{recovery}"));
                }
                let factors = if factors.is_empty() {
                    "no-mfa".to_owned()
                } else {
                    factors.join(",")
                };
                let lock = match (u.disabled_at, u.locked_until.filter(|t| *t > now)) {
                    (Some(t), _) => format!("disabled-since {}", rfc3339(t)),
                    (None, Some(t)) => format!("locked-until {}", rfc3339(t)),
                    (None, None) => "-".to_owned(),
                };
                println!(
                    "{}\t{}\t{}\t{}\t{factors}\t{lock}",
                    u.brand_id,
                    u.email,
                    u.id,
                    u.external_id.as_deref().unwrap_or("-"),
                );
            }
        }
        UserCommand::ResetMfa { brand_id, email } => {
            let user = existing_user(pool, brand_id, email).await?;
            customer_action(pool, &user, Action::ResetSecondFactors).await?;
            println!(
                "removed every second factor of {} on {brand_id} (authenticator app, passkeys, recovery codes)",
                user.email
            );
        }
        UserCommand::Disable { brand_id, email } => {
            let user = existing_user(pool, brand_id, email).await?;
            let done = customer_action(pool, &user, Action::Disable).await?;
            println!(
                "disabled {} on {brand_id}: signed out everywhere, {} grant(s) revoked",
                user.email,
                done.revoked_grants.unwrap_or(0)
            );
        }
        UserCommand::Enable { brand_id, email } => {
            let user = existing_user(pool, brand_id, email).await?;
            customer_action(pool, &user, Action::Enable).await?;
            println!(
                "enabled {} on {brand_id} (revoked grants stay revoked)",
                user.email
            );
        }
        UserCommand::Remove { brand_id, email } => {
            let user = existing_user(pool, brand_id, email).await?;
            let done = customer_action(pool, &user, Action::Remove).await?;
            println!(
                "removed {} from {brand_id}: {} grant(s) revoked; its email, second factors and sessions are erased",
                user.email,
                done.revoked_grants.unwrap_or(0)
            );
        }
        UserCommand::SetPassword { brand_id, email } => {
            let user = existing_user(pool, brand_id, email).await?;
            let (password, generated) = password_for_new_user()?;
            let hash = pact_server::accounts::password::hash(&password)
                .map_err(|e| anyhow::anyhow!("cannot use that password: {e}"))?;
            // As a reset by email link does: whoever knew the old password,
            // or holds a link mailed before, is shut out with it; the
            // password, the links and the sessions change together.
            let mut tx = pool.begin().await?;
            pact_db::users::set_password_hash(&mut *tx, user.id, &hash).await?;
            let links = pact_db::password_resets::end_all_for(&mut *tx, user.id, now()).await?;
            let sessions = pact_db::sessions::delete_others(&mut *tx, user.id, &[]).await?;
            audit(
                &mut *tx,
                "customer.set_password",
                &user.id.to_string(),
                Some(brand_id),
                serde_json::json!({
                    "password": if generated { "generated" } else { "given" },
                    "sessions_ended": sessions,
                    "reset_links_ended": links,
                }),
            )
            .await?;
            tx.commit().await?;
            if generated {
                println!(
                    "new password for {} on {brand_id} (signed out everywhere): {password}",
                    user.email
                );
            } else {
                println!(
                    "password of {} on {brand_id} changed: signed out everywhere",
                    user.email
                );
            }
        }
    }
    Ok(())
}

/// Who acts when a command runs: the operating-system user on this host, as
/// the audit log names them.
fn cli_who() -> (pact_server::admin::role::Actor, Option<String>) {
    (
        crate::admin_accounts::cli_as_actor(),
        crate::admin_accounts::cli_origin(),
    )
}

/// One staff action on a customer account, by the function the admin API and
/// the console call too (it acts and audits in one transaction): what it did.
async fn customer_action(
    pool: &PgPool,
    user: &pact_db::users::User,
    action: Action,
) -> anyhow::Result<customers::Change> {
    let mut tx = pool.begin().await?;
    let done = customers::apply(
        &mut tx,
        &crate::admin_accounts::cli_as_actor(),
        crate::admin_accounts::cli_origin().as_deref(),
        user,
        action,
        now(),
    )
    .await
    .map_err(crate::admin_merchant::edit_error)?;
    tx.commit().await?;
    Ok(done)
}

/// The account with this email at this brand, or a clear error.
async fn existing_user(
    pool: &PgPool,
    brand_id: &BrandId,
    email: &str,
) -> anyhow::Result<pact_db::users::User> {
    require_brand(pool, brand_id).await?;
    let email = normalise_email(email)?;
    pact_db::users::find_by_email(pool, brand_id, &email)
        .await?
        .with_context(|| format!("brand {brand_id:?} has no account with email {email:?}"))
}
