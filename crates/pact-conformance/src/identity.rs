//! PACT §2 (the Agent Card) and §3 (personal-agent identity): the card's
//! shape, and every forged or malformed PA-JWT getting the bare 401.

use pact_client::card;
use pact_client::http::Request;
use pact_client::jwks_server::JwksServer;
use pact_client::jwt::unix_now;
use pact_client::keys::AgentKey;
use reqwest::Method;
use serde_json::{Value, json};

use crate::Profile;
use crate::expect::{self, Problem, Verdict, during, fail, skip};
use crate::forge;
use crate::rules::RuleId as R;
use crate::runner::{Kind, Runner, Setup, check, message_body};

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
pub async fn card_checks(r: &mut Runner<'_>, s: &Setup) {
    let c = &s.card.card;
    check!(r, R::UnknownBrand404, unknown_brand(r, s).await);
    check!(r, R::Interface, problems(card::check_interface(c)));
    check!(
        r,
        R::InterfaceFirst,
        problems(card::check_interface_first(c))
    );
    check!(r, R::PaJwtScheme, {
        problems(card::check_pa_jwt_scheme(c)).map(|_| {
            card::pa_jwt_scheme(c)
                .map(|n| format!("the PA-JWT scheme is named {n:?}"))
                .unwrap_or_default()
        })
    });
    check!(
        r,
        R::IdentityRequirement,
        problems(card::check_identity_requirement(c))
    );
    check!(r, R::DelegationScheme, {
        match (r.cfg.profile, card::delegation_scheme(c)) {
            (Profile::Identity, None) => Ok("identity-only card".to_owned()),
            (Profile::Delegated, None) => Err(fail(
                "the Delegated profile needs an oauth2SecurityScheme with a deviceCode flow; the card has none",
                None,
            )),
            (_, Some(name)) => problems(card::check_delegation(c))
                .map(|_| format!("the delegation scheme is named {name:?}")),
        }
    });
    check!(r, R::Fields, problems(card::check_fields(c)));
    check!(r, R::PactdCacheCors, {
        let res = &s.card_res;
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
    });
}

