//! The brand's OAuth authorization server, endpoint by endpoint (PACT §5.1–5.4,
//! §5.7, §7): every refusal with its exact status and error code, and proof in
//! the database that a refused request changed nothing.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_server::consent::{self, Approval, ConsentError};
use pact_tests::{TestApp, TestPa};
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::assert_bare;
use crate::assert_bare_401;

const ISS: &str = "https://pa.example";
const OTHER_ISS: &str = "https://other-pa.example";
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
const ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

/// pactd with a 1 s polling interval and the demo brand offering delegation.
async fn delegation_app() -> TestApp {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    app
}

/// POSTs a form to an OAuth endpoint of `brand` as `pa` for `sub`, checks the
/// headers every OAuth answer carries (JSON, `Cache-Control: no-store`; a 401
/// names `invalid_client` in `WWW-Authenticate`) and returns (status, body).
async fn oauth(
    app: &TestApp,
    brand: &str,
    endpoint: &str,
    pa: &TestPa,
    sub: &str,
    form: &[(&str, &str)],
) -> (u16, Value) {
    let res = app
        .oauth_post(brand, endpoint, &pa.token(sub, app.audience()), form)
        .await;
    let status = res.status().as_u16();
    let h = res.headers().clone();
    assert_eq!(
        h["content-type"], "application/json",
        "{endpoint}: {status}"
    );
    assert_eq!(h["cache-control"], "no-store", "{endpoint}: {status}");
    if status == 401 {
        assert_eq!(
            h["www-authenticate"],
            r#"Bearer realm="a2a", error="invalid_client""#
        );
    } else {
        assert!(h.get("www-authenticate").is_none(), "{endpoint}: {status}");
    }
    (status, res.json().await.unwrap())
}

/// Asserts an RFC 6749 §5.2 error answer.
#[track_caller]
fn assert_error(got: &(u16, Value), status: u16, code: &str) {
    assert_eq!(
        (got.0, got.1["error"].as_str()),
        (status, Some(code)),
        "{}",
        got.1
    );
}

/// A device authorization request at the demo brand.
async fn authorize(app: &TestApp, pa: &TestPa, sub: &str, form: &[(&str, &str)]) -> (u16, Value) {
    oauth(app, "demo", "device_authorization", pa, sub, form).await
}

/// One poll of `brand`'s token endpoint.
async fn poll_at(app: &TestApp, brand: &str, pa: &TestPa, sub: &str, code: &str) -> (u16, Value) {
    oauth(
        app,
        brand,
        "token",
        pa,
        sub,
        &[
            ("grant_type", DEVICE_GRANT),
            ("device_code", code),
            ("client_id", &pa.issuer),
        ],
    )
    .await
}

async fn poll(app: &TestApp, pa: &TestPa, sub: &str, code: &str) -> (u16, Value) {
    poll_at(app, "demo", pa, sub, code).await
}

/// A refresh at the demo brand, optionally asking for `scope`.
async fn refresh(
    app: &TestApp,
    pa: &TestPa,
    sub: &str,
    token: &str,
    scope: Option<&str>,
) -> (u16, Value) {
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", token),
        ("client_id", pa.issuer.as_str()),
    ];
    if let Some(s) = scope {
        form.push(("scope", s));
    }
    oauth(app, "demo", "token", pa, sub, &form).await
}

/// The one audit entry about `grant` ending: (actor kind, action, detail).
async fn ended_entry(app: &TestApp, grant: Uuid) -> (String, String, Value) {
    sqlx::query_as(
        "select actor_kind, action, detail from audit_log where target = $1 and action like 'grant.%'",
    )
    .bind(grant.to_string())
    .fetch_one(&app.db)
    .await
    .unwrap()
}

async fn revoke(app: &TestApp, pa: &TestPa, sub: &str, token: &str) -> (u16, Value) {
    oauth(
        app,
        "demo",
        "revoke",
        pa,
        sub,
        &[("token", token), ("client_id", &pa.issuer)],
    )
    .await
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn device_authorizations(app: &TestApp) -> i64 {
    count(app, "select count(*) from device_authorizations").await
}

async fn grants(app: &TestApp) -> i64 {
    count(app, "select count(*) from grants").await
}

async fn grant(app: &TestApp, id: impl Into<pact_db::ids::GrantId>) -> pact_db::grants::Grant {
    pact_db::grants::find(&app.db, id.into())
        .await
        .unwrap()
        .unwrap()
}

/// The authorization behind a displayed user code, whatever its state.
async fn authorization(
    app: &TestApp,
    user_code: &str,
) -> pact_db::device_authorizations::DeviceAuthorization {
    let id: Uuid = sqlx::query_scalar("select id from device_authorizations where user_code = $1")
        .bind(user_code.replace('-', ""))
        .fetch_one(&app.db)
        .await
        .unwrap();
    pact_db::device_authorizations::find(&app.db, id)
        .await
        .unwrap()
        .unwrap()
}

/// Sets an authorization's expiry relative to the database clock.
async fn expire(app: &TestApp, user_code: &str, ago: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "update device_authorizations set expires_at = now() - interval '{ago}' where user_code = $1"
    )))
    .bind(user_code.replace('-', ""))
    .execute(&app.db)
    .await
    .unwrap();
}

/// The decoded header (0) or payload (1) of a compact JWS.
fn jwt_part(jwt: &str, index: usize) -> Value {
    let segment = jwt.split('.').nth(index).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(segment).unwrap()).unwrap()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn str_of<'v>(v: &'v Value, key: &str) -> &'v str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

// ---------------------------------------------------------------------------
// §5.1 Device authorization

