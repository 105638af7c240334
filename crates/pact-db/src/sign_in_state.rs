//! The sign-in state that customers' accounts (`users`) and staff accounts
//! (`admins`) keep alike, in columns of the same names: the failed-attempt
//! count and lock, and the TOTP secret with the last accepted step. One
//! implementation, so the replay rule (RFC 6238 §5.2) is written once.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

/// Which kind of account. Each function below holds one checked statement per
/// table (the statements differ only in the table's name), so both stay
/// checked at compile time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounts {
    Users,
    Admins,
}

/// A failed sign-in: the new count and, when the rule says so, a lock.
pub async fn record_failure(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    failed_logins: i32,
    locked_until: Option<OffsetDateTime>,
) -> DbResult<()> {
    let query = match accounts {
        Accounts::Users => sqlx::query!(
            "update users set failed_logins = $2, locked_until = $3 where id = $1",
            id,
            failed_logins,
            locked_until,
        ),
        Accounts::Admins => sqlx::query!(
            "update admins set failed_logins = $2, locked_until = $3 where id = $1",
            id,
            failed_logins,
            locked_until,
        ),
    };
    query.execute(db).await?;
    Ok(())
}

/// Counts one failed sign-in in the row itself and returns the new count,
/// so that failures sent at once all count (a count read earlier and
/// written back would let parallel guesses count as one); `None` when the
/// account is gone. The lock that count calls for is [`lock_until`]'s.
pub async fn count_failure(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
) -> DbResult<Option<i32>> {
    let query = match accounts {
        Accounts::Users => sqlx::query_scalar!(
            "update users set failed_logins = failed_logins + 1 where id = $1 returning failed_logins",
            id,
        ),
        Accounts::Admins => sqlx::query_scalar!(
            "update admins set failed_logins = failed_logins + 1 where id = $1 returning failed_logins",
            id,
        ),
    };
    Ok(query.fetch_optional(db).await?)
}

/// Locks the account until `until`, unless a longer lock is already on.
pub async fn lock_until(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    until: OffsetDateTime,
) -> DbResult<()> {
    let query = match accounts {
        Accounts::Users => sqlx::query!(
            "update users set locked_until = $2 where id = $1 \
             and (locked_until is null or locked_until < $2)",
            id,
            until,
        ),
        Accounts::Admins => sqlx::query!(
            "update admins set locked_until = $2 where id = $1 \
             and (locked_until is null or locked_until < $2)",
            id,
            until,
        ),
    };
    query.execute(db).await?;
    Ok(())
}

pub async fn clear_failures(db: impl PgExecutor<'_>, accounts: Accounts, id: Uuid) -> DbResult<()> {
    let query = match accounts {
        Accounts::Users => sqlx::query!(
            "update users set failed_logins = 0, locked_until = null where id = $1",
            id,
        ),
        Accounts::Admins => sqlx::query!(
            "update admins set failed_logins = 0, locked_until = null where id = $1",
            id,
        ),
    };
    query.execute(db).await?;
    Ok(())
}

/// A new (or no) TOTP secret, sealed; the last accepted step is forgotten
/// with the old secret.
pub async fn set_totp(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    sealed: Option<&[u8]>,
) -> DbResult<()> {
    let query = match accounts {
        Accounts::Users => sqlx::query!(
            "update users set totp_secret_sealed = $2, totp_last_step = null where id = $1",
            id,
            sealed,
        ),
        Accounts::Admins => sqlx::query!(
            "update admins set totp_secret_sealed = $2, totp_last_step = null where id = $1",
            id,
            sealed,
        ),
    };
    query.execute(db).await?;
    Ok(())
}

/// Records the accepted time step only if it is newer than the last one:
/// false means the code was already used (RFC 6238 §5.2).
pub async fn advance_totp_step(
    db: impl PgExecutor<'_>,
    accounts: Accounts,
    id: Uuid,
    step: i64,
) -> DbResult<bool> {
    let query = match accounts {
        Accounts::Users => sqlx::query!(
            "update users set totp_last_step = $2 \
             where id = $1 and (totp_last_step is null or totp_last_step < $2)",
            id,
            step,
        ),
        Accounts::Admins => sqlx::query!(
            "update admins set totp_last_step = $2 \
             where id = $1 and (totp_last_step is null or totp_last_step < $2)",
            id,
            step,
        ),
    };
    let done = query.execute(db).await?;
    Ok(done.rows_affected() == 1)
}
