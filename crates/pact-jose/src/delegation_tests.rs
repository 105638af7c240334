//! Tests of delegation-token signing and strict verification (PACT §5.4, §5.5).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_proto::oauth::DelegationClaims;
use serde_json::{Value, json};

use crate::delegation::{
    DELEGATION_TYP, DelegationError, MAX_DELEGATION_TOKEN_BYTES, sign_delegation_token,
    verify_delegation_token,
};
use crate::provider_keys::{ProviderKey, ProviderKeyError, ProviderKeySet};

const ISS: &str = "https://shop.example.com";
const AUD: &str = "https://shop.example.com/a2a";
const PA: &str = "https://pa.example.com";
const NOW: i64 = 1_750_000_000;

struct Fixture {
    key: ProviderKey,
    keys: ProviderKeySet,
}

impl Fixture {
    fn new() -> Self {
        let key = ProviderKey::generate().unwrap();
        let keys = ProviderKeySet::from_public_jwks(&[key.public_jwk()]).unwrap();
        Self { key, keys }
    }

    fn verify(&self, token: &str) -> Result<DelegationClaims, DelegationError> {
        verify_delegation_token(token, &self.keys, ISS, AUD, PA, NOW)
    }

    /// Sign an arbitrary JSON payload with the Provider key and `typ`.
    fn sign_raw(&self, typ: &str, payload: &Value) -> String {
        self.key
            .sign_compact(typ, payload.to_string().as_bytes())
            .unwrap()
    }
}

fn claims() -> DelegationClaims {
    DelegationClaims {
        iss: ISS.into(),
        aud: AUD.into(),
        sub: "user-42".into(),
        client_id: PA.into(),
        scope: "orders:read orders:cancel".into(),
        grant_id: "grant-1".into(),
        iat: NOW - 60,
        exp: NOW - 60 + 900,
        jti: uuid::Uuid::new_v4().to_string(),
        authorization_details: None,
    }
}

fn claims_json() -> Value {
    serde_json::to_value(claims()).unwrap()
}

#[test]
fn a_valid_token_verifies_and_returns_its_claims() {
    let f = Fixture::new();
    let mut c = claims();
    c.authorization_details = Some(json!([{"type": "order", "order_id": "DEMO-1"}]));
    let token = sign_delegation_token(&f.key, &c).unwrap();
    assert_eq!(f.verify(&token).unwrap(), c);
    assert_eq!(
        f.verify(&token).unwrap().scopes().collect::<Vec<_>>(),
        ["orders:read", "orders:cancel"]
    );

    let header = URL_SAFE_NO_PAD
        .decode(token.split('.').next().unwrap())
        .unwrap();
    let header: Value = serde_json::from_slice(&header).unwrap();
    assert_eq!(
        header,
        json!({"alg": "ES256", "typ": DELEGATION_TYP, "kid": f.key.kid()})
    );
}

/// An edit to otherwise valid claims.
type Edit = fn(&mut DelegationClaims);

#[test]
fn claims_are_checked_strictly() {
    let f = Fixture::new();
    let cases: Vec<(&str, Edit, DelegationError)> = vec![
        (
            "wrong aud",
            |c| c.aud = "https://other.example/a2a".into(),
            DelegationError::AudienceMismatch,
        ),
        (
            "wrong iss",
            |c| c.iss = "https://evil.example".into(),
            DelegationError::IssuerMismatch,
        ),
        (
            "wrong client_id",
            |c| c.client_id = "https://other-pa.example".into(),
            DelegationError::ClientIdMismatch,
        ),
        (
            "expired",
            |c| {
                c.iat = NOW - 1000;
                c.exp = NOW - 10;
            },
            DelegationError::Expired,
        ),
        (
            "lifetime > 1 h",
            |c| {
                c.iat = NOW - 10;
                c.exp = NOW - 10 + 3601;
            },
            DelegationError::LifetimeOutOfRange,
        ),
        (
            "exp before iat",
            |c| {
                c.iat = NOW + 5;
                c.exp = NOW + 4;
            },
            DelegationError::LifetimeOutOfRange,
        ),
        (
            "iat in the future",
            |c| {
                c.iat = NOW + 6;
                c.exp = NOW + 600;
            },
            DelegationError::IssuedInFuture,
        ),
        (
            "empty sub",
            |c| c.sub.clear(),
            DelegationError::Claim("sub is not a non-empty string"),
        ),
        (
            "empty grant_id",
            |c| c.grant_id.clear(),
            DelegationError::Claim("grant_id is not a non-empty string"),
        ),
        (
            "empty jti",
            |c| c.jti.clear(),
            DelegationError::Claim("jti is not a non-empty string"),
        ),
    ];
    for (name, edit, expected) in cases {
        let mut c = claims();
        edit(&mut c);
        let token = sign_delegation_token(&f.key, &c).unwrap();
        assert_eq!(f.verify(&token), Err(expected), "{name}");
    }
}

#[test]
fn the_five_second_allowance_is_exact() {
    let f = Fixture::new();
    let at = |iat: i64, exp: i64| {
        let mut c = claims();
        c.iat = iat;
        c.exp = exp;
        f.verify(&sign_delegation_token(&f.key, &c).unwrap())
    };
    assert!(at(NOW - 900, NOW - 4).is_ok());
    assert_eq!(at(NOW - 900, NOW - 5), Err(DelegationError::Expired));
    assert!(at(NOW + 5, NOW + 600).is_ok());
    assert_eq!(at(NOW + 6, NOW + 600), Err(DelegationError::IssuedInFuture));
    assert!(at(NOW - 100, NOW - 100 + 3600).is_ok());
}

