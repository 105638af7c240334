//! A brand's settings that owners edit from the console, the admin API and
//! the command line (`pactd brand details-type add|remove`, `pactd brand tool
//! add|remove`, `pactd brand set --name/--description` call these same
//! functions; `--grant-ttl-days` has the same rule): what its card says of it, the grant
//! lifetime, the RFC 9396 `authorization_details` types, and the tools the
//! brand's own agent calls through pactd's gateway. Each change and its
//! audit entry commit in one transaction; the table triggers announce it on
//! `pactd_config`, so every node drops its cached copy of the brand.

use pact_db::brands::Brand;
use pact_db::ids::BrandId;
use pact_db::merchant::BrandTool;
use pact_proto::card::AgentSkill;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::PgConnection;

use crate::admin::api::fields;
use crate::admin::role::Actor;
use crate::domain::authz_details::{self, DetailsType, DetailsTypes};
use crate::domain::limits::FieldKind;
use crate::domain::tool_rules::{self, ToolRule};

/// Why a change was refused (nothing was changed), or a database error:
/// the one error of every staff action (`admin::ops`).
pub use crate::admin::ops::OpsError as EditError;

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

/// Longest tool description or summary, in characters (as JSON Schema's
/// `maxLength` counts them).
const MAX_DESCRIPTION: usize = 1000;

/// Longest `authorization_details` type name, in characters.
const MAX_TYPE_NAME: usize = 128;

/// The change's audit entry, as every staff action records it.
async fn audit(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    action: &str,
    target: &str,
    brand_id: &BrandId,
    detail: Value,
) -> Result<(), pact_db::Error> {
    super::ops::audit(tx, actor, ip, action, target, Some(brand_id), detail).await
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

/// Sets which personal agents the brand admits (PACT §3.1): its own policy,
/// or with `None` the Provider's (`--admission`). Takes effect on every node
/// as the brands trigger drops their copies; agents already admitted under
/// `open` are refused once the brand allowlists, their grants kept (staff
/// block an agent to revoke them).
pub async fn set_admission(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    policy: Option<crate::admission::Policy>,
) -> Result<(), EditError> {
    let value = policy.map_or(Value::Null, |p| json!(p.as_str()));
    pact_db::brands::set_setting(&mut *tx, &brand.id, crate::admission::SETTING_KEY, &value)
        .await?;
    audit(
        tx,
        actor,
        ip,
        "brand.admission",
        &brand.id,
        &brand.id,
        json!({"admission": value}),
    )
    .await?;
    Ok(())
}

/// Longest brand name on the card, in characters.
pub const MAX_BRAND_NAME: usize = 200;
/// Longest brand description on the card, in characters.
pub const MAX_BRAND_DESCRIPTION: usize = 1000;

/// The settings key of skills that replace the brand agent's own on the card.
pub const CARD_SKILLS_KEY: &str = "card_skills";
/// At most this many skills on a card.
const MAX_SKILLS: usize = 20;

/// What an owner changes on the brand's Agent Card; `None` leaves a part as
/// it is. `skills: Some(vec![])` goes back to the skills the brand's agent
/// gives (the demo agent's, or one for the merchant's own agent).
#[derive(Clone, Debug, Default)]
pub struct CardEdit<'a> {
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
    pub skills: Option<Vec<AgentSkill>>,
}

/// Changes what the brand's Agent Card says of it (PACT §2 `name`,
/// `description`, `skills`). A name is 1–200 characters, a description at
/// most 1000 (empty: the card makes one from the name); at most 20 skills,
/// each with an id (1–64 of a-z, 0-9, `-`, `_`, unique), a name (1–100), a
/// description (at most 500) and at most 10 tags (1–40 each); no control
/// characters anywhere. The card is served from the database, so every node
/// shows the change at once.
pub async fn set_card_text(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    edit: CardEdit<'_>,
) -> Result<(), EditError> {
    if edit.name.is_none() && edit.description.is_none() && edit.skills.is_none() {
        return Err(invalid("give a name, a description or skills"));
    }
    let name = edit.name.map_or(brand.name.as_str(), str::trim);
    let description = edit
        .description
        .map_or(brand.description.as_str(), str::trim);
    check_card_lengths(name, description)?;
    // Only what this edit gives is checked for hidden characters, so text
    // stored before the rule does not block other edits.
    check_shown(edit.name, edit.description)?;
    if let Some(skills) = &edit.skills {
        check_skills(skills)?;
    }
    if !pact_db::brands::set_card_text(&mut *tx, &brand.id, name, description).await? {
        return Err(EditError::Missing);
    }
    if let Some(skills) = &edit.skills {
        let value = if skills.is_empty() {
            Value::Null
        } else {
            serde_json::to_value(skills).map_err(|e| invalid(e.to_string()))?
        };
        pact_db::brands::set_setting(&mut *tx, &brand.id, CARD_SKILLS_KEY, &value).await?;
    }
    audit(
        tx,
        actor,
        ip,
        "brand.card",
        &brand.id,
        &brand.id,
        json!({"name": name, "description": description, "skills": edit.skills}),
    )
    .await?;
    Ok(())
}

