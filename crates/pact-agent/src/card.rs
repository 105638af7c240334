//! The Agent Card (PACT §2): fetch, validate, summarise.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value};

use crate::http::{Http, Request, Response};

/// What a PA needs from a card.
#[derive(Clone, Debug)]
pub struct CardInfo {
    /// The URL the card was finally served from (after redirects).
    pub url: String,
    pub card: Value,
    /// The HTTP+JSON interface URL (PACT §1: `iface`).
    pub iface: String,
    pub name: String,
    /// Present when the card offers the `userDelegation` scheme (PACT §5).
    pub delegation: Option<DelegationInfo>,
}

/// The `userDelegation` scheme's device-code flow (PACT §2, §5).
#[derive(Clone, Debug)]
pub struct DelegationInfo {
    pub device_authorization_url: String,
    pub token_url: String,
    /// Scope id → description (shown verbatim on consent).
    pub scopes: BTreeMap<String, String>,
    /// RFC 8414 metadata, where the brand's `jwks_uri` is.
    pub metadata_url: String,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

/// The URL of the first HTTP+JSON interface.
pub fn interface_url(card: &Value) -> Option<String> {
    card.get("supportedInterfaces")?
        .as_array()?
        .iter()
        .find(|i| str_at(i, &["protocolBinding"]) == Some("HTTP+JSON"))
        .and_then(|i| str_at(i, &["url"]))
        .map(|u| u.trim_end_matches('/').to_owned())
}

/// Reads the delegation scheme, if the card has one and it is well formed.
pub fn delegation_info(card: &Value) -> Option<DelegationInfo> {
    let scheme = card
        .get("securitySchemes")?
        .get("userDelegation")?
        .get("oauth2SecurityScheme")?;
    let flow = scheme.get("flows")?.get("deviceCode")?;
    Some(DelegationInfo {
        device_authorization_url: str_at(flow, &["deviceAuthorizationUrl"])?.to_owned(),
        token_url: str_at(flow, &["tokenUrl"])?.to_owned(),
        scopes: flow
            .get("scopes")?
            .as_object()?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
            .collect(),
        metadata_url: str_at(scheme, &["oauth2MetadataUrl"])?.to_owned(),
    })
}

/// Builds [`CardInfo`] from a card document.
pub fn parse(card: Value, url: &str) -> Result<CardInfo> {
    if !card.is_object() {
        bail!("the card is not a JSON object");
    }
    let iface = interface_url(&card)
        .ok_or_else(|| anyhow!("the card has no HTTP+JSON entry in supportedInterfaces"))?;
    Ok(CardInfo {
        url: url.to_owned(),
        name: str_at(&card, &["name"]).unwrap_or("").to_owned(),
        delegation: delegation_info(&card),
        iface,
        card,
    })
}

/// GETs a card without credentials (PACT §2), following redirects (PACT §1:
/// a brand's domain may redirect to the Provider card).
pub async fn fetch(http: &Http, url: &str) -> Result<(Response, CardInfo)> {
    let res = http.send(Request::get(url).follow_redirects()).await?;
    if res.status != 200 {
        bail!("GET {url}: HTTP {}", res.status);
    }
    let card = res
        .json()
        .ok_or_else(|| anyhow!("GET {url}: the body is not JSON"))?;
    let info = parse(card, &res.url)?;
    Ok((res, info))
}

fn is_http_url(s: &str) -> bool {
    url::Url::parse(s).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

/// `{list: []}` (A2A `StringList`, empty for PACT's schemes).
fn is_empty_list(v: &Value) -> bool {
    v.get("list")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty)
}

/// A requirement naming exactly these schemes, each with `{list: []}`.
fn has_requirement(card: &Value, names: &[&str]) -> bool {
    card.get("securityRequirements")
        .and_then(Value::as_array)
        .is_some_and(|reqs| {
            reqs.iter().any(|r| {
                r.get("schemes")
                    .and_then(Value::as_object)
                    .is_some_and(|s: &Map<String, Value>| {
                        s.len() == names.len()
                            && names.iter().all(|n| s.get(*n).is_some_and(is_empty_list))
                    })
            })
        })
}

/// PACT §2: an entry `{url: iface, protocolBinding: "HTTP+JSON",
/// protocolVersion: "1.0"}` in `supportedInterfaces`, first.
pub fn check_interface(card: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) else {
        return vec!["supportedInterfaces is missing or not an array".to_owned()];
    };
    let position = list.iter().position(|i| {
        str_at(i, &["protocolBinding"]) == Some("HTTP+JSON")
            && str_at(i, &["protocolVersion"]) == Some("1.0")
    });
    match position {
        None => problems.push(
            "no entry with protocolBinding \"HTTP+JSON\" and protocolVersion \"1.0\"".to_owned(),
        ),
        Some(p) => {
            if p != 0 {
                problems.push(format!(
                    "the HTTP+JSON 1.0 entry is at index {p}; PACT §2 puts it first"
                ));
            }
            match list.get(p).and_then(|i| str_at(i, &["url"])) {
                Some(u) if is_http_url(u) => {}
                Some(u) => problems.push(format!("the interface url {u:?} is not an http(s) URL")),
                None => problems.push("the HTTP+JSON entry has no url".to_owned()),
            }
        }
    }
    problems
}

