//! Open admission of personal agents nobody registered (PACT §3.1, issue 31):
//! the policy, OpenID discovery of the keys, and the bounds on what an
//! unknown issuer can cost.

use pact_server::admission::Policy;
use pact_tests::TestApp;
use pact_tests::pa::{PaKey, TestPa};
use serde_json::json;

use crate::assert_bare_401;

async fn agents(app: &TestApp) -> i64 {
    sqlx::query_scalar::<_, i64>("select count(*) from agents")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The demo brand offers delegation, and orders:read to unverified agents.
async fn offer_orders_read_to_unverified(app: &TestApp) {
    app.enable_demo_delegation().await;
    pact_db::scopes::set_unverified_allowed(
        &app.db,
        &pact_tests::brand_id("demo"),
        "orders:read",
        true,
    )
    .await
    .unwrap();
    app.settle().await;
}

async fn open_app() -> TestApp {
    TestApp::spawn_with(|c| c.admission.policy = Policy::Open).await
}

#[tokio::test]
async fn an_unregistered_agent_is_admitted_under_open_as_unverified() {
    let app = open_app().await;
    let pa = TestPa::start_discoverable().await;
    let res = app
        .send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
        .await;
    assert_eq!(res.status(), 200);
    let agent = pact_db::agents::find(&app.db, &pa.issuer)
        .await
        .unwrap()
        .expect("stored once verified");
    assert!(!agent.verified, "admitted by open: unverified");
    assert_eq!(agent.jwks_uri, pa.jwks_uri);
    // People are shown the host; what it claims to be is for staff only.
    assert_eq!(agent.name, "127.0.0.1");
    let seen = pact_db::agents::sightings(&app.db, 10, None, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(seen[0].claimed_name.as_deref(), Some("Test Agent"));
    assert_eq!(
        seen[0].claimed_logo_uri.as_deref(),
        Some("https://logos.example/test-agent.png")
    );
    assert_eq!((pa.discovery_hits(), pa.jwks_hits()), (1, 1));
    // The keys found by discovery serve the next requests: no fetch again.
    for i in 0..5 {
        let res = app
            .send(
                "demo",
                &pa.token("u1", app.audience()),
                &format!("n{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    assert_eq!((pa.discovery_hits(), pa.jwks_hits()), (1, 1));
}

#[tokio::test]
async fn the_same_agent_is_refused_under_the_default_allowlist() {
    let app = TestApp::spawn().await;
    let pa = TestPa::start_discoverable().await;
    assert_bare_401(
        app.send("demo", &pa.token("u1", app.audience()), "m1", "hi", None)
            .await,
    )
    .await;
    assert_eq!(pa.discovery_hits(), 0, "allowlist: nothing is fetched");
    assert_eq!(agents(&app).await, 0);
}

#[tokio::test]
async fn a_brand_overrides_the_providers_policy_both_ways() {
    let app = TestApp::spawn().await;
    app.add_brand("open-shop", "Open Shop").await;
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("open-shop"),
        "admission",
        &json!("open"),
    )
    .await
    .unwrap();
    app.settle().await;
    let pa = TestPa::start_discoverable().await;
    let token = pa.token("u1", app.audience());
    assert_eq!(
        app.send("open-shop", &token, "m1", "hi", None)
            .await
            .status(),
        200
    );
    // Let in by one brand's open door, it is still unverified: a brand that
    // allowlists refuses it.
    assert_bare_401(app.send("demo", &token, "m2", "hi", None).await).await;

    // And a Provider that is open by default, with a brand that allowlists.
    let open = open_app().await;
    pact_db::brands::set_setting(
        &open.db,
        &pact_tests::brand_id("demo"),
        "admission",
        &json!("allowlist"),
    )
    .await
    .unwrap();
    open.settle().await;
    let other = TestPa::start_discoverable().await;
    assert_bare_401(
        open.send(
            "demo",
            &other.token("u1", open.audience()),
            "m1",
            "hi",
            None,
        )
        .await,
    )
    .await;
    assert_eq!(other.discovery_hits(), 0);
}

/// A brand under `open` with delegation on, whose `orders:read` unverified
/// agents may ask for (and `orders:cancel` not).
async fn open_app_allowing_orders_read() -> TestApp {
    let app = TestApp::spawn_with(|c| {
        c.admission.policy = Policy::Open;
        c.delegation.poll_interval_secs = 1;
    })
    .await;
    offer_orders_read_to_unverified(&app).await;
    app
}

/// A step-up's grant carries the agent's earlier scopes on, under today's
/// rules: one the brand has since withdrawn from unverified agents is not
/// renewed with the rest.
#[tokio::test]
async fn a_step_up_does_not_renew_a_scope_withdrawn_from_unverified_agents() {
    let app = open_app_allowing_orders_read().await;
    let demo = pact_tests::brand_id("demo");
    pact_db::scopes::set_unverified_allowed(&app.db, &demo, "orders:cancel", true)
        .await
        .unwrap();
    app.settle().await;
    let pa = TestPa::start_discoverable().await;
    let user =
        pact_tests::pages::add_user(&app, "demo", "cy@example.com", "cy's password 12").await;
    let first = app
        .connect(
            &pa,
            "pa-sub",
            &user.subject(),
            &["orders:read", "orders:cancel"],
        )
        .await;
    assert_eq!(first["scope"], "orders:cancel orders:read");
    pact_db::scopes::set_unverified_allowed(&app.db, &demo, "orders:cancel", false)
        .await
        .unwrap();
    app.settle().await;
    let again = app
        .connect(&pa, "pa-sub", &user.subject(), &["orders:read"])
        .await;
    assert_eq!(again["scope"], "orders:read");
}

async fn grants_and_receipts(app: &TestApp) -> (i64, i64) {
    sqlx::query_as("select (select count(*) from grants), (select count(*) from receipts)")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_non_https_issuer_is_refused_without_a_fetch() {
    let app = open_app().await;
    let pa = TestPa::start_discoverable().await;
    // Served on loopback, but named http on a public name: PACT §3 wants https.
    for iss in [
        "http://agent.example",
        "https://10.0.0.1",
        "ftp://127.0.0.1",
    ] {
        let token = pa.token_with("u1", app.audience(), |_, c| c["iss"] = json!(iss));
        assert_bare_401(app.send("demo", &token, "m1", "hi", None).await).await;
    }
    assert_eq!(app.state.door.fetch_count(), 0);
    assert_eq!(agents(&app).await, 0);
}

/// Open admission takes issuers named by DNS: an address (which a host
/// block cannot name) is refused before any fetch, even a public one on
/// https. (Public, so that the jwksUri rules alone would let them through:
/// should this rule break, the test's one discovery attempt leaves the
/// machine and is counted, within the fetch timeout; while it holds, nothing
/// is sent anywhere.)
#[tokio::test]
async fn an_address_issuer_is_refused_without_a_fetch() {
    let app = open_app().await;
    let pa = TestPa::start_discoverable().await;
    for iss in ["https://1.1.1.1", "https://[2606:4700:4700::1111]/pa"] {
        let token = pa.token_with("u1", app.audience(), |_, c| c["iss"] = json!(iss));
        assert_bare_401(app.send("demo", &token, "m1", "hi", None).await).await;
    }
    assert_eq!(app.state.door.fetch_count(), 0);
    assert_eq!(agents(&app).await, 0);
}

#[tokio::test]
async fn a_token_that_does_not_verify_stores_nothing() {
    let app = open_app().await;
    let pa = TestPa::start_discoverable().await;
    let forger = PaKey::new_ec("k1");
    let forged = pact_tests::pa::compact(&pa.header(), &pa.claims("u1", app.audience()), &forger);
    assert_bare_401(app.send("demo", &forged, "m1", "hi", None).await).await;
    let wrong_aud = pa.token("u1", "https://someone-else.example/a2a");
    assert_bare_401(app.send("demo", &wrong_aud, "m2", "hi", None).await).await;
    assert_eq!(
        agents(&app).await,
        0,
        "nothing written before a token verified"
    );
    // The real agent is not punished for the forger: its keys are remembered.
    assert_eq!(
        app.send("demo", &pa.token("u1", app.audience()), "m3", "hi", None)
            .await
            .status(),
        200
    );
    assert_eq!(pa.discovery_hits(), 1);
}

/// A spray of unknown issuers (loopback, bounded) costs at most the budget's
/// burst in discoveries, two requests each, and no rows.
#[tokio::test]
async fn a_spray_of_unknown_issuers_is_bounded_by_the_budget() {
    let app = TestApp::spawn_with(|c| {
        c.admission.policy = Policy::Open;
        c.admission.discovery_rate = 0.001;
        c.admission.discovery_burst = 5.0;
    })
    .await;
    let pa = TestPa::start_discoverable().await;
    for i in 0..300u32 {
        // Distinct hosts (ports), so the per-host bucket does not hide the
        // node-wide one; most ports have nobody listening.
        let iss = format!("http://127.0.0.1:{}", 20_000 + i);
        let token = pa.token_with("u1", app.audience(), |_, c| c["iss"] = json!(iss));
        assert_bare_401(app.send("demo", &token, &format!("m{i}"), "hi", None).await).await;
    }
    assert!(
        app.state.door.fetch_count() <= 2 * 5,
        "fetched {}",
        app.state.door.fetch_count()
    );
    assert_eq!(agents(&app).await, 0);
    // The same failed issuer again: backing off, not fetched.
    let before = app.state.door.fetch_count();
    let token = pa.token_with("u1", app.audience(), |_, c| {
        c["iss"] = json!("http://127.0.0.1:20000")
    });
    assert_bare_401(app.send("demo", &token, "again", "hi", None).await).await;
    assert_eq!(app.state.door.fetch_count(), before);
}

fn staff() -> pact_server::admin::role::Actor {
    pact_server::admin::role::Actor {
        kind: "cli",
        name: "admission-test".to_owned(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    }
}

async fn device_authorization_status(
    app: &TestApp,
    pa: &TestPa,
    scope: &str,
) -> (u16, serde_json::Value) {
    let res = app
        .oauth_post(
            "demo",
            "device_authorization",
            &pa.token("pa-sub", app.audience()),
            &[("client_id", pa.issuer.as_str()), ("scope", scope)],
        )
        .await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or_default())
}

/// Trust tiers (issue 31): unverified, an agent gets only the scopes the
/// brand marked for it; verified by staff, it gets the rest; blocked, it is
/// refused on another node and its grants are revoked.
#[tokio::test]
async fn unverified_gets_only_allowed_scopes_verified_the_rest_blocked_nothing() {
    let app = open_app_allowing_orders_read().await;
    let pa = TestPa::start_discoverable().await;
    let user =
        pact_tests::pages::add_user(&app, "demo", "ann@example.com", "ann's password 1").await;

    // Unverified: orders:read is allowed, orders:cancel is not.
    let (status, body) = device_authorization_status(&app, &pa, "orders:cancel").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope")),
        "{body}"
    );
    let (status, body) = device_authorization_status(&app, &pa, "orders:read orders:cancel").await;
    assert_eq!(status, 400, "{body}");
    let tokens = app
        .connect(&pa, "pa-sub", &user.subject(), &["orders:read"])
        .await;
    assert!(tokens["access_token"].is_string());
    let agent = pact_db::agents::find(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert!(!agent.verified);

    // Staff verify it: now it may ask for the rest.
    let mut tx = app.db.begin().await.unwrap();
    pact_server::admin::ops::agents::verify(&mut tx, &staff(), None, &pa.issuer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    app.settle().await;
    let cancel = app
        .connect(&pa, "pa-sub", &user.subject(), &["orders:cancel"])
        .await;
    let grant: uuid::Uuid = {
        use base64::Engine;
        let token = cancel["access_token"].as_str().unwrap();
        let claims = token.split('.').nth(1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(claims)
                .unwrap(),
        )
        .unwrap();
        claims["grant_id"].as_str().unwrap().parse().unwrap()
    };

    // Blocked (disabled, with a reason): refused on another node at once,
    // and every grant it holds revoked, as that node hears.
    let peer = app.spawn_peer(|c| c.admission.policy = Policy::Open).await;
    peer.until_listening().await;
    let mut tx = app.db.begin().await.unwrap();
    let revoked = pact_server::admin::ops::agents::set_enabled(
        &mut tx,
        &staff(),
        None,
        &pa.issuer,
        false,
        Some("spam"),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(revoked >= 1, "its grants are revoked");
    assert!(peer.hears_revocation(grant).await);
    peer.settle().await;
    assert_bare_401(
        peer.send(
            "demo",
            &pa.token("pa-sub", peer.audience()),
            "after-block",
            "hi",
            None,
        )
        .await,
    )
    .await;
    // And the door stays shut: a blocked issuer is not discovered again.
    assert_eq!(pa.discovery_hits(), 1);
}

/// Forgetting an unverified agent drops its grants by the cascade; one whose
/// grants have receipts (append-only, PACT §5.6) is refused with a reason
/// staff can act on, and nothing changes.
#[tokio::test]
async fn an_unverified_agent_with_receipts_is_not_forgotten() {
    let app = open_app_allowing_orders_read().await;
    let pa = TestPa::start_discoverable().await;
    let user =
        pact_tests::pages::add_user(&app, "demo", "bea@example.com", "bea's password 1").await;
    let tokens = app
        .connect(&pa, "pa-sub", &user.subject(), &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap();
    let res = app
        .send_delegated(
            "demo",
            &pa.token("pa-sub", app.audience()),
            access,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let before = grants_and_receipts(&app).await;
    assert_eq!(before.1, 1, "the turn left its receipt");
    // Staff see its live grants, counted at the brands they may see only,
    // and not once they have expired.
    let live = |within: Option<Vec<String>>, at: time::OffsetDateTime| {
        let db = app.db.clone();
        let issuer = pa.issuer.clone();
        async move {
            pact_db::agents::sightings(&db, 10, within.as_deref(), at)
                .await
                .unwrap()
                .into_iter()
                .find(|s| s.issuer == issuer.as_str())
                .expect("a sighting")
                .grants
        }
    };
    let now = time::OffsetDateTime::now_utc();
    assert_eq!(live(None, now).await, 1);
    assert_eq!(live(Some(vec!["demo".to_owned()]), now).await, 1);
    assert_eq!(live(Some(vec!["elsewhere".to_owned()]), now).await, 0);
    assert_eq!(live(None, now + time::Duration::days(400)).await, 0);

    let mut tx = app.db.begin().await.unwrap();
    let refused = pact_server::admin::ops::agents::forget(&mut tx, &staff(), None, &pa.issuer)
        .await
        .unwrap_err();
    drop(tx);
    match refused {
        pact_server::admin::ops::OpsError::Invalid(why) => {
            assert!(why.contains("receipts"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    let after = grants_and_receipts(&app).await;
    assert_eq!(after, before, "nothing changed");
    assert!(
        pact_db::agents::find(&app.db, &pa.issuer)
            .await
            .unwrap()
            .is_some()
    );

    // Without receipts the agent goes, with its grants, and each live grant
    // that went is announced as revoked, so every node drops it at once.
    let other = TestPa::start_discoverable().await;
    app.connect(&other, "pa-sub", &user.subject(), &["orders:read"])
        .await;
    let grant_id: uuid::Uuid = sqlx::query_scalar("select id from grants where pa_issuer = $1")
        .bind(&other.issuer)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let mut heard = sqlx::postgres::PgListener::connect_with(&app.db)
        .await
        .unwrap();
    heard.listen("pactd_revocations").await.unwrap();
    let mut tx = app.db.begin().await.unwrap();
    pact_server::admin::ops::agents::forget(&mut tx, &staff(), None, &other.issuer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), heard.recv())
        .await
        .expect("the deleted grant is announced")
        .unwrap();
    assert_eq!(n.payload(), grant_id.to_string());
    let grants: i64 = sqlx::query_scalar("select count(*) from grants where pa_issuer = $1")
        .bind(&other.issuer)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(grants, 0);
}

/// An agent nobody registered finds what to put in `aud` (PACT §3) and the
/// brand's policy in the brand's RFC 8414 metadata.
#[tokio::test]
async fn the_metadata_publishes_the_audience_and_the_policy() {
    let app = open_app().await;
    app.enable_demo_delegation().await;
    let m: serde_json::Value = app
        .http
        .get(app.oauth("demo", ".well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(m["pact_pa_jwt_audience"], app.audience());
    assert_eq!(m["pact_admission"], "open");
}

/// A spray of unknown issuers costs no database round trip once the brand
/// and the issuer's absence are in the node's copy (allowlist: nothing at
/// all is fetched).
#[tokio::test]
async fn unknown_issuers_are_answered_from_memory_while_the_node_listens() {
    let app = TestApp::spawn().await;
    app.until_listening().await;
    let pa = TestPa::start_discoverable().await;
    let token = pa.token("u1", app.audience());
    assert_bare_401(app.send("demo", &token, "m0", "hi", None).await).await;
    for i in 0..20 {
        assert_bare_401(app.send("demo", &token, &format!("m{i}"), "hi", None).await).await;
    }
    // The node's copy answers "no such agent" without the database: asked
    // with a pool that can reach none, it still answers.
    let nowhere = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(std::time::Duration::from_millis(200))
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .unwrap();
    let found = app
        .state
        .config_cache
        .agent_and_brand(&nowhere, &pa.issuer, "demo")
        .await
        .expect("answered from memory");
    assert!(found.agent.is_none() && found.brand.is_some());
    assert_eq!(pa.discovery_hits(), 0);
}

/// The consent page says plainly that the shop has not verified the agent,
/// and stops saying so once staff verified it (issue 31).
#[tokio::test]
async fn the_consent_page_says_the_shop_has_not_verified_the_agent() {
    let app = TestApp::spawn_with(|c| c.admission.policy = Policy::Open).await;
    offer_orders_read_to_unverified(&app).await;
    let pa = TestPa::start_discoverable().await;
    let user =
        pact_tests::pages::add_user(&app, "demo", "ann@example.com", "ann's password 1").await;
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let (csrf, _) = pact_server::domain::secrets::new_secret();
    pact_db::sessions::insert(
        &app.db,
        &hash,
        &csrf,
        &pact_db::sessions::SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            user_id: Some(user.id),
            ..Default::default()
        },
        time::OffsetDateTime::now_utc() + time::Duration::hours(1),
    )
    .await
    .unwrap();
    let b = pact_tests::pages::Browser::new(&app);
    b.jar.add_cookie_str(
        &format!("pactd_session={raw}"),
        &reqwest::Url::parse(&app.base_url).unwrap(),
    );

    let consent = |code: String| {
        let b = &b;
        async move {
            let res = b
                .submit("/device", "/device", &[("user_code", &code)])
                .await;
            assert_eq!(res.status(), 303);
            b.get("/device/consent").await.text().await.unwrap()
        }
    };
    let auth = app
        .device_authorize(&pa, "pa-sub", "orders:read", None)
        .await;
    let html = consent(auth.user_code).await;
    assert!(html.contains(r#"id="agent-unverified""#), "{html}");
    assert!(
        html.contains("Demo Store has not verified this agent"),
        "{html}"
    );
    // Approved: the account page shows the tier beside the grant too.
    let res = b
        .submit(
            "/device/consent",
            "/device/consent",
            &[("action", "approve"), ("scope", "orders:read")],
        )
        .await;
    assert_eq!(res.status(), 303);
    let account = b.get("/account").await.text().await.unwrap();
    assert!(account.contains("agent-unverified"), "{account}");

    let mut tx = app.db.begin().await.unwrap();
    pact_server::admin::ops::agents::verify(&mut tx, &staff(), None, &pa.issuer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    app.settle().await;
    let auth = app
        .device_authorize(&pa, "pa-sub", "orders:cancel", None)
        .await;
    let html = consent(auth.user_code).await;
    assert!(!html.contains("agent-unverified"), "{html}");
    let account = b.get("/account").await.text().await.unwrap();
    assert!(!account.contains("agent-unverified"), "{account}");
}

/// The number of unverified agents kept is bounded: admitting one more
/// forgets the one seen least recently, but never one a person approved: a
/// grant not yet used keeps its agent, so a flood of admissions cannot take
/// it away.
#[tokio::test]
async fn the_oldest_idle_unverified_agent_is_forgotten_past_the_bound() {
    let app = TestApp::spawn_with(|c| {
        c.admission.policy = Policy::Open;
        c.admission.max_unverified = 2;
    })
    .await;
    offer_orders_read_to_unverified(&app).await;
    let approved = TestPa::start_discoverable().await;
    let res = app
        .send(
            "demo",
            &approved.token("u0", app.audience()),
            "a0",
            "hi",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    app.settle().await;
    app.connect(&approved, "u0", "ada", &["orders:read"]).await;
    app.clock.advance(std::time::Duration::from_secs(5));
    let mut pas = Vec::new();
    for i in 0..3 {
        let pa = TestPa::start_discoverable().await;
        let res = app
            .send(
                "demo",
                &pa.token("u1", app.audience()),
                &format!("m{i}"),
                "hi",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
        app.clock.advance(std::time::Duration::from_secs(5));
        pas.push(pa);
    }
    assert_eq!(agents(&app).await, 3);
    assert!(
        pact_db::agents::find(&app.db, &pas[0].issuer)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        pact_db::agents::find(&app.db, &approved.issuer)
            .await
            .unwrap()
            .is_some(),
        "the agent a person approved is kept"
    );
    assert!(
        pact_db::agents::find(&app.db, &pas[2].issuer)
            .await
            .unwrap()
            .is_some()
    );
}
