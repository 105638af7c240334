//! The validation rules of the admin API's request fields, as the schemas
//! the request types name on their fields (`#[schema(schema_with = …)]`):
//! what a field is, its length and pattern. The handlers check the same
//! rules (the domain functions and `ops/`); these say them to clients.
//!
//! `utoipa` takes a pattern only as a literal, so the patterns that several
//! fields and the path parameters share live here as constants.

use utoipa::openapi::schema::{ArrayBuilder, Object, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{Array, Ref, schema::SchemaType};

/// What the API accepts in free text: no control characters (C0, DEL and
/// C1, as `char::is_control`, which the server checks).
pub const NO_CONTROL: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// Free text that says something: no control characters, and at least one
/// character that is neither a control character nor white space (the
/// server trims names and refuses what is left empty).
pub const NON_BLANK: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// An agent's issuer: compared exactly (PACT §3), so no control characters
/// and no white space at either end.
const ISSUER_PATTERN: &str = "^[^\\s\\u0000-\\u001f\\u007f-\\u009f]([^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f])?$";
/// A URL pactd will fetch or call: https on a DNS name, an optional port,
/// then a path or query of RFC 3986's characters and percent-escapes,
/// without a fragment. `pact_jose::check_jwks_uri` accepts more: an http URL
/// on a loopback address when the node allows loopback, a public address.
pub const HTTPS_URL: &str = "^https://([A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?\\.)+([A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?]([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?$";
/// A host name as staff type it to block one (`domain::admission::normalize_host`
/// also takes a URL for its host, and trims spaces).
const HOST_PATTERN: &str = "^[A-Za-z0-9-][A-Za-z0-9.-]*$";
/// RFC 6749 §3.3 scope-token, bounded to 128 characters.
pub const SCOPE_PATTERN: &str = "^[\\x21\\x23-\\x5b\\x5d-\\x7e]{1,128}$";
/// An `authorization_details` type name: no spaces or control characters.
pub const TYPE_NAME_PATTERN: &str = "^[^\\s\\u0000-\\u001f\\u007f-\\u009f]{1,128}$";
/// A brand's or a tool's name (`domain::brand_id`, `domain::tool_rules`).
pub const SLUG_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,62}$";
/// A tool's limit rule: `FIELD=ARG`, `TYPE.FIELD=ARG` or `FIELD` (a count).
const RULE_PATTERN: &str = "^([^=\\s]+\\.)?[A-Za-z0-9_-]{1,64}(=[A-Za-z0-9_-]{1,64})?$";

fn text(min: Option<usize>, max: usize, pattern: Option<&str>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(min)
        .max_length(Some(max))
        .pattern(pattern)
}

/// Text pactd shows to people as it is stored (consent, the account page):
/// no control, invisible or direction-changing character
/// (`domain::hidden_chars`, which the server checks); with `min` 1, also
/// at least one character that is not white space.
fn shown(min: Option<usize>, max: usize) -> ObjectBuilder {
    let ok = crate::domain::hidden_chars::shown_text_class();
    let pattern = if min.is_some_and(|m| m > 0) {
        let visible = ok.replacen("[^", "[^\\s", 1);
        format!("^{ok}*{visible}{ok}*$")
    } else {
        format!("^{ok}*$")
    };
    text(min, max, Some(&pattern))
}

/// A value of type `kind`, or `null` (for "keep" or "the default").
fn nullable(kind: Type) -> SchemaType {
    SchemaType::from_iter([kind, Type::Null])
}

/// A reason for the audit log, which customers also read on their account
/// page when it ended their access: shown text of at most 200 characters,
/// or `null` for none.
pub fn reason() -> Object {
    shown(None, 200).schema_type(nullable(Type::String)).build()
}

/// A reason that must be given and say something: shown text with at least
/// one character that is not a space.
pub fn non_blank_reason() -> Object {
    shown(Some(1), 200).build()
}

/// A personal agent's issuer (PACT §3: the PA-JWT's `iss`).
pub fn issuer() -> Object {
    text(Some(1), 512, Some(ISSUER_PATTERN)).build()
}

/// A URL pactd fetches or calls ([`HTTPS_URL`]).
pub fn uri() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::Custom("uri".into())))
        .max_length(Some(2048))
        .pattern(Some(HTTPS_URL))
        .build()
}

/// A platform's link shown on consent (RFC 7591 client metadata): a URL,
/// `""` to remove the one stored, or `null` (or absent) to keep it.
pub fn link() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable(Type::String))
        .max_length(Some(2048))
        .pattern(Some(format!("^$|{HTTPS_URL}")))
        .build()
}

/// A name shown to people (an agent platform's), or `null` for its issuer.
pub fn display_name() -> Object {
    shown(Some(1), 200)
        .schema_type(nullable(Type::String))
        .description(Some(
            "Shown to people: no control, hidden or bidi characters; trimmed.",
        ))
        .build()
}

/// A host name (RFC 1035: at most 253 characters).
pub fn host() -> Object {
    text(Some(1), 253, Some(HOST_PATTERN))
        .description(Some(
            "A DNS name (letters, digits, '-' and '.'); the rule covers the names under it too.",
        ))
        .build()
}

