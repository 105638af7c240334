//! The console's forms for a brand's grant lifetime, `authorization_details`
//! types and tools (owners of the brand), through the same rules and audit
//! entries as the admin API (admin/brand_settings.rs).
//!
//! * `POST /admin/brands/{brand}/grant-lifetime` — `days` (blank: default)
//! * `POST /admin/brands/{brand}/details-types` — `type_name`, `declaration` (JSON)
//! * `POST /admin/brands/{brand}/details-types/remove` — `type_name`
//! * `POST /admin/brands/{brand}/tools` — `name`, `scope`, `url`, `description`,
//!   `enforce` (FIELD=ARG, comma- or line-separated), `input_schema` (JSON)
//! * `POST /admin/brands/{brand}/tools/remove` — `name`

use axum::extract::{Path, State};
use axum::response::Response;
use pact_node::node::Node;

use super::extract::StaffForm;
use super::pages::brand_change_allowed;
use crate::admin::brand_settings::{self, EditError, ToolDefinition};
use crate::web::PageError;
use crate::web::login::see_other;

fn to_page(e: EditError) -> PageError {
    super::pages::ops_page_error(e)
}

fn back(brand: &str) -> Response {
    see_other(&format!("/admin/brands/{brand}"), None)
}

/// The card's text: name, description and skills (a JSON array).
#[derive(Debug, serde::Deserialize)]
struct CardForm {
    name: Option<String>,
    description: Option<String>,
    skills: Option<String>,
}

/// How long a grant of the brand lives, in days (blank: the default).
#[derive(Debug, serde::Deserialize)]
struct LifetimeForm {
    days: Option<String>,
}

/// The brand's admission policy, or `default`.
#[derive(Debug, serde::Deserialize)]
struct AdmissionForm {
    policy: Option<String>,
}

/// An `authorization_details` type: its name and, to add or change it, its
/// declaration (JSON).
#[derive(Debug, serde::Deserialize)]
struct DetailsTypeForm {
    type_name: Option<String>,
    declaration: Option<String>,
}

/// A merchant tool as the brand page edits it (to remove one, only `name`).
#[derive(Debug, serde::Deserialize)]
struct ToolForm {
    name: Option<String>,
    scope: Option<String>,
    url: Option<String>,
    description: Option<String>,
    /// Field paths, one per line or comma-separated.
    enforce: Option<String>,
    input_schema: Option<String>,
    summary: Option<String>,
}

pub async fn card_text(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "brand.card", &id).await?;
    let form: CardForm = form.decode()?;
    // A blank skills field is the brand agent's own skills.
    let skills = match form.skills.as_deref() {
        None => Vec::new(),
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            PageError::BadRequest(format!("The skills are not a JSON array of skills: {e}"))
        })?,
    };
    let edit = brand_settings::CardEdit {
        name: form.name.as_deref(),
        description: Some(form.description.as_deref().unwrap_or("")),
        skills: Some(skills),
    };
    let mut tx = node.db.begin().await?;
    brand_settings::set_card_text(&mut tx, &who.actor, Some(&staff.ip), &b, edit)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn grant_lifetime(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "brand.grant_lifetime", &id).await?;
    let form: LifetimeForm = form.decode()?;
    let raw = form.days.as_deref().unwrap_or("").trim();
    let days = if raw.is_empty() {
        None
    } else {
        Some(raw.parse::<i64>().map_err(|_| {
            PageError::BadRequest("The grant lifetime is a number of days, 1 to 365.".into())
        })?)
    };
    let mut tx = node.db.begin().await?;
    brand_settings::set_grant_lifetime(&mut tx, &who.actor, Some(&staff.ip), &b, days)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

/// Which agents the brand admits (PACT §3.1): `allowlist`, `registry`, `open`, or
/// `default` for the Provider's policy.
pub async fn admission(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "brand.admission", &id).await?;
    let form: AdmissionForm = form.decode()?;
    let policy = match form.policy.as_deref().unwrap_or("") {
        "default" => None,
        other => Some(crate::admission::Policy::parse(other).ok_or_else(|| {
            PageError::BadRequest("Choose allowlist, registry, open or the server default.".into())
        })?),
    };
    let mut tx = node.db.begin().await?;
    brand_settings::set_admission(&mut tx, &who.actor, Some(&staff.ip), &b, policy)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn upsert_details_type(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "details_type.upsert", &id).await?;
    let form: DetailsTypeForm = form.decode()?;
    let name = form.type_name.as_deref().unwrap_or("").trim().to_owned();
    let declaration = serde_json::from_str(form.declaration.as_deref().unwrap_or(""))
        .map_err(|e| PageError::BadRequest(format!("The declaration is not valid: {e}")))?;
    let mut tx = node.db.begin().await?;
    brand_settings::upsert_details_type(
        &mut tx,
        &who.actor,
        Some(&staff.ip),
        &b,
        &name,
        declaration,
    )
    .await
    .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn remove_details_type(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "details_type.remove", &id).await?;
    let form: DetailsTypeForm = form.decode()?;
    let name = form.type_name.as_deref().unwrap_or("");
    let mut tx = node.db.begin().await?;
    brand_settings::remove_details_type(&mut tx, &who.actor, Some(&staff.ip), &b, name)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn upsert_tool(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "tool.upsert", &id).await?;
    let form: ToolForm = form.decode()?;
    let text = |v: &Option<String>| v.as_deref().unwrap_or("").trim().to_owned();
    let scope = Some(text(&form.scope)).filter(|s| !s.is_empty());
    let enforce = text(&form.enforce)
        .split([',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let schema = text(&form.input_schema);
    let input_schema = if schema.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&schema).map_err(|e| {
            PageError::BadRequest(format!("The input schema is not valid JSON: {e}"))
        })?)
    };
    let def = ToolDefinition {
        name: text(&form.name),
        scope,
        url: text(&form.url),
        description: text(&form.description),
        enforce,
        input_schema,
        summary: text(&form.summary),
    };
    let mut tx = node.db.begin().await?;
    brand_settings::upsert_tool(&mut tx, &who.actor, Some(&staff.ip), &b, def)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn remove_tool(
    State(node): State<Node>,
    Path(id): Path<String>,
    StaffForm {
        staff,
        who,
        fields: form,
    }: StaffForm,
) -> Result<Response, PageError> {
    let b = brand_change_allowed(&node, &who, &staff.ip, "tool.remove", &id).await?;
    let form: ToolForm = form.decode()?;
    let name = form.name.as_deref().unwrap_or("");
    let mut tx = node.db.begin().await?;
    brand_settings::remove_tool(&mut tx, &who.actor, Some(&staff.ip), &b, name)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}
