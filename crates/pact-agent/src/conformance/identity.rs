//! PACT §2 (the Agent Card) and §3 (personal-agent identity): the card's
//! shape, and every forged or malformed PA-JWT getting the bare 401.

use reqwest::Method;
use serde_json::{Value, json};

use super::Profile;
use super::expect::{self, Problem, Verdict, during, fail, skip};
use super::forge;
use super::runner::{Kind, Runner, check, message_body};
use crate::card;
use crate::http::Request;
use crate::jwks_server::JwksServer;
use crate::jwt::unix_now;
use crate::keys::AgentKey;

/// `({public_url}/a2a, brand)` when the interface URL has the §1 form.
pub fn split_iface(iface: &str) -> Option<(String, String)> {
    let (base, brand) = iface.rsplit_once('/')?;
    (base.ends_with("/a2a") && !brand.is_empty()).then(|| (base.to_owned(), brand.to_owned()))
}

fn problems(list: Vec<String>) -> Verdict {
    if list.is_empty() {
        Ok(String::new())
    } else {
        Err(fail(list.join("; "), None))
    }
}

/// PACT §2.
pub async fn card_checks(r: &mut Runner<'_>) {
    let Some(info) = r.card.clone() else {
        return;
    };
    let c = info.card.clone();
    check!(r, "§2.unknown-brand-404", unknown_brand(r).await);
    check!(r, "§2.interface", problems(card::check_interface(&c)));
    check!(
        r,
        "§2.pa-jwt-scheme",
        problems(card::check_pa_jwt_scheme(&c))
    );
    check!(
        r,
        "§2.identity-requirement",
        problems(card::check_identity_requirement(&c))
    );
    check!(r, "§2.delegation-scheme", {
        let has = c
            .get("securitySchemes")
            .and_then(|s| s.get("userDelegation"))
            .is_some();
        match (r.cfg.profile, has) {
            (Profile::Identity, false) => Ok("identity-only card".to_owned()),
            (Profile::Delegated, false) => Err(fail(
                "the Delegated profile needs the userDelegation scheme; the card has none",
                None,
            )),
            _ => problems(card::check_delegation(&c)),
        }
    });
    check!(r, "§2.fields", problems(card::check_fields(&c)));
    check!(r, "§2.pactd-cache-cors", {
        match &r.card_res {
            None => Err(skip("no card response")),
            Some(res) => {
                let cc = res.header("cache-control");
                let acao = res.header("access-control-allow-origin");
                if cc != Some("public, max-age=300") {
                    Err(fail(format!("Cache-Control is {cc:?}"), Some(res)))
                } else if acao != Some("*") {
                    Err(fail(
                        format!("Access-Control-Allow-Origin is {acao:?}"),
                        Some(res),
                    ))
                } else {
                    Ok(String::new())
                }
            }
        }
    });
}

/// PACT §2: an unknown brand's card is a bare 404.
async fn unknown_brand(r: &mut Runner<'_>) -> Verdict {
    let Some((base, _)) = split_iface(&r.iface()) else {
        return Err(skip(
            "the interface URL does not have the §1 form {public_url}/a2a/{brand_id}",
        ));
    };
    let url = format!(
        "{base}/{}/.well-known/agent-card.json",
        r.unique("no-such-brand")
    );
    let res = r.send(Request::get(url), Kind::Plain).await?;
    if res.status != 404 {
        return Err(fail(
            format!("expected 404, got {}", res.status),
            Some(&res),
        ));
    }
    if !res.body.is_empty() {
        return Err(fail(
            "the 404 of an unknown brand has an empty body",
            Some(&res),
        ));
    }
    Ok(String::new())
}

/// Sends `token` to `message:send` and expects the bare 401.
async fn refused(r: &mut Runner<'_>, label: &str, token: &str) -> Result<(), Problem> {
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = r
        .a2a_request(Method::POST, "message:send", Some(token))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during(label, p))
}

/// Every `(label, token)` must get the bare 401.
async fn all_refused(r: &mut Runner<'_>, cases: Vec<(String, String)>) -> Verdict {
    r.auth_gate()?;
    let n = cases.len();
    for (label, token) in cases {
        refused(r, &label, &token).await?;
    }
    Ok(if n > 1 {
        format!("{n} variants refused")
    } else {
        String::new()
    })
}

