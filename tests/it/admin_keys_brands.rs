//! The staff's signing keys, nodes, brands and scopes, in the admin API and
//! the console: each role, brand limits, refusals audited, CSRF and Origin.

use pact_tests::TestApp;
use pact_tests::pages::{Browser, csrf_from};
use serde_json::Value;

use crate::admin_api::{
    assert_audited, audit_actions, call, call_ok, call_refused, credential, error,
};
use crate::admin_console::{add_admin, sign_in};

async fn app() -> TestApp {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    app.add_brand("shop", "Shop").await;
    app
}

fn kids(list: &Value) -> Vec<(String, String)> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["kid"].as_str().unwrap().to_owned(),
                k["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn published_kids(app: &TestApp) -> Vec<String> {
    let jwks: Value = app
        .http
        .get(format!("{}/a2a/demo/oauth/jwks.json", app.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn keys_are_listed_without_private_parts_and_only_an_owner_rotates_them() {
    let app = app().await;
    let viewer = credential(&app, "desk", "viewer", Some(&["shop"])).await;
    let operator = credential(&app, "ops", "operator", None).await;
    let limited_owner = credential(&app, "shop-owner", "owner", Some(&["shop"])).await;
    let owner = credential(&app, "root", "owner", None).await;

    // Public facts only, for any role (a brand-limited viewer too: the keys
    // are in every brand's JWKS anyway).
    let list = call_ok(&app, &viewer, "get", "/keys", None).await;
    let before = kids(&list);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].1, "active");
    let key = list["items"][0].as_object().unwrap();
    let mut fields: Vec<&str> = key.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "activates_at",
            "created_at",
            "kid",
            "retired_at",
            "status",
            "unpublish_at"
        ]
    );
    assert!(!list.to_string().contains("sealed"));

    // Refused before anything changes, and the refusal is audited.
    for (who, name) in [
        (&viewer, "desk"),
        (&operator, "ops"),
        (&limited_owner, "shop-owner"),
    ] {
        call_refused(&app, who, "post", "/keys/rotate", None, 403, "forbidden").await;
        assert!(
            audit_actions(&app, name)
                .await
                .contains(&"key.rotate.denied".to_owned()),
            "{name}"
        );
    }
    assert_eq!(pact_db::signing_keys::all(&app.db).await.unwrap().len(), 1);

    // The owner rotates exactly as `pactd keys rotate`: the new key is
    // published now, signs after the overlap; the old one signs until then.
    let new = call_ok(&app, &owner, "post", "/keys/rotate", None).await;
    let kid = new["kid"].as_str().unwrap().to_owned();
    assert_eq!(new["status"], "published");
    let rows = pact_db::signing_keys::all(&app.db).await.unwrap();
    assert_eq!(rows.len(), 2);
    let new_row = rows.iter().find(|r| r.kid == kid).unwrap();
    let old_row = rows.iter().find(|r| r.kid != kid).unwrap();
    let overlap = app.state.config.delegation.key_overlap.as_secs() as i64;
    let retain = app.state.config.delegation.key_retention.as_secs() as i64;
    // created_at is the database's clock, activates_at the node's: close.
    let lead = (new_row.activates_at - new_row.created_at).whole_seconds();
    assert!((overlap - 5..=overlap + 5).contains(&lead), "{lead}");
    assert_eq!(old_row.retired_at, Some(new_row.activates_at));
    assert_eq!(
        old_row.unpublish_at,
        Some(new_row.activates_at + time::Duration::seconds(retain))
    );
    let after = kids(&call_ok(&app, &viewer, "get", "/keys", None).await);
    assert_eq!(
        after,
        vec![
            (kid.clone(), "published".into()),
            (before[0].0.clone(), "active".into())
        ]
    );
    // Every node reloads on the table's notification: the JWKS has it soon.
    let mut seen = false;
    for _ in 0..200 {
        if published_kids(&app).await.contains(&kid) {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(seen, "the new key is published");

    let (target, detail): (Option<String>, Value) = sqlx::query_as(
        "select target, detail from audit_log where actor = 'root' and action = 'key.rotate'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(target.as_deref(), Some(kid.as_str()));
    assert!(detail["signs_from"].is_string());
    assert!(
        audit_actions(&app, "desk")
            .await
            .contains(&"key.list".to_owned())
    );
}

#[tokio::test]
async fn the_console_shows_the_keys_and_only_an_owner_rotates_them() {
    let app = app().await;
    add_admin(&app, "owner@example.com", "owner", None).await;
    add_admin(&app, "desk@example.com", "viewer", None).await;
    add_admin(&app, "shop@example.com", "owner", Some(&["shop"])).await;
    let kid = pact_db::signing_keys::all(&app.db).await.unwrap()[0]
        .kid
        .clone();

    let viewer = Browser::new(&app);
    sign_in(&app, &viewer, "desk@example.com").await;
    let (status, html) = viewer.get_html("/admin/keys").await;
    assert_eq!(status, 200);
    assert!(html.contains(&kid));
    assert!(html.contains("active (signs)"));
    assert!(!html.contains("Rotate the signing key"));
    let csrf = csrf_from(&html).unwrap();
    let res = viewer.post("/admin/keys/rotate", &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 403);

    let limited = Browser::new(&app);
    sign_in(&app, &limited, "shop@example.com").await;
    let (_, html) = limited.get_html("/admin/keys").await;
    assert!(!html.contains("Rotate the signing key"));
    let csrf = csrf_from(&html).unwrap();
    let res = limited.post("/admin/keys/rotate", &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 403);
    assert_eq!(pact_db::signing_keys::all(&app.db).await.unwrap().len(), 1);

    let owner = Browser::new(&app);
    sign_in(&app, &owner, "owner@example.com").await;
    let (_, html) = owner.get_html("/admin/keys").await;
    assert!(html.contains("Rotate the signing key"));
    let csrf = csrf_from(&html).unwrap();
    // CSRF and Origin are checked first.
    let res = owner.post("/admin/keys/rotate", &[("csrf", "wrong")]).await;
    assert_eq!(res.status(), 403);
    let res = owner
        .client
        .post(owner.url("/admin/keys/rotate"))
        .header("origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(pact_db::signing_keys::all(&app.db).await.unwrap().len(), 1);
    let res = owner.post("/admin/keys/rotate", &[("csrf", &csrf)]).await;
    assert_eq!(res.status(), 303);
    let rows = pact_db::signing_keys::all(&app.db).await.unwrap();
    assert_eq!(rows.len(), 2);
    let (_, html) = owner.get_html("/admin/keys").await;
    assert!(html.contains(&rows[0].kid));
    assert!(html.contains("published for verification"));

    let actions = audit_actions(&app, "owner@example.com").await;
    assert!(actions.contains(&"key.rotate".to_owned()), "{actions:?}");
    let denied = audit_actions(&app, "desk@example.com").await;
    assert!(
        denied.contains(&"key.rotate.denied".to_owned()),
        "{denied:?}"
    );
}

/// Polls `GET /nodes` until `done` holds (heartbeats are asynchronous).
async fn nodes_until(app: &TestApp, secret: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        last = call_ok(app, secret, "get", "/nodes", None).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("nodes never reached the expected state: {last}");
}

#[tokio::test]
async fn every_node_says_whether_it_listens_for_revocations() {
    let app = app().await;
    let peer = app.spawn_peer(|_| {}).await;
    let viewer = credential(&app, "desk", "viewer", Some(&["shop"])).await;
    let a = app.state.node.identity.id.to_string();
    let b = peer.state.node.identity.id.to_string();

    let v = nodes_until(&app, &viewer, |v| {
        v["items"].as_array().unwrap().len() == 2 && v["all_listening"] == true
    })
    .await;
    assert_eq!(v["summary"], "2 nodes, all listening");
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&a.as_str()) && ids.contains(&b.as_str()));
    for n in v["items"].as_array().unwrap() {
        assert_eq!(n["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(n["gone"], false);
        assert!(!n["hostname"].as_str().unwrap().is_empty());
    }
    assert!(
        audit_actions(&app, "desk")
            .await
            .contains(&"node.list".to_owned())
    );

    // The peer's listener is down: its next beat says so at once, and the
    // overview names it.
    peer.state.config_cache.suspend();
    let v = nodes_until(&app, &viewer, |v| v["all_listening"] == false).await;
    let summary = v["summary"].as_str().unwrap();
    assert!(summary.contains(&b), "{summary}");
    assert!(!summary.contains(&a), "{summary}");
    add_admin(&app, "desk@example.com", "viewer", None).await;
    let browser = Browser::new(&app);
    sign_in(&app, &browser, "desk@example.com").await;
    let (status, html) = browser.get_html("/admin").await;
    assert_eq!(status, 200);
    assert!(html.contains("not listening for revocations"), "{html}");
    assert!(html.contains(&b));

    // A node that stops cleanly leaves the list.
    peer.stop().await;
    let v = nodes_until(&app, &viewer, |v| v["items"].as_array().unwrap().len() == 1).await;
    assert_eq!(v["summary"], "1 node, all listening");

    // One that went silent shows as gone, does not count, and is swept.
    let now = time::OffsetDateTime::now_utc();
    for (minutes, host) in [(1, "crashed"), (6, "long-gone")] {
        pact_db::nodes::heartbeat(
            &app.db,
            &pact_db::nodes::NodeRow {
                id: uuid::Uuid::new_v4(),
                hostname: host.into(),
                version: "0.0.1".into(),
                started_at: now - time::Duration::hours(1),
                last_seen: now - time::Duration::minutes(minutes),
                listening: false,
            },
        )
        .await
        .unwrap();
    }
    let v = call_ok(&app, &viewer, "get", "/nodes", None).await;
    assert_eq!(v["summary"], "1 node, all listening");
    assert_eq!(v["all_listening"], true);
    let gone: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["gone"] == true)
        .map(|n| n["hostname"].as_str().unwrap())
        .collect();
    assert_eq!(gone.len(), 2);
    let (_, html) = browser.get_html("/admin").await;
    assert!(html.contains("1 node, all listening"));
    assert!(html.contains("crashed"));
    pact_server::housekeeping::sweep(&app.state.node, now).await;
    let hosts: Vec<String> = pact_db::nodes::list(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.hostname)
        .collect();
    assert!(hosts.contains(&"crashed".to_owned()));
    assert!(!hosts.contains(&"long-gone".to_owned()));
}

async fn scopes_of(app: &TestApp, brand: &str) -> Vec<(String, String, bool)> {
    pact_db::scopes::list(&app.db, &pact_tests::brand_id(brand))
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.scope_id, s.description, s.requires_mfa))
        .collect()
}

