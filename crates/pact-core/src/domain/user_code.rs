//! RFC 8628 user codes (PACT §5.1, pactd choice): 8 letters from a 20-letter
//! alphabet without vowels (so no words form) shown as `XXXX-XXXX`, about
//! 34.5 bits; entry is normalised for case, dashes and spaces.

use rand::Rng;

pub use pact_proto::oauth::{USER_CODE_ALPHABET as ALPHABET, USER_CODE_LENGTH as LEN};

/// A fresh code, uniformly drawn (the range is exact, so no modulo bias).
pub fn generate() -> String {
    let mut rng = rand::rng();
    (0..LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// `BCDFGHJK` → `BCDF-GHJK`. Anything else, including 8 bytes that are not
/// 8 ASCII characters (slicing those at byte 4 could split a character and
/// panic), is returned unchanged.
pub fn display(code: &str) -> String {
    match (code.len() == LEN).then(|| (code.get(..4), code.get(4..))) {
        Some((Some(head), Some(tail))) => format!("{head}-{tail}"),
        _ => code.to_owned(),
    }
}

/// Normalises what a person typed: upper-cases and drops dashes and white
/// space; `None` unless exactly 8 letters of the alphabet remain.
pub fn normalise(input: &str) -> Option<String> {
    if input.len() > 64 {
        return None;
    }
    let code: String = input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (code.len() == LEN && code.bytes().all(|b| ALPHABET.contains(&b))).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_codes_use_only_the_alphabet_and_normalise_to_themselves() {
        for _ in 0..200 {
            let c = generate();
            assert_eq!(c.len(), 8);
            assert_eq!(normalise(&c).as_deref(), Some(c.as_str()));
            assert_eq!(normalise(&display(&c)).as_deref(), Some(c.as_str()));
        }
    }

    #[test]
    fn entry_is_normalised_for_case_dashes_and_spaces() {
        assert_eq!(normalise("bcdf-ghjk").as_deref(), Some("BCDFGHJK"));
        assert_eq!(normalise(" BCDF GHJK ").as_deref(), Some("BCDFGHJK"));
        assert_eq!(normalise("b-c-d-f-g-h-j-k").as_deref(), Some("BCDFGHJK"));
    }

    #[test]
    fn codes_with_vowels_digits_or_the_wrong_length_are_refused() {
        for bad in [
            "ABCD-EFGH",
            "BCDF-GHJ",
            "BCDF-GHJKL",
            "BCDF-GHJ1",
            "",
            "BCDF_GHJK",
        ] {
            assert_eq!(normalise(bad), None, "{bad}");
        }
    }

    #[test]
    fn display_never_splits_a_character() {
        // 8 bytes, byte 4 inside the second 'é': returned as it is.
        assert_eq!(display("aéééb"), "aéééb");
        assert_eq!(display("BCDFGHJK"), "BCDF-GHJK");
    }
}
