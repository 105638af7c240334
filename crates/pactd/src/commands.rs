//! What each command does.

use anyhow::{Context, bail};
use pact_server::{AppState, Config};
use tokio::net::TcpListener;

use crate::cli::{AgentCommand, BrandCommand, Cli, Command};
use crate::database::Database;
use crate::settings;

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
            let config = settings::server_config(args, &file, false)?;
            let db = Database::open(Some(url), &data_dir, 32).await?;
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let result = serve(&db, config, migrate, false).await;
            db.close().await;
            result
        }
        Command::Dev(args) => {
            let config = settings::server_config(args, &file, true)?;
            let db = Database::open(url, &data_dir, 32).await?;
            let migrate = !args.no_migrate.or(file.no_migrate).unwrap_or(false);
            let result = serve(&db, config, migrate, true).await;
            db.close().await;
            result
        }
        command => {
            let db = Database::open(url, &data_dir, 2).await?;
            let result = admin(&db, command).await;
            db.close().await;
            result
        }
    }
}

async fn serve(db: &Database, config: Config, migrate: bool, dev: bool) -> anyhow::Result<()> {
    if migrate {
        pact_db::migrate(&db.pool)
            .await
            .context("migrations failed")?;
    }
    if dev {
        let created = pact_db::brands::insert_if_missing(
            &db.pool,
            "demo",
            "Demo Store",
            "A small demo store: opening hours, returns and orders.",
        )
        .await?;
        if created {
            tracing::info!("seeded the demo brand `demo`");
        }
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let local = listener.local_addr()?;
    if dev {
        print_dev_banner(&config, db.is_local());
    }
    tracing::info!(listen = %local, public_url = %config.public_url, audience = %config.audience, "pactd serving");
    let state = AppState::new(config, db.pool.clone()).context("cannot build the server")?;
    pact_server::serve(state, listener, pact_server::shutdown_signal())
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
         \n  Loopback JWKS URIs:       allowed (dev only)\n\
         \nNext steps:\
         \n  1. Register your personal agent (another terminal):\
         \n       pactd agent add --issuer https://agent.example --jwks-uri http://127.0.0.1:9000/.well-known/jwks.json --name \"My agent\"\
         \n  2. Sign a PA-JWT (ES256/RS256; iss = your issuer, sub = a user id, aud = {aud}, exp <= iat + 300)\
         \n     and send:  curl -s -H \"Authorization: Bearer $PA_JWT\" \\\
         \n       -d '{{\"message\":{{\"messageId\":\"m1\",\"role\":\"ROLE_USER\",\"parts\":[{{\"text\":\"When are you open?\"}}]}}}}' \\\
         \n       {iface}/message:send\
         \n\nStop with Ctrl-C.\n",
        aud = config.audience,
        iface = config.interface_url("demo"),
    );
}

async fn admin(db: &Database, command: &Command) -> anyhow::Result<()> {
    let pool = &db.pool;
    pact_db::migrate(pool).await.context("migrations failed")?;
    match command {
        Command::Migrate => println!("migrations applied"),
        Command::Brand(BrandCommand::Add {
            brand_id,
            name,
            description,
        }) => {
            if !pact_db::brands::is_valid_brand_id(brand_id) {
                bail!(
                    "invalid brand id {brand_id:?}: use 1–63 of a-z, 0-9, '-' and '_', starting with a letter or digit"
                );
            }
            match pact_db::brands::insert(pool, brand_id, name, description).await {
                Ok(b) => println!("added brand {} ({})", b.id, b.name),
                Err(e) if pact_db::is_unique_violation(&e) => {
                    bail!("brand {brand_id:?} already exists")
                }
                Err(e) => return Err(e.into()),
            }
        }
        Command::Brand(BrandCommand::List) => {
            for b in pact_db::brands::list(pool).await? {
                println!("{}\t{}\t{}", b.id, b.name, b.description);
            }
        }
        Command::Agent(AgentCommand::Add {
            issuer,
            jwks_uri,
            name,
        }) => {
            if issuer.trim().is_empty() || issuer.trim() != issuer {
                bail!(
                    "the issuer must be a non-empty string without surrounding spaces (it is compared exactly)"
                );
            }
            // Loopback URIs are allowed at registration; the server refuses to
            // fetch them unless it runs with --allow-loopback-jwks.
            pact_jose::check_jwks_uri(jwks_uri, true)
                .map_err(|e| anyhow::anyhow!("invalid --jwks-uri: {e}"))?;
            let name = name.clone().unwrap_or_else(|| issuer.clone());
            let agent = pact_db::agents::upsert(pool, issuer, jwks_uri, &name).await?;
            println!(
                "registered {} (jwks {}), {}",
                agent.issuer,
                agent.jwks_uri,
                if agent.enabled { "enabled" } else { "disabled" }
            );
        }
        Command::Agent(AgentCommand::Disable { issuer }) => {
            set_enabled(pool, issuer, false).await?
        }
        Command::Agent(AgentCommand::Enable { issuer }) => set_enabled(pool, issuer, true).await?,
        Command::Agent(AgentCommand::List) => {
            for a in pact_db::agents::list(pool).await? {
                let state = if a.enabled { "enabled" } else { "disabled" };
                println!("{}\t{}\t{}\t{}", a.issuer, state, a.jwks_uri, a.name);
            }
        }
        Command::Serve(_) | Command::Dev(_) => {}
    }
    Ok(())
}

async fn set_enabled(pool: &pact_db::PgPool, issuer: &str, enabled: bool) -> anyhow::Result<()> {
    if !pact_db::agents::set_enabled(pool, issuer, enabled).await? {
        bail!("no registered agent with issuer {issuer:?}");
    }
    println!("{} {issuer}", if enabled { "enabled" } else { "disabled" });
    Ok(())
}