#[tokio::test]
async fn owners_manage_their_brands_scopes_through_the_api_on_every_node() {
    let app = app().await;
    let peer = app.spawn_peer(|_| {}).await;
    let owner = credential(&app, "root", "owner", None).await;
    let shop_owner = credential(&app, "shop-owner", "owner", Some(&["shop"])).await;
    let operator = credential(&app, "ops", "operator", None).await;
    let viewer = credential(&app, "desk", "viewer", None).await;

    let list = call_ok(&app, &owner, "get", "/brands", None).await;
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["demo", "shop"]);
    let demo = call_ok(&app, &owner, "get", "/brands/demo", None).await;
    assert!(!demo["scopes"].as_array().unwrap().is_empty());
    assert_eq!(demo["grant_lifetime_days"], 30);
    assert_eq!(demo["grant_lifetime_is_default"], true);

    // Below owner: refused before anything is looked up, and audited.
    for (secret, name) in [(&viewer, "desk"), (&operator, "ops")] {
        call_refused(&app, secret, "get", "/brands", None, 403, "forbidden").await;
        call_refused(&app, secret, "get", "/brands/shop", None, 403, "forbidden").await;
        call_refused(
            &app,
            secret,
            "post",
            "/brands/shop/scopes",
            Some(serde_json::json!({"scope_id": "x", "description": "X"})),
            403,
            "forbidden",
        )
        .await;
        let actions = audit_actions(&app, name).await;
        for a in [
            "brand.list.denied",
            "brand.read.denied",
            "scope.upsert.denied",
        ] {
            assert!(
                actions.contains(&a.to_owned()),
                "{name}: {a} in {actions:?}"
            );
        }
    }
    assert!(scopes_of(&app, "shop").await.is_empty());

    // The peer holds a cached copy of shop's (empty) scope list.
    for _ in 0..200 {
        if peer.state.config_cache.is_live() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(peer.state.config_cache.is_live());
    assert!(
        peer.state
            .config_cache
            .scopes(&peer.db, &pact_tests::brand_id("shop"))
            .await
            .unwrap()
            .is_empty()
    );

    // A brand-limited owner manages its brand.
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/scopes",
        Some(serde_json::json!({"scope_id": "returns:create", "description": "Start a return"})),
    )
    .await;
    assert_eq!(v["scopes"][0]["scope_id"], "returns:create");
    assert_eq!(
        scopes_of(&app, "shop").await,
        [("returns:create".into(), "Start a return".into(), false)]
    );
    // Every node drops its copy on the table's notification.
    peer.settle().await;
    let seen = peer
        .state
        .config_cache
        .scopes(&peer.db, &pact_tests::brand_id("shop"))
        .await
        .unwrap();
    assert_eq!(seen.len(), 1, "the peer sees the new scope");
    // An edit: description and second factor.
    call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/scopes",
        Some(serde_json::json!({
            "scope_id": "returns:create", "description": "Start a return of an order", "requires_mfa": true
        })),
    )
    .await;
    assert_eq!(
        scopes_of(&app, "shop").await,
        [(
            "returns:create".into(),
            "Start a return of an order".into(),
            true
        )]
    );
    peer.settle().await;
    let seen = peer
        .state
        .config_cache
        .scopes(&peer.db, &pact_tests::brand_id("shop"))
        .await
        .unwrap();
    assert!(seen[0].requires_mfa);

    // What consent shows is checked: hidden and bidi characters, over-long
    // or blank text, bad scope ids, unknown fields; nothing changes.
    for bad in [
        serde_json::json!({"scope_id": "returns:create", "description": "Refund \u{202e}0001\u{202c} EUR"}),
        serde_json::json!({"scope_id": "returns:create", "description": "zero\u{200b}width"}),
        serde_json::json!({"scope_id": "returns:create", "description": "x".repeat(501)}),
        serde_json::json!({"scope_id": "returns:create", "description": "   "}),
        serde_json::json!({"scope_id": "a b", "description": "Fine"}),
        serde_json::json!({"scope_id": "q\"uote", "description": "Fine"}),
        serde_json::json!({"scope_id": "x", "description": "Fine", "extra": 1}),
        serde_json::json!({"description": "Fine"}),
    ] {
        call_refused(
            &app,
            &shop_owner,
            "post",
            "/brands/shop/scopes",
            Some(bad),
            400,
            "invalid_request",
        )
        .await;
    }
    assert_eq!(scopes_of(&app, "shop").await.len(), 1);

    // Other brands do not exist for it: the same answer as a missing brand.
    let demo_before = scopes_of(&app, "demo").await;
    let list = call_ok(&app, &shop_owner, "get", "/brands", None).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let missing = call_refused(
        &app,
        &shop_owner,
        "get",
        "/brands/nope",
        None,
        404,
        "not_found",
    )
    .await;
    let other = call_refused(
        &app,
        &shop_owner,
        "get",
        "/brands/demo",
        None,
        404,
        "not_found",
    )
    .await;
    assert_eq!(missing, other);
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/demo/scopes",
        Some(serde_json::json!({"scope_id": "orders:read", "description": "Mine now"})),
        404,
        "not_found",
    )
    .await;
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/demo/scopes/orders:read/remove",
        None,
        404,
        "not_found",
    )
    .await;
    assert_eq!(scopes_of(&app, "demo").await, demo_before);

    // Removing: once, then it is not found.
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/scopes/returns:create/remove",
        None,
    )
    .await;
    assert!(v["scopes"].as_array().unwrap().is_empty());
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/scopes/returns:create/remove",
        None,
        404,
        "not_found",
    )
    .await;
    peer.settle().await;
    assert!(
        peer.state
            .config_cache
            .scopes(&peer.db, &pact_tests::brand_id("shop"))
            .await
            .unwrap()
            .is_empty()
    );

    let entries: Vec<(String, Option<String>, Option<String>)> = sqlx::query_as(
        "select action, target, brand_id from audit_log where actor = 'shop-owner' \
         and action like 'scope.%' order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let shop = Some("shop".to_owned());
    let target = Some("returns:create".to_owned());
    assert_eq!(
        entries,
        [
            ("scope.upsert".into(), target.clone(), shop.clone()),
            ("scope.upsert".into(), target.clone(), shop.clone()),
            ("scope.remove".into(), target, shop),
        ]
    );
}