/// The scope a tool or type is tied to must be one the brand offers: one
/// that is no RFC 6749 §3.3 scope-token is malformed (400), one the brand
/// does not offer (yet) is a conflict with the brand as it is (409). The
/// one check behind the API, the console, the CLI and the MCP import.
pub async fn require_offered_scope(
    tx: &mut PgConnection,
    brand_id: &BrandId,
    scope: &str,
) -> Result<(), EditError> {
    if !pact_db::scopes::is_valid_scope_id(scope) {
        return Err(invalid(format!(
            "{scope:?} is not a scope (RFC 6749 §3.3 scope-token)"
        )));
    }
    let offered = pact_db::scopes::list(&mut *tx, brand_id).await?;
    if !offered.iter().any(|s| s.scope_id == scope) {
        return Err(EditError::Conflict(format!(
            "the brand has no scope {scope:?}; add it first"
        )));
    }
    Ok(())
}

/// A brand's name (1–200 characters) and description (at most 1000), both
/// trimmed, without control characters.
fn check_card_lengths(name: &str, description: &str) -> Result<(), EditError> {
    if name.is_empty() || name.chars().count() > MAX_BRAND_NAME {
        return Err(invalid("a brand name is 1 to 200 characters"));
    }
    if description.chars().count() > MAX_BRAND_DESCRIPTION {
        return Err(invalid("a brand description is at most 1000 characters"));
    }
    if name
        .chars()
        .chain(description.chars())
        .any(char::is_control)
    {
        return Err(invalid("control characters are not accepted"));
    }
    Ok(())
}

/// Shown on consent and the Agent Card as stored (PACT §5.2): no text that
/// reads differently from what it is.
fn check_shown(name: Option<&str>, description: Option<&str>) -> Result<(), EditError> {
    for (what, given) in [("the brand name", name), ("the description", description)] {
        if let Some(c) = given.and_then(crate::domain::hidden_chars::first_hidden) {
            return Err(invalid(crate::domain::hidden_chars::refusal(what, c)));
        }
    }
    Ok(())
}

/// A new brand's name and description (`pactd brand add`), trimmed by the
/// caller: the rules an edit of the card follows.
pub fn check_new_card_text(name: &str, description: &str) -> Result<(), EditError> {
    check_card_lengths(name, description)?;
    check_shown(Some(name), Some(description))
}

fn check_skills(skills: &[AgentSkill]) -> Result<(), EditError> {
    if skills.len() > MAX_SKILLS {
        return Err(invalid("at most 20 skills"));
    }
    let mut ids = std::collections::BTreeSet::new();
    for s in skills {
        let id_ok = (1..=64).contains(&s.id.len())
            && s.id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !id_ok || !ids.insert(s.id.as_str()) {
            return Err(invalid(
                "a skill id is 1–64 of a-z, 0-9, '-' and '_', once each",
            ));
        }
        let mut texts = [&s.name, &s.description].into_iter().chain(&s.tags);
        if s.name.trim().is_empty()
            || s.name.chars().count() > 100
            || s.description.chars().count() > 500
            || s.tags.len() > 10
            || s.tags
                .iter()
                .any(|t| t.trim().is_empty() || t.chars().count() > 40)
            || texts.any(|t| t.chars().any(char::is_control))
        {
            return Err(invalid(
                "a skill has a name (1–100 characters), a description (at most 500), at most 10 tags \
                 (1–40 characters each), and no control characters",
            ));
        }
    }
    Ok(())
}

