//! The PA as an OAuth 2.0 client (PACT §5): RFC 8414 metadata, the RFC 8628
//! device flow as a careful client, refresh, RFC 7009 revocation, and
//! verification of what the Provider signs (delegation tokens §5.4,
//! receipts §5.6).
//!
//! Every OAuth call carries the PA-JWT as `Authorization: Bearer` and
//! `client_id` = the PA's issuer (PACT §5).

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use pact_jose::ProviderKeySet;
use pact_proto::oauth::{
    DeviceAuthorizationResponse, GRANT_TYPE_DEVICE_CODE, GRANT_TYPE_REFRESH_TOKEN, ReceiptClaims,
    TokenResponse,
};
use serde_json::Value;

use crate::http::{Http, Request, Response};
use crate::jwt::{Signer, b64_decode};

/// RFC 8628 §3.5: `slow_down` adds 5 seconds to the interval, for good
/// (the wire constant, as the client counts seconds).
pub const SLOW_DOWN_STEP_SECS: u64 = pact_proto::oauth::SLOW_DOWN_STEP_SECS.unsigned_abs() as u64;

/// The brand's authorization server, from its RFC 8414 metadata.
#[derive(Clone, Debug)]
pub struct AuthServer {
    pub metadata: Value,
    pub issuer: String,
    pub device_authorization_endpoint: String,
    pub token_endpoint: String,
    pub revocation_endpoint: Option<String>,
    pub jwks_uri: String,
    /// pactd's receipt key archive (every key that ever signed a receipt),
    /// when the brand offers one.
    pub receipt_keys_uri: Option<String>,
    /// pactd's receipt log (its newest signed tree head), when offered.
    pub receipt_tree_head_uri: Option<String>,
    /// RFC 9396 types the brand declares (PACT §5.7); empty when none.
    pub details_types: Vec<String>,
}

/// Reads RFC 8414 metadata.
pub fn parse_metadata(v: &Value) -> Result<AuthServer> {
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("metadata has no {k}"))
    };
    Ok(AuthServer {
        metadata: v.clone(),
        issuer: s("issuer")?,
        device_authorization_endpoint: s("device_authorization_endpoint")?,
        token_endpoint: s("token_endpoint")?,
        revocation_endpoint: s("revocation_endpoint").ok(),
        jwks_uri: s("jwks_uri")?,
        receipt_keys_uri: s("receipt_keys_uri").ok(),
        receipt_tree_head_uri: s("receipt_tree_head_uri").ok(),
        details_types: strings(v.get("authorization_details_types_supported")),
    })
}

/// GETs a public JSON document (no credentials): 200 and JSON, or an error
/// naming the URL.
async fn get_json(http: &Http, url: &str) -> Result<(Response, Value)> {
    let res = http.send(Request::get(url)).await?;
    if res.status != 200 {
        bail!("GET {url}: HTTP {}", res.status);
    }
    let v = res.json().ok_or_else(|| anyhow!("GET {url}: not JSON"))?;
    Ok((res, v))
}

/// GETs RFC 8414 metadata (public, no credentials).
pub async fn discover(http: &Http, metadata_url: &str) -> Result<(Response, AuthServer)> {
    let (res, v) = get_json(http, metadata_url).await?;
    let server = parse_metadata(&v)?;
    Ok((res, server))
}

/// The ES256 keys of a JWKS document (PACT §5.4: delegation tokens and
/// receipts are ES256). Keys of other types are left out.
pub fn keyset_from_jwks(doc: &Value) -> Result<ProviderKeySet> {
    let keys: Vec<Value> = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("the JWKS has no keys array"))?
        .iter()
        .filter(|k| {
            k.get("kty").and_then(Value::as_str) == Some("EC")
                && k.get("crv").and_then(Value::as_str) == Some("P-256")
        })
        .cloned()
        .collect();
    ProviderKeySet::from_public_jwks(&keys).map_err(|e| anyhow!("the JWKS is not usable: {e}"))
}

/// GETs the brand's JWKS (the metadata `jwks_uri`).
pub async fn provider_keys(http: &Http, jwks_uri: &str) -> Result<(Response, ProviderKeySet)> {
    let (res, doc) = get_json(http, jwks_uri).await?;
    let keys = keyset_from_jwks(&doc)?;
    Ok((res, keys))
}

/// Verifies a compact JWS against the brand's keys, accepting whatever
/// `typ` its header names (checked separately). Returns header and payload.
pub fn verify_jws(keys: &ProviderKeySet, jws: &str) -> Result<(Value, Vec<u8>), String> {
    let header: Value = jws
        .split('.')
        .next()
        .and_then(b64_decode)
        .and_then(|h| serde_json::from_slice(&h).ok())
        .ok_or_else(|| "the JWS header is not base64url JSON".to_owned())?;
    let typ = header
        .get("typ")
        .and_then(Value::as_str)
        .ok_or_else(|| "the JWS header has no typ".to_owned())?;
    let payload = keys
        .verify_compact(jws, typ)
        .map_err(|e| format!("the JWS does not verify: {e}"))?;
    Ok((header, payload))
}