#[tokio::test]
async fn the_console_edits_scopes_for_owners_of_the_brand_only() {
    let app = app().await;
    add_admin(&app, "owner@example.com", "owner", None).await;
    add_admin(&app, "shop@example.com", "owner", Some(&["shop"])).await;
    add_admin(&app, "ops@example.com", "operator", None).await;

    // An operator has no brands page, and its POSTs are refused and audited.
    let ops = Browser::new(&app);
    sign_in(&app, &ops, "ops@example.com").await;
    let (status, html) = ops.get_html("/admin").await;
    assert_eq!(status, 200);
    assert!(!html.contains("href=\"/admin/brands\""));
    let csrf = csrf_from(&html).unwrap();
    let (status, _) = ops.get_html("/admin/brands").await;
    assert_eq!(status, 403);
    let (status, _) = ops.get_html("/admin/brands/shop").await;
    assert_eq!(status, 403);
    let res = ops
        .post(
            "/admin/brands/shop/scopes",
            &[("csrf", &csrf), ("scope_id", "x"), ("description", "X")],
        )
        .await;
    assert_eq!(res.status(), 403);
    assert!(
        audit_actions(&app, "ops@example.com")
            .await
            .contains(&"scope.upsert.denied".to_owned())
    );

    // The shop owner: its brand only.
    let shop = Browser::new(&app);
    sign_in(&app, &shop, "shop@example.com").await;
    let (status, html) = shop.get_html("/admin/brands").await;
    assert_eq!(status, 200);
    assert!(html.contains("/admin/brands/shop"));
    assert!(!html.contains("/admin/brands/demo"));
    let (status, _) = shop.get_html("/admin/brands/demo").await;
    assert_eq!(status, 404);
    let (status, html) = shop.get_html("/admin/brands/shop").await;
    assert_eq!(status, 200);
    assert!(html.contains("30 days"));
    let csrf = csrf_from(&html).unwrap();
    let demo_before = scopes_of(&app, "demo").await;
    let res = shop
        .post(
            "/admin/brands/demo/scopes",
            &[
                ("csrf", &csrf),
                ("scope_id", "orders:read"),
                ("description", "Mine"),
            ],
        )
        .await;
    assert_eq!(res.status(), 404);
    let res = shop
        .post(
            "/admin/brands/demo/scopes/remove",
            &[("csrf", &csrf), ("scope_id", "orders:read")],
        )
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(scopes_of(&app, "demo").await, demo_before);

    // CSRF and Origin first; then what consent shows is checked.
    let form = [
        ("csrf", csrf.as_str()),
        ("scope_id", "returns:create"),
        ("description", "Start a return"),
        ("requires_mfa", "1"),
    ];
    let mut wrong = form;
    wrong[0].1 = "wrong";
    let res = shop.post("/admin/brands/shop/scopes", &wrong).await;
    assert_eq!(res.status(), 403);
    let res = shop
        .client
        .post(shop.url("/admin/brands/shop/scopes"))
        .header("origin", "https://evil.example")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let mut hidden = form;
    hidden[2].1 = "Start a \u{202e}nruter";
    let res = shop.post("/admin/brands/shop/scopes", &hidden).await;
    assert_eq!(res.status(), 400);
    assert!(scopes_of(&app, "shop").await.is_empty());

    let res = shop.post("/admin/brands/shop/scopes", &form).await;
    assert_eq!(res.status(), 303);
    assert_eq!(
        scopes_of(&app, "shop").await,
        [("returns:create".into(), "Start a return".into(), true)]
    );
    // Edit: unticking the box turns the second factor off.
    let res = shop
        .post(
            "/admin/brands/shop/scopes",
            &[
                ("csrf", &csrf),
                ("scope_id", "returns:create"),
                ("description", "Start a return of an order"),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(
        scopes_of(&app, "shop").await,
        [(
            "returns:create".into(),
            "Start a return of an order".into(),
            false
        )]
    );
    let (_, html) = shop.get_html("/admin/brands/shop").await;
    assert!(html.contains("Start a return of an order"));
    let res = shop
        .post(
            "/admin/brands/shop/scopes/remove",
            &[("csrf", "wrong"), ("scope_id", "returns:create")],
        )
        .await;
    assert_eq!(res.status(), 403);
    let res = shop
        .client
        .post(shop.url("/admin/brands/shop/scopes/remove"))
        .header("origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str()), ("scope_id", "returns:create")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(scopes_of(&app, "shop").await.len(), 1);
    let res = shop
        .post(
            "/admin/brands/shop/scopes/remove",
            &[("csrf", &csrf), ("scope_id", "returns:create")],
        )
        .await;
    assert_eq!(res.status(), 303);
    assert!(scopes_of(&app, "shop").await.is_empty());
    let actions = audit_actions(&app, "shop@example.com").await;
    assert!(actions.contains(&"scope.upsert".to_owned()));
    assert!(actions.contains(&"scope.remove".to_owned()));

    // The unlimited owner sees every brand.
    let owner = Browser::new(&app);
    sign_in(&app, &owner, "owner@example.com").await;
    let (_, html) = owner.get_html("/admin/brands").await;
    assert!(html.contains("/admin/brands/demo") && html.contains("/admin/brands/shop"));
}

#[tokio::test]
async fn platforms_are_registered_with_their_links_and_logo_from_the_api_and_the_console() {
    use pact_tests::logo_server::{LogoServer, PA_LOGO};
    let app = app().await;
    let owner = credential(&app, "root", "owner", None).await;
    let platform = LogoServer::start().await;

    let v = call_ok(
        &app,
        &owner,
        "post",
        "/agents",
        Some(serde_json::json!({
            "issuer": "https://new.example",
            "jwks_uri": "https://new.example/jwks.json",
            "name": "New",
            "homepage": "https://new.example/",
            "logo_uri": platform.url("/logo.png"),
            "policy_uri": "https://new.example/privacy",
            "tos_uri": "https://new.example/terms",
        })),
    )
    .await;
    let sha = pact_server::who::sha256_hex(PA_LOGO);
    assert_eq!(v["logo"], format!("/logos/{sha}"));
    assert_eq!(v["homepage"], "https://new.example/");
    assert_eq!(platform.hits(), 1, "fetched once, at registration");
    let meta = pact_db::agents::metadata(&app.db, "https://new.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.logo_sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(meta.tos_uri.as_deref(), Some("https://new.example/terms"));
    let res = app
        .http
        .get(format!("{}/logos/{sha}", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // Absent keeps, "" removes, as with `pactd agent add`.
    call_ok(
        &app,
        &owner,
        "post",
        "/agents",
        Some(serde_json::json!({
            "issuer": "https://new.example",
            "jwks_uri": "https://new.example/jwks.json",
            "tos_uri": "",
        })),
    )
    .await;
    let meta = pact_db::agents::metadata(&app.db, "https://new.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.tos_uri, None);
    assert_eq!(meta.homepage_uri.as_deref(), Some("https://new.example/"));

    // Refused links and logos change nothing.
    for (field, bad) in [
        ("homepage", "javascript:alert(1)".to_owned()),
        (
            "policy_uri",
            "https://new.example/\u{202e}lmth.ycavirp".to_owned(),
        ),
        ("logo_uri", platform.url("/logo.svg")),
        ("name", "Ne\u{200b}w".to_owned()),
    ] {
        let mut body = serde_json::json!({
            "issuer": "https://new.example",
            "jwks_uri": "https://new.example/jwks.json",
        });
        body[field] = serde_json::json!(bad);
        let e = call_refused(
            &app,
            &owner,
            "post",
            "/agents",
            Some(body),
            400,
            "invalid_request",
        )
        .await;
        assert!(
            e["error"]["message"].as_str().unwrap().starts_with(field),
            "{e}"
        );
    }
    let after = pact_db::agents::metadata(&app.db, "https://new.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.logo_sha256.as_deref(), Some(sha.as_str()));
    assert_eq!(after.homepage_uri.as_deref(), Some("https://new.example/"));
    let detail: Value = sqlx::query_scalar(
        "select detail from audit_log where actor = 'root' and action = 'agent.register' order by id limit 1",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(detail["homepage"], "https://new.example/");

    // The console's form: the same function.
    add_admin(&app, "owner@example.com", "owner", None).await;
    let b = Browser::new(&app);
    sign_in(&app, &b, "owner@example.com").await;
    let (_, html) = b.get_html("/admin/agents").await;
    assert!(html.contains("name=\"logo_uri\""));
    let csrf = csrf_from(&html).unwrap();
    let logo = platform.url("/logo.png");
    let res = b
        .post(
            "/admin/agents",
            &[
                ("csrf", &csrf),
                ("issuer", "https://other.example"),
                ("jwks_uri", "https://other.example/jwks.json"),
                ("name", "Other"),
                ("homepage", "https://other.example/"),
                ("logo_uri", &logo),
                ("policy_uri", ""),
                ("tos_uri", "https://other.example/terms"),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    let meta = pact_db::agents::metadata(&app.db, "https://other.example")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(meta.homepage_uri.as_deref(), Some("https://other.example/"));
    assert_eq!(meta.policy_uri, None);
    assert_eq!(meta.logo_sha256.as_deref(), Some(sha.as_str()));
    let res = b
        .post(
            "/admin/agents",
            &[
                ("csrf", &csrf),
                ("issuer", "https://third.example"),
                ("jwks_uri", "https://third.example/jwks.json"),
                ("homepage", "javascript:alert(1)"),
            ],
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(
        pact_db::agents::find(&app.db, "https://third.example")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        audit_actions(&app, "owner@example.com")
            .await
            .contains(&"agent.register".to_owned())
    );
}

/// From the network, a loopback logo is fetched only when the server also
/// fetches loopback JWKS: otherwise the API would make pactd call itself.
#[tokio::test]
async fn a_remote_registration_does_not_fetch_loopback_logos_in_production() {
    use pact_tests::logo_server::LogoServer;
    let app = TestApp::spawn_with(|c| c.jwks.allow_loopback = false).await;
    let owner = credential(&app, "root", "owner", None).await;
    let platform = LogoServer::start().await;
    call_refused(
        &app,
        &owner,
        "post",
        "/agents",
        Some(serde_json::json!({
            "issuer": "https://new.example",
            "jwks_uri": "https://new.example/jwks.json",
            "logo_uri": platform.url("/logo.png"),
        })),
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(platform.hits(), 0);
    assert!(
        pact_db::agents::find(&app.db, "https://new.example")
            .await
            .unwrap()
            .is_none()
    );
}

// --- grant lifetime, authorization_details types, tools ----------------------

async fn brand_settings(app: &TestApp, brand: &str) -> Value {
    pact_db::brands::find(&app.db, brand)
        .await
        .unwrap()
        .unwrap()
        .settings
}

/// Owners edit a brand's grant lifetime, RFC 9396 types and tools through the
/// API with the command line's rules; lower roles are refused (and the
/// refusal audited) before anything is looked up; a brand-limited owner gets
/// the same `not_found` for another brand as for no brand; bad input is a
/// 400 in the API's one error shape and changes nothing.
#[tokio::test]
async fn owners_edit_lifetime_types_and_tools_through_the_api_and_no_one_else() {
    let app = app().await;
    for (id, d) in pact_server::agent::demo_tools::DEMO_SCOPES {
        pact_db::scopes::upsert(&app.db, &pact_tests::brand_id("shop"), id, d, false)
            .await
            .unwrap();
    }
    let owner = credential(&app, "root", "owner", None).await;
    let shop_owner = credential(&app, "shop-owner", "owner", Some(&["shop"])).await;
    let operator = credential(&app, "ops", "operator", None).await;
    let viewer = credential(&app, "desk", "viewer", None).await;
    let declaration = serde_json::json!({"type_name": "order_view", "declaration": {
        "scope": "orders:read", "description": "Orders {ids}",
        "fields": {"ids": {"type": "string_array", "required": true}}}});
    let tool = serde_json::json!({"name": "get_order", "scope": "orders:read",
        "url": "https://shop.example/tools/get_order", "description": "One order",
        "enforce": ["ids=order_id"], "input_schema": {"type": "object"}});

    // Lower roles: 403 before the brand is looked at, audited as denied.
    for (secret, name) in [(&operator, "ops"), (&viewer, "desk")] {
        for (path, body) in [
            (
                "/brands/shop/grant-lifetime",
                serde_json::json!({"days": 3}),
            ),
            ("/brands/shop/details-types", declaration.clone()),
            ("/brands/shop/tools", tool.clone()),
            ("/brands/nope/tools/x/remove", serde_json::json!({})),
        ] {
            call_refused(&app, secret, "post", path, Some(body), 403, "forbidden").await;
        }
        assert_audited(
            &app,
            name,
            &[
                "brand.grant_lifetime.denied",
                "details_type.upsert.denied",
                "tool.upsert.denied",
                "tool.remove.denied",
            ],
        )
        .await;
    }
    assert!(
        brand_settings(&app, "shop")
            .await
            .get("grant_ttl_days")
            .is_none()
    );

    // The limited owner: another brand and a missing one answer alike.
    let other = call(
        &app,
        &shop_owner,
        "post",
        "/brands/demo/grant-lifetime",
        Some(serde_json::json!({"days": 3})),
    )
    .await;
    let missing = call(
        &app,
        &shop_owner,
        "post",
        "/brands/nope/grant-lifetime",
        Some(serde_json::json!({"days": 3})),
    )
    .await;
    let other = error(other, 404, "not_found").await;
    assert_eq!(other, error(missing, 404, "not_found").await);
    assert!(
        brand_settings(&app, "demo")
            .await
            .get("grant_ttl_days")
            .is_none()
    );

    // Bad input: refused, nothing changed.
    let before = brand_settings(&app, "shop").await;
    for (path, body) in [
        (
            "/brands/shop/grant-lifetime",
            serde_json::json!({"days": 0}),
        ),
        (
            "/brands/shop/grant-lifetime",
            serde_json::json!({"days": 366}),
        ),
        (
            "/brands/shop/grant-lifetime",
            serde_json::json!({"days": "7"}),
        ),
        (
            "/brands/shop/details-types",
            serde_json::json!({"type_name": "has space", "declaration": {"scope": "orders:read", "fields": {}}}),
        ),
        (
            "/brands/shop/details-types",
            serde_json::json!({"type_name": "x", "declaration": {"scope": "orders:read",
                "description": "nul \u{0} here", "fields": {}}}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "t", "url": "http://shop.example/t"}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "t", "url": "https://10.0.0.1/t"}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "Bad Name", "url": "https://shop.example/t"}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "t", "url": "https://shop.example/t", "enforce": ["ids=order_id"]}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "t", "url": "https://shop.example/t", "scope": "orders:read",
                "enforce": ["ids=order_id"]}),
        ),
    ] {
        call_refused(
            &app,
            &owner,
            "post",
            path,
            Some(body.clone()),
            400,
            "invalid_request",
        )
        .await;
    }
    // Well formed, but naming a scope the brand does not offer: a conflict
    // with the brand as it is (409), not a malformed request.
    for (path, body) in [
        (
            "/brands/shop/details-types",
            serde_json::json!({"type_name": "x", "declaration": {"scope": "nope",
                "fields": {"ids": {"type": "string_array"}}}}),
        ),
        (
            "/brands/shop/tools",
            serde_json::json!({"name": "t", "url": "https://shop.example/t", "scope": "nope"}),
        ),
    ] {
        let body = call_refused(&app, &owner, "post", path, Some(body), 409, "conflict").await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("add it first"),
            "{body}"
        );
    }
    assert_eq!(brand_settings(&app, "shop").await, before);
    assert!(
        pact_db::merchant::list_tools(&app.db, &pact_tests::brand_id("shop"))
            .await
            .unwrap()
            .is_empty()
    );

    // The owner of the brand edits it.
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/grant-lifetime",
        Some(serde_json::json!({"days": 14})),
    )
    .await;
    assert_eq!(v["grant_lifetime_days"], 14);
    assert_eq!(v["grant_lifetime_is_default"], false);
    // A body that leaves the field out is refused, not read as "back to the
    // default": an empty POST must not undo the owner's choice (an
    // allowlisting brand opened to the Provider's policy).
    call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/admission",
        Some(serde_json::json!({"policy": "allowlist"})),
    )
    .await;
    let chosen = brand_settings(&app, "shop").await;
    for path in ["/brands/shop/grant-lifetime", "/brands/shop/admission"] {
        for body in [Some(serde_json::json!({})), None] {
            call_refused(
                &app,
                &shop_owner,
                "post",
                path,
                body,
                400,
                "invalid_request",
            )
            .await;
        }
    }
    assert_eq!(brand_settings(&app, "shop").await, chosen);
    assert_eq!(chosen["admission"], "allowlist");
    assert_eq!(chosen["grant_ttl_days"], 14);
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/details-types",
        Some(declaration.clone()),
    )
    .await;
    assert_eq!(v["details_types"]["order_view"]["scope"], "orders:read");
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/tools",
        Some(tool.clone()),
    )
    .await;
    assert_eq!(v["tools"][0]["name"], "get_order");
    // The rule lives on the tool, as written, where the gate reads it; the
    // type's declaration holds none.
    assert_eq!(
        v["tools"][0]["enforce"],
        serde_json::json!(["ids=order_id"])
    );
    assert!(
        v["details_types"]["order_view"].get("enforce").is_none(),
        "{v}"
    );
    // Its rules and summary can be set on their own (an imported tool's too).
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/tools/get_order/rules",
        Some(serde_json::json!({"enforce": ["order_view.ids=order_id"], "summary": "Show order {order_id}"})),
    )
    .await;
    assert_eq!(
        v["tools"][0]["enforce"],
        serde_json::json!(["order_view.ids=order_id"])
    );
    assert_eq!(v["tools"][0]["summary"], "Show order {order_id}");
    // A rule that reaches no field is refused, and so is removing a type a
    // rule needs.
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/tools/get_order/rules",
        Some(serde_json::json!({"enforce": ["nope=order_id"]})),
        400,
        "invalid_request",
    )
    .await;
    // Leaving the rules out is refused too: only `"enforce": []` lifts them.
    for body in [
        Some(serde_json::json!({})),
        Some(serde_json::json!({"summary": "Show it"})),
        None,
    ] {
        call_refused(
            &app,
            &shop_owner,
            "post",
            "/brands/shop/tools/get_order/rules",
            body,
            400,
            "invalid_request",
        )
        .await;
    }
    let tools = pact_db::merchant::list_tools(&app.db, &pact_tests::brand_id("shop"))
        .await
        .unwrap();
    assert_eq!(
        tools[0].enforce,
        serde_json::json!(["order_view.ids=order_id"])
    );
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/details-types/order_view/remove",
        None,
        400,
        "invalid_request",
    )
    .await;

    // Removing the tool removes its rules; removing a type that is not there is not_found.
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/tools/get_order/remove",
        None,
    )
    .await;
    assert_eq!(v["tools"], serde_json::json!([]));
    call_refused(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/tools/get_order/remove",
        None,
        404,
        "not_found",
    )
    .await;
    let v = call_ok(
        &app,
        &shop_owner,
        "post",
        "/brands/shop/details-types/order_view/remove",
        None,
    )
    .await;
    assert_eq!(v["details_types"], serde_json::json!({}));
    let v = call_ok(
        &app,
        &owner,
        "post",
        "/brands/shop/grant-lifetime",
        Some(serde_json::json!({"days": null})),
    )
    .await;
    assert_eq!(v["grant_lifetime_is_default"], true);

    assert_audited(
        &app,
        "shop-owner",
        &[
            "brand.grant_lifetime",
            "details_type.upsert",
            "tool.upsert",
            "tool.set_rules",
            "tool.remove",
            "details_type.remove",
        ],
    )
    .await;
}

