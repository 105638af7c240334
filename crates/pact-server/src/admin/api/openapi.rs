//! The OpenAPI 3.1 document of the admin API, generated from [`OPERATIONS`]
//! (the same table that routes the requests) and served at
//! `/admin/api/v1/openapi.json`.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};

use super::{OPERATIONS, Operation, PREFIX};
use crate::state::AppState;

/// `GET /admin/api/v1/openapi.json` (public: it holds no data).
pub async fn serve(State(state): State<AppState>) -> Json<Value> {
    static DOC: OnceLock<Value> = OnceLock::new();
    let mut doc = DOC.get_or_init(document).clone();
    doc["servers"] = json!([{
        "url": format!("{}{PREFIX}", state.config.public_url.trim_end_matches('/'))
    }]);
    Json(doc)
}

/// What the API accepts in free text: no control characters.
const NO_CONTROL: &str = "^[^\\u0000-\\u001f\\u007f]*$";
/// RFC 6749 §3.3 scope-token, bounded to 128 characters.
const SCOPE_PATTERN: &str = "^[\\x21\\x23-\\x5b\\x5d-\\x7e]{1,128}$";
/// An `authorization_details` type name: no spaces or control characters.
const TYPE_NAME_PATTERN: &str = "^[^\\s\\u0000-\\u001f\\u007f]{1,128}$";
const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

fn s(kind: &str) -> Value {
    json!({ "type": kind })
}

fn nullable(kind: &str) -> Value {
    json!({ "type": [kind, "null"] })
}

fn time() -> Value {
    json!({ "type": "string", "format": "date-time" })
}