/// PACT §5.6: the receipt's JWS verifies against the brand's keys and its
/// payload equals `claims`. Returns the signed claims.
pub fn verify_receipt(keys: &ProviderKeySet, receipt: &Value) -> Result<ReceiptClaims, String> {
    let jws = receipt
        .get("jws")
        .and_then(Value::as_str)
        .ok_or_else(|| "the receipt has no jws".to_owned())?;
    let claims = receipt
        .get("claims")
        .ok_or_else(|| "the receipt has no claims".to_owned())?;
    let (_, payload) = verify_jws(keys, jws)?;
    let signed: Value =
        serde_json::from_slice(&payload).map_err(|_| "the JWS payload is not JSON".to_owned())?;
    if &signed != claims {
        return Err("the claims differ from the signed payload".to_owned());
    }
    serde_json::from_value(signed).map_err(|e| format!("the claims are not receipt claims: {e}"))
}

/// One OAuth POST with the PA-JWT (PACT §5).
async fn oauth_post(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    form: &[(&str, &str)],
) -> Result<Response> {
    let jwt = signer.token(sub)?;
    http.send(Request::post(endpoint).bearer(jwt).form(form))
        .await
}

/// [`oauth_post`] of `form` followed by `client_id` = the PA's issuer.
async fn client_post(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    form: &[(&str, &str)],
) -> Result<Response> {
    let mut form = form.to_vec();
    form.push(("client_id", &signer.issuer));
    oauth_post(http, signer, sub, endpoint, &form).await
}

/// RFC 8628 §3.1 (PACT §5.1): `client_id` and space-separated `scope`.
pub async fn device_authorize(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    scopes: &[String],
    authorization_details: Option<&str>,
) -> Result<Response> {
    let scope = scopes.join(" ");
    let mut form = vec![("client_id", signer.issuer.as_str()), ("scope", &scope)];
    if let Some(d) = authorization_details {
        form.push(("authorization_details", d));
    }
    oauth_post(http, signer, sub, endpoint, &form).await
}

/// Reads a device authorization response (RFC 8628 §3.2).
pub fn parse_device_response(res: &Response) -> Result<DeviceAuthorizationResponse> {
    if res.status != 200 {
        bail!(
            "device authorization failed: HTTP {} {}",
            res.status,
            oauth_error_text(res)
        );
    }
    serde_json::from_slice(&res.body)
        .map_err(|e| anyhow!("the device authorization response is not RFC 8628 §3.2: {e}"))
}

/// One token request for a device code (RFC 8628 §3.4).
pub async fn poll_once(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    device_code: &str,
) -> Result<Response> {
    let form = [
        ("grant_type", GRANT_TYPE_DEVICE_CODE),
        ("device_code", device_code),
    ];
    client_post(http, signer, sub, endpoint, &form).await
}

/// Refresh (RFC 6749 §6, PACT §5.3).
pub async fn refresh(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    refresh_token: &str,
) -> Result<Response> {
    let form = [
        ("grant_type", GRANT_TYPE_REFRESH_TOKEN),
        ("refresh_token", refresh_token),
    ];
    client_post(http, signer, sub, endpoint, &form).await
}

/// RFC 7009 revocation with the PA-JWT.
pub async fn revoke(
    http: &Http,
    signer: &Signer,
    sub: &str,
    endpoint: &str,
    token: &str,
) -> Result<Response> {
    client_post(http, signer, sub, endpoint, &[("token", token)]).await
}

/// The RFC 6749 §5.2 `error` of a response, if it has one.
pub fn oauth_error_code(res: &Response) -> Option<String> {
    res.json()?.get("error")?.as_str().map(str::to_owned)
}

/// `error: description` for messages.
pub fn oauth_error_text(res: &Response) -> String {
    match res.json() {
        Some(v) => format!(
            "{}{}",
            v.get("error").and_then(Value::as_str).unwrap_or("?"),
            v.get("error_description")
                .and_then(Value::as_str)
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        None => crate::http::excerpt(&res.body, 200),
    }
}

/// Reads a successful token response (PACT §5.3).
pub fn parse_token_response(res: &Response) -> Result<TokenResponse> {
    if res.status != 200 {
        bail!("HTTP {}: {}", res.status, oauth_error_text(res));
    }
    let t: TokenResponse = serde_json::from_slice(&res.body)
        .map_err(|e| anyhow!("the token response is not PACT §5.3: {e}"))?;
    if !t.token_type.eq_ignore_ascii_case("bearer") {
        bail!("token_type is {:?}, not Bearer", t.token_type);
    }
    Ok(t)
}

/// What happened while polling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PollEvent {
    /// `authorization_pending`: the user has not decided yet.
    Pending,
    /// `slow_down`: the interval grew to this many seconds (RFC 8628 §3.5).
    SlowDown { interval: u64 },
}