#[test]
fn raw_claim_shapes_are_refused_with_a_reason() {
    let f = Fixture::new();
    let edit = |name: &str, value: Value| {
        let mut c = claims_json();
        c[name] = value;
        c
    };
    let remove = |name: &str| {
        let mut c = claims_json();
        c.as_object_mut().unwrap().remove(name);
        c
    };
    let cases = [
        (
            "aud array",
            edit("aud", json!([AUD])),
            DelegationError::AudienceNotSingle,
        ),
        (
            "aud number",
            edit("aud", json!(1)),
            DelegationError::Claim("aud is not a string"),
        ),
        (
            "no aud",
            remove("aud"),
            DelegationError::Claim("aud is not a string"),
        ),
        (
            "no iss",
            remove("iss"),
            DelegationError::Claim("iss is not a string"),
        ),
        (
            "no client_id",
            remove("client_id"),
            DelegationError::Claim("client_id is not a string"),
        ),
        (
            "exp float",
            edit("exp", json!(NOW as f64 + 0.5)),
            DelegationError::Claim("exp is not an integer"),
        ),
        (
            "exp string",
            edit("exp", json!("later")),
            DelegationError::Claim("exp is not an integer"),
        ),
        (
            "no iat",
            remove("iat"),
            DelegationError::Claim("iat is not an integer"),
        ),
        (
            "nbf future",
            edit("nbf", json!(NOW + 60)),
            DelegationError::NotYetValid,
        ),
        (
            "nbf string",
            edit("nbf", json!("x")),
            DelegationError::Claim("nbf is not an integer"),
        ),
        (
            "scope array",
            edit("scope", json!(["a"])),
            DelegationError::Claim("scope is not a string"),
        ),
        (
            "no sub",
            remove("sub"),
            DelegationError::Claim("sub is not a non-empty string"),
        ),
        (
            "no grant_id",
            remove("grant_id"),
            DelegationError::Claim("grant_id is not a non-empty string"),
        ),
        (
            "payload array",
            json!([1]),
            DelegationError::Claim("payload is not a JSON object"),
        ),
    ];
    for (name, payload, expected) in cases {
        let token = f.sign_raw(DELEGATION_TYP, &payload);
        assert_eq!(f.verify(&token), Err(expected), "{name}");
    }
    // A past nbf is fine.
    let token = f.sign_raw(DELEGATION_TYP, &edit("nbf", json!(NOW - 60)));
    assert!(f.verify(&token).is_ok());
}

#[test]
fn jws_failures_are_reported() {
    let f = Fixture::new();
    let c = claims();

    // typ "JWT" instead of at+jwt.
    let jwt = f.sign_raw("JWT", &claims_json());
    assert_eq!(
        f.verify(&jwt),
        Err(DelegationError::Jws(ProviderKeyError::WrongTyp))
    );

    // A receipt-typed JWS over the same claims is not a delegation token.
    let receipt_typed = f.sign_raw("pact-receipt+jws", &claims_json());
    assert_eq!(
        f.verify(&receipt_typed),
        Err(DelegationError::Jws(ProviderKeyError::WrongTyp))
    );

    // Signed by a key not in the set.
    let stranger = ProviderKey::generate().unwrap();
    let foreign = sign_delegation_token(&stranger, &c).unwrap();
    assert_eq!(
        f.verify(&foreign),
        Err(DelegationError::Jws(ProviderKeyError::UnknownKey))
    );

    // alg none, unsigned.
    let header = json!({"alg": "none", "typ": DELEGATION_TYP, "kid": f.key.kid()});
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims_json().to_string())
    );
    assert_eq!(
        f.verify(&none),
        Err(DelegationError::Jws(ProviderKeyError::AlgNotAllowed))
    );

    // Tampered payload: a wider scope under the original signature.
    let token = sign_delegation_token(&f.key, &c).unwrap();
    let mut wider = claims_json();
    wider["scope"] = json!("orders:read orders:cancel admin");
    let parts: Vec<&str> = token.split('.').collect();
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(wider.to_string()),
        parts[2]
    );
    assert_eq!(
        f.verify(&tampered),
        Err(DelegationError::Jws(ProviderKeyError::BadSignature))
    );

    // Tampered signature.
    let mut sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    sig[10] ^= 1;
    let bad_sig = format!("{}.{}.{}", parts[0], parts[1], URL_SAFE_NO_PAD.encode(sig));
    assert_eq!(
        f.verify(&bad_sig),
        Err(DelegationError::Jws(ProviderKeyError::BadSignature))
    );
}

#[test]
fn oversized_tokens_are_refused_before_decoding() {
    let f = Fixture::new();
    let huge = "a".repeat(MAX_DELEGATION_TOKEN_BYTES + 1);
    assert_eq!(f.verify(&huge), Err(DelegationError::TooLarge));

    let mut c = claims();
    c.authorization_details = Some(json!(["x".repeat(MAX_DELEGATION_TOKEN_BYTES)]));
    let token = sign_delegation_token(&f.key, &c).unwrap();
    assert_eq!(f.verify(&token), Err(DelegationError::TooLarge));
}

#[test]
fn errors_do_not_carry_the_token() {
    let f = Fixture::new();
    let token = sign_delegation_token(&f.key, &claims()).unwrap();
    let err = verify_delegation_token(&token, &f.keys, ISS, "https://x/a2a", PA, NOW).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(&token));
    assert!(!shown.contains(token.split('.').nth(1).unwrap()));
}
