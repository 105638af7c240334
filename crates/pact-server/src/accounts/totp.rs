//! RFC 6238 TOTP (HMAC-SHA1, 30 s steps, 6 digits — what authenticator apps
//! expect), accepting the current step and one on either side (§5.2's
//! allowance for clock drift). Replay is stopped by the caller recording the
//! accepted step (`pact_db::users::advance_totp_step`).

use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;

pub const STEP_SECS: i64 = 30;
pub const DIGITS: u32 = 6;
pub const SECRET_BYTES: usize = 20;

/// A new random secret (160 bits, RFC 4226 §4's recommendation).
pub fn new_secret() -> Result<Vec<u8>, openssl::error::ErrorStack> {
    let mut s = vec![0u8; SECRET_BYTES];
    openssl::rand::rand_bytes(&mut s)?;
    Ok(s)
}

/// RFC 4226 §5.3 HOTP value for a counter.
pub fn hotp(secret: &[u8], counter: u64) -> Option<u32> {
    let key = PKey::hmac(secret).ok()?;
    let mut signer = Signer::new(MessageDigest::sha1(), &key).ok()?;
    signer.update(&counter.to_be_bytes()).ok()?;
    let mac = signer.sign_to_vec().ok()?;
    let offset = usize::from(mac.last()? & 0x0f);
    let bin = u32::from_be_bytes([
        mac.get(offset)? & 0x7f,
        *mac.get(offset + 1)?,
        *mac.get(offset + 2)?,
        *mac.get(offset + 3)?,
    ]);
    Some(bin % 10u32.pow(DIGITS))
}

pub fn step_at(now_unix: i64) -> i64 {
    now_unix.div_euclid(STEP_SECS)
}

/// The code for a time, zero-padded.
pub fn code_at(secret: &[u8], now_unix: i64) -> Option<String> {
    let step = u64::try_from(step_at(now_unix)).ok()?;
    hotp(secret, step).map(|v| format!("{v:06}"))
}

/// The step the code matches (current ±1), if any. Compares every candidate
/// so timing does not reveal which step matched.
pub fn verify(secret: &[u8], code: &str, now_unix: i64) -> Option<i64> {
    let code = code.trim().replace(' ', "");
    if code.len() != DIGITS as usize || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let given: u32 = code.parse().ok()?;
    let now = step_at(now_unix);
    let mut found = None;
    for step in [now - 1, now, now + 1] {
        let Ok(counter) = u64::try_from(step) else {
            continue;
        };
        if hotp(secret, counter) == Some(given) {
            found = Some(step);
        }
    }
    found
}

/// RFC 4648 base32 without padding, as authenticator apps take secrets.
pub fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((buffer >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((buffer << (5 - bits)) & 31) as usize]));
    }
    out
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
    }
}
