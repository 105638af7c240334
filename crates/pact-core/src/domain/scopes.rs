//! Scope arithmetic (RFC 6749 §3.3: space-delimited, order-free).

use std::collections::BTreeSet;

/// Parses a `scope` parameter into a set; `Err` names the first unknown scope.
/// Empty input is an error: a device authorization must ask for something.
pub fn parse_requested<'a>(
    raw: &'a str,
    offered: &BTreeSet<String>,
) -> Result<BTreeSet<String>, ScopeError<'a>> {
    let mut out = BTreeSet::new();
    for s in raw.split(' ').filter(|s| !s.is_empty()) {
        if !offered.contains(s) {
            return Err(ScopeError::Unknown(s));
        }
        out.insert(s.to_owned());
    }
    if out.is_empty() {
        return Err(ScopeError::Empty);
    }
    Ok(out)
}

#[derive(Debug, PartialEq, Eq)]
pub enum ScopeError<'a> {
    Empty,
    Unknown(&'a str),
}

/// The space-separated wire form, in a stable order.
pub fn join(scopes: &BTreeSet<String>) -> String {
    scopes
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// PACT §5.2: only requested scopes can be granted; the user may grant fewer.
pub fn approvable(requested: &BTreeSet<String>, approved: &BTreeSet<String>) -> bool {
    !approved.is_empty() && approved.is_subset(requested)
}

/// Longest scope description accepted, in characters (as JSON Schema's
/// `maxLength` and the column's check count): it is shown on consent.
pub const MAX_DESCRIPTION: usize = 500;

/// Checks a scope a brand offers, as `pactd brand scope add`, the console and
/// the admin API define it: the id is an RFC 6749 §3.3 scope-token, and the
/// description, shown to people verbatim on consent (PACT §5.2), is not blank,
/// not over-long and holds no hidden or direction-changing characters that
/// could make it read differently from what is stored.
pub fn check_definition(scope_id: &str, description: &str) -> Result<(), String> {
    if !pact_db::scopes::is_valid_scope_id(scope_id) {
        return Err(format!(
            "invalid scope id {scope_id:?}: printable ASCII without spaces, quotes or backslashes (RFC 6749 §3.3)"
        ));
    }
    if description.trim().is_empty() || description.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "the description must be 1–{MAX_DESCRIPTION} characters: it is shown to people verbatim"
        ));
    }
    if let Some(c) = crate::domain::hidden_chars::first_hidden(description) {
        return Err(crate::domain::hidden_chars::refusal("the description", c));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn requested_scopes_must_all_be_offered() {
        let offered = set(&["a", "b"]);
        assert_eq!(parse_requested("b  a a", &offered), Ok(set(&["a", "b"])));
        assert_eq!(
            parse_requested("a c", &offered),
            Err(ScopeError::Unknown("c"))
        );
        assert_eq!(parse_requested("  ", &offered), Err(ScopeError::Empty));
    }

    #[test]
    fn approval_is_a_non_empty_subset_of_the_request() {
        let req = set(&["a", "b"]);
        assert!(approvable(&req, &set(&["a"])));
        assert!(approvable(&req, &set(&["a", "b"])));
        assert!(!approvable(&req, &set(&["a", "c"])));
        assert!(!approvable(&req, &set(&[])));
        assert_eq!(join(&set(&["b", "a"])), "a b");
    }

    #[test]
    fn scope_definitions_are_checked_for_what_consent_shows() {
        assert!(check_definition("orders:read", "See your orders").is_ok());
        assert!(check_definition("a b", "x").is_err());
        assert!(check_definition("x", "   ").is_err());
        assert!(check_definition("x", &"y".repeat(501)).is_err());
        assert!(check_definition("x", &"y".repeat(500)).is_ok());
        assert!(check_definition("x", "Pay \u{202e}0001\u{202c} EUR").is_err());
        assert!(check_definition("x", "zero\u{200b}width").is_err());
    }
}
