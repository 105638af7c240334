//! Who a row belongs to, as named fields. These keys are made of ids that
//! are all text, and a call that took them side by side could swap two of
//! them and still compile; here a swap is a security bug (one person's grants,
//! or one agent user's conversation, answering for another's), so the
//! functions that select by them take these structs instead, and the ids are
//! types of their own ([`BrandId`], [`AgentIssuer`], [`UserSub`]; the
//! platform's `sub` is the one bare text left), so that even a struct built
//! with two of them exchanged does not compile:
//!
//! ```
//! use pact_db::ids::{AgentIssuer, BrandId, UserSub};
//! use pact_db::parties::Connection;
//!
//! let brand = BrandId::parse("demo").unwrap();
//! let (issuer, person) = (AgentIssuer::from("https://pa.example"), UserSub::from("u-1"));
//! let _ = Connection { brand_id: &brand, pa_issuer: &issuer, user_sub: &person };
//! ```
//!
//! ```compile_fail,E0308
//! use pact_db::ids::{AgentIssuer, BrandId, UserSub};
//! use pact_db::parties::Connection;
//!
//! let brand = BrandId::parse("demo").unwrap();
//! let (issuer, person) = (AgentIssuer::from("https://pa.example"), UserSub::from("u-1"));
//! let _ = Connection { brand_id: &brand, pa_issuer: &person, user_sub: &issuer };
//! ```

use crate::ids::{AgentIssuer, BrandId, UserSub};

/// One user of a personal-agent platform at a brand, as the platform names
/// them: the brand, the PA-JWT's issuer and its `sub`. Conversations and
/// step-up requests belong to this triple (PACT §4: a context or task of
/// anyone else reads as absent).
#[derive(Clone, Copy, Debug)]
pub struct PaUser<'a> {
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub pa_sub: &'a str,
}

/// A person's connection at a brand through one agent platform: the brand,
/// the PA-JWT's issuer and the person as the brand knows them (`user_sub`).
/// Grants are bound to this triple (PACT §5.5).
#[derive(Clone, Copy, Debug)]
pub struct Connection<'a> {
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a AgentIssuer,
    pub user_sub: &'a UserSub,
}