/// The skills an owner set for the card, if any (`None`: the agent's own).
pub fn card_skills(brand: &Brand) -> Option<Vec<AgentSkill>> {
    let skills: Vec<AgentSkill> =
        serde_json::from_value(brand.settings.get(CARD_SKILLS_KEY)?.clone()).ok()?;
    (!skills.is_empty()).then_some(skills)
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

/// The brand's declared types as they are now, its row locked until the
/// transaction ends: `brand` was read before the transaction began, and a
/// concurrent edit of another type would otherwise be overwritten by a map
/// built from that older read.
async fn locked_types(
    tx: &mut PgConnection,
    brand_id: &BrandId,
) -> Result<DetailsTypes, EditError> {
    let settings = pact_db::brands::lock_settings(&mut *tx, brand_id)
        .await?
        .ok_or(EditError::Missing)?;
    Ok(authz_details::types_from_settings(&settings))
}

async fn store_types(
    tx: &mut PgConnection,
    brand_id: &BrandId,
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
    require_offered_scope(&mut *tx, &brand.id, &declaration.scope).await?;
    let mut types = locked_types(tx, &brand.id).await?;
    let detail = serde_json::to_value(&declaration).map_err(|e| invalid(e.to_string()))?;
    refuse_control(&detail)?;
    types.insert(name.to_owned(), declaration);
    // A tool's rule that reached a field of the type must still reach one:
    // otherwise the new declaration would quietly end what the rule limits
    // for new grants (existing grants keep what they were approved under).
    let tools = pact_db::merchant::list_tools(&mut *tx, &brand.id).await?;
    rules_still_reach(&types, &tools)?;
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
/// entries of it keep them, and keep being limited by them (their terms hold
/// the type as it was declared when they were approved). A tool rule that
/// names the type, or reaches a field only it has, is refused: remove the
/// rule first, so that what the tool list says is what is enforced.
pub async fn remove_details_type(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
) -> Result<(), EditError> {
    let mut types = locked_types(tx, &brand.id).await?;
    if types.remove(name).is_none() {
        return Err(EditError::Missing);
    }
    let tools = pact_db::merchant::list_tools(&mut *tx, &brand.id).await?;
    rules_still_reach(&types, &tools)?;
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
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDefinition {
    #[schema(schema_with = fields::tool_name)]
    pub name: String,
    /// The scope a call needs; none: a public tool.
    #[serde(default)]
    #[schema(schema_with = fields::scope_or_none)]
    pub scope: Option<String>,
    /// Where pactd forwards allowed calls (https).
    #[schema(schema_with = fields::uri)]
    pub url: String,
    #[serde(default)]
    #[schema(schema_with = fields::long_text)]
    pub description: String,
    /// The limit rules (`domain::tool_rules`): `FIELD=ARG`, `TYPE.FIELD=ARG`,
    /// or `FIELD` for a count. Stored as written; the one place they live.
    #[serde(default)]
    #[schema(schema_with = fields::rules)]
    pub enforce: Vec<String>,
    /// A JSON Schema of the arguments, given to the agent as documentation.
    #[serde(default)]
    #[schema(schema_with = fields::input_schema)]
    pub input_schema: Option<Value>,
    /// How one call reads to a person asked to approve it on its own, with
    /// `{arg}` placeholders: "Move booking {booking_id} to {new_date}".
    #[serde(default)]
    #[schema(schema_with = fields::summary)]
    pub summary: String,
}

/// Whether `rule` reaches a field of some type of `scope`, of a kind it can
/// check: a rule with an argument checks a value, one without counts calls.
fn rule_fits(types: &DetailsTypes, scope: &str, rule: &ToolRule) -> Result<(), String> {
    let mut reached = false;
    for (type_name, t) in types.iter().filter(|(_, t)| t.scope == scope) {
        if !rule.reaches(type_name, t, &rule.field) {
            continue;
        }
        let kind = t.fields[&rule.field].kind;
        let counts = kind == FieldKind::Count;
        if counts && rule.arg.is_some() {
            return Err(format!(
                "rule {:?}: {type_name}.{} counts calls; write it without an argument",
                rule.field, rule.field
            ));
        }
        if !counts && rule.arg.is_none() {
            return Err(format!(
                "rule {:?}: {type_name}.{} is a {} limit and needs an argument (FIELD=ARG)",
                rule.field,
                rule.field,
                kind.name()
            ));
        }
        reached = true;
    }
    if reached {
        Ok(())
    } else {
        Err(format!(
            "no authorization_details type of scope {scope:?} has a field {:?}{}; declare one first",
            rule.field,
            rule.type_name
                .as_deref()
                .map(|t| format!(" (type {t:?})"))
                .unwrap_or_default()
        ))
    }
}

/// Every stored rule of every tool still reaches a field it can check.
fn rules_still_reach(types: &DetailsTypes, tools: &[BrandTool]) -> Result<(), EditError> {
    for tool in tools {
        let Some(scope) = &tool.scope else { continue };
        let rules = tool_rules::parse_all(&tool_rules::texts(&tool.enforce)).map_err(invalid)?;
        for rule in &rules {
            rule_fits(types, scope, rule).map_err(|e| {
                invalid(format!(
                    "tool {:?} would lose its rule ({e}); change the tool's rules first",
                    tool.name
                ))
            })?;
        }
    }
    Ok(())
}

/// Adds or replaces one tool. Its rules are checked against the brand's
/// types and stored as written; replacing a tool never changes what an
/// existing grant was approved under (`domain::terms`).
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
    for (what, text) in [("description", &def.description), ("summary", &def.summary)] {
        if text.chars().count() > MAX_DESCRIPTION || text.chars().any(char::is_control) {
            return Err(invalid(format!(
                "the {what} is at most 1000 characters, without control characters"
            )));
        }
        if let Some(c) = crate::domain::hidden_chars::first_hidden(text) {
            return Err(invalid(crate::domain::hidden_chars::refusal(what, c)));
        }
    }
    if let Some(s) = &def.scope {
        require_offered_scope(&mut *tx, &brand.id, s).await?;
    }
    // Every call's arguments are validated against it and MCP clients list
    // it as the tool's inputSchema: refuse one that cannot serve.
    if let Some(schema) = &def.input_schema {
        crate::tool_schema::check(schema)
            .map_err(|e| invalid(format!("invalid input_schema: {e}")))?;
    }
    refuse_control(&json!([def.scope, def.enforce, def.input_schema]))?;
    let rules = tool_rules::parse_all(&def.enforce).map_err(invalid)?;
    if !rules.is_empty() {
        let Some(scope) = def.scope.as_deref() else {
            return Err(invalid(
                "an enforce rule needs a scope: a public tool has no authorization_details",
            ));
        };
        let types = authz_details::types_from_settings(&brand.settings);
        for rule in &rules {
            rule_fits(&types, scope, rule).map_err(invalid)?;
        }
    }
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
            summary: def.summary.clone(),
        },
    )
    .await?;
    audit(
        tx,
        actor,
        ip,
        "tool.upsert",
        &def.name,
        &brand.id,
        json!({"scope": def.scope, "url": def.url, "enforce": def.enforce, "summary": def.summary}),
    )
    .await?;
    Ok(())
}

