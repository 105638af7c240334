//! The admin API (`/admin/api/v1`): credentials, the one error shape, every
//! documented route, each role, brand-limited credentials (objects outside
//! them answer exactly as missing ones), revocation reaching another node,
//! pagination, and the audit trail of every request.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_server::Config;
use pact_tests::TestApp;
use pact_tests::pages::add_user;
use reqwest::Response;
use serde_json::{Value, json};
use uuid::Uuid;

const ISS: &str = "https://pa.example";
const SUB: &str = "pa-user-1";
const API: &str = "/admin/api/v1";

/// A credential made as `pactd admin credential add` makes it: its secret.
pub(crate) async fn credential(
    app: &TestApp,
    name: &str,
    role: &str,
    brands: Option<&[&str]>,
) -> String {
    let (secret, hash) = pact_server::admin::credential::new_secret();
    let brands: Option<Vec<String>> = brands.map(|b| b.iter().map(|s| (*s).to_owned()).collect());
    pact_db::admins::insert_credential(
        &app.db,
        Uuid::new_v4(),
        name,
        pact_db::admins::Role::parse(role).unwrap(),
        brands.as_deref(),
        &hash,
    )
    .await
    .unwrap();
    secret
}

pub(crate) async fn call(
    app: &TestApp,
    secret: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Response {
    let url = format!("{}{API}{path}", app.base_url);
    let mut req = match method {
        "get" => app.http.get(url),
        _ => app.http.post(url),
    };
    req = req.bearer_auth(secret);
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

pub(crate) async fn ok(res: Response) -> Value {
    let status = res.status();
    let v: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{v}");
    v
}

/// Asserts the API's error shape with this status and code; returns the body.
pub(crate) async fn error(res: Response, status: u16, code: &str) -> Value {
    assert_eq!(res.status(), status, "{}", res.url());
    assert_eq!(
        res.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/json")
    );
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    v
}

/// [`call`], answered 200: the body.
pub(crate) async fn call_ok(
    app: &TestApp,
    secret: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Value {
    ok(call(app, secret, method, path, body).await).await
}

/// [`call`], refused in the API's [`error`] shape with this status and code.
pub(crate) async fn call_refused(
    app: &TestApp,
    secret: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
    status: u16,
    code: &str,
) -> Value {
    error(call(app, secret, method, path, body).await, status, code).await
}

/// Asserts that each of `actions` is in the audit log under `actor`.
pub(crate) async fn assert_audited(app: &TestApp, actor: &str, actions: &[&str]) {
    let logged = audit_actions(app, actor).await;
    for a in actions {
        assert!(logged.iter().any(|x| x == a), "{a} not in {logged:?}");
    }
}

fn grant_of(tokens: &Value) -> Uuid {
    let token = tokens["access_token"].as_str().unwrap();
    let claims = URL_SAFE_NO_PAD
        .decode(token.split('.').nth(1).unwrap())
        .unwrap();
    let v: Value = serde_json::from_slice(&claims).unwrap();
    v["grant_id"].as_str().unwrap().parse().unwrap()
}

/// The API's OpenAPI document as a node serves it.
async fn openapi_document(app: &TestApp) -> Value {
    app.http
        .get(format!("{}{API}/openapi.json", app.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A validator of the document's schema `reference`, its references
/// resolved in the document's own components (`formats`: check `format` too).
fn schema_validator(doc: &Value, reference: &str, formats: bool) -> jsonschema::Validator {
    let root = json!({"$ref": reference, "components": doc["components"].clone()});
    jsonschema::options()
        .should_validate_formats(formats)
        .build(&root)
        .unwrap()
}

pub(crate) async fn audit_actions(app: &TestApp, actor: &str) -> Vec<String> {
    sqlx::query_scalar("select action from audit_log where actor = $1 order by id")
        .bind(actor)
        .fetch_all(&app.db)
        .await
        .unwrap()
}

fn same_public_url(c: &mut Config) {
    c.public_url = "http://pactd.test".into();
    c.audience = "http://pactd.test/a2a".into();
    c.delegation.poll_interval_secs = 1;
}

/// An app whose demo brand offers delegation, with a second brand `shop`.
async fn app() -> TestApp {
    let app = TestApp::spawn_with(same_public_url).await;
    app.enable_demo_delegation().await;
    app.add_brand("shop", "Shop").await;
    for (id, d) in pact_server::agent::demo_tools::DEMO_SCOPES {
        pact_db::scopes::upsert(&app.db, &pact_tests::brand_id("shop"), id, d, false)
            .await
            .unwrap();
    }
    app
}

#[tokio::test]
async fn only_a_live_credential_is_let_in_and_every_refusal_has_one_shape() {
    let app = app().await;
    let secret = credential(&app, "ci", "viewer", None).await;

    let res = app
        .http
        .get(format!("{}{API}/me", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer realm="pactd-admin""#)
    );
    error(res, 401, "unauthenticated").await;
    for wrong in [
        "nope",
        "pactd_admin_",
        &format!("{secret}x"),
        &secret[..secret.len() - 1],
    ] {
        call_refused(&app, wrong, "get", "/me", None, 401, "unauthenticated").await;
    }
    let me = call_ok(&app, &secret, "get", "/me", None).await;
    assert_eq!(
        me,
        json!({"kind": "credential", "name": "ci", "role": "viewer", "brands": null})
    );
    let last_used: Option<time::OffsetDateTime> =
        sqlx::query_scalar("select last_used_at from admin_credentials where name = 'ci'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(last_used.is_some());

    // Unknown paths under the API, bad ids, bad queries and bodies.
    for (path, status, code) in [
        ("/nothing-here", 404, "not_found"),
        ("/grants/not-a-uuid", 404, "not_found"),
        ("/grants?evil=1", 400, "invalid_request"),
        ("/grants?state=gone", 400, "invalid_request"),
        ("/grants?limit=0", 400, "invalid_request"),
        ("/grants?cursor=zzz", 400, "invalid_cursor"),
        ("/audit?cursor=-1", 400, "invalid_cursor"),
        ("/customers", 400, "invalid_request"),
    ] {
        call_refused(&app, &secret, "get", path, None, status, code).await;
    }

    // Revoked: refused from the next request on.
    pact_db::admins::revoke_credential(&app.db, "ci")
        .await
        .unwrap();
    call_refused(&app, &secret, "get", "/me", None, 401, "unauthenticated").await;
}

/// Every operation in the OpenAPI document answers as documented (200 with
/// the documented fields) for an owner, and the document lists exactly the
/// operations this test calls.
#[tokio::test]
async fn every_documented_route_exists_and_answers() {
    let app = app().await;
    let owner = credential(&app, "root", "owner", None).await;
    credential(&app, "spare", "viewer", None).await;
    let pa = app.registered_pa(ISS).await;
    let grant = grant_of(
        &app.node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
            .await,
    );
    let user = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    // An agent the open policy let in (PACT §3.1), for the sightings list and forget.
    pact_db::agents::insert_admitted(
        &app.db,
        "https://knock.example",
        "https://knock.example/jwks.json",
        "knock.example",
        pact_db::agents::Claimed::default(),
        app.clock.now(),
    )
    .await
    .unwrap();

    // A trusted registry whose signed list names one agent (PACT §3.1).
    let registry_key = pact_jose::ProviderKey::generate().unwrap();
    let now = app.clock.now().unix_timestamp();
    let list = pact_jose::sign_registry_list(
        &registry_key,
        &pact_jose::RegistryList {
            iat: now - 10,
            exp: now + 3600,
            agents: vec![pact_jose::ListedAgent {
                issuer: "https://listed.example".into(),
                jwks_uri: "https://listed.example/jwks.json".into(),
                name: "Listed".into(),
                logo_uri: None,
            }],
        },
    )
    .unwrap();
    let list_base = pact_tests::held::serve(axum::Router::new().route(
        "/agents.jwt",
        axum::routing::get(move || {
            let list = list.clone();
            async move { list }
        }),
    ))
    .await;

    let doc = openapi_document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], "http://pactd.test/admin/api/v1");

    let calls: Vec<(&str, String, Option<Value>, &str)> = vec![
        ("get", "/me".into(), None, "getMe"),
        ("get", "/grants".into(), None, "listGrants"),
        ("get", format!("/grants/{grant}"), None, "getGrant"),
        (
            "get",
            format!("/grants/{grant}/receipts"),
            None,
            "exportGrantReceipts",
        ),
        (
            "get",
            format!("/customers?q={}", user.email),
            None,
            "findCustomers",
        ),
        (
            "get",
            format!("/customers/{}", user.id),
            None,
            "getCustomer",
        ),
        (
            "post",
            format!("/customers/{}/unlock", user.id),
            None,
            "unlockCustomer",
        ),
        (
            "post",
            format!("/customers/{}/sign-out", user.id),
            None,
            "signOutCustomer",
        ),
        (
            "post",
            format!("/customers/{}/reset-second-factors", user.id),
            None,
            "resetCustomerSecondFactors",
        ),
        (
            "post",
            format!("/customers/{}/disable", user.id),
            None,
            "disableCustomer",
        ),
        (
            "post",
            format!("/customers/{}/enable", user.id),
            None,
            "enableCustomer",
        ),
        ("get", "/agents".into(), None, "listAgents"),
        (
            "post",
            "/agents".into(),
            Some(
                json!({"issuer": "https://new.example", "jwks_uri": "https://new.example/jwks.json"}),
            ),
            "registerAgent",
        ),
        (
            "post",
            "/agents/disable".into(),
            Some(json!({"issuer": "https://new.example", "reason": "test"})),
            "disableAgent",
        ),
        (
            "post",
            "/agents/enable".into(),
            Some(json!({"issuer": "https://new.example"})),
            "enableAgent",
        ),
        ("get", "/agents/seen".into(), None, "listSeenAgents"),
        (
            "post",
            "/agents/verify".into(),
            Some(json!({"issuer": "https://new.example"})),
            "verifyAgent",
        ),
        (
            "post",
            "/agents/forget".into(),
            Some(json!({"issuer": "https://knock.example"})),
            "forgetAgent",
        ),
        (
            "post",
            format!("/grants/{grant}/revoke"),
            Some(json!({"reason": "test"})),
            "revokeGrant",
        ),
        (
            "post",
            format!("/customers/{}/revoke-grants", user.id),
            None,
            "revokeCustomerGrants",
        ),
        ("get", "/admins".into(), None, "listAdmins"),
        ("get", "/credentials".into(), None, "listCredentials"),
        (
            "post",
            "/credentials/spare/revoke".into(),
            None,
            "revokeCredential",
        ),
        ("get", "/keys".into(), None, "listKeys"),
        ("post", "/keys/rotate".into(), None, "rotateKey"),
        ("get", "/nodes".into(), None, "listNodes"),
        ("get", "/brands".into(), None, "listBrands"),
        ("get", "/brands/shop".into(), None, "getBrand"),
        (
            "post",
            "/brands/shop/scopes".into(),
            Some(json!({"scope_id": "returns:create", "description": "Start a return"})),
            "upsertBrandScope",
        ),
        (
            "post",
            "/brands/shop/scopes/returns:create/remove".into(),
            None,
            "removeBrandScope",
        ),
        (
            "post",
            "/brands/shop/card".into(),
            Some(json!({"description": "Tea, shipped"})),
            "setBrandCardText",
        ),
        (
            "post",
            "/brands/shop/grant-lifetime".into(),
            Some(json!({"days": 14})),
            "setBrandGrantLifetime",
        ),
        (
            "post",
            "/brands/shop/admission".into(),
            Some(json!({"policy": "open"})),
            "setBrandAdmission",
        ),
        (
            "post",
            "/brands/shop/details-types".into(),
            Some(json!({"type_name": "order_view", "declaration": {
                "scope": "orders:read", "description": "Orders {ids}",
                "fields": {"ids": {"type": "string_array", "required": true}}}})),
            "upsertBrandDetailsType",
        ),
        (
            "post",
            "/brands/shop/tools".into(),
            Some(json!({"name": "get_order", "scope": "orders:read",
                "url": "https://shop.example/tools/get_order", "enforce": ["ids=order_id"]})),
            "upsertBrandTool",
        ),
        (
            "post",
            "/brands/shop/tools/get_order/rules".into(),
            Some(json!({"enforce": ["ids=order_id"], "summary": "Show order {order_id}"})),
            "setBrandToolRules",
        ),
        (
            "post",
            "/brands/shop/tools/get_order/remove".into(),
            None,
            "removeBrandTool",
        ),
        (
            "post",
            "/brands/shop/details-types/order_view/remove".into(),
            None,
            "removeBrandDetailsType",
        ),
        (
            "post",
            "/registries".into(),
            Some(
                json!({"name": "trusted", "url": format!("{list_base}/agents.jwt"),
                "keys": registry_key.public_jwk()}),
            ),
            "addRegistry",
        ),
        ("get", "/registries".into(), None, "listRegistries"),
        (
            "post",
            "/registries/trusted/refresh".into(),
            None,
            "refreshRegistry",
        ),
        (
            "post",
            "/registries/trusted/remove".into(),
            None,
            "removeRegistry",
        ),
        (
            "post",
            "/agents/block-host".into(),
            Some(json!({"host": "spam.example", "reason": "spam"})),
            "blockHost",
        ),
        ("get", "/blocked-hosts".into(), None, "listBlockedHosts"),
        (
            "post",
            "/agents/unblock-host".into(),
            Some(json!({"host": "spam.example"})),
            "unblockHost",
        ),
        ("get", "/audit".into(), None, "listAudit"),
        // Last: the account is gone after it.
        (
            "post",
            format!("/customers/{}/remove", user.id),
            None,
            "removeCustomer",
        ),
    ];
    let mut documented: Vec<String> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            documented.push(op["operationId"].as_str().unwrap().to_owned());
            assert!(
                calls.iter().any(|(m, p, _, id)| m == method
                    && *id == op["operationId"]
                    && p.split('?').next().unwrap().split('/').count() == path.split('/').count()),
                "{method} {path} is documented but not exercised here"
            );
        }
    }
    assert_eq!(documented.len(), calls.len(), "{documented:?}");
    for (method, path, body, id) in calls {
        // Issue 28, finding 3: every operation of the one table leaves an
        // entry under the credential's name, with its address.
        let before: i64 = sqlx::query_scalar("select coalesce(max(id), 0) from audit_log")
            .fetch_one(&app.db)
            .await
            .unwrap();
        let v = call_ok(&app, &owner, method, &path, body).await;
        let entries: Vec<(String, Option<String>)> = sqlx::query_as(
            "select actor, client_addr from audit_log where id > $1 and actor_kind = 'credential'",
        )
        .bind(before)
        .fetch_all(&app.db)
        .await
        .unwrap();
        assert!(
            entries
                .iter()
                .any(|(actor, from)| actor == "root" && from.is_some()),
            "{method} {path} ({id}) left no audit entry"
        );
        // The documented required fields are present.
        let (_, item) = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, item)| {
                item.as_object()
                    .unwrap()
                    .values()
                    .any(|o| o["operationId"] == id)
            })
            .unwrap();
        let op = item
            .as_object()
            .unwrap()
            .values()
            .find(|o| o["operationId"] == id)
            .unwrap();
        let reference = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap();
        // The answer is one the document describes: checked whole against
        // the operation's schema (formats too), its references resolved in
        // the document's own components. The schemas of the answers are
        // derived from the handlers' types, so this checks the derivation.
        let validator = schema_validator(&doc, reference, true);
        let problems: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(
            problems.is_empty(),
            "{id}: the answer does not match {reference}: {problems:?}\n{v}"
        );
        // The documented required fields are present (on the schema itself
        // or, for a flattened type, on each part of its allOf).
        let schema = &doc["components"]["schemas"][reference.rsplit('/').next().unwrap()];
        let schema = schema.get("items").unwrap_or(schema);
        let answers = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
        assert!(
            schema["required"].is_array() || schema["allOf"].is_array(),
            "{id}: {reference} names no required field"
        );
        for v in &answers {
            for required in std::iter::once(schema)
                .chain(schema["allOf"].as_array().into_iter().flatten())
                .filter_map(|s| s["required"].as_array())
                .flatten()
            {
                let field = required.as_str().unwrap();
                assert!(v.get(field).is_some(), "{id}: no {field} in {v}");
            }
        }
    }
    // Every request above is in the audit log under the credential's name.
    assert_audited(
        &app,
        "root",
        &[
            "grant.list",
            "grant.read",
            "grant.revoke",
            "customer.unlock",
            "agent.register",
            "agent.disable",
            "audit.list",
        ],
    )
    .await;
    // A registry's refresh is recorded with what it did, after it did it.
    let refreshed: Value =
        sqlx::query_scalar("select detail from audit_log where action = 'registry.refresh'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(refreshed["outcome"], "applied", "{refreshed}");
    assert!(refreshed["result"]["listed"].is_number(), "{refreshed}");
}

/// Viewer reads; operator also revokes and disables; owner also registers.
/// A refusal is 403 before any object is looked at, and is itself audited.
#[tokio::test]
async fn each_role_may_do_what_it_should_and_no_more() {
    let app = app().await;
    let viewer = credential(&app, "desk", "viewer", None).await;
    let operator = credential(&app, "sec", "operator", None).await;
    let pa = app.registered_pa(ISS).await;
    let grant = grant_of(
        &app.node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
            .await,
    );
    let user = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;

    call_ok(&app, &viewer, "get", &format!("/grants/{grant}"), None).await;
    for (path, body) in [
        (format!("/grants/{grant}/revoke"), None),
        (format!("/grants/{}/revoke", Uuid::new_v4()), None),
        (format!("/customers/{}/unlock", user.id), None),
        (format!("/customers/{}/reset-second-factors", user.id), None),
        (format!("/customers/{}/sign-out", user.id), None),
        (format!("/customers/{}/revoke-grants", user.id), None),
        (format!("/customers/{}/disable", user.id), None),
        (format!("/customers/{}/enable", user.id), None),
        (format!("/customers/{}/remove", user.id), None),
        (
            "/agents/disable".to_owned(),
            Some(json!({"issuer": ISS, "reason": "x"})),
        ),
        // The role is checked before the body is read: 403, not 400.
        ("/agents/disable".to_owned(), Some(json!({}))),
        ("/agents/enable".to_owned(), Some(json!({}))),
        (
            "/agents".to_owned(),
            Some(json!({"issuer": "https://x.example", "jwks_uri": "https://x.example/j"})),
        ),
    ] {
        call_refused(&app, &viewer, "post", &path, body, 403, "forbidden").await;
    }
    let g = pact_db::grants::find(&app.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert!(g.revoked_at.is_none(), "a viewer changed nothing");
    assert!(
        audit_actions(&app, "desk")
            .await
            .iter()
            .any(|a| a == "grant.revoke.denied")
    );

    for path in ["/admins", "/credentials"] {
        call_refused(&app, &operator, "get", path, None, 403, "forbidden").await;
    }
    call_refused(
        &app,
        &operator,
        "post",
        "/credentials/desk/revoke",
        None,
        403,
        "forbidden",
    )
    .await;
    call_refused(
        &app,
        &operator,
        "post",
        "/agents",
        Some(json!({"issuer": "https://x.example", "jwks_uri": "https://x.example/j"})),
        403,
        "forbidden",
    )
    .await;
    // Erasing a customer's account is the owner's call.
    call_refused(
        &app,
        &operator,
        "post",
        &format!("/customers/{}/remove", user.id),
        None,
        403,
        "forbidden",
    )
    .await;
    assert!(
        pact_db::users::find_by_email(&app.db, &pact_tests::brand_id("demo"), "ann@example.com")
            .await
            .unwrap()
            .is_some()
    );
    // A reason the customer will read holds no hidden or direction-changing
    // character: refused, and the grant is untouched.
    for hidden in ["refund\u{202E}dellac", "ok\u{200B}"] {
        call_refused(
            &app,
            &operator,
            "post",
            &format!("/grants/{grant}/revoke"),
            Some(json!({ "reason": hidden })),
            400,
            "invalid_request",
        )
        .await;
    }
    let v = call_ok(
        &app,
        &operator,
        "post",
        &format!("/grants/{grant}/revoke"),
        Some(json!({"reason": "customer called"})),
    )
    .await;
    assert_eq!(v, json!({"id": grant, "revoked": true}));
    call_refused(
        &app,
        &operator,
        "post",
        &format!("/grants/{grant}/revoke"),
        None,
        409,
        "already_revoked",
    )
    .await;
    let g = pact_db::grants::find(&app.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        g.revoked_reason.as_deref(),
        Some("revoked by an administrator: customer called")
    );
    let entry: (String, String, Option<String>, Value) = sqlx::query_as(
        "select actor_kind, action, client_addr, detail from audit_log where actor = 'sec' and action = 'grant.revoke'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(entry.0, "credential");
    assert_eq!(entry.2.as_deref(), Some("127.0.0.1"));
    assert_eq!(entry.3["reason"], "customer called");

    // Disabling needs a reason, names how many grants it revoked.
    let second = grant_of(
        &app.node_connect("demo", &pa, "pa-user-2", "bob", &["orders:read"], None)
            .await,
    );
    call_refused(
        &app,
        &operator,
        "post",
        "/agents/disable",
        Some(json!({"issuer": ISS})),
        400,
        "invalid_request",
    )
    .await;
    call_refused(
        &app,
        &operator,
        "post",
        "/agents/disable",
        Some(json!({"issuer": "https://unknown.example", "reason": "x"})),
        404,
        "not_found",
    )
    .await;
    let v = call_ok(
        &app,
        &operator,
        "post",
        "/agents/disable",
        Some(json!({"issuer": ISS, "reason": "compromised"})),
    )
    .await;
    assert_eq!(
        v,
        json!({"issuer": ISS, "enabled": false, "revoked_grants": 1})
    );
    assert!(
        pact_db::grants::find(&app.db, second.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_some()
    );
    assert!(
        !pact_db::agents::find(&app.db, ISS)
            .await
            .unwrap()
            .unwrap()
            .enabled
    );
}

/// A credential limited to `shop` sees only shop's grants, customers and
/// audit entries; anything at `demo` answers exactly like a missing object;
/// platform-wide changes are refused.
#[tokio::test]
async fn a_brand_limited_credential_cannot_see_or_touch_other_brands() {
    let app = app().await;
    let limited = credential(&app, "shop-desk", "operator", Some(&["shop"])).await;
    let owner = credential(&app, "root", "owner", None).await;
    let pa = app.registered_pa(ISS).await;
    let at_demo = grant_of(
        &app.node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
            .await,
    );
    let at_shop = grant_of(
        &app.node_connect("shop", &pa, SUB, "alice", &["orders:read"], None)
            .await,
    );
    let demo_user = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    let shop_user = add_user(&app, "shop", "ann@example.com", "correct horse battery").await;

    let page = call_ok(&app, &limited, "get", "/grants", None).await;
    let ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![at_shop.to_string()]);
    let page = call_ok(&app, &limited, "get", "/grants?brand=demo", None).await;
    assert_eq!(page["items"], json!([]));

    let missing = call_refused(
        &app,
        &limited,
        "get",
        &format!("/grants/{}", Uuid::new_v4()),
        None,
        404,
        "not_found",
    )
    .await;
    let hidden = call_refused(
        &app,
        &limited,
        "get",
        &format!("/grants/{at_demo}"),
        None,
        404,
        "not_found",
    )
    .await;
    assert_eq!(missing, hidden, "no existence leak");
    call_refused(
        &app,
        &limited,
        "post",
        &format!("/grants/{at_demo}/revoke"),
        None,
        404,
        "not_found",
    )
    .await;
    call_refused(
        &app,
        &limited,
        "get",
        &format!("/customers/{}", demo_user.id),
        None,
        404,
        "not_found",
    )
    .await;
    call_refused(
        &app,
        &limited,
        "post",
        &format!("/customers/{}/revoke-grants", demo_user.id),
        None,
        404,
        "not_found",
    )
    .await;
    let found = call_ok(&app, &limited, "get", "/customers?q=ann@example.com", None).await;
    assert_eq!(found["items"].as_array().unwrap().len(), 1);
    assert_eq!(found["items"][0]["id"], json!(shop_user.id));
    call_refused(
        &app,
        &limited,
        "post",
        "/agents/disable",
        Some(json!({"issuer": ISS, "reason": "x"})),
        403,
        "forbidden",
    )
    .await;
    assert!(
        pact_db::grants::find(&app.db, at_demo.into())
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );

    call_ok(
        &app,
        &limited,
        "post",
        &format!("/grants/{at_shop}/revoke"),
        None,
    )
    .await;
    call_ok(&app, &owner, "get", &format!("/grants/{at_demo}"), None).await;
    let audit = call_ok(&app, &limited, "get", "/audit", None).await;
    for e in audit["items"].as_array().unwrap() {
        assert_eq!(e["brand"], "shop", "{e}");
    }
    assert!(
        audit["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "grant.revoke")
    );
}

/// Revocation through the API reaches a second node through the same
/// `pactd_revocations` notification as every other revocation: the agent's
/// next delegated call is refused there.
#[tokio::test]
async fn a_revocation_through_the_api_is_refused_on_another_node() {
    let a = app().await;
    let b = a.spawn_peer(same_public_url).await;
    let operator = credential(&a, "sec", "operator", None).await;
    let pa = a.registered_pa(ISS).await;
    let tokens = a
        .node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
        .await;
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    let grant = grant_of(&tokens);
    let pa_jwt = pa.token(SUB, "http://pactd.test/a2a");
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&format!("Bearer {token}")),
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    // The grant's receipt is there, and its signature and chain verify.
    let detail = call_ok(&a, &operator, "get", &format!("/grants/{grant}"), None).await;
    assert_eq!(detail["receipts"].as_array().unwrap().len(), 1);
    assert_eq!(detail["receipts"][0]["message_id"], "m1");
    assert_eq!(
        detail["receipt_chain"],
        json!({"verified": true, "problems": []})
    );

    call_ok(
        &a,
        &operator,
        "post",
        &format!("/grants/{grant}/revoke"),
        None,
    )
    .await;
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&format!("Bearer {token}")),
            "m2",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 401);
    assert!(
        b.hears_revocation(grant).await,
        "node B did not hear of the revocation"
    );
    b.stop().await;
}

/// Disabling a customer's account ends every agent's access at once, on
/// another node too; enabling it lets the customer sign in again but gives no
/// agent its access back; removing it (owner only) erases the account and
/// keeps the revoked grant as evidence. Each is one audited action, the same
/// the console and the command line take.
#[tokio::test]
async fn disabling_a_customer_cuts_off_their_agents_on_every_node_and_removing_erases_them() {
    let a = app().await;
    let b = a.spawn_peer(same_public_url).await;
    let operator = credential(&a, "sec", "operator", None).await;
    let owner = credential(&a, "boss", "owner", None).await;
    let pa = a.registered_pa(ISS).await;
    let tokens = a
        .node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
        .await;
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    let grant = grant_of(&tokens);
    // The account whose subject the grant names.
    let hash = pact_server::accounts::password::hash("correct horse battery").unwrap();
    let user = pact_db::users::insert(
        &a.db,
        Uuid::new_v4(),
        &pact_tests::brand_id("demo"),
        "alice@example.com",
        Some("alice"),
        &hash,
    )
    .await
    .unwrap();
    let pa_jwt = pa.token(SUB, "http://pactd.test/a2a");
    let bearer = format!("Bearer {token}");
    let send =
        |id: &'static str| b.node_send("demo", &pa_jwt, Some(&bearer), id, "show my orders", None);
    assert_eq!(send("m1").await.status(), 200);

    let v = call_ok(
        &a,
        &operator,
        "post",
        &format!("/customers/{}/disable", user.id),
        None,
    )
    .await;
    assert_eq!(
        v,
        json!({"id": user.id, "disabled": true, "signed_out": true, "revoked_grants": 1})
    );
    assert_eq!(send("m2").await.status(), 401);
    assert!(b.hears_revocation(grant).await, "node B did not hear of it");
    let g = pact_db::grants::find(&a.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert!(g.revoked_at.is_some());
    let stored =
        pact_db::users::find_by_email(&a.db, &pact_tests::brand_id("demo"), "alice@example.com")
            .await
            .unwrap()
            .unwrap();
    assert!(stored.disabled_at.is_some());

    let v = call_ok(
        &a,
        &operator,
        "post",
        &format!("/customers/{}/enable", user.id),
        None,
    )
    .await;
    assert_eq!(v, json!({"id": user.id, "disabled": false}));
    assert_eq!(send("m3").await.status(), 401, "enabling revives no grant");

    // An operator may not erase the account; the owner may.
    call_refused(
        &a,
        &operator,
        "post",
        &format!("/customers/{}/remove", user.id),
        None,
        403,
        "forbidden",
    )
    .await;
    let v = call_ok(
        &a,
        &owner,
        "post",
        &format!("/customers/{}/remove", user.id),
        None,
    )
    .await;
    assert_eq!(
        v,
        json!({"id": user.id, "removed": true, "revoked_grants": 0})
    );
    assert!(
        pact_db::users::find_by_email(&a.db, &pact_tests::brand_id("demo"), "alice@example.com")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        pact_db::grants::find(&a.db, grant.into())
            .await
            .unwrap()
            .is_some(),
        "the revoked grant stays as evidence"
    );
    call_refused(
        &a,
        &owner,
        "post",
        &format!("/customers/{}/remove", user.id),
        None,
        404,
        "not_found",
    )
    .await;
    assert_audited(
        &a,
        "sec",
        &[
            "customer.disable",
            "customer.enable",
            "customer.remove.denied",
        ],
    )
    .await;
    assert_audited(&a, "boss", &["customer.remove"]).await;
    b.stop().await;
}

/// Cursor pagination walks every grant once, newest first; filters combine.
#[tokio::test]
async fn grant_pages_follow_cursors_and_filters_combine() {
    let app = app().await;
    let viewer = credential(&app, "desk", "viewer", None).await;
    let pa = app.registered_pa(ISS).await;
    let mut made = Vec::new();
    for n in 0..3 {
        made.push(grant_of(
            &app.node_connect(
                "demo",
                &pa,
                &format!("pa-user-{n}"),
                &format!("user{n}"),
                &["orders:read"],
                None,
            )
            .await,
        ));
    }
    let mut seen = Vec::new();
    let mut path = "/grants?limit=2".to_owned();
    loop {
        let page = call_ok(&app, &viewer, "get", &path, None).await;
        for g in page["items"].as_array().unwrap() {
            seen.push(g["id"].as_str().unwrap().parse::<Uuid>().unwrap());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/grants?limit=2&cursor={c}"),
            None => break,
        }
    }
    made.reverse();
    assert_eq!(seen, made);

    let by_customer = call_ok(
        &app,
        &viewer,
        "get",
        "/grants?customer=user1&state=active",
        None,
    )
    .await;
    assert_eq!(by_customer["items"].as_array().unwrap().len(), 1);
    assert_eq!(by_customer["items"][0]["customer"], "user1");
    // A search by email is recorded by the subjects it named, never the
    // email (the audit log is append-only and outlives the account); a
    // brand the caller cannot see is not named either.
    let shop_desk = credential(&app, "shop-desk", "viewer", Some(&["shop"])).await;
    call_ok(
        &app,
        &viewer,
        "get",
        "/grants?customer=ann%40example.com",
        None,
    )
    .await;
    call_ok(
        &app,
        &shop_desk,
        "get",
        "/grants?brand=demo&customer=user1",
        None,
    )
    .await;
    let details: Vec<(Option<String>, Value)> =
        sqlx::query_as("select brand_id, detail from audit_log where action = 'grant.list'")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert!(
        details.iter().all(|(_, d)| !d.to_string().contains('@')),
        "{details:?}"
    );
    let by_shop_desk: Vec<Option<String>> = sqlx::query_scalar(
        "select brand_id from audit_log where action = 'grant.list' and actor = 'shop-desk'",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(by_shop_desk, vec![None]);
    let revoked = call_ok(
        &app,
        &viewer,
        "get",
        &format!("/grants?agent={}&state=revoked", pa_enc(ISS)),
        None,
    )
    .await;
    assert_eq!(revoked["items"], json!([]));
    // By the agent's name, as staff know it (without case), the same grants
    // as by its issuer; a name nobody has is a 400, not an empty list.
    let by_issuer = call_ok(
        &app,
        &viewer,
        "get",
        &format!("/grants?agent={}", pa_enc(ISS)),
        None,
    )
    .await;
    let by_name = call_ok(&app, &viewer, "get", "/grants?agent=test%20pa", None).await;
    assert!(!by_name["items"].as_array().unwrap().is_empty());
    assert_eq!(by_name["items"], by_issuer["items"]);
    let nobody = call_refused(
        &app,
        &viewer,
        "get",
        "/grants?agent=Pal%20Assistant",
        None,
        400,
        "invalid_request",
    )
    .await;
    assert!(
        nobody.to_string().contains("no registered agent"),
        "{nobody}"
    );
}

fn pa_enc(s: &str) -> String {
    pact_tests::pages::enc(s)
}

/// Customers' own revocations (account page) and agents' (RFC 7009) appear
/// in the audit log, whichever path made them; the customer operations work
/// and are recorded.
#[tokio::test]
async fn self_revocations_and_customer_operations_are_in_the_audit_log() {
    let app = app().await;
    let operator = credential(&app, "sec", "operator", None).await;
    let pa = app.registered_pa(ISS).await;
    let g1 = grant_of(
        &app.node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
            .await,
    );
    let g2 = grant_of(
        &app.node_connect("demo", &pa, "pa-user-2", "bob", &["orders:read"], None)
            .await,
    );
    pact_db::grants::revoke(&app.db, g1.into(), pact_db::grants::reason::BY_USER)
        .await
        .unwrap();
    pact_db::grants::revoke(&app.db, g2.into(), pact_db::grants::reason::BY_AGENT)
        .await
        .unwrap();
    let page = call_ok(&app, &operator, "get", "/audit?action=grant.", None).await;
    let items = page["items"].as_array().unwrap();
    let by_customer = items
        .iter()
        .find(|e| e["target"] == json!(g1.to_string()))
        .unwrap();
    assert_eq!(by_customer["actor_kind"], "customer");
    assert_eq!(by_customer["actor"], "alice");
    assert_eq!(by_customer["brand"], "demo");
    let by_agent = items
        .iter()
        .find(|e| e["target"] == json!(g2.to_string()))
        .unwrap();
    assert_eq!(by_agent["actor_kind"], "agent");
    assert_eq!(by_agent["actor"], ISS);

    let user = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    pact_db::users::record_failure(
        &app.db,
        user.id,
        9,
        Some(time::OffsetDateTime::now_utc() + time::Duration::minutes(5)),
    )
    .await
    .unwrap();
    let v = call_ok(
        &app,
        &operator,
        "get",
        &format!("/customers/{}", user.id),
        None,
    )
    .await;
    assert!(v["locked_until"].is_string());
    call_ok(
        &app,
        &operator,
        "post",
        &format!("/customers/{}/unlock", user.id),
        None,
    )
    .await;
    let v = call_ok(
        &app,
        &operator,
        "get",
        &format!("/customers/{}", user.id),
        None,
    )
    .await;
    assert_eq!(v["locked_until"], Value::Null);
    let v = call_ok(
        &app,
        &operator,
        "post",
        &format!("/customers/{}/sign-out", user.id),
        None,
    )
    .await;
    assert_eq!(v["sessions_ended"], 0);
    let page = call_ok(
        &app,
        &operator,
        "get",
        "/audit?actor=sec&action=customer.unlock",
        None,
    )
    .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["target"], json!(user.id.to_string()));
    // Audit pages follow their cursor.
    let first = call_ok(&app, &operator, "get", "/audit?limit=1", None).await;
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = call_ok(
        &app,
        &operator,
        "get",
        &format!("/audit?limit=1&cursor={cursor}"),
        None,
    )
    .await;
    assert!(second["items"][0]["id"].as_i64() < first["items"][0]["id"].as_i64());
}

/// PACT §5.6 for staff: a grant's receipts download as a file in the shape a
/// personal agent keeps them, which checks out offline with the published
/// keys (signatures and the `prev` chain) and which `pactd receipts verify
/// --held` reads; a brand-limited credential cannot export another brand's.
#[tokio::test]
async fn a_grants_receipts_download_as_a_file_that_verifies_without_the_server() {
    let app = app().await;
    let viewer = credential(&app, "auditor", "viewer", None).await;
    let shop_only = credential(&app, "shop-desk", "viewer", Some(&["shop"])).await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app
        .node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
        .await;
    let grant = grant_of(&tokens);
    let access = tokens["access_token"].as_str().unwrap();
    let mut context: Option<String> = None;
    for i in 0..3 {
        let res = app
            .node_send(
                "demo",
                &pa.token(SUB, app.audience()),
                Some(&format!("Bearer {access}")),
                &format!("m{i}"),
                "my orders",
                context.as_deref(),
            )
            .await;
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        context = body["message"]["contextId"]
            .as_str()
            .or_else(|| body["task"]["contextId"].as_str())
            .map(str::to_owned);
    }

    let res = call(
        &app,
        &viewer,
        "get",
        &format!("/grants/{grant}/receipts"),
        None,
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-disposition"],
        format!("attachment; filename=\"receipts-{grant}.json\"").as_str()
    );
    let file: Value = res.json().await.unwrap();
    let items = file.as_array().unwrap();
    assert_eq!(items.len(), 3, "{file}");

    // Offline: the keys come from the published JWKS, not from the export.
    let jwks_uri = items[0]["jwks_uri"].as_str().unwrap();
    assert_eq!(jwks_uri, "http://pactd.test/a2a/demo/oauth/jwks.json");
    let jwks: Value = app
        .http
        .get(format!("{}/a2a/demo/oauth/jwks.json", app.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys =
        pact_jose::ProviderKeySet::from_public_jwks(jwks["keys"].as_array().unwrap()).unwrap();
    let kept: Vec<pact_agent::state::StoredReceipt> =
        serde_json::from_value(file.clone()).expect("the shape pact-agent keeps");
    for (item, stored) in items.iter().zip(&kept) {
        let receipt: pact_proto::oauth::Receipt =
            serde_json::from_value(item["receipt"].clone()).unwrap();
        let claims = pact_jose::verify_receipt(&receipt, &keys).unwrap();
        assert_eq!(claims.grant_id, grant.to_string());
        assert_eq!(item["verified"], true);
        assert_eq!(stored.brand, "http://pactd.test/a2a/demo");
    }
    let chains = pact_agent::client::chain_verdicts(&kept);
    assert!(
        chains.iter().all(|c| c == &Some(Ok(()))),
        "the chain verifies: {chains:?}"
    );
    // A receipt cut from the middle of the file shows.
    let mut cut = kept.clone();
    cut.remove(1);
    assert!(
        pact_agent::client::chain_verdicts(&cut)
            .iter()
            .any(|c| matches!(c, Some(Err(_)))),
        "a gap in the chain is seen"
    );

    // Outside a limited credential's brands: as if it did not exist.
    call_refused(
        &app,
        &shop_only,
        "get",
        &format!("/grants/{grant}/receipts"),
        None,
        404,
        "not_found",
    )
    .await;
    let actions = audit_actions(&app, "auditor").await;
    assert!(
        actions.iter().any(|a| a == "grant.receipts.export"),
        "{actions:?}"
    );
}

/// Issue 30: a grant replaced by a newer one of the same person to the same
/// agent (a step-up's union) is `superseded`, not `revoked`: nobody cut the
/// access. Its own state in the answer and as a filter.
#[tokio::test]
async fn a_superseded_grant_is_its_own_state_and_filter() {
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example").await;
    let old = grant_of(&app.connect(&pa, "s1", "alice", &["orders:read"]).await);
    let new = grant_of(
        &app.connect(&pa, "s1", "alice", &["orders:read", "orders:cancel"])
            .await,
    );
    let owner = credential(&app, "root", "owner", None).await;
    let v = call_ok(&app, &owner, "get", &format!("/grants/{old}"), None).await;
    assert_eq!(v["state"], "superseded", "{v}");
    let v = call_ok(&app, &owner, "get", &format!("/grants/{new}"), None).await;
    assert_eq!(v["state"], "active", "{v}");
    let ids = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let superseded = call_ok(&app, &owner, "get", "/grants?state=superseded", None).await;
    assert_eq!(ids(&superseded), vec![old.to_string()]);
    let revoked = call_ok(&app, &owner, "get", "/grants?state=revoked", None).await;
    assert!(ids(&revoked).is_empty(), "{revoked}");
}

/// The document's request schemas and the server say the same of a body: one
/// the schema admits is not refused as malformed (400), and one it does not
/// admit is refused, changing nothing. Each probe sits on an edge where they
/// once differed: lengths counted in bytes by the server and in characters by
/// JSON Schema, blank or hidden-character names the schema let through, null
/// where the schema says a string, a whole number written `30.0`, an empty
/// card edit, a host that is no DNS name.
#[tokio::test]
async fn the_request_schemas_and_the_server_agree_on_the_edges() {
    let app = app().await;
    let owner = credential(&app, "root", "owner", None).await;
    let doc = openapi_document(&app).await;
    let admitted = |path: &str, body: &Value| -> bool {
        let reference = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
            ["schema"]["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} has no request schema"))
            .to_owned();
        schema_validator(&doc, &reference, true).is_valid(body)
    };
    let e = "é";
    let probes: Vec<(&str, &str, Value, bool)> = vec![
        // Lengths are characters on both sides (300 two-byte characters).
        (
            "/agents",
            "/agents",
            json!({"issuer": e.repeat(300), "jwks_uri": "https://pa.example/jwks.json"}),
            true,
        ),
        (
            "/agents",
            "/agents",
            json!({"issuer": " https://pa.example", "jwks_uri": "https://pa.example/jwks.json"}),
            false,
        ),
        (
            "/agents",
            "/agents",
            json!({"issuer": "https://pa2.example", "jwks_uri": "https://pa2.example/jwks.json", "name": "   "}),
            false,
        ),
        (
            "/agents",
            "/agents",
            json!({"issuer": "https://pa3.example", "jwks_uri": "https://pa3.example/jwks.json", "name": "Pay\u{200B}Pal"}),
            false,
        ),
        (
            "/agents",
            "/agents",
            json!({"issuer": "https://pa4.example", "jwks_uri": "https://pa4.example/jwks.json", "name": null}),
            true,
        ),
        (
            "/agents",
            "/agents",
            json!({"issuer": "https://pa5.example", "jwks_uri": "https://pa5.example/jwks.json", "homepage": "__main__"}),
            false,
        ),
        (
            "/brands/{brand}/scopes",
            "/brands/shop/scopes",
            json!({"scope_id": "wide", "description": e.repeat(400)}),
            true,
        ),
        (
            "/brands/{brand}/scopes",
            "/brands/shop/scopes",
            json!({"scope_id": "blank", "description": " \t "}),
            false,
        ),
        (
            "/brands/{brand}/scopes",
            "/brands/shop/scopes",
            json!({"scope_id": "shy", "description": "soft\u{AD}hyphen"}),
            false,
        ),
        (
            "/brands/{brand}/card",
            "/brands/shop/card",
            json!({}),
            false,
        ),
        (
            "/brands/{brand}/card",
            "/brands/shop/card",
            json!({"name": null}),
            false,
        ),
        (
            "/brands/{brand}/card",
            "/brands/shop/card",
            json!({"name": "Shop\u{202E}pohS"}),
            false,
        ),
        (
            "/brands/{brand}/card",
            "/brands/shop/card",
            json!({"name": "The Shop"}),
            true,
        ),
        (
            "/brands/{brand}/grant-lifetime",
            "/brands/shop/grant-lifetime",
            json!({"days": 30.0}),
            true,
        ),
        (
            "/brands/{brand}/grant-lifetime",
            "/brands/shop/grant-lifetime",
            json!({"days": 30.5}),
            false,
        ),
        (
            "/brands/{brand}/tools",
            "/brands/shop/tools",
            json!({"name": "wide", "url": "https://shop.example/t", "description": e.repeat(600)}),
            true,
        ),
        (
            "/brands/{brand}/tools",
            "/brands/shop/tools",
            json!({"name": "t2", "url": "https://shop.example/t", "description": "x\u{2066}y"}),
            false,
        ),
        // A malformed scope is malformed (400), not a scope the brand lacks (409).
        (
            "/brands/{brand}/tools",
            "/brands/shop/tools",
            json!({"name": "t3", "url": "https://shop.example/t", "scope": "two words"}),
            false,
        ),
        (
            "/brands/{brand}/tools",
            "/brands/shop/tools",
            json!({"name": "t4", "url": "https://shop.example:10443/t?a=%20b"}),
            true,
        ),
        (
            "/agents/block-host",
            "/agents/block-host",
            json!({"host": "   ", "reason": "spam"}),
            false,
        ),
        (
            "/agents/block-host",
            "/agents/block-host",
            json!({"host": "spam.example", "reason": "spam"}),
            true,
        ),
    ];
    for (documented, path, body, expected) in probes {
        assert_eq!(
            admitted(documented, &body),
            expected,
            "the schema of {documented} on {body}"
        );
        let before = audit_actions(&app, "root").await.len();
        let res = call(&app, &owner, "post", path, Some(body.clone())).await;
        let status = res.status().as_u16();
        if expected {
            assert_eq!(status, 200, "{path} {body}: {}", res.text().await.unwrap());
        } else {
            error(res, 400, "invalid_request").await;
            // A refused body changed nothing; the refusal is not even audited
            // as an action.
            assert_eq!(
                audit_actions(&app, "root").await.len(),
                before,
                "{path} {body}"
            );
        }
    }
    // An empty cursor is the first page, as its schema (any text) allows.
    for path in ["/grants?cursor=&limit=1", "/audit?cursor=&limit=1"] {
        ok(call(&app, &owner, "get", path, None).await).await;
    }
}
