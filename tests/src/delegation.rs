//! Driving the Delegated profile from the PA's side (PACT §5), plus the
//! approval a person would give on the consent page (through the domain
//! function the pages call).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::{TestApp, TestPa};

/// A device authorization as the PA received it.
#[derive(Clone, Debug)]
pub struct DeviceAuth {
    pub device_code: String,
    pub user_code: String,
    pub body: Value,
}

impl TestApp {
    pub fn oauth(&self, brand: &str, endpoint: &str) -> String {
        format!("{}/oauth/{endpoint}", self.iface(brand))
    }

    /// POSTs a form to an OAuth endpoint with the PA-JWT.
    pub async fn oauth_post(
        &self,
        brand: &str,
        endpoint: &str,
        token: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        self.http
            .post(self.oauth(brand, endpoint))
            .bearer_auth(token)
            .form(form)
            .send()
            .await
            .unwrap()
    }

    /// A delegation token signed with the node's own current key, from the
    /// claims of `like` with a fresh `iat`/`exp`/`jti`, then edited: what only
    /// pactd can mint (or whoever holds its key).
    pub fn mint_delegation_token(
        &self,
        like: &str,
        edit: impl FnOnce(&mut pact_proto::oauth::DelegationClaims),
    ) -> String {
        use base64::Engine as _;
        let payload = like.split('.').nth(1).expect("a compact JWS");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap();
        let mut claims: pact_proto::oauth::DelegationClaims =
            serde_json::from_slice(&bytes).unwrap();
        let now = OffsetDateTime::now_utc();
        claims.iat = now.unix_timestamp();
        claims.exp = claims.iat + 300;
        claims.jti = uuid::Uuid::new_v4().to_string();
        edit(&mut claims);
        let key = self.state.keys.current().signing_key(now).unwrap();
        pact_jose::sign_delegation_token(&key, &claims).unwrap()
    }

    /// Starts a device authorization for `scope`; panics unless it succeeds.
    pub async fn device_authorize(
        &self,
        pa: &TestPa,
        sub: &str,
        scope: &str,
        details: Option<&Value>,
    ) -> DeviceAuth {
        let details_str = details.map(Value::to_string);
        let mut form = vec![("client_id", pa.issuer.as_str()), ("scope", scope)];
        if let Some(d) = &details_str {
            form.push(("authorization_details", d));
        }
        let res = self
            .oauth_post(
                "demo",
                "device_authorization",
                &pa.token(sub, self.audience()),
                &form,
            )
            .await;
        assert_eq!(res.status(), 200, "device authorization failed");
        assert_eq!(res.headers()["cache-control"], "no-store");
        let body: Value = res.json().await.unwrap();
        DeviceAuth {
            device_code: body["device_code"].as_str().unwrap().to_owned(),
            user_code: body["user_code"].as_str().unwrap().to_owned(),
            body,
        }
    }

