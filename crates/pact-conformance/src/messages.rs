//! PACT §4 (messages and the other A2A operations) and §6 (errors), plus the
//! checks over every response of the run.

use pact_proto::A2A_CONTENT_TYPE;
use pact_proto::ErrorReason;
use reqwest::Method;
use serde_json::{Value, json};

use crate::expect::{self, Verdict, during, fail, skip};
use crate::rules::RuleId as R;
use crate::runner::{Kind, Runner, Seen, Setup, check, message_body};

/// PACT §4.
pub async fn message_checks(r: &mut Runner<'_>, s: &Setup) {
    if !r.wants_any(&["§4."]) {
        return;
    }
    check!(r, R::ReplyShape, reply_shape(r, s).await);
    check!(r, R::AnyRequestContentType, any_content_type(r, s).await);
    check!(r, R::A2aVersionOptional, a2a_version(r, s).await);
    check!(r, R::ContextContinues, context_continues(r, s).await);
    check!(r, R::UnknownContext, unknown_context(r, s).await);
    check!(r, R::ForeignContext, foreign_context(r, s).await);
    check!(r, R::ReplayedMessageId, replay(r, s).await);
    check!(r, R::RoleUserRequired, {
        let cases = vec![
            (
                "role ROLE_AGENT",
                edit_message(|m| m["role"] = json!("ROLE_AGENT")),
            ),
            ("no role", edit_message(|m| remove(m, "role"))),
        ];
        refused_bodies(r, s, cases, ErrorReason::InvalidParams, None).await
    });
    check!(r, R::BlankTextRefused, {
        let cases = vec![
            (
                "a blank text part",
                edit_message(|m| m["parts"] = json!([{"text": "  \n "}])),
            ),
            ("no parts", edit_message(|m| m["parts"] = json!([]))),
        ];
        refused_bodies(r, s, cases, ErrorReason::InvalidParams, None).await
    });
    check!(r, R::NonTextPartRefused, {
        let cases = vec![
            (
                "a raw part",
                edit_message(|m| {
                    m["parts"] = json!([{"text": "see this"}, {"raw": "aGVsbG8=", "mediaType": "text/plain"}])
                }),
            ),
            (
                "a url part",
                edit_message(|m| {
                    m["parts"] =
                        json!([{"url": "https://example.com/file.txt", "mediaType": "text/plain"}])
                }),
            ),
            (
                "a data part",
                edit_message(|m| m["parts"] = json!([{"data": {"k": 1}}])),
            ),
        ];
        refused_bodies(r, s, cases, ErrorReason::ContentTypeNotSupported, None).await
    });
    check!(r, R::TaskIdRefused, {
        let task = r.unique("task");
        let cases = vec![("a taskId", edit_message(|m| m["taskId"] = json!(task)))];
        refused_bodies(
            r,
            s,
            cases,
            ErrorReason::TaskNotFound,
            Some("Task not found"),
        )
        .await
    });
    check!(r, R::BadJsonRefused, bad_json(r, s).await);
    check!(r, R::TasksList, tasks_list(r, s).await);
    check!(r, R::TasksPageSize, page_sizes(r, s).await);
    check!(r, R::TasksPageSizeInvalid, {
        let mut verdict = Ok("0, 101, -1, abc refused".to_owned());
        for bad in ["0", "101", "-1", "abc"] {
            if let Err(p) = simple_op(
                r,
                s,
                Method::GET,
                &format!("tasks?pageSize={bad}"),
                ErrorReason::InvalidParams,
                None,
            )
            .await
            {
                verdict = Err(during(&format!("pageSize={bad}"), p));
                break;
            }
        }
        verdict
    });
    check!(r, R::TaskGetNotFound, {
        let id = r.unique("task");
        let message = format!("Task not found: {id}");
        simple_op(
            r,
            s,
            Method::GET,
            &format!("tasks/{id}"),
            ErrorReason::TaskNotFound,
            Some(&message),
        )
        .await
    });
    check!(r, R::TaskCancelNotFound, {
        let id = r.unique("task");
        let message = format!("Task not found: {id}");
        simple_op(
            r,
            s,
            Method::POST,
            &format!("tasks/{id}:cancel"),
            ErrorReason::TaskNotFound,
            Some(&message),
        )
        .await
    });
    check!(r, R::StreamUnsupported, {
        simple_op(
            r,
            s,
            Method::POST,
            "message:stream",
            ErrorReason::UnsupportedOperation,
            None,
        )
        .await
    });
    check!(r, R::SubscribeUnsupported, {
        let id = r.unique("task");
        simple_op(
            r,
            s,
            Method::POST,
            &format!("tasks/{id}:subscribe"),
            ErrorReason::UnsupportedOperation,
            None,
        )
        .await
    });
    check!(r, R::ExtendedCardUnsupported, {
        simple_op(
            r,
            s,
            Method::GET,
            "extendedAgentCard",
            ErrorReason::UnsupportedOperation,
            None,
        )
        .await
    });
    check!(r, R::PushConfigsUnsupported, push_configs(r, s).await);
    check!(r, R::UnmatchedRoute404, {
        let id = r.unique("x");
        let cases = vec![
            (Method::GET, id.clone()),
            (Method::POST, "message:frobnicate".to_owned()),
            (Method::GET, format!("tasks/{id}/a/b/c")),
            (Method::POST, format!("tasks/{id}:frobnicate")),
        ];
        route_misses(r, s, cases, &[404, 405]).await
    });
    check!(r, R::WrongMethod405, {
        let cases = vec![
            (Method::GET, "message:send".to_owned()),
            (Method::PUT, "message:send".to_owned()),
            (Method::DELETE, "tasks".to_owned()),
            (Method::GET, "message:stream".to_owned()),
        ];
        route_misses(r, s, cases, &[405, 404]).await
    });
    check!(
        r,
        R::ClosedContext,
        Err(skip(
            "no PACT operation closes a conversation, so a closed one cannot be produced from outside"
        ))
    );
}