/// A trusted registry's name.
pub fn registry_name() -> Object {
    text(None, 63, Some("^[a-z0-9][a-z0-9._-]{0,62}$")).build()
}

/// A string matching `pattern`.
fn matching(pattern: &str) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .build()
}

/// An RFC 6749 §3.3 scope.
pub fn scope_id() -> Object {
    matching(SCOPE_PATTERN)
}

/// An RFC 6749 §3.3 scope, or `null` for none.
pub fn scope_or_none() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable(Type::String))
        .pattern(Some(SCOPE_PATTERN))
        .build()
}

/// What consent shows for a scope.
pub fn scope_description() -> Object {
    shown(Some(1), 500)
        .description(Some(
            "Shown verbatim on consent: no control, hidden or bidi characters.",
        ))
        .build()
}

/// An admission policy (PACT §3.1), or `null` for the Provider's.
pub fn policy_or_default() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable(Type::String))
        .enum_values(Some(
            super::answer::POLICIES
                .map(|p| Some(p.as_str()))
                .into_iter()
                .chain([None]),
        ))
        .description(Some(
            "Which personal agents the brand admits (PACT §3.1); null: the Provider's policy.",
        ))
        .build()
}

/// The name of the hand-written schema of an RFC 9396 type declaration.
pub const DETAILS_TYPE: &str = "DetailsType";

/// An `authorization_details` type's name (RFC 9396 §2: the entry's `type`).
pub fn type_name() -> Object {
    text(Some(1), 128, Some(TYPE_NAME_PATTERN)).build()
}

/// A type's declaration: the hand-written `DetailsType` schema, since the
/// declaration is a domain type (`domain::authz_details`) without a schema
/// derive.
pub fn details_type() -> Ref {
    Ref::from_schema_name(DETAILS_TYPE)
}

/// A tool's name.
pub fn tool_name() -> Object {
    matching(SLUG_PATTERN)
}

/// A tool's limit rules.
pub fn rules() -> Array {
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(RULE_PATTERN)),
        )
        .description(Some(
            "Limit rules: FIELD=ARG (the call's argument ARG is checked against field FIELD of every granted type of the tool's scope that has it), TYPE.FIELD=ARG (that type only), FIELD alone for a count (each call uses one); empty: none.",
        ))
        .build()
}

/// How one call reads to a person asked to approve it on its own.
pub fn summary() -> Object {
    shown(None, 1000)
        .description(Some(
            "How one call reads to a person asked to approve it on its own, with {arg} placeholders.",
        ))
        .build()
}

/// A summary, or `null` to keep the one stored.
pub fn summary_or_keep() -> Object {
    shown(None, 1000)
        .schema_type(nullable(Type::String))
        .description(Some(
            "How one call reads to a person asked to approve it on its own; null keeps it.",
        ))
        .build()
}

/// Free text of at most 1000 characters.
pub fn long_text() -> Object {
    shown(None, 1000).build()
}

/// A registry's pinned keys: a JWKS (`{"keys": [...]}`), an array of JWKs
/// or one JWK.
pub fn keys() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Array]))
        .description(Some(
            "The pinned public keys: a JWKS, an array of JWKs or one JWK (ES256, each with a kid).",
        ))
        .build()
}

/// A JSON Schema given to the agent, or `null`.
pub fn input_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(nullable(Type::Object))
        // MCP clients refuse a tool whose input schema is not an object's
        // (`tool_schema::check`, which also compiles it).
        .property(
            "type",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["object"])),
        )
        .required("type")
        .description(Some(
            "A JSON Schema of the arguments, given to the agent; its top level is \"type\": \"object\".",
        ))
        .build()
}

/// A brand's name on its Agent Card and consent.
pub fn brand_name() -> Object {
    shown(Some(1), 200)
        .description(Some(
            "The brand's name on its Agent Card and consent; trimmed.",
        ))
        .build()
}

/// The Agent Card's description.
pub fn card_description() -> Object {
    shown(None, 1000)
        .description(Some(
            "The card's description; empty: one made from the name.",
        ))
        .build()
}

/// The Agent Card's skills (A2A `AgentSkill`: `pact_proto` stays free of
/// schema derives, so its shape is written here).
pub fn card_skills() -> Array {
    let skill = ObjectBuilder::new()
        .property("id", text(Some(1), 64, Some("^[a-z0-9_-]+$")))
        .property("name", text(Some(1), 100, Some(NON_BLANK)))
        .property("description", text(None, 500, Some(NO_CONTROL)))
        .property(
            "tags",
            ArrayBuilder::new()
                .items(text(Some(1), 40, Some(NON_BLANK)))
                .max_items(Some(10)),
        )
        .required("id")
        .required("name")
        .required("description")
        .required("tags");
    ArrayBuilder::new()
        .items(skill)
        .max_items(Some(20))
        .unique_items(true)
        .description(Some(
            "The card's skills, each id once; []: the brand agent's own.",
        ))
        .build()
}
