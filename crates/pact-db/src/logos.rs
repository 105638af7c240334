//! Logos served from pactd's own origin, stored by the SHA-256 of their bytes.

use sqlx::PgExecutor;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredLogo {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// Stores a logo under its hash; storing the same bytes again is a no-op.
pub async fn put(
    db: impl PgExecutor<'_>,
    sha256: &str,
    content_type: &str,
    bytes: &[u8],
) -> DbResult<()> {
    sqlx::query(
        "insert into logos (sha256, content_type, bytes) values ($1, $2, $3) \
         on conflict (sha256) do nothing",
    )
    .bind(sha256)
    .bind(content_type)
    .bind(bytes)
    .execute(db)
    .await?;
    Ok(())
}

pub async fn get(db: impl PgExecutor<'_>, sha256: &str) -> DbResult<Option<StoredLogo>> {
    sqlx::query_as("select content_type, bytes from logos where sha256 = $1")
        .bind(sha256)
        .fetch_optional(db)
        .await
}

/// How many logos are stored (tests: a refused logo stores nothing).
pub async fn count(db: impl PgExecutor<'_>) -> DbResult<i64> {
    sqlx::query_scalar("select count(*) from logos")
        .fetch_one(db)
        .await
}
