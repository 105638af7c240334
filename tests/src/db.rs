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

async fn create(template: Option<&str>) -> String {
    let (server, admin_db) = server();
    let name = format!("pactd_test_{}", uuid::Uuid::new_v4().simple());
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