fn remove(v: &mut Value, member: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(member);
    }
}

/// A valid `message:send` body with its message edited.
fn edit_message(edit: impl FnOnce(&mut Value)) -> Value {
    let mut body = message_body("hello", None, None);
    edit(&mut body["message"]);
    body
}

async fn reply_shape(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("reply");
    let prompt = r.cfg.public_prompt.clone();
    let res = r.say(s, &sub, &prompt, None, None).await?;
    let v = expect::ok_json(&res)?;
    if v.get("message").is_some() && v.get("task").is_some() {
        return Err(fail("the reply has both `message` and `task`", Some(&res)));
    }
    let m = expect::reply_message(&res)?;
    Ok(format!(
        "context {}",
        m.get("contextId").and_then(Value::as_str).unwrap_or("")
    ))
}

async fn any_content_type(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    for ct in [Some("text/plain"), Some("application/octet-stream"), None] {
        let sub = r.sub("ctype");
        let jwt = r.jwt(&sub)?;
        let body = message_body(&r.cfg.public_prompt.clone(), None, None).to_string();
        let req = s
            .a2a_request(Method::POST, "message:send", Some(&jwt))
            .raw(ct, body.into_bytes());
        let res = r.send(req, Kind::A2a).await?;
        let label = match ct {
            Some(ct) => format!("request Content-Type {ct}"),
            None => "no request Content-Type".to_owned(),
        };
        expect::reply_message(&res).map_err(|p| during(&label, p))?;
    }
    Ok(String::new())
}

