//! Identifiers that would otherwise be a bare [`Uuid`] beside other bare
//! `Uuid`s (issue 29: typed edges). A grant's id is the `grant_id` claim of
//! its delegation token and receipts (PACT §5.4, §5.6) and what every node
//! checks for revocation before a delegated turn (§5.5 step 2, RFC 7009);
//! passing a conversation's or a device authorization's id where a grant's
//! belongs is a compile error, not a silent "no such grant".
//!
//! The row types carry the newtype: `query_as!` converts each column with
//! `.into()`, so a `uuid` column reads into it without a type override in
//! the SQL. A query binds [`GrantId::as_uuid`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The id of a grant (`grants.id`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct GrantId(Uuid);

impl GrantId {
    /// A new random id (UUID version 4), for a grant about to be inserted.
    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }

    pub const fn as_uuid(self) -> Uuid {
        self.0
    }
}

impl From<Uuid> for GrantId {
    fn from(id: Uuid) -> Self {
        Self(id)
    }
}

impl From<GrantId> for Uuid {
    fn from(id: GrantId) -> Self {
        id.0
    }
}

impl fmt::Display for GrantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for GrantId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(Self)
    }
}