/// Sets the limit rules (and, when given, the summary) of a tool the brand
/// has — one imported from the merchant's MCP server included — checked as
/// at [`upsert_tool`]. Existing grants keep the rules they were approved
/// under, and follow added ones (a rule only narrows).
pub async fn set_tool_rules(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
    enforce: Vec<String>,
    summary: Option<String>,
) -> Result<(), EditError> {
    let tools = pact_db::merchant::list_tools(&mut *tx, &brand.id).await?;
    let Some(tool) = tools.iter().find(|t| t.name == name) else {
        return Err(EditError::Missing);
    };
    if let Some(text) = &summary
        && (text.chars().count() > MAX_DESCRIPTION
            || text.chars().any(char::is_control)
            || crate::domain::hidden_chars::first_hidden(text).is_some())
    {
        return Err(invalid(
            "the summary is at most 1000 characters, without control or hidden characters",
        ));
    }
    refuse_control(&json!(enforce))?;
    let rules = tool_rules::parse_all(&enforce).map_err(invalid)?;
    if !rules.is_empty() {
        let Some(scope) = tool.scope.as_deref().filter(|_| tool.mapped) else {
            return Err(invalid(
                "an enforce rule needs a scope: give the tool one first",
            ));
        };
        let types = authz_details::types_from_settings(&brand.settings);
        for rule in &rules {
            rule_fits(&types, scope, rule).map_err(invalid)?;
        }
    }
    pact_db::merchant::set_tool_rules(
        &mut *tx,
        &brand.id,
        name,
        &json!(enforce),
        summary.as_deref(),
    )
    .await?;
    audit(
        tx,
        actor,
        ip,
        "tool.set_rules",
        name,
        &brand.id,
        json!({"enforce": enforce, "summary": summary}),
    )
    .await?;
    Ok(())
}

/// Removes one tool (and so its rules: grants approved while it existed
/// keep them in their terms).
pub async fn remove_tool(
    tx: &mut PgConnection,
    actor: &Actor,
    ip: Option<&str>,
    brand: &Brand,
    name: &str,
) -> Result<(), EditError> {
    if !pact_db::merchant::remove_tool(&mut *tx, &brand.id, name).await? {
        return Err(EditError::Missing);
    }
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
    fn a_rule_must_reach_a_field_of_its_scope_that_it_can_check() {
        let types: DetailsTypes = serde_json::from_value(json!({
            "order_view": {"scope": "orders:read", "fields": {"ids": {"type": "string_array"}}},
            "cancellations": {"scope": "orders:cancel", "fields": {
                "order_ids": {"type": "string_array"}, "max": {"type": "count"}}}
        }))
        .unwrap();
        let fits =
            |scope: &str, rule: &str| rule_fits(&types, scope, &ToolRule::parse(rule).unwrap());
        assert!(fits("orders:read", "ids=order_id").is_ok());
        assert!(fits("orders:read", "order_view.ids=order_id").is_ok());
        assert!(fits("orders:cancel", "max").is_ok());
        assert!(fits("orders:cancel", "order_ids=order_id").is_ok());
        // Another scope's field, an unknown type, a count with an argument,
        // a value limit without one.
        assert!(fits("orders:cancel", "ids=order_id").is_err());
        assert!(fits("orders:read", "other.ids=order_id").is_err());
        assert!(fits("orders:cancel", "max=order_id").is_err());
        assert!(fits("orders:cancel", "order_ids").is_err());
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
