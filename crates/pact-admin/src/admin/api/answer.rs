//! What the admin API answers with and takes: every 200 body and most
//! request bodies are typed structs that also derive their OpenAPI schema
//! (`utoipa`), so the document at `/openapi.json` is made from the very types
//! the handlers return and parse, and the two cannot drift apart (issue 29).
//! A request field's validation rules (length, pattern) are the schema
//! functions of `fields.rs`, named on the field.

use std::borrow::Cow;

use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, KnownFormat, Object, ObjectBuilder, Schema, SchemaFormat, Type,
};
use utoipa::{PartialSchema, ToSchema};

use crate::admin::role::Role;
use crate::domain::admission::Policy;
use crate::keys::KeyStatus;
use pact_db::admin_search::GrantState;

/// The schemas an answer needs in `components/schemas`: its own and every
/// one it refers to.
pub type Schemas = Vec<(String, RefOr<Schema>)>;

/// How an operation names the schema of a body it answers with or takes
/// (see [`typed`]).
pub enum Shape {
    /// A typed body: its schema is derived from the type.
    Derived {
        /// The schema's name in `components/schemas`.
        name: fn() -> Cow<'static, str>,
        /// Adds the schema and the ones it refers to.
        schemas: fn(&mut Schemas),
    },
    /// A body that is not a type with a derived schema (the receipts file of
    /// `admin/receipts_export.rs`): a schema written in `openapi.rs`.
    Written(&'static str),
}

impl Shape {
    pub fn name(&self) -> Cow<'static, str> {
        match self {
            Self::Derived { name, .. } => name(),
            Self::Written(name) => Cow::Borrowed(name),
        }
    }
}

/// The shape of a body that is a `T`.
pub const fn typed<T: ToSchema>() -> Shape {
    Shape::Derived {
        name: T::name,
        schemas: own_and_referenced::<T>,
    }
}

fn own_and_referenced<T: ToSchema>(out: &mut Schemas) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// A time as the API writes it: RFC 3339 text (`date-time` in the schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Time(pub OffsetDateTime);

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::params::rfc3339(self.0))
    }
}

impl PartialSchema for Time {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .into()
    }
}

impl ToSchema for Time {}

/// An optional time: `null` when absent.
pub fn time(t: Option<OffsetDateTime>) -> Option<Time> {
    t.map(Time)
}

/// A string that is one of `values`.
fn one_of(values: &[&'static str]) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .build()
}

/// Every staff role. A role added to `pact_db::admins::Role` must be added
/// here too: the match below stops compiling until it is.
const ROLES: [Role; 3] = [Role::Viewer, Role::Operator, Role::Owner];
const _: fn(Role) = |r| match r {
    Role::Viewer | Role::Operator | Role::Owner => {}
};

/// Every admission policy, kept complete the same way.
pub(super) const POLICIES: [Policy; 3] = [Policy::Allowlist, Policy::Registry, Policy::Open];
const _: fn(Policy) = |p| match p {
    Policy::Allowlist | Policy::Registry | Policy::Open => {}
};

/// Every state of a grant, kept complete the same way.
pub(super) const GRANT_STATES: [GrantState; 4] = [
    GrantState::Active,
    GrantState::Revoked,
    GrantState::Superseded,
    GrantState::Expired,
];
const _: fn(GrantState) = |s| match s {
    GrantState::Active | GrantState::Revoked | GrantState::Superseded | GrantState::Expired => {}
};

/// Every status of a signing key, kept complete the same way.
const KEY_STATUSES: [KeyStatus; 3] = [KeyStatus::Active, KeyStatus::Published, KeyStatus::Retired];
const _: fn(KeyStatus) = |s| match s {
    KeyStatus::Active | KeyStatus::Published | KeyStatus::Retired => {}
};

/// The schema of a grant's state at `now` (`GrantState::as_str`; a
/// superseded grant was ended by a newer one of the same person to the same
/// agent).
pub fn grant_state() -> Object {
    one_of(&GRANT_STATES.map(GrantState::as_str))
}

/// The schema of a signing key's status (`KeyStatus::as_str`).
pub fn key_status() -> Object {
    one_of(&KEY_STATUSES.map(KeyStatus::as_str))
}

/// The schema of a staff role (`pact_db::admins::Role`, serialized in
/// snake case as its `as_str`).
pub fn role() -> Object {
    one_of(&ROLES.map(Role::as_str))
}

/// The schema of an admission policy (PACT §3.1).
pub fn admission_policy() -> Object {
    one_of(&POLICIES.map(Policy::as_str))
}

/// The schema of a tool's kind (`pact_db::merchant`).
pub fn tool_kind() -> Object {
    one_of(&[
        pact_db::merchant::TOOL_KIND_URL,
        pact_db::merchant::TOOL_KIND_MCP,
    ])
}

/// A brand's RFC 9396 types by name, each as the hand-written `DetailsType`
/// (the same schema the request that declares one uses).
pub fn details_types() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::Ref(
            super::fields::details_type(),
        ))))
        .build()
}
