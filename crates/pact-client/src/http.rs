//! A small HTTP layer: buffered responses with a size cap, `429` handled as
//! PACT §6 says (wait `Retry-After`, then retry), and evidence of a response
//! that never carries a credential.

use std::fmt;
use std::time::Duration;

use anyhow::{Context as _, Result};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Serialize;
use serde_json::Value;

/// Largest response body we read.
const MAX_BODY: usize = 1024 * 1024;
/// How often a `429` is retried before the response is returned as is.
const MAX_429_RETRIES: usize = 3;
/// Longest `Retry-After` we honour by waiting.
const MAX_RETRY_AFTER_SECS: u64 = 10;
/// Headers worth showing as evidence.
const EVIDENCE_HEADERS: [&str; 7] = [
    "content-type",
    "www-authenticate",
    "cache-control",
    "pragma",
    "retry-after",
    "location",
    "access-control-allow-origin",
];
/// JSON members whose values are secrets (RFC 6749, RFC 8628): never shown.
const SECRET_MEMBERS: [&str; 4] = ["access_token", "refresh_token", "device_code", "id_token"];
/// Form fields whose values are secrets (RFC 6749, RFC 7009, RFC 8628): never shown.
const SECRET_FIELDS: [&str; 7] = [
    "refresh_token",
    "device_code",
    "token",
    "password",
    "code",
    "assertion",
    "client_secret",
];
/// Request headers that carry credentials: shown only as their scheme and size.
const CREDENTIAL_HEADERS: [&str; 2] = ["authorization", pact_proto::a2a::DELEGATION_HEADER];
/// Longest request body excerpt.
const MAX_SENT_BODY: usize = 300;

/// What a request carries.
#[derive(Clone)]
pub enum Body {
    None,
    Json(Value),
    Form(Vec<(String, String)>),
    /// Exact bytes with an exact (or no) `Content-Type`.
    Raw {
        content_type: Option<String>,
        bytes: Vec<u8>,
    },
}

/// One request. `Debug` never shows the bearer credentials.
#[derive(Clone)]
pub struct Request {
    pub method: Method,
    pub url: String,
    bearer: Option<String>,
    headers: Vec<(String, String)>,
    body: Body,
    follow_redirects: bool,
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.url)
    }
}

impl Request {
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            bearer: None,
            headers: Vec::new(),
            body: Body::None,
            follow_redirects: false,
        }
    }
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::GET, url)
    }
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::POST, url)
    }
    /// `Authorization: Bearer <token>`.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn json(mut self, value: Value) -> Self {
        self.body = Body::Json(value);
        self
    }
    pub fn form(mut self, pairs: &[(&str, &str)]) -> Self {
        self.body = Body::Form(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        self
    }
    pub fn raw(mut self, content_type: Option<&str>, bytes: impl Into<Vec<u8>>) -> Self {
        self.body = Body::Raw {
            content_type: content_type.map(str::to_owned),
            bytes: bytes.into(),
        };
        self
    }
    /// Follow redirects (only for the public Agent Card, PACT §1).
    pub fn follow_redirects(mut self) -> Self {
        self.follow_redirects = true;
        self
    }
}

/// A fully read response.
#[derive(Clone)]
pub struct Response {
    pub method: String,
    pub url: String,
    /// What was sent, as evidence shows it: headers (credentials only as
    /// their scheme and size) and a body excerpt with secrets redacted.
    pub sent: Vec<String>,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// `Retry-After` of each `429` answered (and waited out) before this one.
    pub rate_limited: Vec<Option<String>>,
}

impl fmt::Debug for Response {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> {}", self.method, self.url, self.status)
    }
}

/// A response as shown in a report: request line, status, the headers that
/// matter and a body excerpt with every secret member redacted.
#[derive(Clone, Debug, Serialize)]
pub struct Evidence {
    pub request: String,
    /// The request's headers and body excerpt, secrets redacted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<String>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {}", self.request, self.status)?;
        for (k, v) in &self.headers {
            write!(f, "\n    {k}: {v}")?;
        }
        if self.body.is_empty() {
            write!(f, "\n    (empty body)")
        } else {
            write!(f, "\n    body: {}", self.body)
        }
    }
}

