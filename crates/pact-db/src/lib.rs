//! PostgreSQL storage for pactd.
//!
//! Queries are plain async functions that take an executor (a pool, a
//! connection or a transaction), so callers decide the transaction boundaries.
//! Migrations are embedded in the binary.

pub mod agents;
pub mod brands;
pub mod conversations;
pub mod demo_orders;
pub mod device_authorizations;
pub mod grants;
pub mod local_cluster;
pub mod merchant;
pub mod receipts;
pub mod scopes;
pub mod sessions;
pub mod signing_keys;
pub mod users;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
pub use sqlx::{PgPool, Postgres, Transaction};

/// The migrations in `migrations/`, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

pub type DbResult<T> = Result<T, sqlx::Error>;

/// Opens a pool. Connections are made lazily after a first successful ping so a
/// wrong URL fails at start-up, not on the first request.
pub async fn connect(url: &str, max_connections: u32) -> DbResult<PgPool> {
    let options: PgConnectOptions = url.parse()?;
    let options = options.application_name("pactd");
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options)
        .await
}

/// Applies pending migrations.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// True when the error is a unique-constraint violation (SQLSTATE 23505).
pub fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

/// How many embedded migrations the database has not applied yet.
pub async fn pending_migrations(pool: &PgPool) -> DbResult<usize> {
    let exists: bool = sqlx::query_scalar("select to_regclass('_sqlx_migrations') is not null")
        .fetch_one(pool)
        .await?;
    let applied: Vec<i64> = if exists {
        sqlx::query_scalar("select version from _sqlx_migrations where success")
            .fetch_all(pool)
            .await?
    } else {
        Vec::new()
    };
    Ok(MIGRATOR
        .iter()
        .filter(|m| m.migration_type.is_up_migration() && !applied.contains(&m.version))
        .count())
}
