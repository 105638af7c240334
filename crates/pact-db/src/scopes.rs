//! A brand's scopes (PACT §5: `{id, description}`, the description shown verbatim).

use crate::ids::BrandId;
use sqlx::PgExecutor;

use crate::DbResult;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct BrandScope {
    pub scope_id: String,
    pub description: String,
    pub requires_mfa: bool,
    /// Whether an agent the `open` policy admitted, not yet verified by
    /// staff, may request it (issue 31's trust tiers; off by default).
    pub unverified_allowed: bool,
}

/// RFC 6749 §3.3 scope-token: 1*( %x21 / %x23-5B / %x5D-7E ); bounded here to 128.
pub fn is_valid_scope_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

pub async fn upsert(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    scope_id: &str,
    description: &str,
    requires_mfa: bool,
) -> DbResult<()> {
    sqlx::query!(
        "insert into brand_scopes (brand_id, scope_id, description, requires_mfa) values ($1, $2, $3, $4) \
         on conflict (brand_id, scope_id) do update set description = excluded.description, \
         requires_mfa = excluded.requires_mfa",
        brand_id,
        scope_id,
        description,
        requires_mfa,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

pub async fn remove(db: impl PgExecutor<'_>, brand_id: &BrandId, scope_id: &str) -> DbResult<bool> {
    let done = sqlx::query!(
        "delete from brand_scopes where brand_id = $1 and scope_id = $2",
        brand_id,
        scope_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn list(db: impl PgExecutor<'_>, brand_id: &BrandId) -> DbResult<Vec<BrandScope>> {
    sqlx::query_as!(
        BrandScope,
        "select scope_id, description, requires_mfa, unverified_allowed from brand_scopes \
         where brand_id = $1 order by scope_id",
        brand_id,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Marks whether unverified agents may request a scope; false when the brand
/// has no such scope. The table trigger announces it to every node.
pub async fn set_unverified_allowed(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    scope_id: &str,
    allowed: bool,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update brand_scopes set unverified_allowed = $3 where brand_id = $1 and scope_id = $2",
        brand_id,
        scope_id,
        allowed,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::is_valid_scope_id;

    #[test]
    fn scope_ids_are_rfc6749_scope_tokens() {
        for ok in ["orders:read", "a", "x!#[]^~"] {
            assert!(is_valid_scope_id(ok), "{ok}");
        }
        for bad in ["", "a b", "quote\"", "back\\slash", "é", &"x".repeat(129)] {
            assert!(!is_valid_scope_id(bad), "{bad}");
        }
    }
}