fn nullable_time() -> Value {
    json!({ "type": ["string", "null"], "format": "date-time" })
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn object(props: &[(&str, Value)], required: &[&str]) -> Value {
    let p: Map<String, Value> = props
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    json!({ "type": "object", "properties": p, "required": required })
}

fn page_of(item: &str) -> Value {
    object(
        &[
            (
                "items",
                json!({ "type": "array", "items": reference(item) }),
            ),
            ("next_cursor", nullable("string")),
        ],
        &["items", "next_cursor"],
    )
}

fn list_of(item: &str) -> Value {
    object(
        &[(
            "items",
            json!({ "type": "array", "items": reference(item) }),
        )],
        &["items"],
    )
}

fn grant_props() -> Vec<(&'static str, Value)> {
    vec![
        ("id", json!({ "type": "string", "format": "uuid" })),
        ("brand", s("string")),
        ("customer", s("string")),
        ("agent", s("string")),
        ("scopes", json!({ "type": "array", "items": s("string") })),
        (
            "state",
            json!({ "enum": ["active", "revoked", "superseded", "expired"] }),
        ),
        ("created_at", time()),
        ("expires_at", time()),
        ("last_used_at", nullable_time()),
        ("revoked_at", nullable_time()),
        ("revoked_reason", nullable("string")),
    ]
}

const GRANT_REQUIRED: &[&str] = &[
    "id",
    "brand",
    "customer",
    "agent",
    "scopes",
    "state",
    "created_at",
    "expires_at",
];

fn schemas() -> Value {
    let mut all = base_schemas();
    for more in [
        brand_setting_schemas(),
        admission_schemas(),
        registry_schemas(),
    ] {
        if let (Some(all), Value::Object(more)) = (all.as_object_mut(), more) {
            all.extend(more);
        }
    }
    all
}

fn base_schemas() -> Value {
    let mut detail = grant_props();
    detail.push(("authorization_details", json!({})));
    detail.push((
        "approval",
        json!({ "oneOf": [{ "type": "null" }, object(&[
            ("approved_at", nullable_time()),
            ("agent_request_address", nullable("string")),
        ], &[])] }),
    ));
    detail.push((
        "receipt_chain",
        object(
            &[
                ("verified", s("boolean")),
                (
                    "problems",
                    json!({ "type": "array", "items": object(&[
                    ("seq", s("integer")),
                    ("problem", s("string")),
                ], &["seq", "problem"]) }),
                ),
            ],
            &["verified", "problems"],
        ),
    ));
    detail.push((
        "receipts",
        json!({ "type": "array", "items": object(&[
            ("seq", s("integer")),
            ("message_id", s("string")),
            ("created_at", time()),
            ("claims", s("object")),
            ("jws", s("string")),
        ], &["seq", "jws"]) }),
    ));
    let customer = [
        ("id", json!({ "type": "string", "format": "uuid" })),
        ("brand", s("string")),
        ("email", s("string")),
        ("external_id", nullable("string")),
        ("subject", s("string")),
        ("has_totp", s("boolean")),
        ("locked_until", nullable_time()),
        ("disabled_at", nullable_time()),
        ("created_at", time()),
        ("passkeys", s("integer")),
        ("recovery_codes_left", s("integer")),
        ("active_grants", s("integer")),
    ];
    let agent = [
        ("homepage", nullable("string")),
        ("logo_uri", nullable("string")),
        ("policy_uri", nullable("string")),
        ("tos_uri", nullable("string")),
        ("logo", nullable("string")),
        ("issuer", s("string")),
        ("jwks_uri", s("string")),
        ("name", s("string")),
        ("enabled", s("boolean")),
        ("verified", s("boolean")),
        ("created_at", time()),
        ("updated_at", time()),
        ("active_grants", s("integer")),
        ("people", s("integer")),
    ];
    json!({
        "Error": object(&[("error", object(&[
            ("code", json!({ "enum": [
                "unauthenticated", "forbidden", "not_found", "invalid_request",
                "invalid_cursor", "already_revoked", "unavailable", "internal"
            ] })),
            ("message", s("string")),
        ], &["code", "message"]))], &["error"]),
        "Me": object(&[
            ("kind", s("string")),
            ("name", s("string")),
            ("role", json!({ "enum": ["owner", "operator", "viewer"] })),
            ("brands", json!({ "type": ["array", "null"], "items": s("string") })),
        ], &["kind", "name", "role", "brands"]),
        "Grant": object(&grant_props(), GRANT_REQUIRED),
        "GrantPage": page_of("Grant"),
        "GrantDetail": object(&detail, GRANT_REQUIRED),
        "ReceiptExport": json!({ "type": "array", "items": object(&[
            ("brand", s("string")),
            ("sub", s("string")),
            ("jwks_uri", s("string")),
            ("receipt_keys_uri", s("string")),
            ("received_at", s("integer")),
            ("receipt", object(&[
                ("jws", s("string")),
                ("claims", s("object")),
            ], &["jws", "claims"])),
            ("verified", s("boolean")),
        ], &["brand", "sub", "jwks_uri", "received_at", "receipt", "verified"]) }),
        "Reason": json!({
            "type": "object",
            "properties": { "reason": { "type": "string", "maxLength": 200, "pattern": NO_CONTROL } },
            "additionalProperties": false
        }),
        "Revoked": object(&[
            ("id", json!({ "type": "string", "format": "uuid" })),
            ("revoked", s("boolean")),
        ], &["id", "revoked"]),
        "Customer": object(&customer, &["id", "brand", "email", "subject"]),
        "CustomerList": list_of("Customer"),
        "CustomerRevoked": object(&[
            ("id", json!({ "type": "string", "format": "uuid" })),
            ("revoked_grants", s("integer")),
        ], &["id", "revoked_grants"]),
        // What the action did: only the fields of the action taken are present.
        "CustomerChanged": object(&[
            ("id", json!({ "type": "string", "format": "uuid" })),
            ("unlocked", s("boolean")),
            ("second_factors_removed", s("boolean")),
            ("signed_out", s("boolean")),
            ("sessions_ended", s("integer")),
            ("disabled", s("boolean")),
            ("removed", s("boolean")),
            ("revoked_grants", s("integer")),
        ], &["id"]),
        "Agent": object(&agent, &["issuer", "jwks_uri", "name", "enabled"]),
        "AgentList": list_of("Agent"),
        "AgentRegistration": json!({
            "type": "object",
            "properties": {
                "issuer": { "type": "string", "minLength": 1, "maxLength": 512 },
                "jwks_uri": { "type": "string", "format": "uri" },
                "name": { "type": "string", "minLength": 1, "maxLength": 200 },
                "homepage": { "type": "string", "description": "RFC 7591 client_uri, shown on consent; \"\" removes it." },
                "logo_uri": { "type": "string", "description": "Fetched once now and served from pactd's origin (PNG, JPEG, GIF or WebP); \"\" removes it." },
                "policy_uri": { "type": "string", "description": "RFC 7591 policy_uri; \"\" removes it." },
                "tos_uri": { "type": "string", "description": "RFC 7591 tos_uri; \"\" removes it." }
            },
            "required": ["issuer", "jwks_uri"],
            "additionalProperties": false
        }),
        "AgentToggle": json!({
            "type": "object",
            "properties": {
                "issuer": { "type": "string" },
                "reason": { "type": "string", "maxLength": 200, "pattern": NO_CONTROL }
            },
            "required": ["issuer"],
            "additionalProperties": false
        }),
        "AgentDisable": json!({
            "type": "object",
            "properties": {
                "issuer": { "type": "string" },
                "reason": {
                    "type": "string", "minLength": 1, "maxLength": 200,
                    "pattern": "^[^\\u0000-\\u001f\\u007f]*[^\\u0000-\\u0020\\u007f][^\\u0000-\\u001f\\u007f]*$"
                }
            },
            "required": ["issuer", "reason"],
            "additionalProperties": false
        }),
        "AgentToggled": object(&[
            ("issuer", s("string")),
            ("enabled", s("boolean")),
            ("revoked_grants", s("integer")),
        ], &["issuer", "enabled", "revoked_grants"]),
        "AuditEntry": object(&[
            ("id", s("integer")),
            ("at", time()),
            ("actor_kind", s("string")),
            ("actor", s("string")),
            ("action", s("string")),
            ("target", nullable("string")),
            ("brand", nullable("string")),
            ("detail", s("object")),
            ("client_address", nullable("string")),
        ], &["id", "at", "actor_kind", "actor", "action"]),
        "AuditPage": page_of("AuditEntry"),
        "Admin": object(&[
            ("email", s("string")),
            ("role", json!({ "enum": ["owner", "operator", "viewer"] })),
            ("brands", json!({ "type": ["array", "null"], "items": s("string") })),
            ("has_totp", s("boolean")),
            ("passkeys", s("integer")),
            ("recovery_codes_left", s("integer")),
            ("disabled_at", nullable_time()),
            ("created_at", time()),
        ], &["email", "role", "brands", "has_totp"]),
        "AdminList": list_of("Admin"),
        "Credential": object(&[
            ("name", s("string")),
            ("role", json!({ "enum": ["owner", "operator", "viewer"] })),
            ("brands", json!({ "type": ["array", "null"], "items": s("string") })),
            ("created_at", time()),
            ("last_used_at", nullable_time()),
            ("revoked_at", nullable_time()),
        ], &["name", "role", "brands"]),
        "CredentialList": list_of("Credential"),
        "Key": object(&[
            ("kid", s("string")),
            ("status", json!({ "enum": ["active", "published", "retired"] })),
            ("created_at", time()),
            ("activates_at", time()),
            ("retired_at", nullable_time()),
            ("unpublish_at", nullable_time()),
        ], &["kid", "status", "created_at", "activates_at"]),
        "KeyList": list_of("Key"),
        "Node": object(&[
            ("id", json!({ "type": "string", "format": "uuid" })),
            ("hostname", s("string")),
            ("version", s("string")),
            ("started_at", time()),
            ("last_seen", time()),
            ("listening", s("boolean")),
            ("gone", s("boolean")),
        ], &["id", "hostname", "version", "started_at", "last_seen", "listening", "gone"]),
        "NodeList": object(&[
            ("summary", s("string")),
            ("all_listening", s("boolean")),
            ("items", json!({ "type": "array", "items": reference("Node") })),
        ], &["summary", "all_listening", "items"]),
        "Scope": object(&[
            ("scope_id", s("string")),
            ("description", s("string")),
            ("requires_mfa", s("boolean")),
            ("unverified_allowed", s("boolean")),
        ], &["scope_id", "description", "requires_mfa", "unverified_allowed"]),
        "Brand": object(&[
            ("id", s("string")),
            ("name", s("string")),
            ("description", s("string")),
            ("grant_lifetime_days", s("integer")),
            ("grant_lifetime_is_default", s("boolean")),
            ("admission", json!({"type": "string", "enum": ["allowlist", "registry", "open"]})),
            ("admission_is_default", s("boolean")),
            ("scopes", json!({ "type": "array", "items": reference("Scope") })),
            ("details_types", json!({
                "type": "object",
                "description": "RFC 9396 authorization_details types by name.",
                "additionalProperties": reference("DetailsType")
            })),
            ("tools", json!({ "type": "array", "items": reference("Tool") })),
        ], &["id", "name", "grant_lifetime_days", "grant_lifetime_is_default", "admission",
             "admission_is_default", "scopes",
             "details_types", "tools"]),
        "BrandList": list_of("Brand"),
        "ScopeDefinition": json!({
            "type": "object",
            "properties": {
                "scope_id": { "type": "string", "pattern": SCOPE_PATTERN },
                "description": {
                    "type": "string", "minLength": 1, "maxLength": 500,
                    "description": "Shown verbatim on consent: no control, hidden or bidi characters; at most 500 bytes."
                },
                "requires_mfa": { "type": "boolean" },
                "unverified_allowed": {
                    "type": "boolean",
                    "description": "Agents admitted under the open policy, not yet verified by staff, may request it."
                }
            },
            "required": ["scope_id", "description"],
            "additionalProperties": false
        }),
        "CredentialRevoked": object(&[
            ("name", s("string")),
            ("revoked", s("boolean")),
        ], &["name", "revoked"]),
    })
}

/// The schemas of open admission (PACT §3.1): the agents seen, the staff
/// actions on them and a brand's policy; apart for `json!`'s recursion limit.
fn admission_schemas() -> Value {
    json!({
        "SeenAgent": object(&[
            ("issuer", s("string")),
            ("name", s("string")),
            ("jwks_uri", s("string")),
            ("verified", s("boolean")),
            ("enabled", s("boolean")),
            ("first_seen_at", time()),
            ("last_seen_at", time()),
            ("requests", s("integer")),
            ("active_grants", s("integer")),
            ("claimed_name", nullable("string")),
            ("claimed_logo_uri", nullable("string")),
        ], &["issuer", "name", "verified", "enabled", "first_seen_at", "last_seen_at", "requests",
             "active_grants"]),
        "SeenAgentList": list_of("SeenAgent"),
        "AgentIssuer": json!({
            "type": "object",
            "properties": { "issuer": { "type": "string" } },
            "required": ["issuer"],
            "additionalProperties": false
        }),
        "AgentVerified": object(&[
            ("issuer", s("string")),
            ("verified", s("boolean")),
        ], &["issuer", "verified"]),
        "AgentForgotten": object(&[
            ("issuer", s("string")),
            ("forgotten", s("boolean")),
        ], &["issuer", "forgotten"]),
        "Admission": json!({
            "type": "object",
            "properties": {
                "policy": {
                    "type": ["string", "null"], "enum": ["allowlist", "registry", "open", null],
                    "description": "Which personal agents the brand admits (PACT §3.1); null: the Provider's policy."
                }
            },
            "required": ["policy"],
            "additionalProperties": false
        }),
    })
}

/// The schemas of a brand's settings (types, tools, grant lifetime), apart
/// from [`base_schemas`] to stay within `json!`'s recursion limit.
fn brand_setting_schemas() -> Value {
    json!({
        "DetailsType": json!({
            "type": "object",
            "description": "An RFC 9396 type (PACT §5.7). Which tool argument each field limits is said by the tools' `enforce` rules, not here; every grant keeps the declaration it was approved under.",
            "properties": {
                "scope": { "type": "string", "description": "The scope the type refines." },
                "description": {
                    "type": "string",
                    "description": "Words for consent; `{field}` is replaced by the entry's value, written by its kind (an amount as money, a date as a date)."
                },
                "fields": {
                    "type": "object",
                    "minProperties": 1,
                    "maxProperties": 32,
                    "propertyNames": { "pattern": "^[A-Za-z0-9_-]{1,64}$" },
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "type": {
                                "enum": ["string", "string_array", "enum", "amount", "count",
                                         "cumulative_amount", "date_window", "time_window"],
                                "description": "string: equal; string_array: one of; enum: one of the entry's subset of `values`; amount {currency, amount}: at most, same ISO 4217 currency; count: calls allowed; cumulative_amount: total across calls; date_window {from, to}: a date in it; time_window {from, until}: an RFC 3339 time in it."
                            },
                            "required": { "type": "boolean" },
                            "values": {
                                "type": "array", "items": { "type": "string", "minLength": 1, "maxLength": 256 },
                                "maxItems": 64, "description": "An enum's allowed values (enum only)."
                            },
                            "label": {
                                "type": "string", "maxLength": 256,
                                "description": "What is limited, in the brand's words, for sentences the description does not cover."
                            }
                        },
                        "required": ["type"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["scope", "fields"],
            "additionalProperties": false
        }),
        "Tool": object(&[
            ("name", s("string")),
            ("scope", nullable("string")),
            ("url", s("string")),
            ("description", s("string")),
            ("enforce", json!({"type": "array", "items": {"type": "string"},
                "description": "The tool's limit rules exactly as the gateway applies them."})),
            ("input_schema", json!({})),
            ("summary", s("string")),
            ("kind", json!({"type": "string", "enum": ["url", "mcp"],
                "description": "url: pactd POSTs the signed call to url; mcp: url is the merchant's MCP server."})),
            ("remote_name", nullable("string")),
            ("mapped", json!({"type": "boolean",
                "description": "false: imported from an MCP server without a scope; refused for everyone until mapped."})),
        ], &["name", "url"]),
        "CardText": json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200,
                         "description": "The brand's name on its Agent Card and consent."},
                "description": {"type": "string", "maxLength": 1000,
                                "description": "The card's description; empty: one made from the name."},
                "skills": {"type": "array", "maxItems": 20,
                           "description": "The card's skills; []: the brand agent's own.",
                           "items": {"type": "object",
                                     "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                                                    "description": {"type": "string"},
                                                    "tags": {"type": "array", "items": {"type": "string"}}},
                                     "required": ["id", "name", "description", "tags"]}}
            },
            "additionalProperties": false
        }),
        "GrantLifetime": json!({
            "type": "object",
            "properties": {
                "days": {
                    "type": ["integer", "null"], "minimum": 1, "maximum": 365,
                    "description": "How long new grants last; null: the server's default."
                }
            },
            "required": ["days"],
            "additionalProperties": false
        }),
        "DetailsTypeDefinition": json!({
            "type": "object",
            "properties": {
                "type_name": { "type": "string", "minLength": 1, "maxLength": 128, "pattern": TYPE_NAME_PATTERN },
                "declaration": reference("DetailsType")
            },
            "required": ["type_name", "declaration"],
            "additionalProperties": false
        }),
        "ToolRules": json!({
            "type": "object",
            "properties": {
                "enforce": {
                    "type": "array", "items": { "type": "string", "pattern": "^([^=\\s]+\\.)?[A-Za-z0-9_-]{1,64}(=[A-Za-z0-9_-]{1,64})?$" },
                    "description": "The tool's limit rules, as in ToolDefinition; empty clears them."
                },
                "summary": {
                    "type": ["string", "null"], "maxLength": 1000, "pattern": NO_CONTROL,
                    "description": "How one call reads to a person asked to approve it on its own; null keeps it."
                }
            },
            "additionalProperties": false
        }),
        "ToolDefinition": json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$" },
                "scope": { "type": ["string", "null"], "description": "The scope a call needs; none: a public tool." },
                "url": { "type": "string", "description": "Where pactd forwards allowed calls (https)." },
                "description": { "type": "string", "maxLength": 1000, "pattern": NO_CONTROL },
                "enforce": {
                    "type": "array", "items": { "type": "string", "pattern": "^([^=\\s]+\\.)?[A-Za-z0-9_-]{1,64}(=[A-Za-z0-9_-]{1,64})?$" },
                    "description": "Limit rules: FIELD=ARG (the call's argument ARG is checked against field FIELD of every granted type of the tool's scope that has it), TYPE.FIELD=ARG (that type only), FIELD alone for a count (each call uses one)."
                },
                "summary": {
                    "type": "string", "maxLength": 1000, "pattern": NO_CONTROL,
                    "description": "How one call reads to a person asked to approve it on its own, with {arg} placeholders."
                },
                "input_schema": { "type": ["object", "null"], "description": "A JSON Schema of the arguments, given to the agent." }
            },
            "required": ["name", "url"],
            "additionalProperties": false
        }),
    })
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": { "application/json": { "schema": reference("Error") } }
    })
}