async fn a2a_version(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    for version in [Some("1.0"), Some("0.3"), None] {
        let sub = r.sub("version");
        let jwt = r.jwt(&sub)?;
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let mut req = s
            .a2a_request(Method::POST, "message:send", Some(&jwt))
            .json(body);
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        let res = r.send(req, Kind::A2a).await?;
        let label = match version {
            Some(v) => format!("A2A-Version: {v}"),
            None => "no A2A-Version".to_owned(),
        };
        expect::reply_message(&res).map_err(|p| during(&label, p))?;
    }
    Ok(String::new())
}

/// Starts a conversation as `sub`; its context id.
async fn start_context(
    r: &mut Runner<'_>,
    s: &Setup,
    sub: &str,
) -> Result<String, expect::Problem> {
    let prompt = r.cfg.public_prompt.clone();
    let res = r.say(s, sub, &prompt, None, None).await?;
    let m = expect::reply_message(&res).map_err(|p| during("starting a conversation", p))?;
    Ok(m.get("contextId")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned())
}

async fn context_continues(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("ctx");
    let ctx = start_context(r, s, &sub).await?;
    let prompt = r.cfg.public_prompt.clone();
    let res = r.say(s, &sub, &prompt, Some(&ctx), None).await?;
    let m = expect::reply_message(&res).map_err(|p| during("continuing it", p))?;
    let got = m.get("contextId").and_then(Value::as_str);
    if got != Some(ctx.as_str()) {
        return Err(fail(
            format!("continued in context {ctx}, the reply names {got:?}"),
            Some(&res),
        ));
    }
    Ok(String::new())
}

async fn unknown_context(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("unknown-ctx");
    let prompt = r.cfg.public_prompt.clone();
    for ctx in [uuid::Uuid::new_v4().to_string(), r.unique("not-a-context")] {
        let res = r.say(s, &sub, &prompt, Some(&ctx), None).await?;
        expect::a2a_error(&res, ErrorReason::InvalidParams, Some("Unknown contextId"))
            .map_err(|p| during(&format!("contextId {ctx:?}"), p))?;
    }
    Ok(String::new())
}

/// PACT §4: someone else's context looks exactly like an unknown one.
async fn foreign_context(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let owner = r.sub("owner");
    let ctx = start_context(r, s, &owner).await?;
    let other = r.sub("intruder");
    let prompt = r.cfg.public_prompt.clone();
    let res = r.say(s, &other, &prompt, Some(&ctx), None).await?;
    let foreign = expect::a2a_error(&res, ErrorReason::InvalidParams, Some("Unknown contextId"))
        .map_err(|p| during("another sub's context", p))?;
    let res2 = r
        .say(
            s,
            &other,
            &prompt,
            Some(&uuid::Uuid::new_v4().to_string()),
            None,
        )
        .await?;
    let unknown = res2.json().unwrap_or(Value::Null);
    if foreign != unknown || res.status != res2.status {
        return Err(fail(
            format!(
                "a foreign context is answered differently from an unknown one (unknown: HTTP {} {})",
                res2.status, unknown
            ),
            Some(&res),
        ));
    }
    Ok(String::new())
}

/// PACT §4: a repeated `messageId` gets the stored reply (same reply id).
async fn replay(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("replay");
    let ctx = start_context(r, s, &sub).await?;
    let id = uuid::Uuid::new_v4().to_string();
    let body = message_body(&r.cfg.public_prompt.clone(), Some(&ctx), Some(&id));
    let res = r.post_message(s, &sub, body.clone(), None).await?;
    let first = expect::reply_message(&res).map_err(|p| during("the first send", p))?;
    let res = r.post_message(s, &sub, body, None).await?;
    let second = expect::reply_message(&res).map_err(|p| during("the retry", p))?;
    for field in ["messageId", "contextId", "parts"] {
        if first.get(field) != second.get(field) {
            return Err(fail(
                format!(
                    "the retry of messageId {id} got a different {field} ({} then {}): the agent ran again",
                    first.get(field).cloned().unwrap_or(Value::Null),
                    second.get(field).cloned().unwrap_or(Value::Null)
                ),
                Some(&res),
            ));
        }
    }
    Ok(String::new())
}

