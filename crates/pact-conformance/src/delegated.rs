//! PACT §5, the Delegated profile: metadata, the device flow as RFC 8628
//! describes it (pending, slow_down, denied, expired), tokens, refresh,
//! step-up, delegation tokens at the gateway, receipts and resource-bound
//! details; and the pactd URL layout of §1.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use pact_client::card::DelegationInfo;
use pact_client::http::{Request, Response};
use pact_client::jwt::{b64, decode_unverified};
use pact_client::oauth::{self, AuthServer, PollOutcome};
use pact_jose::ProviderKeySet;
use pact_proto::ErrorReason;
use pact_proto::a2a::DELEGATION_HEADER;
use pact_proto::oauth::{
    DeviceAuthorizationResponse, GRANT_TYPE_DEVICE_CODE, TokenResponse, USER_CODE_ALPHABET,
    USER_CODE_LENGTH,
};
use reqwest::Method;
use serde_json::{Value, json};

use crate::expect::{self, Problem, Verdict, during, fail, skip, verdict_on};
use crate::forge;
use crate::identity::split_iface;
use crate::rules::RuleId as R;
use crate::runner::{Kind, Runner, Setup, check, message_body, scope_set};
use crate::{Account, ApprovalRequest, ApprovalStatus, Decision, Profile};

const PHASE_DEVICE: &[R] = &[
    R::DeviceAuthorization,
    R::PactdCodes,
    R::PactdUrls,
    R::AuthorizationPending,
    R::SlowDown,
    R::SlowDownHonoured,
    R::SlowDownAdds5s,
    R::ExpiredToken,
];
const PHASE_GRANT: &[R] = &[
    R::ForeignCode,
    R::TokenResponse,
    R::ScopeMayBeLess,
    R::RedeemTwice,
    R::DelegationToken,
    R::PactdHeader,
    R::PaJwtCheckedFirst,
    R::StepUpResend,
    R::ReceiptPresent,
    R::ReceiptVerifies,
    R::ReceiptOnRetry,
    R::ReceiptChain,
    R::TamperedTokenRefused,
    R::TokenOtherBrandRefused,
    R::Refresh,
    R::PactdRefreshRotates,
    R::RevokedGrantRefused,
];
const PHASE_SECOND: &[R] = &[R::ContextOtherUser, R::RefreshReuseRevokes];
const PHASE_STEP_UP: &[R] = &[R::StepUpTask, R::StepUpContextOpen];

/// What every §5 check reads: fixed once discovery is done, never written
/// by a check. What one phase learns for a later one is that phase's
/// return value ([`Expiring`], [`StepUp`], [`Grant`], [`FirstTurn`]).
struct Flow<'s> {
    /// What setup found: the brand's card and interface, the other brand.
    setup: &'s Setup,
    d: DelegationInfo,
    /// Every scope the card offers.
    scopes: Vec<String>,
    /// The RFC 8414 metadata (`None` when §5.metadata could not read it).
    server: Option<AuthServer>,
    /// The Provider's keys (`None` when §5.4.jwks could not read them).
    keys: Option<ProviderKeySet>,
    /// The PA's user for the delegated flows.
    sub: String,
}

/// The unapproved code of the device phase, checked for `expired_token`
/// once it has expired, at the end of the run.
struct Expiring {
    dev: DeviceAuthorizationResponse,
    at: Instant,
}

/// What the step-up without a token (§5.5) left for the grant.
#[derive(Default)]
struct StepUp {
    /// The context of the step-up task.
    ctx: Option<String>,
    /// `pact.missingScopes` of the step-up task.
    needed: Vec<String>,
}

fn reason_of(p: &Problem) -> String {
    match p {
        Problem::Fail { reason, .. } | Problem::Skip(reason) => reason.clone(),
    }
}

/// PACT §5 (and §1's pactd URLs).
pub async fn run(r: &mut Runner<'_>, s: &Setup) {
    if !r.wants_any(&["§5", "§1."]) {
        return;
    }
    if r.cfg.profile == Profile::Identity {
        check!(r, R::PactdUrls, pactd_urls(s, None, None, None));
        r.skip_prefixed(
            &["§5"],
            "the identity profile leaves out §5 (pass --profile delegated)",
        );
        return;
    }
    if let Err(p) = s.auth_gate() {
        r.skip_prefixed(&["§5", "§1."], &reason_of(&p));
        return;
    }
    let Some(d) = s.card.delegation.clone() else {
        r.skip_prefixed(
            &["§5", "§1."],
            "the card offers no usable userDelegation scheme (see §2.delegation-scheme)",
        );
        return;
    };
    let scopes: Vec<String> = d.scopes.keys().cloned().collect();
    let t = Instant::now();
    let (v, server) = metadata(r, &d, &scopes).await;
    r.record(R::Metadata, t, v);
    let t = Instant::now();
    let (v, keys) = jwks(r, server.as_ref()).await;
    r.record(R::Jwks, t, v);
    let f = Flow {
        setup: s,
        scopes,
        d,
        server,
        keys,
        sub: r.sub("delegated"),
    };

    let device_url = f.d.device_authorization_url.clone();
    let token_url = f.d.token_url.clone();
    let issuer = r.signer.issuer.clone();
    let scope = f.scopes.join(" ");
    let sub = f.sub.clone();
    check!(r, R::RequiresPaJwt, {
        let form = [("client_id", issuer.as_str()), ("scope", &scope)];
        expect::answered_bare_401(oauth_post(r, &device_url, None, &form).await)
    });
    check!(r, R::UnknownScope, {
        let unknown = r.unique("no-such-scope");
        let form = [("client_id", issuer.as_str()), ("scope", &unknown)];
        let sent = oauth_post(r, &device_url, Some(&sub), &form).await;
        expect::answered_oauth_error(sent, "invalid_scope", 400)
    });
    check!(r, R::ClientIdMismatch, {
        let form = [
            ("client_id", "https://not-this-agent.invalid"),
            ("scope", &scope),
        ];
        let sent = oauth_post(r, &device_url, Some(&sub), &form).await;
        expect::answered_oauth_error(sent, "invalid_client", 401)
    });
    check!(r, R::UnknownCode, {
        let code = b64(uuid::Uuid::new_v4().as_bytes()) + &b64(uuid::Uuid::new_v4().as_bytes());
        expect::answered_oauth_error(poll(r, &f, &token_url, &code).await, "invalid_grant", 400)
    });
    check!(r, R::UnsupportedGrantType, {
        let form = [
            ("grant_type", "password"),
            ("username", "u"),
            ("password", "p"),
            ("client_id", &issuer),
        ];
        let sent = oauth_post(r, &token_url, Some(&sub), &form).await;
        expect::answered_oauth_error(sent, "unsupported_grant_type", 400)
    });
    check!(r, R::DetailsUnknownType, details_refused(r, &f, true).await);
    check!(r, R::DetailsMalformed, details_refused(r, &f, false).await);

    let expiring = if r.wants_some(PHASE_DEVICE) {
        device_phase(r, &f).await
    } else {
        None
    };
    let step_up =
        if r.wants_some(PHASE_STEP_UP) || r.wants_some(PHASE_GRANT) || r.wants_some(PHASE_SECOND) {
            step_up_phase(r, &f).await
        } else {
            StepUp::default()
        };
    check!(r, R::AccessDenied, denied(r, &f).await);
    if r.wants_some(PHASE_GRANT) || r.wants_some(PHASE_SECOND) {
        grant_phase(r, &f, &step_up).await;
    }
    if let Some(code) = expiring {
        let t = Instant::now();
        let v = expired(r, &f, &code).await;
        r.record(R::ExpiredToken, t, v);
    }
}