/// A valid PA-JWT edited by `edit`, under `label`.
fn edited(
    r: &mut Runner<'_>,
    label: &str,
    edit: impl FnOnce(&mut Value, &mut Value),
) -> Result<(String, String), Problem> {
    let sub = r.sub("forged");
    Ok((label.to_owned(), r.jwt_with(&sub, edit)?))
}

fn build_err(e: anyhow::Error) -> Problem {
    fail(format!("cannot build the token: {e:#}"), None)
}

/// PACT §3.
pub async fn token_checks(r: &mut Runner<'_>) {
    if !r.wants_any(&["§3."]) {
        return;
    }
    check!(r, "§3.missing-token-refused", missing_token(r).await);
    check!(r, "§3.malformed-refused", {
        let cases = ["", "a.b", "a.b.c.d", "not-a-jwt", "....", "e30.e30.e30"]
            .iter()
            .map(|t| (format!("token {t:?}"), (*t).to_owned()))
            .collect();
        all_refused(r, cases).await
    });
    check!(r, "§3.alg-none-refused", alg_none(r).await);
    check!(r, "§3.hs256-key-confusion-refused", hs256(r).await);
    check!(r, "§3.rs256-against-ec-key-refused", rs256(r).await);
    check!(r, "§3.unknown-kid-refused", foreign_key(r, false).await);
    check!(r, "§3.foreign-key-refused", foreign_key(r, true).await);
    check!(
        r,
        "§3.tampered-signature-refused",
        tampered_signature(r).await
    );
    check!(r, "§3.tampered-payload-refused", tampered_payload(r).await);
    check!(r, "§3.jku-ignored", jku(r).await);
    check!(r, "§3.oversized-refused", {
        match edited(r, "a 16 KiB PA-JWT", |_, c| {
            c["pad"] = json!("x".repeat(16 * 1024))
        }) {
            Ok(case) => all_refused(r, vec![case]).await,
            Err(p) => Err(p),
        }
    });
    check!(r, "§3.iss-unknown-refused", {
        let issuer = r.signer.issuer.clone();
        let near = match issuer.strip_suffix('/') {
            Some(s) => s.to_owned(),
            None => format!("{issuer}/"),
        };
        let unknown = r.unique("unregistered-issuer");
        let cases = [
            edited(r, "an unregistered issuer", |_, c| {
                c["iss"] = json!(format!("https://{unknown}.invalid"))
            }),
            edited(r, "a near miss of the issuer", |_, c| {
                c["iss"] = json!(near)
            }),
        ];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.sub-missing-refused", {
        let cases = [
            edited(r, "no sub", |_, c| remove(c, "sub")),
            edited(r, "an empty sub", |_, c| c["sub"] = json!("")),
            edited(r, "a numeric sub", |_, c| c["sub"] = json!(42)),
        ];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.aud-missing-refused", {
        let cases = [
            edited(r, "no aud", |_, c| remove(c, "aud")),
            edited(r, "aud null", |_, c| c["aud"] = Value::Null),
        ];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.aud-wrong-refused", {
        let cases = [edited(r, "another audience", |_, c| {
            c["aud"] = json!("https://another-provider.invalid/a2a")
        })];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.aud-array-refused", {
        let aud = r.cfg.audience.clone();
        let cases = [
            edited(r, "aud [audience]", |_, c| c["aud"] = json!([aud.clone()])),
            edited(r, "aud [audience, other]", |_, c| {
                c["aud"] = json!([aud, "https://another-provider.invalid/a2a"])
            }),
        ];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.aud-interface-url-refused", {
        let iface = r.iface();
        if iface == r.cfg.audience {
            Err(skip("the assigned audience equals the interface URL"))
        } else {
            let cases = [edited(r, "aud = the interface URL", |_, c| {
                c["aud"] = json!(iface)
            })];
            collect_and_refuse(r, cases).await
        }
    });
    check!(r, "§3.iat-missing-refused", {
        let cases = [edited(r, "no iat", |_, c| remove(c, "iat"))];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.iat-future-refused", {
        // Claims are whole seconds: start just after a second boundary, so
        // the token is still 31 s ahead when the Provider reads its clock.
        align_to_second().await;
        let t = unix_now();
        let cases = [edited(r, "iat 31 s ahead", |_, c| {
            c["iat"] = json!(t + 31);
            c["exp"] = json!(t + 120);
        })];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.iat-skew-tolerated", {
        let t = unix_now();
        accepted(r, "iat 25 s ahead", |_, c| {
            c["iat"] = json!(t + 25);
            c["exp"] = json!(t + 200);
        })
        .await
    });
    check!(r, "§3.exp-missing-refused", {
        let cases = [edited(r, "no exp", |_, c| remove(c, "exp"))];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.exp-past-refused", {
        let t = unix_now();
        let cases = [edited(r, "exp 31 s ago", |_, c| {
            c["iat"] = json!(t - 200);
            c["exp"] = json!(t - 31);
        })];
        collect_and_refuse(r, cases).await
    });
    check!(r, "§3.lifetime-over-300-refused", {
        let t = unix_now();
        let cases = [edited(r, "exp − iat = 301", |_, c| {
            c["iat"] = json!(t);
            c["exp"] = json!(t + 301);
        })];
        collect_and_refuse(r, cases).await
    });
    check!(
        r,
        "§3.jti-optional",
        accepted(r, "no jti", |_, c| remove(c, "jti")).await
    );
    check!(r, "§3.token-reuse-accepted", reuse(r).await);
    check!(r, "§3.token-on-several-brands", several_brands(r).await);
    check!(r, "§3.auth-before-brand", auth_before_brand(r).await);
    check!(r, "§3.auth-before-body", {
        match r.auth_gate() {
            Err(p) => Err(p),
            Ok(()) => {
                let token = forge::unsigned(&json!({"alg": "none"}), &r.signer.claims("x"));
                let req = r
                    .a2a_request(Method::POST, "message:send", Some(&token))
                    .raw(Some("application/json"), b"{not json".to_vec());
                match r.send(req, Kind::A2a).await {
                    Ok(res) => expect::bare_401(&res)
                        .map(|()| String::new())
                        .map_err(|p| during("a forged PA-JWT with a body that is not JSON", p)),
                    Err(p) => Err(p),
                }
            }
        }
    });
    check!(
        r,
        "§3.every-operation-authenticated",
        every_operation(r).await
    );
}

