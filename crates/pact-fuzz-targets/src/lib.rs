//! The bodies of pactd's fuzz targets, one module each with a `run(data)`
//! that returns on an uninteresting input and panics on a finding, and the
//! pieces they share: fixed test keys, token minting and the constants the
//! targets check tokens against.
//!
//! `fuzz/` (cargo-fuzz, libFuzzer, a workspace of its own) wraps each `run`
//! in a `fuzz_target!`; here, in the main workspace, they are compiled and
//! type-checked with every build, and the test below replays the committed
//! seed corpora (`fuzz/corpus/<target>/`) through them on every
//! `cargo test`. A change that breaks a target's build or one of its
//! invariants fails CI instead of waiting for the next fuzzing session.
//!
//! The keys are derived at start-up from fixed seeds (P-256) or generated
//! (RSA), so no private key is stored in the repository. They exist only for
//! fuzzing and sign nothing outside this crate.

// A target's `expect` is one of its assertions: a finding, reported as a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod a2a_message;
pub mod authz_details;
pub mod delegation_token;
pub mod oauth_form;
pub mod pa_jwt;
pub mod user_code;

use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use josekit::jwk::Jwk;
use josekit::jwk::KeyPair as _;
use josekit::jwk::alg::rsa::RsaKeyPair;
use josekit::jws::{ES256, JwsSigner, RS256};
use openssl::bn::{BigNum, BigNumContext};
use openssl::ec::{EcGroup, EcKey, EcPoint};
use openssl::nid::Nid;
use openssl::pkey::PKey;
use pact_jose::{PaJwtRules, ProviderKey, ProviderKeySet, VerifyingKey};
use serde_json::Value;

/// The fixed "now" every target checks time claims against (unix seconds).
pub const NOW: i64 = 1_750_000_000;
/// The Provider-wide PA-JWT audience.
pub const PA_AUD: &str = "pactd-audience-7f3a";
/// The PA's issuer (also the delegation token's `client_id`).
pub const PA_ISS: &str = "https://pa.example.com";
/// `kid` of the PA's ES256 key.
pub const PA_ES_KID: &str = "pa-es-1";
/// `kid` of the PA's RS256 key.
pub const PA_RS_KID: &str = "pa-rs-1";
/// The brand's OAuth issuer (a delegation token's `iss`).
pub const BRAND_ISS: &str = "https://pactd.example/brands/acme";
/// The brand's interface URL (a delegation token's `aud`).
pub const BRAND_AUD: &str = "https://pactd.example/a2a/acme";

/// A P-256 private key as PKCS#8 DER, derived from `seed`: the scalar is
/// SHA-256(seed), which is below the group order for these seeds.
pub fn p256_pkcs8_from_seed(seed: &str) -> Vec<u8> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("P-256");
    let mut ctx = BigNumContext::new().expect("bn ctx");
    let d = BigNum::from_slice(&openssl::sha::sha256(seed.as_bytes())).expect("scalar");
    let mut point = EcPoint::new(&group).expect("point");
    point.mul_generator2(&group, &d, &mut ctx).expect("d*G");
    let ec = EcKey::from_private_components(&group, &d, &point).expect("EC key");
    ec.check_key().expect("consistent key");
    PKey::from_ec_key(ec)
        .expect("pkey")
        .private_key_to_pkcs8()
        .expect("pkcs8")
}

/// The PA's keys: ES256 (fixed) and RS256 (2048-bit, generated once per
/// process; nothing can forge it, so only the harness-signed modes reach it).
pub struct PaKeys {
    pub es_signer: Box<dyn JwsSigner>,
    pub es_key: VerifyingKey,
    pub rs_signer: Box<dyn JwsSigner>,
    pub rs_key: VerifyingKey,
}

pub fn pa_keys() -> &'static PaKeys {
    static KEYS: OnceLock<PaKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let der = p256_pkcs8_from_seed("pactd-fuzz/pa-es256");
        let es_signer = ES256.signer_from_der(&der).expect("ES256 signer");
        // Public JWK from the same scalar, via ProviderKey (same P-256 key), with our kid.
        let provider = ProviderKey::from_pkcs8_der(&der).expect("P-256 key");
        let mut es_jwk = provider.public_jwk();
        es_jwk["kid"] = Value::from(PA_ES_KID);
        let es_jwk = Jwk::from_bytes(es_jwk.to_string()).expect("jwk");
        let es_key = VerifyingKey::from_jwk(&es_jwk).expect("ES256 verifying key");

        let pair = RsaKeyPair::generate(2048).expect("RSA key");
        let mut private = pair.to_jwk_key_pair();
        private.set_key_id(PA_RS_KID);
        let mut public = pair.to_jwk_public_key();
        public.set_key_id(PA_RS_KID);
        let rs_signer = RS256.signer_from_jwk(&private).expect("RS256 signer");
        let rs_key = VerifyingKey::from_jwk(&public).expect("RS256 verifying key");
        PaKeys {
            es_signer: Box::new(es_signer),
            es_key,
            rs_signer: Box::new(rs_signer),
            rs_key,
        }
    })
}