/// An OAuth POST, with a PA-JWT for `sub` unless `None`.
async fn oauth_post(
    r: &mut Runner<'_>,
    url: &str,
    sub: Option<&str>,
    form: &[(&str, &str)],
) -> Result<Response, Problem> {
    let mut req = Request::post(url).form(form);
    if let Some(s) = sub {
        req = req.bearer(r.jwt(s)?);
    }
    r.send(req, Kind::OAuth).await
}

/// One device-code token request at `token_url`.
async fn poll(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    token_url: &str,
    device_code: &str,
) -> Result<Response, Problem> {
    let issuer = r.signer.issuer.clone();
    oauth_post(
        r,
        token_url,
        Some(&f.sub),
        &[
            ("grant_type", GRANT_TYPE_DEVICE_CODE),
            ("device_code", device_code),
            ("client_id", &issuer),
        ],
    )
    .await
}

/// §5.metadata: the verdict, and the metadata whenever it parsed (a
/// mismatch with the card is a FAIL, yet the endpoints are still usable).
async fn metadata(
    r: &mut Runner<'_>,
    d: &DelegationInfo,
    scopes: &[String],
) -> (Verdict, Option<AuthServer>) {
    let read = async {
        let res = r.send(Request::get(&d.metadata_url), Kind::Plain).await?;
        let v = expect::ok_json(&res).map_err(|p| during("RFC 8414 metadata", p))?;
        let server = oauth::parse_metadata(&v).map_err(|e| fail(e.to_string(), Some(&res)))?;
        Ok::<_, Problem>((res, v, server))
    };
    let read = read.await;
    let verdict = verdict_on(&read, |(res, v, server)| {
        metadata_problems(d, scopes, res, v, server)
    });
    (verdict, read.ok().map(|(_, _, server)| server))
}

fn metadata_problems(
    d: &DelegationInfo,
    scopes: &[String],
    res: &Response,
    v: &Value,
    server: &AuthServer,
) -> Verdict {
    let mut problems = Vec::new();
    if server.device_authorization_endpoint != d.device_authorization_url {
        problems.push(format!(
            "device_authorization_endpoint {} ≠ the card's deviceAuthorizationUrl {}",
            server.device_authorization_endpoint, d.device_authorization_url
        ));
    }
    if server.token_endpoint != d.token_url {
        problems.push(format!(
            "token_endpoint {} ≠ the card's tokenUrl {}",
            server.token_endpoint, d.token_url
        ));
    }
    if let Some(supported) = v.get("scopes_supported").and_then(Value::as_array) {
        for s in scopes {
            if !supported.iter().any(|x| x.as_str() == Some(s)) {
                problems.push(format!("scopes_supported lacks the card's scope {s}"));
            }
        }
    }
    if let Some(grants) = v.get("grant_types_supported").and_then(Value::as_array)
        && !grants
            .iter()
            .any(|g| g.as_str() == Some(GRANT_TYPE_DEVICE_CODE))
    {
        problems.push("grant_types_supported lacks the device_code grant".to_owned());
    }
    if problems.is_empty() {
        Ok(String::new())
    } else {
        Err(fail(problems.join("; "), Some(res)))
    }
}

/// §5.4.jwks: the verdict, and the Provider's keys when they were read.
async fn jwks(
    r: &mut Runner<'_>,
    server: Option<&AuthServer>,
) -> (Verdict, Option<ProviderKeySet>) {
    let Some(server) = server else {
        return (Err(skip("no metadata (§5.metadata), so no jwks_uri")), None);
    };
    let read = async {
        let res = r.send(Request::get(&server.jwks_uri), Kind::Plain).await?;
        let v = expect::ok_json(&res)?;
        let keys = oauth::keyset_from_jwks(&v).map_err(|e| fail(e.to_string(), Some(&res)))?;
        let n = v.get("keys").and_then(Value::as_array).map_or(0, Vec::len);
        Ok::<_, Problem>((keys, n))
    };
    let read = read.await;
    let verdict = verdict_on(&read, |(_, n)| Ok(format!("{n} key(s)")));
    (verdict, read.ok().map(|(keys, _)| keys))
}

/// PACT §5.7: unknown types or fields and malformed details are refused.
async fn details_refused(r: &mut Runner<'_>, f: &Flow<'_>, unknown_type: bool) -> Verdict {
    let Some(server) = &f.server else {
        return Err(skip("no metadata (§5.metadata)"));
    };
    let Some(known) = server.details_types.first().cloned() else {
        return Err(skip(
            "the metadata declares no authorization_details_types_supported (§5.7 is optional)",
        ));
    };
    let cases: Vec<(&str, String)> = if unknown_type {
        vec![(
            "an unknown type",
            json!([{"type": r.unique("unknown-type")}]).to_string(),
        )]
    } else {
        vec![
            ("details that are not JSON", "not json".to_owned()),
            (
                "an object instead of an array",
                json!({"type": known}).to_string(),
            ),
            (
                "an unknown field",
                json!([{"type": known, "pact_conformance_unknown_field": true}]).to_string(),
            ),
        ]
    };
    let scope = f.scopes.join(" ");
    let issuer = r.signer.issuer.clone();
    for (label, details) in cases {
        let res = oauth_post(
            r,
            &f.d.device_authorization_url,
            Some(&f.sub),
            &[
                ("client_id", &issuer),
                ("scope", &scope),
                ("authorization_details", &details),
            ],
        )
        .await?;
        expect::oauth_error(&res, "invalid_authorization_details", 400)
            .map_err(|p| during(label, p))?;
    }
    Ok(String::new())
}

/// Starts a device authorization for `scopes`.
async fn start(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    scopes: &[String],
) -> Result<(Response, DeviceAuthorizationResponse), Problem> {
    let scope = scopes.join(" ");
    let issuer = r.signer.issuer.clone();
    let res = oauth_post(
        r,
        &f.d.device_authorization_url,
        Some(&f.sub),
        &[("client_id", &issuer), ("scope", &scope)],
    )
    .await?;
    let dev = oauth::parse_device_response(&res).map_err(|e| fail(e.to_string(), Some(&res)))?;
    Ok((res, dev))
}

/// Starts a device authorization and asks the approver to decide it.
async fn ask(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    purpose: &str,
    scopes: &[String],
    decision: Decision,
    account: Account,
) -> Result<DeviceAuthorizationResponse, Problem> {
    let (_, dev) = start(r, f, scopes).await?;
    let request = ApprovalRequest {
        brand: f.setup.iface().to_owned(),
        brand_name: f.setup.card.name.clone(),
        user_code: dev.user_code.clone(),
        verification_uri: dev.verification_uri.clone(),
        verification_uri_complete: dev.verification_uri_complete.clone(),
        requested_scopes: scopes.to_vec(),
        decision,
        account,
        purpose: purpose.to_owned(),
    };
    let approver = r.approver;
    match approver.approve(&request).await {
        ApprovalStatus::Done | ApprovalStatus::Asked => Ok(dev),
        ApprovalStatus::Unavailable(why) => Err(skip(why)),
        ApprovalStatus::Failed(why) => Err(fail(format!("the approver failed: {why}"), None)),
    }
}