impl Response {
    /// The first value of a header, if it is visible ASCII.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn evidence(&self) -> Evidence {
        Evidence {
            request: format!("{} {}", self.method, strip_query_secrets(&self.url)),
            sent: self.sent.clone(),
            status: self.status,
            headers: EVIDENCE_HEADERS
                .iter()
                .filter_map(|h| self.header(h).map(|v| ((*h).to_owned(), v.to_owned())))
                .collect(),
            body: excerpt(&self.body, 600),
        }
    }
}

impl Request {
    /// What evidence shows of this request: headers (credentials as their
    /// scheme and size only) and a body excerpt with secrets redacted.
    pub fn sent(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(t) = &self.bearer {
            lines.push(format!("authorization: Bearer <{} bytes>", t.len()));
        }
        for (k, v) in &self.headers {
            if CREDENTIAL_HEADERS.contains(&k.to_ascii_lowercase().as_str()) {
                let scheme = v.split(' ').next().unwrap_or("");
                lines.push(format!("{k}: {scheme} <{} bytes>", v.len()));
            } else {
                lines.push(format!("{k}: {v}"));
            }
        }
        match &self.body {
            Body::None => {}
            Body::Json(v) => {
                lines.push("content-type: application/json".to_owned());
                lines.push(excerpt(v.to_string().as_bytes(), MAX_SENT_BODY));
            }
            Body::Form(pairs) => {
                lines.push("content-type: application/x-www-form-urlencoded".to_owned());
                let shown: Vec<String> = pairs
                    .iter()
                    .map(|(k, v)| {
                        if SECRET_FIELDS.contains(&k.as_str()) {
                            format!("{k}=[redacted]")
                        } else {
                            format!("{k}={v}")
                        }
                    })
                    .collect();
                lines.push(excerpt(shown.join("&").as_bytes(), MAX_SENT_BODY));
            }
            Body::Raw {
                content_type,
                bytes,
            } => {
                if let Some(ct) = content_type {
                    lines.push(format!("content-type: {ct}"));
                }
                lines.push(excerpt(bytes, MAX_SENT_BODY));
            }
        }
        lines
    }
}

/// The URL without its query when the query could carry a user code.
fn strip_query_secrets(url: &str) -> String {
    if url.contains("user_code=") {
        url.split('?').next().unwrap_or(url).to_owned() + "?…"
    } else {
        url.to_owned()
    }
}

/// Replaces the values of secret members, recursively.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if SECRET_MEMBERS.contains(&k.as_str()) {
                    *v = Value::String("[redacted]".to_owned());
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