/// PACT §5.1: a scope the brand does not define, or no scope at all, is
/// `invalid_scope`; nothing is stored.
#[tokio::test]
async fn an_unknown_empty_or_missing_scope_is_invalid_scope_and_stores_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    for scope in [
        Some("orders:read orders:delete"),
        Some("admin"),
        Some(""),
        Some("   "),
        None,
    ] {
        let mut form = vec![("client_id", ISS)];
        if let Some(s) = scope {
            form.push(("scope", s));
        }
        let got = authorize(&app, &pa, "u1", &form).await;
        assert_error(&got, 400, "invalid_scope");
    }
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §5: `client_id` must be the PA-JWT's `iss`; another is `401
/// invalid_client` with `WWW-Authenticate`, and nothing is stored.
#[tokio::test]
async fn a_client_id_other_than_the_pa_issuer_is_invalid_client_and_stores_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    // Another registered PA's issuer is no better than a made-up one.
    app.registered_pa(OTHER_ISS).await;
    for client_id in [OTHER_ISS, "https://pa.example/", "https://evil.example"] {
        let got = authorize(
            &app,
            &pa,
            "u1",
            &[("client_id", client_id), ("scope", "orders:read")],
        )
        .await;
        assert_error(&got, 401, "invalid_client");
    }
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §5.1 (RFC 6749 §3.1): `client_id` is required and no parameter may
/// repeat; both are `invalid_request` and store nothing.
#[tokio::test]
async fn a_missing_client_id_or_a_repeated_parameter_is_invalid_request_and_stores_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let cases: [&[(&str, &str)]; 3] = [
        &[("scope", "orders:read")],
        &[
            ("client_id", ISS),
            ("scope", "orders:read"),
            ("scope", "orders:cancel"),
        ],
        &[
            ("client_id", ISS),
            ("client_id", ISS),
            ("scope", "orders:read"),
        ],
    ];
    for form in cases {
        let got = authorize(&app, &pa, "u1", form).await;
        assert_error(&got, 400, "invalid_request");
    }
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §3, §5: the PA-JWT authenticates the client; without one the answer is
/// the bare 401 and nothing is stored.
#[tokio::test]
async fn device_authorization_without_a_pa_jwt_is_a_bare_401_and_stores_nothing() {
    let app = delegation_app().await;
    app.registered_pa(ISS).await;
    let res = app
        .http
        .post(app.oauth("demo", "device_authorization"))
        .form(&[("client_id", ISS), ("scope", "orders:read")])
        .send()
        .await
        .unwrap();
    assert_bare_401(res).await;
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §5.1 (pactd): the user code is `XXXX-XXXX` from
/// `BCDFGHJKLMNPQRSTVWXZ`, stored normalised; every authorization gets its own.
#[tokio::test]
async fn user_codes_are_two_dashed_groups_of_four_alphabet_letters_and_differ_per_authorization() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let a = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let b = app.device_authorize(&pa, "u1", "orders:read", None).await;
    for auth in [&a, &b] {
        let code = auth.user_code.as_bytes();
        assert_eq!(code.len(), 9, "{}", auth.user_code);
        assert_eq!(code[4], b'-', "{}", auth.user_code);
        assert!(
            code.iter()
                .enumerate()
                .all(|(i, c)| i == 4 || ALPHABET.contains(c)),
            "{}",
            auth.user_code
        );
        assert_eq!(auth.body["expires_in"], 600);
        assert_eq!(auth.body["interval"], 1);
        let stored = authorization(&app, &auth.user_code).await;
        assert_eq!(stored.user_code, auth.user_code.replace('-', ""));
        assert_eq!(stored.status.as_str(), "pending");
        assert_eq!(stored.pa_issuer, ISS);
        assert_eq!(stored.pa_sub, "u1");
        assert_eq!(stored.scopes, vec!["orders:read".to_owned()]);
    }
    assert_ne!(a.user_code, b.user_code);
    assert_ne!(a.device_code, b.device_code);
    assert_eq!(device_authorizations(&app).await, 2);
}

// ---------------------------------------------------------------------------
// §5.7 authorization_details (RFC 9396)

/// PACT §5.7: malformed details, unknown types or fields, a missing required
/// field, or a type whose scope is not requested are `400
/// invalid_authorization_details`; a restriction is never dropped silently.
#[tokio::test]
async fn malformed_authorization_details_are_refused_and_store_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let cases = [
        ("orders:cancel", "not json"),
        (
            "orders:cancel",
            r#"{"type":"order_cancellation","order_ids":["DEMO-1"]}"#,
        ),
        ("orders:cancel", r#"[{"type":"payment_limit","max":"5"}]"#),
        (
            "orders:cancel",
            r#"[{"type":"order_cancellation","order_ids":["DEMO-1"],"reason":"late"}]"#,
        ),
        ("orders:cancel", r#"[{"type":"order_cancellation"}]"#),
        (
            "orders:cancel",
            r#"[{"type":"order_cancellation","order_ids":"DEMO-1"}]"#,
        ),
        ("orders:cancel", r#"[{"order_ids":["DEMO-1"]}]"#),
        // The type refines orders:cancel, which this request does not ask for.
        (
            "orders:read",
            r#"[{"type":"order_cancellation","order_ids":["DEMO-1"]}]"#,
        ),
    ];
    for (scope, details) in cases {
        let got = authorize(
            &app,
            &pa,
            "u1",
            &[
                ("client_id", ISS),
                ("scope", scope),
                ("authorization_details", details),
            ],
        )
        .await;
        assert_error(&got, 400, "invalid_authorization_details");
    }
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §5.7: a value that would display differently from what is enforced
/// (a right-to-left override, a zero-width space, an isolate) is refused at
/// request time with `invalid_authorization_details`, naming the character.
#[tokio::test]
async fn authorization_details_with_invisible_or_bidi_characters_are_refused() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    for hidden in ['\u{202E}', '\u{200B}', '\u{2066}', '\u{200F}'] {
        let details =
            json!([{"type": "order_cancellation", "order_ids": [format!("DEMO-1{hidden}9")]}])
                .to_string();
        let got = authorize(
            &app,
            &pa,
            "u1",
            &[
                ("client_id", ISS),
                ("scope", "orders:cancel"),
                ("authorization_details", &details),
            ],
        )
        .await;
        assert_error(&got, 400, "invalid_authorization_details");
        let why = got.1["error_description"].as_str().unwrap();
        assert!(
            why.contains(&format!("U+{:04X}", u32::from(hidden))),
            "{why}"
        );
    }
    assert_eq!(device_authorizations(&app).await, 0);
}

/// PACT §5.7, §5.3, §5.4: approved details are stored with the grant, appear in
/// the token response and the delegation JWT, and survive refresh.
#[tokio::test]
async fn approved_authorization_details_appear_in_the_token_the_jwt_and_survive_refresh() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let details = json!([{"type": "order_cancellation", "order_ids": ["DEMO-1"]}]);
    let auth = app
        .device_authorize(&pa, "u1", "orders:cancel", Some(&details))
        .await;
    assert_eq!(
        authorization(&app, &auth.user_code)
            .await
            .authorization_details,
        Some(details.clone())
    );
    let g = app
        .approve(&auth.user_code, "alice", &["orders:cancel"])
        .await;
    assert_eq!(g.authorization_details, Some(details.clone()));

    let (s, tokens) = poll(&app, &pa, "u1", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(tokens["scope"], "orders:cancel");
    assert_eq!(tokens["authorization_details"], details);
    let claims = jwt_part(str_of(&tokens, "access_token"), 1);
    assert_eq!(claims["authorization_details"], details);
    assert_eq!(claims["scope"], "orders:cancel");
    assert_eq!(claims["grant_id"], g.id.to_string());

    let (s, refreshed) = refresh(&app, &pa, "u1", str_of(&tokens, "refresh_token"), None).await;
    assert_eq!(s, 200, "{refreshed}");
    assert_eq!(refreshed["authorization_details"], details);
    let claims = jwt_part(str_of(&refreshed, "access_token"), 1);
    assert_eq!(claims["authorization_details"], details);
}

// ---------------------------------------------------------------------------
// §5.3 Token: the device code grant

/// PACT §5.3: once the user denies, every poll is `access_denied`, and no grant exists.
#[tokio::test]
async fn a_denied_authorization_polls_as_access_denied() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.deny(&auth.user_code).await;
    assert_error(
        &poll(&app, &pa, "u1", &auth.device_code).await,
        400,
        "access_denied",
    );
    assert_error(
        &poll(&app, &pa, "u1", &auth.device_code).await,
        400,
        "access_denied",
    );
    assert_eq!(grants(&app).await, 0);
    assert_eq!(
        authorization(&app, &auth.user_code).await.status.as_str(),
        "denied"
    );
}

/// PACT §5.3, §7: an expired code is `expired_token`, whether the user never
/// decided or approved too late for the PA; no tokens are issued.
#[tokio::test]
async fn an_expired_device_code_polls_as_expired_token() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let undecided = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let approved = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.approve(&approved.user_code, "alice", &["orders:read"])
        .await;
    expire(&app, &undecided.user_code, "1 second").await;
    expire(&app, &approved.user_code, "1 second").await;
    for code in [&undecided.device_code, &approved.device_code] {
        assert_error(&poll(&app, &pa, "u1", code).await, 400, "expired_token");
    }
    assert_eq!(count(&app, "select count(*) from refresh_tokens").await, 0);
    assert_eq!(
        authorization(&app, &approved.user_code)
            .await
            .status
            .as_str(),
        "approved"
    );
}