/// Polls as a careful client until the decision (RFC 8628 §3.5).
async fn decided(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    dev: &DeviceAuthorizationResponse,
) -> Result<PollOutcome, Problem> {
    let mut ignore = |_| {};
    let outcome =
        oauth::poll_until_decided(&r.http, &r.signer, &f.sub, &f.d.token_url, dev, &mut ignore)
            .await
            .map_err(|e| fail(format!("polling failed: {e:#}"), None))?;
    match &outcome {
        PollOutcome::Denied(res)
        | PollOutcome::Expired(Some(res))
        | PollOutcome::Failed(_, Some(res)) => r.observe(res, Kind::OAuth),
        PollOutcome::Granted { response, .. } => r.observe(response, Kind::OAuth),
        _ => {}
    }
    Ok(outcome)
}

/// Tokens from a decided authorization, or why not.
fn granted(outcome: PollOutcome) -> Result<(TokenResponse, Response), Problem> {
    match outcome {
        PollOutcome::Granted { tokens, response } => Ok((tokens, response)),
        PollOutcome::Denied(res) => Err(fail(
            "the request was denied; it should have been approved",
            Some(&res),
        )),
        PollOutcome::Expired(res) => Err(fail(
            "no approval arrived before the code expired",
            res.as_ref(),
        )),
        PollOutcome::Failed(why, res) => Err(fail(why, res.as_ref())),
    }
}

/// The device authorization, pending, slow_down and expiry checks, on
/// one code nobody approves. Returns that code when its expiry is to be
/// checked at the end of the run.
async fn device_phase(r: &mut Runner<'_>, f: &Flow<'_>) -> Option<Expiring> {
    let t = Instant::now();
    let started = start(r, f, &f.scopes.clone()).await;
    let issued_at = Instant::now();
    let verdict = verdict_on(&started, |(res, dev)| device_response_problems(res, dev));
    r.record(R::DeviceAuthorization, t, verdict);
    let dev = started.as_ref().ok().map(|(_, d)| d.clone());
    check!(
        r,
        R::PactdCodes,
        match &dev {
            None => Err(skip("no device authorization")),
            Some(dev) => pactd_codes(dev),
        }
    );
    check!(r, R::PactdUrls, {
        let server = f.server.clone();
        pactd_urls(f.setup, server.as_ref(), dev.as_ref(), Some(&f.d))
    });
    let Some(dev) = dev else {
        r.skip_all(
            PHASE_DEVICE,
            "no device authorization (§5.1.device-authorization)",
        );
        return None;
    };
    let token_url = f.d.token_url.clone();
    // The interval this client keeps to: RFC 8628 §3.5 has the client add
    // 5 s after every slow_down, for good.
    let mut interval = dev.interval.max(1);
    let margin = Duration::from_millis(150);

    // As a careful client: wait the interval before polling.
    tokio::time::sleep(Duration::from_secs(interval) + margin).await;
    let t = Instant::now();
    let v = expect::answered_oauth_error(
        poll(r, f, &token_url, &dev.device_code).await,
        "authorization_pending",
        400,
    );
    r.record(R::AuthorizationPending, t, v);

    // At once again: too fast (PACT §5.3).
    let t = Instant::now();
    let v = poll(r, f, &token_url, &dev.device_code)
        .await
        .and_then(|res| expect::oauth_error(&res, "slow_down", 400))
        .map(|_| format!("polled again at once (interval {interval} s)"))
        .map_err(|p| during("polling again at once", p));
    let slowed = v.is_ok();
    r.record(R::SlowDown, t, v);
    if !slowed {
        r.skip_all(
            &[R::SlowDownHonoured, R::SlowDownAdds5s],
            "no slow_down to start from (§5.3.slow-down)",
        );
    } else {
        interval += oauth::SLOW_DOWN_STEP_SECS;
        // Honour it: wait the grown interval; the Provider must not ask
        // to slow down again.
        tokio::time::sleep(Duration::from_secs(interval) + margin).await;
        let t = Instant::now();
        let v = poll(r, f, &token_url, &dev.device_code)
            .await
            .and_then(|res| expect::oauth_error(&res, "authorization_pending", 400))
            .map(|_| format!("waited {interval} s after slow_down: authorization_pending"))
            .map_err(|p| during(&format!("polling {interval} s after slow_down"), p));
        let honoured = v.is_ok();
        r.record(R::SlowDownHonoured, t, v);

        // pactd also enforces the increase for good: a poll at the old
        // interval (+1 s) is still too fast. PACT leaves enforcing it
        // open (the increase is the client's duty), hence INFO.
        let t = Instant::now();
        let v = if !honoured {
            Err(skip(
                "the honoured poll was not pending (§5.3.slow-down-honoured)",
            ))
        } else {
            let old = dev.interval.max(1) + 1;
            tokio::time::sleep(Duration::from_secs(old)).await;
            poll(r, f, &token_url, &dev.device_code)
                .await
                .and_then(|res| expect::oauth_error(&res, "slow_down", 400))
                .map(|_| format!("{old} s after the last poll is still too fast: the increase holds"))
                .map_err(|p| {
                    during(
                        &format!(
                            "polling {old} s after the last poll (the interval should now be {interval} s)"
                        ),
                        p,
                    )
                })
        };
        r.record(R::SlowDownAdds5s, t, v);
    }

    // The code expires while the other flows run; checked at the end.
    if !r.wants(R::ExpiredToken) {
        return None;
    }
    let wait = Duration::from_secs(dev.expires_in);
    if wait > r.cfg.max_wait {
        let why = format!(
            "device codes live {} s, longer than the longest wait of this run ({} s)",
            dev.expires_in,
            r.cfg.max_wait.as_secs()
        );
        r.record(R::ExpiredToken, Instant::now(), Err(skip(why)));
        return None;
    }
    Some(Expiring {
        dev,
        at: issued_at + wait,
    })
}

/// RFC 8628 §3.5 `expired_token`, once the unapproved code has expired.
async fn expired(r: &mut Runner<'_>, f: &Flow<'_>, code: &Expiring) -> Verdict {
    tokio::time::sleep_until((code.at + Duration::from_millis(1500)).into()).await;
    let res = poll(r, f, &f.d.token_url.clone(), &code.dev.device_code).await?;
    expect::oauth_error(&res, "expired_token", 400)?;
    Ok(String::new())
}

fn device_response_problems(res: &Response, dev: &DeviceAuthorizationResponse) -> Verdict {
    let mut problems = Vec::new();
    if dev.device_code.is_empty() || dev.user_code.is_empty() {
        problems.push("device_code and user_code must not be empty".to_owned());
    }
    for (name, u) in [
        ("verification_uri", &dev.verification_uri),
        ("verification_uri_complete", &dev.verification_uri_complete),
    ] {
        if url::Url::parse(u).is_err() {
            problems.push(format!("{name} {u:?} is not a URL"));
        }
    }
    if dev.expires_in == 0 || dev.interval == 0 {
        problems.push("expires_in and interval must be positive".to_owned());
    }
    if !res
        .header("cache-control")
        .is_some_and(|c| c.to_ascii_lowercase().contains("no-store"))
    {
        problems.push("Cache-Control: no-store is missing".to_owned());
    }
    if problems.is_empty() {
        Ok(format!(
            "expires_in {} s, interval {} s",
            dev.expires_in, dev.interval
        ))
    } else {
        Err(fail(problems.join("; "), Some(res)))
    }
}