/// Sleeps until just after the next whole second of the clock.
async fn align_to_second() {
    let nanos = time::OffsetDateTime::now_utc().nanosecond();
    let left = 1_000_000_000u32.saturating_sub(nanos);
    tokio::time::sleep(std::time::Duration::from_nanos(
        u64::from(left) + 20_000_000,
    ))
    .await;
}

fn remove(v: &mut Value, member: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(member);
    }
}

async fn collect_and_refuse<const N: usize>(
    r: &mut Runner<'_>,
    cases: [Result<(String, String), Problem>; N],
) -> Verdict {
    let mut list = Vec::with_capacity(N);
    for c in cases {
        list.push(c?);
    }
    all_refused(r, list).await
}

/// A PA-JWT edited by `edit` must be accepted (PACT §3 leniencies).
async fn accepted(
    r: &mut Runner<'_>,
    label: &str,
    edit: impl FnOnce(&mut Value, &mut Value),
) -> Verdict {
    r.auth_gate()?;
    let sub = r.sub("lenient");
    let token = r.jwt_with(&sub, edit)?;
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = r
        .a2a_request(Method::POST, "message:send", Some(&token))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::reply_message(&res).map_err(|p| during(label, p))?;
    Ok(String::new())
}

async fn missing_token(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = r
        .a2a_request(Method::POST, "message:send", None)
        .json(body.clone());
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during("no Authorization header", p))?;
    let sub = r.sub("basic");
    let jwt = r.jwt(&sub)?;
    let req = r
        .a2a_request(Method::POST, "message:send", None)
        .header("authorization", format!("Basic {jwt}"))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during("a valid PA-JWT under the Basic scheme", p))?;
    Ok(String::new())
}