    /// One poll of the token endpoint: (status, body).
    pub async fn poll(&self, pa: &TestPa, sub: &str, device_code: &str) -> (u16, Value) {
        let res = self
            .oauth_post(
                "demo",
                "token",
                &pa.token(sub, self.audience()),
                &[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                    ("device_code", device_code),
                    ("client_id", &pa.issuer),
                ],
            )
            .await;
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn refresh(&self, pa: &TestPa, sub: &str, refresh_token: &str) -> (u16, Value) {
        let res = self
            .oauth_post(
                "demo",
                "token",
                &pa.token(sub, self.audience()),
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh_token),
                    ("client_id", &pa.issuer),
                ],
            )
            .await;
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// The person approves `scopes` (a subset of the request) as brand user `user`.
    pub async fn approve(
        &self,
        user_code: &str,
        user: &str,
        scopes: &[&str],
    ) -> pact_db::grants::Grant {
        let auth = pact_server::consent::find_by_user_code(&self.state, user_code)
            .await
            .unwrap()
            .expect("live user code");
        pact_server::consent::approve(
            &self.state,
            pact_server::consent::Approval {
                authorization_id: auth.id,
                user_sub: &user.into(),
                scopes: scopes
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect::<BTreeSet<_>>(),
                authorization_details: None,
            },
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap()
    }

    /// The person allows the operations of a step-up beyond a limit, once,
    /// as brand user `user`: the grants they were added to.
    pub async fn approve_once(&self, user_code: &str, user: &str) -> Vec<uuid::Uuid> {
        let auth = pact_server::consent::find_by_user_code(&self.state, user_code)
            .await
            .unwrap()
            .expect("live user code");
        pact_server::consent::approve_operations(
            &self.state,
            auth.id,
            &user.into(),
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(Into::into)
        .collect()
    }

    pub async fn deny(&self, user_code: &str) {
        let auth = pact_server::consent::find_by_user_code(&self.state, user_code)
            .await
            .unwrap()
            .expect("live user code");
        pact_server::consent::deny(
            &self.state,
            auth.id,
            Some(&"someone".into()),
            OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
    }

    /// Device authorization → approval → token, in one go: the token response.
    pub async fn connect(&self, pa: &TestPa, sub: &str, user: &str, scopes: &[&str]) -> Value {
        let auth = self
            .device_authorize(pa, sub, &scopes.join(" "), None)
            .await;
        self.approve(&auth.user_code, user, scopes).await;
        let (status, body) = self.poll(pa, sub, &auth.device_code).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// `message:send` with a delegation token.
    pub async fn send_delegated(
        &self,
        brand: &str,
        pa_jwt: &str,
        delegation: &str,
        message_id: &str,
        text: &str,
        context: Option<&str>,
    ) -> reqwest::Response {
        let mut message =
            json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
        if let Some(c) = context {
            message["contextId"] = json!(c);
        }
        self.http
            .post(format!("{}/message:send", self.iface(brand)))
            .bearer_auth(pa_jwt)
            .header("X-A2A-User-Delegation", format!("Bearer {delegation}"))
            .json(&json!({ "message": message }))
            .send()
            .await
            .unwrap()
    }

    /// The published JWKS of the brand's authorization server.
    /// The receipt in an A2A message's metadata, verified with the provider's
    /// published keys.
    pub async fn verified_receipt(&self, message: &Value) -> pact_proto::oauth::ReceiptClaims {
        let receipt: pact_proto::oauth::Receipt =
            serde_json::from_value(message["metadata"]["pact.receipt"].clone()).unwrap();
        let keys =
            pact_jose::ProviderKeySet::from_public_jwks(&self.provider_jwks().await).unwrap();
        pact_jose::verify_receipt(&receipt, &keys).unwrap()
    }

    pub async fn provider_jwks(&self) -> Vec<Value> {
        let v: Value = self
            .http
            .get(self.oauth("demo", "jwks.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["keys"].as_array().unwrap().clone()
    }
}

/// Helpers that talk to a node by its own socket address rather than by
/// `public_url`, so several nodes can share one public URL (docs/operations.md),
/// and that work at any brand, not only `demo`.
impl TestApp {
    /// `{base_url}/a2a/{brand}/{path}`: this node's real address for an interface path.
    pub fn node_a2a_url(&self, brand: &str, path: &str) -> String {
        format!("{}/a2a/{brand}/{path}", self.base_url)
    }

    /// Device authorization (with optional `authorization_details`) → approval
    /// of every requested scope as brand user `user` → token, at `brand`,
    /// through this node's own address: the token response.
    pub async fn node_connect(
        &self,
        brand: &str,
        pa: &TestPa,
        sub: &str,
        user: &str,
        scopes: &[&str],
        details: Option<&Value>,
    ) -> Value {
        let scope = scopes.join(" ");
        let details_str = details.map(Value::to_string);
        let mut form = vec![("client_id", pa.issuer.as_str()), ("scope", scope.as_str())];
        if let Some(d) = &details_str {
            form.push(("authorization_details", d));
        }
        let res = self
            .http
            .post(self.node_a2a_url(brand, "oauth/device_authorization"))
            .bearer_auth(pa.token(sub, self.audience()))
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "device authorization failed");
        let auth: Value = res.json().await.unwrap();
        self.approve(auth["user_code"].as_str().unwrap(), user, scopes)
            .await;
        let res = self
            .http
            .post(self.node_a2a_url(brand, "oauth/token"))
            .bearer_auth(pa.token(sub, self.audience()))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", auth["device_code"].as_str().unwrap()),
                ("client_id", &pa.issuer),
            ])
            .send()
            .await
            .unwrap();
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        body
    }

    /// `message:send` through this node's own address, with the delegation
    /// header exactly as given (`None` sends no header at all).
    pub async fn node_send(
        &self,
        brand: &str,
        pa_jwt: &str,
        delegation_header: Option<&str>,
        message_id: &str,
        text: &str,
        context: Option<&str>,
    ) -> reqwest::Response {
        let mut message =
            json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]});
        if let Some(c) = context {
            message["contextId"] = json!(c);
        }
        let mut req = self
            .http
            .post(self.node_a2a_url(brand, "message:send"))
            .bearer_auth(pa_jwt)
            .json(&json!({ "message": message }));
        if let Some(h) = delegation_header {
            req = req.header("X-A2A-User-Delegation", h);
        }
        req.send().await.unwrap()
    }
}
