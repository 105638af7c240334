//! One fresh database per test, on `DATABASE_URL`'s server when set, otherwise
//! on a throwaway cluster started once per test binary from the system's
//! PostgreSQL binaries (a watchdog stops it when the test process exits).

use std::sync::OnceLock;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The server URL with no database path, e.g. `postgres://postgres@127.0.0.1:5433`.
fn server() -> &'static (String, String) {
    static SERVER: OnceLock<(String, String)> = OnceLock::new();
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            let mut parsed = url::Url::parse(&url).expect("DATABASE_URL is not a URL");
            let admin_db = parsed.path().trim_start_matches('/').to_owned();
            parsed.set_path("");
            let admin_db = if admin_db.is_empty() {
                "postgres".to_owned()
            } else {
                admin_db
            };
            return (
                parsed.to_string().trim_end_matches('/').to_owned(),
                admin_db,
            );
        }
        // The cluster outlives every test's runtime, so start it on a runtime of its own.
        let url = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let cluster = pact_devdb::LocalCluster::start_ephemeral_with_watchdog()
                    .await
                    .unwrap_or_else(|e| {
                        panic!("cannot start a throwaway PostgreSQL for the tests: {e}")
                    });
                let url = cluster.url("postgres");
                // The watchdog stops it when this process exits.
                std::mem::forget(cluster);
                url
            })
        })
        .join()
        .expect("cluster thread panicked");
        let mut parsed = url::Url::parse(&url).unwrap();
        parsed.set_path("");
        (
            parsed.to_string().trim_end_matches('/').to_owned(),
            "postgres".to_owned(),
        )
    })
}

/// Creates a fresh, migrated database and returns its URL: a copy of this
/// process's migrated template (`CREATE DATABASE … TEMPLATE`), which takes a
/// fraction of the time that migrating a new database does.
pub async fn fresh_database() -> String {
    create(Some(template().await)).await
}

/// The migrated database every test's copies are made from, one per test
/// process (migrated once; nobody stays connected to it, as copying needs).
async fn template() -> &'static str {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TEMPLATE
        .get_or_init(|| async {
            drop_abandoned().await;
            let url = empty_database().await;
            let pool = pact_db::connect(&url, 1)
                .await
                .expect("connect to the template database");
            pact_db::migrate(&pool)
                .await
                .expect("migrate the template database");
            pool.close().await;
            url.rsplit('/').next().unwrap_or_default().to_owned()
        })
        .await
}

/// Creates a fresh database with no schema at all (for `pactd migrate`) and returns its URL.
pub async fn empty_database() -> String {
    create(None).await
}

/// Every test database's name starts so; the creating process's id follows.
const PREFIX: &str = "pactd_test_";

/// Drops the test databases on `DATABASE_URL`'s server that processes of this
/// machine made and left behind (their process is gone): a test process
/// ends without running destructors, so its databases are dropped by the
/// next run instead of piling up. A database still in use (a process on
/// another machine sharing the server, whose id means nothing here) cannot be
/// dropped without FORCE, which is never used: that failure is ignored. The
/// throwaway cluster needs none of this; it goes with its process.
async fn drop_abandoned() {
    if std::env::var_os("DATABASE_URL").is_none() {
        return;
    }
    let (server, admin_db) = server();
    let Ok(mut admin) = PgConnection::connect(&format!("{server}/{admin_db}")).await else {
        return;
    };
    let names: Vec<String> =
        sqlx::query_scalar("select datname from pg_database where datname like 'pactd\\_test\\_%'")
            .fetch_all(&mut admin)
            .await
            .unwrap_or_default();
    for name in names {
        if !abandoned(&name) {
            continue;
        }
        // The name was checked to be ours: letters, digits and underscores.
        let sql = format!("drop database if exists {name}");
        let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&mut admin)
            .await;
    }
    admin.close().await.ok();
}

/// Whether `name` is a test database whose creating process is no longer
/// running on this machine.
fn abandoned(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let Some((pid, id)) = rest.split_once('_') else {
        // Named before the process id was part of the name: no process can
        // be using it once its own run ended, but we cannot tell; keep it.
        return false;
    };
    let ours = pid.bytes().all(|b| b.is_ascii_digit())
        && !pid.is_empty()
        && id.bytes().all(|b| b.is_ascii_alphanumeric());
    ours && pid != std::process::id().to_string()
        && !std::path::Path::new("/proc").join(pid).exists()
}

async fn create(template: Option<&str>) -> String {
    let (server, admin_db) = server();
    // The creating process's id in the name lets a later run drop what this
    // one leaves behind (`drop_abandoned`).
    let name = format!(
        "{PREFIX}{}_{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    );
    let mut admin = PgConnection::connect(&format!("{server}/{admin_db}"))
        .await
        .expect("cannot connect to the test PostgreSQL server");
    let sql = match template {
        Some(t) => format!("create database {name} template {t}"),
        None => format!("create database {name}"),
    };
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(&mut admin)
        .await
        .expect("create database");
    admin.close().await.ok();
    format!("{server}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_databases_of_processes_that_are_gone_are_abandoned() {
        let id = uuid::Uuid::new_v4().simple().to_string();
        // Above Linux's largest process id (2^22), so never running.
        assert!(abandoned(&format!("{PREFIX}4194305_{id}")));
        assert!(!abandoned(&format!("{PREFIX}{}_{id}", std::process::id())));
        assert!(!abandoned(&format!("{PREFIX}1_{id}")), "init runs");
        assert!(!abandoned(&format!("{PREFIX}{id}")), "an older name");
        assert!(!abandoned(&format!("{PREFIX}4194305_{id}; drop")));
        assert!(!abandoned(&format!("pactd_{id}")));
        assert!(!abandoned(&format!("{PREFIX}_{id}")));
    }
}
