//! `pact-schema-db -- COMMAND [ARGS...]`: runs COMMAND with `DATABASE_URL` pointing at a fresh
//! database that holds exactly the schema of `migrations/`, then removes that database.
//!
//! pact-db's queries are checked at compile time (`sqlx::query!`), and the macros describe each
//! query against a live database only when `.sqlx/` is being regenerated (`scripts/sqlx-prepare`).
//! That database must have the schema the migrations build, nothing more and nothing older, so it
//! is made here from scratch every time:
//!
//! - when `DATABASE_URL` is set, a new database on that server, dropped afterwards;
//! - otherwise a throwaway cluster from the system's PostgreSQL binaries ([`LocalCluster`]), as the
//!   tests use in CI, where no server runs.
//!
//! The migrations are read from `migrations/` at run time rather than embedded: this binary must
//! not depend on pact-db, whose build is what needs the database.

use std::path::Path;
use std::process::ExitCode;

use pact_devdb::LocalCluster;
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection};

const MIGRATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations");

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "--") {
        args.next();
    }
    let command: Vec<_> = args.collect();
    if command.is_empty() {
        eprintln!("usage: pact-schema-db -- COMMAND [ARGS...]");
        return ExitCode::from(2);
    }
    match run(&command).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("pact-schema-db: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: &[std::ffi::OsString]) -> Result<ExitCode, BoxError> {
    // A name of its own per run, so two runs on one server never meet.
    let name = format!("pact_schema_{}", std::process::id());
    let (server, cluster) = match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => (url.parse::<PgConnectOptions>()?, None),
        _ => {
            let cluster = LocalCluster::start_ephemeral_with_watchdog().await?;
            let options = cluster.url("postgres").parse::<PgConnectOptions>()?;
            (options, Some(cluster))
        }
    };
    let result = with_database(&server, &name, command).await;
    if let Some(cluster) = cluster {
        cluster.stop().await?;
    }
    result
}

async fn with_database(
    server: &PgConnectOptions,
    name: &str,
    command: &[std::ffi::OsString],
) -> Result<ExitCode, BoxError> {
    let mut admin = PgConnection::connect_with(server).await?;
    // Identifiers cannot be bind parameters; the name is ours (letters, digits, `_`).
    sqlx::query(AssertSqlSafe(format!("drop database if exists {name}")))
        .execute(&mut admin)
        .await?;
    sqlx::query(AssertSqlSafe(format!("create database {name}")))
        .execute(&mut admin)
        .await?;
    let result = migrate_and_run(&server.clone().database(name), command).await;
    sqlx::query(AssertSqlSafe(format!(
        "drop database if exists {name} with (force)"
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    result
}

async fn migrate_and_run(
    options: &PgConnectOptions,
    command: &[std::ffi::OsString],
) -> Result<ExitCode, BoxError> {
    let mut conn = PgConnection::connect_with(options).await?;
    sqlx::migrate::Migrator::new(Path::new(MIGRATIONS))
        .await?
        .run(&mut conn)
        .await?;
    conn.close().await?;
    let url = options.to_url_lossy();
    let Some((program, args)) = command.split_first() else {
        return Ok(ExitCode::from(2));
    };
    let status = tokio::process::Command::new(program)
        .args(args)
        .env("DATABASE_URL", url.as_str())
        .status()
        .await?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
