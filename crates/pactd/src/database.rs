//! Which PostgreSQL a command talks to: `DATABASE_URL` when set, otherwise the
//! private cluster in the data directory (started for the command if needed,
//! and stopped again afterwards only if this command started it).

use std::path::Path;

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
    pub async fn open(
        url: Option<String>,
        data_dir: &Path,
        pool: &PoolSettings,
        create: Create,
    ) -> anyhow::Result<Self> {
        let Some(url) = url else {
            return Self::open_local(data_dir, pool, create).await;
        };
        let pool = pact_db::connect_with(&url, pool)
            .await
            .context("cannot connect to PostgreSQL")?;
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
