//! pact-db's own error type against a real database: each refusal arrives as its variant with
//! the schema's constraint name, `on_constraint` maps exactly that constraint, and the status
//! enums read and write the same text the columns always held.

use pact_db::demo_orders::{DemoOrder, OrderStatus};
use pact_db::device_authorizations::{self, NewDeviceAuthorization, Status};
use pact_db::{Error, Failure, PgPool, ResultExt};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

async fn pool() -> PgPool {
    let url = pact_tests::db::fresh_database().await;
    pact_db::connect(&url, 2).await.unwrap()
}

/// What a caller of `on_constraint` would define: its own error, and the database's.
#[derive(Debug)]
enum Mine {
    BrandExists,
    Db(Error),
}

impl From<Error> for Mine {
    fn from(e: Error) -> Self {
        Self::Db(e)
    }
}

#[tokio::test]
async fn constraint_refusals_carry_their_variant_and_name() {
    let db = pool().await;
    pact_db::brands::insert(&db, &pact_tests::brand_id("acme"), "Acme", "")
        .await
        .unwrap();

    let dup = pact_db::brands::insert(&db, &pact_tests::brand_id("acme"), "Acme again", "")
        .await
        .unwrap_err();
    assert!(matches!(dup, Error::UniqueViolation { .. }), "{dup:?}");
    assert_eq!(dup.constraint(), Some("brands_pkey"));
    assert!(pact_db::is_unique_violation(&dup));
    assert_eq!(dup.code().as_deref(), Some("23505"));

    let orphan = pact_db::scopes::upsert(
        &db,
        &pact_tests::brand_id("nobody"),
        "orders:read",
        "Read",
        false,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(orphan, Error::ForeignKeyViolation { .. }),
        "{orphan:?}"
    );
    assert_eq!(orphan.constraint(), Some("brand_scopes_brand_id_fkey"));
    assert!(!pact_db::is_unique_violation(&orphan));

    // The brand id's CHECK (migrations/0001) refuses upper case. The typed
    // insert cannot even be called with such an id (`BrandId::parse`), so the
    // row is written by hand: the table holds the rule on its own too.
    assert!(pact_db::ids::BrandId::parse("ACME").is_err());
    let bad = Error::from(
        sqlx::query("insert into brands (id, name, description) values ('ACME', 'Acme', '')")
            .execute(&db)
            .await
            .unwrap_err(),
    );
    assert!(matches!(bad, Error::CheckViolation { .. }), "{bad:?}");
    assert_eq!(bad.constraint(), Some("brands_id_check"));

    // Sorting for the HTTP answer is unchanged: a NUL byte is the client's fault.
    let nul = pact_db::brands::insert(&db, &pact_tests::brand_id("nul"), "A\0B", "")
        .await
        .unwrap_err();
    assert!(matches!(nul, Error::Other(_)), "{nul:?}");
    assert_eq!(pact_db::classify(&nul), Failure::BadInput);
}

#[tokio::test]
async fn on_constraint_maps_only_the_named_constraint() {
    let db = pool().await;
    pact_db::brands::insert(&db, &pact_tests::brand_id("acme"), "Acme", "")
        .await
        .unwrap();

    let named: Result<_, Mine> =
        pact_db::brands::insert(&db, &pact_tests::brand_id("acme"), "Acme", "")
            .await
            .on_constraint("brands_pkey", |_| Mine::BrandExists);
    assert!(matches!(named, Err(Mine::BrandExists)), "{named:?}");

    // Another constraint's name leaves the error a database error.
    let other: Result<_, Mine> =
        pact_db::brands::insert(&db, &pact_tests::brand_id("acme"), "Acme", "")
            .await
            .on_constraint("brands_id_check", |_| Mine::BrandExists);
    assert!(
        matches!(other, Err(Mine::Db(Error::UniqueViolation { .. }))),
        "{other:?}"
    );

    let fine: Result<_, Mine> =
        pact_db::brands::insert(&db, &pact_tests::brand_id("fresh"), "Fresh", "")
            .await
            .on_constraint("brands_pkey", |_| Mine::BrandExists);
    assert_eq!(fine.unwrap().id, "fresh");
}

