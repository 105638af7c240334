//! The delegation-token check (PACT §5.4/§5.5 step 2):
//! `pact_jose::verify_delegation_token` with a fixed `ProviderKeySet` of two
//! keys (current and old, as during a rotation), a fixed brand issuer,
//! interface URL, PA issuer and `now`.
//!
//! The first input byte picks a mode:
//! * `% 4 == 0` — the rest is the compact token itself (lossy UTF-8);
//! * `% 4 == 1` — the rest is the payload: signed as the server signs
//!   (`ProviderKey::sign_compact`, `typ` `at+jwt`) with the current or old key;
//! * `% 4 == 2` — the rest is `header JSON 0xFF payload JSON`, signed with the
//!   current key whatever the header says (reaches the header checks with a
//!   valid signature);
//! * `% 4 == 3` — the rest drives a structured claim set, signed by the server's
//!   signer; sometimes tampered with afterwards, which must never verify.
//!
//! Whenever the check accepts, PACT §5.4/§5.5 are checked again on the payload.

use crate::{BRAND_AUD, BRAND_ISS, NOW, PA_ISS, b64, mk, provider_keys, sign_raw, split_ff, trace};
use arbitrary::{Result, Unstructured};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_jose::{
    DELEGATION_TYP, DelegationError, MAX_DELEGATION_LIFETIME_SECS, MAX_DELEGATION_TOKEN_BYTES,
    RECEIPT_TYP, verify_delegation_token,
};
use serde_json::{Map, Value};

const SKEW_SECS: i64 = 5;

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let keys = provider_keys();
    match mode % 4 {
        0 => {
            check(&String::from_utf8_lossy(rest));
        }
        1 => {
            let key = if mode & 0x80 == 0 {
                &keys.current
            } else {
                &keys.old
            };
            let token = key.sign_compact(DELEGATION_TYP, rest).expect("sign");
            check(&token);
        }
        2 => {
            let (header, payload) = split_ff(rest);
            check(&sign_raw(keys.current_raw.as_ref(), header, payload));
        }
        _ => {
            let _ = structured(&mut Unstructured::new(rest));
        }
    }
}

fn check(token: &str) -> bool {
    let keys = provider_keys();
    match verify_delegation_token(token, &keys.set, BRAND_ISS, BRAND_AUD, PA_ISS, NOW) {
        Ok(claims) => {
            trace(|| format!("accepted {claims:?}"));
            assert!(token.len() <= MAX_DELEGATION_TOKEN_BYTES);
            let mut segments = token.split('.');
            let header: Value = decode(segments.next().expect("header"));
            let payload: Value = decode(segments.next().expect("payload"));
            assert_eq!(header.get("alg"), Some(&Value::from("ES256")));
            assert_eq!(header.get("typ"), Some(&Value::from(DELEGATION_TYP)));
            assert!(header.get("crit").is_none());
            let kid = header.get("kid").and_then(Value::as_str).expect("kid");
            assert!(
                kid == keys.current.kid() || kid == keys.old.kid(),
                "unknown kid accepted"
            );

            assert_eq!(claims.iss, BRAND_ISS);
            assert_eq!(
                payload.get("aud"),
                Some(&Value::from(BRAND_AUD)),
                "aud not a single match"
            );
            assert_eq!(claims.aud, BRAND_AUD);
            assert_eq!(claims.client_id, PA_ISS);
            assert!(
                !claims.sub.is_empty() && !claims.grant_id.is_empty() && !claims.jti.is_empty()
            );
            assert_eq!(payload.get("exp").and_then(Value::as_i64), Some(claims.exp));
            assert_eq!(payload.get("iat").and_then(Value::as_i64), Some(claims.iat));
            let (iat, exp, now) = (
                i128::from(claims.iat),
                i128::from(claims.exp),
                i128::from(NOW),
            );
            let skew = i128::from(SKEW_SECS);
            assert!(exp + skew > now, "expired token accepted");
            assert!(iat <= now + skew, "token from the future accepted");
            assert!(exp > iat && exp - iat <= i128::from(MAX_DELEGATION_LIFETIME_SECS));
            if let Some(nbf) = payload.get("nbf") {
                let nbf = nbf.as_i64().expect("nbf accepted but not an i64");
                assert!(i128::from(nbf) <= now + skew, "nbf in the future accepted");
            }
            let _ = claims.scopes().count();
            true
        }
        Err(err) => {
            if token.len() > MAX_DELEGATION_TOKEN_BYTES {
                assert_eq!(err, DelegationError::TooLarge);
            }
            trace(|| format!("refused: {err}"));
            false
        }
    }
}

fn decode(segment: &str) -> Value {
    let bytes = URL_SAFE_NO_PAD.decode(segment).expect("base64url");
    serde_json::from_slice(&bytes).expect("JSON")
}

fn structured(u: &mut Unstructured<'_>) -> Result<()> {
    let mut claims = Map::new();
    let fields: [(&str, &[&str]); 7] = [
        (
            "iss",
            &[BRAND_ISS, "https://pactd.example/brands/other", ""],
        ),
        ("aud", &[BRAND_AUD, "https://pactd.example/a2a/other", ""]),
        ("client_id", &[PA_ISS, "https://other-pa.example", ""]),
        ("sub", &["user-1", ""]),
        (
            "scope",
            &["orders:read", "orders:read orders:cancel", "", " "],
        ),
        ("grant_id", &["0b7e6f1c-3a4d-4c8e-9f2a-1d5e6f7a8b9c", ""]),
        ("jti", &["jti-1", ""]),
    ];
    for (name, likely) in fields {
        let s = mk::string(u, likely)?;
        let v = mk::value_or(u, Value::from(s))?;
        mk::member(u, &mut claims, name, v)?;
    }
    mk::lifetime(u, &mut claims, NOW, -10..=3700)?;
    if u.ratio(1, 4)? {
        let details = match u.int_in_range(0..=3)? {
            0 => serde_json::json!([{"type": "order_cancellation", "order_ids": ["DEMO-1"]}]),
            1 => Value::Null,
            2 => Value::from("not an array"),
            _ => serde_json::json!({}),
        };
        claims.insert("authorization_details".into(), details);
    }
    let payload = serde_json::to_vec(&Value::Object(claims)).expect("JSON");
    let keys = provider_keys();
    let key = if u.arbitrary()? {
        &keys.current
    } else {
        &keys.old
    };
    // A receipt's typ must never pass as a delegation token.
    let typ = if u.ratio(1, 8)? {
        RECEIPT_TYP
    } else {
        DELEGATION_TYP
    };
    let token = key.sign_compact(typ, &payload).expect("sign");
    let accepted = check(&token);
    if typ != DELEGATION_TYP {
        assert!(!accepted, "a receipt typ passed as a delegation token");
    }

    if u.ratio(1, 4)? {
        let mut segments: Vec<String> = token.split('.').map(str::to_owned).collect();
        match u.int_in_range(0..=2)? {
            0 => {
                let mut spaced = payload.clone();
                spaced.push(b' ');
                segments[1] = b64(&spaced);
            }
            1 => {
                // Signature bytes flipped.
                let mut sig = URL_SAFE_NO_PAD.decode(&segments[2]).expect("sig");
                let i = u.choose_index(sig.len())?;
                sig[i] ^= 1 << u.int_in_range(0..=7)?;
                segments[2] = b64(&sig);
            }
            _ => {
                // Another (unsigned) header: alg none, same payload.
                segments[0] = b64(br#"{"alg":"none","typ":"at+jwt"}"#);
            }
        }
        assert!(!check(&segments.join(".")), "a tampered token verified");
    }
    Ok(())
}
