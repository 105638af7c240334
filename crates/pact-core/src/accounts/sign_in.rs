//! The password step of a sign-in, the same for the brands' customers
//! (web/login.rs) and for staff (the console): the lockout counters of
//! [`super::lockout`] read, the password checked with the same argon2 work
//! whether or not the account exists, a failure counted on both counters.
//! What follows a right password (a second factor, a session) is the
//! caller's; so are the pages.

use pact_db::PgPool;
use time::OffsetDateTime;

use super::lockout::{self, FailureKeys};
use super::password;

/// What one password attempt came to, for an account of type `A`. Locks are
/// seconds left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PasswordStep<A> {
    /// Refused without looking at the password (even a right one): this
    /// address has guessed at this email too often.
    AddressLocked(i64),
    /// A wrong password or an unknown account, counted on both counters.
    /// `account_locked` while the email itself is locked.
    Wrong { account_locked: Option<i64> },
    /// The right password of `account`. While `account_locked` (the email
    /// guessed at from many addresses), it leads on only to an existing
    /// second factor; the caller decides that, then calls [`passed`].
    Right {
        account: A,
        /// Hashed with other parameters than today's: store a fresh hash.
        rehash: bool,
        account_locked: Option<i64>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    #[error(transparent)]
    Db(#[from] pact_db::Error),
    #[error("the password check did not finish")]
    Worker,
}

/// Checks `attempt` against the password hash of `account` (`hash_of`),
/// under the lockout counters of `keys`. Without an account, or without a
/// password, a dummy hash is checked instead, so the work and the time are
/// the same and the failure is counted alike.
pub async fn check_password<A>(
    db: &PgPool,
    keys: &FailureKeys,
    account: Option<A>,
    hash_of: impl FnOnce(&A) -> Option<String>,
    attempt: String,
    now: OffsetDateTime,
) -> Result<PasswordStep<A>, SignInError> {
    let rows =
        pact_db::sign_in_failures::find(db, &[keys.from_address.clone(), keys.account.clone()])
            .await?;
    let lock_of = |key: &[u8]| {
        rows.iter()
            .find(|r| r.key_hash == key)
            .and_then(|r| lockout::locked_for(r.locked_until, now))
    };
    let account_locked = lock_of(&keys.account);
    if let Some(secs) = lock_of(&keys.from_address) {
        return Ok(PasswordStep::AddressLocked(secs));
    }
    let stored = account.as_ref().and_then(hash_of);
    // Argon2 is CPU work of tens of milliseconds: off the async threads.
    let verified =
        tokio::task::spawn_blocking(move || password::verify(&attempt, stored.as_deref()))
            .await
            .map_err(|_| SignInError::Worker)?;
    match (verified, account) {
        (password::Verified::Yes | password::Verified::YesRehash, Some(account)) => {
            Ok(PasswordStep::Right {
                account,
                rehash: verified == password::Verified::YesRehash,
                account_locked,
            })
        }
        _ => {
            record_failure(db, keys, now).await?;
            Ok(PasswordStep::Wrong { account_locked })
        }
    }
}

/// Counts a failure on both counters in one transaction, locking each that
/// reaches its limit.
async fn record_failure(
    db: &PgPool,
    keys: &FailureKeys,
    now: OffsetDateTime,
) -> Result<(), pact_db::Error> {
    let mut tx = db.begin().await?;
    let here = pact_db::sign_in_failures::increment(&mut *tx, &keys.from_address, now).await?;
    if let Some(until) = lockout::lock_for(here, lockout::FREE_ATTEMPTS, now) {
        pact_db::sign_in_failures::lock_until(&mut *tx, &keys.from_address, until).await?;
    }
    let all = pact_db::sign_in_failures::increment(&mut *tx, &keys.account, now).await?;
    if let Some(until) = lockout::lock_for(all, lockout::ACCOUNT_FREE_ATTEMPTS, now) {
        pact_db::sign_in_failures::lock_until(&mut *tx, &keys.account, until).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The sign-in goes on past the password: this address's count for the
/// email starts again. The email's own count does not: only time or a
/// completed sign-in clears it.
pub async fn passed(db: &PgPool, keys: &FailureKeys) -> Result<(), pact_db::Error> {
    pact_db::sign_in_failures::clear(db, std::slice::from_ref(&keys.from_address)).await
}
