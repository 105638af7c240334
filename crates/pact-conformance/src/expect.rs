//! Expectations on responses, each failing with a reason a person can act
//! on and the offending response as evidence.

use std::collections::BTreeMap;

use pact_client::http::{Evidence, Response};
use pact_proto::ErrorReason;
use serde_json::Value;

/// Why a check did not pass.
#[derive(Clone, Debug)]
pub enum Problem {
    Fail {
        reason: String,
        /// Boxed: a `Problem` travels in every `Result` of the runner.
        evidence: Option<Box<Evidence>>,
    },
    Skip(String),
}

/// A check's result: a note when it passed.
pub type Verdict = Result<String, Problem>;

pub fn fail(reason: impl Into<String>, res: Option<&Response>) -> Problem {
    Problem::Fail {
        reason: reason.into(),
        evidence: res.map(|r| Box::new(r.evidence())),
    }
}

pub fn skip(reason: impl Into<String>) -> Problem {
    Problem::Skip(reason.into())
}

/// Prefixes the reason of a failure with what was being tried.
pub fn during(what: &str, p: Problem) -> Problem {
    match p {
        Problem::Fail { reason, evidence } => Problem::Fail {
            reason: format!("{what}: {reason}"),
            evidence,
        },
        skip @ Problem::Skip(_) => skip,
    }
}

/// The verdict on what a step produced, judged by `judge`, while the caller
/// keeps `got` for the steps that use it: a step that failed passes its
/// problem on unchanged.
pub fn verdict_on<T>(got: &Result<T, Problem>, judge: impl FnOnce(&T) -> Verdict) -> Verdict {
    got.as_ref().map_err(Clone::clone).and_then(judge)
}

/// A sent request whose answer must be the bare 401 of PACT §3.
pub fn answered_bare_401(sent: Result<Response, Problem>) -> Verdict {
    sent.and_then(|res| bare_401(&res)).map(|()| String::new())
}

/// A sent request whose answer must be the 401 `invalid_token` of PACT §5.5.
pub fn answered_invalid_token(sent: Result<Response, Problem>) -> Verdict {
    sent.and_then(|res| invalid_token_401(&res))
        .map(|()| String::new())
}

/// A sent request whose answer must be this RFC 6749 §5.2 error.
pub fn answered_oauth_error(sent: Result<Response, Problem>, code: &str, status: u16) -> Verdict {
    sent.and_then(|res| oauth_error(&res, code, status))
        .map(|_| String::new())
}

/// A parsed `WWW-Authenticate` challenge: scheme and parameters.
pub fn parse_challenge(header: &str) -> Option<(String, BTreeMap<String, String>)> {
    let header = header.trim();
    let (scheme, rest) = match header.split_once(' ') {
        Some((s, r)) => (s, r),
        None => (header, ""),
    };
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            match after.find(',') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        };
        params.insert(name.trim().to_ascii_lowercase(), value.to_owned());
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Some((scheme.to_owned(), params))
}

/// PACT §3: `401`, `WWW-Authenticate: Bearer realm="a2a"`, no body.
pub fn bare_401(res: &Response) -> Result<(), Problem> {
    if res.status != 401 {
        return Err(fail(
            format!("expected the bare 401 of PACT §3, got HTTP {}", res.status),
            Some(res),
        ));
    }
    let Some(header) = res.header("www-authenticate") else {
        return Err(fail("the 401 has no WWW-Authenticate header", Some(res)));
    };
    match parse_challenge(header) {
        Some((scheme, params))
            if scheme.eq_ignore_ascii_case("bearer")
                && params.get("realm").map(String::as_str) == Some("a2a")
                && !params.contains_key("error") => {}
        _ => {
            return Err(fail(
                format!("WWW-Authenticate is {header:?}, not `Bearer realm=\"a2a\"`"),
                Some(res),
            ));
        }
    }
    if !res.body.is_empty() {
        return Err(fail("a PA-JWT 401 has no body (PACT §3)", Some(res)));
    }
    Ok(())
}

/// PACT §5.5: `401`, `WWW-Authenticate: Bearer realm="a2a",
/// error="invalid_token"`, no body.
pub fn invalid_token_401(res: &Response) -> Result<(), Problem> {
    if res.status != 401 {
        return Err(fail(
            format!(
                "expected 401 invalid_token (PACT §5.5), got HTTP {}",
                res.status
            ),
            Some(res),
        ));
    }
    let header = res.header("www-authenticate").unwrap_or("");
    match parse_challenge(header) {
        Some((scheme, params))
            if scheme.eq_ignore_ascii_case("bearer")
                && params.get("realm").map(String::as_str) == Some("a2a")
                && params.get("error").map(String::as_str) == Some("invalid_token") => {}
        _ => {
            return Err(fail(
                format!(
                    "WWW-Authenticate is {header:?}, not `Bearer realm=\"a2a\", error=\"invalid_token\"`"
                ),
                Some(res),
            ));
        }
    }
    if !res.body.is_empty() {
        return Err(fail(
            "a delegation-token 401 has no body (PACT §5.5)",
            Some(res),
        ));
    }
    Ok(())
}

/// `200` with a JSON object body.
pub fn ok_json(res: &Response) -> Result<Value, Problem> {
    if res.status != 200 {
        return Err(fail(
            format!("expected HTTP 200, got {}", res.status),
            Some(res),
        ));
    }
    match res.json() {
        Some(v) if v.is_object() => Ok(v),
        _ => Err(fail("the 200 body is not a JSON object", Some(res))),
    }
}

/// The `reason` of an A2A error envelope, if the body is one.
pub fn envelope_reason(v: &Value) -> Option<&str> {
    v.get("error")?
        .get("details")?
        .get(0)?
        .get("reason")?
        .as_str()
}