/// PACT §5.3: a device code pactd never issued is `invalid_grant`.
#[tokio::test]
async fn an_unknown_device_code_is_invalid_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    // A real code, but one character off.
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let mut forged = auth.device_code.clone();
    let last = if forged.ends_with('A') { "B" } else { "A" };
    forged.replace_range(forged.len() - 1.., last);
    for code in [forged.as_str(), "nonsense"] {
        assert_error(&poll(&app, &pa, "u1", code).await, 400, "invalid_grant");
    }
    // Neither counted as a poll of the real code.
    assert_eq!(
        authorization(&app, &auth.user_code).await.last_polled_at,
        None
    );
}

/// PACT §5.3: a code yields tokens exactly once; the next poll is `invalid_grant`.
#[tokio::test]
async fn a_device_code_is_redeemed_once_and_then_is_invalid_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    let (s, tokens) = poll(&app, &pa, "u1", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_error(
        &poll(&app, &pa, "u1", &auth.device_code).await,
        400,
        "invalid_grant",
    );
    assert_eq!(count(&app, "select count(*) from refresh_tokens").await, 1);
    assert_eq!(
        authorization(&app, &auth.user_code).await.status.as_str(),
        "redeemed"
    );
}

/// PACT §5.3 "exactly once per code": two polls racing for one approved code
/// get one token pair between them. Several codes race at once, on a
/// multi-threaded runtime, so a missing lock cannot slip through by luck.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_racing_polls_of_an_approved_code_get_exactly_one_token_pair() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let mut requests = tokio::task::JoinSet::new();
    // One brand user per code, so no approval supersedes another's grant.
    for user in ["alice", "bob", "carol", "dave"] {
        let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
        app.approve(&auth.user_code, user, &["orders:read"]).await;
        // Tokens and requests are made up front so the two polls leave together.
        for _ in 0..2 {
            let req = app
                .http
                .post(app.oauth("demo", "token"))
                .bearer_auth(pa.token("u1", app.audience()))
                .form(&[
                    ("grant_type", DEVICE_GRANT),
                    ("device_code", auth.device_code.as_str()),
                    ("client_id", ISS),
                ]);
            let code = auth.device_code.clone();
            requests.spawn(async move {
                let res = req.send().await.unwrap();
                assert_eq!(res.headers()["cache-control"], "no-store");
                let status = res.status().as_u16();
                (code, (status, res.json::<Value>().await.unwrap()))
            });
        }
    }
    let mut by_code: std::collections::BTreeMap<String, Vec<(u16, Value)>> = Default::default();
    for done in requests.join_all().await {
        by_code.entry(done.0).or_default().push(done.1);
    }
    assert_eq!(by_code.len(), 4);
    for mut pair in by_code.into_values() {
        pair.sort_by_key(|(status, _)| *status);
        assert_eq!(pair.len(), 2);
        assert_eq!(pair[0].0, 200, "{}", pair[0].1);
        assert!(pair[0].1["access_token"].is_string());
        assert_error(&pair[1], 400, "invalid_grant");
    }
    assert_eq!(count(&app, "select count(*) from refresh_tokens").await, 4);
}

/// PACT §5.3, §7: a device code is a bearer secret of its PA alone; another PA
/// presenting it gets `invalid_grant` and the code still works for its owner.
#[tokio::test]
async fn another_pas_poll_of_a_device_code_is_invalid_grant_and_leaves_the_code_to_its_owner() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let thief = app.registered_pa(OTHER_ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    // Before the decision: no pending/slow_down hint, and no poll recorded for the owner.
    assert_error(
        &poll(&app, &thief, "u1", &auth.device_code).await,
        400,
        "invalid_grant",
    );
    assert_eq!(
        authorization(&app, &auth.user_code).await.last_polled_at,
        None
    );
    app.approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    assert_error(
        &poll(&app, &thief, "u1", &auth.device_code).await,
        400,
        "invalid_grant",
    );
    assert_eq!(count(&app, "select count(*) from refresh_tokens").await, 0);
    let (s, tokens) = poll(&app, &pa, "u1", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(
        jwt_part(str_of(&tokens, "access_token"), 1)["client_id"],
        ISS
    );
}

/// PACT §5.3: a code belongs to the brand that issued it; polled at another
/// brand's token endpoint it is `invalid_grant`.
#[tokio::test]
async fn a_device_code_polled_at_another_brand_is_invalid_grant() {
    let app = delegation_app().await;
    app.add_brand("acme", "Acme").await;
    pact_db::scopes::upsert(
        &app.db,
        &pact_tests::brand_id("acme"),
        "orders:read",
        "See your Acme orders",
        false,
    )
    .await
    .unwrap();
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    assert_error(
        &poll_at(&app, "acme", &pa, "u1", &auth.device_code).await,
        400,
        "invalid_grant",
    );
    let (s, tokens) = poll(&app, &pa, "u1", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(
        jwt_part(str_of(&tokens, "access_token"), 1)["aud"],
        app.iface("demo")
    );
}

/// PACT §5.3: an unknown `grant_type` is `unsupported_grant_type`; none at all,
/// or a device code grant without its code, is `invalid_request`.
#[tokio::test]
async fn an_unsupported_grant_type_is_refused_and_a_missing_one_is_invalid_request() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    for grant_type in ["authorization_code", "client_credentials", "password"] {
        let got = oauth(
            &app,
            "demo",
            "token",
            &pa,
            "u1",
            &[
                ("grant_type", grant_type),
                ("client_id", ISS),
                ("code", "x"),
            ],
        )
        .await;
        assert_error(&got, 400, "unsupported_grant_type");
    }
    let got = oauth(&app, "demo", "token", &pa, "u1", &[("client_id", ISS)]).await;
    assert_error(&got, 400, "invalid_request");
    let got = oauth(
        &app,
        "demo",
        "token",
        &pa,
        "u1",
        &[("grant_type", DEVICE_GRANT), ("client_id", ISS)],
    )
    .await;
    assert_error(&got, 400, "invalid_request");
}

/// PACT §5: at the token endpoint too, `client_id` must be the PA's issuer
/// (`401 invalid_client`) and is required (`invalid_request`); neither redeems the code.
#[tokio::test]
async fn a_token_request_with_a_wrong_or_missing_client_id_is_refused_and_redeems_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    let got = oauth(
        &app,
        "demo",
        "token",
        &pa,
        "u1",
        &[
            ("grant_type", DEVICE_GRANT),
            ("device_code", &auth.device_code),
            ("client_id", OTHER_ISS),
        ],
    )
    .await;
    assert_error(&got, 401, "invalid_client");
    let got = oauth(
        &app,
        "demo",
        "token",
        &pa,
        "u1",
        &[
            ("grant_type", DEVICE_GRANT),
            ("device_code", &auth.device_code),
        ],
    )
    .await;
    assert_error(&got, 400, "invalid_request");
    assert_eq!(
        authorization(&app, &auth.user_code).await.status.as_str(),
        "approved"
    );
    assert_eq!(poll(&app, &pa, "u1", &auth.device_code).await.0, 200);
}

