//! A test personal agent: its own keys, a JWKS served on a loopback port that
//! counts fetches, and a signer that can produce valid and hostile PA-JWTs.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use josekit::jwk::alg::ec::{EcCurve, EcKeyPair};
use josekit::jwk::alg::rsa::RsaKeyPair;
use josekit::jws::alg::ecdsa::EcdsaJwsSigner;
use josekit::jws::alg::rsassa::RsassaJwsSigner;
use josekit::jws::{ES256, JwsSigner, RS256};
use serde_json::{Value, json};

/// A signing key of the PA, with the kid it is published under.
#[derive(Clone)]
pub enum PaKey {
    Ec {
        kid: String,
        pair: Arc<EcKeyPair>,
        /// Made once: building a signer from the JWK costs far more than a
        /// signature, and the load example signs a PA-JWT per request.
        signer: Arc<EcdsaJwsSigner>,
    },
    Rsa {
        kid: String,
        pair: Arc<RsaKeyPair>,
        signer: Arc<RsassaJwsSigner>,
    },
}

impl PaKey {
    pub fn new_ec(kid: &str) -> Self {
        let pair = EcKeyPair::generate(EcCurve::P256).unwrap();
        let signer = ES256.signer_from_jwk(&pair.to_jwk_private_key()).unwrap();
        Self::Ec {
            kid: kid.into(),
            pair: Arc::new(pair),
            signer: Arc::new(signer),
        }
    }
    pub fn new_rsa(kid: &str) -> Self {
        let pair = RsaKeyPair::generate(2048).unwrap();
        let signer = RS256.signer_from_jwk(&pair.to_jwk_private_key()).unwrap();
        Self::Rsa {
            kid: kid.into(),
            pair: Arc::new(pair),
            signer: Arc::new(signer),
        }
    }
    pub fn kid(&self) -> &str {
        match self {
            Self::Ec { kid, .. } | Self::Rsa { kid, .. } => kid,
        }
    }
    pub fn alg(&self) -> &'static str {
        match self {
            Self::Ec { .. } => "ES256",
            Self::Rsa { .. } => "RS256",
        }
    }
    pub fn public_jwk(&self) -> Jwk {
        let mut jwk = match self {
            Self::Ec { pair, .. } => pair.to_jwk_public_key(),
            Self::Rsa { pair, .. } => pair.to_jwk_public_key(),
        };
        jwk.set_key_id(self.kid());
        jwk.set_algorithm(self.alg());
        jwk.set_key_use("sig");
        jwk
    }
    /// Signs `input` with this key's own algorithm.
    pub fn sign(&self, input: &[u8]) -> Vec<u8> {
        match self {
            Self::Ec { signer, .. } => signer.sign(input).unwrap(),
            Self::Rsa { signer, .. } => signer.sign(input).unwrap(),
        }
    }
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Assembles a compact JWS from JSON header and payload, signed by `key`.
pub fn compact(header: &Value, payload: &Value, key: &PaKey) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(payload.to_string().as_bytes())
    );
    let sig = key.sign(input.as_bytes());
    format!("{input}.{}", b64(&sig))
}

pub fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

struct Jwks {
    keys: Mutex<Vec<PaKey>>,
    hits: AtomicUsize,
    discovery_hits: AtomicUsize,
    cache_control: Mutex<Option<String>>,
}

pub struct TestPa {
    pub issuer: String,
    pub jwks_uri: String,
    /// The key new tokens are signed with.
    pub key: Mutex<PaKey>,
    jwks: Arc<Jwks>,
    _server: tokio::task::JoinHandle<()>,
}

impl TestPa {
    /// A PA with one ES256 key, its JWKS served on 127.0.0.1:0.
    pub async fn start(issuer: &str) -> Self {
        Self::start_with_key(issuer, PaKey::new_ec("k1")).await
    }

    pub async fn start_with_key(issuer: &str, key: PaKey) -> Self {
        Self::start_serving(Some(issuer), key).await
    }

