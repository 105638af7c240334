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

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::guard;
use super::pages::brand_change_allowed;
use super::session::Staff;
use crate::admin::brand_settings::{self, EditError, ToolDefinition};
use crate::state::AppState;
use crate::web::PageError;
use crate::web::login::see_other;

fn to_page(e: EditError) -> PageError {
    super::pages::ops_page_error(e)
}

fn back(brand: &str) -> Response {
    see_other(&format!("/admin/brands/{brand}"), None)
}

/// The signed-in owner of the brand, after the Origin and CSRF checks.
macro_rules! owner_of {
    ($state:expr, $headers:expr, $staff:expr, $body:expr, $brand:expr, $action:expr) => {{
        let form = guard(&$state, &$headers, &$staff, &$body)?;
        let Some(who) = $staff.signed_in(&$state).await? else {
            return Ok(see_other("/admin/sign-in", None));
        };
        let b = brand_change_allowed(&$state, &who, &$staff.ip, $action, &$brand).await?;
        (form, who, b)
    }};
}

pub async fn card_text(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "brand.card");
    // A blank skills field is the brand agent's own skills.
    let skills = match form.get("skills") {
        None => Vec::new(),
        Some(raw) => serde_json::from_str(raw).map_err(|e| {
            PageError::BadRequest(format!("The skills are not a JSON array of skills: {e}"))
        })?,
    };
    let edit = brand_settings::CardEdit {
        name: form.get("name"),
        description: Some(form.get("description").unwrap_or("")),
        skills: Some(skills),
    };
    let mut tx = state.db.begin().await?;
    brand_settings::set_card_text(&mut tx, &who.actor, Some(&staff.ip), &b, edit)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn grant_lifetime(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "brand.grant_lifetime");
    let raw = form.get("days").unwrap_or("").trim();
    let days = if raw.is_empty() {
        None
    } else {
        Some(raw.parse::<i64>().map_err(|_| {
            PageError::BadRequest("The grant lifetime is a number of days, 1 to 365.".into())
        })?)
    };
    let mut tx = state.db.begin().await?;
    brand_settings::set_grant_lifetime(&mut tx, &who.actor, Some(&staff.ip), &b, days)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

/// Which agents the brand admits (PACT §3.1): `allowlist`, `registry`, `open`, or
/// `default` for the Provider's policy.
pub async fn admission(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "brand.admission");
    let policy = match form.get("policy").unwrap_or("") {
        "default" => None,
        other => Some(crate::admission::Policy::parse(other).ok_or_else(|| {
            PageError::BadRequest("Choose allowlist, registry, open or the server default.".into())
        })?),
    };
    let mut tx = state.db.begin().await?;
    brand_settings::set_admission(&mut tx, &who.actor, Some(&staff.ip), &b, policy)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn upsert_details_type(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "details_type.upsert");
    let name = form.get("type_name").unwrap_or("").trim().to_owned();
    let declaration = serde_json::from_str(form.get("declaration").unwrap_or(""))
        .map_err(|e| PageError::BadRequest(format!("The declaration is not valid: {e}")))?;
    let mut tx = state.db.begin().await?;
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
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "details_type.remove");
    let name = form.get("type_name").unwrap_or("");
    let mut tx = state.db.begin().await?;
    brand_settings::remove_details_type(&mut tx, &who.actor, Some(&staff.ip), &b, name)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn upsert_tool(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "tool.upsert");
    let text = |k: &str| form.get(k).unwrap_or("").trim().to_owned();
    let scope = Some(text("scope")).filter(|s| !s.is_empty());
    let enforce = text("enforce")
        .split([',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let schema = text("input_schema");
    let input_schema = if schema.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&schema).map_err(|e| {
            PageError::BadRequest(format!("The input schema is not valid JSON: {e}"))
        })?)
    };
    let def = ToolDefinition {
        name: text("name"),
        scope,
        url: text("url"),
        description: text("description"),
        enforce,
        input_schema,
        summary: text("summary"),
    };
    let mut tx = state.db.begin().await?;
    brand_settings::upsert_tool(&mut tx, &who.actor, Some(&staff.ip), &b, def)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}

pub async fn remove_tool(
    State(state): State<AppState>,
    headers: HeaderMap,
    staff: Staff,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (form, who, b) = owner_of!(state, headers, staff, body, id, "tool.remove");
    let name = form.get("name").unwrap_or("");
    let mut tx = state.db.begin().await?;
    brand_settings::remove_tool(&mut tx, &who.actor, Some(&staff.ip), &b, name)
        .await
        .map_err(to_page)?;
    tx.commit().await?;
    Ok(back(&b.id))
}