fn operation(op: &Operation) -> Value {
    let mut parameters: Vec<Value> = op
        .query
        .iter()
        .map(|(name, description)| {
            // `q` of findCustomers is the one required query parameter.
            json!({
                "name": name, "in": "query", "required": *name == "q",
                "description": description,
                "schema": { "type": "string", "maxLength": 512, "pattern": NO_CONTROL }
            })
        })
        .collect();
    if op.path.contains("{name}") {
        parameters.push(json!({
            "name": "name", "in": "path", "required": true,
            "schema": { "type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[a-z0-9._-]+$" }
        }));
    }
    if op.path.contains("{brand}") {
        parameters.push(json!({
            "name": "brand", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$" }
        }));
    }
    if op.path.contains("{scope}") {
        parameters.push(json!({
            "name": "scope", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": SCOPE_PATTERN }
        }));
    }
    if op.path.contains("{type}") {
        parameters.push(json!({
            "name": "type", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": TYPE_NAME_PATTERN }
        }));
    }
    if op.path.contains("{tool}") {
        parameters.push(json!({
            "name": "tool", "in": "path", "required": true,
            "schema": { "type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,62}$" }
        }));
    }
    if op.path.contains("{id}") {
        parameters.push(json!({
            "name": "id", "in": "path", "required": true,
            "schema": { "type": "string", "format": "uuid", "pattern": UUID_PATTERN }
        }));
    }
    let mut responses = json!({
        "200": {
            "description": "OK",
            "content": { "application/json": { "schema": reference(op.response) } }
        },
        "400": error_response("Invalid input (code invalid_request or invalid_cursor)."),
        "401": error_response("No valid admin API credential."),
        "403": error_response("The credential's role or brand limit does not allow this."),
        "503": error_response("The database cannot be reached now."),
    });
    if op.path.contains('{') || op.path.starts_with("/agents/") {
        responses["404"] = error_response(
            "No such object within the credential's brands (the same answer either way).",
        );
    }
    if op.path == "/grants/{id}/revoke" {
        responses["409"] = error_response("Already revoked.");
    }
    let mut o = json!({
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": format!("Needs the {} role or above.", op.role.as_str()),
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = op.body {
        o["requestBody"] = json!({
            "required": false,
            "content": { "application/json": { "schema": reference(body) } }
        });
    }
    o
}

/// The whole document (without `servers`, which depends on the node).
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in OPERATIONS {
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry[op.method] = operation(op);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "pactd admin API",
            "version": "1",
            "description": "Staff operations on grants, customers, agent platforms and the audit log. \
                            Every request is recorded in the audit log under the credential's name."
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http", "scheme": "bearer",
                    "description": "An admin API credential from `pactd admin credential add`."
                }
            },
            "schemas": schemas(),
        }
    })
}

