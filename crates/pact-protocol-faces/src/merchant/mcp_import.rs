//! `pactd brand tool import-mcp`: the tools of the merchant's MCP server
//! registered as the brand's tools in one step (docs/mcp.md, "Connect your
//! MCP server").
//!
//! All or nothing: the server's whole `tools/list` is read and every tool
//! checked (name, input schema, description) before anything is written,
//! and the writes happen in the caller's transaction. A tool given no scope
//! (`--scope-map TOOL=SCOPE`) is registered unmapped: refused for everyone
//! until an admin maps it (deny by default). A re-import updates
//! descriptions and schemas but keeps each tool's scope unless a mapping
//! names a new one explicitly, so it never widens access silently.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use pact_db::ids::BrandId;
use pact_db::merchant::{BrandTool, TOOL_KIND_MCP};
use reqwest::Client;
use serde_json::{Map, Value, json};
use sqlx::PgConnection;

use super::mcp_client::{self, Signer};
use super::signing::WebhookSecret;
use crate::admin::brand_settings::EditError;
use crate::domain::hidden_chars;
use crate::tool_schema as schema;

/// Longest description kept, in characters (as the tool form and the admin
/// API count them).
const MAX_DESCRIPTION: usize = 1000;
/// `tools/list` answers above this are refused.
pub const MAX_LIST_BYTES: usize = 1024 * 1024;

/// One tool as the merchant's server lists it, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteTool {
    /// The name at the server (MCP tool names: 1–128 of A-Z a-z 0-9 _ - .).
    pub remote_name: String,
    /// The name pactd registers it under (pactd's tool-name rule).
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

fn invalid(message: impl Into<String>) -> EditError {
    EditError::Invalid(message.into())
}

/// pactd's name for a remote tool: lower case, any other character `_`,
/// at most 63 characters.
pub fn local_name(remote: &str) -> String {
    let mut out: String = remote
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    if out.starts_with(['_', '-']) {
        out.replace_range(..1, "t");
    }
    out
}

/// Checks a `tools/list` result's tools; the first problem is the error
/// (naming the tool, never echoing its schema).
pub fn check_listed(listed: &[Value]) -> Result<Vec<RemoteTool>, EditError> {
    let mut out = Vec::with_capacity(listed.len());
    let mut names = BTreeSet::new();
    for item in listed {
        let remote = item
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("the server lists a tool without a name"))?;
        // MCP 2025-11-25 "Tools", tool names: 1–128 characters of these.
        if remote.is_empty()
            || remote.len() > 128
            || !remote
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(invalid(format!(
                "the server's tool name {:?} is not a valid MCP tool name",
                remote.chars().take(130).collect::<String>()
            )));
        }
        let name = local_name(remote);
        if !pact_db::brands::is_valid_brand_id(&name) || !names.insert(name.clone()) {
            return Err(invalid(format!(
                "the server's tool {remote:?} would be registered as {name:?}, which is invalid or \
                 taken by another of its tools"
            )));
        }
        let input_schema = item
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        schema::check(&input_schema)
            .map_err(|e| invalid(format!("tool {remote:?}: its inputSchema is refused: {e}")))?;
        // The schema's own texts are shown (the agent's tool list, the
        // admin API): cleaned like the description; a hidden character
        // anywhere else in it (a property name, an enum value) would make
        // what is shown differ from what is checked, so it is refused.
        let mut input_schema = input_schema;
        clean_schema(&mut input_schema).map_err(|c| {
            invalid(format!(
                "tool {remote:?}: {}",
                hidden_chars::refusal("its inputSchema", c)
            ))
        })?;
        // PostgreSQL's jsonb cannot hold U+0000.
        if input_schema.to_string().contains("\\u0000") {
            return Err(invalid(format!(
                "tool {remote:?}: its inputSchema holds a NUL character"
            )));
        }
        let raw = item
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        out.push(RemoteTool {
            remote_name: remote.to_owned(),
            name,
            description: shown_text(raw, MAX_DESCRIPTION),
            input_schema,
        });
    }
    if out.is_empty() {
        return Err(invalid("the server lists no tools"));
    }
    Ok(out)
}

