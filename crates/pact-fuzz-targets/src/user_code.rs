//! RFC 8628 user-code entry, `pact_server::domain::user_code::normalise`, on
//! arbitrary (lossy UTF-8) input.
//!
//! Invariants: when it returns `Some(code)`, the code is exactly 8 letters of
//! `ALPHABET`, normalises to itself, and its `display` form (`XXXX-XXXX`)
//! normalises back to it; lower-casing the input never changes the result.

use pact_server::domain::user_code::{ALPHABET, LEN, display, normalise};

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    let input = String::from_utf8_lossy(data);
    let result = normalise(&input);
    if let Some(code) = &result {
        assert_eq!(code.len(), LEN, "wrong length");
        assert!(
            code.bytes().all(|b| ALPHABET.contains(&b)),
            "letter outside the alphabet"
        );
        assert_eq!(normalise(code).as_ref(), Some(code), "not a fixed point");
        let shown = display(code);
        assert_eq!(shown.len(), LEN + 1);
        assert_eq!(shown.as_bytes()[4], b'-');
        assert_eq!(
            normalise(&shown).as_ref(),
            Some(code),
            "display does not normalise back"
        );
    }
    // Case never matters (ASCII letters only: other scripts' case maps may change lengths).
    if input.len() <= 64 {
        assert_eq!(
            normalise(&input.to_ascii_lowercase()),
            result,
            "case changed the result"
        );
    }
}