/// PACT §2: `securitySchemes.paJwt = {httpAuthSecurityScheme: {scheme:
/// "Bearer", bearerFormat: "JWT"}}`.
pub fn check_pa_jwt_scheme(card: &Value) -> Vec<String> {
    let Some(s) = card
        .get("securitySchemes")
        .and_then(|s| s.get("paJwt"))
        .and_then(Value::as_object)
    else {
        return vec!["securitySchemes.paJwt is missing".to_owned()];
    };
    let mut problems = Vec::new();
    if s.len() != 1 || !s.contains_key("httpAuthSecurityScheme") {
        problems.push("paJwt must be exactly an httpAuthSecurityScheme".to_owned());
    }
    let http = s.get("httpAuthSecurityScheme").cloned().unwrap_or_default();
    if str_at(&http, &["scheme"]) != Some("Bearer") {
        problems.push(format!(
            "paJwt scheme is {:?}, not \"Bearer\"",
            http.get("scheme")
        ));
    }
    if str_at(&http, &["bearerFormat"]) != Some("JWT") {
        problems.push(format!(
            "paJwt bearerFormat is {:?}, not \"JWT\"",
            http.get("bearerFormat")
        ));
    }
    problems
}

/// PACT §2: one `securityRequirements` entry names `paJwt` alone.
pub fn check_identity_requirement(card: &Value) -> Vec<String> {
    if has_requirement(card, &["paJwt"]) {
        Vec::new()
    } else {
        vec!["no securityRequirements entry {schemes: {paJwt: {list: []}}}".to_owned()]
    }
}

/// PACT §2 with delegation: the `userDelegation` OAuth 2.0 scheme with a
/// device-code flow and metadata URL, and a second requirement naming both
/// schemes; the identity-only entry stays.
pub fn check_delegation(card: &Value) -> Vec<String> {
    let Some(scheme) = card
        .get("securitySchemes")
        .and_then(|s| s.get("userDelegation"))
    else {
        return vec!["securitySchemes.userDelegation is missing".to_owned()];
    };
    let mut problems = Vec::new();
    let Some(oauth) = scheme.get("oauth2SecurityScheme") else {
        return vec!["userDelegation is not an oauth2SecurityScheme".to_owned()];
    };
    let flow = oauth
        .get("flows")
        .and_then(|f| f.get("deviceCode"))
        .cloned()
        .unwrap_or_default();
    for field in ["deviceAuthorizationUrl", "tokenUrl"] {
        match str_at(&flow, &[field]) {
            Some(u) if is_http_url(u) => {}
            _ => problems.push(format!("flows.deviceCode.{field} is missing or not a URL")),
        }
    }
    match flow.get("scopes").and_then(Value::as_object) {
        Some(s) if !s.is_empty() && s.values().all(Value::is_string) => {}
        Some(s) if s.is_empty() => {
            problems.push("flows.deviceCode.scopes is empty (a delegating brand has scopes)".into())
        }
        _ => problems.push("flows.deviceCode.scopes is not an object of descriptions".into()),
    }
    match str_at(oauth, &["oauth2MetadataUrl"]) {
        Some(u) if is_http_url(u) => {}
        _ => problems.push("oauth2MetadataUrl is missing or not a URL".to_owned()),
    }
    if !has_requirement(card, &["paJwt", "userDelegation"]) {
        problems.push(
            "no securityRequirements entry {schemes: {paJwt: {list: []}, userDelegation: {list: []}}}"
                .to_owned(),
        );
    }
    if !has_requirement(card, &["paJwt"]) {
        problems.push("the identity-only requirement must stay with delegation".to_owned());
    }
    problems
}

