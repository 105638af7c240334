//! pact-db's own error type: what a failed statement means, sorted once here, so callers
//! match on a variant or a constraint name instead of inspecting `sqlx::Error`s and SQLSTATEs.

use std::borrow::Cow;

/// A failed database operation. Every variant keeps the driver's error as its source, and
/// displays as that error did, so logs and messages read as before.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A query that must return a row returned none (`fetch_one`).
    #[error(transparent)]
    NotFound(sqlx::Error),
    /// SQLSTATE 23505: a unique constraint or unique index refused the row.
    #[error("{source}")]
    UniqueViolation {
        /// The constraint's (or unique index's) name, as PostgreSQL reports it.
        constraint: Option<String>,
        #[source]
        source: sqlx::Error,
    },
    /// SQLSTATE 23503: a row names a parent that does not exist (or still has children).
    #[error("{source}")]
    ForeignKeyViolation {
        constraint: Option<String>,
        #[source]
        source: sqlx::Error,
    },
    /// SQLSTATE 23514: a CHECK constraint refused the row.
    #[error("{source}")]
    CheckViolation {
        constraint: Option<String>,
        #[source]
        source: sqlx::Error,
    },
    /// SQLSTATE 40001 / 40P01: a serializable transaction lost to a concurrent one, or a
    /// deadlock was broken; running the whole transaction again may succeed.
    #[error(transparent)]
    SerializationFailure(sqlx::Error),
    /// Anything else; see [`classify`](crate::classify) for unavailability and bad input.
    #[error(transparent)]
    Other(sqlx::Error),
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        if matches!(e, sqlx::Error::RowNotFound) {
            return Self::NotFound(e);
        }
        let (code, constraint) = match &e {
            sqlx::Error::Database(db) => (
                db.code().map(Cow::into_owned),
                db.constraint().map(str::to_owned),
            ),
            _ => (None, None),
        };
        // SQLSTATE classes from the PostgreSQL manual, Appendix A.
        match code.as_deref() {
            Some("23505") => Self::UniqueViolation {
                constraint,
                source: e,
            },
            Some("23503") => Self::ForeignKeyViolation {
                constraint,
                source: e,
            },
            Some("23514") => Self::CheckViolation {
                constraint,
                source: e,
            },
            Some("40001" | "40P01") => Self::SerializationFailure(e),
            _ => Self::Other(e),
        }
    }
}

impl Error {
    /// The driver's error underneath.
    pub fn as_sqlx(&self) -> &sqlx::Error {
        match self {
            Self::NotFound(e)
            | Self::SerializationFailure(e)
            | Self::Other(e)
            | Self::UniqueViolation { source: e, .. }
            | Self::ForeignKeyViolation { source: e, .. }
            | Self::CheckViolation { source: e, .. } => e,
        }
    }

    /// The violated constraint's name, for the three constraint variants.
    pub fn constraint(&self) -> Option<&str> {
        match self {
            Self::UniqueViolation { constraint, .. }
            | Self::ForeignKeyViolation { constraint, .. }
            | Self::CheckViolation { constraint, .. } => constraint.as_deref(),
            _ => None,
        }
    }

    /// True for a unique violation, whichever constraint it was.
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, Self::UniqueViolation { .. })
    }

    /// True when PostgreSQL broke a deadlock or a serialization conflict by
    /// rolling this transaction back: running it again may succeed.
    pub fn is_serialization_failure(&self) -> bool {
        matches!(self, Self::SerializationFailure(_))
    }

    /// The SQLSTATE, when the server reported one.
    pub fn code(&self) -> Option<Cow<'_, str>> {
        self.as_sqlx().as_database_error().and_then(|db| db.code())
    }
}

/// Maps errors on a named constraint to the caller's own error, in the manner of
/// realworld-axum-sqlx's `on_constraint`: the constraint names are the schema's (migrations/),
/// so a caller says which refusal it expects and what it means, and every other failure stays a
/// database error.
///
/// ```ignore
/// pact_db::brands::insert(db, id, name, description)
///     .await
///     .on_constraint("brands_pkey", |_| AppError::Conflict("brand exists"))?;
/// ```
pub trait ResultExt<T> {
    fn on_constraint<E: From<Error>>(
        self,
        name: &str,
        map: impl FnOnce(Error) -> E,
    ) -> Result<T, E>;
}

impl<T> ResultExt<T> for Result<T, Error> {
    fn on_constraint<E: From<Error>>(
        self,
        name: &str,
        map: impl FnOnce(Error) -> E,
    ) -> Result<T, E> {
        self.map_err(|e| {
            if e.constraint() == Some(name) {
                map(e)
            } else {
                E::from(e)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_row_is_not_found_and_reads_as_before() {
        let e = Error::from(sqlx::Error::RowNotFound);
        assert!(matches!(e, Error::NotFound(_)));
        assert_eq!(e.to_string(), sqlx::Error::RowNotFound.to_string());
        assert_eq!(e.constraint(), None);
        assert_eq!(e.code(), None);
    }

    #[test]
    fn a_lost_connection_is_other_and_unavailable() {
        let e = Error::from(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "eof",
        )));
        assert!(matches!(e, Error::Other(_)));
        assert!(!e.is_unique_violation());
        assert_eq!(crate::classify(&e), crate::Failure::Unavailable);
    }
}
