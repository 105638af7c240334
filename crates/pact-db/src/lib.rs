//! PostgreSQL storage for pactd.
//!
//! Queries are plain async functions that take an executor (a pool, a
//! connection or a transaction), so callers decide the transaction boundaries.
//! Migrations are embedded in the binary. Functions return [`DbResult`], whose
//! [`Error`] sorts failures (not found, unique / foreign-key / check violation
//! with the constraint's name, serialization failure); callers match on that or
//! use [`ResultExt::on_constraint`], never on `sqlx::Error`.
//!
//! # Adding a query
//!
//! SQL is checked at compile time against the schema of `migrations/`: write
//! `sqlx::query!`, `sqlx::query_as!(Row, ...)` or `sqlx::query_scalar!` with
//! the SQL as a string literal (no `format!`; repeat the column list), and
//! let the column types decide the Rust types. Where PostgreSQL cannot know
//! nullability (expressions, `returning` of a CTE, outer joins), say it:
//! `count(*) as "n!"`, `u.email as "email?"`. A status column with a fixed
//! set of values is a Rust enum deriving `sqlx::Type` (see
//! [`device_authorizations::Status`]), read with `status as "status: Status"`
//! and bound as `status as Status`. Only SQL whose shape is built at run time
//! (optional filters) stays `sqlx::query` / `QueryBuilder`, with a comment.
//!
//! The build never connects to a database: `.cargo/config.toml` sets
//! `SQLX_OFFLINE=true`, and the macros read the query descriptions committed
//! in `.sqlx/`. After adding or changing a query or a migration, run
//! `scripts/sqlx-prepare` (it migrates a fresh database, on `DATABASE_URL`'s
//! server or a throwaway cluster, and rewrites `.sqlx/`) and commit `.sqlx/`
//! with the change. `.ci/run` runs `scripts/sqlx-prepare --check`, which fails
//! when `.sqlx/` is stale. Checked macros belong in this crate only: the
//! script compiles no other crate online.

mod error;

pub mod admin_factors;
pub mod admin_search;
pub mod admins;
pub mod agents;
pub mod audit;
pub mod brand_oidc;
pub mod brands;
pub mod budgets;
pub mod conversations;
pub mod demo_orders;
pub mod device_authorizations;
pub mod grants;
pub mod ids;
pub mod logos;
pub mod merchant;
pub mod nodes;
pub mod parties;
pub mod password_resets;
pub mod receipt_log;
pub mod receipts;
pub mod registries;
pub mod scopes;
pub mod sealed;
pub mod sessions;
pub mod sign_in_failures;
pub mod sign_in_state;
pub mod signing_keys;
pub mod step_up_tasks;
pub mod turn_fences;
pub mod users;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
pub use sqlx::{PgPool, Postgres, Transaction};

/// The migrations in `migrations/`, embedded at build time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

pub use error::{Error, ResultExt};

pub type DbResult<T> = Result<T, Error>;

/// Opens a pool. Connections are made lazily after a first successful ping so a
/// wrong URL fails at start-up, not on the first request.
pub async fn connect(url: &str, max_connections: u32) -> DbResult<PgPool> {
    connect_with(
        url,
        &PoolSettings {
            max_connections,
            ..PoolSettings::default()
        },
    )
    .await
}

/// The pool's size and how long a request may wait for a connection.
#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
}

/// Four connections per CPU, at least 8: PostgreSQL runs one process per
/// busy connection, so more than a few per core only queue for the CPU
/// (docs/performance.md), while a turn's database waits (commits, network)
/// leave room for a few more than one per core.
pub fn default_pool_size() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    u32::try_from(cpus.saturating_mul(4))
        .unwrap_or(u32::MAX)
        .clamp(8, 64)
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: default_pool_size(),
            acquire_timeout: Duration::from_secs(3),
        }
    }
}

/// A pooled connection idle for this long is pinged before it is used again.
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);