/// PACT §2: an unknown brand's card is a bare 404.
async fn unknown_brand(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    let Some((base, _)) = split_iface(s.iface()) else {
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
async fn refused(r: &mut Runner<'_>, s: &Setup, label: &str, token: &str) -> Result<(), Problem> {
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = s
        .a2a_request(Method::POST, "message:send", Some(token))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during(label, p))
}

/// Every `(label, token)` must get the bare 401.
async fn all_refused(r: &mut Runner<'_>, s: &Setup, cases: Vec<(String, String)>) -> Verdict {
    s.auth_gate()?;
    let n = cases.len();
    for (label, token) in cases {
        refused(r, s, &label, &token).await?;
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
pub async fn token_checks(r: &mut Runner<'_>, s: &Setup) {
    if !r.wants_any(&["§3."]) {
        return;
    }
    check!(r, R::MissingTokenRefused, missing_token(r, s).await);
    check!(r, R::MalformedRefused, {
        let cases = ["", "a.b", "a.b.c.d", "not-a-jwt", "....", "e30.e30.e30"]
            .iter()
            .map(|t| (format!("token {t:?}"), (*t).to_owned()))
            .collect();
        all_refused(r, s, cases).await
    });
    check!(r, R::AlgNoneRefused, alg_none(r, s).await);
    check!(r, R::Hs256KeyConfusionRefused, hs256(r, s).await);
    check!(r, R::Rs256AgainstEcKeyRefused, rs256(r, s).await);
    check!(r, R::UnknownKidRefused, foreign_key(r, s, false).await);
    check!(r, R::ForeignKeyRefused, foreign_key(r, s, true).await);
    check!(
        r,
        R::TamperedSignatureRefused,
        tampered_signature(r, s).await
    );
    check!(r, R::TamperedPayloadRefused, tampered_payload(r, s).await);
    if r.wants_some(&[R::JkuIgnored, R::JkuNotFetched]) {
        jku(r, s).await;
    }
    // One oversized request answers both checks: the refusal (PACT), then
    // its shape (pactd's bare 401).
    let mut shape = None;
    check!(r, R::OversizedRefused, {
        let refused = oversized(r, s).await;
        let verdict = expect::verdict_on(&refused, |o| Ok(o.note.clone()));
        shape = refused.ok().map(|o| o.bare_401);
        verdict
    });
    check!(
        r,
        R::PactdOversized401,
        shape.unwrap_or_else(|| Err(skip("no refusal of a 16 KiB PA-JWT (§3.oversized-refused)")))
    );
    check!(r, R::IssUnknownRefused, {
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
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::SubMissingRefused, {
        let cases = [
            edited(r, "no sub", |_, c| remove(c, "sub")),
            edited(r, "an empty sub", |_, c| c["sub"] = json!("")),
            edited(r, "a numeric sub", |_, c| c["sub"] = json!(42)),
        ];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::AudMissingRefused, {
        let cases = [
            edited(r, "no aud", |_, c| remove(c, "aud")),
            edited(r, "aud null", |_, c| c["aud"] = Value::Null),
        ];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::AudWrongRefused, {
        let cases = [edited(r, "another audience", |_, c| {
            c["aud"] = json!("https://another-provider.invalid/a2a")
        })];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::AudArrayRefused, {
        let aud = r.cfg.audience.clone();
        let cases = [
            edited(r, "aud [audience]", |_, c| c["aud"] = json!([aud.clone()])),
            edited(r, "aud [audience, other]", |_, c| {
                c["aud"] = json!([aud, "https://another-provider.invalid/a2a"])
            }),
        ];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::AudInterfaceUrlRefused, {
        let iface = s.iface();
        if iface == r.cfg.audience {
            Err(skip("the assigned audience equals the interface URL"))
        } else {
            let cases = [edited(r, "aud = the interface URL", |_, c| {
                c["aud"] = json!(iface)
            })];
            collect_and_refuse(r, s, cases).await
        }
    });
    check!(r, R::IatMissingRefused, {
        let cases = [edited(r, "no iat", |_, c| remove(c, "iat"))];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::IatFutureRefused, {
        // Claims are whole seconds: start just after a second boundary, so
        // the token is still 31 s ahead when the Provider reads its clock.
        align_to_second().await;
        let t = unix_now();
        let cases = [edited(r, "iat 31 s ahead", |_, c| {
            c["iat"] = json!(t + 31);
            c["exp"] = json!(t + 120);
        })];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::IatSkewTolerated, {
        let t = unix_now();
        accepted(r, s, "iat 25 s ahead", |_, c| {
            c["iat"] = json!(t + 25);
            c["exp"] = json!(t + 200);
        })
        .await
    });
    check!(r, R::ExpMissingRefused, {
        let cases = [edited(r, "no exp", |_, c| remove(c, "exp"))];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::ExpPastRefused, {
        let t = unix_now();
        let cases = [edited(r, "exp 31 s ago", |_, c| {
            c["iat"] = json!(t - 200);
            c["exp"] = json!(t - 31);
        })];
        collect_and_refuse(r, s, cases).await
    });
    check!(r, R::LifetimeOver300Refused, {
        let t = unix_now();
        let cases = [edited(r, "exp − iat = 301", |_, c| {
            c["iat"] = json!(t);
            c["exp"] = json!(t + 301);
        })];
        collect_and_refuse(r, s, cases).await
    });
    check!(
        r,
        R::JtiOptional,
        accepted(r, s, "no jti", |_, c| remove(c, "jti")).await
    );
    check!(r, R::TokenReuseAccepted, reuse(r, s).await);
    check!(r, R::TokenOnSeveralBrands, several_brands(r, s).await);
    check!(r, R::AuthBeforeBrand, auth_before_brand(r, s).await);
    check!(r, R::AuthBeforeBody, auth_before_body(r, s).await);
    check!(
        r,
        R::EveryOperationAuthenticated,
        every_operation(r, s).await
    );
}

/// Sleeps until just after the next whole second of the clock.
async fn align_to_second() {
    #[allow(clippy::disallowed_methods)] // aligns with the wall clock the provider under test reads
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
    s: &Setup,
    cases: [Result<(String, String), Problem>; N],
) -> Verdict {
    let mut list = Vec::with_capacity(N);
    for c in cases {
        list.push(c?);
    }
    all_refused(r, s, list).await
}

/// A PA-JWT edited by `edit` must be accepted (PACT §3 leniencies).
async fn accepted(
    r: &mut Runner<'_>,
    s: &Setup,
    label: &str,
    edit: impl FnOnce(&mut Value, &mut Value),
) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("lenient");
    let token = r.jwt_with(&sub, edit)?;
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = s
        .a2a_request(Method::POST, "message:send", Some(&token))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::reply_message(&res).map_err(|p| during(label, p))?;
    Ok(String::new())
}

async fn missing_token(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = s
        .a2a_request(Method::POST, "message:send", None)
        .json(body.clone());
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during("no Authorization header", p))?;
    let sub = r.sub("basic");
    let jwt = r.jwt(&sub)?;
    let req = s
        .a2a_request(Method::POST, "message:send", None)
        .header("authorization", format!("Basic {jwt}"))
        .json(body);
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res).map_err(|p| during("a valid PA-JWT under the Basic scheme", p))?;
    Ok(String::new())
}

async fn alg_none(r: &mut Runner<'_>, s: &Setup) -> Verdict {
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
    all_refused(r, s, cases).await
}

async fn hs256(r: &mut Runner<'_>, s: &Setup) -> Verdict {
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
    all_refused(r, s, cases).await
}

async fn rs256(r: &mut Runner<'_>, s: &Setup) -> Verdict {
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
    all_refused(
        r,
        s,
        vec![("RS256 under the EC key's kid".to_owned(), token)],
    )
    .await
}

/// A foreign EC key: under its own unknown kid, or under the PA's kid.
async fn foreign_key(r: &mut Runner<'_>, s: &Setup, under_our_kid: bool) -> Verdict {
    let sub = r.sub("foreign-key");
    let claims = r.signer.claims(&sub);
    let foreign = AgentKey::generate().map_err(build_err)?;
    let kid = if under_our_kid {
        r.cfg.identity.key.kid().to_owned()
    } else {
        foreign.kid().to_owned()
    };
    let token = pact_client::jwt::compact_es256(
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
    all_refused(r, s, vec![(label.to_owned(), token)]).await
}

async fn tampered_signature(r: &mut Runner<'_>, s: &Setup) -> Verdict {
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
        s,
        vec![
            ("one flipped signature bit".to_owned(), flipped),
            ("half a signature".to_owned(), truncated),
        ],
    )
    .await
}

async fn tampered_payload(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    let sub = r.sub("tampered");
    let token = r.jwt(&sub)?;
    let mut claims = r.signer.claims(&sub);
    claims["sub"] = json!(r.unique("someone-else"));
    let swapped = forge::swap_payload(&token, &claims)
        .ok_or_else(|| fail("cannot edit the payload", None))?;
    all_refused(r, s, vec![("sub edited after signing".to_owned(), swapped)]).await
}

/// PACT §3 and RFC 8725 §3.10: keys named by the token are never trusted
/// (a MUST: only the registered JWKS counts) nor fetched (a SHOULD).
async fn jku(r: &mut Runner<'_>, s: &Setup) {
    let t = std::time::Instant::now();
    let (refused, fetched) = match jku_refused(r, s).await {
        Ok((0, _)) => (
            Ok(String::new()),
            Ok("the attacker's JWKS was never fetched".to_owned()),
        ),
        Ok((n, uri)) => (
            Ok(String::new()),
            Err(fail(
                format!("the Provider fetched {uri}, named by jku/x5u, {n} time(s)"),
                None,
            )),
        ),
        Err(p @ Problem::Skip(_)) => (Err(p.clone()), Err(p)),
        Err(p) => (
            Err(p),
            Err(skip("the forged tokens were not refused (§3.jku-ignored)")),
        ),
    };
    r.record(R::JkuIgnored, t, refused);
    r.record(R::JkuNotFetched, t, fetched);
}

/// Sends tokens naming an attacker's key; how often its JWKS was fetched.
async fn jku_refused(r: &mut Runner<'_>, s: &Setup) -> Result<(usize, String), Problem> {
    s.auth_gate()?;
    let attacker = AgentKey::generate().map_err(build_err)?;
    let server = JwksServer::start(([127, 0, 0, 1], 0).into(), attacker.jwks())
        .await
        .map_err(|e| fail(format!("cannot serve the attacker's JWKS: {e:#}"), None))?;
    let sub = r.sub("jku");
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": attacker.kid(), "jku": server.uri(),
                        "x5u": server.uri(), "jwk": attacker.public_jwk()});
    let token = pact_client::jwt::compact_es256(&header, &r.signer.claims(&sub), &attacker)
        .map_err(build_err)?;
    refused(r, s, "jku/x5u/jwk naming the attacker's key", &token).await?;
    // The same under the PA's own kid: still only the registered JWKS counts.
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": r.cfg.identity.key.kid(),
                        "jku": server.uri(), "jwk": attacker.public_jwk()});
    let token = pact_client::jwt::compact_es256(&header, &r.signer.claims(&sub), &attacker)
        .map_err(build_err)?;
    refused(r, s, "jku/jwk under the PA's kid", &token).await?;
    Ok((server.hits(), server.uri()))
}

/// How a 16 KiB PA-JWT was refused.
struct Oversized {
    /// The §3.oversized-refused note.
    note: String,
    /// Whether the refusal was the bare 401 (`§3.pactd-oversized-401`).
    bare_401: Verdict,
}

/// PACT §3 sets no size limit, so any 4xx refusal of a 16 KiB PA-JWT is
/// right (an HTTP layer's 431 included; RFC 6585 §5); the bare 401 is
/// pactd's answer, checked at its own level.
async fn oversized(r: &mut Runner<'_>, s: &Setup) -> Result<Oversized, Problem> {
    s.auth_gate()?;
    let sub = r.sub("oversized");
    let token = r.jwt_with(&sub, |_, c| c["pad"] = json!("x".repeat(16 * 1024)))?;
    let body = message_body(&r.cfg.public_prompt.clone(), None, None);
    let req = s
        .a2a_request(Method::POST, "message:send", Some(&token))
        .json(body);
    // Not an A2A response when an HTTP layer refuses it: kept out of the
    // checks over every A2A response.
    let res = r.send(req, Kind::Plain).await?;
    if !(400..500).contains(&res.status) {
        return Err(fail(
            format!(
                "a 16 KiB PA-JWT must be refused (any 4xx), got HTTP {}",
                res.status
            ),
            Some(&res),
        ));
    }
    Ok(Oversized {
        note: format!("refused with HTTP {}", res.status),
        bare_401: expect::bare_401(&res).map(|()| "the bare 401".to_owned()),
    })
}

/// PACT §3: authenticate before reading the body.
async fn auth_before_body(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let token = forge::unsigned(&json!({"alg": "none"}), &r.signer.claims("x"));
    let req = s
        .a2a_request(Method::POST, "message:send", Some(&token))
        .raw(Some("application/json"), b"{not json".to_vec());
    let res = r.send(req, Kind::A2a).await?;
    expect::bare_401(&res)
        .map(|()| String::new())
        .map_err(|p| during("a forged PA-JWT with a body that is not JSON", p))
}

async fn reuse(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let sub = r.sub("reuse");
    let token = r.jwt(&sub)?;
    for attempt in ["first use", "second use"] {
        let body = message_body(&r.cfg.public_prompt.clone(), None, None);
        let req = s
            .a2a_request(Method::POST, "message:send", Some(&token))
            .json(body);
        let res = r.send(req, Kind::A2a).await?;
        expect::reply_message(&res).map_err(|p| during(attempt, p))?;
    }
    Ok(String::new())
}

async fn several_brands(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let other = s.other_brand()?;
    let sub = r.sub("brands");
    let token = r.jwt_with(&sub, |_, c| remove(c, "jti"))?;
    for (label, iface) in [
        ("this brand", s.iface()),
        ("the other brand", other.iface.as_str()),
    ] {
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
async fn auth_before_brand(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
    let Some((base, _)) = split_iface(s.iface()) else {
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

async fn every_operation(r: &mut Runner<'_>, s: &Setup) -> Verdict {
    s.auth_gate()?;
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
        let mut req = s.a2a_request(method.clone(), &op, None);
        if method == Method::POST {
            req = req.json(message_body("hello", None, None));
        }
        let res = r.send(req, Kind::A2a).await?;
        expect::bare_401(&res).map_err(|p| during(&label, p))?;
    }
    Ok(format!("{n} operations"))
}