/// The schemas of trusted registries and blocked hosts (PACT §3.1, issue 31).
fn registry_schemas() -> Value {
    let host = json!({ "type": "string", "minLength": 1, "maxLength": 253 });
    json!({
        "Registry": object(&[
            ("name", s("string")),
            ("url", s("string")),
            ("keys", json!({ "type": "array", "items": { "type": "object" } })),
            ("refresh_seconds", s("integer")),
            ("created_at", time()),
            ("next_fetch_at", time()),
            ("last_fetched_at", json!({ "type": ["string", "null"], "format": "date-time" })),
            ("last_error", nullable("string")),
            ("list_issued_at", json!({ "type": ["string", "null"], "format": "date-time" })),
            ("list_expires_at", json!({ "type": ["string", "null"], "format": "date-time" })),
            ("listed", s("integer")),
        ], &["name", "url", "keys", "refresh_seconds", "listed"]),
        "RegistryList": list_of("Registry"),
        "NewRegistry": json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,62}$" },
                "url": { "type": "string", "format": "uri" },
                "keys": { "description": "The pinned public keys: a JWKS, an array of JWKs or one JWK (ES256, each with a kid)." },
                "refresh_seconds": { "type": "integer", "minimum": 60, "maximum": 86400 }
            },
            "required": ["name", "url", "keys"],
            "additionalProperties": false
        }),
        "RegistryRefreshed": object(&[
            ("name", s("string")),
            ("listed", s("integer")),
            ("skipped", s("integer")),
            ("delisted", json!({ "type": "array", "items": { "type": "string" } })),
            ("revoked_grants", s("integer")),
        ], &["name", "listed", "skipped", "delisted", "revoked_grants"]),
        "RegistryRemoved": object(&[
            ("name", s("string")),
            ("unlisted_agents", s("integer")),
            ("revoked_grants", s("integer")),
        ], &["name", "unlisted_agents", "revoked_grants"]),
        "BlockedHost": object(&[
            ("host", s("string")),
            ("reason", s("string")),
            ("blocked_at", time()),
        ], &["host", "reason", "blocked_at"]),
        "BlockedHostList": list_of("BlockedHost"),
        "HostBlock": json!({
            "type": "object",
            "properties": {
                "host": host,
                "reason": { "type": "string", "minLength": 1, "maxLength": 200, "pattern": NO_CONTROL }
            },
            "required": ["host", "reason"],
            "additionalProperties": false
        }),
        "Host": json!({
            "type": "object",
            "properties": { "host": host },
            "required": ["host"],
            "additionalProperties": false
        }),
        "HostBlocked": object(&[
            ("host", s("string")),
            ("disabled_agents", json!({ "type": "array", "items": { "type": "string" } })),
            ("revoked_grants", s("integer")),
        ], &["host", "disabled_agents", "revoked_grants"]),
        "HostUnblocked": object(&[
            ("host", s("string")),
            ("blocked", s("boolean")),
        ], &["host", "blocked"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_resolves_and_every_operation_is_documented() {
        let doc = document();
        let text = doc.to_string();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for part in text.split("#/components/schemas/").skip(1) {
            let name: String = part.chars().take_while(|c| c.is_alphanumeric()).collect();
            assert!(schemas.contains_key(&name), "dangling $ref {name}");
        }
        for op in OPERATIONS {
            assert!(
                doc["paths"][op.path][op.method]["operationId"] == op.operation_id,
                "{} {} missing",
                op.method,
                op.path
            );
        }
        assert_eq!(doc["openapi"], "3.1.0");
    }
}
