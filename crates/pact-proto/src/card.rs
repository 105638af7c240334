//! The Agent Card (PACT §2) in the A2A 1.0 JSON shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: String,
    /// PACT §2: the HTTP+JSON interface comes first.
    pub supported_interfaces: Vec<AgentInterface>,
    pub provider: AgentProvider,
    pub capabilities: AgentCapabilities,
    pub security_schemes: BTreeMap<String, SecurityScheme>,
    pub security_requirements: Vec<SecurityRequirement>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    pub organization: String,
    pub url: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// A2A security schemes are a oneof, serialised as a single-key object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SecurityScheme {
    HttpAuthSecurityScheme(HttpAuthSecurityScheme),
    Oauth2SecurityScheme(OAuth2SecurityScheme),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpAuthSecurityScheme {
    pub scheme: String,
    pub bearer_format: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuth2SecurityScheme {
    /// Where the token goes: generic A2A clients send an OAuth2 scheme's
    /// token as `Authorization: Bearer`, which PACT §5.5 gives to the PA-JWT.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub flows: OAuthFlows,
    pub oauth2_metadata_url: String,
}

/// The `userDelegation` scheme's description (PACT §5.5).
pub const USER_DELEGATION_DESCRIPTION: &str = "The delegation token of a person's grant. Send it as `X-A2A-User-Delegation: Bearer <access_token>`, never in `Authorization`, which keeps the PA-JWT (PACT 1.0 section 5.5).";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlows {
    pub device_code: DeviceCodeFlow,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCodeFlow {
    pub device_authorization_url: String,
    pub token_url: String,
    /// Scope id → description, shown verbatim on consent (PACT §5).
    pub scopes: BTreeMap<String, String>,
}

/// `{schemes: {name: {list: []}}}`: all named schemes together satisfy it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecurityRequirement {
    pub schemes: BTreeMap<String, StringList>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StringList {
    pub list: Vec<String>,
}

/// Names of the two PACT security schemes.
pub const PA_JWT_SCHEME: &str = "paJwt";
pub const USER_DELEGATION_SCHEME: &str = "userDelegation";

impl SecurityRequirement {
    pub fn of(names: &[&str]) -> Self {
        Self {
            schemes: names
                .iter()
                .map(|n| ((*n).to_owned(), StringList::default()))
                .collect(),
        }
    }
}

/// What a card needs to know about a brand to be built.
#[derive(Clone, Debug)]
pub struct CardInput<'a> {
    pub brand_name: &'a str,
    pub brand_description: &'a str,
    /// `{public_url}/a2a/{brand_id}` (PACT §1).
    pub interface_url: &'a str,
    pub provider_organization: &'a str,
    pub provider_url: &'a str,
    pub version: &'a str,
    pub skills: Vec<AgentSkill>,
    /// Present when the brand offers delegation (has at least one scope).
    pub delegation: Option<DeviceCodeFlow>,
}

/// A2A 1.0 marks `description` required: a brand added without one gets a
/// sentence made from its name (SDKs drop an empty one when they re-serialise).
fn description_of(name: &str, description: &str) -> String {
    if description.trim().is_empty() {
        format!(
            "The agent of {name}: ask it about {name}, and about your account once you allow it."
        )
    } else {
        description.to_owned()
    }
}

impl AgentCard {
    /// Builds the card exactly as PACT §2 prescribes: the identity-only
    /// requirement always stays; delegation adds a scheme and a second requirement.
    pub fn build(input: CardInput<'_>) -> Self {
        let mut security_schemes = BTreeMap::new();
        security_schemes.insert(
            PA_JWT_SCHEME.to_owned(),
            SecurityScheme::HttpAuthSecurityScheme(HttpAuthSecurityScheme {
                scheme: "Bearer".to_owned(),
                bearer_format: "JWT".to_owned(),
            }),
        );
        let mut security_requirements = vec![SecurityRequirement::of(&[PA_JWT_SCHEME])];
        if let Some(flow) = input.delegation {
            security_schemes.insert(
                USER_DELEGATION_SCHEME.to_owned(),
                SecurityScheme::Oauth2SecurityScheme(OAuth2SecurityScheme {
                    description: USER_DELEGATION_DESCRIPTION.to_owned(),
                    flows: OAuthFlows { device_code: flow },
                    oauth2_metadata_url: format!(
                        "{}/oauth/.well-known/oauth-authorization-server",
                        input.interface_url
                    ),
                }),
            );
            security_requirements.push(SecurityRequirement::of(&[
                PA_JWT_SCHEME,
                USER_DELEGATION_SCHEME,
            ]));
        }
        Self {
            name: input.brand_name.to_owned(),
            description: description_of(input.brand_name, input.brand_description),
            version: input.version.to_owned(),
            // PACT §2: HTTP+JSON first; A2A 1.0's JSON-RPC binding beside it,
            // for clients whose default it is (A2A §5.2: they choose).
            supported_interfaces: vec![
                AgentInterface {
                    url: input.interface_url.to_owned(),
                    protocol_binding: "HTTP+JSON".to_owned(),
                    protocol_version: "1.0".to_owned(),
                },
                AgentInterface {
                    url: format!("{}/{}", input.interface_url, crate::jsonrpc::PATH),
                    protocol_binding: crate::jsonrpc::BINDING.to_owned(),
                    protocol_version: "1.0".to_owned(),
                },
            ],
            provider: AgentProvider {
                organization: input.provider_organization.to_owned(),
                url: input.provider_url.to_owned(),
            },
            capabilities: AgentCapabilities {
                streaming: false,
                push_notifications: false,
                extended_agent_card: false,
            },
            security_schemes,
            security_requirements,
            default_input_modes: vec!["text/plain".to_owned()],
            default_output_modes: vec!["text/plain".to_owned()],
            skills: input.skills,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(delegation: Option<DeviceCodeFlow>) -> CardInput<'static> {
        CardInput {
            brand_name: "Demo",
            brand_description: "A demo store",
            interface_url: "https://p.example/a2a/demo",
            provider_organization: "pactd",
            provider_url: "https://p.example",
            version: "1.0.0",
            skills: vec![],
            delegation,
        }
    }

    #[test]
    fn a_brand_without_a_description_gets_one_from_its_name() {
        let mut i = input(None);
        i.brand_description = "  ";
        let card = AgentCard::build(i);
        assert!(
            card.description.starts_with("The agent of Demo"),
            "{}",
            card.description
        );
        assert_eq!(AgentCard::build(input(None)).description, "A demo store");
    }

    #[test]
    fn identity_only_card_has_one_requirement_naming_pa_jwt_alone() {
        let v = serde_json::to_value(AgentCard::build(input(None))).unwrap();
        assert_eq!(
            v["securitySchemes"]["paJwt"],
            serde_json::json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}})
        );
        assert_eq!(
            v["securityRequirements"],
            serde_json::json!([{"schemes": {"paJwt": {"list": []}}}])
        );
        assert_eq!(
            v["supportedInterfaces"][0],
            serde_json::json!({"url": "https://p.example/a2a/demo", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
        );
        assert_eq!(
            v["capabilities"],
            serde_json::json!({"streaming": false, "pushNotifications": false, "extendedAgentCard": false})
        );
        assert!(v["securitySchemes"].get("userDelegation").is_none());
    }

    #[test]
    fn delegation_adds_a_second_requirement_and_keeps_the_first() {
        let flow = DeviceCodeFlow {
            device_authorization_url: "https://p.example/a2a/demo/oauth/device_authorization"
                .into(),
            token_url: "https://p.example/a2a/demo/oauth/token".into(),
            scopes: BTreeMap::from([("orders:read".into(), "Read your orders".into())]),
        };
        let v = serde_json::to_value(AgentCard::build(input(Some(flow)))).unwrap();
        assert_eq!(
            v["securityRequirements"][0],
            serde_json::json!({"schemes": {"paJwt": {"list": []}}})
        );
        assert_eq!(
            v["securityRequirements"][1],
            serde_json::json!({"schemes": {"paJwt": {"list": []}, "userDelegation": {"list": []}}})
        );
        let oauth = &v["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"];
        assert_eq!(
            oauth["oauth2MetadataUrl"],
            "https://p.example/a2a/demo/oauth/.well-known/oauth-authorization-server"
        );
        assert_eq!(
            oauth["flows"]["deviceCode"]["scopes"]["orders:read"],
            "Read your orders"
        );
    }
}