pub fn pa_rules() -> &'static PaJwtRules {
    static RULES: OnceLock<PaJwtRules> = OnceLock::new();
    RULES.get_or_init(|| PaJwtRules::new(PA_AUD))
}

/// The Provider's keys: the current signing key and an older one still
/// published (a rotation), and the set that verifies both.
pub struct ProviderKeys {
    pub current: ProviderKey,
    pub old: ProviderKey,
    pub set: ProviderKeySet,
    /// A raw ES256 signer for `current`, to sign arbitrary headers.
    pub current_raw: Box<dyn JwsSigner>,
}

pub fn provider_keys() -> &'static ProviderKeys {
    static KEYS: OnceLock<ProviderKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let current_der = p256_pkcs8_from_seed("pactd-fuzz/provider-current");
        let old_der = p256_pkcs8_from_seed("pactd-fuzz/provider-old");
        let current = ProviderKey::from_pkcs8_der(&current_der).expect("current key");
        let old = ProviderKey::from_pkcs8_der(&old_der).expect("old key");
        let set = ProviderKeySet::from_public_jwks(&[current.public_jwk(), old.public_jwk()])
            .expect("key set");
        let current_raw = Box::new(ES256.signer_from_der(&current_der).expect("signer"));
        ProviderKeys {
            current,
            old,
            set,
            current_raw,
        }
    })
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `b64(header).b64(payload).b64(sign(...))`, the bytes taken as they are.
pub fn sign_raw(signer: &dyn JwsSigner, header: &[u8], payload: &[u8]) -> String {
    let input = format!("{}.{}", b64(header), b64(payload));
    let signature = signer.sign(input.as_bytes()).expect("sign");
    format!("{input}.{}", b64(&signature))
}

/// Splits `data` at the first 0xFF byte (never part of valid UTF-8, so
/// never inside a JSON text): `(before, after)`; without one, `(data, [])`.
pub fn split_ff(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == 0xFF) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// Members of a JSON object that a target builds from fuzzer choices.
pub mod mk {
    use arbitrary::{Result, Unstructured};
    use serde_json::{Map, Value};

    /// A short string: mostly one of `likely`, sometimes arbitrary.
    pub fn string(u: &mut Unstructured<'_>, likely: &[&str]) -> Result<String> {
        if !likely.is_empty() && u.ratio(7, 8)? {
            Ok((*u.choose(likely)?).to_owned())
        } else {
            let len = u.int_in_range(0..=24)?;
            let mut s = String::new();
            for _ in 0..len {
                s.push(u.arbitrary::<char>()?);
            }
            Ok(s)
        }
    }

    /// An integer time claim: around `now` (offsets that straddle the limits) or extreme.
    pub fn time(u: &mut Unstructured<'_>, now: i64) -> Result<Value> {
        Ok(match u.int_in_range(0..=9)? {
            0..=5 => Value::from(now + i64::from(u.int_in_range(-4000i32..=4000)?)),
            6 => Value::from(u.arbitrary::<i64>()?),
            7 => Value::from(u.arbitrary::<u64>()?),
            8 => serde_json::Number::from_f64(now as f64 + f64::from(u.arbitrary::<i16>()?) + 0.5)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            _ => Value::from(now.to_string()),
        })
    }

    /// A JSON value of a wrong-ish type, for a member that expects `good`.
    pub fn value_or(u: &mut Unstructured<'_>, good: Value) -> Result<Value> {
        Ok(match u.int_in_range(0..=15)? {
            0 => Value::Null,
            1 => Value::Bool(u.arbitrary()?),
            2 => Value::from(u.arbitrary::<i64>()?),
            3 => Value::Array(vec![good]),
            4 => Value::Array(vec![]),
            5 => Value::Object(Map::new()),
            6 => Value::from(""),
            _ => good,
        })
    }

    /// The lifetime claims of a JWT: `iat` around `now`, `exp` mostly `iat`
    /// plus an offset in `lifetime` (seconds, straddling the allowed maximum),
    /// each sometimes left out, and sometimes an `nbf`.
    pub fn lifetime(
        u: &mut Unstructured<'_>,
        claims: &mut Map<String, Value>,
        now: i64,
        lifetime: std::ops::RangeInclusive<i32>,
    ) -> Result<()> {
        let iat = time(u, now)?;
        let exp = match (iat.as_i64(), u.ratio(3, 4)?) {
            (Some(iat), true) => {
                Value::from(iat.saturating_add(i64::from(u.int_in_range(lifetime)?)))
            }
            _ => time(u, now)?,
        };
        member(u, claims, "iat", iat)?;
        member(u, claims, "exp", exp)?;
        if u.ratio(1, 4)? {
            claims.insert("nbf".into(), time(u, now)?);
        }
        Ok(())
    }

