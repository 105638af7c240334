//! Test-only helpers: generate PA keys and mint compact JWS tokens by hand,
//! so tests can build exactly the malformed or hostile tokens they need.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use josekit::jwk::KeyPair as _;
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use josekit::jwk::alg::rsa::RsaKeyPair;
use josekit::jws::{ES256, JwsSigner, RS256};
use serde_json::{Value, json};

use crate::keys::VerifyingKey;

/// A PA signing identity: its signer and public JWK.
pub(crate) struct TestPa {
    pub(crate) signer: Box<dyn JwsSigner>,
    pub(crate) public_jwk: Jwk,
    pub(crate) public_pem: Vec<u8>,
}

impl TestPa {
    pub(crate) fn es256(kid: &str) -> TestPa {
        let pair = EcKeyPair::generate(EcCurve::P256).expect("generate EC key");
        let mut private = pair.to_jwk_key_pair();
        private.set_key_id(kid);
        let mut public_jwk = pair.to_jwk_public_key();
        public_jwk.set_key_id(kid);
        let signer = ES256.signer_from_jwk(&private).expect("EC signer");
        TestPa {
            signer: Box::new(signer),
            public_jwk,
            public_pem: pair.to_pem_public_key(),
        }
    }

    pub(crate) fn rs256(kid: &str) -> TestPa {
        let pair = RsaKeyPair::generate(2048).expect("generate RSA key");
        let mut private = pair.to_jwk_key_pair();
        private.set_key_id(kid);
        let mut public_jwk = pair.to_jwk_public_key();
        public_jwk.set_key_id(kid);
        let signer = RS256.signer_from_jwk(&private).expect("RSA signer");
        TestPa {
            signer: Box::new(signer),
            public_jwk,
            public_pem: pair.to_pem_public_key(),
        }
    }

    pub(crate) fn key(&self) -> VerifyingKey {
        VerifyingKey::from_jwk(&self.public_jwk).expect("public key")
    }

    pub(crate) fn alg(&self) -> &'static str {
        match self.signer.algorithm().name() {
            "ES256" => "ES256",
            _ => "RS256",
        }
    }

    /// A header `{"alg", "kid"}` for this key.
    pub(crate) fn header(&self) -> Value {
        json!({"alg": self.alg(), "kid": self.public_jwk.key_id()})
    }

    /// Sign `header.payload` with this key.
    pub(crate) fn token(&self, header: &Value, payload: &Value) -> String {
        sign_with(self.signer.as_ref(), header, payload)
    }
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub(crate) fn signing_input(header: &Value, payload: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(payload.to_string().as_bytes())
    )
}

pub(crate) fn sign_with(signer: &dyn JwsSigner, header: &Value, payload: &Value) -> String {
    let input = signing_input(header, payload);
    let signature = signer.sign(input.as_bytes()).expect("sign");
    format!("{input}.{}", b64(&signature))
}

pub(crate) const AUD: &str = "pactd-audience-7f3a";
pub(crate) const ISS: &str = "https://pa.example.com";
pub(crate) const NOW: i64 = 1_750_000_000;

/// Claims that pass with `NOW`.
pub(crate) fn good_claims() -> Value {
    json!({
        "iss": ISS,
        "sub": "user-123",
        "aud": AUD,
        "iat": NOW,
        "exp": NOW + 300,
        "jti": "j-1",
    })
}