/// The console's forms do the same for an owner of the brand; an operator's
/// POSTs are refused and audited, and bad input changes nothing.
#[tokio::test]
async fn the_console_edits_lifetime_types_and_tools_for_owners_only() {
    let app = app().await;
    for (id, d) in pact_server::agent::demo_tools::DEMO_SCOPES {
        pact_db::scopes::upsert(&app.db, &pact_tests::brand_id("shop"), id, d, false)
            .await
            .unwrap();
    }
    add_admin(&app, "shop@example.com", "owner", Some(&["shop"])).await;
    add_admin(&app, "ops@example.com", "operator", None).await;

    let ops = Browser::new(&app);
    sign_in(&app, &ops, "ops@example.com").await;
    let (_, html) = ops.get_html("/admin").await;
    let csrf = csrf_from(&html).unwrap();
    for (path, field) in [
        ("/admin/brands/shop/grant-lifetime", ("days", "3")),
        ("/admin/brands/shop/tools", ("name", "t")),
        ("/admin/brands/shop/details-types", ("type_name", "t")),
    ] {
        let res = ops.post(path, &[("csrf", &csrf), field]).await;
        assert_eq!(res.status(), 403, "{path}");
    }
    let actions = audit_actions(&app, "ops@example.com").await;
    assert!(actions.contains(&"brand.grant_lifetime.denied".to_owned()));
    assert!(actions.contains(&"tool.upsert.denied".to_owned()));

    let shop = Browser::new(&app);
    sign_in(&app, &shop, "shop@example.com").await;
    let (status, html) = shop.get_html("/admin/brands/shop").await;
    assert_eq!(status, 200);
    let csrf = csrf_from(&html).unwrap();
    // Another brand is not found; a bad lifetime is refused.
    let res = shop
        .post(
            "/admin/brands/demo/grant-lifetime",
            &[("csrf", &csrf), ("days", "3")],
        )
        .await;
    assert_eq!(res.status(), 404);
    let res = shop
        .post(
            "/admin/brands/shop/grant-lifetime",
            &[("csrf", &csrf), ("days", "400")],
        )
        .await;
    assert_eq!(res.status(), 400);
    // Without the CSRF token, nothing.
    let res = shop
        .post("/admin/brands/shop/grant-lifetime", &[("days", "3")])
        .await;
    assert_eq!(res.status(), 403);
    assert!(
        brand_settings(&app, "shop")
            .await
            .get("grant_ttl_days")
            .is_none()
    );

    let res = shop
        .post(
            "/admin/brands/shop/grant-lifetime",
            &[("csrf", &csrf), ("days", "7")],
        )
        .await;
    assert_eq!(res.status(), 303);
    let decl = r#"{"scope":"orders:read","description":"Orders {ids}","fields":{"ids":{"type":"string_array","required":true}}}"#;
    let res = shop
        .post(
            "/admin/brands/shop/details-types",
            &[
                ("csrf", &csrf),
                ("type_name", "order_view"),
                ("declaration", decl),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    let res = shop
        .post(
            "/admin/brands/shop/tools",
            &[
                ("csrf", &csrf),
                ("name", "get_order"),
                ("scope", "orders:read"),
                ("url", "https://shop.example/tools/get_order"),
                ("description", "One order"),
                ("enforce", "ids=order_id"),
                ("input_schema", ""),
            ],
        )
        .await;
    assert_eq!(res.status(), 303);
    let (_, html) = shop.get_html("/admin/brands/shop").await;
    assert!(html.contains("7 days"), "{html}");
    assert!(html.contains("Remove type order_view"));
    assert!(html.contains("Remove tool get_order"));
    assert!(html.contains("ids=order_id"));
    let res = shop
        .post(
            "/admin/brands/shop/tools/remove",
            &[("csrf", &csrf), ("name", "get_order")],
        )
        .await;
    assert_eq!(res.status(), 303);
    let res = shop
        .post(
            "/admin/brands/shop/details-types/remove",
            &[("csrf", &csrf), ("type_name", "order_view")],
        )
        .await;
    assert_eq!(res.status(), 303);
    let (_, html) = shop.get_html("/admin/brands/shop").await;
    assert!(!html.contains("Remove tool get_order"));
    assert!(!html.contains("Remove type order_view"));
    assert_audited(
        &app,
        "shop@example.com",
        &[
            "brand.grant_lifetime",
            "details_type.upsert",
            "tool.upsert",
            "tool.remove",
            "details_type.remove",
        ],
    )
    .await;
}
