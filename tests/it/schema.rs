//! The migrated schema itself, read from PostgreSQL's catalog.
//!
//! Deleting a parent row makes PostgreSQL look up its children through each
//! foreign key; without an index that leads with the referencing columns the
//! lookup is a sequential scan of the child table, once per deleted row
//! (migration 0050: a cut delegated first turn scanned every receipt). So
//! every foreign key has such an index, or is listed below with why not.

use std::collections::BTreeSet;

/// Foreign keys left without an index, as `child.column -> parent`, each
/// with the reason a scan of the child is acceptable when its parent goes.
const UNINDEXED: &[(&str, &str)] = &[
    (
        "messages.grant_id -> grants",
        "a grant is deleted only with its agent and only when it has no receipts; \
         an index would cost every delegated turn an entry",
    ),
    (
        "sessions.brand_id -> brands",
        "a brand is deleted by staff, once",
    ),
    (
        "brand_oidc_logins.brand_id -> brands",
        "a brand is deleted by staff, once",
    ),
    (
        "agents.logo_sha256 -> logos",
        "the agents table is bounded by the open door's keep limit",
    ),
];

/// Every foreign key of the public schema whose columns are not the leading
/// columns (in any order) of a valid index of the child table.
const UNINDEXED_QUERY: &str = "\
    select c.conrelid::regclass::text || '.' || \
           (select string_agg(a.attname, ',' order by a.attnum) from pg_attribute a \
            where a.attrelid = c.conrelid and a.attnum = any (c.conkey)) \
           || ' -> ' || c.confrelid::regclass::text \
    from pg_constraint c \
    where c.contype = 'f' and c.connamespace = 'public'::regnamespace \
      and not exists ( \
        select 1 from pg_index i \
        where i.indrelid = c.conrelid and i.indisvalid \
          and (select array_agg(k order by k) \
               from unnest((i.indkey::int2[])[0:cardinality(c.conkey) - 1]) k) \
              = (select array_agg(k order by k) from unnest(c.conkey) k))";

#[tokio::test]
async fn every_foreign_key_is_indexed_or_says_why_not() {
    let url = pact_tests::db::fresh_database().await;
    let db = pact_db::connect(&url, 1).await.unwrap();
    let found: BTreeSet<String> = sqlx::query_scalar::<_, String>(UNINDEXED_QUERY)
        .fetch_all(&db)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let listed: BTreeSet<String> = UNINDEXED.iter().map(|(k, _)| (*k).to_owned()).collect();
    let missing: Vec<&String> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "foreign keys without an index that leads with their columns (a parent's \
         delete scans the whole child table): {missing:?}; add an index in a migration, \
         or list the key in UNINDEXED with why a scan is acceptable"
    );
    // The list stays true: a key indexed since is taken off it.
    let stale: Vec<&String> = listed.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "listed as unindexed but indexed: {stale:?}"
    );
}
