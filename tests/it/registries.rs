//! Trusted registries of personal agents and blocked hosts (PACT §3.1's
//! "trusted-issuer registry"; issue 31): a signed list served locally adds
//! its agents; a list with a bad signature, an expired one or an older one
//! changes nothing and is reported to staff; a blocked host's agents are
//! disabled and its door shut, on every node.

use std::sync::{Arc, Mutex};

use pact_db::registries::Registry;
use pact_jose::{ListedAgent, ProviderKey, RegistryList, sign_registry_list};
use pact_server::admission::Policy;
use pact_server::registry::RefreshError;
use pact_tests::TestApp;
use pact_tests::pa::TestPa;
use serde_json::json;

use crate::assert_bare_401;

fn staff() -> pact_server::admin::role::Actor {
    pact_server::admin::role::Actor {
        kind: "cli",
        name: "registry-test".to_owned(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    }
}

/// A registry's list endpoint: serves whatever the test puts in it.
struct ListServer {
    body: Arc<Mutex<String>>,
    url: String,
}

impl ListServer {
    async fn start() -> Self {
        let body = Arc::new(Mutex::new(String::new()));
        let served = body.clone();
        let base = pact_tests::held::serve(axum::Router::new().route(
            "/agents.jwt",
            axum::routing::get(move || {
                let served = served.clone();
                async move { served.lock().unwrap().clone() }
            }),
        ))
        .await;
        Self {
            body,
            url: format!("{base}/agents.jwt"),
        }
    }

    fn serve(&self, jws: String) {
        *self.body.lock().unwrap() = jws;
    }
}

fn listed(pa: &TestPa) -> ListedAgent {
    ListedAgent {
        issuer: pa.issuer.clone(),
        jwks_uri: pa.jwks_uri.clone(),
        name: "Listed Agent".to_owned(),
        logo_uri: Some("https://logos.example/listed.png".to_owned()),
    }
}

fn list(app: &TestApp, age_secs: i64, agents: Vec<ListedAgent>) -> RegistryList {
    let now = app.state.clock.now().unix_timestamp();
    RegistryList {
        iat: now - age_secs,
        exp: now - age_secs + 3600,
        agents,
    }
}

async fn add_registry(app: &TestApp, server: &ListServer, key: &ProviderKey) -> Registry {
    let mut tx = app.db.begin().await.unwrap();
    let r = pact_server::admin::ops::registries::add(
        &mut tx,
        &staff(),
        None,
        "trusted",
        &server.url,
        &key.public_jwk(),
        None,
        true,
        app.state.clock.now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    r
}

async fn refresh(
    app: &TestApp,
    r: &Registry,
) -> Result<pact_db::registries::Applied, RefreshError> {
    let got =
        pact_server::registry::refresh(&app.db, &app.state.config.jwks, r, app.state.clock.now())
            .await;
    app.settle().await;
    got
}

async fn registry(app: &TestApp) -> Registry {
    pact_db::registries::list(&app.db).await.unwrap().remove(0)
}

async fn status(app: &TestApp, pa: &TestPa, brand: &str, id: &str) -> u16 {
    app.send(brand, &pa.token("u1", app.audience()), id, "hi", None)
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_signed_list_admits_its_agents_and_a_bad_one_changes_nothing() {
    let app = TestApp::spawn_with(|c| c.admission.policy = Policy::Registry).await;
    app.add_brand("strict", "Strict").await;
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("strict"),
        "admission",
        &json!("allowlist"),
    )
    .await
    .unwrap();
    let pa = TestPa::start_discoverable().await;
    let key = ProviderKey::generate().unwrap();
    let server = ListServer::start().await;
    let r = add_registry(&app, &server, &key).await;
    app.settle().await;
    assert_bare_401(
        app.send("demo", &pa.token("u1", app.audience()), "m0", "hi", None)
            .await,
    )
    .await;

    // The signed list names the agent: admitted, verified, no discovery.
    server.serve(sign_registry_list(&key, &list(&app, 60, vec![listed(&pa)])).unwrap());
    let applied = refresh(&app, &r).await.unwrap();
    assert_eq!((applied.listed, applied.skipped), (1, 0));
    assert_eq!(status(&app, &pa, "demo", "m1").await, 200);
    let agent = pact_db::agents::find(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert!(agent.verified && agent.enabled);
    assert_eq!(agent.registry.as_deref(), Some("trusted"));
    assert_eq!(agent.name, "Listed Agent");
    let links = pact_db::agents::metadata(&app.db, &pa.issuer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        links.logo_uri.as_deref(),
        Some("https://logos.example/listed.png"),
        "the list's logo is shown once fetched"
    );
    assert_eq!(pa.discovery_hits(), 0, "a listed agent is not discovered");
    // A brand that allowlists does not take the registry's word.
    assert_bare_401(
        app.send("strict", &pa.token("u1", app.audience()), "m2", "hi", None)
            .await,
    )
    .await;

    // Refused lists: another key's, an expired one, an older one, garbage.
    let other = ProviderKey::generate().unwrap();
    let stranger = TestPa::start_discoverable().await;
    let wider = list(&app, 30, vec![listed(&pa), listed(&stranger)]);
    let mut expired = wider.clone();
    expired.iat -= 7200;
    expired.exp -= 7200;
    let older = list(&app, 120, vec![listed(&pa), listed(&stranger)]);
    for (jws, why) in [
        (sign_registry_list(&other, &wider).unwrap(), "signature"),
        (sign_registry_list(&key, &expired).unwrap(), "expired"),
        (
            sign_registry_list(&key, &older).unwrap(),
            "older than the one in force",
        ),
        ("not a jws".to_owned(), "signature"),
    ] {
        server.serve(jws);
        let e = refresh(&app, &r).await.expect_err(why);
        let stored = registry(&app).await;
        let reported = stored.last_error.unwrap_or_default();
        assert!(reported.contains(why), "{why}: {e} / {reported}");
        assert_eq!(stored.listed, 1, "{why}: the list in force stays");
        assert!(
            pact_db::agents::find(&app.db, &stranger.issuer)
                .await
                .unwrap()
                .is_none(),
            "{why}: nothing is added"
        );
        assert_eq!(status(&app, &pa, "demo", &format!("ok-{why}")).await, 200);
    }
    assert_bare_401(
        app.send(
            "demo",
            &stranger.token("u1", app.audience()),
            "s1",
            "hi",
            None,
        )
        .await,
    )
    .await;

    // A newer list without the agent: it is no longer admitted.
    server.serve(sign_registry_list(&key, &list(&app, 10, vec![listed(&stranger)])).unwrap());
    let applied = refresh(&app, &r).await.unwrap();
    assert_eq!(applied.delisted, vec![pa.issuer.clone()]);
    assert!(
        registry(&app).await.last_error.is_none(),
        "a good list clears the report"
    );
    assert_bare_401(
        app.send("demo", &pa.token("u1", app.audience()), "m3", "hi", None)
            .await,
    )
    .await;
    assert_eq!(status(&app, &stranger, "demo", "s2").await, 200);

    // Staff stop trusting the registry: its agents are refused at once.
    let mut tx = app.db.begin().await.unwrap();
    let (unlisted, _) = pact_server::admin::ops::registries::remove(
        &mut tx,
        &staff(),
        None,
        "trusted",
        app.state.clock.now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    app.settle().await;
    assert_eq!(unlisted, 1);
    assert_bare_401(
        app.send(
            "demo",
            &stranger.token("u1", app.audience()),
            "s3",
            "hi",
            None,
        )
        .await,
    )
    .await;
}

#[tokio::test]
async fn a_registry_does_not_take_over_staffs_agents_nor_a_blocked_host() {
    let app = TestApp::spawn_with(|c| c.admission.policy = Policy::Registry).await;
    let staffs = app.registered_pa("https://staffs-own.example").await;
    let key = ProviderKey::generate().unwrap();
    let server = ListServer::start().await;
    let r = add_registry(&app, &server, &key).await;
    let mut own = listed(&staffs);
    own.jwks_uri = "https://elsewhere.example/jwks.json".to_owned();
    let mut tx = app.db.begin().await.unwrap();
    pact_server::admin::ops::agents::block_host(
        &mut tx,
        &staff(),
        None,
        "blocked.example",
        Some("spam"),
        app.state.clock.now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let blocked = ListedAgent {
        issuer: "https://a.blocked.example".to_owned(),
        jwks_uri: "https://a.blocked.example/jwks.json".to_owned(),
        name: "Blocked".to_owned(),
        logo_uri: None,
    };
    server.serve(sign_registry_list(&key, &list(&app, 10, vec![own, blocked])).unwrap());
    let applied = refresh(&app, &r).await.unwrap();
    assert_eq!((applied.listed, applied.skipped), (0, 2));
    let kept = pact_db::agents::find(&app.db, &staffs.issuer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        kept.jwks_uri, staffs.jwks_uri,
        "staff's registration stands"
    );
    assert!(kept.registry.is_none());
    assert!(
        pact_db::agents::find(&app.db, "https://a.blocked.example")
            .await
            .unwrap()
            .is_none()
    );
}

/// Blocking a host (issue 31): the agents stored on it and under it are
/// disabled with their grants revoked, refused on another node at once, and
/// a new issuer on it is not even discovered.
#[tokio::test]
async fn a_blocked_host_is_refused_everywhere_without_a_fetch() {
    let app = TestApp::spawn_with(|c| c.admission.policy = Policy::Open).await;
    let peer = app.spawn_peer(|c| c.admission.policy = Policy::Open).await;
    peer.until_listening().await;
    let pa = TestPa::start_discoverable().await;
    assert_eq!(status(&app, &pa, "demo", "m1").await, 200);

    let mut tx = app.db.begin().await.unwrap();
    let (host, disabled, _) = pact_server::admin::ops::agents::block_host(
        &mut tx,
        &staff(),
        None,
        "http://127.0.0.1/",
        Some("a spray came from here"),
        app.state.clock.now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(host, "127.0.0.1");
    assert_eq!(disabled, vec![pa.issuer.clone()]);
    peer.settle().await;
    // This node keeps the blocked hosts too (read by its door for `pa` above).
    app.settle().await;
    assert_bare_401(
        peer.send("demo", &pa.token("u1", peer.audience()), "m2", "hi", None)
            .await,
    )
    .await;

    let newcomer = TestPa::start_discoverable().await;
    let before = (app.state.door.fetch_count(), peer.state.door.fetch_count());
    for node in [&app, &peer] {
        assert_bare_401(
            node.send(
                "demo",
                &newcomer.token("u1", node.audience()),
                "n1",
                "hi",
                None,
            )
            .await,
        )
        .await;
    }
    assert_eq!(
        newcomer.discovery_hits(),
        0,
        "a blocked host costs no fetch"
    );
    assert_eq!(
        (app.state.door.fetch_count(), peer.state.door.fetch_count()),
        before
    );
    assert!(
        pact_db::agents::find(&app.db, &newcomer.issuer)
            .await
            .unwrap()
            .is_none()
    );

    // A reason is required, and a host must be a host.
    let mut tx = app.db.begin().await.unwrap();
    for (host, why) in [("evil.example", None), ("not a host", Some("x"))] {
        assert!(matches!(
            pact_server::admin::ops::agents::block_host(
                &mut tx,
                &staff(),
                None,
                host,
                why,
                app.state.clock.now()
            )
            .await,
            Err(pact_server::admin::ops::OpsError::Invalid(_))
        ));
    }
    drop(tx);

    // Lifted: a new issuer may knock again; the disabled one stays disabled.
    let mut tx = app.db.begin().await.unwrap();
    pact_server::admin::ops::agents::unblock_host(&mut tx, &staff(), None, "127.0.0.1")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    app.settle().await;
    assert_eq!(status(&app, &newcomer, "demo", "n2").await, 200);
    assert_bare_401(
        app.send("demo", &pa.token("u1", app.audience()), "m3", "hi", None)
            .await,
    )
    .await;
}

/// A block committed while an agent of its host is being stored (an open
/// admission or a registry's list holding the blocks, as they do) waits for
/// that store and disables what it stored: before, each read only what had
/// committed before it began, and the agent stayed enabled on a blocked host.
#[tokio::test]
async fn a_block_waits_for_an_agent_being_stored_and_disables_it() {
    let app = TestApp::spawn().await;
    let mut storing = app.db.begin().await.unwrap();
    // What `hold_blocks` takes, spelled out so the test says what it relies on.
    sqlx::query("select pg_advisory_xact_lock_shared(8097862956507491187)")
        .execute(&mut *storing)
        .await
        .unwrap();
    sqlx::query(
        "insert into agents (issuer, jwks_uri, name, verified) \
         values ('https://a.racing.example', 'https://a.racing.example/jwks.json', 'Racing', false)",
    )
    .execute(&mut *storing)
    .await
    .unwrap();
    let db = app.db.clone();
    let now = app.state.clock.now();
    let block = tokio::spawn(async move {
        let mut tx = db.begin().await.unwrap();
        pact_server::admin::ops::agents::block_host(
            &mut tx,
            &staff(),
            None,
            "racing.example",
            Some("spam"),
            now,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    storing.commit().await.unwrap();
    block.await.unwrap();
    let agent = pact_db::agents::find(&app.db, "https://a.racing.example")
        .await
        .unwrap()
        .unwrap();
    assert!(
        !agent.enabled,
        "the block disabled the agent stored meanwhile"
    );
}
