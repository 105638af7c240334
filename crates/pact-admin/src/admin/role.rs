//! Staff roles and brand limits: who may do what to which brand's objects.
//! Plain functions, tested without a server.

/// The roles as stored (pact-db reads and writes the column's text).
pub use pact_db::admins::Role;

/// Who is acting, with what role, limited to which brands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    /// `admin` (a console account) or `credential` (an API credential).
    pub kind: &'static str,
    /// The admin's email or the credential's name, as the audit log shows it.
    pub name: String,
    pub role: Role,
    /// `None`: every brand.
    pub brands: Option<Vec<String>>,
}

impl Actor {
    pub fn may(&self, needed: Role) -> bool {
        self.role >= needed
    }

    /// Whether objects of `brand_id` exist for this actor. Objects outside
    /// its brands are answered exactly as missing ones (no existence leak).
    pub fn sees_brand(&self, brand_id: &str) -> bool {
        self.brands
            .as_ref()
            .is_none_or(|list| list.iter().any(|b| b == brand_id))
    }

    /// The brand limit as a query filter.
    pub fn within(&self) -> Option<&[String]> {
        self.brands.as_deref()
    }

    /// Platform-wide actions (registering or disabling an agent platform,
    /// which serves every brand) need an actor limited to no brand.
    pub fn is_unlimited(&self) -> bool {
        self.brands.is_none()
    }
}

/// Checks a brand list given on the command line: ids well formed, no
/// duplicates; an empty list means "every brand".
pub fn brand_limit(brands: &[String]) -> Result<Option<Vec<String>>, String> {
    if brands.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<String> = Vec::new();
    for b in brands {
        if !pact_db::brands::is_valid_brand_id(b) {
            return Err(format!("invalid brand id {b:?}"));
        }
        if !out.contains(b) {
            out.push(b.clone());
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actor(role: Role, brands: Option<&[&str]>) -> Actor {
        Actor {
            kind: "credential",
            name: "ci".into(),
            role,
            brands: brands.map(|b| b.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn roles_are_ordered_and_parse_back() {
        assert!(actor(Role::Owner, None).may(Role::Operator));
        assert!(actor(Role::Operator, None).may(Role::Viewer));
        assert!(!actor(Role::Viewer, None).may(Role::Operator));
        assert!(!actor(Role::Operator, None).may(Role::Owner));
        for r in [Role::Viewer, Role::Operator, Role::Owner] {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("admin"), None);
    }

    #[test]
    fn brand_limits_hide_other_brands() {
        let limited = actor(Role::Owner, Some(&["shop"]));
        assert!(limited.sees_brand("shop"));
        assert!(!limited.sees_brand("demo"));
        assert!(!limited.is_unlimited());
        let all = actor(Role::Viewer, None);
        assert!(all.sees_brand("anything"));
        assert!(all.is_unlimited());
    }

    #[test]
    fn brand_lists_are_checked() {
        assert_eq!(brand_limit(&[]), Ok(None));
        assert_eq!(
            brand_limit(&["a".into(), "a".into(), "b".into()]),
            Ok(Some(vec!["a".into(), "b".into()]))
        );
        assert!(brand_limit(&["Not Valid".into()]).is_err());
    }
}