/// PACT §2 "Also": name, description, version, provider, capabilities all
/// false, text/plain modes, skills.
pub fn check_fields(card: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for field in ["name", "description", "version"] {
        if !card.get(field).is_some_and(Value::is_string) {
            problems.push(format!("{field} is missing or not a string"));
        }
    }
    if str_at(card, &["name"]).is_some_and(|n| n.trim().is_empty()) {
        problems.push("name is blank".to_owned());
    }
    for field in ["organization", "url"] {
        if str_at(card, &["provider", field]).is_none() {
            problems.push(format!("provider.{field} is missing or not a string"));
        }
    }
    for cap in ["streaming", "pushNotifications", "extendedAgentCard"] {
        let v = card.get("capabilities").and_then(|c| c.get(cap));
        if v != Some(&Value::Bool(false)) {
            problems.push(format!("capabilities.{cap} is {v:?}, not false"));
        }
    }
    for modes in ["defaultInputModes", "defaultOutputModes"] {
        let v = card.get(modes);
        if v != Some(&serde_json::json!(["text/plain"])) {
            problems.push(format!("{modes} is {v:?}, not [\"text/plain\"]"));
        }
    }
    match card.get("skills").and_then(Value::as_array) {
        None => problems.push("skills is missing or not an array".to_owned()),
        Some(skills) => {
            for (i, s) in skills.iter().enumerate() {
                for field in ["id", "name", "description"] {
                    if str_at(s, &[field]).is_none() {
                        problems.push(format!("skills[{i}].{field} is missing"));
                    }
                }
                let tags_ok = s
                    .get("tags")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.iter().all(Value::is_string));
                if !tags_ok {
                    problems.push(format!("skills[{i}].tags is not an array of strings"));
                }
            }
        }
    }
    problems
}

/// Every §2 problem of a card (delegation only when the card offers it).
pub fn validate(card: &Value) -> Vec<String> {
    let mut all = check_interface(card);
    all.extend(check_pa_jwt_scheme(card));
    all.extend(check_identity_requirement(card));
    if card
        .get("securitySchemes")
        .and_then(|s| s.get("userDelegation"))
        .is_some()
    {
        all.extend(check_delegation(card));
    }
    all.extend(check_fields(card));
    all
}

/// A human summary: interface, schemes, scopes.
pub fn summary(info: &CardInfo) -> String {
    let card = &info.card;
    let mut out = String::new();
    out.push_str(&format!(
        "{} — {}\n",
        info.name,
        str_at(card, &["description"]).unwrap_or("")
    ));
    out.push_str(&format!(
        "provider:   {} ({})\n",
        str_at(card, &["provider", "organization"]).unwrap_or("?"),
        str_at(card, &["provider", "url"]).unwrap_or("?")
    ));
    out.push_str(&format!("interface:  {} (HTTP+JSON)\n", info.iface));
    let schemes: Vec<&String> = card
        .get("securitySchemes")
        .and_then(Value::as_object)
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    out.push_str(&format!(
        "schemes:    {}\n",
        schemes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    match &info.delegation {
        None => out.push_str("delegation: none (identity-only brand)\n"),
        Some(d) => {
            out.push_str(&format!(
                "delegation: device code flow, metadata {}\n",
                d.metadata_url
            ));
            out.push_str("scopes:\n");
            for (id, description) in &d.scopes {
                out.push_str(&format!("  {id:<20} {description}\n"));
            }
        }
    }
    if let Some(skills) = card.get("skills").and_then(Value::as_array) {
        out.push_str("skills:\n");
        for s in skills {
            out.push_str(&format!(
                "  {:<20} {}\n",
                str_at(s, &["name"]).unwrap_or("?"),
                str_at(s, &["description"]).unwrap_or("")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pact_proto::card::{AgentCard, CardInput, DeviceCodeFlow};

    fn card(delegation: bool) -> Value {
        let flow = delegation.then(|| DeviceCodeFlow {
            device_authorization_url: "https://p.example/a2a/d/oauth/device_authorization".into(),
            token_url: "https://p.example/a2a/d/oauth/token".into(),
            scopes: BTreeMap::from([("orders:read".into(), "Read orders".into())]),
        });
        serde_json::to_value(AgentCard::build(CardInput {
            brand_name: "Demo",
            brand_description: "",
            interface_url: "https://p.example/a2a/d",
            provider_organization: "p",
            provider_url: "https://p.example",
            version: "1",
            skills: vec![],
            delegation: flow,
        }))
        .unwrap()
    }

    #[test]
    fn cards_built_by_the_wire_types_validate() {
        assert!(
            validate(&card(false)).is_empty(),
            "{:?}",
            validate(&card(false))
        );
        assert!(
            validate(&card(true)).is_empty(),
            "{:?}",
            validate(&card(true))
        );
        let info = parse(card(true), "https://p.example/c").unwrap();
        assert_eq!(info.iface, "https://p.example/a2a/d");
        assert_eq!(info.delegation.unwrap().scopes.len(), 1);
    }

    #[test]
    fn broken_cards_are_explained() {
        let mut c = card(true);
        c["securityRequirements"] = serde_json::json!([{"schemes": {"paJwt": {"list": []}, "userDelegation": {"list": []}}}]);
        assert!(
            check_identity_requirement(&c)
                .iter()
                .any(|p| p.contains("paJwt"))
        );
        c["capabilities"]["streaming"] = Value::Bool(true);
        assert!(check_fields(&c).iter().any(|p| p.contains("streaming")));
        c["securitySchemes"]["paJwt"]["httpAuthSecurityScheme"]["bearerFormat"] = "jwt".into();
        assert_eq!(check_pa_jwt_scheme(&c).len(), 1);
    }
}
