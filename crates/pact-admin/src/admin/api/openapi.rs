//! The OpenAPI 3.1 document of the admin API, generated from [`OPERATIONS`]
//! (the same table that routes the requests) and served at
//! `/admin/api/v1/openapi.json`.

use std::sync::OnceLock;

use axum::Json;
use axum::extract::State;
use serde_json::{Map, Value, json};

use super::answer::Shape;
use super::error::ErrorCode;
use super::fields::{DETAILS_TYPE, NO_CONTROL, SCOPE_PATTERN, SLUG_PATTERN, TYPE_NAME_PATTERN};
use super::{OPERATIONS, Operation, PREFIX};
use pact_node::node::Node;

/// `GET /admin/api/v1/openapi.json` (public: it holds no data).
pub async fn serve(State(node): State<Node>) -> Json<Value> {
    static DOC: OnceLock<Value> = OnceLock::new();
    let mut doc = DOC.get_or_init(document).clone();
    doc["servers"] = json!([{
        "url": format!("{}{PREFIX}", node.config.public_url.trim_end_matches('/'))
    }]);
    Json(doc)
}

/// `limit`: a whole number from 1 to 200 (`params::limit`), as query text.
const LIMIT_PATTERN: &str = "^([1-9]|[1-9][0-9]|1[0-9][0-9]|200)$";

const UUID_PATTERN: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