/// Each body must get this A2A error.
async fn refused_bodies(
    r: &mut Runner<'_>,
    s: &Setup,
    cases: Vec<(&str, Value)>,
    reason: ErrorReason,
    message: Option<&str>,
) -> Verdict {
    s.auth_gate()?;
    for (label, body) in cases {
        let sub = r.sub("bad-body");
        let res = r.post_message(s, &sub, body, None).await?;
        expect::a2a_error(&res, reason, message).map_err(|p| during(label, p))?;
    }
    Ok(String::new())
}

async fn bad_json(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    for (label, bytes) in [
        ("a body that is not JSON", b"{not json".to_vec()),
        ("a JSON array", b"[]".to_vec()),
    ] {
        let sub = r.sub("bad-json");
        let jwt = r.jwt(&sub)?;
        let req = s
            .a2a_request(Method::POST, "message:send", Some(&jwt))
            .raw(Some("application/json"), bytes);
        let res = r.send(req, Kind::A2a).await?;
        expect::a2a_error(&res, ErrorReason::InvalidParams, None).map_err(|p| during(label, p))?;
    }
    Ok(String::new())
}

/// One authenticated request that must get this A2A error.
async fn simple_op(
    r: &mut Runner<'_>,
    s: &Setup,
    method: Method,
    op: &str,
    reason: ErrorReason,
    message: Option<&str>,
) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("op");
    let jwt = r.jwt(&sub)?;
    let mut req = s.a2a_request(method.clone(), op, Some(&jwt));
    if method == Method::POST {
        req = req.json(message_body("hello", None, None));
    }
    let res = r.send(req, Kind::A2a).await?;
    expect::a2a_error(&res, reason, message).map_err(|p| during(&format!("{method} {op}"), p))?;
    Ok(String::new())
}

async fn list_tasks(
    r: &mut Runner<'_>,
    s: &Setup,
    query: &str,
) -> Result<(pact_client::http::Response, Value), expect::Problem> {
    let sub = r.sub("tasks");
    let jwt = r.jwt(&sub)?;
    let req = s.a2a_request(Method::GET, &format!("tasks{query}"), Some(&jwt));
    let res = r.send(req, Kind::A2a).await?;
    let v = expect::ok_json(&res).map_err(|p| during(&format!("GET tasks{query}"), p))?;
    Ok((res, v))
}

async fn tasks_list(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let (res, v) = list_tasks(r, s, "").await?;
    let expected = json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0});
    if v != expected {
        return Err(fail(format!("expected {expected}"), Some(&res)));
    }
    Ok(String::new())
}

async fn page_sizes(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    for (query, size) in [
        ("?pageSize=1", 1),
        ("?pageSize=100", 100),
        ("?pageToken=x&pageSize=7&status=working", 7),
        ("?somethingElse=1", 50),
    ] {
        let (res, v) = list_tasks(r, s, query).await?;
        if v.get("pageSize") != Some(&json!(size)) || v.get("tasks") != Some(&json!([])) {
            return Err(fail(
                format!("GET tasks{query}: expected pageSize {size} and no tasks"),
                Some(&res),
            ));
        }
    }
    Ok(String::new())
}

async fn push_configs(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    let id = r.unique("task");
    for (method, op) in [
        (Method::GET, format!("tasks/{id}/pushNotificationConfigs")),
        (Method::POST, format!("tasks/{id}/pushNotificationConfigs")),
        (
            Method::GET,
            format!("tasks/{id}/pushNotificationConfigs/c1"),
        ),
        (
            Method::DELETE,
            format!("tasks/{id}/pushNotificationConfigs/c1"),
        ),
    ] {
        simple_op(
            r,
            s,
            method,
            &op,
            ErrorReason::PushNotificationNotSupported,
            None,
        )
        .await?;
    }
    Ok(String::new())
}