/// How polling ended.
#[derive(Debug)]
pub enum PollOutcome {
    Granted {
        tokens: TokenResponse,
        response: Response,
    },
    /// `access_denied`: stop, the user said no.
    Denied(Response),
    /// `expired_token`, or our own clock passed `expires_in`.
    Expired(Option<Response>),
    /// Any other answer: a reason and the response.
    Failed(String, Option<Response>),
}

/// Polls as RFC 8628 §3.5 asks of a careful client: waits `interval`
/// before each request, adds 5 s for good on every `slow_down`, stops on
/// `access_denied` and `expired_token`, and gives up when `expires_in` has
/// passed.
pub async fn poll_until_decided(
    http: &Http,
    signer: &Signer,
    sub: &str,
    token_endpoint: &str,
    device: &DeviceAuthorizationResponse,
    on_event: &mut (dyn FnMut(PollEvent) + Send),
) -> Result<PollOutcome> {
    let mut interval = device.interval.max(1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(device.expires_in.max(1));
    loop {
        // A little over the interval: the Provider measures between its own
        // timestamps, which our request may reach early.
        let wait = Duration::from_secs(interval) + Duration::from_millis(150);
        if tokio::time::Instant::now() + wait > deadline + Duration::from_secs(1) {
            return Ok(PollOutcome::Expired(None));
        }
        tokio::time::sleep(wait).await;
        let res = poll_once(http, signer, sub, token_endpoint, &device.device_code).await?;
        if res.status == 200 {
            return Ok(match parse_token_response(&res) {
                Ok(tokens) => PollOutcome::Granted {
                    tokens,
                    response: res,
                },
                Err(e) => PollOutcome::Failed(e.to_string(), Some(res)),
            });
        }
        match oauth_error_code(&res).as_deref() {
            Some("authorization_pending") => on_event(PollEvent::Pending),
            Some("slow_down") => {
                interval += SLOW_DOWN_STEP_SECS;
                on_event(PollEvent::SlowDown { interval });
            }
            Some("access_denied") => return Ok(PollOutcome::Denied(res)),
            Some("expired_token") => return Ok(PollOutcome::Expired(Some(res))),
            _ => {
                let why = format!("HTTP {}: {}", res.status, oauth_error_text(&res));
                return Ok(PollOutcome::Failed(why, Some(res)));
            }
        }
    }
}

/// The strings of a JSON array (empty when absent or not an array).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pact_jose::{ProviderKey, sign_receipt};
    use pact_proto::oauth::ReceiptAction;

    fn claims() -> ReceiptClaims {
        ReceiptClaims {
            grant_id: "g".into(),
            user: "u".into(),
            pa: "https://pa.example".into(),
            brand: "https://p.example/a2a/d".into(),
            scopes_used: vec!["orders:read".into()],
            actions: vec![ReceiptAction {
                tool: "list_orders".into(),
                args_hash: None,
                ..Default::default()
            }],
            refused: vec![],
            ts: "2026-01-01T00:00:00Z".into(),
            prev: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn receipts_verify_and_edits_are_caught() {
        let key = ProviderKey::generate().unwrap();
        let keys = keyset_from_jwks(&serde_json::json!({"keys": [key.public_jwk()]})).unwrap();
        let receipt = serde_json::to_value(sign_receipt(&key, claims()).unwrap()).unwrap();
        assert_eq!(verify_receipt(&keys, &receipt).unwrap(), claims());
        let mut edited = receipt.clone();
        edited["claims"]["user"] = "mallory".into();
        assert!(
            verify_receipt(&keys, &edited)
                .unwrap_err()
                .contains("differ")
        );
        let other = ProviderKey::generate().unwrap();
        let other_keys =
            keyset_from_jwks(&serde_json::json!({"keys": [other.public_jwk()]})).unwrap();
        assert!(verify_receipt(&other_keys, &receipt).is_err());
    }

    #[test]
    fn metadata_needs_the_endpoints() {
        let v = serde_json::json!({"issuer": "i", "device_authorization_endpoint": "d",
            "token_endpoint": "t", "jwks_uri": "j"});
        let s = parse_metadata(&v).unwrap();
        assert!(s.revocation_endpoint.is_none());
        assert!(s.details_types.is_empty());
        assert!(parse_metadata(&serde_json::json!({"issuer": "i"})).is_err());
    }
}
