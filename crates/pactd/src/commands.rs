//! What `serve`, `dev` and `migrate` do; the admin commands are in `admin.rs`.

use std::time::Duration;

use anyhow::{Context, bail};
use pact_server::{AppState, Config};
use tokio::net::TcpListener;

use crate::cli::{Cli, Command};
use crate::database::{Create, Database};
use crate::{admin, master_key, settings};

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let file = settings::load_file(cli.config.as_deref())?;
    let cli = settings::with_file_secrets(cli, &file);
    // Deployment commands that need no database.
    match &cli.command {
        Command::Healthcheck(args) => return crate::healthcheck::run(args, &file).await,
        Command::Keys(crate::cli::KeysCommand::InitMasterKey) => {
            return master_key::init_file(&cli);
        }
        _ => {}
    }
    let url = settings::database_url(&cli, &file)?;
    let data_dir = settings::data_dir(&cli, &file);
    match &cli.command {
        Command::Serve(args) => {
            let Some(url) = url else {
                bail!(
                    "DATABASE_URL is not set. Set it (or DATABASE_URL_FILE, or `database_url` in --config) to your PostgreSQL, \
                     or run `pactd dev` for a local server with its own database"
                );
            };
            let config = settings::server_config(args, &file, false, master_key::required(&cli)?)?;
            // Listen for the signal from the start, so a stop during start-up is orderly too.
            let mut signal = tokio::spawn(pact_server::shutdown_signal());
            let pool = settings::pool(args, &file)?;
            let wait = settings::db_wait(args, &file)?;
            // A stop while waiting for PostgreSQL is an orderly one.
            let db = tokio::select! {
                db = Database::open(Some(url), &data_dir, &pool, Create::No, wait) => db?,
                _ = &mut signal => return Ok(()),
            };
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let seed = args.seed_demo.or(file.seed_demo).unwrap_or(false);
            let result = serve(&db, config, migrate, Start { seed, dev: false }, signal).await;
            db.close().await;
            result
        }
        Command::Dev(args) => {
            let config =
                settings::server_config(args, &file, true, master_key::dev_key(&cli, &data_dir)?)?;
            let mut signal = tokio::spawn(pact_server::shutdown_signal());
            let pool = settings::pool(args, &file)?;
            let wait = settings::db_wait(args, &file)?;
            let db = tokio::select! {
                db = Database::open(url, &data_dir, &pool, Create::Yes, wait) => db?,
                _ = &mut signal => return Ok(()),
            };
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let result = serve(
                &db,
                config,
                migrate,
                Start {
                    seed: true,
                    dev: true,
                },
                signal,
            )
            .await;
            db.close().await;
            result
        }
        Command::Keys(crate::cli::KeysCommand::GenerateMasterKey) => {
            let key = pact_crypto::MasterKey::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", key.to_base64());
            Ok(())
        }
        command => {
            let pool = pact_db::PoolSettings {
                max_connections: 2,
                ..pact_db::PoolSettings::default()
            };
            let db = Database::open(url, &data_dir, &pool, Create::No, Duration::ZERO).await?;
            let result = admin(&db, &cli, &data_dir, command).await;
            db.close().await;
            result
        }
    }
}

/// Admin commands change the schema only when asked (`pactd migrate`) or on
/// the private dev database; elsewhere they refuse to run on an old schema.
async fn admin(
    db: &Database,
    cli: &Cli,
    data_dir: &std::path::Path,
    command: &Command,
) -> anyhow::Result<()> {
    if matches!(command, Command::Migrate) || db.is_local() {
        let pending = pact_db::pending_migrations(&db.pool).await?;
        pact_db::migrate(&db.pool)
            .await
            .context("migrations failed")?;
        // A schema change is a configuration change: recorded, once the
        // schema has the audit log.
        if matches!(command, Command::Migrate) && pending > 0 {
            crate::admin_accounts::record_cli(
                &db.pool,
                "schema.migrate",
                None,
                None,
                serde_json::json!({"applied": pending}),
            )
            .await?;
        }
    } else if pact_db::pending_migrations(&db.pool).await? > 0 {
        bail!("the database schema is older than this pactd: run `pactd migrate` first");
    }
    admin::run(&db.pool, cli, data_dir, command).await
}

/// Binds the listener, with a hint when the port is taken.
async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "cannot listen on {addr}: another program uses this port. \
             Stop it, or choose another address with --listen (for example --listen {}:{})",
            addr.ip(),
            addr.port().wrapping_add(1)
        ),
        Err(e) => Err(e).with_context(|| format!("cannot listen on {addr}")),
    }
}

/// What a start does besides serving.
#[derive(Clone, Copy)]
struct Start {
    /// Add the demo brand when it is missing (`--seed-demo`; always under `dev`).
    seed: bool,
    /// `pactd dev`: the banner for the person at the terminal.
    dev: bool,
}

