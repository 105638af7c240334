//! Which PostgreSQL a command talks to: `DATABASE_URL` when set, otherwise the
//! private cluster in the data directory (started for the command if needed,
//! and stopped again afterwards only if this command started it).

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use pact_db::{PgPool, PoolSettings};
use pact_devdb::{ClusterOptions, LocalCluster};

pub struct Database {
    pub pool: PgPool,
    cluster: Option<LocalCluster>,
}

const LOCAL_DATABASE: &str = "pactd";

/// Whether a command may create the private cluster when it does not exist yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Create {
    /// `dev`: create it on first run.
    Yes,
    /// Admin commands: only use an existing one, so a forgotten `DATABASE_URL`
    /// is an error rather than a silently new, empty database.
    No,
}

impl Database {
    /// `wait`: how long to keep trying a `url` that does not accept
    /// connections yet (the server's start, `db_wait`); zero for the admin
    /// commands, which report the failure at once.
    pub async fn open(
        url: Option<String>,
        data_dir: &Path,
        pool: &PoolSettings,
        create: Create,
        wait: Duration,
    ) -> anyhow::Result<Self> {
        let Some(url) = url else {
            return Self::open_local(data_dir, pool, create).await;
        };
        let pool = connect_waiting(&url, pool, wait).await?;
        Ok(Self {
            pool,
            cluster: None,
        })
    }

    async fn open_local(
        data_dir: &Path,
        settings: &PoolSettings,
        create: Create,
    ) -> anyhow::Result<Self> {
        let pg_dir = data_dir.join("pg");
        if create == Create::No && !pg_dir.join("PG_VERSION").exists() {
            anyhow::bail!(
                "DATABASE_URL is not set and there is no `pactd dev` database in {} \
                 (set DATABASE_URL, or --data-dir to the directory `pactd dev` uses)",
                data_dir.display()
            );
        }
        let cluster = LocalCluster::start(ClusterOptions {
            data_dir: pg_dir,
            port: None,
            ephemeral: false,
        })
        .await
        .context("cannot start the private PostgreSQL (or set DATABASE_URL)")?;
        let url = cluster.url(LOCAL_DATABASE);
        let pool = match cluster.ensure_database(LOCAL_DATABASE).await {
            Ok(()) => pact_db::connect_with(&url, settings)
                .await
                .context("cannot connect to the private PostgreSQL"),
            Err(e) => Err(anyhow::Error::new(e)
                .context("cannot create the pactd database in the private PostgreSQL")),
        };
        match pool {
            Ok(pool) => Ok(Self {
                pool,
                cluster: Some(cluster),
            }),
            Err(e) => {
                // Do not leave behind a cluster this command started.
                if cluster.started_by_us() {
                    cluster.stop().await.ok();
                }
                Err(e)
            }
        }
    }

    /// True when this process runs on the private cluster.
    pub fn is_local(&self) -> bool {
        self.cluster.is_some()
    }

    pub async fn close(self) {
        self.pool.close().await;
        let Some(cluster) = self.cluster.filter(LocalCluster::started_by_us) else {
            return;
        };
        if let Err(e) = cluster.stop().await {
            tracing::warn!(error = %e, "could not stop the private PostgreSQL");
        }
    }
}

/// The first wait between two attempts, doubled after each up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Connects to `url`, trying again with back-off while PostgreSQL is not
/// reachable (refused, reset, starting up: what `pact_db::classify` calls
/// unavailable) for at most `wait`, and saying so in the log. A database
/// restarted alongside pactd (compose, a pod, a failover) is then waited for
/// instead of ending the process after one pool timeout. Any other failure (a
/// wrong password, no such database) is reported at once: waiting would not
/// change it.
async fn connect_waiting(
    url: &str,
    settings: &PoolSettings,
    wait: Duration,
) -> anyhow::Result<PgPool> {
    let started = tokio::time::Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut attempts = 1u32;
    loop {
        let e = match pact_db::connect_with(url, settings).await {
            Ok(pool) => {
                if attempts > 1 {
                    tracing::info!(
                        attempts,
                        waited_secs = started.elapsed().as_secs(),
                        "PostgreSQL is reachable"
                    );
                }
                return Ok(pool);
            }
            Err(e) => e,
        };
        let waited = started.elapsed();
        let retryable = pact_db::classify(&e) == pact_db::Failure::Unavailable;
        if !retryable || waited + backoff > wait {
            let context = if retryable && !wait.is_zero() {
                format!(
                    "cannot connect to PostgreSQL: gave up after {} s and {attempts} attempt{} (db_wait is {} s)",
                    waited.as_secs(),
                    if attempts == 1 { "" } else { "s" },
                    wait.as_secs()
                )
            } else {
                "cannot connect to PostgreSQL".to_owned()
            };
            return Err(anyhow::Error::new(e).context(context));
        }
        // The error names the server's answer, never the URL's password.
        tracing::warn!(
            error = %e,
            attempt = attempts,
            retry_in_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
            waited_secs = waited.as_secs(),
            db_wait_secs = wait.as_secs(),
            "PostgreSQL is not reachable yet: waiting for it"
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        attempts += 1;
    }
}