/// PACT §5.3, §7 (RFC 8628 §3.5): polling faster than the interval is
/// `slow_down`, and each one adds 5 s for this and all later polls; a poll
/// after the (grown) interval is pending again. The interval is read where the
/// PA reads it, in the answer; the node's clock moves instead of the test
/// sleeping.
#[tokio::test]
async fn polling_too_fast_is_slow_down_and_each_slow_down_adds_five_seconds() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    assert_eq!(auth.body["interval"], 1);
    let slow_down = || async {
        let got = poll(&app, &pa, "u1", &auth.device_code).await;
        assert_error(&got, 400, "slow_down");
        wait_secs(&got.1)
    };

    assert_error(
        &poll(&app, &pa, "u1", &auth.device_code).await,
        400,
        "authorization_pending",
    );
    assert_eq!(slow_down().await, 6);
    assert_eq!(slow_down().await, 11);

    // The PA waits longer than 11 s.
    app.clock.advance(std::time::Duration::from_secs(12));
    assert_error(
        &poll(&app, &pa, "u1", &auth.device_code).await,
        400,
        "authorization_pending",
    );
    // The grown interval stays: 1 s later is too fast, and grows it again.
    app.clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(slow_down().await, 16);

    // Whatever the node remembered, the decision is heard at once.
    app.approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    assert_eq!(poll(&app, &pa, "u1", &auth.device_code).await.0, 200);
}

/// The interval a `slow_down` answer asks for ("… wait N s …").
fn wait_secs(body: &Value) -> i64 {
    let text = body["error_description"].as_str().unwrap_or_default();
    text.split_once("wait ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no interval in {body}"))
}

// ---------------------------------------------------------------------------
// §5.3 Token: refresh

/// PACT §5.3 (RFC 9700 §4.14.2): a refresh token works once; presenting a used
/// one is `invalid_grant` and revokes the whole grant, newer tokens included.
#[tokio::test]
async fn a_reused_refresh_token_is_invalid_grant_and_revokes_the_whole_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let first = str_of(&tokens, "refresh_token");
    let grant_id: Uuid = jwt_part(str_of(&tokens, "access_token"), 1)["grant_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let (s, rotated) = refresh(&app, &pa, "u1", first, None).await;
    assert_eq!(s, 200, "{rotated}");
    assert_ne!(str_of(&rotated, "refresh_token"), first);
    assert!(grant(&app, grant_id).await.revoked_at.is_none());

    assert_error(
        &refresh(&app, &pa, "u1", first, None).await,
        400,
        "invalid_grant",
    );
    let g = grant(&app, grant_id).await;
    assert!(g.revoked_at.is_some());
    let reason = g.revoked_reason.unwrap_or_default();
    assert!(reason.contains("reuse"), "{reason}");
    // Issue 28, finding 3: an automatic end is in the audit log too.
    let (kind, action, detail) = ended_entry(&app, grant_id).await;
    assert_eq!(
        (kind.as_str(), action.as_str()),
        ("system", "grant.revoke_token_reuse")
    );
    assert_eq!(detail["customer"], "alice");
    assert_eq!(detail["agent"], ISS);
    let newest = str_of(&rotated, "refresh_token");
    assert_error(
        &refresh(&app, &pa, "u1", newest, None).await,
        400,
        "invalid_grant",
    );
}

/// PACT §5.3 (RFC 6749 §6): refresh may ask for less than was granted, never
/// more; a refused widening leaves the refresh token usable, and the refresh
/// token keeps the full grant.
#[tokio::test]
async fn token_requests_ask_for_the_grants_authorization_details_unchanged_or_are_refused() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let two = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001", "SHOP-1002"]}]);
    let one = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let auth = app
        .device_authorize(&pa, "u1", "orders:read orders:cancel", Some(&two))
        .await;
    app.approve(&auth.user_code, "alice", &["orders:read", "orders:cancel"])
        .await;
    let poll_asking = |details: String| {
        let (app, pa, code) = (&app, &pa, auth.device_code.clone());
        async move {
            oauth(
                app,
                "demo",
                "token",
                pa,
                "u1",
                &[
                    ("grant_type", DEVICE_GRANT),
                    ("device_code", &code),
                    ("client_id", &pa.issuer),
                    ("authorization_details", &details),
                ],
            )
            .await
        }
    };
    // RFC 9396 §6: fewer details than granted, or others, or not an array:
    // refused, and the code is still there to redeem.
    for asked in [one.to_string(), json!([]).to_string(), "{}".to_owned()] {
        assert_error(
            &poll_asking(asked).await,
            400,
            "invalid_authorization_details",
        );
    }
    let (status, tokens) = poll_asking(two.to_string()).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["authorization_details"], two);

    // The same on refresh: a refusal does not spend the refresh token, and
    // the details as the token response gave them are accepted.
    let rt = str_of(&tokens, "refresh_token");
    let refresh_asking = |details: String| {
        let (app, pa) = (&app, &pa);
        async move {
            oauth(
                app,
                "demo",
                "token",
                pa,
                "u1",
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", rt),
                    ("client_id", &pa.issuer),
                    ("authorization_details", &details),
                ],
            )
            .await
        }
    };
    assert_error(
        &refresh_asking(one.to_string()).await,
        400,
        "invalid_authorization_details",
    );
    let (status, again) = refresh_asking(tokens["authorization_details"].to_string()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        jwt_part(str_of(&again, "access_token"), 1)["authorization_details"],
        two
    );
}

