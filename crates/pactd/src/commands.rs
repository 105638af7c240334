//! What `serve`, `dev` and `migrate` do; the admin commands are in `admin.rs`.

use anyhow::{Context, bail};
use pact_server::{AppState, Config};
use tokio::net::TcpListener;

use crate::cli::{Cli, Command};
use crate::database::{Create, Database};
use crate::{admin, master_key, settings};

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let file = settings::load_file(cli.config.as_deref())?;
    let url = settings::database_url(&cli, &file);
    let data_dir = settings::data_dir(&cli, &file);
    match &cli.command {
        Command::Serve(args) => {
            let Some(url) = url else {
                bail!(
                    "DATABASE_URL is not set. Set it (or `database_url` in --config) to your PostgreSQL, \
                     or run `pactd dev` for a local server with its own database"
                );
            };
            let config = settings::server_config(args, &file, false, master_key::required(&cli)?)?;
            // Listen for the signal from the start, so a stop during start-up is orderly too.
            let signal = tokio::spawn(pact_server::shutdown_signal());
            let pool = settings::pool(args, &file)?;
            let db = Database::open(Some(url), &data_dir, &pool, Create::No).await?;
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let result = serve(&db, config, migrate, false, signal).await;
            db.close().await;
            result
        }
        Command::Dev(args) => {
            let config =
                settings::server_config(args, &file, true, master_key::dev_key(&cli, &data_dir)?)?;
            let signal = tokio::spawn(pact_server::shutdown_signal());
            let pool = settings::pool(args, &file)?;
            let db = Database::open(url, &data_dir, &pool, Create::Yes).await?;
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let result = serve(&db, config, migrate, true, signal).await;
            db.close().await;
            result
        }
        Command::Keys(crate::cli::KeysCommand::GenerateMasterKey) => {
            let key = pact_jose::MasterKey::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
            println!("{}", key.to_base64());
            Ok(())
        }
        command => {
            let pool = pact_db::PoolSettings {
                max_connections: 2,
                ..pact_db::PoolSettings::default()
            };
            let db = Database::open(url, &data_dir, &pool, Create::No).await?;
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
        pact_db::migrate(&db.pool)
            .await
            .context("migrations failed")?;
    } else if pact_db::pending_migrations(&db.pool).await? > 0 {
        bail!("the database schema is older than this pactd: run `pactd migrate` first");
    }
    admin::run(&db.pool, cli, data_dir, command).await
}

async fn serve(
    db: &Database,
    config: Config,
    migrate: bool,
    dev: bool,
    signal: tokio::task::JoinHandle<()>,
) -> anyhow::Result<()> {
    if signal.is_finished() {
        return Ok(());
    }
    if migrate {
        pact_db::migrate(&db.pool)
            .await
            .context("migrations failed")?;
    }
    if dev {
        admin::seed_demo(&db.pool).await?;
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local = listener.local_addr()?;
    if dev {
        print_dev_banner(&config, db.is_local());
    }
    tracing::info!(listen = %local, public_url = %config.public_url, audience = %config.audience, "pactd serving");
    let state = AppState::new(config, db.pool.clone())
        .await
        .context("cannot build the server")?;
    let shutdown = async move {
        signal.await.ok();
    };
    pact_server::serve(state, listener, shutdown)
        .await
        .context("server error")?;
    tracing::info!("pactd stopped");
    Ok(())
}

fn print_dev_banner(config: &Config, local_db: bool) {
    let card = config.card_url("demo");
    let db = if local_db {
        "private PostgreSQL in the data directory (kept across runs)"
    } else {
        "DATABASE_URL"
    };
    println!(
        "\npactd dev is running.\n\
         \n  Agent Card (demo brand):  {card}\
         \n  PA-JWT audience:          {aud}\
         \n  Database:                 {db}\
         \n  Loopback JWKS URIs:       {loopback}\n\
         \nNext steps:\
         \n  1. Register your personal agent (another terminal):\
         \n       pactd agent add --issuer https://agent.example --jwks-uri http://127.0.0.1:9000/.well-known/jwks.json --name \"My agent\"\
         \n  2. Sign a PA-JWT (ES256/RS256; iss = your issuer, sub = a user id, aud = {aud}, exp <= iat + 300)\
         \n     and send:  curl -s -H \"Authorization: Bearer $PA_JWT\" \\\
         \n       -d '{{\"message\":{{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{{\"text\":\"When are you open?\"}}]}}}}' \\\
         \n       {iface}/message:send\
         \n  3. For account actions, start the device flow at {iface}/oauth/device_authorization (see README).\
         \n\nStop with Ctrl-C.\n",
        aud = config.audience,
        iface = config.interface_url("demo"),
        loopback = if config.jwks.allow_loopback {
            "allowed (dev only)"
        } else {
            "refused"
        },
    );
}
