//! A brand's settings that owners edit from the console, the admin API and
//! the command line (`pactd brand details-type add|remove`, `pactd brand tool
//! add|remove` call these same functions; `--grant-ttl-days` has the same rule): the grant
//! lifetime, the RFC 9396 `authorization_details` types, and the tools the
//! brand's own agent calls through pactd's gateway. Each change and its
//! audit entry commit in one transaction; the table triggers announce it on
//! `pactd_config`, so every node drops its cached copy of the brand.

use pact_db::brands::Brand;
use pact_db::merchant::BrandTool;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::admin::role::Actor;
use crate::domain::authz_details::{self, DetailsType, DetailsTypes, EnforceRule};

/// Why a change was refused (nothing was changed), or a database error.
#[derive(Debug)]
pub enum EditError {
    Invalid(String),
    /// The brand has no such type or tool.
    Missing,
    Db(pact_db::Error),
}

impl From<pact_db::Error> for EditError {
    fn from(e: pact_db::Error) -> Self {
        Self::Db(e)
    }
}

fn invalid(message: impl Into<String>) -> EditError {
    EditError::Invalid(message.into())
}

/// Whether any string or key in `v` holds a control character. Such text is
/// refused before it is stored: it has no place in a declaration or a tool,
/// and PostgreSQL's jsonb cannot hold U+0000 at all.
fn has_control(v: &Value) -> bool {
    let bad = |s: &str| s.chars().any(char::is_control);
    match v {
        Value::String(s) => bad(s),
        Value::Array(items) => items.iter().any(has_control),
        Value::Object(map) => map.iter().any(|(k, v)| bad(k) || has_control(v)),
        _ => false,
    }
}

fn refuse_control(v: &Value) -> Result<(), EditError> {
    if has_control(v) {
        return Err(invalid("control characters are not accepted"));
    }
    Ok(())
}

/// Grant lifetimes a brand may set, in days (as `--grant-ttl-days`).
pub const LIFETIME_DAYS: std::ops::RangeInclusive<i64> = 1..=365;

/// Longest tool description, in bytes.
const MAX_DESCRIPTION: usize = 1000;

/// Longest `authorization_details` type name, in characters.
const MAX_TYPE_NAME: usize = 128;

async fn audit(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    action: &str,
    target: &str,
    brand_id: &str,
    detail: Value,
) -> Result<(), pact_db::Error> {
    pact_db::audit::record(
        &mut *tx,
        &pact_db::audit::NewEntry {
            actor_kind: actor.kind,
            actor: &actor.name,
            action,
            target: Some(target),
            brand_id: Some(brand_id),
            detail,
            client_addr: ip,
        },
    )
    .await
    .map(|_| ())
}

/// Sets how long new grants of the brand last (`None`: the server default).
/// Grants already made keep their expiry.
pub async fn set_grant_lifetime(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    days: Option<i64>,
) -> Result<(), EditError> {
    if let Some(d) = days
        && !LIFETIME_DAYS.contains(&d)
    {
        return Err(invalid("the grant lifetime is 1 to 365 days"));
    }
    let value = days.map_or(Value::Null, |d| json!(d));
    pact_db::brands::set_setting(&mut *tx, &brand.id, "grant_ttl_days", &value).await?;
    audit(
        tx,
        actor,
        ip,
        "brand.grant_lifetime",
        &brand.id,
        &brand.id,
        json!({"days": days}),
    )
    .await?;
    Ok(())
}

/// An `authorization_details` type name: what an agent writes as `type`
/// (RFC 9396 §2): 1–128 characters, no spaces or control characters.
fn check_type_name(name: &str) -> Result<(), EditError> {
    if name.is_empty()
        || name.chars().count() > MAX_TYPE_NAME
        || name.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(invalid(
            "a type name is 1–128 characters without spaces or control characters",
        ));
    }
    Ok(())
}

async fn store_types(
    tx: &mut PgConnection,
    brand_id: &str,
    types: &DetailsTypes,
) -> Result<(), EditError> {
    let value = serde_json::to_value(types).map_err(|e| invalid(e.to_string()))?;
    pact_db::brands::set_setting(&mut *tx, brand_id, authz_details::SETTINGS_KEY, &value).await?;
    Ok(())
}