async fn serve(
    db: &Database,
    config: Config,
    migrate: bool,
    start: Start,
    signal: tokio::task::JoinHandle<()>,
) -> anyhow::Result<()> {
    let Start { seed, dev } = start;
    if signal.is_finished() {
        return Ok(());
    }
    // Bind first: a busy port is reported before anything is migrated or seeded.
    let listener = bind(config.listen).await?;
    if migrate {
        let pending = pact_db::pending_migrations(&db.pool).await?;
        pact_db::migrate(&db.pool)
            .await
            .context("migrations failed")?;
        if pending > 0 {
            // The node changed the schema at start (`serve` migrates unless
            // --no-migrate): recorded as the system's act.
            pact_db::audit::record(
                &db.pool,
                &pact_db::audit::NewEntry {
                    actor_kind: "system",
                    actor: "pactd",
                    action: "schema.migrate",
                    target: None,
                    brand_id: None,
                    detail: serde_json::json!({"applied": pending, "by": "serve"}),
                    client_addr: crate::admin_accounts::cli_origin().as_deref(),
                },
            )
            .await?;
        }
    }
    if seed {
        admin::seed_demo(&db.pool).await?;
    }
    let local = listener.local_addr()?;
    // The recorder goes in before the router is built, so requests are tracked.
    let metrics = match config.metrics_listen {
        Some(addr) => {
            let handle =
                pact_server::telemetry::install().context("cannot install the metrics recorder")?;
            let metrics_listener = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} for metrics"))?;
            tracing::info!(listen = %metrics_listener.local_addr()?, "metrics at GET /metrics");
            Some((handle, metrics_listener))
        }
        None => None,
    };
    let state = AppState::new(config, db.pool.clone())
        .await
        .context("cannot build the server")?;
    // Every fatal start error (a busy metrics port, a bad SMTP URL, a key
    // that cannot be unsealed) comes before these lines, never after them.
    if dev {
        print_dev_banner(&state.config, db.is_local());
    }
    let config = &state.config;
    tracing::info!(listen = %local, public_url = %config.public_url, audience = %config.audience, "pactd serving");
    let metrics_server = metrics.map(|(handle, l)| {
        tokio::spawn(pact_server::telemetry::serve(
            state.clone(),
            handle,
            l,
            std::future::pending(),
        ))
    });
    let shutdown = async move {
        signal.await.ok();
    };
    let served = pact_server::serve(state, listener, shutdown).await;
    if let Some(task) = metrics_server {
        task.abort();
    }
    served.context("server error")?;
    tracing::info!("pactd stopped");
    Ok(())
}

fn print_dev_banner(config: &Config, local_db: bool) {
    let Ok(demo) = pact_db::ids::BrandId::parse("demo") else {
        return;
    };
    let card = config.card_url(&demo);
    let public = &config.public_url;
    let db = if local_db {
        "private PostgreSQL in the data directory (kept across runs)"
    } else {
        "DATABASE_URL"
    };
    let passkeys = if config.relying_party().is_some() {
        "available"
    } else {
        "off (the public URL is an IP address; use a host name such as localhost)"
    };
    println!(
        "\npactd dev is running.\n\
         \n  Agent Card (demo brand):  {card}\
         \n  PA-JWT audience:          {aud}\
         \n  Pages:                    {public}/device (enter a code), {public}/account (connected agents)\
         \n  Staff console:            {public}/admin (docs/admin.md)\
         \n  Database:                 {db}\
         \n  Loopback JWKS URIs:       {loopback}\
         \n  Passkeys:                 {passkeys}\n\
         \nNext steps, in another terminal:\
         \n  1. An account at the demo store, so a person can sign in and approve agents\
         \n     (prints a generated password; pipe one in to choose it):\
         \n       pactd user add demo you@example.com\
         \n  2. A personal agent, registered with pactd:\
         \n       pact-agent init --audience {aud}\
         \n       pact-agent serve-jwks        # prints the exact `pactd agent add ...` line to run\
         \n  3. Talk to the store; account questions open {public}/device for your approval:\
         \n       pact-agent send {card} \"When are you open?\"\
         \n       pact-agent send {card} \"Where is my order?\"\
         \n  4. A staff account for the console at {public}/admin (prints a generated password;\
         \n     the first sign-in sets up an authenticator app):\
         \n       pactd admin add staff@example.com --role owner\
         \n  By hand instead: sign a PA-JWT (ES256/RS256; iss = your issuer, sub = a user id,\
         \n  aud = {aud}, exp <= iat + 300) and POST a message to {iface}/message:send (see README).\
         \n\nStop with Ctrl-C.\n",
        aud = config.audience,
        iface = config.interface_url(&demo),
        loopback = if config.jwks.allow_loopback {
            "allowed (dev only)"
        } else {
            "refused"
        },
    );
}