/// Text from the merchant's server that pactd shows to people or staff (a
/// tool's description: the agent's tool list, the console, the admin API):
/// control characters become spaces (descriptions hold line breaks), and
/// every other invisible or direction-changing character is removed
/// (domain/hidden_chars.rs: a U+202E would make the text read otherwise
/// than it is). At most `max` characters, trimmed.
pub fn shown_text(raw: &str, max: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    for c in raw.chars() {
        let c = if c.is_control() {
            ' '
        } else if hidden_chars::is_hidden(c) {
            continue;
        } else {
            c
        };
        if kept == max {
            break;
        }
        out.push(c);
        kept += 1;
    }
    out.trim().to_owned()
}

/// JSON Schema annotations (2020-12 meta-data vocabulary) that are only shown.
const SHOWN_KEYWORDS: [&str; 2] = ["title", "description"];

/// Cleans the shown texts of an imported input schema ([`shown_text`]) and
/// refuses a hidden character anywhere else (returned).
fn clean_schema(v: &mut Value) -> Result<(), char> {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                if let Some(c) = hidden_chars::first_hidden(k) {
                    return Err(c);
                }
                match val {
                    Value::String(text) if SHOWN_KEYWORDS.contains(&k.as_str()) => {
                        *text = shown_text(text, MAX_DESCRIPTION);
                    }
                    other => clean_schema(other)?,
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter_mut().try_for_each(clean_schema),
        Value::String(text) => hidden_chars::first_hidden(text).map_or(Ok(()), Err),
        _ => Ok(()),
    }
}

/// Reads and checks the server's tools, signed with the brand's webhook
/// secrets (`pact-context` of type `pact.mcp_import`: no person involved).
pub async fn fetch(
    http: &Client,
    url: &str,
    allow_loopback: bool,
    secrets: &[WebhookSecret],
    brand_id: &BrandId,
    timestamp: i64,
    timeout: Duration,
) -> Result<Vec<RemoteTool>, EditError> {
    let mut context = Map::new();
    context.insert("type".into(), json!("pact.mcp_import"));
    context.insert("brand".into(), json!(brand_id));
    let signer = Signer::new(secrets, context, timestamp);
    let server = mcp_client::Server {
        http,
        url,
        allow_loopback,
        timeout,
        max: MAX_LIST_BYTES,
    };
    let listed = mcp_client::list_tools(server, &signer)
        .await
        .map_err(|e| invalid(import_failure(url, allow_loopback, &e)))?;
    check_listed(&listed)
}

/// Why an import's `tools/list` failed, in the import's words: the SSRF
/// guard is shared with JWKS fetching and speaks of a jwksUri, but here the
/// URL refused is the MCP server's, and the way past it in development is
/// `--allow-loopback` (issue 30, item 10).
fn import_failure(url: &str, allow_loopback: bool, e: &mcp_client::McpError) -> String {
    use super::http::CallError;
    match e {
        mcp_client::McpError::Call(CallError::Refused(why)) => {
            let why = why.strip_prefix("invalid jwksUri: ").unwrap_or(why);
            let why = why.replace("jwksUri host", "its host");
            let hint = if allow_loopback {
                ""
            } else {
                " (a development server on this machine needs --allow-loopback)"
            };
            format!("the MCP server URL {url} is refused by the SSRF guard: {why}{hint}")
        }
        other => format!("reading tools/list from {url}: {other}"),
    }
}

/// What an import did, for the command's output and the audit entry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportReport {
    /// New tools, with the scope they got (`None`: unmapped).
    pub added: Vec<(String, Option<String>)>,
    /// Tools already imported from this server whose description and schema were refreshed.
    pub updated: Vec<String>,
    /// Explicit `--scope-map` changes of existing tools: name, old, new.
    pub rescoped: Vec<(String, Option<String>, String)>,
    /// Tools of this server that stay unusable until mapped.
    pub unmapped: Vec<String>,
    /// Tools imported earlier from this server that it no longer lists (kept).
    pub gone: Vec<String>,
}

