//! The password step of a sign-in, the same for the brands' customers
//! (web/login.rs) and for staff (the console): the lockout counters of
//! [`super::lockout`] read, the attempt counted on both counters before the
//! password is checked (so attempts sent at once cannot all slip past the
//! locks), the password checked with the same argon2 work whether or not the
//! account exists, and the count given back when it was right.
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
    // Read first: a locked address is refused without a write.
    let rows =
        pact_db::sign_in_failures::find(db, &[keys.from_address.clone(), keys.account.clone()])
            .await?;
    let address_lock = rows
        .iter()
        .find(|r| r.key_hash == keys.from_address)
        .and_then(|r| lockout::locked_for(r.locked_until, now));
    if let Some(secs) = address_lock {
        return Ok(PasswordStep::AddressLocked(secs));
    }
    // Counted before it is checked: argon2 takes tens of milliseconds, and
    // attempts sent at once would otherwise all pass the read above before
    // the first failure was counted (a burst from many addresses got a full
    // password check each, whatever the locks). Each attempt is a failure on
    // both counters, and sets their locks, until it proves right.
    let account_locked = match reserve(db, keys, now).await? {
        Reserved::Refused(secs) => return Ok(PasswordStep::AddressLocked(secs)),
        Reserved::Counted { account_locked } => account_locked,
    };
    let stored = account.as_ref().and_then(hash_of);
    // Argon2 is CPU work of tens of milliseconds: off the async threads.
    let verified =
        tokio::task::spawn_blocking(move || password::verify(&attempt, stored.as_deref()))
            .await
            .map_err(|_| SignInError::Worker)?;
    match (verified, account) {
        (password::Verified::Yes | password::Verified::YesRehash, Some(account)) => {
            // A right password is no failure: its count is given back.
            give_back(db, keys).await?;
            Ok(PasswordStep::Right {
                account,
                rehash: verified == password::Verified::YesRehash,
                account_locked,
            })
        }
        _ => Ok(PasswordStep::Wrong { account_locked }),
    }
}

/// What counting an attempt ahead found.
enum Reserved {
    /// This address was locked meanwhile (an attempt counted just before).
    Refused(i64),
    /// Counted; whether the email was locked before this attempt.
    Counted { account_locked: Option<i64> },
}

/// Counts an attempt as a failure on both counters, in one transaction that
/// holds both rows (this address's first, then the email's, always in that
/// order, so two attempts never wait for each other in a circle), locking
/// each that reaches its limit.
async fn reserve(
    db: &PgPool,
    keys: &FailureKeys,
    now: OffsetDateTime,
) -> Result<Reserved, pact_db::Error> {
    let mut tx = db.begin().await?;
    let here = pact_db::sign_in_failures::lock_row(&mut *tx, &keys.from_address, now).await?;
    if let Some(secs) = lockout::locked_for(here.locked_until, now) {
        return Ok(Reserved::Refused(secs));
    }
    let all = pact_db::sign_in_failures::lock_row(&mut *tx, &keys.account, now).await?;
    let account_locked = lockout::locked_for(all.locked_until, now);
    let failed = here.failed.saturating_add(1);
    let lock = lockout::lock_for(failed, lockout::FREE_ATTEMPTS, now);
    pact_db::sign_in_failures::set_count(&mut *tx, &keys.from_address, failed, lock, now).await?;
    let failed = all.failed.saturating_add(1);
    let lock = lockout::lock_for(failed, lockout::ACCOUNT_FREE_ATTEMPTS, now);
    pact_db::sign_in_failures::set_count(&mut *tx, &keys.account, failed, lock, now).await?;
    tx.commit().await?;
    Ok(Reserved::Counted { account_locked })
}

/// Gives back what [`reserve`] counted for an attempt that proved right,
/// with any lock that count alone set.
async fn give_back(db: &PgPool, keys: &FailureKeys) -> Result<(), pact_db::Error> {
    let mut tx = db.begin().await?;
    pact_db::sign_in_failures::give_back(&mut *tx, &keys.from_address, lockout::FREE_ATTEMPTS)
        .await?;
    pact_db::sign_in_failures::give_back(&mut *tx, &keys.account, lockout::ACCOUNT_FREE_ATTEMPTS)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// The sign-in goes on past the password: this address's count for the
/// email starts again. The email's own count does not: only time or a
/// completed sign-in clears it.
pub async fn passed(db: &PgPool, keys: &FailureKeys) -> Result<(), pact_db::Error> {
    pact_db::sign_in_failures::clear(db, std::slice::from_ref(&keys.from_address)).await
}