/// A printable excerpt of a body: JSON with secrets redacted, else text.
pub fn excerpt(body: &[u8], max_chars: usize) -> String {
    let text = match serde_json::from_slice::<Value>(body) {
        Ok(mut v) => {
            redact(&mut v);
            v.to_string()
        }
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    if text.chars().count() > max_chars {
        let cut: String = text.chars().take(max_chars).collect();
        format!("{cut}… ({} bytes)", body.len())
    } else {
        text
    }
}

/// The HTTP client. Never follows redirects with credentials.
#[derive(Clone, Debug)]
pub struct Http {
    plain: reqwest::Client,
    follow: reqwest::Client,
}

impl Http {
    pub fn new() -> Result<Self> {
        let build = |policy| {
            pact_jose::with_shared_tls(reqwest::Client::builder())
                .redirect(policy)
                .timeout(Duration::from_secs(20))
                .user_agent(concat!("pact-agent/", env!("CARGO_PKG_VERSION")))
                .build()
                .context("cannot build the HTTP client")
        };
        Ok(Self {
            plain: build(reqwest::redirect::Policy::none())?,
            follow: build(reqwest::redirect::Policy::limited(5))?,
        })
    }

    /// Sends `req`, waiting out up to three `429`s by their `Retry-After`.
    pub async fn send(&self, req: Request) -> Result<Response> {
        let mut rate_limited = Vec::new();
        loop {
            let mut res = self.send_once(&req).await?;
            if res.status == 429 && rate_limited.len() < MAX_429_RETRIES {
                let after = res.header("retry-after").map(str::to_owned);
                let wait = after
                    .as_deref()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .unwrap_or(1)
                    .clamp(1, MAX_RETRY_AFTER_SECS);
                rate_limited.push(after);
                tokio::time::sleep(Duration::from_secs(wait)).await;
                continue;
            }
            res.rate_limited = rate_limited;
            return Ok(res);
        }
    }

    async fn send_once(&self, req: &Request) -> Result<Response> {
        let client = if req.follow_redirects {
            &self.follow
        } else {
            &self.plain
        };
        let mut builder = client.request(req.method.clone(), &req.url);
        if let Some(t) = &req.bearer {
            builder = builder.header("authorization", format!("Bearer {t}"));
        }
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder = match &req.body {
            Body::None => builder,
            Body::Json(v) => builder
                .header("content-type", "application/json")
                .body(v.to_string()),
            Body::Form(pairs) => builder.form(pairs),
            Body::Raw {
                content_type,
                bytes,
            } => {
                let b = match content_type {
                    Some(ct) => builder.header("content-type", ct.as_str()),
                    None => builder,
                };
                b.body(bytes.clone())
            }
        };
        let mut res = builder
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("{} {}: {}", req.method, req.url, e.without_url()))?;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let url = res.url().to_string();
        let mut body = Vec::new();
        while let Some(chunk) = res
            .chunk()
            .await
            .map_err(|e| anyhow::anyhow!("reading {}: {}", req.url, e.without_url()))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                anyhow::bail!(
                    "{} {}: response body over {MAX_BODY} bytes",
                    req.method,
                    req.url
                );
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            method: req.method.to_string(),
            url,
            sent: req.sent(),
            status,
            headers,
            body,
            rate_limited: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Evidence shows what was sent, never a credential or a secret field.
    #[test]
    fn what_was_sent_is_shown_without_secrets() {
        let req = Request::post("http://p.example/oauth/token")
            .bearer("eyJ.PA-JWT.sig")
            .header("X-A2A-User-Delegation", "Bearer eyJ.DELEGATION.sig")
            .form(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", "RT-SECRET"),
                ("client_id", "https://pa.example"),
            ]);
        let sent = req.sent().join("\n");
        for secret in ["PA-JWT", "DELEGATION", "RT-SECRET"] {
            assert!(!sent.contains(secret), "{sent}");
        }
        assert!(sent.contains("authorization: Bearer <14 bytes>"), "{sent}");
        assert!(sent.contains("X-A2A-User-Delegation: Bearer <"), "{sent}");
        assert!(
            sent.contains("refresh_token=[redacted]&client_id=https://pa.example"),
            "{sent}"
        );
        let json = Request::post("http://p.example/m")
            .json(serde_json::json!({"access_token": "AT", "x": 1}));
        let sent = json.sent().join("\n");
        assert!(
            !sent.contains("\"AT\"") && sent.contains("\"x\":1"),
            "{sent}"
        );
    }

    #[test]
    fn secrets_are_redacted_from_excerpts() {
        let body = br#"{"access_token":"AT","refresh_token":"RT","scope":"a","nested":{"device_code":"DC"}}"#;
        let text = excerpt(body, 1000);
        assert!(!text.contains("AT\""));
        assert!(!text.contains("RT"));
        assert!(!text.contains("DC"));
        assert!(text.contains("\"scope\":\"a\""));
    }

    #[test]
    fn long_bodies_are_cut() {
        let text = excerpt(&[b'x'; 2000], 10);
        assert!(text.starts_with("xxxxxxxxxx…"));
        assert!(text.ends_with("(2000 bytes)"));
    }

    #[test]
    fn request_debug_hides_the_bearer() {
        let r = Request::get("https://p.example/x").bearer("secret-token");
        assert!(!format!("{r:?}").contains("secret"));
    }
}