/// pactd: `XXXX-XXXX` from the 20 consonants, and links to `{public_url}/device`.
fn pactd_codes(dev: &DeviceAuthorizationResponse) -> Verdict {
    let code = &dev.user_code;
    let half = USER_CODE_LENGTH / 2;
    let shaped = code.len() == USER_CODE_LENGTH + 1
        && code.bytes().enumerate().all(|(i, c)| {
            if i == half {
                c == b'-'
            } else {
                USER_CODE_ALPHABET.contains(&c)
            }
        });
    if !shaped {
        let alphabet = String::from_utf8_lossy(USER_CODE_ALPHABET);
        return Err(fail(
            format!("user_code {code:?} is not XXXX-XXXX of {alphabet}"),
            None,
        ));
    }
    let expected = format!("{}?user_code={code}", dev.verification_uri);
    if dev.verification_uri_complete != expected {
        return Err(fail(
            format!(
                "verification_uri_complete is {:?}, expected {expected:?}",
                dev.verification_uri_complete
            ),
            None,
        ));
    }
    Ok(String::new())
}

/// pactd: the §1 table.
fn pactd_urls(
    s: &Setup,
    server: Option<&AuthServer>,
    dev: Option<&DeviceAuthorizationResponse>,
    d: Option<&DelegationInfo>,
) -> Verdict {
    let iface = s.iface();
    let Some((base, _)) = split_iface(iface) else {
        return Err(fail(
            format!("the interface URL {iface} is not {{public_url}}/a2a/{{brand_id}}"),
            None,
        ));
    };
    let public_url = base.trim_end_matches("/a2a");
    let oauth_base = format!("{iface}/oauth");
    let mut expected: Vec<(&str, String, String)> = Vec::new();
    expected.push((
        "the card URL",
        s.card_res.url.clone(),
        format!("{iface}/.well-known/agent-card.json"),
    ));
    if let Some(d) = d {
        expected.push((
            "deviceAuthorizationUrl",
            d.device_authorization_url.clone(),
            format!("{oauth_base}/device_authorization"),
        ));
        expected.push((
            "tokenUrl",
            d.token_url.clone(),
            format!("{oauth_base}/token"),
        ));
        expected.push((
            "oauth2MetadataUrl",
            d.metadata_url.clone(),
            format!("{oauth_base}/.well-known/oauth-authorization-server"),
        ));
    }
    if let Some(s) = server {
        expected.push(("issuer", s.issuer.clone(), oauth_base.clone()));
        expected.push((
            "jwks_uri",
            s.jwks_uri.clone(),
            format!("{oauth_base}/jwks.json"),
        ));
        expected.push((
            "revocation_endpoint",
            s.revocation_endpoint.clone().unwrap_or_default(),
            format!("{oauth_base}/revoke"),
        ));
    }
    if let Some(dev) = dev {
        expected.push((
            "verification_uri",
            dev.verification_uri.clone(),
            format!("{public_url}/device"),
        ));
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(_, got, want)| got != want)
        .map(|(name, got, want)| format!("{name} is {got}, expected {want}"))
        .collect();
    if wrong.is_empty() {
        Ok(format!("{} URLs", expected.len()))
    } else {
        Err(fail(wrong.join("; "), None))
    }
}

/// §5.5 step-up without a token.
async fn step_up_phase(r: &mut Runner<'_>, f: &Flow<'_>) -> StepUp {
    let t = Instant::now();
    let mut step_up = StepUp::default();
    let v = step_up_task(r, f, &mut step_up).await;
    r.record(R::StepUpTask, t, v);
    check!(
        r,
        R::StepUpContextOpen,
        step_up_context_open(r, f, &step_up).await
    );
    step_up
}

/// PACT §5.5: after a step-up the conversation stays open.
async fn step_up_context_open(r: &mut Runner<'_>, f: &Flow<'_>, step_up: &StepUp) -> Verdict {
    let Some(ctx) = step_up.ctx.clone() else {
        return Err(skip("no step-up task (§5.5.step-up-task)"));
    };
    let prompt = r.cfg.public_prompt.clone();
    let sub = f.sub.clone();
    let res = r.say(f.setup, &sub, &prompt, Some(&ctx), None).await?;
    let m = expect::reply_message(&res)
        .map_err(|p| during("a public question in the step-up's context", p))?;
    if m.get("contextId").and_then(Value::as_str) != Some(ctx.as_str()) {
        return Err(fail("the reply names another context", Some(&res)));
    }
    Ok(String::new())
}

/// §5.5.step-up-task; fills `found` with what the task names, even when
/// the task breaks a rule (the grant still follows it).
async fn step_up_task(r: &mut Runner<'_>, f: &Flow<'_>, found: &mut StepUp) -> Verdict {
    let prompt = r.cfg.scoped_prompt.clone();
    let sub = f.sub.clone();
    let res = r.say(f.setup, &sub, &prompt, None, None).await?;
    let v = expect::ok_json(&res)?;
    if v.get("message").is_some() {
        return Err(skip(format!(
            "{prompt:?} was answered without any scope: pass --scoped-prompt with a message that needs one"
        )));
    }
    let Some(task) = v.get("task") else {
        return Err(fail(
            "the reply is neither a message nor a task",
            Some(&res),
        ));
    };
    let ctx = task.get("contextId").and_then(Value::as_str).unwrap_or("");
    if !ctx.is_empty() {
        found.ctx = Some(ctx.to_owned());
    }
    let missing: Vec<String> = oauth::strings(
        task.get("metadata")
            .and_then(|m| m.get("pact.missingScopes")),
    );
    found.needed = missing.clone();
    let mut problems = Vec::new();
    if task
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        problems.push("task.id is missing".to_owned());
    }
    if ctx.is_empty() {
        problems.push("task.contextId is missing".to_owned());
    }
    let status = task.get("status").cloned().unwrap_or_default();
    if status.get("state").and_then(Value::as_str) != Some("TASK_STATE_AUTH_REQUIRED") {
        problems.push(format!(
            "status.state is {:?}, not TASK_STATE_AUTH_REQUIRED",
            status.get("state")
        ));
    }
    match status.get("message") {
        None => problems.push("status.message is missing".to_owned()),
        Some(m) => {
            if m.get("role").and_then(Value::as_str) != Some("ROLE_AGENT") {
                problems.push("status.message.role is not ROLE_AGENT".to_owned());
            }
            let parts_ok = m.get("parts").and_then(Value::as_array).is_some_and(|p| {
                !p.is_empty()
                    && p.iter()
                        .all(|x| x.get("text").is_some_and(Value::is_string))
            });
            if !parts_ok {
                problems.push("status.message.parts are not text parts".to_owned());
            }
        }
    }
    if missing.is_empty() {
        problems.push("metadata[\"pact.missingScopes\"] is missing or empty".to_owned());
    }
    if let Some(unknown) = missing.iter().find(|s| !f.scopes.contains(*s)) {
        problems.push(format!(
            "pact.missingScopes names {unknown:?}, not a scope of the card"
        ));
    }
    let link = task
        .get("metadata")
        .and_then(|m| m.get("pact.verificationUriComplete"))
        .and_then(Value::as_str);
    if link.is_none_or(|l| url::Url::parse(l).is_err()) {
        problems
            .push("metadata[\"pact.verificationUriComplete\"] is missing or not a URL".to_owned());
    }
    if problems.is_empty() {
        Ok(format!("missing {}", missing.join(", ")))
    } else {
        Err(fail(problems.join("; "), Some(&res)))
    }
}

