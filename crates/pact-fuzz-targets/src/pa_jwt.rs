//! PA-JWT parsing, signature check and claim checks (PACT §3):
//! `pact_jose::parse_pa_jwt`, then `UnverifiedPaJwt::verify` with the fixed
//! ES256 and RS256 test keys and `PaJwtRules::new(PA_AUD)` at a fixed `now`.
//!
//! The first input byte picks a mode:
//! * `% 4 == 0` — the rest is the compact token itself (lossy UTF-8);
//! * `% 4 == 1` — the rest is `header JSON 0xFF payload JSON`: the harness
//!   encodes and signs both (with the key the header's `alg` names), so the
//!   claim checks run on whatever JSON the fuzzer writes;
//! * otherwise — the rest drives a structured header and claim set (right or
//!   wrong types, times around `now`), signed by the harness; sometimes the
//!   signed token is then tampered with, which must never verify.
//!
//! Whenever `verify` accepts, the claims are checked again independently
//! from the decoded payload (the PACT §3 rules), so a claim check that lets a
//! bad token through is a crash, not just a panic in the parser.

use crate::{
    NOW, PA_AUD, PA_ES_KID, PA_ISS, PA_RS_KID, b64, mk, pa_keys, pa_rules, sign_raw, split_ff,
    trace,
};
use arbitrary::{Result, Unstructured};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_jose::{PaClaims, PaJwtRules, UnverifiedPaJwt, VerifyingKey, parse_pa_jwt};
use serde_json::{Map, Value};

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            let token = String::from_utf8_lossy(rest);
            check_token(&token);
        }
        1 => {
            let (header, payload) = split_ff(rest);
            let token = sign_raw(signer_for(header), header, payload);
            check_token(&token);
        }
        _ => {
            let _ = structured(&mut Unstructured::new(rest));
        }
    }
}

/// The key the header's `alg` names (ES256 when it names none we hold).
fn signer_for(header: &[u8]) -> &'static dyn josekit::jws::JwsSigner {
    let keys = pa_keys();
    let alg = serde_json::from_slice::<Value>(header)
        .ok()
        .and_then(|h| h.get("alg").and_then(Value::as_str).map(str::to_owned));
    match alg.as_deref() {
        Some("RS256") => keys.rs_signer.as_ref(),
        _ => keys.es_signer.as_ref(),
    }
}

/// Parses and verifies `token` with both keys; returns whether any key accepted it.
fn check_token(token: &str) -> bool {
    let rules = pa_rules();
    let parsed = match parse_pa_jwt(token, rules) {
        Ok(parsed) => parsed,
        Err(err) => {
            trace(|| format!("parse: {err}"));
            return false;
        }
    };
    // What parse accepts: within the cap, three segments, a non-empty issuer.
    assert!(token.len() <= rules.max_token_bytes);
    assert_eq!(token.split('.').count(), 3);
    assert!(!parsed.issuer().is_empty());
    let _ = format!("{parsed:?}");

    let keys = pa_keys();
    let mut accepted = false;
    for key in [&keys.es_key, &keys.rs_key] {
        match parsed.verify(key, rules, NOW) {
            Ok(claims) => {
                trace(|| format!("{}: accepted {claims:?}", key.alg()));
                check_accepted(token, &parsed, key, &claims, rules);
                accepted = true;
            }
            Err(err) => trace(|| format!("{}: {err}", key.alg())),
        }
    }
    accepted
}

