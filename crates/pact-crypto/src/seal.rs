//! The key-encryption key: seals secrets at rest.
//!
//! By design, the Provider's private signing keys and users' TOTP secrets are
//! stored encrypted with a key that comes from configuration, never from the
//! database. A database dump alone therefore yields no usable secret.
//!
//! Format of a sealed value (version 1):
//!
//! ```text
//! 0x01 || nonce (12 bytes) || ciphertext || GCM tag (16 bytes)
//! ```
//!
//! AES-256-GCM with a fresh random 96-bit nonce per value (NIST SP 800-38D
//! §8.2.2: random nonces are safe for up to 2^32 messages per key, far beyond
//! the number of keys and secrets one deployment seals). The authenticated data
//! is the version byte followed by the caller's `aad`, so neither the format
//! version nor the row a value belongs to can be changed without detection.

use std::fmt;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use openssl::symm::{Cipher, decrypt_aead, encrypt_aead};

/// Length of an AES-256 key.
const KEY_BYTES: usize = 32;
/// GCM's recommended nonce length (NIST SP 800-38D §5.2.1.1).
const NONCE_BYTES: usize = 12;
/// Full-length GCM tag; truncated tags weaken the authentication guarantee.
const TAG_BYTES: usize = 16;
/// The only format version written and read today.
const VERSION: u8 = 1;
/// Smallest well-formed sealed value: header, nonce and tag around an empty plaintext.
const MIN_SEALED_BYTES: usize = 1 + NONCE_BYTES + TAG_BYTES;

/// Operators paste keys from many tools: accept both alphabets, padded or not.
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why sealing, opening or loading the master key failed. Carries no secret
/// and no ciphertext, so it may be logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The configured key is not base64 of exactly 32 bytes.
    #[error("invalid master key: {0}")]
    InvalidKey(&'static str),
    /// The sealed value does not open with this key and `aad`: wrong key,
    /// wrong row, truncated, tampered, or an unknown format version. One
    /// variant for all of them, since GCM cannot tell them apart anyway.
    #[error("sealed value does not open")]
    Invalid,
    /// OpenSSL failed (random generator or cipher setup).
    #[error("cryptographic failure: {0}")]
    Crypto(&'static str),
}

/// The 256-bit key-encryption key from configuration.
///
/// Deliberately not `PartialEq` (comparing secrets invites timing leaks) and
/// not `Display`; `Debug` prints `MasterKey(..)`.
#[derive(Clone)]
pub struct MasterKey([u8; KEY_BYTES]);

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(..)")
    }
}

impl MasterKey {
    /// A fresh random key from OpenSSL's CSPRNG, e.g. for `pactd keygen`.
    ///
    /// Fallible because the CSPRNG can report failure; a key is never made
    /// from a partially filled buffer.
    pub fn generate() -> Result<Self, SealError> {
        let mut key = [0u8; KEY_BYTES];
        openssl::rand::rand_bytes(&mut key)
            .map_err(|_| SealError::Crypto("random generator failed"))?;
        Ok(Self(key))
    }

    /// Parse the key from configuration: standard or URL-safe base64 (RFC
    /// 4648 §4, §5), padded or not, surrounding whitespace ignored; it must
    /// decode to exactly 32 bytes. Mixed alphabets are refused.
    pub fn from_base64(s: &str) -> Result<Self, SealError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(SealError::InvalidKey("empty"));
        }
        let url_safe = s.contains(['-', '_']);
        let engine = if url_safe {
            &URL_SAFE_LENIENT
        } else {
            &STANDARD_LENIENT
        };
        let bytes = engine
            .decode(s)
            .map_err(|_| SealError::InvalidKey("not base64"))?;
        let key: [u8; KEY_BYTES] = bytes
            .try_into()
            .map_err(|_| SealError::InvalidKey("not 32 bytes"))?;
        Ok(Self(key))
    }

    /// Standard padded base64 (RFC 4648 §4), the form `pactd keygen` prints.
    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    /// Encrypt and authenticate `plaintext`, binding it to `aad`.
    ///
    /// `aad` should identify the row the value is stored in (e.g. the key's
    /// `kid` or the user id): a sealed value copied into another row then no
    /// longer opens, so an attacker with write access to the database cannot
    /// swap one user's TOTP secret for another's.
    /// A key for another purpose than sealing, derived from this one: the
    /// HMAC-SHA256 of `label` under the master key (a PRF keyed with a
    /// uniformly random key, as RFC 5869's expand step is). Every node that
    /// holds the master key holds it, and each label gives an unrelated key.
    pub fn derive(&self, label: &[u8]) -> Result<[u8; 32], SealError> {
        let key = openssl::pkey::PKey::hmac(&self.0).map_err(|_| SealError::Crypto("hmac key"))?;
        let mut signer = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &key)
            .map_err(|_| SealError::Crypto("hmac"))?;
        signer
            .update(label)
            .map_err(|_| SealError::Crypto("hmac"))?;
        let out = signer
            .sign_to_vec()
            .map_err(|_| SealError::Crypto("hmac"))?;
        out.try_into().map_err(|_| SealError::Crypto("hmac length"))
    }

    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_BYTES];
        openssl::rand::rand_bytes(&mut nonce)
            .map_err(|_| SealError::Crypto("random generator failed"))?;
        let mut tag = [0u8; TAG_BYTES];
        let ciphertext = encrypt_aead(
            Cipher::aes_256_gcm(),
            &self.0,
            Some(&nonce),
            &authenticated_data(aad),
            plaintext,
            &mut tag,
        )
        .map_err(|_| SealError::Crypto("AES-GCM encryption failed"))?;

        let mut sealed = Vec::with_capacity(MIN_SEALED_BYTES + ciphertext.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        sealed.extend_from_slice(&tag);
        Ok(sealed)
    }

    /// Check and decrypt a value made by [`MasterKey::seal`] with the same
    /// `aad`. Any failure is [`SealError::Invalid`]; no plaintext is released
    /// unless the tag verifies.
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
        if sealed.len() < MIN_SEALED_BYTES {
            return Err(SealError::Invalid);
        }
        let (header, rest) = sealed.split_at(1);
        if header != [VERSION] {
            return Err(SealError::Invalid);
        }
        let (nonce, rest) = rest.split_at(NONCE_BYTES);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_BYTES);
        decrypt_aead(
            Cipher::aes_256_gcm(),
            &self.0,
            Some(nonce),
            &authenticated_data(aad),
            ciphertext,
            tag,
        )
        .map_err(|_| SealError::Invalid)
    }
}

