//! Which PostgreSQL a command talks to: `DATABASE_URL` when set, otherwise the
//! private cluster in the data directory (started for the command if needed,
//! and stopped again afterwards only if this command started it).

use std::path::Path;

use anyhow::Context;
use pact_db::PgPool;
use pact_db::local_cluster::{ClusterOptions, LocalCluster};

pub struct Database {
    pub pool: PgPool,
    cluster: Option<LocalCluster>,
}

const LOCAL_DATABASE: &str = "pactd";

impl Database {
    pub async fn open(
        url: Option<String>,
        data_dir: &Path,
        max_connections: u32,
    ) -> anyhow::Result<Self> {
        let (url, cluster) = match url {
            Some(url) => (url, None),
            None => {
                let cluster = LocalCluster::start(ClusterOptions {
                    data_dir: data_dir.join("pg"),
                    port: None,
                    ephemeral: false,
                })
                .await
                .context("cannot start the private PostgreSQL (or set DATABASE_URL)")?;
                cluster
                    .ensure_database(LOCAL_DATABASE)
                    .await
                    .context("cannot create the pactd database in the private PostgreSQL")?;
                (cluster.url(LOCAL_DATABASE), Some(cluster))
            }
        };
        let pool = pact_db::connect(&url, max_connections)
            .await
            .context("cannot connect to PostgreSQL")?;
        Ok(Self { pool, cluster })
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