    /// A PA nobody registered: its issuer is its own loopback URL, which
    /// serves OpenID discovery (`/.well-known/openid-configuration`) naming
    /// its JWKS, as open admission needs (PACT §3.1).
    pub async fn start_discoverable() -> Self {
        Self::start_serving(None, PaKey::new_ec("k1")).await
    }

    /// How many times pactd fetched this PA's discovery document.
    pub fn discovery_hits(&self) -> usize {
        self.jwks.discovery_hits.load(Ordering::SeqCst)
    }

    async fn start_serving(issuer: Option<&str>, key: PaKey) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let issuer = issuer.map_or_else(|| format!("http://{addr}"), str::to_owned);
        let jwks_uri = format!("http://{addr}/.well-known/jwks.json");
        let jwks = Arc::new(Jwks {
            keys: Mutex::new(vec![key.clone()]),
            hits: AtomicUsize::new(0),
            discovery_hits: AtomicUsize::new(0),
            cache_control: Mutex::new(Some("max-age=300".into())),
        });
        let served = jwks.clone();
        let counted = jwks.clone();
        // What an agent may claim of itself (RFC 7591 §2 names), for staff.
        let doc = json!({"issuer": issuer, "jwks_uri": jwks_uri,
            "client_name": "Test Agent", "logo_uri": "https://logos.example/test-agent.png"});
        let app = Router::new().route(
            "/.well-known/openid-configuration",
            get(move || {
                counted.discovery_hits.fetch_add(1, Ordering::SeqCst);
                let doc = doc.clone();
                async move { axum::Json(doc) }
            }),
        );
        let app = app.route(
            "/.well-known/jwks.json",
            get(move || {
                let served = served.clone();
                async move {
                    served.hits.fetch_add(1, Ordering::SeqCst);
                    let keys: Vec<Value> = served
                        .keys
                        .lock()
                        .unwrap()
                        .iter()
                        .map(|k| serde_json::from_str(&k.public_jwk().to_string()).unwrap())
                        .collect();
                    let cc = served.cache_control.lock().unwrap().clone();
                    let mut res = axum::response::Response::new(axum::body::Body::from(
                        json!({"keys": keys}).to_string(),
                    ));
                    res.headers_mut()
                        .insert("content-type", "application/json".parse().unwrap());
                    if let Some(cc) = cc {
                        res.headers_mut()
                            .insert("cache-control", cc.parse().unwrap());
                    }
                    res
                }
            }),
        );
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        Self {
            issuer,
            jwks_uri,
            key: Mutex::new(key),
            jwks,
            _server: server,
        }
    }

    /// How many times pactd fetched this PA's JWKS.
    pub fn jwks_hits(&self) -> usize {
        self.jwks.hits.load(Ordering::SeqCst)
    }

    /// Publishes `key` (alongside the old ones) and signs with it from now on.
    pub fn rotate_to(&self, key: PaKey) {
        self.jwks.keys.lock().unwrap().push(key.clone());
        *self.key.lock().unwrap() = key;
    }

    pub fn current_key(&self) -> PaKey {
        self.key.lock().unwrap().clone()
    }

    /// The claims of a valid PA-JWT for `sub` at `audience`.
    pub fn claims(&self, sub: &str, audience: &str) -> Value {
        let now = now();
        json!({"iss": self.issuer, "sub": sub, "aud": audience, "iat": now, "exp": now + 120,
               "jti": uuid::Uuid::new_v4().to_string()})
    }

    pub fn header(&self) -> Value {
        let key = self.current_key();
        json!({"alg": key.alg(), "typ": "JWT", "kid": key.kid()})
    }

    /// A valid PA-JWT.
    pub fn token(&self, sub: &str, audience: &str) -> String {
        compact(
            &self.header(),
            &self.claims(sub, audience),
            &self.current_key(),
        )
    }

    /// A PA-JWT from edited claims and header, signed with the current key.
    pub fn token_with(
        &self,
        sub: &str,
        audience: &str,
        edit: impl FnOnce(&mut Value, &mut Value),
    ) -> String {
        let mut header = self.header();
        let mut claims = self.claims(sub, audience);
        edit(&mut header, &mut claims);
        compact(&header, &claims, &self.current_key())
    }
}
