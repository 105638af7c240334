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
    /// Present when the card offers a delegation scheme (PACT §5), whatever its name.
    pub delegation: Option<DelegationInfo>,
}

/// The delegation scheme's device-code flow (PACT §2, §5).
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

/// The `securitySchemes` entries, by name.
fn schemes(card: &Value) -> Vec<(&String, &Value)> {
    card.get("securitySchemes")
        .and_then(Value::as_object)
        .map(|m| m.iter().collect())
        .unwrap_or_default()
}

/// An `httpAuthSecurityScheme` whose scheme is `Bearer`, in any case
/// (auth-schemes are case-insensitive, RFC 9110 §11.1).
fn is_http_bearer(scheme: &Value) -> bool {
    scheme
        .get("httpAuthSecurityScheme")
        .and_then(|h| h.get("scheme"))
        .and_then(Value::as_str)
        .is_some_and(|s| s.eq_ignore_ascii_case("bearer"))
}

/// An HTTP Bearer scheme with `bearerFormat: "JWT"` (PACT §2).
fn is_bearer_jwt(scheme: &Value) -> bool {
    is_http_bearer(scheme)
        && str_at(scheme, &["httpAuthSecurityScheme", "bearerFormat"]) == Some("JWT")
}

/// The name of the PA-JWT scheme, found by its shape, not its name (PACT §2
/// calls it `paJwt` only in its example): an HTTP Bearer JWT scheme,
/// preferably the one a `securityRequirements` entry names alone.
pub fn pa_jwt_scheme(card: &Value) -> Option<String> {
    let candidates: Vec<&String> = schemes(card)
        .into_iter()
        .filter(|(_, s)| is_bearer_jwt(s))
        .map(|(n, _)| n)
        .collect();
    candidates
        .iter()
        .find(|n| has_requirement(card, &[n.as_str()]))
        .or(candidates.first())
        .map(|n| (*n).clone())
}

/// The name of the delegation scheme, found by its shape (PACT §2): an
/// `oauth2SecurityScheme` with a `deviceCode` flow.
pub fn delegation_scheme(card: &Value) -> Option<String> {
    schemes(card)
        .into_iter()
        .find(|(_, s)| {
            s.get("oauth2SecurityScheme")
                .and_then(|o| o.get("flows"))
                .and_then(|f| f.get("deviceCode"))
                .is_some()
        })
        .map(|(n, _)| n.clone())
}

/// Reads the delegation scheme, if the card has one and it is well formed.
pub fn delegation_info(card: &Value) -> Option<DelegationInfo> {
    let name = delegation_scheme(card)?;
    let scheme = card
        .get("securitySchemes")?
        .get(&name)?
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

/// Index of the `{protocolBinding: "HTTP+JSON", protocolVersion: "1.0"}`
/// entry of `supportedInterfaces`.
fn interface_position(card: &Value) -> Option<usize> {
    card.get("supportedInterfaces")?
        .as_array()?
        .iter()
        .position(|i| {
            str_at(i, &["protocolBinding"]) == Some("HTTP+JSON")
                && str_at(i, &["protocolVersion"]) == Some("1.0")
        })
}

/// PACT §2: an entry `{url: iface, protocolBinding: "HTTP+JSON",
/// protocolVersion: "1.0"}` in `supportedInterfaces`.
pub fn check_interface(card: &Value) -> Vec<String> {
    let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) else {
        return vec!["supportedInterfaces is missing or not an array".to_owned()];
    };
    let Some(p) = interface_position(card) else {
        return vec![
            "no entry with protocolBinding \"HTTP+JSON\" and protocolVersion \"1.0\"".to_owned(),
        ];
    };
    match list.get(p).and_then(|i| str_at(i, &["url"])) {
        Some(u) if is_http_url(u) => Vec::new(),
        Some(u) => vec![format!("the interface url {u:?} is not an http(s) URL")],
        None => vec!["the HTTP+JSON entry has no url".to_owned()],
    }
}

/// PACT §2 recommends the HTTP+JSON 1.0 entry first.
pub fn check_interface_first(card: &Value) -> Vec<String> {
    match interface_position(card) {
        Some(p) if p != 0 => vec![format!(
            "the HTTP+JSON 1.0 entry is at index {p}; PACT §2 puts it first"
        )],
        _ => Vec::new(),
    }
}

/// PACT §2: a scheme, under any name, `{httpAuthSecurityScheme: {scheme:
/// "Bearer", bearerFormat: "JWT"}}`.
pub fn check_pa_jwt_scheme(card: &Value) -> Vec<String> {
    if card
        .get("securitySchemes")
        .and_then(Value::as_object)
        .is_none()
    {
        return vec!["securitySchemes is missing or not an object".to_owned()];
    }
    let Some(name) = pa_jwt_scheme(card) else {
        let near: Vec<String> = schemes(card)
            .into_iter()
            .filter(|(_, s)| is_http_bearer(s))
            .map(|(n, s)| {
                format!(
                    "{n} is an HTTP Bearer scheme with bearerFormat {:?}, not \"JWT\"",
                    s.get("httpAuthSecurityScheme")
                        .and_then(|h| h.get("bearerFormat"))
                )
            })
            .collect();
        if near.is_empty() {
            return vec![
                "no security scheme is {httpAuthSecurityScheme: {scheme: \"Bearer\", bearerFormat: \"JWT\"}}"
                    .to_owned(),
            ];
        }
        return near;
    };
    let scheme = card
        .get("securitySchemes")
        .and_then(|s| s.get(&name))
        .and_then(Value::as_object);
    if scheme.is_some_and(|s| s.len() != 1) {
        return vec![format!(
            "{name} must be exactly an httpAuthSecurityScheme (A2A schemes are one of a kind)"
        )];
    }
    Vec::new()
}