impl ImportReport {
    pub fn to_json(&self) -> Value {
        json!({
            "added": self.added.iter().map(|(n, s)| json!({"tool": n, "scope": s})).collect::<Vec<_>>(),
            "updated": self.updated,
            "rescoped": self.rescoped.iter()
                .map(|(n, old, new)| json!({"tool": n, "from": old, "to": new})).collect::<Vec<_>>(),
            "unmapped": self.unmapped,
            "gone": self.gone,
        })
    }
}

/// `TOOL=SCOPE` pairs; TOOL is the server's name or pactd's name for it.
pub fn parse_scope_map(raw: &[String]) -> Result<Vec<(String, String)>, EditError> {
    raw.iter()
        .map(|p| {
            p.split_once('=')
                .filter(|(t, s)| !t.is_empty() && !s.is_empty())
                .map(|(t, s)| (t.to_owned(), s.to_owned()))
                .ok_or_else(|| invalid(format!("invalid --scope-map {p:?}: use TOOL=SCOPE")))
        })
        .collect()
}

/// Registers `tools` of the server at `url` for the brand, in `tx`. Nothing
/// is written unless every tool and mapping is acceptable.
pub async fn apply(
    tx: &mut PgConnection,
    brand_id: &BrandId,
    url: &str,
    tools: &[RemoteTool],
    scope_map: &[(String, String)],
) -> Result<ImportReport, EditError> {
    let mut mapping: BTreeMap<&str, &str> = BTreeMap::new();
    for (key, scope) in scope_map {
        let Some(tool) = tools
            .iter()
            .find(|t| t.name == *key || t.remote_name == *key)
        else {
            return Err(invalid(format!(
                "--scope-map names {key:?}, which the server does not list"
            )));
        };
        crate::admin::brand_settings::require_offered_scope(&mut *tx, brand_id, scope).await?;
        if mapping.insert(tool.name.as_str(), scope.as_str()).is_some() {
            return Err(invalid(format!("--scope-map maps {key:?} twice")));
        }
    }
    let existing: BTreeMap<String, BrandTool> = pact_db::merchant::list_tools(&mut *tx, brand_id)
        .await?
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    // Every check before the first write: all or nothing even without the transaction.
    for t in tools {
        if let Some(e) = existing.get(&t.name)
            && (!e.is_mcp() || e.url != url)
        {
            let what = if e.is_mcp() {
                format!("imported from another MCP server ({})", e.url)
            } else {
                "a URL tool".to_owned()
            };
            return Err(invalid(format!(
                "the brand already has a tool {:?}, {what}; remove it first \
                 (pactd brand tool remove {brand_id} {})",
                t.name, t.name
            )));
        }
    }
    let mut report = ImportReport::default();
    for t in tools {
        let mapped_to = mapping.get(t.name.as_str()).map(|s| (*s).to_owned());
        let row = match existing.get(&t.name) {
            Some(e) => {
                let mut row = e.clone();
                row.description.clone_from(&t.description);
                row.input_schema = Some(t.input_schema.clone());
                row.remote_name = Some(t.remote_name.clone());
                if let Some(new) = mapped_to.filter(|s| !e.mapped || e.scope.as_ref() != Some(s)) {
                    report.rescoped.push((
                        t.name.clone(),
                        e.scope.clone().filter(|_| e.mapped),
                        new.clone(),
                    ));
                    row.scope = Some(new);
                    row.mapped = true;
                }
                report.updated.push(t.name.clone());
                row
            }
            None => {
                report.added.push((t.name.clone(), mapped_to.clone()));
                BrandTool {
                    brand_id: brand_id.to_owned(),
                    name: t.name.clone(),
                    mapped: mapped_to.is_some(),
                    scope: mapped_to,
                    url: url.to_owned(),
                    description: t.description.clone(),
                    enforce: json!([]),
                    input_schema: Some(t.input_schema.clone()),
                    kind: TOOL_KIND_MCP.to_owned(),
                    remote_name: Some(t.remote_name.clone()),
                    summary: String::new(),
                }
            }
        };
        if !row.mapped {
            report.unmapped.push(row.name.clone());
        }
        pact_db::merchant::upsert_tool(&mut *tx, &row).await?;
    }
    report.gone = existing
        .values()
        .filter(|e| e.is_mcp() && e.url == url && !tools.iter().any(|t| t.name == e.name))
        .map(|e| e.name.clone())
        .collect();
    Ok(report)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    #[test]
    fn shown_text_keeps_characters_not_bytes() {
        let long = "é".repeat(1200);
        let kept = super::shown_text(&long, 1000);
        assert_eq!(kept.chars().count(), 1000);
        assert_eq!(super::shown_text("a\u{202E}b\nc", 1000), "ab c");
    }
    use super::*;

    #[test]
    fn remote_names_become_pactd_names() {
        assert_eq!(local_name("lookup_orders"), "lookup_orders");
        assert_eq!(local_name("Orders.Cancel"), "orders_cancel");
        assert_eq!(local_name("_x"), "tx");
        assert_eq!(local_name(&"a".repeat(128)).len(), 63);
    }

    #[test]
    fn listed_tools_are_checked_all_or_nothing() {
        let good = json!({"name": "lookup_orders", "description": "List\norders",
                          "inputSchema": {"type": "object"}});
        let tools = check_listed(std::slice::from_ref(&good)).unwrap();
        assert_eq!(tools[0].description, "List orders");
        for bad in [
            json!({"description": "no name"}),
            json!({"name": "has space", "inputSchema": {"type": "object"}}),
            json!({"name": "x", "inputSchema": {"type": "string"}}),
            json!({"name": "x", "inputSchema": {"type": "object",
                   "properties": {"a": {"$ref": "http://169.254.169.254/"}}}}),
        ] {
            assert!(check_listed(&[good.clone(), bad.clone()]).is_err(), "{bad}");
        }
        // Two remote names that would share one pactd name.
        let twin = json!({"name": "Lookup_Orders", "inputSchema": {"type": "object"}});
        assert!(check_listed(&[good, twin]).is_err());
        assert!(check_listed(&[]).is_err());
    }

    /// Issue 28, finding 7: no bidi or other hidden character of the
    /// merchant's server reaches what people or staff are shown.
    #[test]
    fn imported_texts_lose_their_bidi_and_control_characters() {
        let listed = json!({"name": "refund", "description":
            "Refund\u{202E}txt.exe\u{2066} an order\u{200B}\r\nnow\u{7}",
            "inputSchema": {"type": "object", "title": "Re\u{202D}fund",
                "properties": {"id": {"type": "string", "description": "The\u{2067} id"}}}});
        let tools = check_listed(&[listed]).unwrap();
        assert_eq!(tools[0].description, "Refundtxt.exe an order  now");
        assert_eq!(tools[0].input_schema["title"], "Refund");
        assert_eq!(
            tools[0].input_schema["properties"]["id"]["description"],
            "The id"
        );
        let text = tools[0].input_schema.to_string() + &tools[0].description;
        assert!(!text.chars().any(hidden_chars::is_hidden), "{text:?}");
        // Hidden in what is checked, not only shown: refused.
        for bad in [
            json!({"type": "object", "properties": {"i\u{202E}d": {"type": "string"}}}),
            json!({"type": "object", "properties": {"id": {"enum": ["A\u{202E}B"]}}}),
        ] {
            let tool = json!({"name": "x", "inputSchema": bad});
            let e = check_listed(&[tool]).unwrap_err();
            assert!(matches!(e, EditError::Invalid(m) if m.contains("U+202E")));
        }
    }

    #[test]
    fn scope_maps_are_tool_equals_scope() {
        assert_eq!(
            parse_scope_map(&["a=orders:read".to_owned()]).unwrap(),
            [("a".to_owned(), "orders:read".to_owned())]
        );
        assert!(parse_scope_map(&["a".to_owned()]).is_err());
        assert!(parse_scope_map(&["=s".to_owned()]).is_err());
    }
}