/// RFC 8628 §3.5 `access_denied`.
async fn denied(r: &mut Runner<'_>, f: &Flow<'_>) -> Verdict {
    let dev = ask(
        r,
        f,
        R::AccessDenied.name(),
        &f.scopes.clone(),
        Decision::Deny,
        Account::Primary,
    )
    .await?;
    match decided(r, f, &dev).await? {
        PollOutcome::Denied(res) => {
            expect::oauth_error(&res, "access_denied", 400)?;
            Ok(String::new())
        }
        PollOutcome::Granted { response, .. } => Err(fail(
            "tokens were issued although the request was denied",
            Some(&response),
        )),
        PollOutcome::Expired(res) => Err(fail("no decision before the code expired", res.as_ref())),
        PollOutcome::Failed(why, res) => Err(fail(why, res.as_ref())),
    }
}

/// The main grant (§5.3) and everything done with it (§5.4–§5.6), in the
/// order a PA meets them: redeem the code, look at the token, send with it,
/// check the receipts, refresh, let a second account try the context,
/// revoke. Each step records its own checks.
async fn grant_phase(r: &mut Runner<'_>, f: &Flow<'_>, step_up: &StepUp) {
    let Some(grant) = main_grant(r, f, step_up).await else {
        return;
    };
    token_checks(r, f, &grant).await;
    let turn = first_turn(r, f, &grant, step_up).await;
    if let Some(turn) = &turn {
        receipt_checks(r, f, &grant, turn).await;
    }
    let token = grant.tokens.access_token.as_str();
    check!(
        r,
        R::TamperedTokenRefused,
        tampered_token(r, f, token).await
    );
    check!(
        r,
        R::TokenOtherBrandRefused,
        token_other_brand(r, f, token).await
    );
    let ctx = turn.as_ref().and_then(|t| t.ctx.as_deref());
    let refreshed = refresh_checks(r, f, &grant, ctx).await;
    if r.wants_some(PHASE_SECOND) {
        let bound = turn.as_ref().and_then(FirstTurn::bound);
        second_account(r, f, &grant.approved, bound).await;
    }
    let current = refreshed.as_ref().unwrap_or(&grant.tokens);
    check!(r, R::RevokedGrantRefused, revoked(r, f, current).await);
}

/// The main grant: what was asked for and approved, and what came back.
struct Grant {
    requested: Vec<String>,
    approved: Vec<String>,
    device_code: String,
    tokens: TokenResponse,
    /// The access token's claims, read without verifying, to compare the
    /// receipts with (§5.4.delegation-token verifies them).
    claims: Value,
}

/// What to approve: exactly what the scoped prompt needs when that is less
/// than everything, so the granted scope is visibly less than requested.
fn scopes_to_approve(all: &[String], needed: &[String]) -> Vec<String> {
    let needed_set: BTreeSet<&String> = needed.iter().collect();
    let all_set: BTreeSet<&String> = all.iter().collect();
    if !needed_set.is_empty() && needed_set.len() < all_set.len() && needed_set.is_subset(&all_set)
    {
        needed.to_vec()
    } else {
        all.to_vec()
    }
}

/// Records `p` as check `id` and SKIPs every check in `rest` with why: the
/// grant they all need did not happen.
fn no_grant(r: &mut Runner<'_>, id: R, t: Instant, p: Problem, rest: &[&[R]], what: &str) {
    let why = format!("{what}: {}", reason_of(&p));
    r.record(id, t, Err(p));
    for ids in rest {
        r.skip_all(ids, &why);
    }
}

/// Asks for the main grant and redeems it (§5.3.token-response), trying
/// the code at another brand first while it is still unredeemed
/// (§5.3.foreign-code). `None` when no grant came: then every check that
/// needs one is SKIP.
async fn main_grant(r: &mut Runner<'_>, f: &Flow<'_>, step_up: &StepUp) -> Option<Grant> {
    let requested = f.scopes.clone();
    let approved = scopes_to_approve(&f.scopes, &step_up.needed);
    let give_up = |r: &mut Runner<'_>, t, p| {
        no_grant(
            r,
            R::TokenResponse,
            t,
            p,
            &[PHASE_GRANT, PHASE_SECOND],
            "no grant",
        );
    };
    let t = Instant::now();
    let decision = Decision::Approve {
        scopes: approved.clone(),
    };
    let purpose = "the main grant (§5.3–§5.6)";
    let dev = ask(r, f, purpose, &requested, decision, Account::Primary).await;
    let dev = dev.map_err(|p| give_up(r, t, p)).ok()?;
    check!(
        r,
        R::ForeignCode,
        foreign_code(r, f, &dev.device_code).await
    );
    let t = Instant::now();
    let redeemed = decided(r, f, &dev).await.and_then(granted);
    let (tokens, res) = redeemed.map_err(|p| give_up(r, t, p)).ok()?;
    r.record(R::TokenResponse, t, token_response_problems(&res, &tokens));
    let claims = decode_unverified(&tokens.access_token)
        .map(|(_, c)| c)
        .unwrap_or_default();
    Some(Grant {
        requested,
        approved,
        device_code: dev.device_code,
        tokens,
        claims,
    })
}

/// What the token response and the token say before the token is used:
/// the scope, single redemption, the token's claims and header, and the
/// PA-JWT still required beside it (§5.5 step 1).
async fn token_checks(r: &mut Runner<'_>, f: &Flow<'_>, g: &Grant) {
    check!(
        r,
        R::ScopeMayBeLess,
        scope_less(&g.tokens, &g.requested, &g.approved)
    );
    check!(r, R::RedeemTwice, {
        let token_url = f.d.token_url.clone();
        let sent = poll(r, f, &token_url, &g.device_code).await;
        expect::answered_oauth_error(sent, "invalid_grant", 400)
    });
    check!(r, R::DelegationToken, delegation_token(r, f, &g.tokens));
    check!(r, R::PactdHeader, pactd_header(&g.tokens.access_token));
    check!(r, R::PaJwtCheckedFirst, {
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let req = f
            .setup
            .a2a_request(Method::POST, "message:send", None)
            .header(
                DELEGATION_HEADER,
                format!("Bearer {}", g.tokens.access_token),
            )
            .json(body);
        expect::answered_bare_401(r.send(req, Kind::A2a).await)
            .map_err(|p| during("a delegation token without a PA-JWT", p))
    });
}

/// pactd (RFC 9068 §2.1): the token's header says `typ: at+jwt` and names its key.
fn pactd_header(access_token: &str) -> Verdict {
    let Some((h, _)) = decode_unverified(access_token) else {
        return Err(fail("the access token is not a JWT", None));
    };
    if h.get("typ").and_then(Value::as_str) != Some("at+jwt") {
        Err(fail(
            format!("typ is {:?}, not \"at+jwt\"", h.get("typ")),
            None,
        ))
    } else if !h.get("kid").is_some_and(Value::is_string) {
        Err(fail("the header has no kid", None))
    } else {
        Ok(String::new())
    }
}

