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
}