/// GCM's additional data: the version byte, then the caller's `aad`. The
/// version has a fixed length, so the concatenation is unambiguous.
fn authenticated_data(aad: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(1 + aad.len());
    data.push(VERSION);
    data.extend_from_slice(aad);
    data
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

    fn key() -> MasterKey {
        MasterKey::generate().unwrap()
    }

    #[test]
    fn seal_then_open_round_trips() {
        let k = key();
        for plaintext in [
            &b""[..],
            b"x",
            b"a TOTP secret of some length",
            &[0u8; 1000],
        ] {
            let sealed = k.seal(plaintext, b"kid-1").unwrap();
            assert_eq!(sealed.len(), MIN_SEALED_BYTES + plaintext.len());
            assert_eq!(sealed[0], VERSION);
            assert_eq!(k.open(&sealed, b"kid-1").unwrap(), plaintext);
        }
    }

    #[test]
    fn each_seal_uses_a_fresh_nonce() {
        let k = key();
        let a = k.seal(b"same", b"row").unwrap();
        let b = k.seal(b"same", b"row").unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn wrong_key_or_aad_does_not_open() {
        let k = key();
        let sealed = k.seal(b"secret", b"kid-1").unwrap();
        assert_eq!(key().open(&sealed, b"kid-1"), Err(SealError::Invalid));
        assert_eq!(k.open(&sealed, b"kid-2"), Err(SealError::Invalid));
        assert_eq!(k.open(&sealed, b""), Err(SealError::Invalid));
    }

    #[test]
    fn any_flipped_byte_is_detected() {
        let k = key();
        let sealed = k.seal(b"secret", b"kid-1").unwrap();
        for i in 0..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[i] ^= 0x01;
            assert_eq!(
                k.open(&tampered, b"kid-1"),
                Err(SealError::Invalid),
                "byte {i}"
            );
        }
    }

    #[test]
    fn truncated_or_extended_input_is_refused() {
        let k = key();
        let sealed = k.seal(b"secret", b"kid-1").unwrap();
        for len in 0..sealed.len() {
            assert_eq!(
                k.open(&sealed[..len], b"kid-1"),
                Err(SealError::Invalid),
                "{len}"
            );
        }
        let mut longer = sealed.clone();
        longer.push(0);
        assert_eq!(k.open(&longer, b"kid-1"), Err(SealError::Invalid));
    }

    #[test]
    fn base64_forms_are_accepted() {
        // 0xfb/0xff bytes make the standard and URL-safe encodings differ.
        let raw = [0xfbu8; 32];
        let k = MasterKey::from_base64(&STANDARD.encode(raw)).unwrap();
        let sealed = k.seal(b"v", b"").unwrap();
        let forms = [
            STANDARD.encode(raw),
            STANDARD_NO_PAD.encode(raw),
            URL_SAFE.encode(raw),
            URL_SAFE_NO_PAD.encode(raw),
            format!("  {}\n", STANDARD.encode(raw)),
            format!("\t{}  ", URL_SAFE_NO_PAD.encode(raw)),
        ];
        for form in forms {
            let parsed = MasterKey::from_base64(&form).unwrap();
            assert_eq!(parsed.to_base64(), STANDARD.encode(raw), "{form:?}");
            assert_eq!(parsed.open(&sealed, b"").unwrap(), b"v");
        }
    }

    #[test]
    fn to_base64_round_trips() {
        let k = key();
        let again = MasterKey::from_base64(&k.to_base64()).unwrap();
        assert_eq!(again.to_base64(), k.to_base64());
        let sealed = k.seal(b"v", b"a").unwrap();
        assert_eq!(again.open(&sealed, b"a").unwrap(), b"v");
    }

    #[test]
    fn bad_keys_are_refused() {
        for bad in [
            String::new(),
            "   ".to_owned(),
            STANDARD.encode([0u8; 31]),
            STANDARD.encode([0u8; 33]),
            "not base64 at all!".to_owned(),
            // Mixed alphabets: '+' (standard) together with '_' (URL-safe).
            format!("+_{}", &URL_SAFE_NO_PAD.encode([0u8; 32])[2..]),
        ] {
            assert!(
                matches!(MasterKey::from_base64(&bad), Err(SealError::InvalidKey(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn debug_does_not_show_the_key() {
        let k = MasterKey::from_base64(&STANDARD.encode([0x41u8; 32])).unwrap();
        let shown = format!("{k:?}");
        assert_eq!(shown, "MasterKey(..)");
        assert!(!shown.contains("QUFB"));
    }
}