/// PACT §3, re-derived from the token's own payload.
fn check_accepted(
    token: &str,
    parsed: &UnverifiedPaJwt,
    key: &VerifyingKey,
    claims: &PaClaims,
    rules: &PaJwtRules,
) {
    assert_eq!(key.alg(), parsed.alg(), "a key of another alg verified");
    if let (Some(t), Some(k)) = (parsed.kid(), key.kid()) {
        assert_eq!(t, k, "a key with another kid verified");
    }
    let payload_b64 = token.split('.').nth(1).expect("three segments");
    let payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload_b64).expect("base64url"))
            .expect("payload JSON");

    assert_eq!(
        payload.get("iss").and_then(Value::as_str),
        Some(claims.iss.as_str())
    );
    assert_eq!(claims.iss, parsed.issuer());
    assert!(!claims.iss.is_empty());
    assert_eq!(
        payload.get("sub").and_then(Value::as_str),
        Some(claims.sub.as_str())
    );
    assert!(!claims.sub.is_empty(), "empty sub accepted");
    assert_eq!(
        payload.get("aud"),
        Some(&Value::from(rules.audience.as_str())),
        "aud is not exactly the audience"
    );
    assert_eq!(payload.get("iat").and_then(Value::as_i64), Some(claims.iat));
    assert_eq!(payload.get("exp").and_then(Value::as_i64), Some(claims.exp));
    let (iat, exp, now) = (
        i128::from(claims.iat),
        i128::from(claims.exp),
        i128::from(NOW),
    );
    let skew = i128::from(rules.skew_secs);
    assert!(exp > iat, "exp not after iat");
    assert!(
        exp - iat <= i128::from(rules.max_lifetime_secs),
        "lifetime too long"
    );
    assert!(iat <= now + skew, "iat in the future");
    assert!(exp > now - skew, "expired");
    if let Some(nbf) = payload.get("nbf") {
        let nbf = nbf.as_i64().expect("nbf accepted but not an i64");
        assert!(i128::from(nbf) <= now + skew, "nbf in the future");
    }
    match payload.get("jti") {
        None => assert_eq!(claims.jti, None),
        Some(v) => assert_eq!(v.as_str(), claims.jti.as_deref(), "jti not a string"),
    }
}

fn structured(u: &mut Unstructured<'_>) -> Result<()> {
    let mut header = Map::new();
    let alg = mk::string(
        u,
        &["ES256", "RS256", "none", "HS256", "es256", "ES384", "PS256"],
    )?;
    let alg_value = mk::value_or(u, Value::from(alg))?;
    mk::member(u, &mut header, "alg", alg_value)?;
    let kid = mk::string(u, &[PA_ES_KID, PA_RS_KID, "other", ""])?;
    if u.ratio(3, 4)? {
        let kid = mk::value_or(u, Value::from(kid))?;
        header.insert("kid".into(), kid);
    }
    if u.ratio(1, 16)? {
        header.insert("crit".into(), serde_json::json!(["exp"]));
    }
    if u.ratio(1, 8)? {
        header.insert("typ".into(), Value::from("JWT"));
    }
    if u.ratio(1, 16)? {
        // Keys named by the token must be ignored.
        header.insert("jku".into(), Value::from("https://attacker.example/jwks"));
    }

    let mut payload = Map::new();
    let iss = mk::string(u, &[PA_ISS, ""])?;
    let iss = mk::value_or(u, Value::from(iss))?;
    mk::member(u, &mut payload, "iss", iss)?;
    let sub = mk::string(u, &["user-123", ""])?;
    let sub = mk::value_or(u, Value::from(sub))?;
    mk::member(u, &mut payload, "sub", sub)?;
    let aud = mk::string(u, &[PA_AUD, "other-audience", "", "pactd-audience-7f3"])?;
    let aud = mk::value_or(u, Value::from(aud))?;
    mk::member(u, &mut payload, "aud", aud)?;
    mk::lifetime(u, &mut payload, NOW, -5..=400)?;
    if u.ratio(1, 2)? {
        let jti = mk::string(u, &["j-1"])?;
        let jti = mk::value_or(u, Value::from(jti))?;
        payload.insert("jti".into(), jti);
    }

    let header = serde_json::to_vec(&Value::Object(header)).expect("header JSON");
    let payload = serde_json::to_vec(&Value::Object(payload)).expect("payload JSON");
    let token = sign_raw(signer_for(&header), &header, &payload);
    check_token(&token);

    if u.ratio(1, 4)? {
        // Same claims, other bytes: a signature over other bytes must not verify.
        let mut segments: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut spaced = payload.clone();
        spaced.push(b' ');
        segments[1] = b64(&spaced);
        assert!(
            !check_token(&segments.join(".")),
            "signature over other bytes verified"
        );
    }
    Ok(())
}