pub async fn connect_with(url: &str, settings: &PoolSettings) -> DbResult<PgPool> {
    let options: PgConnectOptions = url.parse().map_err(Error::from)?;
    let options = options.application_name("pactd");
    pool_options(settings.max_connections, settings.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(Error::from)
}

fn pool_options(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(acquire_timeout)
        // sqlx pings every connection it hands out by default: one more round
        // trip per statement on a pool. A connection that was in use a moment
        // ago is alive; only one that sat idle (e.g. across a database
        // restart) is checked before use.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= IDLE_CHECK_AFTER {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// A second, smaller pool on the same server whose sessions commit without
/// waiting for the WAL flush (`synchronous_commit = off`), for writes a crash
/// may lose without harm: bookkeeping that a later durable commit in the same
/// WAL would flush anyway, or that a client simply repeats (see each caller).
/// A single statement on it is one round trip; the same relaxation inside a
/// transaction (`SET LOCAL`) costs two more, which on a busy two-core machine
/// is slower than the durable commit it saves (docs/performance.md).
///
/// Connections are made on first use, with the main pool's connect options.
pub fn relaxed_pool(main: &PgPool) -> PgPool {
    let options = (*main.connect_options())
        .clone()
        .options([("synchronous_commit", "off")]);
    let size = (main.options().get_max_connections() / 2).max(2);
    pool_options(size, main.options().get_acquire_timeout()).connect_lazy_with(options)
}

/// A pool for the node's change listener alone: one connection at a time,
/// made with the main pool's connect options, waiting at most
/// `connect_timeout` for it, never idle-checked or recycled (a `LISTEN`
/// session must stay put), and named `pactd listener` in
/// `pg_stat_activity`. The session asks the server for TCP keepalives and a
/// user timeout (PostgreSQL's `tcp_keepalives_*`, `tcp_user_timeout`): a node
/// that vanishes has its `LISTEN` backend ended by the server instead of left
/// holding its place in the notification queue. Its heartbeat is a `NOTIFY`,
/// which commits a transaction id each time, so it does not wait for the WAL
/// flush (`synchronous_commit = off`): losing a heartbeat in a crash is harmless.
///
/// A new pool per connection attempt, not one shared: dropping a listener
/// whose connection froze sends `UNLISTEN` from a background task that waits
/// on the frozen socket until the kernel gives up on it, and that task must
/// hold nobody's slot.
pub fn listener_pool(main: &PgPool, connect_timeout: Duration) -> PgPool {
    let options = (*main.connect_options())
        .clone()
        .application_name(LISTENER_APPLICATION_NAME)
        .options([
            ("synchronous_commit", "off"),
            ("tcp_keepalives_idle", "10"),
            ("tcp_keepalives_interval", "5"),
            ("tcp_keepalives_count", "3"),
            ("tcp_user_timeout", "20000"),
        ]);
    PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .acquire_timeout(connect_timeout)
        .test_before_acquire(false)
        .idle_timeout(None)
        .max_lifetime(None)
        .connect_lazy_with(options)
}

/// The `application_name` of the change listener's session.
pub const LISTENER_APPLICATION_NAME: &str = "pactd listener";

/// `NOTIFY channel, payload` (through `pg_notify`, which takes the channel as
/// a value: the listener's own channel name is made at run time). Cast to
/// text because `pg_notify` returns `void`, which has no Rust type here.
pub async fn notify(db: impl sqlx::PgExecutor<'_>, channel: &str, payload: &str) -> DbResult<()> {
    sqlx::query!("select pg_notify($1, $2)::text as sent", channel, payload)
        .fetch_one(db)
        .await?;
    Ok(())
}

/// Whether the server accepts a new connection now and answers on it: a
/// connection of its own with the pool's options, outside the pool, because
/// the pool retries a refused connection until its acquire timeout and so
/// cannot tell "refused" from "slow".
pub async fn ping_new_connection(pool: &PgPool) -> DbResult<()> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect_with(&pool.connect_options()).await?;
    ping(&mut conn).await?;
    conn.close().await?;
    Ok(())
}

/// What a database error means for the request that met it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The database cannot be reached or refuses connections now: answer 503
    /// and let the client retry.
    Unavailable,
    /// The input cannot be stored (a NUL byte, invalid text for a typed
    /// column, a value beyond a limit): the client's fault, answer 400.
    BadInput,
    /// Anything else is ours: 500.
    Other,
}

