//! The sign-in state that customers' accounts (`users`) and staff accounts
//! (`admins`) keep alike, in columns of the same names: the failed-attempt
//! count and lock, and the TOTP secret with the last accepted step. One
//! implementation, so the replay rule (RFC 6238 §5.2) is written once.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// Which kind of account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounts {
    Users,
    Admins,
}

impl Accounts {
    /// The table: a constant, never input, so formatting it into SQL is safe.
    fn table(self) -> &'static str {
        match self {
            Self::Users => "users",
            Self::Admins => "admins",
        }
    }
}

/// A failed sign-in: the new count and, when the rule says so, a lock.
pub async fn record_failure(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    failed_logins: i32,
    locked_until: Option<OffsetDateTime>,
) -> DbResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "update {} set failed_logins = $2, locked_until = $3 where id = $1",
        accounts.table()
    )))
    .bind(id)
    .bind(failed_logins)
    .bind(locked_until)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn clear_failures(db: impl PgExecutor<'_>, accounts: Accounts, id: Uuid) -> DbResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "update {} set failed_logins = 0, locked_until = null where id = $1",
        accounts.table()
    )))
    .bind(id)
    .execute(db)
    .await
    .map(|_| ())
}

/// A new (or no) TOTP secret, sealed; the last accepted step is forgotten
/// with the old secret.
pub async fn set_totp(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    sealed: Option<&[u8]>,
) -> DbResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "update {} set totp_secret_sealed = $2, totp_last_step = null where id = $1",
        accounts.table()
    )))
    .bind(id)
    .bind(sealed)
    .execute(db)
    .await
    .map(|_| ())
}

/// Records the accepted time step only if it is newer than the last one:
/// false means the code was already used (RFC 6238 §5.2).
pub async fn advance_totp_step(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    step: i64,
) -> DbResult<bool> {
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "update {} set totp_last_step = $2 \
         where id = $1 and (totp_last_step is null or totp_last_step < $2)",
        accounts.table()
    )))
    .bind(id)
    .bind(step)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
