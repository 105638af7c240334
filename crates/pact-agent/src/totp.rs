//! RFC 6238 TOTP (and the RFC 4226 HOTP under it), as authenticator apps
//! compute it: HMAC-SHA-1, 30-second steps, 6 digits, the secret given in
//! RFC 4648 base32. Used to sign in to pactd's pages (`--approve pactd-login`).
//!
//! The secret never appears in `Debug` output or in an error message.

use std::fmt;

use anyhow::{Result, bail};
use totp_rs::{Algorithm, TOTP};

/// Seconds per TOTP step (RFC 6238 `X`).
pub const STEP_SECS: i64 = 30;
/// Digits of a code.
pub const DIGITS: u32 = 6;

/// An authenticator secret (the raw key bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct TotpSecret(Vec<u8>);

impl fmt::Debug for TotpSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TotpSecret(…)")
    }
}

impl TotpSecret {
    /// The raw key.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The key as authenticator apps take it: base32, any case, spaces,
    /// dashes and `=` padding ignored.
    pub fn from_base32(text: &str) -> Result<Self> {
        let bytes = base32_decode(text)?;
        if bytes.is_empty() {
            bail!("the TOTP secret is empty");
        }
        Ok(Self(bytes))
    }

    /// The code for a unix time (RFC 6238, through the `totp-rs` crate).
    pub fn code_at(&self, unix: i64) -> Result<String> {
        let start = u64::try_from(step_at(unix) * STEP_SECS)?;
        Ok(generator(&self.0, DIGITS).generate(start))
    }
}

/// HMAC-SHA-1, 30-second steps, `digits` digits. Unchecked: a key someone
/// was given by a server is what it is; refusing a short one would only
/// stop the sign-in.
fn generator(key: &[u8], digits: u32) -> TOTP {
    TOTP::new_unchecked(
        Algorithm::SHA1,
        digits as usize,
        0,
        STEP_SECS.unsigned_abs(),
        key.to_vec(),
    )
}

/// The TOTP step of a unix time.
pub fn step_at(unix: i64) -> i64 {
    unix.div_euclid(STEP_SECS)
}

/// Seconds until the next step starts (1–30).
pub fn secs_to_next_step(unix: i64) -> i64 {
    STEP_SECS - unix.rem_euclid(STEP_SECS)
}

/// RFC 4648 base32 to bytes (the `base32` crate), as authenticator apps
/// show a key: any case, with spaces, dashes and `=` padding ignored.
pub fn base32_decode(text: &str) -> Result<Vec<u8>> {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '=')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    match base32::decode(base32::Alphabet::Rfc4648 { padding: false }, &clean) {
        Some(bytes) => Ok(bytes),
        // The text is not shown: it is a secret.
        None => bail!("the TOTP secret is not base32 (letters A–Z and digits 2–7)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4226 Appendix D and RFC 6238 Appendix B use this key (SHA-1).
    const RFC_KEY: &[u8] = b"12345678901234567890";

    #[test]
    fn hotp_matches_rfc_4226_appendix_d() {
        let expected = [
            755224, 287082, 359152, 969429, 338314, 254676, 287922, 162583, 399871, 520489,
        ];
        for (counter, want) in expected.iter().enumerate() {
            // HOTP(counter) is the TOTP of the step starting at counter × 30 s.
            let code = generator(RFC_KEY, 6).generate(counter as u64 * 30);
            assert_eq!(code, format!("{want:06}"), "{counter}");
        }
    }

    #[test]
    fn totp_matches_rfc_6238_appendix_b() {
        // The RFC lists 8 digits; authenticator apps show the last 6.
        for (time, eight) in [
            (59, "94287082"),
            (1_111_111_109, "07081804"),
            (1_111_111_111, "14050471"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
            (20_000_000_000, "65353130"),
        ] {
            let secret = TotpSecret::from_bytes(RFC_KEY);
            assert_eq!(secret.code_at(time).unwrap(), eight[2..], "T={time}");
            let start = u64::try_from(step_at(time) * STEP_SECS).unwrap();
            assert_eq!(generator(RFC_KEY, 8).generate(start), eight, "T={time}");
        }
    }

    #[test]
    fn base32_reads_what_authenticator_apps_take() {
        // RFC 4648 §10 test vectors.
        for (text, bytes) in [
            ("", ""),
            ("MY======", "f"),
            ("MZXQ====", "fo"),
            ("MZXW6===", "foo"),
            ("MZXW6YQ=", "foob"),
            ("MZXW6YTB", "fooba"),
            ("MZXW6YTBOI======", "foobar"),
        ] {
            assert_eq!(base32_decode(text).unwrap(), bytes.as_bytes(), "{text}");
        }
        // Spaced, lower case, dashed, unpadded: the same key.
        let key = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
        assert_eq!(base32_decode(key).unwrap(), RFC_KEY);
        assert_eq!(
            base32_decode("gezd gnbv gy3t qojq gezd-gnbv gy3t qojq").unwrap(),
            RFC_KEY
        );
        assert_eq!(
            TotpSecret::from_base32(key).unwrap(),
            TotpSecret::from_bytes(RFC_KEY)
        );
    }

    #[test]
    fn bad_secrets_are_refused_without_showing_them() {
        let e = TotpSecret::from_base32("ABC1DEFG").unwrap_err().to_string();
        assert!(e.contains("not base32"), "{e}");
        assert!(!e.contains("ABC1"), "{e}");
        assert!(TotpSecret::from_base32(" = ").is_err());
        let s = TotpSecret::from_bytes(RFC_KEY);
        assert_eq!(format!("{s:?}"), "TotpSecret(…)");
    }

    #[test]
    fn steps_are_thirty_seconds() {
        assert_eq!(step_at(59), 1);
        assert_eq!(step_at(60), 2);
        assert_eq!(secs_to_next_step(60), 30);
        assert_eq!(secs_to_next_step(89), 1);
        assert_eq!(secs_to_next_step(-1), 1);
    }
}