#[tokio::test]
async fn refresh_can_narrow_the_scope_but_never_widen_it() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let rt = str_of(&tokens, "refresh_token");

    for wider in ["orders:read orders:cancel", "orders:cancel", "bogus"] {
        assert_error(
            &refresh(&app, &pa, "u1", rt, Some(wider)).await,
            400,
            "invalid_scope",
        );
    }
    // None of the refusals spent the token.
    let (s, full) = refresh(&app, &pa, "u1", rt, None).await;
    assert_eq!(s, 200, "{full}");
    assert_eq!(full["scope"], "orders:read");

    // A two-scope grant narrowed to one.
    let tokens = app
        .connect(&pa, "u2", "bob", &["orders:read", "orders:cancel"])
        .await;
    assert_eq!(tokens["scope"], "orders:cancel orders:read");
    let (s, narrow) = refresh(
        &app,
        &pa,
        "u2",
        str_of(&tokens, "refresh_token"),
        Some("orders:read"),
    )
    .await;
    assert_eq!(s, 200, "{narrow}");
    assert_eq!(narrow["scope"], "orders:read");
    assert_eq!(
        jwt_part(str_of(&narrow, "access_token"), 1)["scope"],
        "orders:read"
    );
    // Omitting scope asks for everything granted again (RFC 6749 §6).
    let (s, again) = refresh(&app, &pa, "u2", str_of(&narrow, "refresh_token"), None).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["scope"], "orders:cancel orders:read");
}

/// PACT §5.3: a refresh token is bound to its PA; another PA presenting it gets
/// `invalid_grant`, and the owner's grant and token stay good.
#[tokio::test]
async fn another_pas_refresh_token_is_invalid_grant_and_its_grant_stays_active() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let thief = app.registered_pa(OTHER_ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let rt = str_of(&tokens, "refresh_token");
    let got = oauth(
        &app,
        "demo",
        "token",
        &thief,
        "u1",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt),
            ("client_id", OTHER_ISS),
        ],
    )
    .await;
    assert_error(&got, 400, "invalid_grant");
    // Twice, so a second presentation cannot pass for a reuse by the owner either.
    let got = refresh(&app, &thief, "u1", rt, None).await;
    assert_error(&got, 400, "invalid_grant");
    assert_eq!(
        count(
            &app,
            "select count(*) from grants where revoked_at is not null"
        )
        .await,
        0
    );
    let (s, body) = refresh(&app, &pa, "u1", rt, None).await;
    assert_eq!(s, 200, "{body}");
}

/// PACT §5.3 (pactd): refresh tokens are opaque and stored only as their SHA-256.
#[tokio::test]
async fn refresh_tokens_are_stored_only_as_hashes() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let rt = str_of(&tokens, "refresh_token");
    let stored: Vec<Vec<u8>> = sqlx::query_scalar("select token_hash from refresh_tokens")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_ne!(stored[0], rt.as_bytes());
    assert_eq!(stored[0].len(), 32);
    assert_eq!(stored[0], pact_server::domain::secrets::hash(rt));
    let raw: i64 = sqlx::query_scalar("select count(*) from refresh_tokens where token_hash = $1")
        .bind(rt.as_bytes())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(raw, 0);
}

/// PACT §5.3, §5.5: once the grant is revoked (here by the person), its refresh
/// token is `invalid_grant` and the revocation keeps its reason.
#[tokio::test]
async fn refresh_after_the_grant_is_revoked_is_invalid_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let g = app
        .approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    let (_, tokens) = poll(&app, &pa, "u1", &auth.device_code).await;
    assert!(
        pact_db::grants::revoke(&app.db, g.id, "revoked by the user")
            .await
            .unwrap()
    );
    let rt = str_of(&tokens, "refresh_token");
    assert_error(
        &refresh(&app, &pa, "u1", rt, None).await,
        400,
        "invalid_grant",
    );
    assert_eq!(
        grant(&app, g.id).await.revoked_reason.as_deref(),
        Some("revoked by the user")
    );
    assert_eq!(count(&app, "select count(*) from refresh_tokens").await, 1);
}

// ---------------------------------------------------------------------------
// RFC 7009 revocation

/// RFC 7009, PACT §5.5: revoking a refresh token revokes its grant, so the
/// access token is refused at once with `invalid_token` (a wrong
/// `token_type_hint` does not matter, RFC 7009 §2.1).
#[tokio::test]
async fn revoking_a_refresh_token_revokes_its_grant_and_the_access_token_stops_working() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let access = str_of(&tokens, "access_token");
    let pa_jwt = pa.token("u1", app.audience());
    let res = app
        .send_delegated("demo", &pa_jwt, access, "m1", "Show me my orders", None)
        .await;
    assert_eq!(res.status(), 200);

    let got = oauth(
        &app,
        "demo",
        "revoke",
        &pa,
        "u1",
        &[
            ("token", str_of(&tokens, "refresh_token")),
            ("token_type_hint", "access_token"),
            ("client_id", ISS),
        ],
    )
    .await;
    assert_eq!(got, (200, json!({})));
    let reason: Option<String> =
        sqlx::query_scalar("select revoked_reason from grants where revoked_at is not null")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(reason.as_deref(), Some("revoked by the personal agent"));

    let res = app
        .send_delegated("demo", &pa_jwt, access, "m2", "Show me my orders", None)
        .await;
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        r#"Bearer realm="a2a", error="invalid_token""#
    );
    assert!(res.bytes().await.unwrap().is_empty());
}

/// A brand whose staff removed every scope still holds its grants (they would
/// work again with a scope put back), so its agents can still give them up.
#[tokio::test]
async fn a_grant_is_revoked_by_its_agent_while_the_brand_offers_no_scope() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let brand = pact_tests::brand_id("demo");
    for s in pact_db::scopes::list(&app.db, &brand).await.unwrap() {
        pact_db::scopes::remove(&app.db, &brand, &s.scope_id)
            .await
            .unwrap();
    }
    app.settle().await;
    let got = oauth(
        &app,
        "demo",
        "revoke",
        &pa,
        "u1",
        &[
            ("token", str_of(&tokens, "refresh_token")),
            ("client_id", ISS),
        ],
    )
    .await;
    assert_eq!(got, (200, json!({})));
    let revoked: i64 =
        sqlx::query_scalar("select count(*) from grants where revoked_at is not null")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(revoked, 1);
}