fn s(kind: &str) -> Value {
    json!({ "type": kind })
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

/// The schemas derived from the bodies' types: each operation's answer and
/// request, and those they refer to.
fn derived_schemas() -> Map<String, Value> {
    let mut derived = Vec::new();
    for op in OPERATIONS {
        for shape in [Some(&op.response), op.body.as_ref()].into_iter().flatten() {
            if let Shape::Derived { schemas, .. } = shape {
                schemas(&mut derived);
            }
        }
    }
    let mut all: Map<String, Value> = derived
        .into_iter()
        // Serializing a schema built by utoipa cannot fail.
        .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
        .collect();
    // Bodies that must name at least one field. Said here, not with
    // `#[schema(min_properties = 1)]`: utoipa 5.5 writes that as
    // `maxProperties` (the unit test below holds the document to it).
    for name in ["CardText"] {
        if let Some(Value::Object(schema)) = all.get_mut(name) {
            schema.insert("minProperties".to_owned(), json!(1));
        }
    }
    // A public tool (no scope) has no authorization_details to hold its
    // calls to, so it takes no limit rules (`brand_settings::upsert_tool`).
    if let Some(Value::Object(schema)) = all.get_mut("ToolDefinition") {
        schema.insert(
            "anyOf".to_owned(),
            json!([
                { "required": ["scope"], "properties": { "scope": { "type": "string" } } },
                { "properties": { "enforce": { "maxItems": 0 } } }
            ]),
        );
    }
    all
}

/// The hand-written schemas: the error's, the receipts export's, and the
/// RFC 9396 type declaration's (`domain::authz_details`, which has no schema
/// derive).
fn written_schemas() -> Map<String, Value> {
    let mut all = Map::new();
    for more in [base_schemas(), brand_setting_schemas()] {
        if let Value::Object(more) = more {
            all.extend(more);
        }
    }
    all
}

/// Every schema. A name is either derived or written, never both (the unit
/// test below), so neither silently replaces the other.
fn schemas() -> Value {
    let mut all = derived_schemas();
    all.extend(written_schemas());
    Value::Object(all)
}

fn base_schemas() -> Value {
    json!({
        "Error": object(&[("error", object(&[
            ("code", json!({ "enum": ErrorCode::ALL.map(ErrorCode::as_str) })),
            ("message", s("string")),
        ], &["code", "message"]))], &["error"]),
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
    })
}

/// The schemas of a brand's RFC 9396 types, apart
/// from [`base_schemas`] to stay within `json!`'s recursion limit.
fn brand_setting_schemas() -> Value {
    json!({
        DETAILS_TYPE: json!({
            "type": "object",
            "description": "An RFC 9396 type (PACT §5.7). Which tool argument each field limits is said by the tools' `enforce` rules, not here; every grant keeps the declaration it was approved under.",
            "properties": {
                "scope": { "type": "string", "pattern": SCOPE_PATTERN, "description": "The scope the type refines (one the brand offers)." },
                "description": {
                    "type": "string",
                    "pattern": NO_CONTROL,
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
                                "type": "array",
                                "items": { "type": "string", "minLength": 1, "maxLength": 256, "pattern": NO_CONTROL },
                                "maxItems": 64, "uniqueItems": true,
                                "description": "An enum's allowed values, each once (enum only, and needed there)."
                            },
                            "label": {
                                "type": "string", "maxLength": 256, "pattern": NO_CONTROL,
                                "description": "What is limited, in the brand's words, for sentences the description does not cover."
                            }
                        },
                        "required": ["type"],
                        "additionalProperties": false,
                        "if": { "properties": { "type": { "const": "enum" } } },
                        "then": { "required": ["values"], "properties": { "values": { "minItems": 1 } } },
                        "else": { "properties": { "values": { "maxItems": 0 } } }
                    }
                }
            },
            "required": ["scope", "fields"],
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

fn operation(op: &Operation, schemas: &Value) -> Value {
    let mut parameters: Vec<Value> = op
        .query
        .iter()
        .map(|(name, description)| {
            // What `params` accepts of each: `limit` 1-200, `state` one of
            // the grant states, `q` (findCustomers' one required parameter)
            // something to look for, the rest any text.
            let schema = match *name {
                "limit" => json!({ "type": "string", "pattern": LIMIT_PATTERN }),
                "state" => json!({ "type": "string", "enum": super::answer::GRANT_STATES.map(|s| s.as_str()) }),
                "q" => json!({ "type": "string", "minLength": 1, "maxLength": 512, "pattern": super::fields::NON_BLANK }),
                _ => json!({ "type": "string", "maxLength": 512, "pattern": NO_CONTROL }),
            };
            json!({
                "name": name, "in": "query", "required": *name == "q",
                "description": description,
                "schema": schema,
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
            "schema": { "type": "string", "pattern": SLUG_PATTERN }
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
            "schema": { "type": "string", "pattern": SLUG_PATTERN }
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
            "content": { "application/json": { "schema": reference(&op.response.name()) } }
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
    if op.path.ends_with("/tools") || op.path.ends_with("/details-types") {
        responses["409"] =
            error_response("The brand has no such scope yet (code conflict): add the scope first.");
    }
    let mut o = json!({
        "operationId": op.operation_id,
        "summary": op.summary,
        "description": format!("Needs the {} role or above.", op.role.as_str()),
        "parameters": parameters,
        "responses": responses,
    });
    if let Some(body) = &op.body {
        // A body with a field it cannot do without must be sent; one whose
        // fields are all optional may be left out (`params::body` reads an
        // empty body as `{}`).
        let schema = &schemas[&*body.name()];
        let needed = schema["required"].as_array().is_some_and(|r| !r.is_empty())
            || schema["minProperties"].as_u64().is_some_and(|n| n > 0);
        o["requestBody"] = json!({
            "required": needed,
            "content": { "application/json": { "schema": reference(&body.name()) } }
        });
    }
    o
}

/// The whole document (without `servers`, which depends on the node).
pub fn document() -> Value {
    let schemas = schemas();
    let mut paths = Map::new();
    for op in OPERATIONS {
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry[op.method] = operation(op, &schemas);
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
            "schemas": schemas,
        }
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

    /// A card edit must give something (`brand_settings::set_card_text`).
    #[test]
    fn a_card_edit_names_at_least_one_part() {
        let doc = document();
        let card = &doc["components"]["schemas"]["CardText"];
        assert_eq!(card["minProperties"], 1, "{card}");
        assert!(card.get("maxProperties").is_none(), "{card}");
    }

    #[test]
    fn no_schema_is_both_derived_and_written() {
        let written = written_schemas();
        let derived = derived_schemas();
        let both: Vec<&String> = derived
            .keys()
            .filter(|name| written.contains_key(*name))
            .collect();
        assert!(both.is_empty(), "{both:?}");
        assert!(written.contains_key(DETAILS_TYPE) && derived.contains_key("Grant"));
        assert!(derived.contains_key("DetailsTypeDefinition"));
        assert!(
            derived.contains_key("Reason"),
            "request bodies are derived too"
        );
    }

    /// Every request body refuses a field it does not know (each request
    /// type is `deny_unknown_fields`), and its document says so: a client
    /// learns of a misspelt field from the schema, not from a 400.
    #[test]
    fn every_request_body_refuses_unknown_fields() {
        let doc = document();
        for op in OPERATIONS {
            if let Some(body) = &op.body {
                let schema = &doc["components"]["schemas"][&*body.name()];
                assert_eq!(
                    schema["additionalProperties"], false,
                    "{} {}: {schema}",
                    op.method, op.path
                );
            }
        }
    }
}