    /// Sets `name` to `value` unless the fuzzer chooses to leave it out.
    pub fn member(
        u: &mut Unstructured<'_>,
        map: &mut Map<String, Value>,
        name: &str,
        value: Value,
    ) -> Result<()> {
        if u.ratio(9, 10)? {
            map.insert(name.to_owned(), value);
        }
        Ok(())
    }
}

/// With `PACTD_FUZZ_TRACE` set, print a target's verdict on each input (to see
/// which path a seed or crash input takes: `cargo fuzz run <t> <file>`).
pub fn trace(message: impl FnOnce() -> String) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("PACTD_FUZZ_TRACE").is_some()) {
        eprintln!("[trace] {}", message());
    }
}

#[cfg(test)]
mod replay {
    use std::path::{Path, PathBuf};

    /// A target's corpus folder and its `run`.
    type Target = (&'static str, fn(&[u8]));

    /// The targets, by name: each a module here, a corpus folder, and a
    /// libFuzzer wrapper in `fuzz/`.
    const NAMES: [&str; 6] = [
        "a2a_message",
        "authz_details",
        "delegation_token",
        "oauth_form",
        "pa_jwt",
        "user_code",
    ];

    /// `fuzz/` is a workspace of its own that CI does not build (libFuzzer
    /// needs a nightly compiler and a C++ build): what keeps its wrappers
    /// true is checked here instead. Every target has its `[[bin]]` in
    /// fuzz/Cargo.toml and a wrapper that hands libFuzzer's input to this
    /// crate's `run` of the same name, and fuzz/ wraps nothing else (a
    /// target renamed or removed here would otherwise leave a wrapper that
    /// fails only at the next fuzzing session).
    #[test]
    fn every_target_has_its_libfuzzer_wrapper_and_nothing_else_does() {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
        let mut wrappers: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        wrappers.sort();
        let expected: Vec<String> = NAMES.iter().map(|n| format!("{n}.rs")).collect();
        assert_eq!(
            wrappers, expected,
            "fuzz/fuzz_targets/ holds exactly the targets"
        );
        for name in NAMES {
            let bin = format!("name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\"");
            assert!(
                manifest.contains(&bin),
                "fuzz/Cargo.toml has no [[bin]] for {name}"
            );
            let wrapper =
                std::fs::read_to_string(fuzz.join("fuzz_targets").join(format!("{name}.rs")))
                    .unwrap();
            let call = format!(
                "libfuzzer_sys::fuzz_target!(|data: &[u8]| pact_fuzz_targets::{name}::run(data));"
            );
            assert!(wrapper.contains("#![no_main]"), "{name}: no #![no_main]");
            assert!(
                wrapper.contains(&call),
                "{name}: the wrapper does not call {name}::run"
            );
        }
        assert_eq!(
            manifest.matches("[[bin]]").count(),
            NAMES.len(),
            "fuzz/Cargo.toml has a [[bin]] that is not a target"
        );
    }

    /// Every committed seed of every target, through the target's `run`: the
    /// same inputs `fuzz/smoke.sh` starts from, without libFuzzer's mutations
    /// (those are for the long runs by hand).
    #[test]
    fn every_seed_corpus_replays_without_a_finding() {
        let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        let targets: [Target; 6] = [
            ("a2a_message", super::a2a_message::run),
            ("authz_details", super::authz_details::run),
            ("delegation_token", super::delegation_token::run),
            ("oauth_form", super::oauth_form::run),
            ("pa_jwt", super::pa_jwt::run),
            ("user_code", super::user_code::run),
        ];
        assert_eq!(targets.map(|(name, _)| name), NAMES);
        for (name, run) in targets {
            let mut seeds: Vec<PathBuf> = std::fs::read_dir(corpora.join(name))
                .unwrap_or_else(|e| panic!("fuzz/corpus/{name}: {e}"))
                .map(|entry| entry.unwrap().path())
                .collect();
            seeds.sort();
            // A corpus that went missing would make this test pass on nothing.
            assert!(
                seeds.len() >= 50,
                "fuzz/corpus/{name} holds {} seeds",
                seeds.len()
            );
            for seed in &seeds {
                let data = std::fs::read(seed).unwrap();
                if std::panic::catch_unwind(|| run(&data)).is_err() {
                    panic!("{name}: the seed {} is a finding", seed.display());
                }
            }
        }
    }
}
