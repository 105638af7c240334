//! `application/x-www-form-urlencoded` bodies of the pages.
//!
//! A handler reads its form as a struct of its own (`Fields::decode`) after
//! the Origin and CSRF checks, so the names a page posts are written once,
//! in the struct, instead of once per `get` call.

use serde::de::DeserializeOwned;

use super::PageError;

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

    /// The form as `T`: each field's first value by name when it is not
    /// blank (what [`Fields::get`] returns), so a struct of `Option<String>`
    /// fields reads as the `get` calls did. Fields `T` does not name are
    /// ignored; repeated ones (consent's checkboxes) are read with
    /// [`Fields::all`]. A form that does not fit `T` is refused as bad input.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, PageError> {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.0 {
            if map.contains_key(k) {
                continue;
            }
            let value = if v.trim().is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::Value::String(v.clone())
            };
            map.insert(k.clone(), value);
        }
        serde_json::from_value(serde_json::Value::Object(map))
            .map_err(|_| PageError::BadRequest(super::i18n::t("err-unacceptable")))
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

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct SignIn {
        email: Option<String>,
        next: Option<String>,
        csrf: Option<String>,
    }

    #[test]
    fn decode_reads_as_get_does() {
        let f = Fields::parse(b"csrf=a&csrf=b&email=%20&next=%2Fx&extra=1");
        let form: SignIn = f.decode().unwrap();
        assert_eq!(
            form,
            SignIn {
                email: None,
                next: Some("/x".to_owned()),
                csrf: Some("a".to_owned()),
            }
        );
        // A first blank value hides a later one, as with `get`.
        let f = Fields::parse(b"email=&email=b%40x");
        assert_eq!(f.get("email"), None);
        assert_eq!(f.decode::<SignIn>().unwrap().email, None);
    }

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
