//! Who a row belongs to, as named fields. These keys are made of ids of the
//! same type (text), and a call that took them side by side could swap two of
//! them and still compile; here a swap is a security bug (one person's grants,
//! or one agent user's conversation, answering for another's), so the
//! functions that select by them take these structs instead.

use crate::ids::BrandId;

/// One user of a personal-agent platform at a brand, as the platform names
/// them: the brand, the PA-JWT's issuer and its `sub`. Conversations and
/// step-up requests belong to this triple (PACT §4: a context or task of
/// anyone else reads as absent).
#[derive(Clone, Copy, Debug)]
pub struct PaUser<'a> {
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a str,
    pub pa_sub: &'a str,
}

/// A person's connection at a brand through one agent platform: the brand,
/// the PA-JWT's issuer and the person as the brand knows them (`user_sub`).
/// Grants are bound to this triple (PACT §5.5).
#[derive(Clone, Copy, Debug)]
pub struct Connection<'a> {
    pub brand_id: &'a BrandId,
    pub pa_issuer: &'a str,
    pub user_sub: &'a str,
}