/// §5.5.step-up-resend: the first delegated turn, re-sent with the token in
/// the step-up's context. `None` when no reply came; the receipt checks,
/// which need one, are then SKIP.
async fn first_turn(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    g: &Grant,
    step_up: &StepUp,
) -> Option<FirstTurn> {
    let t = Instant::now();
    let sent = delegated_turn(r, f, &g.tokens.access_token, step_up.ctx.clone(), None).await;
    let verdict = verdict_on(&sent, |(res, m, _)| {
        let Some(ctx) = &step_up.ctx else {
            return Err(skip(
                "no step-up task to follow (§5.5.step-up-task); sent in a new context",
            ));
        };
        if m.get("contextId").and_then(Value::as_str) == Some(ctx.as_str()) {
            Ok("answered in the step-up's context".to_owned())
        } else {
            Err(fail("the reply names another context", Some(res)))
        }
    });
    r.record(R::StepUpResend, t, verdict);
    let no_reply = |r: &mut Runner<'_>, p: Problem| {
        let why = format!("no delegated reply: {}", reason_of(&p));
        let receipts = [
            R::ReceiptPresent,
            R::ReceiptVerifies,
            R::ReceiptOnRetry,
            R::ReceiptChain,
        ];
        r.skip_all(&receipts, &why);
    };
    let (res, message, body) = sent.map_err(|p| no_reply(r, p)).ok()?;
    Some(FirstTurn {
        ctx: message
            .get("contextId")
            .and_then(Value::as_str)
            .map(str::to_owned),
        receipt: message
            .get("metadata")
            .and_then(|m| m.get("pact.receipt"))
            .cloned(),
        res,
        body,
        message,
    })
}

/// §5.6: the first turn's receipt, its signature, a retry, and the chain.
async fn receipt_checks(r: &mut Runner<'_>, f: &Flow<'_>, g: &Grant, turn: &FirstTurn) {
    check!(
        r,
        R::ReceiptPresent,
        receipt_present(Some(&turn.res), turn.receipt.as_ref())
    );
    check!(
        r,
        R::ReceiptVerifies,
        receipt_verifies(r, f, turn.receipt.as_ref(), &g.claims, &g.tokens)
    );
    let token = g.tokens.access_token.as_str();
    check!(
        r,
        R::ReceiptOnRetry,
        receipt_on_retry(r, f, token, turn).await
    );
    check!(r, R::ReceiptChain, receipt_chain(r, f, token, turn).await);
}

/// §5.3.refresh and pactd's rotation. The refreshed tokens, when refresh
/// worked: the rest of the run goes on with them.
async fn refresh_checks(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    g: &Grant,
    ctx: Option<&str>,
) -> Option<TokenResponse> {
    let t = Instant::now();
    let refreshed = refresh_check(r, f, &g.tokens, ctx).await;
    r.record(R::Refresh, t, verdict_on(&refreshed, |_| Ok(String::new())));
    check!(r, R::PactdRefreshRotates, {
        match &refreshed {
            Err(_) => Err(skip("no refresh (§5.3.refresh)")),
            Ok(new) if new.refresh_token == g.tokens.refresh_token => Err(fail(
                "the refresh kept the same refresh token (RFC 6749 §6 allows it; pactd rotates)",
                None,
            )),
            Ok(_) => Ok("a new refresh token".to_owned()),
        }
    });
    refreshed.ok()
}

/// The first delegated turn of the main grant.
struct FirstTurn {
    /// The context the reply names.
    ctx: Option<String>,
    res: Response,
    /// The request body (to retry the same messageId).
    body: Value,
    message: Value,
    receipt: Option<Value>,
}

impl FirstTurn {
    /// The context now bound to the primary account, and the request that
    /// bound it (§5.5: one user per context).
    fn bound(&self) -> Option<(&str, &Value)> {
        self.ctx.as_deref().map(|c| (c, &self.body))
    }
}

/// PACT §5.3: another brand's token endpoint does not know this code.
async fn foreign_code(r: &mut Runner<'_>, f: &Flow<'_>, device_code: &str) -> Verdict {
    let other = f.setup.other_brand()?;
    let Some(od) = other.delegation else {
        return Err(skip(
            "the other brand offers no delegation, so it has no token endpoint",
        ));
    };
    expect::answered_oauth_error(
        poll(r, f, &od.token_url, device_code).await,
        "invalid_grant",
        400,
    )
}

/// PACT §4: a retried messageId returns the same reply and receipt.
async fn receipt_on_retry(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    token: &str,
    turn: &FirstTurn,
) -> Verdict {
    let (Some(_), Some(rc)) = (&turn.ctx, &turn.receipt) else {
        return Err(skip("no receipt to retry (§5.6.receipt-present)"));
    };
    let sub = f.sub.clone();
    let res = r
        .post_message(f.setup, &sub, turn.body.clone(), Some(token))
        .await?;
    let m = expect::reply_message(&res).map_err(|p| during("the retry", p))?;
    let again = m.get("metadata").and_then(|x| x.get("pact.receipt"));
    if m.get("messageId") != turn.message.get("messageId") {
        return Err(fail(
            "the retry got a different reply messageId",
            Some(&res),
        ));
    }
    if again.and_then(|x| x.get("jws")) != rc.get("jws") {
        return Err(fail("the retry got a different receipt", Some(&res)));
    }
    Ok(String::new())
}

/// pactd: each receipt's `prev` is the hash of the grant's previous one.
async fn receipt_chain(r: &mut Runner<'_>, f: &Flow<'_>, token: &str, turn: &FirstTurn) -> Verdict {
    let (Some(c), Some(rc)) = (&turn.ctx, &turn.receipt) else {
        return Err(skip("no first receipt (§5.6.receipt-present)"));
    };
    let (res, m, _) = delegated_turn(r, f, token, Some(c.clone()), None)
        .await
        .map_err(|p| during("a second delegated turn", p))?;
    let prev = m
        .get("metadata")
        .and_then(|x| x.get("pact.receipt"))
        .and_then(|x| x.get("claims"))
        .and_then(|x| x.get("prev"));
    let jws1 = rc.get("jws").and_then(Value::as_str).unwrap_or("");
    match prev {
        None => Err(fail(
            "receipts carry no prev (the chain is a pactd extension)",
            Some(&res),
        )),
        Some(p) if p.as_str() == Some(pact_jose::receipt_hash(jws1).as_str()) => {
            Ok("prev = base64url(SHA-256(previous JWS))".to_owned())
        }
        Some(p) => Err(fail(
            format!("prev is {p}, not the hash of the grant's previous receipt"),
            Some(&res),
        )),
    }
}

/// PACT §5.4/§5.5: a token is good for one brand only.
async fn token_other_brand(r: &mut Runner<'_>, f: &Flow<'_>, token: &str) -> Verdict {
    let other = f.setup.other_brand()?;
    let jwt = r.jwt(&f.sub)?;
    let req = Request::post(format!("{}/message:send", other.iface))
        .bearer(jwt)
        .header(DELEGATION_HEADER, format!("Bearer {token}"))
        .json(message_body(&r.cfg.public_prompt.clone(), None, None));
    expect::answered_invalid_token(r.send(req, Kind::A2a).await)
}

fn token_response_problems(res: &Response, t: &TokenResponse) -> Verdict {
    let mut problems = Vec::new();
    if t.access_token.is_empty() || t.refresh_token.is_empty() {
        problems.push("access_token and refresh_token must not be empty".to_owned());
    }
    if t.expires_in == 0 {
        problems.push("expires_in must be positive".to_owned());
    }
    if !res
        .header("cache-control")
        .is_some_and(|c| c.to_ascii_lowercase().contains("no-store"))
    {
        problems.push("Cache-Control: no-store is missing (RFC 6749 §5.1)".to_owned());
    }
    if problems.is_empty() {
        Ok(format!(
            "scope {:?}, expires_in {} s",
            t.scope, t.expires_in
        ))
    } else {
        Err(fail(problems.join("; "), Some(res)))
    }
}

