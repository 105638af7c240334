//! Logos served from pactd's own origin, stored by the SHA-256 of their bytes.

use sqlx::PgExecutor;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredLogo {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// Stores a logo under its hash. Storing the same bytes again only renews
/// `created_at`, so the sweep of unused logos cannot take a logo that is
/// being referenced again right now.
pub async fn put(
    db: impl PgExecutor<'_>,
    sha256: &str,
    content_type: &str,
    bytes: &[u8],
) -> DbResult<()> {
    sqlx::query!(
        "insert into logos (sha256, content_type, bytes) values ($1, $2, $3) \
         on conflict (sha256) do update set created_at = now()",
        sha256,
        content_type,
        bytes,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn get(db: impl PgExecutor<'_>, sha256: &str) -> DbResult<Option<StoredLogo>> {
    sqlx::query_as!(
        StoredLogo,
        "select content_type, bytes from logos where sha256 = $1",
        sha256,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

/// Deletes logos stored before `before` that nothing shows any more (a
/// platform's logo replaced, a brand's removed); returns how many.
pub async fn delete_unused(db: impl PgExecutor<'_>, before: time::OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query!(
        "delete from logos l where l.created_at < $1 \
         and not exists (select 1 from agents a where a.logo_sha256 = l.sha256) \
         and not exists (select 1 from brands b where b.settings->>'logo' = l.sha256)",
        before,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// How many logos are stored (tests: a refused logo stores nothing).
pub async fn count(db: impl PgExecutor<'_>) -> DbResult<i64> {
    sqlx::query_scalar!("select count(*) as \"n!\" from logos",)
        .fetch_one(db)
        .await
        .map_err(Into::into)
}
