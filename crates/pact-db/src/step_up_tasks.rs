//! The `auth-required` tasks of step-ups (migration 0042), kept so that a
//! personal agent can follow one with Get Task (A2A 1.0 §3.1.3, PACT §5.5).

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;
use crate::device_authorizations::Status;
use crate::parties::PaUser;

/// Stores the task as it was returned, with the authorization behind its link.
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    authorization_id: Uuid,
    task: &serde_json::Value,
    now: OffsetDateTime,
) -> DbResult<()> {
    sqlx::query!(
        "insert into step_up_tasks (id, authorization_id, task, created_at) values ($1, $2, $3, $4)",
        id,
        authorization_id,
        task,
        now,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A task and where its authorization stands.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StepUpTask {
    pub task: serde_json::Value,
    pub status: Status,
    pub expires_at: OffsetDateTime,
    /// A step-up beyond a limit (its approval adds an operation; no token).
    pub operation: bool,
}

/// The task `id` when it was issued to this PA and subject at this brand;
/// `None` for an unknown id and for anyone else's alike.
pub async fn find_for(
    db: impl PgExecutor<'_>,
    id: Uuid,
    owner: PaUser<'_>,
) -> DbResult<Option<StepUpTask>> {
    let PaUser {
        brand_id,
        pa_issuer,
        pa_sub,
    } = owner;
    sqlx::query_as!(
        StepUpTask,
        "select t.task, a.status as \"status: Status\", a.expires_at, \
                a.operations is not null as \"operation!\" \
         from step_up_tasks t join device_authorizations a on a.id = t.authorization_id \
         where t.id = $1 and a.brand_id = $2 and a.pa_issuer = $3 and a.pa_sub = $4",
        id,
        brand_id,
        pa_issuer,
        pa_sub,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}