async fn alg_none(r: &mut Runner<'_>) -> Verdict {
    let sub = r.sub("alg-none");
    let claims = r.signer.claims(&sub);
    let kid = r.cfg.identity.key.kid().to_owned();
    let cases = ["none", "None", "NONE"]
        .iter()
        .map(|alg| {
            let header = json!({"alg": alg, "typ": "JWT", "kid": kid});
            (format!("alg {alg:?}"), forge::unsigned(&header, &claims))
        })
        .collect();
    all_refused(r, cases).await
}

async fn hs256(r: &mut Runner<'_>) -> Verdict {
    let sub = r.sub("hs256");
    let claims = r.signer.claims(&sub);
    let key = r.cfg.identity.key.clone();
    let header = json!({"alg": "HS256", "typ": "JWT", "kid": key.kid()});
    let secrets: Vec<(&str, Vec<u8>)> = vec![
        ("the public key PEM", key.public_pem().map_err(build_err)?),
        ("the public key DER", key.public_der().map_err(build_err)?),
        ("the public JWK", key.public_jwk().to_string().into_bytes()),
    ];
    let mut cases = Vec::new();
    for (label, secret) in secrets {
        let token = forge::hs256(&header, &claims, &secret).map_err(build_err)?;
        cases.push((format!("HS256 keyed with {label}"), token));
    }
    all_refused(r, cases).await
}

async fn rs256(r: &mut Runner<'_>) -> Verdict {
    let sub = r.sub("rs256");
    let claims = r.signer.claims(&sub);
    let kid = r.cfg.identity.key.kid().to_owned();
    let rsa = forge::rsa_key().map_err(build_err)?;
    let token = forge::rs256(
        &json!({"alg": "RS256", "typ": "JWT", "kid": kid}),
        &claims,
        &rsa,
    )
    .map_err(build_err)?;
    all_refused(r, vec![("RS256 under the EC key's kid".to_owned(), token)]).await
}

/// A foreign EC key: under its own unknown kid, or under the PA's kid.
async fn foreign_key(r: &mut Runner<'_>, under_our_kid: bool) -> Verdict {
    let sub = r.sub("foreign-key");
    let claims = r.signer.claims(&sub);
    let foreign = AgentKey::generate().map_err(build_err)?;
    let kid = if under_our_kid {
        r.cfg.identity.key.kid().to_owned()
    } else {
        foreign.kid().to_owned()
    };
    let token = crate::jwt::compact_es256(
        &json!({"alg": "ES256", "typ": "JWT", "kid": kid}),
        &claims,
        &foreign,
    )
    .map_err(build_err)?;
    let label = if under_our_kid {
        "a foreign key under the PA's kid"
    } else {
        "an unknown kid and a foreign key"
    };
    all_refused(r, vec![(label.to_owned(), token)]).await
}

async fn tampered_signature(r: &mut Runner<'_>) -> Verdict {
    let sub = r.sub("tampered");
    let token = r.jwt(&sub)?;
    let flipped = forge::flip_signature_bit(&token)
        .ok_or_else(|| fail("cannot flip a signature bit", None))?;
    let truncated = token
        .rsplit_once('.')
        .map(|(input, sig)| format!("{input}.{}", &sig[..sig.len() / 2]))
        .unwrap_or_default();
    all_refused(
        r,
        vec![
            ("one flipped signature bit".to_owned(), flipped),
            ("half a signature".to_owned(), truncated),
        ],
    )
    .await
}

async fn tampered_payload(r: &mut Runner<'_>) -> Verdict {
    let sub = r.sub("tampered");
    let token = r.jwt(&sub)?;
    let mut claims = r.signer.claims(&sub);
    claims["sub"] = json!(r.unique("someone-else"));
    let swapped = forge::swap_payload(&token, &claims)
        .ok_or_else(|| fail("cannot edit the payload", None))?;
    all_refused(r, vec![("sub edited after signing".to_owned(), swapped)]).await
}