/// PACT §4: routing is decided before authentication, so these get
/// 404/405 without any credentials.
async fn route_misses(
    r: &mut Runner<'_>,
    s: &Setup,
    cases: Vec<(Method, String)>,
    allowed: &[u16],
) -> Verdict {
    let mut seen = Vec::new();
    for (method, op) in cases {
        let req = s.a2a_request(method.clone(), &op, None);
        let req = if method == Method::POST || method == Method::PUT {
            req.json(message_body("hello", None, None))
        } else {
            req
        };
        let res = r.send(req, Kind::A2a).await?;
        expect::bare_route_miss(&res, allowed)
            .map_err(|p| during(&format!("{method} {op} without a PA-JWT"), p))?;
        seen.push(format!("{method} {op} → {}", res.status));
    }
    Ok(seen.join(", "))
}

/// The checks over every response of the run: content type (§4), error
/// envelopes (§6), OAuth errors (§5.3), 429s (§6).
pub fn aggregate_checks(r: &mut Runner<'_>) {
    check!(r, R::ContentTypeExact, {
        let seen: Vec<_> = r.a2a_seen.clone();
        match seen
            .iter()
            .find(|s| s.content_type.as_deref() != Some(A2A_CONTENT_TYPE))
        {
            _ if seen.is_empty() => Err(skip("no A2A response with a body was seen")),
            Some(bad) => Err(expect::Problem::Fail {
                reason: format!(
                    "Content-Type is {}, not exactly {A2A_CONTENT_TYPE:?} ({} of {} A2A responses)",
                    bad.content_type
                        .as_deref()
                        .map_or_else(|| "missing".to_owned(), |c| format!("{c:?}")),
                    seen.iter()
                        .filter(|s| s.content_type.as_deref() != Some(A2A_CONTENT_TYPE))
                        .count(),
                    seen.len()
                ),
                evidence: Some(Box::new(bad.evidence.clone())),
            }),
            None => Ok(format!("{} A2A responses", seen.len())),
        }
    });
    let a2a_errors: Vec<Seen> = r
        .a2a_seen
        .iter()
        .filter(|s| s.status != 200)
        .cloned()
        .collect();
    check!(
        r,
        R::ErrorEnvelope,
        every_response(
            &a2a_errors,
            "no A2A error was seen",
            format!("{} A2A errors", a2a_errors.len()),
            envelope_problem,
        )
    );
    check!(
        r,
        R::ReasonStatusTable,
        every_response(
            &a2a_errors,
            "no A2A error was seen",
            String::new(),
            table_problem,
        )
    );
    check!(r, R::ErrorShape, {
        let errors = r.oauth_seen.clone();
        every_response(
            &errors,
            "no OAuth error was seen",
            format!("{} OAuth errors", errors.len()),
            oauth_error_problem,
        )
    });
    check!(r, R::RateLimit429, {
        if r.limited_seen.is_empty() {
            Err(skip(
                "the Provider did not rate-limit this run (not provoked on purpose: it would take a flood)",
            ))
        } else {
            let bad = r.limited_seen.iter().find(|(_, afters)| {
                afters.iter().any(|a| {
                    a.as_deref()
                        .is_none_or(|v| v.trim().parse::<u64>().is_err() && !v.contains("GMT"))
                })
            });
            match bad {
                Some((e, _)) => Err(expect::Problem::Fail {
                    reason: "a 429 without a usable Retry-After".to_owned(),
                    evidence: Some(Box::new(e.clone())),
                }),
                None => Ok(format!(
                    "{} rate-limited responses, each with Retry-After",
                    r.limited_seen.len()
                )),
            }
        }
    });
}

