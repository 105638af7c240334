//! Characters that change how text looks without being seen: bidirectional
//! controls (Unicode UAX #9, the "Trojan Source" trick, CVE-2021-42574),
//! zero-width and other invisible format characters, and C0/C1 controls.
//! A consent page shows values the person approves and pactd then enforces
//! (PACT §5.2, §5.7); such a character would make the two differ, e.g.
//! U+202E reverses how the rest of a value reads. They are refused where
//! values come in and, for text stored before that rule, shown visibly.

/// The characters refused in shown values, besides the controls, as
/// inclusive ranges: one table for the check and for the admin API's
/// schemas ([`shown_text_class`]).
pub const HIDDEN: &[(char, char)] = &[
    // Bidi embeddings, overrides, isolates and marks (UAX #9).
    ('\u{202A}', '\u{202E}'),
    ('\u{2066}', '\u{2069}'),
    ('\u{200E}', '\u{200F}'),
    ('\u{061C}', '\u{061C}'),
    // Zero-width space/joiners, word joiner and invisible operators, BOM.
    ('\u{200B}', '\u{200D}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{FEFF}', '\u{FEFF}'),
    // Soft hyphen, Mongolian vowel separator, Hangul fillers, interlinear annotations.
    ('\u{00AD}', '\u{00AD}'),
    ('\u{180E}', '\u{180E}'),
    ('\u{115F}', '\u{1160}'),
    ('\u{3164}', '\u{3164}'),
    ('\u{FFA0}', '\u{FFA0}'),
    ('\u{FFF9}', '\u{FFFB}'),
    // Tag characters (invisible, used to smuggle text).
    ('\u{E0000}', '\u{E007F}'),
];

/// The characters refused in shown values.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || HIDDEN.iter().any(|&(from, to)| (from..=to).contains(&c))
}

/// A regular-expression character class (ECMA-262, as JSON Schema's
/// `pattern`) of what shown text may hold: no control character (C0, DEL,
/// C1) and none of [`HIDDEN`] within the Basic Multilingual Plane. The tag
/// characters lie beyond it, where a class would have to name them as
/// surrogate pairs or with the `u` flag, read differently by different
/// validators; they are left to the server, which refuses them all the same.
pub fn shown_text_class() -> String {
    let mut class = String::from("[^\\u0000-\\u001f\\u007f-\\u009f");
    for &(from, to) in HIDDEN {
        if u32::from(to) <= 0xFFFF {
            class.push_str(&format!(
                "\\u{:04x}-\\u{:04x}",
                u32::from(from),
                u32::from(to)
            ));
        }
    }
    class.push(']');
    class
}

/// The first hidden character of `s`, if any.
pub fn first_hidden(s: &str) -> Option<char> {
    s.chars().find(|c| is_hidden(*c))
}

/// `s` with each hidden character replaced by a visible `[U+XXXX]`.
pub fn visible(s: &str) -> String {
    if first_hidden(s).is_none() {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_hidden(c) {
            out.push_str(&format!("[U+{:04X}]", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// The refusal message for a value holding `c`.
pub fn refusal(what: &str, c: char) -> String {
    format!(
        "{what} holds the invisible or direction-changing character U+{:04X}; such characters are not allowed",
        u32::from(c)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_and_invisible_characters_are_found_and_shown() {
        for c in [
            '\u{202E}',
            '\u{202A}',
            '\u{2066}',
            '\u{2069}',
            '\u{200B}',
            '\u{200F}',
            '\u{FEFF}',
            '\u{0}',
            '\u{1B}',
            '\u{E0041}',
        ] {
            assert!(is_hidden(c), "{:04X}", u32::from(c));
        }
        for c in ['a', 'é', '日', ' ', '-', '\u{05D0}'] {
            assert!(!is_hidden(c), "{c}");
        }
        assert_eq!(first_hidden("ORD-1\u{202E}9"), Some('\u{202E}'));
        assert_eq!(visible("ORD-1\u{202E}9"), "ORD-1[U+202E]9");
        assert_eq!(visible("plain"), "plain");
        assert!(refusal("x", '\u{202E}').contains("U+202E"));
    }
}