/// Declares (or replaces) one type; its scope must be one the brand offers.
pub async fn upsert_details_type(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
    declaration: DetailsType,
) -> Result<(), EditError> {
    check_type_name(name)?;
    authz_details::check_type(&declaration)
        .map_err(|e| invalid(format!("invalid type declaration: {e}")))?;
    let scopes = pact_db::scopes::list(&mut *tx, &brand.id).await?;
    if !scopes.iter().any(|s| s.scope_id == declaration.scope) {
        return Err(invalid(format!(
            "the brand has no scope {:?}; add it first",
            declaration.scope
        )));
    }
    let mut types = authz_details::types_from_settings(&brand.settings);
    let detail = serde_json::to_value(&declaration).map_err(|e| invalid(e.to_string()))?;
    refuse_control(&detail)?;
    types.insert(name.to_owned(), declaration);
    store_types(tx, &brand.id, &types).await?;
    audit(
        tx,
        actor,
        ip,
        "details_type.upsert",
        name,
        &brand.id,
        detail,
    )
    .await?;
    Ok(())
}

/// Removes one type: new requests may no longer carry it; grants that hold
/// entries of it keep them.
pub async fn remove_details_type(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
) -> Result<(), EditError> {
    let mut types = authz_details::types_from_settings(&brand.settings);
    if types.remove(name).is_none() {
        return Err(EditError::Missing);
    }
    store_types(tx, &brand.id, &types).await?;
    audit(
        tx,
        actor,
        ip,
        "details_type.remove",
        name,
        &brand.id,
        json!({}),
    )
    .await?;
    Ok(())
}

/// A tool as the console and the API describe it (`pactd brand tool add`'s
/// flags).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    pub name: String,
    /// The scope a call needs; without it the tool is public.
    #[serde(default)]
    pub scope: Option<String>,
    /// Where pactd forwards allowed calls (https).
    pub url: String,
    #[serde(default)]
    pub description: String,
    /// `FIELD=ARG`: the call's argument ARG must be one of the granted
    /// `authorization_details` field FIELD's values.
    #[serde(default)]
    pub enforce: Vec<String>,
    /// A JSON Schema of the arguments, given to the agent as documentation.
    #[serde(default)]
    pub input_schema: Option<Value>,
}

/// `FIELD=ARG` pairs.
fn enforce_pairs(raw: &[String]) -> Result<Vec<(String, String)>, EditError> {
    raw.iter()
        .map(|p| {
            p.split_once('=')
                .filter(|(f, a)| !f.is_empty() && !a.is_empty())
                .map(|(f, a)| (f.to_owned(), a.to_owned()))
                .ok_or_else(|| invalid(format!("invalid enforce rule {p:?}: use FIELD=ARG")))
        })
        .collect()
}

/// Each `FIELD=ARG` becomes a rule in every type of the brand that refines
/// the tool's scope and has FIELD, where the tool gate reads it; the tool's
/// old rules go first.
fn place_enforce_rules(
    types: &mut DetailsTypes,
    tool: &str,
    scope: Option<&str>,
    pairs: &[(String, String)],
) -> Result<(), EditError> {
    for t in types.values_mut() {
        t.enforce.retain(|r| r.tool != tool);
    }
    for (field, arg) in pairs {
        let Some(scope) = scope else {
            return Err(invalid(
                "an enforce rule needs a scope: a public tool has no authorization_details",
            ));
        };
        let mut found = false;
        for t in types.values_mut() {
            if t.scope == scope && t.fields.contains_key(field) {
                t.enforce.push(EnforceRule {
                    tool: tool.to_owned(),
                    arg: arg.clone(),
                    field: field.clone(),
                });
                found = true;
            }
        }
        if !found {
            return Err(invalid(format!(
                "no authorization_details type of scope {scope:?} has a field {field:?}; declare one first"
            )));
        }
    }
    Ok(())
}