#[tokio::test]
async fn status_enums_keep_the_stored_text() {
    let db = pool().await;
    pact_db::brands::insert(&db, &pact_tests::brand_id("demo"), "Demo", "")
        .await
        .unwrap();
    sqlx::query("insert into agents (issuer, jwks_uri, name) values ($1, $2, $3)")
        .bind("https://pa.example")
        .bind("https://pa.example/jwks")
        .bind("PA")
        .execute(&db)
        .await
        .unwrap();
    let now = OffsetDateTime::now_utc();
    let id = Uuid::new_v4();
    let scopes = vec!["orders:read".to_owned()];
    device_authorizations::insert(
        &db,
        NewDeviceAuthorization {
            id,
            brand_id: &pact_tests::brand_id("demo"),
            pa_issuer: &"https://pa.example".into(),
            pa_sub: "pa-user",
            device_code_hash: &[7; 32],
            user_code: "BCDFGHJK",
            scopes: &scopes,
            authorization_details: None,
            interval_secs: 5,
            expires_at: now + Duration::minutes(10),
            request_ip: None,
            step_up: true,
            operations: None,
            for_user_sub: None,
        },
    )
    .await
    .unwrap();
    let stored = device_authorizations::find(&db, id).await.unwrap().unwrap();
    assert_eq!(stored.status, Status::Pending);
    let live = device_authorizations::live_step_up(
        &db,
        pact_db::parties::PaUser {
            brand_id: &pact_tests::brand_id("demo"),
            pa_issuer: &"https://pa.example".into(),
            pa_sub: "pa-user",
        },
        &scopes,
        None,
        now,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(live.status, Status::Pending);

    assert!(
        device_authorizations::set_denied(&db, id, None)
            .await
            .unwrap()
    );
    let text: String = sqlx::query_scalar("select status from device_authorizations where id = $1")
        .bind(id)
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(text, "denied");
    let stored = device_authorizations::find(&db, id).await.unwrap().unwrap();
    assert_eq!(stored.status, Status::Denied);
    assert_eq!(stored.status.as_str(), "denied");

    let order = DemoOrder {
        order_id: "DEMO-1".to_owned(),
        placed_on: now.date(),
        items: "Socks".to_owned(),
        total_cents: 500,
        status: OrderStatus::Shipped,
    };
    pact_db::demo_orders::insert(&db, &pact_tests::brand_id("demo"), &"alice".into(), &order)
        .await
        .unwrap();
    let text: String =
        sqlx::query_scalar("select status from demo_orders where order_id = 'DEMO-1'")
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(text, "shipped");
    let read = pact_db::demo_orders::find(
        &db,
        &pact_tests::brand_id("demo"),
        &"alice".into(),
        "DEMO-1",
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(read, order);
    // Serialised into tool results in the same words.
    assert_eq!(
        serde_json::to_value(read.status).unwrap(),
        serde_json::json!("shipped")
    );
}

/// Seeding a brand that is already there tells no node to drop its cached
/// brands: the change trigger fires per statement, so the insert is not
/// even sent. A brand that is new is announced as every change is.
#[tokio::test]
async fn seeding_an_existing_brand_announces_nothing() {
    let db = pool().await;
    let mut listener = sqlx::postgres::PgListener::connect_with(&db).await.unwrap();
    listener.listen("pactd_config").await.unwrap();
    let demo = pact_tests::brand_id("demo");
    assert!(
        pact_db::brands::insert_if_missing(&db, &demo, "Demo", "")
            .await
            .unwrap()
    );
    let first = listener.recv().await.unwrap();
    assert_eq!(first.payload(), "brands");
    assert!(
        !pact_db::brands::insert_if_missing(&db, &demo, "Demo", "")
            .await
            .unwrap()
    );
    // A marker sent after the second seeding: if that seeding had announced
    // anything, it would arrive first (notifications keep commit order).
    sqlx::query("select pg_notify('pactd_config', 'marker')")
        .execute(&db)
        .await
        .unwrap();
    let next = listener.recv().await.unwrap();
    assert_eq!(next.payload(), "marker");
}