/// RFC 8725 §3.10: keys named by the token are never fetched nor trusted.
async fn jku(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let attacker = AgentKey::generate().map_err(build_err)?;
    let server = JwksServer::start(([127, 0, 0, 1], 0).into(), attacker.jwks())
        .await
        .map_err(|e| fail(format!("cannot serve the attacker's JWKS: {e:#}"), None))?;
    let sub = r.sub("jku");
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": attacker.kid(), "jku": server.uri(),
                        "x5u": server.uri(), "jwk": attacker.public_jwk()});
    let token =
        crate::jwt::compact_es256(&header, &r.signer.claims(&sub), &attacker).map_err(build_err)?;
    refused(r, "jku/x5u/jwk naming the attacker's key", &token).await?;
    // The same under the PA's own kid: still only the registered JWKS counts.
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": r.cfg.identity.key.kid(),
                        "jku": server.uri(), "jwk": attacker.public_jwk()});
    let token =
        crate::jwt::compact_es256(&header, &r.signer.claims(&sub), &attacker).map_err(build_err)?;
    refused(r, "jku/jwk under the PA's kid", &token).await?;
    match server.hits() {
        0 => Ok("the attacker's JWKS was never fetched".to_owned()),
        n => Err(fail(
            format!("the Provider fetched the URL named by jku/x5u {n} time(s)"),
            None,
        )),
    }
}

async fn reuse(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let sub = r.sub("reuse");
    let token = r.jwt(&sub)?;
    for attempt in ["first use", "second use"] {
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let req = r
            .a2a_request(Method::POST, "message:send", Some(&token))
            .json(body);
        let res = r.send(req, Kind::A2a).await?;
        expect::reply_message(&res).map_err(|p| during(attempt, p))?;
    }
    Ok(String::new())
}

async fn several_brands(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let other = r.other_brand()?;
    let sub = r.sub("brands");
    let token = r.jwt_with(&sub, |_, c| remove(c, "jti"))?;
    for (label, iface) in [("this brand", r.iface()), ("the other brand", other.iface)] {
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let req = Request::post(format!("{iface}/message:send"))
            .bearer(token.clone())
            .json(body);
        let res = r.send(req, Kind::A2a).await?;
        expect::reply_message(&res).map_err(|p| during(label, p))?;
    }
    Ok(String::new())
}

/// PACT §3: authenticate before looking up the brand; then an unknown brand
/// is a 404 (PACT §6: not an A2A error).
async fn auth_before_brand(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let Some((base, _)) = split_iface(&r.iface()) else {
        return Err(skip(
            "the interface URL does not have the §1 form {public_url}/a2a/{brand_id}",
        ));
    };
    let url = format!("{base}/{}/message:send", r.unique("no-such-brand"));
    let sub = r.sub("no-brand");
    let forged = forge::unsigned(&json!({"alg": "none"}), &r.signer.claims(&sub));
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let res = r
        .send(
            Request::post(&url).bearer(forged).json(body.clone()),
            Kind::A2a,
        )
        .await?;
    expect::bare_401(&res).map_err(|p| during("a forged PA-JWT at an unknown brand", p))?;
    let valid = r.jwt(&sub)?;
    let res = r
        .send(Request::post(&url).bearer(valid).json(body), Kind::A2a)
        .await?;
    expect::bare_route_miss(&res, &[404])
        .map_err(|p| during("a valid PA-JWT at an unknown brand", p))?;
    Ok(String::new())
}

async fn every_operation(r: &mut Runner<'_>) -> Verdict {
    r.auth_gate()?;
    let id = r.unique("task");
    let ops: Vec<(Method, String)> = vec![
        (Method::POST, "message:send".to_owned()),
        (Method::POST, "message:stream".to_owned()),
        (Method::GET, "tasks".to_owned()),
        (Method::GET, format!("tasks/{id}")),
        (Method::POST, format!("tasks/{id}:cancel")),
        (Method::POST, format!("tasks/{id}:subscribe")),
        (Method::GET, "extendedAgentCard".to_owned()),
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
    ];
    let n = ops.len();
    for (method, op) in ops {
        let label = format!("{method} {op} without a PA-JWT");
        let mut req = r.a2a_request(method.clone(), &op, None);
        if method == Method::POST {
            req = req.json(message_body("hello", None, None));
        }
        let res = r.send(req, Kind::A2a).await?;
        expect::bare_401(&res).map_err(|p| during(&label, p))?;
    }
    Ok(format!("{n} operations"))
}