/// Adds or replaces one tool.
pub async fn upsert_tool(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    def: ToolDefinition,
) -> Result<(), EditError> {
    if !pact_db::brands::is_valid_brand_id(&def.name) {
        return Err(invalid(
            "a tool name is 1–63 of a-z, 0-9, '-' and '_', starting with a letter or digit",
        ));
    }
    // https, no credentials or fragment, not a private address (the JWKS
    // rules); loopback is accepted as at `pactd brand tool add`, and the
    // gateway checks every call's resolved address again.
    pact_jose::check_jwks_uri(&def.url, true).map_err(|e| invalid(format!("invalid url: {e}")))?;
    if def.description.len() > MAX_DESCRIPTION || def.description.chars().any(char::is_control) {
        return Err(invalid(
            "the description is at most 1000 bytes, without control characters",
        ));
    }
    if let Some(s) = &def.scope {
        let scopes = pact_db::scopes::list(&mut *tx, &brand.id).await?;
        if !scopes.iter().any(|x| &x.scope_id == s) {
            return Err(invalid(format!(
                "the brand has no scope {s:?}; add it first"
            )));
        }
    }
    // Every call's arguments are validated against it and MCP clients list
    // it as the tool's inputSchema: refuse one that cannot serve.
    if let Some(schema) = &def.input_schema {
        crate::merchant::schema::check(schema)
            .map_err(|e| invalid(format!("invalid input_schema: {e}")))?;
    }
    refuse_control(&json!([def.scope, def.enforce, def.input_schema]))?;
    let pairs = enforce_pairs(&def.enforce)?;
    let mut types = authz_details::types_from_settings(&brand.settings);
    place_enforce_rules(&mut types, &def.name, def.scope.as_deref(), &pairs)?;
    pact_db::merchant::upsert_tool(
        &mut *tx,
        &BrandTool {
            brand_id: brand.id.clone(),
            name: def.name.clone(),
            scope: def.scope.clone(),
            url: def.url.clone(),
            description: def.description.clone(),
            enforce: json!(def.enforce),
            input_schema: def.input_schema.clone(),
            kind: pact_db::merchant::TOOL_KIND_URL.to_owned(),
            remote_name: None,
            mapped: true,
        },
    )
    .await?;
    store_types(tx, &brand.id, &types).await?;
    audit(
        tx,
        actor,
        ip,
        "tool.upsert",
        &def.name,
        &brand.id,
        json!({"scope": def.scope, "url": def.url, "enforce": def.enforce}),
    )
    .await?;
    Ok(())
}

/// Removes one tool and its enforce rules.
pub async fn remove_tool(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
) -> Result<(), EditError> {
    let mut types = authz_details::types_from_settings(&brand.settings);
    place_enforce_rules(&mut types, name, None, &[])?;
    if !pact_db::merchant::remove_tool(&mut *tx, &brand.id, name).await? {
        return Err(EditError::Missing);
    }
    store_types(tx, &brand.id, &types).await?;
    audit(tx, actor, ip, "tool.remove", name, &brand.id, json!({})).await?;
    Ok(())
}

/// The brand's types and tools as the API and the console show them.
pub async fn describe(
    db: &pact_db::PgPool,
    brand: &Brand,
) -> Result<(DetailsTypes, Vec<BrandTool>), pact_db::Error> {
    let tools = pact_db::merchant::list_tools(db, &brand.id).await?;
    Ok((authz_details::types_from_settings(&brand.settings), tools))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforce_rules_need_a_matching_field_and_a_scope() {
        let mut types: DetailsTypes = serde_json::from_value(json!({
            "order_view": {"scope": "orders:read", "fields": {"ids": {"type": "string_array"}}}
        }))
        .unwrap();
        let pairs = enforce_pairs(&["ids=order_id".to_owned()]).unwrap();
        place_enforce_rules(&mut types, "get_order", Some("orders:read"), &pairs).unwrap();
        assert_eq!(types["order_view"].enforce.len(), 1);
        // Replacing the tool replaces its rules.
        place_enforce_rules(&mut types, "get_order", Some("orders:read"), &pairs).unwrap();
        assert_eq!(types["order_view"].enforce.len(), 1);
        assert!(place_enforce_rules(&mut types, "t", None, &pairs).is_err());
        assert!(place_enforce_rules(&mut types, "t", Some("other"), &pairs).is_err());
        assert!(enforce_pairs(&["=x".to_owned()]).is_err());
        assert!(enforce_pairs(&["novalue".to_owned()]).is_err());
        place_enforce_rules(&mut types, "get_order", None, &[]).unwrap();
        assert!(types["order_view"].enforce.is_empty());
    }

    #[test]
    fn type_names_are_bounded_and_plain() {
        assert!(check_type_name("order_view").is_ok());
        assert!(check_type_name("").is_err());
        assert!(check_type_name("has space").is_err());
        assert!(check_type_name("a\u{7}").is_err());
        assert!(check_type_name(&"x".repeat(129)).is_err());
    }

    #[test]
    fn control_characters_are_found_in_keys_and_nested_strings() {
        assert!(!has_control(&json!({"a": ["b", {"c": 1}]})));
        assert!(has_control(&json!({"a": ["b", {"c": "\u{0}"}]})));
        assert!(has_control(&json!({"a\u{1}": 1})));
    }
}