/// PACT §2: one `securityRequirements` entry names the PA-JWT scheme alone.
pub fn check_identity_requirement(card: &Value) -> Vec<String> {
    let Some(name) = pa_jwt_scheme(card) else {
        return vec![
            "no PA-JWT scheme (§2.pa-jwt-scheme), so no requirement can name it".to_owned(),
        ];
    };
    if has_requirement(card, &[name.as_str()]) {
        Vec::new()
    } else {
        vec![format!(
            "no securityRequirements entry {{schemes: {{{name}: {{list: []}}}}}} names the PA-JWT scheme alone"
        )]
    }
}

/// PACT §2 with delegation: an OAuth 2.0 scheme (any name) with a
/// device-code flow and metadata URL, and a second requirement naming it
/// with the PA-JWT scheme; the identity-only entry stays.
pub fn check_delegation(card: &Value) -> Vec<String> {
    let Some(name) = delegation_scheme(card) else {
        return vec!["no oauth2SecurityScheme with a deviceCode flow".to_owned()];
    };
    let oauth = card
        .get("securitySchemes")
        .and_then(|s| s.get(&name))
        .and_then(|s| s.get("oauth2SecurityScheme"))
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    let flow = oauth
        .get("flows")
        .and_then(|f| f.get("deviceCode"))
        .cloned()
        .unwrap_or_default();
    for field in ["deviceAuthorizationUrl", "tokenUrl"] {
        match str_at(&flow, &[field]) {
            Some(u) if is_http_url(u) => {}
            _ => problems.push(format!(
                "{name}: flows.deviceCode.{field} is missing or not a URL"
            )),
        }
    }
    match flow.get("scopes").and_then(Value::as_object) {
        Some(s) if !s.is_empty() && s.values().all(Value::is_string) => {}
        Some(s) if s.is_empty() => problems.push(format!(
            "{name}: flows.deviceCode.scopes is empty (a delegating brand has scopes)"
        )),
        _ => problems.push(format!(
            "{name}: flows.deviceCode.scopes is not an object of descriptions"
        )),
    }
    match str_at(&oauth, &["oauth2MetadataUrl"]) {
        Some(u) if is_http_url(u) => {}
        _ => problems.push(format!("{name}: oauth2MetadataUrl is missing or not a URL")),
    }
    match pa_jwt_scheme(card) {
        None => problems.push("no PA-JWT scheme to pair the delegation scheme with".to_owned()),
        Some(pa) => {
            if !has_requirement(card, &[pa.as_str(), name.as_str()]) {
                problems.push(format!(
                    "no securityRequirements entry {{schemes: {{{pa}: {{list: []}}, {name}: {{list: []}}}}}}"
                ));
            }
            if !has_requirement(card, &[pa.as_str()]) {
                problems.push("the identity-only requirement must stay with delegation".to_owned());
            }
        }
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
    all.extend(check_interface_first(card));
    all.extend(check_pa_jwt_scheme(card));
    all.extend(check_identity_requirement(card));
    if delegation_scheme(card).is_some() {
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
        assert!(check_pa_jwt_scheme(&c)[0].contains("not \"JWT\""));
    }

    /// PACT §2 fixes the shape of the schemes, not their names: `paJwt`
    /// and `userDelegation` are only the names of its example.
    #[test]
    fn schemes_are_found_by_shape_whatever_their_names() {
        let mut c = card(true);
        let rename = |c: &mut Value, from: &str, to: &str| {
            let schemes = c["securitySchemes"].as_object_mut().unwrap();
            let s = schemes.remove(from).unwrap();
            schemes.insert(to.into(), s);
            for r in c["securityRequirements"].as_array_mut().unwrap() {
                let names = r["schemes"].as_object_mut().unwrap();
                if let Some(v) = names.remove(from) {
                    names.insert(to.into(), v);
                }
            }
        };
        rename(&mut c, "paJwt", "platformJwt");
        rename(&mut c, "userDelegation", "consent");
        c["securitySchemes"]["platformJwt"]["httpAuthSecurityScheme"]["scheme"] = "bearer".into();
        assert!(validate(&c).is_empty(), "{:?}", validate(&c));
        assert_eq!(pa_jwt_scheme(&c).as_deref(), Some("platformJwt"));
        assert_eq!(delegation_scheme(&c).as_deref(), Some("consent"));
        assert!(
            parse(c.clone(), "https://p.example/c")
                .unwrap()
                .delegation
                .is_some()
        );

        // Another Bearer JWT scheme that no requirement names alone is not it.
        c["securitySchemes"]["other"] = serde_json::json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}});
        assert_eq!(pa_jwt_scheme(&c).as_deref(), Some("platformJwt"));

        // Without the requirement naming it alone, the requirement check fails.
        c["securityRequirements"]
            .as_array_mut()
            .unwrap()
            .retain(|r| r["schemes"].as_object().unwrap().len() == 2);
        assert!(!check_identity_requirement(&c).is_empty());
        assert!(
            check_pa_jwt_scheme(&c).is_empty(),
            "the scheme itself is fine"
        );

        // The interface first is a recommendation of its own.
        let mut c = card(false);
        let first = c["supportedInterfaces"][0].clone();
        c["supportedInterfaces"] = serde_json::json!([{"url": "https://p.example/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"}, first]);
        assert!(check_interface(&c).is_empty());
        assert_eq!(check_interface_first(&c).len(), 1);
    }
}