/// Sorts an error by SQLSTATE (PostgreSQL manual, Appendix A) and by the
/// pool's own failures.
pub fn classify(err: &Error) -> Failure {
    match err.as_sqlx() {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => Failure::Unavailable,
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // 08: connection exception; 57P01–57P03: shutting down or
            // starting up; 53300: too many connections; 25006: a write on a
            // read-only server, which during a failover means the connection
            // reached a standby (or a primary being demoted) instead of the
            // new primary: retrying shortly reaches the right one.
            Some(code)
                if code.starts_with("08")
                    || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "25006") =>
            {
                Failure::Unavailable
            }
            // 22021: a NUL byte or invalid UTF-8; 22P05: untranslatable;
            // 22P02: invalid text for a typed column; 22001: too long;
            // 22003: number out of range; 54000: a value beyond a limit.
            Some("22021" | "22P05" | "22P02" | "22001" | "22003" | "54000") => Failure::BadInput,
            _ => Failure::Other,
        },
        _ => Failure::Other,
    }
}

/// Applies pending migrations.
///
/// Migrations are forward-only and additive first (docs/backup.md, "Upgrades"):
/// during a rolling upgrade the new release migrates while nodes of the
/// previous one still run, and any of those may restart. So versions applied
/// by a newer pactd are tolerated here instead of refused; each migration this
/// binary knows is still checked against its checksum.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let mut migrator = sqlx::migrate!("../../migrations");
    migrator.set_ignore_missing(true);
    migrator.run(pool).await
}

/// True when the error is a unique-constraint violation (SQLSTATE 23505).
pub fn is_unique_violation(err: &Error) -> bool {
    err.is_unique_violation()
}

/// One round trip: the database answers (readiness, and the probe while it is down).
pub async fn ping(db: impl sqlx::PgExecutor<'_>) -> DbResult<()> {
    sqlx::query!("select 1 as one").fetch_one(db).await?;
    Ok(())
}

/// Checks every idle connection of `pool` at once and closes those that do
/// not answer within `timeout`; returns how many were closed.
///
/// For a node that has just seen the database come back: the pool may still
/// hold connections that were cut while idle. sqlx finds a broken one only
/// when it is next used, and the idle check before use ([`IDLE_CHECK_AFTER`])
/// passes one that was in use shortly before the cut, so the next request
/// to draw it would fail. `try_acquire` takes only idle connections, without
/// waiting and without opening new ones.
pub async fn sweep_idle(pool: &PgPool, timeout: Duration) -> usize {
    let mut checks = tokio::task::JoinSet::new();
    while let Some(mut conn) = pool.try_acquire() {
        checks.spawn(async move {
            let alive = tokio::time::timeout(timeout, sqlx::Connection::ping(&mut *conn))
                .await
                .is_ok_and(|r| r.is_ok());
            if !alive {
                conn.close_on_drop();
            }
            alive
        });
    }
    let mut closed = 0;
    while let Some(alive) = checks.join_next().await {
        if !matches!(alive, Ok(true)) {
            closed += 1;
        }
    }
    closed
}

/// How many embedded migrations the database has not applied yet.
pub async fn pending_migrations(pool: &PgPool) -> DbResult<usize> {
    let exists: bool =
        sqlx::query_scalar!("select to_regclass('_sqlx_migrations') is not null as \"exists!\"",)
            .fetch_one(pool)
            .await?;
    let applied: Vec<i64> = if exists {
        sqlx::query_scalar!("select version from _sqlx_migrations where success",)
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