/// PACT §5.3: `scope` may be less than requested; never more.
fn scope_less(t: &TokenResponse, requested: &[String], approved: &[String]) -> Verdict {
    let granted = scope_set(&t.scope);
    let requested: BTreeSet<String> = requested.iter().cloned().collect();
    let approved: BTreeSet<String> = approved.iter().cloned().collect();
    if !granted.is_subset(&requested) {
        return Err(fail(
            format!("granted {:?}, more than requested {:?}", t.scope, requested),
            None,
        ));
    }
    if !approved.is_subset(&granted) {
        return Err(fail(
            format!("granted {:?}, less than approved {:?}", t.scope, approved),
            None,
        ));
    }
    let note = if granted.len() < requested.len() {
        format!(
            "granted {} of {} requested scopes",
            granted.len(),
            requested.len()
        )
    } else if approved.len() < requested.len() {
        "granted everything requested (an earlier grant of this account was merged)".to_owned()
    } else {
        "everything requested was approved".to_owned()
    };
    Ok(note)
}

/// PACT §5.4: the token verifies against `jwks_uri` and carries the claims.
fn delegation_token(r: &Runner<'_>, f: &Flow<'_>, t: &TokenResponse) -> Verdict {
    let Some(keys) = &f.keys else {
        return Err(skip("no provider keys (§5.4.jwks)"));
    };
    let (header, payload) = oauth::verify_jws(keys, &t.access_token).map_err(|e| fail(e, None))?;
    let claims: Value =
        serde_json::from_slice(&payload).map_err(|_| fail("the payload is not JSON", None))?;
    let mut problems = Vec::new();
    if header.get("alg").and_then(Value::as_str) != Some("ES256") {
        problems.push(format!("alg is {:?}, not ES256", header.get("alg")));
    }
    let s = |k: &str| {
        claims
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if let Some(server) = &f.server
        && s("iss") != server.issuer
    {
        problems.push(format!(
            "iss is {:?}, the metadata issuer is {:?}",
            s("iss"),
            server.issuer
        ));
    }
    match claims.get("aud") {
        Some(Value::String(a)) if *a == f.setup.iface() => {}
        other => problems.push(format!(
            "aud is {other:?}, not the interface URL {:?} as a single string",
            f.setup.iface()
        )),
    }
    for k in ["sub", "grant_id", "jti"] {
        if s(k).is_empty() {
            problems.push(format!("{k} is missing"));
        }
    }
    if s("client_id") != r.signer.issuer {
        problems.push(format!(
            "client_id is {:?}, not the PA issuer",
            s("client_id")
        ));
    }
    if scope_set(&s("scope")) != scope_set(&t.scope) {
        problems.push(format!(
            "scope {:?} differs from the token response's {:?}",
            s("scope"),
            t.scope
        ));
    }
    match (
        claims.get("iat").and_then(Value::as_i64),
        claims.get("exp").and_then(Value::as_i64),
    ) {
        (Some(iat), Some(exp)) if exp > iat && exp - iat <= 3600 => {}
        (Some(iat), Some(exp)) => problems.push(format!(
            "exp − iat is {} s (PACT §5.4: at most 1 h)",
            exp - iat
        )),
        _ => problems.push("iat or exp is missing".to_owned()),
    }
    if problems.is_empty() {
        Ok(String::new())
    } else {
        Err(fail(problems.join("; "), None))
    }
}

/// One delegated `message:send` of the scoped prompt: (response, message, request body).
async fn delegated_turn(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    token: &str,
    ctx: Option<String>,
    message_id: Option<&str>,
) -> Result<(Response, Value, Value), Problem> {
    let body = message_body(&r.cfg.scoped_prompt.clone(), ctx.as_deref(), message_id);
    let sub = f.sub.clone();
    let res = r
        .post_message(f.setup, &sub, body.clone(), Some(token))
        .await?;
    let m =
        expect::reply_message(&res).map_err(|p| during("the scoped prompt with the token", p))?;
    Ok((res, m, body))
}

fn receipt_present(res: Option<&Response>, receipt: Option<&Value>) -> Verdict {
    let Some(rc) = receipt else {
        return Err(fail(
            "the delegated reply has no metadata[\"pact.receipt\"]",
            res,
        ));
    };
    let mut problems = Vec::new();
    if !rc.get("jws").is_some_and(Value::is_string) {
        problems.push("jws is missing".to_owned());
    }
    let c = rc.get("claims").cloned().unwrap_or_default();
    for k in ["grantId", "user", "pa", "brand", "ts"] {
        if !c.get(k).is_some_and(Value::is_string) {
            problems.push(format!("claims.{k} is missing"));
        }
    }
    if !c
        .get("scopesUsed")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().all(Value::is_string))
    {
        problems.push("claims.scopesUsed is not an array of scope ids".to_owned());
    }
    let actions_ok = c.get("actions").and_then(Value::as_array).is_some_and(|a| {
        a.iter().all(|x| {
            x.get("tool").is_some_and(Value::is_string)
                && x.get("argsHash").is_none_or(Value::is_string)
        })
    });
    if !actions_ok {
        problems.push("claims.actions is not an array of {tool, argsHash?}".to_owned());
    }
    if let Some(ts) = c.get("ts").and_then(Value::as_str)
        && time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).is_err()
    {
        problems.push(format!("claims.ts {ts:?} is not RFC 3339"));
    }
    if problems.is_empty() {
        Ok(String::new())
    } else {
        Err(fail(problems.join("; "), res))
    }
}

