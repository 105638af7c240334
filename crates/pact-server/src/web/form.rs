//! `application/x-www-form-urlencoded` bodies of the pages.

/// A parsed form body, keeping repeated names (consent's `scope` checkboxes).
/// Parse only after the Origin check.
#[derive(Debug, Default)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    pub fn parse(body: &[u8]) -> Self {
        Self(
            url::form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first value of a field, if present and not blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.trim().is_empty())
    }

    /// Every value of a repeated field.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Fields;

    #[test]
    fn first_value_wins_blank_is_absent_and_repeats_are_kept() {
        let f = Fields::parse(b"a=1&a=2&b=+&scope=x&scope=y");
        assert_eq!(f.get("a"), Some("1"));
        assert_eq!(f.get("b"), None);
        assert_eq!(f.all("scope").collect::<Vec<_>>(), ["x", "y"]);
    }

    #[test]
    fn repeated_fields_keep_the_first_value_and_blank_ones_are_absent() {
        let f = Fields::parse(b"csrf=a&csrf=b&email=%20&next=%2Fx");
        assert_eq!(f.get("csrf"), Some("a"));
        assert_eq!(f.get("email"), None);
        assert_eq!(f.get("next"), Some("/x"));
    }
}