/// RFC 7009: revoking a delegation (access) token revokes its grant, and the
/// refresh token dies with it.
#[tokio::test]
async fn revoking_an_access_token_revokes_its_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let access = str_of(&tokens, "access_token");
    assert_eq!(revoke(&app, &pa, "u1", access).await, (200, json!({})));
    assert_eq!(
        count(
            &app,
            "select count(*) from grants where revoked_at is not null"
        )
        .await,
        1
    );
    let res = app
        .send_delegated(
            "demo",
            &pa.token("u1", app.audience()),
            access,
            "m1",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 401);
    assert_error(
        &refresh(&app, &pa, "u1", str_of(&tokens, "refresh_token"), None).await,
        400,
        "invalid_grant",
    );
}

/// RFC 7009 §2.2: a token pactd does not know still gets 200; nothing changes.
#[tokio::test]
async fn revoking_an_unknown_token_answers_200_and_changes_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    for token in ["no-such-token", "eyJhbGciOiJFUzI1NiJ9.e30.c2ln"] {
        assert_eq!(revoke(&app, &pa, "u1", token).await, (200, json!({})));
    }
    assert_eq!(
        count(&app, "select count(*) from grants where revoked_at is null").await,
        1
    );
}

/// RFC 7009 §2.1, PACT §5: a PA can only revoke its own tokens; presenting
/// another PA's still answers 200 (nothing is revealed) but revokes nothing.
#[tokio::test]
async fn revoking_another_pas_token_answers_200_and_leaves_its_grant_active() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let thief = app.registered_pa(OTHER_ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    for token in [
        str_of(&tokens, "refresh_token"),
        str_of(&tokens, "access_token"),
    ] {
        assert_eq!(revoke(&app, &thief, "u1", token).await, (200, json!({})));
    }
    assert_eq!(
        count(&app, "select count(*) from grants where revoked_at is null").await,
        1
    );
    let res = app
        .send_delegated(
            "demo",
            &pa.token("u1", app.audience()),
            str_of(&tokens, "access_token"),
            "m1",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let (s, body) = refresh(&app, &pa, "u1", str_of(&tokens, "refresh_token"), None).await;
    assert_eq!(s, 200, "{body}");
}

/// RFC 7009 §2.1, PACT §3: `token` is required (`invalid_request`), and the
/// endpoint authenticates the PA first (bare 401 without a PA-JWT).
#[tokio::test]
async fn a_revocation_without_a_token_is_invalid_request_and_without_a_pa_jwt_a_bare_401() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let got = oauth(&app, "demo", "revoke", &pa, "u1", &[("client_id", ISS)]).await;
    assert_error(&got, 400, "invalid_request");
    let res = app
        .http
        .post(app.oauth("demo", "revoke"))
        .form(&[("token", str_of(&tokens, "refresh_token"))])
        .send()
        .await
        .unwrap();
    assert_bare_401(res).await;
    assert_eq!(
        count(&app, "select count(*) from grants where revoked_at is null").await,
        1
    );
}

// ---------------------------------------------------------------------------
// Brands: card, metadata, JWKS

/// PACT §2, §5: a brand without scopes offers no delegation: no OAuth
/// endpoints (404, even to an authenticated PA, but only after authentication)
/// and no `userDelegation` scheme on its card.
#[tokio::test]
async fn a_brand_without_scopes_serves_no_oauth_endpoints_and_advertises_no_delegation() {
    let app = delegation_app().await;
    app.add_brand("plain", "Plain Shop").await;
    let pa = app.registered_pa(ISS).await;
    for endpoint in [".well-known/oauth-authorization-server", "jwks.json"] {
        let res = app
            .http
            .get(app.oauth("plain", endpoint))
            .send()
            .await
            .unwrap();
        assert_bare(res, 404).await;
    }
    // Revocation is not an endpoint of delegation to be offered: an agent
    // can always give up a grant the brand holds (RFC 7009 §2.2: 200 for a
    // token it does not know, too).
    let res = app
        .oauth_post(
            "plain",
            "revoke",
            &pa.token("u1", app.audience()),
            &[("client_id", ISS), ("token", "x")],
        )
        .await;
    assert_eq!(res.status(), 200);
    for endpoint in ["device_authorization", "token", "revoke"] {
        if endpoint != "revoke" {
            let res = app
                .oauth_post(
                    "plain",
                    endpoint,
                    &pa.token("u1", app.audience()),
                    &[
                        ("client_id", ISS),
                        ("scope", "orders:read"),
                        ("grant_type", DEVICE_GRANT),
                        ("device_code", "x"),
                        ("token", "x"),
                    ],
                )
                .await;
            assert_bare(res, 404).await;
        }
        let res = app
            .http
            .post(app.oauth("plain", endpoint))
            .form(&[("client_id", ISS)])
            .send()
            .await
            .unwrap();
        assert_bare_401(res).await;
    }
    assert_eq!(device_authorizations(&app).await, 0);

    let card: Value = app
        .http
        .get(app.state.config.card_url(&pact_tests::brand_id("plain")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        card["securitySchemes"].get("userDelegation").is_none(),
        "{card}"
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"paJwt": {"list": []}}}])
    );
}

