//! The audit log (migration 0012): who did what to what, when and from where.
//! Callers never put a secret in `detail`.

use sqlx::PgExecutor;
use time::OffsetDateTime;

use crate::DbResult;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Entry {
    pub id: i64,
    pub at: OffsetDateTime,
    pub actor_kind: String,
    pub actor: String,
    pub action: String,
    pub target: Option<String>,
    pub brand_id: Option<String>,
    pub detail: serde_json::Value,
    pub client_addr: Option<String>,
}

/// What is being recorded.
#[derive(Clone, Debug)]
pub struct NewEntry<'a> {
    pub actor_kind: &'a str,
    pub actor: &'a str,
    pub action: &'a str,
    pub target: Option<&'a str>,
    pub brand_id: Option<&'a str>,
    pub detail: serde_json::Value,
    pub client_addr: Option<&'a str>,
}

pub async fn record(db: impl PgExecutor<'_>, e: &NewEntry<'_>) -> DbResult<()> {
    sqlx::query!(
        "insert into audit_log (actor_kind, actor, action, target, brand_id, detail, client_addr) \
         values ($1, $2, $3, $4, $5, $6, $7)",
        e.actor_kind,
        e.actor,
        e.action,
        e.target,
        e.brand_id,
        &e.detail,
        e.client_addr,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

#[derive(Clone, Debug, Default)]
pub struct Filter<'a> {
    /// Only entries about these brands (a brand-limited reader); `None`: all.
    pub brands: Option<&'a [String]>,
    pub actor: Option<&'a str>,
    /// An exact action, or a prefix ending in `.` (`grant.`).
    pub action: Option<&'a str>,
    pub target: Option<&'a str>,
    pub brand_id: Option<&'a str>,
    /// Entries with an id below this (the cursor of the previous page).
    pub before_id: Option<i64>,
    pub limit: i64,
}

/// Newest first.
pub async fn list(db: impl PgExecutor<'_>, f: &Filter<'_>) -> DbResult<Vec<Entry>> {
    let action_prefix = f.action.filter(|a| a.ends_with('.')).map(|a| {
        format!(
            "{}%",
            a.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        )
    });
    let action_exact = f.action.filter(|a| !a.ends_with('.'));
    sqlx::query_as!(
        Entry,
        "select id, at, actor_kind, actor, action, target, brand_id, detail, client_addr from audit_log \
         where ($1::text[] is null or brand_id = any($1)) and ($2::text is null or actor = $2) \
         and ($3::text is null or action = $3) and ($4::text is null or action like $4) \
         and ($5::text is null or target = $5) and ($6::text is null or brand_id = $6) \
         and ($7::bigint is null or id < $7) order by id desc limit $8",
        f.brands,
        f.actor,
        action_exact,
        action_prefix,
        f.target,
        f.brand_id,
        f.before_id,
        f.limit,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}