fn receipt_verifies(
    r: &Runner<'_>,
    f: &Flow<'_>,
    receipt: Option<&Value>,
    token_claims: &Value,
    t: &TokenResponse,
) -> Verdict {
    let Some(rc) = receipt else {
        return Err(skip("no receipt (§5.6.receipt-present)"));
    };
    let Some(keys) = &f.keys else {
        return Err(skip("no provider keys (§5.4.jwks)"));
    };
    let claims = oauth::verify_receipt(keys, rc).map_err(|e| fail(e, None))?;
    let mut problems = Vec::new();
    if claims.pa != r.signer.issuer {
        problems.push(format!("pa is {:?}, not the PA issuer", claims.pa));
    }
    if claims.brand != f.setup.iface() {
        problems.push(format!(
            "brand is {:?}, not the interface URL",
            claims.brand
        ));
    }
    let tc = |k: &str| {
        token_claims
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if claims.grant_id != tc("grant_id") {
        problems.push(format!(
            "grantId {:?} is not the token's grant_id {:?}",
            claims.grant_id,
            tc("grant_id")
        ));
    }
    if claims.user != tc("sub") {
        problems.push(format!(
            "user {:?} is not the token's sub {:?}",
            claims.user,
            tc("sub")
        ));
    }
    let granted = scope_set(&t.scope);
    if let Some(s) = claims.scopes_used.iter().find(|s| !granted.contains(*s)) {
        problems.push(format!(
            "scopesUsed names {s:?}, which the token does not grant"
        ));
    }
    if problems.is_empty() {
        Ok(format!(
            "signed by the brand; actions [{}]",
            claims
                .actions
                .iter()
                .map(|a| a.tool.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        Err(fail(problems.join("; "), None))
    }
}

/// PACT §5.5: any defect of the delegation token is the 401 invalid_token.
async fn tampered_token(r: &mut Runner<'_>, f: &Flow<'_>, token: &str) -> Verdict {
    let widened = decode_unverified(token).and_then(|(_, mut c)| {
        c["scope"] = json!(format!("{} admin", f.scopes.join(" ")));
        forge::swap_payload(token, &c)
    });
    let cases = [
        (
            "one flipped signature bit",
            forge::flip_signature_bit(token),
        ),
        ("a widened scope, signature kept", widened),
        (
            "a token that is not a JWT",
            Some("not-a-delegation-token".to_owned()),
        ),
    ];
    for (label, forged) in cases {
        let Some(forged) = forged else {
            return Err(fail(format!("cannot build {label}"), None));
        };
        let sub = f.sub.clone();
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let res = r.post_message(f.setup, &sub, body, Some(&forged)).await?;
        expect::invalid_token_401(&res).map_err(|p| during(label, p))?;
    }
    Ok(String::new())
}

/// PACT §5.3 refresh: a new pair, the scope never wider; the new token works.
async fn refresh_check(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    t: &TokenResponse,
    ctx: Option<&str>,
) -> Result<TokenResponse, Problem> {
    let res = oauth_refresh(r, f, &t.refresh_token).await?;
    let new = refresh_response(&res, &t.refresh_token)?;
    if new.access_token == t.access_token {
        return Err(fail("refresh returned the same access token", Some(&res)));
    }
    if !scope_set(&new.scope).is_subset(&scope_set(&t.scope)) {
        return Err(fail(
            format!(
                "refresh widened the scope from {:?} to {:?}",
                t.scope, new.scope
            ),
            Some(&res),
        ));
    }
    let sub = f.sub.clone();
    let prompt = r.cfg.public_prompt.clone();
    let res = r
        .say(f.setup, &sub, &prompt, ctx, Some(&new.access_token))
        .await?;
    expect::reply_message(&res).map_err(|p| during("sending with the refreshed token", p))?;
    Ok(new)
}

/// A refresh response: RFC 6749 §6 lets the server keep the refresh token,
/// so a response without one keeps `old`.
fn refresh_response(res: &Response, old: &str) -> Result<TokenResponse, Problem> {
    let mut v = expect::ok_json(res)?;
    if v.get("refresh_token").is_none() {
        v["refresh_token"] = json!(old);
    }
    let t: TokenResponse = serde_json::from_value(v).map_err(|e| {
        fail(
            format!("the refresh response is not RFC 6749 §5.1: {e}"),
            Some(res),
        )
    })?;
    if !t.token_type.eq_ignore_ascii_case("bearer") {
        return Err(fail(
            format!("token_type is {:?}, not Bearer", t.token_type),
            Some(res),
        ));
    }
    Ok(t)
}

async fn oauth_refresh(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    refresh_token: &str,
) -> Result<Response, Problem> {
    let issuer = r.signer.issuer.clone();
    oauth_post(
        r,
        &f.d.token_url,
        Some(&f.sub),
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", &issuer),
        ],
    )
    .await
}

/// A second account at the brand, for one-user-per-context and refresh reuse.
async fn second_account(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    approve: &[String],
    bound: Option<(&str, &Value)>,
) {
    let give_up = |r: &mut Runner<'_>, t, p| {
        no_grant(
            r,
            R::ContextOtherUser,
            t,
            p,
            &[PHASE_SECOND],
            "no second grant",
        );
    };
    let t = Instant::now();
    let decision = Decision::Approve {
        scopes: approve.to_vec(),
    };
    let purpose = R::ContextOtherUser.name();
    let dev = ask(r, f, purpose, approve, decision, Account::Secondary).await;
    let Some(dev) = dev.map_err(|p| give_up(r, t, p)).ok() else {
        return;
    };
    let redeemed = decided(r, f, &dev).await.and_then(granted);
    let Some((tokens, _)) = redeemed.map_err(|p| give_up(r, t, p)).ok() else {
        return;
    };
    check!(
        r,
        R::ContextOtherUser,
        other_user(r, f, &tokens, bound).await
    );
    check!(
        r,
        R::RefreshReuseRevokes,
        refresh_reuse(r, f, &tokens).await
    );
}

/// PACT §5.5: a context that has run as one user refuses another, and a
/// retry never hands the first user's stored reply to the second.
async fn other_user(
    r: &mut Runner<'_>,
    f: &Flow<'_>,
    t: &TokenResponse,
    bound: Option<(&str, &Value)>,
) -> Verdict {
    let Some((ctx, first_body)) = bound else {
        return Err(skip(
            "no context ran as the first account (§5.5.step-up-resend)",
        ));
    };
    let sub = f.sub.clone();
    let body = message_body(&r.cfg.scoped_prompt.clone(), Some(ctx), None);
    let res = r
        .post_message(f.setup, &sub, body, Some(&t.access_token))
        .await?;
    expect::a2a_error(&res, ErrorReason::InvalidParams, None)
        .map_err(|p| during("another account's token in the first account's context", p))?;
    let res = r
        .post_message(f.setup, &sub, first_body.clone(), Some(&t.access_token))
        .await?;
    expect::a2a_error(&res, ErrorReason::InvalidParams, None).map_err(|p| {
        during(
            "a retried messageId of the first account, with the second account's token",
            p,
        )
    })?;
    Ok(String::new())
}

/// pactd (RFC 9700): a used refresh token revokes the whole grant.
async fn refresh_reuse(r: &mut Runner<'_>, f: &Flow<'_>, t: &TokenResponse) -> Verdict {
    let res = oauth_refresh(r, f, &t.refresh_token).await?;
    let second = oauth::parse_token_response(&res)
        .map_err(|e| fail(format!("the first refresh failed: {e}"), Some(&res)))?;
    let res = oauth_refresh(r, f, &t.refresh_token).await?;
    expect::oauth_error(&res, "invalid_grant", 400)
        .map_err(|p| during("reusing the used refresh token", p))?;
    let res = oauth_refresh(r, f, &second.refresh_token).await?;
    expect::oauth_error(&res, "invalid_grant", 400).map_err(|p| {
        during(
            "the newest refresh token after the reuse (the grant should be revoked)",
            p,
        )
    })?;
    let sub = f.sub.clone();
    let prompt = r.cfg.public_prompt.clone();
    let res = r
        .say(f.setup, &sub, &prompt, None, Some(&second.access_token))
        .await?;
    expect::invalid_token_401(&res).map_err(|p| {
        during(
            "the newest access token after the reuse (the grant should be revoked)",
            p,
        )
    })?;
    Ok(String::new())
}

/// RFC 7009 revocation, then the token is refused (PACT §5.5).
async fn revoked(r: &mut Runner<'_>, f: &Flow<'_>, t: &TokenResponse) -> Verdict {
    let Some(endpoint) = f
        .server
        .as_ref()
        .and_then(|s| s.revocation_endpoint.clone())
    else {
        return Err(skip("the metadata names no revocation_endpoint"));
    };
    let issuer = r.signer.issuer.clone();
    let res = oauth_post(
        r,
        &endpoint,
        Some(&f.sub),
        &[("token", &t.refresh_token), ("client_id", &issuer)],
    )
    .await?;
    if res.status != 200 {
        return Err(fail(
            format!("revocation answered HTTP {} (RFC 7009: 200)", res.status),
            Some(&res),
        ));
    }
    let sub = f.sub.clone();
    let prompt = r.cfg.public_prompt.clone();
    let res = r
        .say(f.setup, &sub, &prompt, None, Some(&t.access_token))
        .await?;
    expect::invalid_token_401(&res)
        .map_err(|p| during("the access token of the revoked grant", p))?;
    Ok(String::new())
}