/// PACT §2, §5: a brand with scopes advertises the device-code flow on its card,
/// with its scopes and descriptions verbatim, and a second requirement.
#[tokio::test]
async fn a_brand_with_scopes_advertises_the_device_code_flow_on_its_card() {
    let app = delegation_app().await;
    let card: Value = app
        .http
        .get(app.state.config.card_url(&pact_tests::brand_id("demo")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let issuer = format!("{}/oauth", app.iface("demo"));
    let scopes: serde_json::Map<String, Value> = pact_server::agent::demo_tools::DEMO_SCOPES
        .iter()
        .map(|(id, description)| ((*id).to_owned(), json!(description)))
        .collect();
    assert_eq!(scopes.len(), 2);
    assert_eq!(
        card["securitySchemes"]["userDelegation"],
        json!({"oauth2SecurityScheme": {
            "flows": {"deviceCode": {
                "deviceAuthorizationUrl": format!("{issuer}/device_authorization"),
                "tokenUrl": format!("{issuer}/token"),
                "scopes": scopes,
            }},
            "oauth2MetadataUrl": format!("{issuer}/.well-known/oauth-authorization-server"),
        }})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([
            {"schemes": {"paJwt": {"list": []}}},
            {"schemes": {"paJwt": {"list": []}, "userDelegation": {"list": []}}},
        ])
    );
    // The metadata URL on the card is where the metadata is served.
    let url =
        card["securitySchemes"]["userDelegation"]["oauth2SecurityScheme"]["oauth2MetadataUrl"]
            .as_str()
            .unwrap();
    let res = app.http.get(url).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let metadata: Value = res.json().await.unwrap();
    assert_eq!(metadata["issuer"], issuer);
}

/// PACT §1, §5.7 (RFC 8414): the metadata names the issuer `{iface}/oauth`,
/// every endpoint, the scopes, both grant types, the PA-JWT client
/// authentication and the brand's `authorization_details` types.
#[tokio::test]
async fn the_authorization_server_metadata_lists_endpoints_scopes_grant_types_and_detail_types() {
    let app = delegation_app().await;
    let res = app
        .http
        .get(app.oauth("demo", ".well-known/oauth-authorization-server"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    // Public and cacheable, like the card (no secrets in it).
    assert_eq!(res.headers()["cache-control"], "public, max-age=300");
    let m: Value = res.json().await.unwrap();
    let issuer = format!("{}/oauth", app.iface("demo"));
    assert_eq!(m["issuer"], issuer);
    assert_eq!(
        m["device_authorization_endpoint"],
        format!("{issuer}/device_authorization")
    );
    assert_eq!(m["token_endpoint"], format!("{issuer}/token"));
    assert_eq!(m["revocation_endpoint"], format!("{issuer}/revoke"));
    assert_eq!(m["jwks_uri"], format!("{issuer}/jwks.json"));
    assert_eq!(
        m["scopes_supported"],
        json!(["orders:cancel", "orders:read"])
    );
    assert_eq!(
        m["grant_types_supported"],
        json!([DEVICE_GRANT, "refresh_token"])
    );
    assert_eq!(
        m["token_endpoint_auth_methods_supported"],
        json!(["pa_jwt_bearer"])
    );
    assert_eq!(
        m["authorization_details_types_supported"],
        json!(["order_cancellation"])
    );
    // The delegation tokens it issues carry this issuer.
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    assert_eq!(jwt_part(str_of(&tokens, "access_token"), 1)["iss"], issuer);
}

/// PACT §5.4: the JWKS publishes the ES256 public keys that sign delegation
/// tokens, each with `kid`, `alg` and `use`, and never a private member.
#[tokio::test]
async fn the_jwks_publishes_es256_public_keys_only() {
    let app = delegation_app().await;
    let res = app
        .http
        .get(app.oauth("demo", "jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let doc: Value = res.json().await.unwrap();
    let keys = doc["keys"].as_array().unwrap();
    assert!(!keys.is_empty());
    for k in keys {
        assert_eq!(k["kty"], "EC", "{k}");
        assert_eq!(k["crv"], "P-256", "{k}");
        assert_eq!(k["alg"], "ES256", "{k}");
        assert_eq!(k["use"], "sig", "{k}");
        assert!(!str_of(k, "kid").is_empty());
        assert!(k["x"].is_string() && k["y"].is_string(), "{k}");
        for private in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            assert!(k.get(private).is_none(), "{private} published: {k}");
        }
    }
    // The key that signs a delegation token is among them.
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let header = jwt_part(str_of(&tokens, "access_token"), 0);
    assert_eq!(header["typ"], "at+jwt");
    assert_eq!(header["alg"], "ES256");
    assert!(keys.iter().any(|k| k["kid"] == header["kid"]), "{header}");
}

// ---------------------------------------------------------------------------
// §5.2 Consent (the domain function the pages call)

/// PACT §5.2: only requested scopes (at least one) and requested details can be
/// granted; a refused approval changes nothing and the request stays decidable.
#[tokio::test]
async fn consent_cannot_grant_what_was_not_requested_and_a_refusal_changes_nothing() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let id = authorization(&app, &auth.user_code).await.id;
    let now = OffsetDateTime::now_utc();
    for scopes in [
        set(&["orders:cancel"]),
        set(&["orders:read", "orders:cancel"]),
        set(&[]),
    ] {
        let got = consent::approve(
            &app.state,
            Approval {
                authorization_id: id,
                user_sub: &"alice".into(),
                scopes: scopes.clone(),
                authorization_details: None,
            },
            now,
        )
        .await;
        assert!(
            matches!(got, Err(ConsentError::ScopesNotRequested)),
            "{scopes:?}: {got:?}"
        );
    }
    let got = consent::approve(
        &app.state,
        Approval {
            authorization_id: id,
            user_sub: &"alice".into(),
            scopes: set(&["orders:read"]),
            authorization_details: Some(
                json!([{"type": "order_cancellation", "order_ids": ["DEMO-1"]}]),
            ),
        },
        now,
    )
    .await;
    assert!(
        matches!(got, Err(ConsentError::DetailsNotRequested)),
        "{got:?}"
    );

    assert_eq!(grants(&app).await, 0);
    let stored = authorization(&app, &auth.user_code).await;
    assert_eq!(stored.status.as_str(), "pending");
    assert_eq!((stored.user_sub, stored.grant_id), (None, None));
    // Still decidable: the person can approve what was asked.
    let g = app
        .approve(&auth.user_code, "alice", &["orders:read"])
        .await;
    assert_eq!(g.scopes, vec!["orders:read".to_owned()]);
}

/// PACT §5.2: a decision is final and must come in time: approving or denying
/// an approved, denied or expired authorization fails and changes nothing.
#[tokio::test]
async fn consent_cannot_decide_an_authorization_twice_or_after_it_expired() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let approve = |id: Uuid| {
        let state = app.state.clone();
        async move {
            consent::approve(
                &state,
                Approval {
                    authorization_id: id,
                    user_sub: &"mallory".into(),
                    scopes: set(&["orders:read"]),
                    authorization_details: None,
                },
                OffsetDateTime::now_utc(),
            )
            .await
        }
    };
    let deny = |id: Uuid| {
        let state = app.state.clone();
        async move {
            consent::deny(
                &state,
                id,
                Some(&"mallory".into()),
                OffsetDateTime::now_utc(),
            )
            .await
        }
    };

    let approved = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let g = app
        .approve(&approved.user_code, "alice", &["orders:read"])
        .await;
    let approved_id = authorization(&app, &approved.user_code).await.id;
    let denied = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.deny(&denied.user_code).await;
    let denied_id = authorization(&app, &denied.user_code).await.id;
    for id in [approved_id, denied_id] {
        let got = approve(id).await;
        assert!(matches!(got, Err(ConsentError::AlreadyDecided)), "{got:?}");
        let got = deny(id).await;
        assert!(matches!(got, Err(ConsentError::AlreadyDecided)), "{got:?}");
    }

    let late = app.device_authorize(&pa, "u1", "orders:read", None).await;
    expire(&app, &late.user_code, "1 second").await;
    let late_id = authorization(&app, &late.user_code).await.id;
    let got = approve(late_id).await;
    assert!(matches!(got, Err(ConsentError::Expired)), "{got:?}");
    let got = deny(late_id).await;
    assert!(matches!(got, Err(ConsentError::Expired)), "{got:?}");
    let got = approve(Uuid::new_v4()).await;
    assert!(matches!(got, Err(ConsentError::NotFound)), "{got:?}");

    // Only the first approval made a grant; every decision stands as it was.
    assert_eq!(grants(&app).await, 1);
    let first = authorization(&app, &approved.user_code).await;
    assert_eq!(
        (first.status.as_str(), first.grant_id),
        ("approved", Some(g.id))
    );
    assert_eq!(first.user_sub.as_deref(), Some("alice"));
    assert_eq!(
        authorization(&app, &denied.user_code).await.status.as_str(),
        "denied"
    );
    let late = authorization(&app, &late.user_code).await;
    assert_eq!((late.status.as_str(), late.user_sub), ("pending", None));
}

/// PACT §5.2, §5.5 step-up: a second approval for the same (brand, PA, user)
/// yields one grant with the union of scopes. The older grant keeps working
/// until the PA redeems the new one (approving a link the PA never redeems
/// cannot cut it off); then it is revoked as superseded. Other users' grants
/// are untouched.
#[tokio::test]
async fn a_step_up_approval_grants_the_union_and_supersedes_the_older_grant() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let first = app.connect(&pa, "u1", "alice", &["orders:read"]).await;
    let first_grant: Uuid = jwt_part(str_of(&first, "access_token"), 1)["grant_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let bob = app.connect(&pa, "u2", "bob", &["orders:read"]).await;
    let bob_grant: Uuid = jwt_part(str_of(&bob, "access_token"), 1)["grant_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let step_up = app.device_authorize(&pa, "u1", "orders:cancel", None).await;
    let g = app
        .approve(&step_up.user_code, "alice", &["orders:cancel"])
        .await;
    assert_ne!(g.id, first_grant.into());
    assert_eq!(
        g.scopes,
        vec!["orders:cancel".to_owned(), "orders:read".to_owned()]
    );
    assert!(grant(&app, first_grant).await.revoked_at.is_none());
    let pa_jwt = pa.token("u1", app.audience());
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            str_of(&first, "access_token"),
            "m0",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200, "not cut off before it redeems");

    let (s, tokens) = poll(&app, &pa, "u1", &step_up.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(tokens["scope"], "orders:cancel orders:read");
    assert_eq!(
        jwt_part(str_of(&tokens, "access_token"), 1)["grant_id"],
        g.id.to_string()
    );
    let old = grant(&app, first_grant).await;
    assert!(old.revoked_at.is_some());
    let reason = old.revoked_reason.unwrap_or_default();
    assert!(reason.starts_with("superseded"), "{reason}");
    // Issue 28, finding 3: with the grant that superseded it.
    let (kind, action, detail) = ended_entry(&app, first_grant).await;
    assert_eq!(
        (kind.as_str(), action.as_str()),
        ("system", "grant.superseded")
    );
    assert_eq!(detail["superseded_by"], g.id.to_string());
    assert!(grant(&app, g.id).await.revoked_at.is_none());
    assert!(grant(&app, bob_grant).await.revoked_at.is_none());

    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            str_of(&first, "access_token"),
            "m1",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 401, "the superseded grant's token is dead");
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            str_of(&tokens, "access_token"),
            "m2",
            "Show me my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    assert_error(
        &refresh(&app, &pa, "u1", str_of(&first, "refresh_token"), None).await,
        400,
        "invalid_grant",
    );
}

// ---------------------------------------------------------------------------
// Housekeeping

/// PACT §7 "codes expire": the sweep deletes authorizations expired more than an
/// hour ago (and finished ones decided that long ago) but keeps live ones and
/// recently expired ones, which still poll as `expired_token`.
#[tokio::test]
async fn housekeeping_deletes_authorizations_an_hour_past_expiry_and_keeps_the_rest() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let live = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let stale = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let recent = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let done = app.device_authorize(&pa, "u1", "orders:read", None).await;
    app.approve(&done.user_code, "alice", &["orders:read"])
        .await;
    assert_eq!(poll(&app, &pa, "u1", &done.device_code).await.0, 200);
    expire(&app, &stale.user_code, "2 hours").await;
    expire(&app, &recent.user_code, "30 minutes").await;
    sqlx::query(
        "update device_authorizations set decided_at = now() - interval '2 hours' where user_code = $1",
    )
    .bind(done.user_code.replace('-', ""))
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(device_authorizations(&app).await, 4);

    pact_server::housekeeping::sweep(&app.state.node, OffsetDateTime::now_utc()).await;

    let left: BTreeSet<String> = sqlx::query_scalar("select user_code from device_authorizations")
        .fetch_all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let expected: BTreeSet<String> = [&live, &recent]
        .iter()
        .map(|a| a.user_code.replace('-', ""))
        .collect();
    assert_eq!(left, expected);
    // The grant outlives the authorization that created it.
    assert_eq!(
        count(&app, "select count(*) from grants where revoked_at is null").await,
        1
    );
    assert_error(
        &poll(&app, &pa, "u1", &live.device_code).await,
        400,
        "authorization_pending",
    );
    assert_error(
        &poll(&app, &pa, "u1", &recent.device_code).await,
        400,
        "expired_token",
    );
    assert_error(
        &poll(&app, &pa, "u1", &stale.device_code).await,
        400,
        "invalid_grant",
    );
}

/// Staff disable an agent while a person's code for it is still pending:
/// approving it afterwards grants nothing (the person is told the store
/// turned the agent off), so re-enabling the agent revives no access it
/// was refused. Before, the approval made a live grant for the disabled
/// agent, which came back to life with it.
#[tokio::test]
async fn a_code_of_an_agent_disabled_meanwhile_cannot_be_approved() {
    let app = delegation_app().await;
    let pa = app.registered_pa(ISS).await;
    let auth = app.device_authorize(&pa, "u1", "orders:read", None).await;
    let pending = consent::find_by_user_code(&app.state, &auth.user_code)
        .await
        .unwrap()
        .expect("live user code");
    let staff = pact_server::admin::role::Actor {
        kind: "cli",
        name: "desk".into(),
        role: pact_server::admin::role::Role::Owner,
        brands: None,
    };
    for (enabled, why) in [(false, Some("compromised")), (true, None)] {
        let mut tx = app.db.begin().await.unwrap();
        pact_server::admin::ops::agents::set_enabled(&mut tx, &staff, None, ISS, enabled, why)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        if !enabled {
            let got = consent::approve(
                &app.state,
                Approval {
                    authorization_id: pending.id,
                    user_sub: &"alice".into(),
                    scopes: set(&["orders:read"]),
                    authorization_details: None,
                },
                OffsetDateTime::now_utc(),
            )
            .await;
            assert!(matches!(got, Err(ConsentError::AgentOff)), "{got:?}");
        }
    }
    app.settle().await;
    assert_eq!(grants(&app).await, 0);
    let (status, body) = app.poll(&pa, "u1", &auth.device_code).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"], "authorization_pending", "{body}");
}
