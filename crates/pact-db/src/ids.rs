//! Identifiers that would otherwise be a bare [`Uuid`] or `&str` beside
//! other bare ones (issue 29: typed edges). A grant's id is the `grant_id` claim of
//! its delegation token and receipts (PACT §5.4, §5.6) and what every node
//! checks for revocation before a delegated turn (§5.5 step 2, RFC 7009);
//! passing a conversation's or a device authorization's id where a grant's
//! belongs is a compile error, not a silent "no such grant".
//!
//! The row types carry the newtype: `query_as!` converts each column with
//! `.into()`, so a `uuid` column reads into it without a type override in
//! the SQL. A query binds [`GrantId::as_uuid`].
//!
//! A brand's id is a slug that names the brand in every URL of its own
//! (`/a2a/{brand}`, its OAuth metadata, its pages) and in the `brand` claim
//! of its delegation tokens (PACT §5.4); a [`BrandId`] has passed
//! [`BrandId::parse`], so a function that takes one needs no check of its
//! own, and an agent's issuer or a user's subject cannot be passed in its
//! place. Where text from outside names a brand (a path, a form, a flag), it
//! is parsed there, at the edge.
//!
//! An agent platform's issuer and the person's subject at the brand are
//! types of their own too ([`AgentIssuer`], [`UserSub`]), so that of the
//! three texts that say whose a conversation or a grant is (the issuer, the
//! platform's `sub`, the brand's `sub`) no two can change places.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
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

/// The id of a brand (`brands.id`): 1-63 characters of `a-z`, `0-9`, `-`
/// and `_`, starting with a letter or a digit, so that it is safe in a URL
/// path without escaping. The `brands` table checks the same rule, so an id
/// read from the database needs no second check.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct BrandId(String);

/// Text that is not a brand id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid brand id: use 1-63 of a-z, 0-9, '-' and '_', starting with a letter or a digit")]
pub struct InvalidBrandId;

impl BrandId {
    /// The longest brand id, in characters (all ASCII).
    pub const MAX_LEN: usize = 63;

    /// Whether `id` is a brand id.
    pub fn is_valid(id: &str) -> bool {
        let mut chars = id.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
            && id.len() <= Self::MAX_LEN
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    }

    /// `id` as a brand id, if it is one.
    pub fn parse(id: &str) -> Result<Self, InvalidBrandId> {
        if Self::is_valid(id) {
            Ok(Self(id.to_owned()))
        } else {
            Err(InvalidBrandId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What `query_as!` calls on a `text` column read into a row's `BrandId`
/// (sqlx converts each column with `.into()`). The columns that hold a
/// brand's id are `brands.id`, which checks the rule, and foreign keys to it,
/// so what the database gives back has passed [`BrandId::parse`] already.
/// Text from anywhere else goes through [`BrandId::parse`]; a library that
/// converts with `From<String>` when it can (clap's derived arguments) is
/// given `BrandId::parse` as its parser explicitly.
impl From<String> for BrandId {
    fn from(id: String) -> Self {
        // Text from anywhere but those columns would be a bug: the tests
        // (debug builds) fail on it.
        debug_assert!(Self::is_valid(&id), "not a brand id: {id:?}");
        Self(id)
    }
}

impl TryFrom<&str> for BrandId {
    type Error = InvalidBrandId;

    fn try_from(id: &str) -> Result<Self, Self::Error> {
        Self::parse(id)
    }
}

/// A brand id in JSON (a token's claim, a setting, a request) is checked
/// like any other text from outside.
impl<'de> Deserialize<'de> for BrandId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        if Self::is_valid(&id) {
            Ok(Self(id))
        } else {
            Err(serde::de::Error::custom(InvalidBrandId))
        }
    }
}

impl From<BrandId> for String {
    fn from(id: BrandId) -> Self {
        id.0
    }
}

impl FromStr for BrandId {
    type Err = InvalidBrandId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A brand id reads as the text it is: `&BrandId` goes where a `&str` does
/// (a URL being formatted, a log field, a map keyed by text).
impl Deref for BrandId {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for BrandId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// So that a map keyed by `BrandId` is looked up with the `&str` of a path.
impl Borrow<str> for BrandId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for BrandId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&BrandId> for BrandId {
    fn eq(&self, other: &&BrandId) -> bool {
        self == *other
    }
}

impl PartialEq<String> for BrandId {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<&str> for BrandId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for BrandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Declares a text id that is told apart from the others by its type only:
/// an agent platform's issuer, the person's subject at the brand and the
/// person's subject at the platform are all text, sit side by side in the
/// same rows and calls, and a swap of any two is a security bug (one
/// person's grants or conversation answering for another's: PACT §5.5).
/// With the first two typed, the platform's `sub` is the only bare text
/// left among them, so no two can change places.
/// Unlike [`BrandId`] none of them has a syntax of its own to check here;
/// each is made where it is established (the verified PA-JWT, the signed-in
/// user, staff registering an agent) and read back from the columns that
/// hold it.
macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        /// From text established as this id, and what `query_as!` calls on
        /// a column that holds one.
        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_owned())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&$name> for $name {
            fn eq(&self, other: &&$name) -> bool {
                self == *other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        /// As the text it is (`"https://pa.example"`), as a `String` printed:
        /// log fields and messages read the same as before it had a type.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id! {
    /// A personal-agent platform's issuer (`agents.issuer`, the PA-JWT's
    /// `iss`, PACT §3): who a conversation, a device authorization and a
    /// grant were made with.
    AgentIssuer
}

text_id! {
    /// The person as the brand knows them (`grants.user_sub`: the account's
    /// external id, else its row id): the delegation token's `sub` (PACT
    /// §5.4) and whose orders, grants and receipts a turn may touch.
    UserSub
}

#[cfg(test)]
mod tests {
    use super::{AgentIssuer, BrandId, UserSub};

    #[test]
    fn text_ids_read_print_and_travel_as_their_text() {
        let issuer = AgentIssuer::from("https://pa.example");
        assert_eq!(format!("{issuer:?}"), "\"https://pa.example\"");
        assert_eq!(issuer.to_string(), "https://pa.example");
        assert_eq!(
            serde_json::to_string(&issuer).unwrap(),
            "\"https://pa.example\""
        );
        let sub: UserSub = serde_json::from_str("\"u-1\"").unwrap();
        assert_eq!(sub, "u-1");
        assert_eq!(String::from(sub), "u-1");
    }

    #[test]
    fn brand_ids_are_url_safe_slugs() {
        for ok in ["demo", "acme-store", "a", "shop_2", "9", &"x".repeat(63)] {
            assert_eq!(BrandId::parse(ok).map(String::from).as_deref(), Ok(ok));
        }
        for bad in [
            "",
            "Demo",
            "-x",
            "_x",
            "a/b",
            "a b",
            "a.b",
            "é",
            "a\u{0}",
            &"x".repeat(64),
        ] {
            assert!(BrandId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn json_brand_ids_are_checked() {
        let ok: BrandId = serde_json::from_str("\"acme\"").unwrap();
        assert_eq!(ok, "acme");
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"acme\"");
        assert!(serde_json::from_str::<BrandId>("\"../admin\"").is_err());
        assert!(serde_json::from_str::<BrandId>("\"\"").is_err());
    }
}
