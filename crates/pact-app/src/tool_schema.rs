//! A tool's input schema: checked when a tool is registered, and applied to
//! the real arguments of every call before anything is forwarded.
//!
//! The schema is JSON Schema (2020-12 unless it names another draft with
//! `$schema`), the dialect MCP's `inputSchema` uses (MCP 2025-11-25, "Tools":
//! `inputSchema` is a JSON Schema object with `type: "object"`). The
//! validator is built without HTTP or file resolving, so a `$ref` to anything
//! outside the schema fails to compile: registering a schema never makes
//! pactd fetch a URL (no SSRF through `$ref`).

use serde_json::{Value, json};

/// The schema a tool without one gets: any JSON object.
pub fn or_any_object(schema: Option<&Value>) -> Value {
    schema.cloned().unwrap_or_else(|| json!({"type": "object"}))
}

/// Whether `schema` can be a tool's input schema: a JSON Schema that
/// compiles, whose top level is `"type": "object"` (MCP clients refuse a
/// tool whose `inputSchema` is anything else).
pub fn check(schema: &Value) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the input schema must have \"type\": \"object\" at its top level".to_owned());
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("not a usable JSON Schema: {e}"))
}

/// Checks the arguments of a call against the tool's schema (none: any
/// object). The error names the first problem and where it is, for the
/// calling agent to correct itself; it never echoes the argument values.
pub fn validate(schema: Option<&Value>, args: &Value) -> Result<(), String> {
    if !args.is_object() {
        return Err("the arguments must be a JSON object".to_owned());
    }
    let Some(schema) = schema else {
        return Ok(());
    };
    // A schema that stopped compiling (stored before this check existed) refuses every call.
    let validator = jsonschema::validator_for(schema)
        .map_err(|_| "the tool's input schema is not usable; ask the merchant".to_owned())?;
    match validator.iter_errors(args).next() {
        None => Ok(()),
        Some(e) => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            Err(format!(
                "the arguments do not match the tool's input schema at {at} ({})",
                keyword(&e)
            ))
        }
    }
}

/// The failed keyword's name, e.g. `required`, `type`, `additionalProperties`.
fn keyword(e: &jsonschema::ValidationError<'_>) -> String {
    let path = e.schema_path().to_string();
    path.rsplit('/')
        .find(|seg| !seg.is_empty() && !seg.chars().all(|c| c.is_ascii_digit()))
        .unwrap_or("schema")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancel_schema() -> Value {
        json!({
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^SHOP-[0-9]+$"}},
            "required": ["order_id"],
            "additionalProperties": false
        })
    }

    #[test]
    fn arguments_outside_the_schema_are_refused_and_the_value_is_not_echoed() {
        let s = cancel_schema();
        assert!(validate(Some(&s), &json!({"order_id": "SHOP-1"})).is_ok());
        for (args, word) in [
            (json!({}), "required"),
            (json!({"order_id": 7}), "type"),
            (json!({"order_id": "DROP TABLE"}), "pattern"),
            (
                json!({"order_id": "SHOP-1", "refund": true}),
                "additionalProperties",
            ),
        ] {
            let e = validate(Some(&s), &args).unwrap_err();
            assert!(e.contains(word), "{args}: {e}");
            assert!(!e.contains("DROP TABLE"), "{e}");
        }
        assert!(validate(Some(&s), &json!(["SHOP-1"])).is_err());
        // No schema: any object, but still only an object.
        assert!(validate(None, &json!({"x": 1})).is_ok());
        assert!(validate(None, &json!("x")).is_err());
    }

    #[test]
    fn only_object_schemas_that_compile_without_fetching_are_accepted() {
        assert!(check(&cancel_schema()).is_ok());
        assert!(check(&json!({"type": "string"})).is_err());
        assert!(check(&json!({"type": "object", "properties": {"a": {"type": "nope"}}})).is_err());
        // An external $ref would make pactd fetch a URL: it does not compile here.
        let remote = json!({"type": "object", "properties": {
            "a": {"$ref": "http://169.254.169.254/latest/meta-data"}}});
        assert!(check(&remote).is_err());
        // A broken stored schema refuses every call rather than none.
        assert!(validate(Some(&remote), &json!({})).is_err());
    }
}
