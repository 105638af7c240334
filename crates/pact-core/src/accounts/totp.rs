//! RFC 6238 TOTP (HMAC-SHA1, 30 s steps, 6 digits — what authenticator apps
//! expect), accepting the current step and one on either side (§5.2's
//! allowance for clock drift). Replay is stopped by the caller recording the
//! accepted step (`pact_db::users::advance_totp_step`).

use totp_rs::{Algorithm, TOTP};

/// The alphabet authenticator apps use (RFC 4648 §6), unpadded.
const BASE32: base32::Alphabet = base32::Alphabet::Rfc4648 { padding: false };

pub const STEP_SECS: i64 = 30;
pub const DIGITS: u32 = 6;
pub const SECRET_BYTES: usize = 20;

/// A new random secret (160 bits, RFC 4226 §4's recommendation).
pub fn new_secret() -> Result<Vec<u8>, openssl::error::ErrorStack> {
    let mut s = vec![0u8; SECRET_BYTES];
    openssl::rand::rand_bytes(&mut s)?;
    Ok(s)
}

/// The RFC 6238 generator for a secret (the `totp-rs` crate). Unchecked:
/// secrets we generate are 160 bits; the length rule is theirs to enforce
/// at enrolment, not ours to re-check at every sign-in.
fn generator(secret: &[u8]) -> TOTP {
    TOTP::new_unchecked(
        Algorithm::SHA1,
        DIGITS as usize,
        0,
        STEP_SECS.unsigned_abs(),
        secret.to_vec(),
    )
}

pub fn step_at(now_unix: i64) -> i64 {
    now_unix.div_euclid(STEP_SECS)
}

/// The code of a step, zero-padded; `None` before 1970.
fn code_of_step(totp: &TOTP, step: i64) -> Option<String> {
    let start = u64::try_from(step.checked_mul(STEP_SECS)?).ok()?;
    Some(totp.generate(start))
}

/// The code for a time, zero-padded.
pub fn code_at(secret: &[u8], now_unix: i64) -> Option<String> {
    code_of_step(&generator(secret), step_at(now_unix))
}

/// The step the code matches (current ±1, RFC 6238 §5.2's allowance for
/// drift), if any. Every candidate is compared, in constant time, so timing
/// does not reveal which step matched.
pub fn verify(secret: &[u8], code: &str, now_unix: i64) -> Option<i64> {
    let code = code.trim().replace(' ', "");
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let totp = generator(secret);
    let now = step_at(now_unix);
    let mut found = None;
    for step in [now - 1, now, now + 1] {
        if let Some(expected) = code_of_step(&totp, step)
            && openssl::memcmp::eq(expected.as_bytes(), code.as_bytes())
        {
            found = Some(step);
        }
    }
    found
}

/// RFC 4648 base32 without padding, as authenticator apps take secrets.
pub fn base32(bytes: &[u8]) -> String {
    base32::encode(BASE32, bytes)
}

/// RFC 4648 base32 to bytes, as authenticator apps show a key: any case,
/// with spaces, dashes and `=` padding ignored; `None` when it is not base32.
pub fn base32_decode(text: &str) -> Option<Vec<u8>> {
    let clean: String = text
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-' && *c != '=')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    base32::decode(BASE32, &clean)
}

/// The `otpauth://` URI for enrolment (Key Uri Format), shown as a QR code.
pub fn otpauth_uri(issuer: &str, account: &str, secret: &[u8]) -> String {
    let enc = |s: &str| {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    format!(
        "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECS}",
        enc(issuer),
        enc(account),
        base32(secret),
        enc(issuer)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 Appendix B, SHA-1 rows (8 digits there; we check the last 6).
    #[test]
    fn matches_the_rfc_6238_test_vectors() {
        let secret = b"12345678901234567890";
        for (t, expected8) in [
            (59, "94287082"),
            (1_111_111_109, "07081804"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
        ] {
            assert_eq!(code_at(secret, t).unwrap(), expected8[2..]);
        }
    }

    #[test]
    fn accepts_one_step_of_drift_and_no_more() {
        let secret = b"12345678901234567890";
        let now = 1_234_567_890;
        let code = code_at(secret, now).unwrap();
        assert_eq!(verify(secret, &code, now), Some(step_at(now)));
        assert_eq!(verify(secret, &code, now + 30), Some(step_at(now)));
        assert_eq!(verify(secret, &code, now - 30), Some(step_at(now)));
        assert_eq!(verify(secret, &code, now + 61), None);
        assert_eq!(verify(secret, "12345", now), None);
        assert_eq!(verify(secret, "abcdef", now), None);
    }

    #[test]
    fn base32_matches_rfc_4648() {
        assert_eq!(base32(b"foobar"), "MZXW6YTBOI");
        assert_eq!(base32(b"f"), "MY");
        assert_eq!(
            base32_decode("mzxw 6ytb-oi==").as_deref(),
            Some(&b"foobar"[..])
        );
        assert_eq!(base32_decode("MZXW1"), None);
    }

    #[test]
    fn no_code_before_1970_and_no_panic_near_it() {
        let secret = b"12345678901234567890";
        assert_eq!(code_at(secret, -31), None);
        let code = code_at(secret, 0).unwrap();
        assert_eq!(verify(secret, &code, 0), Some(0));
        assert_eq!(verify(secret, &code, 10), Some(0));
    }
}