/// PACT §4/§6: an A2A error with this reason (and HTTP status from the
/// §6 table), and this message when given. The envelope's shape is checked
/// by `§6.error-envelope`, the content type by `§4.content-type-exact`.
pub fn a2a_error(
    res: &Response,
    reason: ErrorReason,
    message: Option<&str>,
) -> Result<Value, Problem> {
    let v = res.json().unwrap_or(Value::Null);
    let got = envelope_reason(&v);
    if got != Some(reason.as_str()) {
        return Err(fail(
            format!(
                "expected an A2A error with reason {}, got HTTP {}{}",
                reason.as_str(),
                res.status,
                got.map(|g| format!(" with reason {g}"))
                    .unwrap_or_else(|| " without an A2A error envelope".to_owned())
            ),
            Some(res),
        ));
    }
    if res.status != reason.http_status() {
        return Err(fail(
            format!(
                "{} must be HTTP {} (PACT §6), got {}",
                reason.as_str(),
                reason.http_status(),
                res.status
            ),
            Some(res),
        ));
    }
    if let Some(m) = message {
        let got = v
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str);
        if got != Some(m) {
            return Err(fail(
                format!("the message must be {m:?}, got {got:?}"),
                Some(res),
            ));
        }
    }
    Ok(v)
}

/// PACT §4 last row: `404`/`405` and no A2A body.
pub fn bare_route_miss(res: &Response, allowed: &[u16]) -> Result<(), Problem> {
    if !allowed.contains(&res.status) {
        let hint = if res.status == 401 {
            " (routing is decided before authentication)"
        } else {
            ""
        };
        return Err(fail(
            format!(
                "expected HTTP {}, got {}{hint}",
                allowed
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(" or "),
                res.status
            ),
            Some(res),
        ));
    }
    if res.json().as_ref().and_then(envelope_reason).is_some() {
        return Err(fail(
            "an unmatched route answers with no A2A body",
            Some(res),
        ));
    }
    Ok(())
}

/// RFC 6749 §5.2 error with this code and status.
pub fn oauth_error(res: &Response, code: &str, status: u16) -> Result<Value, Problem> {
    let v = res.json().unwrap_or(Value::Null);
    let got = v.get("error").and_then(Value::as_str);
    if got != Some(code) {
        return Err(fail(
            format!(
                "expected OAuth error {code:?}, got HTTP {}{}",
                res.status,
                got.map(|g| format!(" with error {g:?}"))
                    .unwrap_or_else(|| " without an RFC 6749 error body".to_owned())
            ),
            Some(res),
        ));
    }
    if res.status != status {
        return Err(fail(
            format!("{code} must be HTTP {status}, got {}", res.status),
            Some(res),
        ));
    }
    Ok(v)
}

/// PACT §4: a reply `{"message": {messageId, contextId, role: ROLE_AGENT,
/// parts: [{"text"}…], metadata?}}`; returns the message.
pub fn reply_message(res: &Response) -> Result<Value, Problem> {
    let v = ok_json(res)?;
    let Some(m) = v.get("message") else {
        return Err(fail(
            if v.get("task").is_some() {
                "expected a message, got a task".to_owned()
            } else {
                "the reply has no `message`".to_owned()
            },
            Some(res),
        ));
    };
    message_shape(m).map_err(|why| fail(why, Some(res)))?;
    Ok(m.clone())
}

/// The §4 shape of an agent message.
pub fn message_shape(m: &Value) -> Result<(), String> {
    for field in ["messageId", "contextId"] {
        if m.get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(format!("message.{field} is missing or empty"));
        }
    }
    if m.get("role").and_then(Value::as_str) != Some("ROLE_AGENT") {
        return Err(format!(
            "message.role is {:?}, not ROLE_AGENT",
            m.get("role")
        ));
    }
    let Some(parts) = m.get("parts").and_then(Value::as_array) else {
        return Err("message.parts is not an array".to_owned());
    };
    if parts.is_empty() {
        return Err("message.parts is empty".to_owned());
    }
    for p in parts {
        let ok = p
            .as_object()
            .is_some_and(|o| o.len() == 1 && o.get("text").is_some_and(Value::is_string));
        if !ok {
            return Err(format!("a part is not exactly {{\"text\": ...}}: {p}"));
        }
    }
    if let Some(meta) = m.get("metadata")
        && !meta.is_object()
    {
        return Err("message.metadata is not an object".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_in_any_order_and_quoting() {
        let (s, p) =
            parse_challenge(r#"Bearer realm="a2a", error="invalid_token""#).unwrap_or_default();
        assert_eq!(s, "Bearer");
        assert_eq!(p.get("realm").map(String::as_str), Some("a2a"));
        assert_eq!(p.get("error").map(String::as_str), Some("invalid_token"));
        let (_, p) =
            parse_challenge(r#"Bearer error=invalid_token,realm="a2a""#).unwrap_or_default();
        assert_eq!(p.get("realm").map(String::as_str), Some("a2a"));
        assert_eq!(p.get("error").map(String::as_str), Some("invalid_token"));
        let (s, p) = parse_challenge("Basic").unwrap_or_default();
        assert_eq!(s, "Basic");
        assert!(p.is_empty());
    }

    #[test]
    fn message_shape_is_strict_about_parts() {
        let good = serde_json::json!({"messageId": "m", "contextId": "c", "role": "ROLE_AGENT", "parts": [{"text": "t"}]});
        assert!(message_shape(&good).is_ok());
        let mut bad = good.clone();
        bad["parts"][0]["kind"] = "text".into();
        assert!(message_shape(&bad).is_err());
        let mut bad = good;
        bad["role"] = "ROLE_USER".into();
        assert!(message_shape(&bad).is_err());
    }
}