/// A check over every response of a kind: the first one `problem` finds
/// fault with fails it, with that response as evidence; `passed` when none
/// does; SKIP (`none` says why) when there was no such response.
fn every_response(
    seen: &[Seen],
    none: &str,
    passed: String,
    problem: fn(u16, Option<&Value>) -> Result<(), String>,
) -> Verdict {
    if seen.is_empty() {
        return Err(skip(none));
    }
    let broken = seen
        .iter()
        .find_map(|s| problem(s.status, s.body.as_ref()).err().map(|why| (why, s)));
    match broken {
        Some((reason, s)) => Err(expect::Problem::Fail {
            reason,
            evidence: Some(Box::new(s.evidence.clone())),
        }),
        None => Ok(passed),
    }
}

/// PACT §6: `{"error": {"code", "status", "message", "details": [{"@type",
/// "reason", "domain"}]}}` with `code` = the HTTP status.
fn envelope_problem(status: u16, body: Option<&Value>) -> Result<(), String> {
    let Some(err) = body.and_then(|b| b.get("error")) else {
        return Err(format!(
            "HTTP {status} from an A2A operation without an A2A error envelope"
        ));
    };
    if err.get("code").and_then(Value::as_u64) != Some(u64::from(status)) {
        return Err(format!(
            "error.code is {:?}, the HTTP status is {status}",
            err.get("code")
        ));
    }
    for field in ["status", "message"] {
        if !err.get(field).is_some_and(Value::is_string) {
            return Err(format!("error.{field} is missing or not a string"));
        }
    }
    let Some(detail) = err.get("details").and_then(|d| d.get(0)) else {
        return Err("error.details[0] is missing".to_owned());
    };
    if detail.get("@type").and_then(Value::as_str)
        != Some("type.googleapis.com/google.rpc.ErrorInfo")
    {
        return Err(format!("details[0].@type is {:?}", detail.get("@type")));
    }
    if detail.get("domain").and_then(Value::as_str) != Some("a2a-protocol.org") {
        return Err(format!("details[0].domain is {:?}", detail.get("domain")));
    }
    if !detail.get("reason").is_some_and(Value::is_string) {
        return Err("details[0].reason is missing".to_owned());
    }
    Ok(())
}

/// PACT §6 table: reason → HTTP code and status.
fn table_problem(status: u16, body: Option<&Value>) -> Result<(), String> {
    let Some(reason) = body.and_then(expect::envelope_reason) else {
        return Err(format!("HTTP {status} without a reason"));
    };
    let Ok(known) = serde_json::from_value::<ErrorReason>(Value::String(reason.to_owned())) else {
        return Err(format!("reason {reason:?} is not in the §6 table"));
    };
    let err = body.and_then(|b| b.get("error"));
    let got_status = err.and_then(|e| e.get("status")).and_then(Value::as_str);
    if status != known.http_status() {
        return Err(format!(
            "{reason} must be HTTP {}, got {status}",
            known.http_status()
        ));
    }
    if got_status != Some(known.status()) {
        return Err(format!(
            "{reason} must have status {:?}, got {got_status:?}",
            known.status()
        ));
    }
    Ok(())
}

/// PACT §5.3: RFC 6749 JSON `{error, error_description?}`, 400 (401 for
/// `invalid_client`).
fn oauth_error_problem(status: u16, body: Option<&Value>) -> Result<(), String> {
    let Some(obj) = body.and_then(Value::as_object) else {
        return Err(format!(
            "HTTP {status} from an OAuth endpoint without a JSON error body"
        ));
    };
    let Some(code) = obj.get("error").and_then(Value::as_str) else {
        return Err("the error body has no string `error`".to_owned());
    };
    if obj.get("error_description").is_some_and(|d| !d.is_string()) {
        return Err("error_description is not a string".to_owned());
    }
    let expected = match code {
        "invalid_client" => 401,
        "server_error" => 500,
        _ => 400,
    };
    if status != expected {
        return Err(format!("{code} must be HTTP {expected}, got {status}"));
    }
    Ok(())
}
