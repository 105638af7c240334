//! Issue 28, finding 3: the console's audit coverage, enumerated from its
//! one route table (`admin::console::ROUTES`). Every route is classified
//! below; a new one fails the test until it says what it records. Every
//! form that changes something is submitted by a viewer (refused, and the
//! refusal recorded as `<action>.denied`) and by an owner (done, and
//! recorded), and every page that shows customer data records the read.
//! The API's operations are enumerated the same way in
//! `admin_api::every_documented_route_exists_and_answers`, the command line's
//! in `crates/pactd/tests/commands/cli_admin.rs`.

use pact_server::admin::console::ROUTES;
use pact_tests::TestApp;
use pact_tests::pages::{Browser, csrf_from, location, totp_at};

use crate::admin_console::{add_admin, sign_in};

/// What one console route must leave in the audit log.
enum Expect {
    /// A form: refused for a viewer (`<action>.denied`), done for an owner.
    Change(&'static [&'static str]),
    /// A page that shows customer data: the read.
    Read(&'static str),
    /// Sign-in and the admin's own factors, each with its own entries.
    Own(&'static [&'static str]),
    /// Recorded, but checked by another test (the reason says which).
    Elsewhere(&'static str),
    /// Nothing, for the reason given.
    Nothing(&'static str),
}

const CONSOLE: &[(&str, &str, Expect)] = &[
    ("get", "/admin", Expect::Nothing("counts, no customer data")),
    ("get", "/admin/sign-in", Expect::Nothing("the sign-in form")),
    (
        "post",
        "/admin/sign-in",
        Expect::Own(&["admin.sign_in_failed"]),
    ),
    (
        "get",
        "/admin/second-factor",
        Expect::Nothing("the sign-in form"),
    ),
    (
        "post",
        "/admin/second-factor",
        Expect::Own(&["admin.sign_in", "admin.sign_in_failed"]),
    ),
    (
        "get",
        "/admin/totp-setup",
        Expect::Nothing("the set-up form"),
    ),
    (
        "post",
        "/admin/totp-setup",
        Expect::Own(&["admin.totp_enrolled", "admin.sign_in"]),
    ),
    ("post", "/admin/sign-out", Expect::Own(&["admin.sign_out"])),
    (
        "get",
        "/admin/account",
        Expect::Nothing("the admin's own factors"),
    ),
    (
        "post",
        "/admin/passkeys/register/start",
        Expect::Nothing("starts a ceremony; its finish is recorded"),
    ),
    (
        "post",
        "/admin/passkeys/register/finish",
        Expect::Elsewhere("admin.passkey_add: admin_browser.rs, with a WebAuthn authenticator"),
    ),
    (
        "post",
        "/admin/passkeys/{id}/delete",
        Expect::Elsewhere("admin.passkey_remove: admin_browser.rs, with a WebAuthn authenticator"),
    ),
    (
        "post",
        "/admin/passkeys/login/start",
        Expect::Nothing("starts a ceremony; its finish is recorded"),
    ),
    (
        "post",
        "/admin/passkeys/login/finish",
        Expect::Elsewhere(
            "admin.sign_in (passkey): admin_browser.rs, with a WebAuthn authenticator",
        ),
    ),
    (
        "post",
        "/admin/recovery-codes",
        Expect::Own(&["admin.recovery_codes_new"]),
    ),
    (
        "get",
        "/admin/agents",
        Expect::Nothing("platforms and counts of people, no identities"),
    ),
    ("post", "/admin/agents", Expect::Change(&["agent.register"])),
    (
        "get",
        "/admin/agents/disable",
        Expect::Nothing("the confirmation; a viewer's refusal is agent.disable.denied"),
    ),
    (
        "post",
        "/admin/agents/disable",
        Expect::Change(&["agent.disable"]),
    ),
    (
        "post",
        "/admin/agents/enable",
        Expect::Change(&["agent.enable"]),
    ),
    (
        "post",
        "/admin/agents/verify",
        Expect::Change(&["agent.verify"]),
    ),
    (
        "post",
        "/admin/agents/forget",
        Expect::Change(&["agent.forget"]),
    ),
    (
        "post",
        "/admin/agents/block-host",
        Expect::Change(&["agent.block_host"]),
    ),
    (
        "post",
        "/admin/agents/unblock-host",
        Expect::Change(&["agent.unblock_host"]),
    ),
    ("get", "/admin/grants", Expect::Read("grant.list")),
    ("get", "/admin/grants/{id}", Expect::Read("grant.read")),
    (
        "get",
        "/admin/grants/{id}/receipts.json",
        Expect::Read("grant.receipts.export"),
    ),
    (
        "post",
        "/admin/grants/{id}/revoke",
        Expect::Change(&["grant.revoke"]),
    ),
    ("get", "/admin/customers", Expect::Read("customer.find")),
    (
        "post",
        "/admin/customers/{id}/{action}",
        Expect::Change(&[
            "customer.unlock",
            "customer.reset_second_factors",
            "customer.sign_out",
            "customer.revoke_grants",
            "customer.disable",
            "customer.enable",
        ]),
    ),
    ("get", "/admin/brands", Expect::Nothing("configuration")),
    (
        "get",
        "/admin/brands/{id}",
        Expect::Nothing("configuration"),
    ),
    (
        "post",
        "/admin/brands/{id}/scopes",
        Expect::Change(&["scope.upsert"]),
    ),
    (
        "post",
        "/admin/brands/{id}/scopes/remove",
        Expect::Change(&["scope.remove"]),
    ),
    (
        "post",
        "/admin/brands/{id}/card",
        Expect::Change(&["brand.card"]),
    ),
    (
        "post",
        "/admin/brands/{id}/grant-lifetime",
        Expect::Change(&["brand.grant_lifetime"]),
    ),
    (
        "post",
        "/admin/brands/{id}/admission",
        Expect::Change(&["brand.admission"]),
    ),
    (
        "post",
        "/admin/brands/{id}/details-types",
        Expect::Change(&["details_type.upsert"]),
    ),
    (
        "post",
        "/admin/brands/{id}/details-types/remove",
        Expect::Change(&["details_type.remove"]),
    ),
    (
        "post",
        "/admin/brands/{id}/tools",
        Expect::Change(&["tool.upsert"]),
    ),
    (
        "post",
        "/admin/brands/{id}/tools/remove",
        Expect::Change(&["tool.remove"]),
    ),
    ("get", "/admin/keys", Expect::Nothing("public key schedule")),
    (
        "post",
        "/admin/keys/rotate",
        Expect::Change(&["key.rotate"]),
    ),
    ("get", "/admin/audit", Expect::Read("audit.list")),
];

async fn last_id(app: &TestApp) -> i64 {
    sqlx::query_scalar("select coalesce(max(id), 0) from audit_log")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The entries since `after`: (actor, action, client_addr).
async fn since(app: &TestApp, after: i64) -> Vec<(String, String, Option<String>)> {
    sqlx::query_as("select actor, action, client_addr from audit_log where id > $1 order by id")
        .bind(after)
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// Asserts that exactly `actions` were recorded since `after`, all by
/// `actor` with its address.
async fn recorded(app: &TestApp, after: i64, actor: &str, actions: &[&str], what: &str) {
    let got = since(app, after).await;
    let names: Vec<&str> = got.iter().map(|(_, a, _)| a.as_str()).collect();
    assert_eq!(names, actions, "{what}");
    for (who, action, from) in &got {
        assert_eq!(who, actor, "{what}: {action}");
        assert!(
            from.as_deref().is_some_and(|f| !f.is_empty()),
            "{what}: no origin"
        );
    }
}

/// The CSRF token of a signed-in browser (every console page has one).
async fn csrf(b: &Browser) -> String {
    let (status, html) = b.get_html("/admin").await;
    assert_eq!(status, 200, "{html}");
    csrf_from(&html).unwrap()
}

/// A form of the scenario: where it posts, its fields, the action it records.
struct Form {
    path: String,
    fields: Vec<(&'static str, String)>,
    action: &'static str,
}

fn form(path: &str, fields: &[(&'static str, &str)], action: &'static str) -> Form {
    Form {
        path: path.to_owned(),
        fields: fields.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        action,
    }
}

async fn submit(b: &Browser, f: &Form) -> u16 {
    let token = csrf(b).await;
    let mut fields: Vec<(&str, &str)> = f.fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fields.push(("csrf", &token));
    b.post(&f.path, &fields).await.status().as_u16()
}

/// Every console route is classified; every form is refused for a viewer
/// with `.denied` recorded and done for an owner with its entry; every page
/// of customer data records the read; sign-in, sign-out and the admin's
/// own factors record theirs.
#[tokio::test]
async fn every_console_route_is_classified_and_leaves_what_it_should() {
    let mut listed: Vec<(String, String)> = CONSOLE
        .iter()
        .map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    let mut routed: Vec<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    listed.sort();
    routed.sort();
    assert_eq!(
        routed, listed,
        "every console route says what it leaves in the audit log (CONSOLE above)"
    );

    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    add_admin(&app, "root@example.com", "owner", None).await;
    add_admin(&app, "desk@example.com", "viewer", None).await;
    let pa = app.registered_pa("https://pa.example").await;
    // An agent the open policy let in (PACT §3.1), for the forget form.
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
    let user =
        pact_tests::pages::add_user(&app, "demo", "ann@example.com", "ann's password 1").await;
    app.node_connect(
        "demo",
        &pa,
        "pa-sub",
        &user.subject(),
        &["orders:read"],
        None,
    )
    .await;
    let grant = pact_db::grants::list(&app.db, Default::default())
        .await
        .unwrap()[0]
        .id;

    // Sign-in: a wrong password, then the first sign-in with TOTP set-up.
    let owner = Browser::new(&app);
    let before = last_id(&app).await;
    let res = owner
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[("email", "root@example.com"), ("password", "wrong")],
        )
        .await;
    assert_eq!(res.status(), 401);
    recorded(
        &app,
        before,
        "root@example.com",
        &["admin.sign_in_failed"],
        "sign-in",
    )
    .await;
    pact_tests::pages::next_totp_step(&app);
    let mut own: Vec<&str> = vec!["admin.sign_in_failed"];
    let before = last_id(&app).await;
    let secret = sign_in(&app, &owner, "root@example.com").await;
    own.extend(["admin.totp_enrolled", "admin.sign_in"]);
    recorded(
        &app,
        before,
        "root@example.com",
        &["admin.totp_enrolled", "admin.sign_in"],
        "TOTP set-up",
    )
    .await;
    let viewer = Browser::new(&app);
    sign_in(&app, &viewer, "desk@example.com").await;

    // Every signed-in page: those of customer data record the read (as the
    // table says), the others nothing. A customer search without a query
    // shows nothing and records nothing.
    let g = grant.to_string();
    let expect_of = |route: &str| {
        CONSOLE
            .iter()
            .find(|(m, p, _)| *m == "get" && *p == route)
            .map(|(_, _, e)| e)
            .unwrap()
    };
    let mut visited = Vec::new();
    for (route, path) in [
        ("/admin/grants", "/admin/grants".to_owned()),
        ("/admin/grants/{id}", format!("/admin/grants/{g}")),
        (
            "/admin/grants/{id}/receipts.json",
            format!("/admin/grants/{g}/receipts.json"),
        ),
        (
            "/admin/customers",
            "/admin/customers?q=ann%40example.com".to_owned(),
        ),
        ("/admin/audit", "/admin/audit".to_owned()),
        ("/admin", "/admin".to_owned()),
        ("/admin/agents", "/admin/agents".to_owned()),
        ("/admin/account", "/admin/account".to_owned()),
        ("/admin/brands", "/admin/brands".to_owned()),
        ("/admin/brands/{id}", "/admin/brands/demo".to_owned()),
        ("/admin/keys", "/admin/keys".to_owned()),
        (
            "/admin/agents/disable",
            "/admin/agents/disable?issuer=https%3A%2F%2Fpa.example".to_owned(),
        ),
    ] {
        let before = last_id(&app).await;
        let res = owner.get(&path).await;
        assert_eq!(res.status(), 200, "{path}");
        let expected: Vec<&str> = match expect_of(route) {
            Expect::Read(action) => vec![*action],
            Expect::Nothing(_) => vec![],
            _ => panic!("{route}: a page either records a read or nothing"),
        };
        recorded(&app, before, "root@example.com", &expected, &path).await;
        visited.push(route);
    }
    let before = last_id(&app).await;
    assert_eq!(owner.get("/admin/customers").await.status(), 200);
    recorded(&app, before, "root@example.com", &[], "no search").await;
    for (method, path, _) in CONSOLE {
        let signed_in_page = *method == "get"
            && ![
                "/admin/sign-in",
                "/admin/second-factor",
                "/admin/totp-setup",
            ]
            .contains(path);
        assert!(
            !signed_in_page || visited.contains(path),
            "GET {path} not visited"
        );
    }
    // The viewer's refused confirmation page is a refusal too.
    let before = last_id(&app).await;
    let res = viewer
        .get("/admin/agents/disable?issuer=https%3A%2F%2Fpa.example")
        .await;
    assert_eq!(res.status(), 403);
    recorded(
        &app,
        before,
        "desk@example.com",
        &["agent.disable.denied"],
        "confirm",
    )
    .await;

    // Every form that changes something: the viewer is refused (recorded),
    // the owner does it (recorded).
    let uid = user.id.to_string();
    let declaration = r#"{"scope":"orders:read","description":"Orders {ids}","fields":{"ids":{"type":"string_array","required":true}}}"#;
    let forms = [
        form(
            "/admin/agents",
            &[
                ("issuer", "https://new.example"),
                ("jwks_uri", "https://new.example/jwks.json"),
                ("name", "New"),
            ],
            "agent.register",
        ),
        form(
            "/admin/agents/disable",
            &[("issuer", "https://new.example"), ("reason", "test")],
            "agent.disable",
        ),
        form(
            "/admin/agents/enable",
            &[("issuer", "https://new.example")],
            "agent.enable",
        ),
        form(
            "/admin/agents/verify",
            &[("issuer", "https://new.example")],
            "agent.verify",
        ),
        form(
            "/admin/agents/forget",
            &[("issuer", "https://knock.example")],
            "agent.forget",
        ),
        form(
            "/admin/agents/block-host",
            &[("host", "spam.example"), ("reason", "spam")],
            "agent.block_host",
        ),
        form(
            "/admin/agents/unblock-host",
            &[("host", "spam.example")],
            "agent.unblock_host",
        ),
        form(
            &format!("/admin/customers/{uid}/unlock"),
            &[],
            "customer.unlock",
        ),
        form(
            &format!("/admin/customers/{uid}/reset-second-factors"),
            &[],
            "customer.reset_second_factors",
        ),
        form(
            &format!("/admin/customers/{uid}/sign-out"),
            &[],
            "customer.sign_out",
        ),
        form(
            &format!("/admin/customers/{uid}/revoke-grants"),
            &[("confirm", "yes")],
            "customer.revoke_grants",
        ),
        form(
            &format!("/admin/customers/{uid}/disable"),
            &[("confirm", "yes")],
            "customer.disable",
        ),
        form(
            &format!("/admin/customers/{uid}/enable"),
            &[],
            "customer.enable",
        ),
        form(
            "/admin/brands/demo/scopes",
            &[
                ("scope_id", "returns:create"),
                ("description", "Start a return"),
            ],
            "scope.upsert",
        ),
        form(
            "/admin/brands/demo/scopes/remove",
            &[("scope_id", "returns:create")],
            "scope.remove",
        ),
        form(
            "/admin/brands/demo/card",
            &[("name", "Demo Store"), ("description", "Tea and more")],
            "brand.card",
        ),
        form(
            "/admin/brands/demo/grant-lifetime",
            &[("days", "14")],
            "brand.grant_lifetime",
        ),
        form(
            "/admin/brands/demo/admission",
            &[("policy", "open")],
            "brand.admission",
        ),
        form(
            "/admin/brands/demo/details-types",
            &[("type_name", "order_view"), ("declaration", declaration)],
            "details_type.upsert",
        ),
        form(
            "/admin/brands/demo/details-types/remove",
            &[("type_name", "order_view")],
            "details_type.remove",
        ),
        form(
            "/admin/brands/demo/tools",
            &[
                ("name", "get_order"),
                ("scope", "orders:read"),
                ("url", "https://shop.example/tools/get_order"),
            ],
            "tool.upsert",
        ),
        form(
            "/admin/brands/demo/tools/remove",
            &[("name", "get_order")],
            "tool.remove",
        ),
        form("/admin/keys/rotate", &[], "key.rotate"),
    ];
    // The grant's revocation last but one: the customer's revoke-grants above
    // already ended it, so a fresh grant is revoked.
    app.node_connect("demo", &pa, "pa-sub-2", "bob", &["orders:read"], None)
        .await;
    let fresh = pact_db::grants::list(
        &app.db,
        pact_db::grants::GrantFilter {
            user_sub: Some(&"bob".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap()[0]
        .id;
    let revoke = form(
        &format!("/admin/grants/{fresh}/revoke"),
        &[("reason", "test"), ("confirm", "yes")],
        "grant.revoke",
    );
    let mut done: Vec<&str> = Vec::new();
    for f in forms.iter().chain(std::iter::once(&revoke)) {
        let before = last_id(&app).await;
        assert_eq!(submit(&viewer, f).await, 403, "viewer: {}", f.path);
        let denied = format!("{}.denied", f.action);
        recorded(
            &app,
            before,
            "desk@example.com",
            &[denied.as_str()],
            &f.path,
        )
        .await;
        let before = last_id(&app).await;
        assert_eq!(submit(&owner, f).await, 303, "owner: {}", f.path);
        recorded(&app, before, "root@example.com", &[f.action], &f.path).await;
        done.push(f.action);
    }
    for (method, path, expect) in CONSOLE {
        if let Expect::Change(actions) = expect {
            for a in *actions {
                assert!(done.contains(a), "{method} {path}: {a} was not exercised");
            }
        }
    }

    // The admin's own: new recovery codes, sign-out, sign-in with the code.
    let before = last_id(&app).await;
    let status = submit(&owner, &form("/admin/recovery-codes", &[], "")).await;
    assert_eq!(status, 200);
    recorded(
        &app,
        before,
        "root@example.com",
        &["admin.recovery_codes_new"],
        "codes",
    )
    .await;
    own.push("admin.recovery_codes_new");
    let before = last_id(&app).await;
    let token = csrf(&owner).await;
    let res = owner.post("/admin/sign-out", &[("csrf", &token)]).await;
    assert_eq!(location(&res), "/admin/sign-in");
    recorded(
        &app,
        before,
        "root@example.com",
        &["admin.sign_out"],
        "sign-out",
    )
    .await;
    own.push("admin.sign_out");
    let res = owner
        .submit(
            "/admin/sign-in",
            "/admin/sign-in",
            &[
                ("email", "root@example.com"),
                ("password", "correct horse battery"),
            ],
        )
        .await;
    assert_eq!(location(&res), "/admin/second-factor");
    let before = last_id(&app).await;
    let res = owner
        .submit(
            "/admin/second-factor",
            "/admin/second-factor",
            &[("code", &totp_at(&secret, now_unix(&app) - 3600))],
        )
        .await;
    assert_eq!(res.status(), 401);
    // The next step's code: the set-up's code was this step's, used once.
    app.clock.advance(std::time::Duration::from_secs(31));
    let now = now_unix(&app);
    let res = owner
        .submit(
            "/admin/second-factor",
            "/admin/second-factor",
            &[("code", &totp_at(&secret, now))],
        )
        .await;
    assert_eq!(location(&res), "/admin");
    recorded(
        &app,
        before,
        "root@example.com",
        &["admin.sign_in_failed", "admin.sign_in"],
        "second factor",
    )
    .await;
    // Every entry the table promises for sign-in and own factors was seen;
    // the coverage list, as the test run shows it.
    for (method, path, expect) in CONSOLE {
        let line = match expect {
            Expect::Own(actions) => {
                for a in *actions {
                    assert!(own.contains(a), "{method} {path}: {a} not seen");
                }
                actions.join(", ")
            }
            Expect::Change(actions) => format!("{} (and .denied)", actions.join(", ")),
            Expect::Read(action) => (*action).to_owned(),
            Expect::Elsewhere(why) => format!("recorded; checked in {why}"),
            Expect::Nothing(why) => format!("nothing: {why}"),
        };
        println!("console {method} {path}: {line}");
    }
}

fn now_unix(app: &TestApp) -> i64 {
    app.clock.now().unix_timestamp()
}
