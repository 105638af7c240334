//! Sending under a delegation token (PACT §5.4–5.7): what a bad token gets,
//! how a context binds to one user, step-up, the gateway's enforcement of
//! `authorization_details`, receipts and their chain, key rotation, two nodes
//! on one database, and disabling a personal agent.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pact_jose::ProviderKeySet;
use pact_proto::oauth::{Receipt, ReceiptClaims};
use pact_server::Config;
use pact_server::agent::demo::{ASK_ORDER_NUMBER, NEED_ACCOUNT};
use pact_server::agent::demo_tools::seed_orders;
use pact_tests::TestApp;
use reqwest::Response;
use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use crate::{assert_a2a_error, assert_bare_401};

const ISS: &str = "https://pa.example";
const OTHER_ISS: &str = "https://other-pa.example";
const SUB: &str = "pa-user-1";

/// pactd whose demo brand offers delegation, polling allowed every second.
async fn delegated_app() -> TestApp {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    app
}

fn access(tokens: &Value) -> String {
    tokens["access_token"].as_str().unwrap().to_owned()
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Segment `index` of a compact JWS, decoded as JSON.
fn jws_json(jws: &str, index: usize) -> Value {
    let segment = jws.split('.').nth(index).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(segment).unwrap()).unwrap()
}

fn grant_of(token: &str) -> Uuid {
    jws_json(token, 1)["grant_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// PACT §5.5: exactly this 401, and no body.
async fn assert_invalid_token(res: Response) {
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer realm="a2a", error="invalid_token""#)
    );
    assert!(res.bytes().await.unwrap().is_empty(), "a 401 has no body");
}

/// A 200 A2A reply, as JSON.
async fn ok_json(res: Response) -> Value {
    let status = res.status();
    let content_type = res.headers().get("content-type").cloned();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_type.unwrap(), "application/a2a+json");
    body
}

fn text(message: &Value) -> &str {
    message["parts"][0]["text"].as_str().unwrap()
}

/// Everything a turn can write, counted.
#[derive(Debug, PartialEq, Eq)]
struct Footprint {
    conversations: i64,
    bound_conversations: i64,
    messages: i64,
    receipts: i64,
    demo_orders: i64,
    cancelled_orders: i64,
    used_grants: i64,
    device_authorizations: i64,
}

async fn footprint(app: &TestApp) -> Footprint {
    let row: (i64, i64, i64, i64, i64, i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from conversations), \
                (select count(*) from conversations where user_sub is not null), \
                (select count(*) from messages), \
                (select count(*) from receipts), \
                (select count(*) from demo_orders), \
                (select count(*) from demo_orders where status = 'cancelled'), \
                (select count(*) from grants where last_used_at is not null), \
                (select count(*) from device_authorizations)",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    Footprint {
        conversations: row.0,
        bound_conversations: row.1,
        messages: row.2,
        receipts: row.3,
        demo_orders: row.4,
        cancelled_orders: row.5,
        used_grants: row.6,
        device_authorizations: row.7,
    }
}

/// The `pact.receipt` of a reply message, as sent.
fn receipt(message: &Value) -> Receipt {
    serde_json::from_value(message["metadata"]["pact.receipt"].clone()).unwrap()
}

/// The receipt of a reply message, verified against the brand's published JWKS.
async fn verified_receipt(app: &TestApp, message: &Value) -> ReceiptClaims {
    let keys = ProviderKeySet::from_public_jwks(&app.provider_jwks().await).unwrap();
    pact_jose::verify_receipt(&receipt(message), &keys).unwrap()
}

/// The live device authorization behind a step-up link.
async fn authorization_behind(
    app: &TestApp,
    link: &str,
) -> pact_db::device_authorizations::DeviceAuthorization {
    assert!(
        link.starts_with(&format!("{}/device?user_code=", app.base_url)),
        "{link}"
    );
    let url = url::Url::parse(link).unwrap();
    let (_, user_code) = url
        .query_pairs()
        .find(|(k, _)| k == "user_code")
        .expect("user_code in the link");
    pact_server::consent::find_by_user_code(&app.state, &user_code)
        .await
        .unwrap()
        .expect("the step-up link holds a live user code")
}

async fn order_status(app: &TestApp, user: &str, order_id: &str) -> String {
    pact_db::demo_orders::find(
        &app.db,
        &pact_tests::brand_id("demo"),
        &user.into(),
        order_id,
    )
    .await
    .unwrap()
    .unwrap()
    .status
    .as_str()
    .to_owned()
}

// ---------------------------------------------------------------------------
// Bad delegation tokens
// ---------------------------------------------------------------------------

/// PACT §5.4–5.5: a token's `aud` is one interface URL, so a token for one
/// brand is an invalid token at another — and the refusal writes nothing.
#[tokio::test]
async fn a_token_for_one_brand_is_refused_at_another_and_the_refusal_writes_nothing() {
    let app = delegated_app().await;
    app.add_brand("acme", "Acme").await;
    pact_db::scopes::upsert(
        &app.db,
        &pact_tests::brand_id("acme"),
        "tickets:read",
        "See your support tickets",
        false,
    )
    .await
    .unwrap();
    let pa = app.registered_pa(ISS).await;
    let demo = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let acme = access(
        &app.node_connect("acme", &pa, SUB, "alice", &["tickets:read"], None)
            .await,
    );
    let pa_jwt = pa.token(SUB, app.audience());

    let before = footprint(&app).await;
    let res = app
        .node_send("acme", &pa_jwt, Some(&bearer(&demo)), "m1", "hello", None)
        .await;
    assert_invalid_token(res).await;
    let res = app
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&acme)),
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);

    // Each token is fine where it belongs.
    for (brand, token) in [("acme", &acme), ("demo", &demo)] {
        let res = app
            .node_send(brand, &pa_jwt, Some(&bearer(token)), "m2", "hello", None)
            .await;
        let v = ok_json(res).await;
        assert_eq!(
            verified_receipt(&app, &v["message"]).await.brand,
            app.iface(brand)
        );
    }
}

/// PACT §5.5: `client_id` must equal the `iss` of the PA-JWT the token travels
/// with, so a token is useless to any other registered PA.
#[tokio::test]
async fn a_token_presented_with_another_registered_pas_pa_jwt_is_refused() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let other = app.registered_pa(OTHER_ISS).await;
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);

    let before = footprint(&app).await;
    let res = app
        .send_delegated(
            "demo",
            &other.token(SUB, app.audience()),
            &token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);

    // The other PA's PA-JWT on its own is fine; so is the token with its own PA.
    let res = app
        .send(
            "demo",
            &other.token(SUB, app.audience()),
            "m1",
            "when are you open?",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let res = app
        .send_delegated(
            "demo",
            &pa.token(SUB, app.audience()),
            &token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));
}

/// PACT §5.4–5.5: the token's signature covers header and claims; any change,
/// a token of another kind (a receipt is signed with the same key), `alg:
/// none` or garbage is an invalid token.
#[tokio::test]
async fn a_tampered_forged_or_garbage_token_is_refused_and_writes_nothing() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    // A receipt to replay as a token.
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m0", "hello", None)
        .await;
    let receipt_jws = receipt(&ok_json(res).await["message"]).jws;

    let segments: Vec<&str> = token.split('.').collect();
    let flip = |segment: &str| {
        let mut bytes = segment.as_bytes().to_vec();
        let i = bytes.len() / 2;
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    let mut wider = jws_json(&token, 1);
    wider["scope"] = json!("orders:read orders:cancel");
    let mut header = jws_json(&token, 0);
    header["alg"] = json!("none");
    let bad = [
        format!("{}.{}.{}", segments[0], flip(segments[1]), segments[2]),
        format!("{}.{}.{}", segments[0], segments[1], flip(segments[2])),
        format!(
            "{}.{}.{}",
            segments[0],
            URL_SAFE_NO_PAD.encode(wider.to_string()),
            segments[2]
        ),
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            segments[1]
        ),
        format!("{}.{}", segments[0], segments[1]),
        receipt_jws,
        "garbage".to_owned(),
        "a.b.c".to_owned(),
        "a".repeat(9000),
    ];

    let before = footprint(&app).await;
    for (i, t) in bad.iter().enumerate() {
        let res = app
            .send_delegated("demo", &pa_jwt, t, &format!("m{i}"), "show my orders", None)
            .await;
        assert_invalid_token(res).await;
    }
    assert_eq!(footprint(&app).await, before);
}

/// PACT §5.5: the header is `X-A2A-User-Delegation: Bearer <token>`; any other
/// shape (no scheme, another scheme, no token, two headers) is an invalid
/// token, not an anonymous turn.
#[tokio::test]
async fn a_delegation_header_without_exactly_one_bearer_token_is_refused() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);

    let before = footprint(&app).await;
    for value in [
        token.clone(),
        format!("Basic {token}"),
        format!("Bearer  {token}"),
        format!("Bearer {token} {token}"),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        String::new(),
    ] {
        let res = app
            .node_send("demo", &pa_jwt, Some(&value), "m1", "show my orders", None)
            .await;
        assert_invalid_token(res).await;
    }
    let res = app
        .http
        .post(app.node_a2a_url("demo", "message:send"))
        .bearer_auth(&pa_jwt)
        .header("X-A2A-User-Delegation", bearer(&token))
        .header("X-A2A-User-Delegation", bearer(&token))
        .json(&json!({"message": {"messageId": "m1", "role": "ROLE_USER",
                                  "parts": [{"text": "show my orders"}]}}))
        .send()
        .await
        .unwrap();
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);

    // The lower-case scheme is still a Bearer credential (RFC 6750, RFC 9110 §11.1).
    let res = app
        .node_send(
            "demo",
            &pa_jwt,
            Some(&format!("bearer {token}")),
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));
}

/// PACT §5.5: the token's `exp`, and the grant's own expiry in the database,
/// both end the delegation.
#[tokio::test]
async fn an_expired_token_or_an_expired_grant_is_refused() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);

    // A token signed by pactd itself, for a live grant, but past its `exp`.
    let expired = app.mint_delegation_token(&token, |c| {
        c.iat -= 600;
        c.exp = c.iat + 540;
    });
    let fresh = app.mint_delegation_token(&token, |_| {});
    let before = footprint(&app).await;
    let res = app
        .send_delegated("demo", &pa_jwt, &expired, "m1", "show my orders", None)
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);
    // The same claims with a current lifetime pass, so `exp` was the reason.
    let res = app
        .send_delegated("demo", &pa_jwt, &fresh, "m1", "show my orders", None)
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));

    // A token this node verified (its signature remembered,
    // `pact-jose/src/signature_memo.rs`) is refused once the clock passes its
    // `exp` and the 5 s leeway.
    let short = app.mint_delegation_token(&token, |c| c.exp = c.iat + 60);
    let res = app
        .send_delegated("demo", &pa_jwt, &short, "m3", "show my orders", None)
        .await;
    assert_eq!(res.status(), 200);
    let exp = jws_json(&short, 1)["exp"].as_i64().unwrap();
    let wait = exp + 6 - app.clock.now().unix_timestamp();
    app.clock
        .advance(std::time::Duration::from_secs(wait.max(0) as u64));
    let res = app
        .send_delegated("demo", &pa_jwt, &short, "m4", "show my orders", None)
        .await;
    assert_invalid_token(res).await;

    // The grant expires while the token has not.
    let done =
        sqlx::query("update grants set expires_at = now() - interval '1 minute' where id = $1")
            .bind(grant_of(&token))
            .execute(&app.db)
            .await
            .unwrap();
    assert_eq!(done.rows_affected(), 1);
    let before = footprint(&app).await;
    for t in [&token, &fresh] {
        let res = app
            .send_delegated("demo", &pa_jwt, t, "m2", "show my orders", None)
            .await;
        assert_invalid_token(res).await;
    }
    assert_eq!(footprint(&app).await, before);
}

/// PACT §5.5: a revoked grant is refused on the very next request, with no
/// waiting for the token to expire.
#[tokio::test]
async fn a_revoked_grant_is_refused_on_the_very_next_request() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    let ctx = ok_json(res).await["message"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    assert!(
        pact_db::grants::revoke(&app.db, grant_of(&token).into(), "test")
            .await
            .unwrap()
    );
    let before = footprint(&app).await;
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m2", "show my orders", Some(&ctx))
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);
    // Nor does a first message start a context (its claim is made with the
    // grant's read, only for a live grant).
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m3", "show my orders", None)
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);
    // Nor is the delegated turn's stored reply read again by leaving the
    // token out of a retry: its account data and receipt stay behind it.
    let res = app
        .send("demo", &pa_jwt, "m1", "show my orders", Some(&ctx))
        .await;
    assert_eq!(res.status(), 400);
    let body = res.text().await.unwrap();
    assert!(body.contains("user delegation"), "{body}");
    assert!(!body.contains("SHOP-"), "{body}");
    assert_eq!(footprint(&app).await, before);
}

/// PACT §4: a first message retried without contextId (the PA lost the reply
/// that named the context) gets the stored reply, its receipt included, and
/// nothing runs or is stored again; a new messageId starts a new context.
#[tokio::test]
async fn a_first_message_retried_without_a_context_gets_its_stored_reply() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let first = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
            .await,
    )
    .await;
    let before = footprint(&app).await;
    let again = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
            .await,
    )
    .await;
    assert_eq!(again, first);
    assert_eq!(footprint(&app).await, before, "nothing ran again");
    let other = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m2", "show my orders", None)
            .await,
    )
    .await;
    assert_ne!(
        other["message"]["contextId"], first["message"]["contextId"],
        "{other}"
    );
}

/// A delegated first turn's claim is its context row (the message is written
/// with the reply). A copy of the message that finds a young one waits for it
/// (and is told to retry later); one left by a node that stopped mid-turn,
/// older than any turn can run, is taken over by the PA's retry: the turn
/// runs once, in that context, and its reply and receipt are stored there.
#[tokio::test]
async fn a_first_turn_left_by_a_stopped_node_is_taken_over_by_the_retry() {
    // A short request timeout keeps a copy's wait for the young claim at 1 s.
    let app = TestApp::spawn_with(|c| {
        c.delegation.poll_interval_secs = 1;
        c.request_timeout = std::time::Duration::from_secs(3);
    })
    .await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let now = OffsetDateTime::now_utc();
    let (left, young) = (Uuid::new_v4(), Uuid::new_v4());
    for (id, message_id, age) in [(left, "m-left", 11), (young, "m-young", 1)] {
        sqlx::query(
            "insert into conversations (id, brand_id, pa_issuer, pa_sub, user_sub, \
                                        first_message_id, created_at) \
             values ($1, 'demo', $2, $3, 'alice', $4, $5)",
        )
        .bind(id)
        .bind(ISS)
        .bind(SUB)
        .bind(message_id)
        .bind(now - Duration::minutes(age))
        .execute(&app.db)
        .await
        .unwrap();
    }

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m-young", "show my orders", None)
        .await;
    assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;

    let before = footprint(&app).await;
    let taken = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m-left", "show my orders", None)
            .await,
    )
    .await;
    assert_eq!(taken["message"]["contextId"], left.to_string(), "{taken}");
    assert!(
        taken["message"]["metadata"]["pact.receipt"].is_object(),
        "{taken}"
    );
    let again = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m-left", "show my orders", None)
            .await,
    )
    .await;
    assert_eq!(again, taken);
    let after = footprint(&app).await;
    assert_eq!(
        after.conversations, before.conversations,
        "no second context"
    );
    assert_eq!(after.messages, before.messages + 1, "one message");
    assert_eq!(after.receipts, before.receipts + 1, "one receipt");
}

/// PACT §5.5 (checked against the grant row, not only the signature): a token
/// pactd signed is still refused when its grant is unknown or belongs to
/// another user, PA or brand than the token says.
#[tokio::test]
async fn a_correctly_signed_token_is_refused_when_its_grant_does_not_match_it() {
    let app = delegated_app().await;
    app.add_brand("acme", "Acme").await;
    let pa = app.registered_pa(ISS).await;
    let other = app.registered_pa(OTHER_ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);

    let cases = [
        (
            "demo",
            pa_jwt.clone(),
            app.mint_delegation_token(&token, |c| c.sub = "mallory".to_owned()),
        ),
        (
            "demo",
            pa_jwt.clone(),
            app.mint_delegation_token(&token, |c| c.grant_id = Uuid::new_v4().to_string()),
        ),
        (
            "demo",
            other.token(SUB, app.audience()),
            app.mint_delegation_token(&token, |c| c.client_id = OTHER_ISS.to_owned()),
        ),
        (
            "acme",
            pa_jwt.clone(),
            app.mint_delegation_token(&token, |c| {
                c.iss = app.state.config.oauth_issuer(&pact_tests::brand_id("acme"));
                c.aud = app.iface("acme");
            }),
        ),
    ];
    let before = footprint(&app).await;
    for (brand, jwt, t) in &cases {
        let res = app
            .node_send(brand, jwt, Some(&bearer(t)), "m1", "show my orders", None)
            .await;
        assert_invalid_token(res).await;
    }
    assert_eq!(footprint(&app).await, before);

    // Minted the same way but matching its grant, a token works: the grant was the reason.
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &app.mint_delegation_token(&token, |_| {}),
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));
}

/// A token signed by pactd's own key but naming a scope its grant does not
/// hold (a key that leaked, a bug in issuance) acts with the grant's scopes
/// only: cancelling asks for the missing scope instead of cancelling. The
/// grant is the record of what the person allowed.
#[tokio::test]
async fn a_token_naming_more_scopes_than_its_grant_acts_with_the_grants_only() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();
    let wider =
        app.mint_delegation_token(&token, |c| c.scope = "orders:read orders:cancel".to_owned());
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &wider,
            "m1",
            &format!("cancel {order}"),
            None,
        )
        .await;
    let v = ok_json(res).await;
    assert_eq!(
        v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{v}"
    );
    assert_eq!(
        v["task"]["metadata"]["pact.missingScopes"],
        json!(["orders:cancel"])
    );
}

// ---------------------------------------------------------------------------
// Context binding
// ---------------------------------------------------------------------------

/// PACT §5.5: a context that has run as one `sub` refuses another with
/// `INVALID_PARAMS` — for a new turn and for a retried `messageId` alike, so
/// the other user's stored reply is never handed out under a second grant.
#[tokio::test]
async fn a_context_that_ran_as_one_user_refuses_a_delegated_turn_as_another() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let alice = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let bob = access(&app.connect(&pa, SUB, "bob", &["orders:read"]).await);

    let res = app
        .send_delegated("demo", &pa_jwt, &alice, "m1", "show my orders", None)
        .await;
    let ctx = ok_json(res).await["message"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    let before = footprint(&app).await;
    for message_id in ["m2", "m1"] {
        let res = app
            .send_delegated(
                "demo",
                &pa_jwt,
                &bob,
                message_id,
                "show my orders",
                Some(&ctx),
            )
            .await;
        assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;
    }
    assert_eq!(footprint(&app).await, before);
    let bound: Option<String> =
        sqlx::query_scalar("select user_sub from conversations where id = $1::uuid")
            .bind(&ctx)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(bound.as_deref(), Some("alice"));

    // Bob's grant works in a context of its own; alice's still works in hers.
    let res = app
        .send_delegated("demo", &pa_jwt, &bob, "m2", "show my orders", None)
        .await;
    let v = ok_json(res).await;
    assert_eq!(verified_receipt(&app, &v["message"]).await.user, "bob");
    let res = app
        .send_delegated("demo", &pa_jwt, &alice, "m2", "show my orders", Some(&ctx))
        .await;
    assert_eq!(res.status(), 200);
}

/// PACT §5.5: a context started without delegation may continue with it, and
/// is bound to that user from then on.
#[tokio::test]
async fn a_context_started_without_delegation_may_continue_with_it() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let res = app.send("demo", &pa_jwt, "m1", "hello", None).await;
    let ctx = ok_json(res).await["message"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    let alice = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let res = app
        .send_delegated("demo", &pa_jwt, &alice, "m2", "show my orders", Some(&ctx))
        .await;
    let v = ok_json(res).await;
    assert_eq!(v["message"]["contextId"], ctx.as_str());
    let reply = text(&v["message"]);
    for order in seed_orders(&pact_tests::brand_id("demo"), &"alice".into()) {
        assert!(reply.contains(&order.order_id), "{reply}");
    }
    let bound: Option<String> =
        sqlx::query_scalar("select user_sub from conversations where id = $1::uuid")
            .bind(&ctx)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(bound.as_deref(), Some("alice"));
}

/// PACT §5.5 and §3: a delegated context may go on without a token, but then
/// the turn runs with the PA-JWT's authority alone — no account data, no receipt.
#[tokio::test]
async fn a_delegated_context_may_continue_without_a_token_but_sees_no_account_data() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let alice = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let res = app
        .send_delegated("demo", &pa_jwt, &alice, "m1", "show my orders", None)
        .await;
    let ctx = ok_json(res).await["message"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let orders = seed_orders(&pact_tests::brand_id("demo"), &"alice".into());

    let res = app
        .send("demo", &pa_jwt, "m2", "show my orders", Some(&ctx))
        .await;
    let v = ok_json(res).await;
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(task["contextId"], ctx.as_str());
    let said = serde_json::to_string(&v).unwrap();
    for order in &orders {
        assert!(!said.contains(&order.order_id), "{said}");
    }
    assert!(task["status"]["message"].get("metadata").is_none());

    let res = app
        .send("demo", &pa_jwt, "m3", "when are you open?", Some(&ctx))
        .await;
    let v = ok_json(res).await;
    assert_eq!(text(&v["message"]), pact_server::agent::demo::HOURS);
    assert!(v["message"].get("metadata").is_none());
    let receipts: i64 = sqlx::query_scalar("select count(*) from receipts")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(receipts, 1, "only the delegated turn has a receipt");

    // With the token again, the same context answers from the account.
    let res = app
        .send_delegated("demo", &pa_jwt, &alice, "m4", "show my orders", Some(&ctx))
        .await;
    assert!(text(&ok_json(res).await["message"]).contains(&orders[0].order_id));
}

// ---------------------------------------------------------------------------
// Step-up
// ---------------------------------------------------------------------------

/// PACT §5.5 step-up: an account question without a token is not a failure
/// but a task in `TASK_STATE_AUTH_REQUIRED` naming the missing scope and a
/// live verification link created for this PA and user; after the PA runs
/// §5.1 for the missing scope, the same context answers.
#[tokio::test]
async fn without_a_token_an_account_question_gets_a_step_up_task_that_a_new_grant_answers() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());

    let res = app
        .send("demo", &pa_jwt, "m1", "show my orders", None)
        .await;
    let v = ok_json(res).await;
    assert!(v.get("message").is_none(), "{v}");
    let task = &v["task"];
    assert!(!task["id"].as_str().unwrap().is_empty());
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    let ctx = task["contextId"].as_str().unwrap().to_owned();
    let message = &task["status"]["message"];
    assert_eq!(message["role"], "ROLE_AGENT");
    assert_eq!(message["contextId"], ctx.as_str());
    let parts = message["parts"].as_array().unwrap();
    assert!(!parts.is_empty());
    for part in parts {
        assert_eq!(part.as_object().unwrap().len(), 1, "{part}");
        assert!(!part["text"].as_str().unwrap().trim().is_empty());
    }
    assert!(text(message).contains("See your orders and their delivery status"));
    assert!(
        message.get("metadata").is_none(),
        "no receipt without a token"
    );
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:read"])
    );

    let link = task["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap();
    let auth = authorization_behind(&app, link).await;
    assert_eq!(auth.brand_id, "demo");
    assert_eq!(auth.pa_issuer, ISS);
    assert_eq!(auth.pa_sub, SUB);
    assert_eq!(auth.scopes, vec!["orders:read".to_owned()]);
    assert_eq!(auth.status.as_str(), "pending");
    assert!(auth.expires_at > OffsetDateTime::now_utc());
    assert!(
        text(message).contains(link),
        "the text tells the person where to go"
    );

    // The PA runs §5.1 for the missing scope, the person approves, and the PA
    // re-sends in the same context.
    let tokens = app.connect(&pa, SUB, "alice", &["orders:read"]).await;
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &access(&tokens),
            "m2",
            "show my orders",
            Some(&ctx),
        )
        .await;
    let v = ok_json(res).await;
    assert_eq!(v["message"]["contextId"], ctx.as_str());
    let reply = text(&v["message"]);
    assert!(reply.starts_with("Your orders"), "{reply}");
    for order in seed_orders(&pact_tests::brand_id("demo"), &"alice".into()) {
        assert!(reply.contains(&order.order_id), "{reply}");
    }
}

/// PACT §5.5 step-up with a token that is too narrow: cancelling needs
/// `orders:cancel`, so the turn is a task for exactly that scope (with a
/// receipt, since it ran delegated), nothing is cancelled, and the
/// conversation stays open.
#[tokio::test]
async fn a_token_without_orders_cancel_gets_a_step_up_for_it_and_the_conversation_stays_open() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    let ctx = ok_json(res).await["message"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &token,
            "m2",
            &format!("cancel {order}"),
            Some(&ctx),
        )
        .await;
    let v = ok_json(res).await;
    let task = &v["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(task["contextId"], ctx.as_str());
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:cancel"])
    );
    let auth = authorization_behind(
        &app,
        task["metadata"]["pact.verificationUriComplete"]
            .as_str()
            .unwrap(),
    )
    .await;
    assert_eq!((auth.pa_issuer.as_str(), auth.pa_sub.as_str()), (ISS, SUB));
    assert_eq!(auth.scopes, vec!["orders:cancel".to_owned()]);
    assert!(text(&task["status"]["message"]).contains("Cancel orders that have not shipped yet"));
    let claims = verified_receipt(&app, &task["status"]["message"]).await;
    assert!(claims.actions.is_empty());
    assert!(claims.scopes_used.is_empty());
    assert_eq!(order_status(&app, "alice", &order).await, "processing");

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m3", "show my orders", Some(&ctx))
        .await;
    let v = ok_json(res).await;
    assert_eq!(v["message"]["contextId"], ctx.as_str());
    assert!(text(&v["message"]).contains(&format!("{order} (")));
}

/// Issue 9, item 1: a person who does what the step-up message says —
/// approves the link, then asks again — is not sent round to approve a second
/// code. Asking again before the agent collected the approval names the same
/// (approved) code; a pending step-up is reused rather than a new one minted;
/// the PA's device authorization for those scopes takes over the approved one
/// and its first poll gets the token; one agent, one entry.
/// An approved step-up whose grant the person then revoked is no approval
/// any more: the next turn asks again with a new code, and the agent's
/// device authorization is a new, pending request, not a code whose first
/// poll is `invalid_grant` (PACT §5.3: that is for unknown, foreign or
/// redeemed codes).
#[tokio::test]
async fn a_step_up_whose_grant_was_revoked_is_asked_again() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();
    let cancel = format!("cancel {order}");
    let step_up_code = |v: &Value| {
        let link = v["task"]["metadata"]["pact.verificationUriComplete"]
            .as_str()
            .unwrap_or_else(|| panic!("a step-up task: {v}"))
            .to_owned();
        link.rsplit("user_code=").next().unwrap().to_owned()
    };
    let first = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m1", &cancel, None)
            .await,
    )
    .await;
    let code = step_up_code(&first);
    let ctx = first["task"]["contextId"].as_str().unwrap().to_owned();
    let approved = app.approve(&code, "alice", &["orders:cancel"]).await;
    // The person revokes what they just approved, before the agent collects it.
    sqlx::query("update grants set revoked_at = now(), revoked_reason = 'user' where id = $1")
        .bind(approved.id.as_uuid())
        .execute(&app.db)
        .await
        .unwrap();

    let again = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m2", &cancel, Some(&ctx))
            .await,
    )
    .await;
    let new_code = step_up_code(&again);
    assert_ne!(new_code, code, "a new request, not the revoked approval");
    assert!(
        !text(&again["task"]["status"]["message"]).contains("already approved"),
        "{again}"
    );
    let auth = app.device_authorize(&pa, SUB, "orders:cancel", None).await;
    assert_ne!(auth.user_code.replace('-', ""), code.replace('-', ""));
    let (status, body) = app.poll(&pa, SUB, &auth.device_code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("authorization_pending")),
        "{body}"
    );
}

#[tokio::test]
async fn approving_a_step_up_and_asking_again_does_not_go_in_circles() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();
    let cancel = format!("cancel {order}");
    let step_up_code = |v: &Value| {
        let link = v["task"]["metadata"]["pact.verificationUriComplete"]
            .as_str()
            .unwrap_or_else(|| panic!("a step-up task: {v}"))
            .to_owned();
        link.rsplit("user_code=").next().unwrap().to_owned()
    };

    let first = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m1", &cancel, None)
            .await,
    )
    .await;
    let code = step_up_code(&first);
    let ctx = first["task"]["contextId"].as_str().unwrap().to_owned();
    // Asked again before approving: the same code, not a new one.
    let again = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m2", &cancel, Some(&ctx))
            .await,
    )
    .await;
    assert_eq!(step_up_code(&again), code);

    // The person approves; the agent asks again before collecting anything.
    app.approve(&code, "alice", &["orders:cancel"]).await;
    let after = ok_json(
        app.send_delegated("demo", &pa_jwt, &token, "m3", &cancel, Some(&ctx))
            .await,
    )
    .await;
    assert_eq!(step_up_code(&after), code, "no new code after approval");
    assert!(
        text(&after["task"]["status"]["message"]).contains("already approved"),
        "{after}"
    );
    let live: i64 = sqlx::query_scalar(
        "select count(*) from device_authorizations where status in ('pending', 'approved')",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        live, 1,
        "exactly one authorization was ever minted for the step-up"
    );

    // The PA's device authorization for the missing scope collects that approval.
    let auth = app.device_authorize(&pa, SUB, "orders:cancel", None).await;
    assert_eq!(auth.user_code.replace('-', ""), code.replace('-', ""));
    let (status, tokens) = app.poll(&pa, SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    let scopes: Vec<&str> = tokens["scope"].as_str().unwrap().split(' ').collect();
    assert!(
        scopes.contains(&"orders:cancel") && scopes.contains(&"orders:read"),
        "{tokens}"
    );
    let done = ok_json(
        app.send_delegated(
            "demo",
            &pa_jwt,
            tokens["access_token"].as_str().unwrap(),
            "m4",
            &cancel,
            Some(&ctx),
        )
        .await,
    )
    .await;
    assert!(done.get("message").is_some(), "{done}");
    assert_eq!(order_status(&app, "alice", &order).await, "cancelled");
    let active = pact_db::grants::list(&app.db, Default::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|g| g.revoked_at.is_none())
        .count();
    assert_eq!(active, 1, "one agent, one active grant");
}

/// PACT §3 and §5: a brand without scopes is identity-only; an account
/// question gets what a chat widget would say — no task, no link, no data.
#[tokio::test]
async fn an_identity_only_brand_answers_an_account_question_like_a_chat_widget() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());

    let res = app
        .send("demo", &pa_jwt, "m1", "show my orders", None)
        .await;
    let v = ok_json(res).await;
    assert!(v.get("task").is_none(), "{v}");
    assert_eq!(text(&v["message"]), ASK_ORDER_NUMBER);
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let res = app
        .send("demo", &pa_jwt, "m2", "cancel DEMO-1234567", Some(&ctx))
        .await;
    let v = ok_json(res).await;
    assert!(v.get("task").is_none(), "{v}");
    assert_eq!(text(&v["message"]), NEED_ACCOUNT);
    let f = footprint(&app).await;
    assert_eq!((f.device_authorizations, f.demo_orders), (0, 0));
}

// ---------------------------------------------------------------------------
// authorization_details at the gateway
// ---------------------------------------------------------------------------

/// PACT §5.7: approved `authorization_details` are enforced against the real
/// arguments before the tool runs: with cancellation limited to one order,
/// another cancellable order is refused and left alone, the named one is
/// cancelled, and the receipts record only what ran.
#[tokio::test]
async fn authorization_details_limit_cancellation_to_the_named_order() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    // Alice's usual orders plus a second one that is still cancellable.
    let mut orders = seed_orders(&pact_tests::brand_id("demo"), &"alice".into());
    let mut extra = orders[0].clone();
    extra.order_id = "DEMO-0000042".to_owned();
    orders.push(extra);
    for o in &orders {
        pact_db::demo_orders::insert(&app.db, &pact_tests::brand_id("demo"), &"alice".into(), o)
            .await
            .unwrap();
    }
    let named = orders[0].order_id.clone();
    let other = orders[3].order_id.clone();
    assert_eq!(order_status(&app, "alice", &other).await, "processing");

    let details = json!([{"type": "order_cancellation", "order_ids": [named]}]);
    let auth = app
        .device_authorize(&pa, SUB, "orders:cancel", Some(&details))
        .await;
    app.approve(&auth.user_code, "alice", &["orders:cancel"])
        .await;
    let (status, tokens) = app.poll(&pa, SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["authorization_details"], details);
    let token = access(&tokens);
    assert_eq!(jws_json(&token, 1)["authorization_details"], details);

    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &token,
            "m1",
            &format!("please cancel {other}"),
            None,
        )
        .await;
    let v = ok_json(res).await;
    // Beyond the limit the person set: not done, and the person is asked
    // about this one cancellation (PACT §5.5 for details).
    let op = crate::journey::beyond_task(&v, "cancel_order", &json!({"order_id": other}));
    assert_eq!(op["description"], format!("Cancel order {other}"));
    assert_eq!(op["beyond"]["field"], "order_ids");
    let task = &v["task"];
    assert!(
        text(&task["status"]["message"]).contains(&format!("Cancel order {other}")),
        "{v}"
    );
    assert_eq!(order_status(&app, "alice", &other).await, "processing");
    let claims = verified_receipt(&app, &task["status"]["message"]).await;
    assert!(
        claims.actions.iter().all(|a| a.tool != "cancel_order"),
        "{claims:?}"
    );
    assert!(claims.scopes_used.is_empty());
    assert_eq!(claims.refused[0].tool, "cancel_order");
    assert_eq!(claims.refused[0].reason, "beyond_limit");

    // Allowed once, the same call goes through on the same token, exactly once.
    let ctx = task["contextId"].as_str().unwrap().to_owned();
    let code = crate::journey::user_code_of(task);
    assert_eq!(app.approve_once(&code, "alice").await.len(), 1);
    for (n, expected) in [("m1b", true), ("m1c", false)] {
        let v = ok_json(
            app.send_delegated(
                "demo",
                &pa_jwt,
                &token,
                n,
                &format!("please cancel {other}"),
                Some(&ctx),
            )
            .await,
        )
        .await;
        if expected {
            assert_eq!(
                text(&v["message"]),
                format!("Order {other} is cancelled. You won't be charged."),
                "{v}"
            );
            let claims = verified_receipt(&app, &v["message"]).await;
            assert!(claims.actions[0].approved_once, "{claims:?}");
        } else {
            // Used up: asked again (the order is cancelled already anyway).
            assert!(v.get("task").is_some(), "{v}");
        }
    }
    assert_eq!(order_status(&app, "alice", &other).await, "cancelled");

    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &token,
            "m2",
            &format!("please cancel {named}"),
            Some(&ctx),
        )
        .await;
    let v = ok_json(res).await;
    assert_eq!(
        text(&v["message"]),
        format!("Order {named} is cancelled. You won't be charged.")
    );
    assert_eq!(order_status(&app, "alice", &named).await, "cancelled");
    let claims = verified_receipt(&app, &v["message"]).await;
    assert_eq!(claims.scopes_used, vec!["orders:cancel".to_owned()]);
    assert_eq!(claims.actions.len(), 1);
    assert_eq!(claims.actions[0].tool, "cancel_order");
    assert_eq!(
        claims.actions[0].args_hash.as_deref(),
        Some(pact_jose::args_hash(&json!({"order_id": named})).as_str())
    );
}

// ---------------------------------------------------------------------------
// Receipts
// ---------------------------------------------------------------------------

/// PACT §5.6: every reply served under a token — an answer, a refusal, a
/// step-up task — carries `pact.receipt` `{jws, claims}` whose JWS payload is
/// the claims and which verifies against the brand's published JWKS.
#[tokio::test]
async fn every_delegated_reply_carries_a_receipt_that_verifies_against_the_published_keys() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let tokens = app.connect(&pa, SUB, "alice", &["orders:read"]).await;
    let token = access(&tokens);
    let grant = grant_of(&token);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();
    let jwks = app.provider_jwks().await;
    let kids: Vec<&str> = jwks.iter().map(|k| k["kid"].as_str().unwrap()).collect();

    let mut messages = Vec::new();
    for (id, said) in [
        ("m1", "show my orders".to_owned()),
        ("m2", "when are you open?".to_owned()),
        ("m3", format!("cancel {order}")),
    ] {
        let res = app
            .send_delegated("demo", &pa_jwt, &token, id, &said, None)
            .await;
        let v = ok_json(res).await;
        messages.push(match v.get("task") {
            Some(task) => task["status"]["message"].clone(),
            None => v["message"].clone(),
        });
    }
    for message in &messages {
        let sent = &message["metadata"]["pact.receipt"];
        assert_eq!(
            sent.as_object().unwrap().keys().collect::<Vec<_>>().len(),
            2,
            "{sent}"
        );
        let jws = sent["jws"].as_str().unwrap();
        assert_eq!(
            jws_json(jws, 1),
            sent["claims"],
            "the payload is the claims"
        );
        let header = jws_json(jws, 0);
        assert_eq!(header["typ"], "pact-receipt+jws");
        assert_eq!(header["alg"], "ES256");
        assert!(kids.contains(&header["kid"].as_str().unwrap()));

        let claims = verified_receipt(&app, message).await;
        assert_eq!(claims.grant_id, grant.to_string());
        assert_eq!(claims.user, "alice");
        assert_eq!(claims.pa, ISS);
        assert_eq!(claims.brand, app.iface("demo"));
        OffsetDateTime::parse(&claims.ts, &time::format_description::well_known::Rfc3339).unwrap();
    }
    let listed = verified_receipt(&app, &messages[0]).await;
    assert_eq!(listed.scopes_used, vec!["orders:read".to_owned()]);
    assert_eq!(listed.actions[0].tool, "list_orders");
    let public = verified_receipt(&app, &messages[1]).await;
    assert!(public.scopes_used.is_empty() && public.actions.is_empty());

    // A receipt whose claims were edited after signing does not verify.
    let keys = ProviderKeySet::from_public_jwks(&jwks).unwrap();
    let mut edited = receipt(&messages[1]);
    edited.claims.scopes_used = vec!["orders:cancel".to_owned()];
    assert!(pact_jose::verify_receipt(&edited, &keys).is_err());
}

/// PACT §4 and §5.6: a retried `messageId` gets the stored reply — the same
/// reply id and the same receipt — and no new turn, message or receipt.
#[tokio::test]
async fn a_retried_message_id_returns_the_identical_reply_and_receipt_without_a_new_receipt() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    let first = ok_json(res).await;
    let ctx = first["message"]["contextId"].as_str().unwrap().to_owned();
    let before = footprint(&app).await;
    assert_eq!(before.receipts, 1);

    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", Some(&ctx))
        .await;
    let again = ok_json(res).await;
    assert_eq!(again, first);
    assert_eq!(
        again["message"]["metadata"]["pact.receipt"]["jws"],
        first["message"]["metadata"]["pact.receipt"]["jws"]
    );
    verified_receipt(&app, &again["message"]).await;
    let after = footprint(&app).await;
    assert_eq!(after.messages, before.messages);
    assert_eq!(after.receipts, before.receipts);
}

/// PACT §5.6 (pactd's chain): a grant's receipts carry `seq` 1, 2, 3 and each
/// `prev` is the hash of the receipt before; the auditor finds no break in the
/// stored chain, and finds one when a receipt is missing or its claims edited.
#[tokio::test]
async fn the_receipts_of_a_grant_form_a_chain_the_auditor_checks() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let grant = grant_of(&token);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[1]
        .order_id
        .clone();

    let mut ctx: Option<String> = None;
    let mut sent = Vec::new();
    for (i, said) in [
        "show my orders".to_owned(),
        format!("status of {order}?"),
        "hello".to_owned(),
    ]
    .iter()
    .enumerate()
    {
        let res = app
            .send_delegated(
                "demo",
                &pa_jwt,
                &token,
                &format!("m{i}"),
                said,
                ctx.as_deref(),
            )
            .await;
        let v = ok_json(res).await;
        ctx = Some(v["message"]["contextId"].as_str().unwrap().to_owned());
        sent.push(receipt(&v["message"]));
    }
    assert_eq!(sent[0].claims.prev, None);
    assert_eq!(
        sent[1].claims.prev,
        Some(pact_jose::receipt_hash(&sent[0].jws))
    );
    assert_eq!(
        sent[2].claims.prev,
        Some(pact_jose::receipt_hash(&sent[1].jws))
    );

    let stored = pact_db::receipts::list(&app.db, Some(grant.into()))
        .await
        .unwrap();
    assert_eq!(
        stored.iter().map(|r| r.seq).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(
        stored.iter().map(|r| r.jws.as_str()).collect::<Vec<_>>(),
        sent.iter().map(|r| r.jws.as_str()).collect::<Vec<_>>()
    );
    let keys = pact_server::keys::all_public_keys(&app.db).await.unwrap();
    assert_eq!(
        pact_server::domain::receipt_chain::verify(&stored, &keys),
        vec![]
    );

    let gapped = vec![stored[0].clone(), stored[2].clone()];
    let breaks = pact_server::domain::receipt_chain::verify(&gapped, &keys);
    assert!(!breaks.is_empty());
    assert!(
        breaks
            .iter()
            .all(|b| b.seq == 3 && b.grant_id == grant.into()),
        "{breaks:?}"
    );

    let mut edited = stored.clone();
    edited[1].claims["scopesUsed"] = json!(["orders:cancel"]);
    let breaks = pact_server::domain::receipt_chain::verify(&edited, &keys);
    assert_eq!(breaks.len(), 1, "{breaks:?}");
    assert_eq!(breaks[0].seq, 2);
}

/// PACT §5.6: turns of one grant sent in parallel all get their receipt, and
/// the chain does not fork: every position once, each `prev` the receipt
/// before it. (The first store of each races for the next position; the
/// losers store again one after the other under the grant's row lock.)
#[tokio::test]
async fn parallel_turns_of_one_grant_all_get_receipts_in_one_unforked_chain() {
    const TURNS: usize = 20;
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let grant = grant_of(&token);

    let ids: Vec<String> = (0..TURNS).map(|i| format!("p{i}")).collect();
    let sends = ids
        .iter()
        .map(|id| app.send_delegated("demo", &pa_jwt, &token, id, "show my orders", None))
        .collect();
    let mut sent = Vec::new();
    for res in crate::messages::join_all(sends).await {
        sent.push(receipt(&ok_json(res).await["message"]));
    }

    let stored = pact_db::receipts::list(&app.db, Some(grant.into()))
        .await
        .unwrap();
    assert_eq!(
        stored.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (1..=i32::try_from(TURNS).unwrap()).collect::<Vec<_>>()
    );
    let keys = pact_server::keys::all_public_keys(&app.db).await.unwrap();
    assert_eq!(
        pact_server::domain::receipt_chain::verify(&stored, &keys),
        vec![]
    );
    // Each reply carries the receipt that was stored, no other.
    let mut answered: Vec<&str> = sent.iter().map(|r| r.jws.as_str()).collect();
    let mut kept: Vec<&str> = stored.iter().map(|r| r.jws.as_str()).collect();
    answered.sort_unstable();
    kept.sort_unstable();
    assert_eq!(answered, kept);
    let g = pact_db::grants::find(&app.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert!(
        g.last_used_at.is_some(),
        "a turn stamps the grant's last use"
    );
}

/// A turn that lost its chain position stores under its grant's row lock
/// (`pact_db::grants::lock`). Every other turn of the grant must get through
/// while that lock is held: had they waited for it after appending their
/// receipt (the foreign-key check of the receipt and the message, the
/// grant's last-use stamp), the lock holder, waiting for their receipt row
/// at the same position, would deadlock with them. Here the lock is held by
/// the test for as long as the turns run: a turn that waits never answers.
#[tokio::test]
async fn turns_of_a_grant_get_through_while_a_contended_turn_holds_its_lock() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let grant = grant_of(&token);

    let mut holder = app.db.begin().await.unwrap();
    assert!(
        pact_db::grants::lock(&mut *holder, grant.into())
            .await
            .unwrap()
            .is_some()
    );
    // A new context, then a turn in it (another statement), both with the
    // grant's last use never stamped: each would stamp it.
    let mut context = None;
    for id in ["l1", "l2"] {
        let turn = app.send_delegated(
            "demo",
            &pa_jwt,
            &token,
            id,
            "show my orders",
            context.as_deref(),
        );
        let res = tokio::time::timeout(std::time::Duration::from_secs(30), turn)
            .await
            .unwrap_or_else(|_| panic!("turn {id} waited for the grant's lock"));
        let message = ok_json(res).await["message"].clone();
        verified_receipt(&app, &message).await;
        context = message["contextId"].as_str().map(str::to_owned);
    }
    holder.rollback().await.unwrap();

    let stored = pact_db::receipts::list(&app.db, Some(grant.into()))
        .await
        .unwrap();
    assert_eq!(stored.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2]);
    // Skipped while the row was locked, stamped by the next turn.
    let g = pact_db::grants::find(&app.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.last_used_at, None);
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "l3", "show my orders", None)
        .await;
    ok_json(res).await;
    let g = pact_db::grants::find(&app.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert!(
        g.last_used_at.is_some(),
        "a turn stamps the grant's last use"
    );
}

/// PACT §5.6 (pactd: append-only storage): an UPDATE or DELETE of a stored
/// receipt fails in the database itself, and the row stays as it was.
#[tokio::test]
async fn the_receipts_table_refuses_updates_and_deletes() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    ok_json(res).await;
    let before = pact_db::receipts::list(&app.db, None).await.unwrap();
    assert_eq!(before.len(), 1);

    for sql in [
        "update receipts set claims = '{}'::jsonb",
        "update receipts set seq = seq + 1",
        "delete from receipts",
    ] {
        let err = sqlx::query(sql).execute(&app.db).await.unwrap_err();
        let db_err = err.as_database_error().expect("a database error");
        assert_eq!(db_err.code().as_deref(), Some("42501"), "{sql}: {db_err}");
        assert!(db_err.message().contains("append-only"), "{db_err}");
    }
    let after = pact_db::receipts::list(&app.db, None).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].jws, before[0].jws);
    assert_eq!(after[0].claims, before[0].claims);
    assert_eq!(after[0].seq, before[0].seq);
}

// ---------------------------------------------------------------------------
// Key rotation
// ---------------------------------------------------------------------------

/// PACT §5.4: after a rotation with no overlap, tokens signed by the old key
/// keep working (it stays published), new tokens carry the new `kid` and
/// verify, and the JWKS lists both keys.
#[tokio::test]
async fn after_a_key_rotation_old_tokens_keep_working_and_new_tokens_use_the_new_key() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let tokens = app.connect(&pa, SUB, "alice", &["orders:read"]).await;
    let old = access(&tokens);
    let old_kid = jws_json(&old, 0)["kid"].as_str().unwrap().to_owned();

    let new_kid = pact_server::keys::rotate(
        &app.db,
        &app.master_key,
        OffsetDateTime::now_utc(),
        Duration::ZERO,
        Duration::hours(1),
    )
    .await
    .unwrap();
    app.state
        .keys
        .refresh(&app.db, app.clock.now())
        .await
        .unwrap();
    assert_ne!(new_kid, old_kid);
    let jwks = app.provider_jwks().await;
    let mut kids: Vec<&str> = jwks.iter().map(|k| k["kid"].as_str().unwrap()).collect();
    kids.sort_unstable();
    let mut expected = vec![old_kid.as_str(), new_kid.as_str()];
    expected.sort_unstable();
    assert_eq!(kids, expected);

    let res = app
        .send_delegated("demo", &pa_jwt, &old, "m1", "show my orders", None)
        .await;
    let v = ok_json(res).await;
    let receipt_jws = receipt(&v["message"]).jws;
    assert_eq!(jws_json(&receipt_jws, 0)["kid"], new_kid.as_str());
    verified_receipt(&app, &v["message"]).await;

    let (status, refreshed) = app
        .refresh(&pa, SUB, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{refreshed}");
    let new = access(&refreshed);
    assert_eq!(jws_json(&new, 0)["kid"], new_kid.as_str());
    let keys = ProviderKeySet::from_public_jwks(&jwks).unwrap();
    let claims = pact_jose::verify_delegation_token(
        &new,
        &keys,
        &app.state.config.oauth_issuer(&pact_tests::brand_id("demo")),
        &app.iface("demo"),
        ISS,
        OffsetDateTime::now_utc().unix_timestamp(),
    )
    .unwrap();
    assert_eq!(claims.grant_id, grant_of(&old).to_string());
    let res = app
        .send_delegated("demo", &pa_jwt, &new, "m2", "show my orders", None)
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));
}

/// PACT §5.4 (pactd: overlap): a rotated-in key is published at once so
/// caches can fetch it, but tokens and receipts are still signed by the old
/// key until the overlap ends.
#[tokio::test]
async fn during_the_overlap_a_new_key_is_published_but_the_old_key_still_signs() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let old_kid = app.provider_jwks().await[0]["kid"]
        .as_str()
        .unwrap()
        .to_owned();

    let new_kid = pact_server::keys::rotate(
        &app.db,
        &app.master_key,
        OffsetDateTime::now_utc(),
        Duration::hours(1),
        Duration::hours(1),
    )
    .await
    .unwrap();
    app.state
        .keys
        .refresh(&app.db, app.clock.now())
        .await
        .unwrap();
    let jwks = app.provider_jwks().await;
    let kids: Vec<&str> = jwks.iter().map(|k| k["kid"].as_str().unwrap()).collect();
    assert_eq!(kids.len(), 2);
    assert!(kids.contains(&new_kid.as_str()) && kids.contains(&old_kid.as_str()));

    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    assert_eq!(jws_json(&token, 0)["kid"], old_kid.as_str());
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    let v = ok_json(res).await;
    assert_eq!(
        jws_json(&receipt(&v["message"]).jws, 0)["kid"],
        old_kid.as_str()
    );
    verified_receipt(&app, &v["message"]).await;
}

/// PACT §5.4: a retired key stops being published, and its tokens stop being
/// accepted, at its stated unpublish instant — on a node whose last reload
/// was before that instant (no NOTIFY, no housekeeping tick in between).
#[tokio::test]
async fn a_retired_key_is_unpublished_and_refused_at_its_instant_without_a_reload() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let old = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let old_kid = jws_json(&old, 0)["kid"].as_str().unwrap().to_owned();
    // Used once before the rotation, so the node remembers its signature as
    // verified (`pact-jose/src/signature_memo.rs`): that must not outlive the key.
    let res = app
        .send_delegated("demo", &pa_jwt, &old, "m0", "show my orders", None)
        .await;
    assert_eq!(res.status(), 200);

    let rotated_at = OffsetDateTime::now_utc();
    let retain = Duration::seconds(1);
    let new_kid =
        pact_server::keys::rotate(&app.db, &app.master_key, rotated_at, Duration::ZERO, retain)
            .await
            .unwrap();
    // The node's one reload, before the instant.
    app.state
        .keys
        .refresh(&app.db, app.clock.now())
        .await
        .unwrap();
    let unpublish_at: OffsetDateTime =
        sqlx::query_scalar("select unpublish_at from signing_keys where kid = $1")
            .bind(&old_kid)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!((unpublish_at - (rotated_at + retain)).abs() < Duration::milliseconds(1));
    let snapshot = app.state.keys.current();
    let kids_at = |t: OffsetDateTime| -> Vec<String> {
        snapshot.published(t).jwks_document()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(kids_at(unpublish_at - Duration::nanoseconds(1)).contains(&old_kid));
    assert_eq!(kids_at(unpublish_at), vec![new_kid.clone()]);

    // The node's clock moves past the instant (the retention, one second).
    let wait = unpublish_at - app.clock.now() + Duration::milliseconds(50);
    if wait.is_positive() {
        app.clock.advance(wait.unsigned_abs());
    }
    let jwks = app.provider_jwks().await;
    let kids: Vec<&str> = jwks.iter().map(|k| k["kid"].as_str().unwrap()).collect();
    assert_eq!(kids, vec![new_kid.as_str()]);
    let res = app
        .send_delegated("demo", &pa_jwt, &old, "m1", "show my orders", None)
        .await;
    assert_eq!(res.status(), 401);
}

// ---------------------------------------------------------------------------
// Two nodes, one database
// ---------------------------------------------------------------------------

/// Both nodes answer for one public URL and one PA-JWT audience.
fn behind_one_public_url(c: &mut Config) {
    c.public_url = "http://pactd.test".into();
    c.audience = "http://pactd.test/a2a".into();
    c.delegation.poll_interval_secs = 1;
}

/// Several nodes, PACT §5.5: two nodes on one database behave as one
/// server — a token minted on node A works on node B, the grant's receipts
/// chain across both, and a revocation through node A's `/oauth/revoke` is
/// refused by node B on the very next call and reaches node B's in-memory
/// view within a second through LISTEN/NOTIFY.
#[tokio::test]
async fn two_nodes_on_one_database_behave_as_one_server() {
    let a = TestApp::spawn_with(behind_one_public_url).await;
    a.enable_demo_delegation().await;
    let pa = a.registered_pa(ISS).await;
    // A grant revoked before node B starts: node B can learn of it only from
    // its start-up reload, so seeing it means B's listener is up.
    let earlier = pact_db::grants::insert(
        &a.db,
        pact_db::grants::NewGrant {
            id: pact_db::ids::GrantId::new_random(),
            brand_id: &pact_tests::brand_id("demo"),
            pa_issuer: &ISS.into(),
            user_sub: &"someone-else".into(),
            scopes: &["orders:read".to_owned()],
            authorization_details: None,
            terms: &json!({"v": 1}),
            expires_at: OffsetDateTime::now_utc() + Duration::days(1),
        },
    )
    .await
    .unwrap();
    assert!(
        pact_db::grants::revoke(&a.db, earlier.id, "test")
            .await
            .unwrap()
    );
    let b = a.spawn_peer(behind_one_public_url).await;
    assert!(
        b.hears_revocation(earlier.id).await,
        "node B's listener did not start"
    );

    let tokens = a
        .node_connect("demo", &pa, SUB, "alice", &["orders:read"], None)
        .await;
    let token = access(&tokens);
    let grant = grant_of(&token);
    assert_eq!(jws_json(&token, 1)["aud"], "http://pactd.test/a2a/demo");
    let pa_jwt = pa.token(SUB, "http://pactd.test/a2a");

    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m1",
            "show my orders",
            None,
        )
        .await;
    let v = ok_json(res).await;
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let first = receipt(&v["message"]);
    let res = a
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m2",
            "show my orders",
            Some(&ctx),
        )
        .await;
    let second = receipt(&ok_json(res).await["message"]);
    assert_eq!(
        second.claims.prev,
        Some(pact_jose::receipt_hash(&first.jws))
    );
    let keys = pact_server::keys::all_public_keys(&a.db).await.unwrap();
    let stored = pact_db::receipts::list(&a.db, Some(grant.into()))
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(
        pact_server::domain::receipt_chain::verify(&stored, &keys),
        vec![]
    );

    assert!(!b.state.revocations.is_revoked(grant.into()));
    let res = a
        .http
        .post(a.node_a2a_url("demo", "oauth/revoke"))
        .bearer_auth(&pa_jwt)
        .form(&[("token", token.as_str()), ("client_id", ISS)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m3",
            "show my orders",
            Some(&ctx),
        )
        .await;
    assert_invalid_token(res).await;
    assert!(
        b.hears_revocation(grant).await,
        "node B did not hear of the revocation"
    );
    b.stop().await;
}

// ---------------------------------------------------------------------------
// Disabling a personal agent
// ---------------------------------------------------------------------------

/// `pactd agent disable` at the domain level: revoking every grant of a PA
/// makes its delegated calls invalid tokens at once while its PA-JWT still
/// authenticates (other PAs are untouched); disabling the agent row then
/// refuses the PA-JWT itself, and re-enabling does not revive the grants.
#[tokio::test]
async fn revoking_all_of_an_agents_grants_refuses_its_tokens_before_its_pa_jwt() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let other = app.registered_pa(OTHER_ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let other_jwt = other.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let other_token = access(&app.connect(&other, SUB, "alice", &["orders:read"]).await);

    let revoked = pact_db::grants::revoke_all_for_agent(&app.db, ISS, "personal agent disabled")
        .await
        .unwrap();
    assert_eq!(revoked, 1);
    let before = footprint(&app).await;
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m1", "show my orders", None)
        .await;
    assert_invalid_token(res).await;
    assert_eq!(footprint(&app).await, before);
    let res = app
        .send("demo", &pa_jwt, "m1", "when are you open?", None)
        .await;
    assert_eq!(
        text(&ok_json(res).await["message"]),
        pact_server::agent::demo::HOURS
    );
    let res = app
        .send_delegated(
            "demo",
            &other_jwt,
            &other_token,
            "m1",
            "show my orders",
            None,
        )
        .await;
    assert!(text(&ok_json(res).await["message"]).contains("Your orders"));

    assert!(
        pact_db::agents::set_enabled(&app.db, ISS, false)
            .await
            .unwrap()
    );
    app.settle().await;
    assert_bare_401(app.send("demo", &pa_jwt, "m2", "hello", None).await).await;
    assert_bare_401(
        app.send_delegated("demo", &pa_jwt, &token, "m2", "hello", None)
            .await,
    )
    .await;

    assert!(
        pact_db::agents::set_enabled(&app.db, ISS, true)
            .await
            .unwrap()
    );
    app.settle().await;
    let res = app
        .send_delegated("demo", &pa_jwt, &token, "m3", "show my orders", None)
        .await;
    assert_invalid_token(res).await;
}

/// A person deletes their own account on node A's `/account`: after the
/// password is asked again, every grant is revoked and the very next call
/// with their token on node B is refused, as is their refresh token; their
/// email, factors and sessions are erased, while the revoked grant and its
/// receipts (which name only the opaque user id) stay as evidence.
#[tokio::test]
async fn a_person_deleting_their_account_ends_their_grants_at_once_on_another_node() {
    use pact_tests::pages::{Browser, add_user};
    let a = TestApp::spawn_with(behind_one_public_url).await;
    a.enable_demo_delegation().await;
    let pa = a.registered_pa(ISS).await;
    let b = a.spawn_peer(behind_one_public_url).await;
    let password = "correct horse battery staple";
    let user = add_user(&a, "demo", "ann@example.com", password).await;
    let subject = user.subject();
    let tokens = a
        .node_connect("demo", &pa, SUB, &subject, &["orders:read"], None)
        .await;
    let token = access(&tokens);
    let grant = grant_of(&token);
    let pa_jwt = pa.token(SUB, "http://pactd.test/a2a");
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m1",
            "show my orders",
            None,
        )
        .await;
    let first = receipt(&ok_json(res).await["message"]);

    // Ann's browser on node A, signed in (the session made straight in the
    // database; the sign-in pages are tested elsewhere).
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let (csrf, _) = pact_server::domain::secrets::new_secret();
    pact_db::sessions::insert(
        &a.db,
        &hash,
        &csrf,
        &pact_db::sessions::SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            user_id: Some(user.id),
            ..Default::default()
        },
        OffsetDateTime::now_utc() + Duration::hours(1),
    )
    .await
    .unwrap();
    let browser = Browser::new(&a);
    browser.jar.add_cookie_str(
        &format!("pactd_session={raw}"),
        &reqwest::Url::parse(&a.base_url).unwrap(),
    );
    let (status, html) = browser.get_html("/account/delete").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("1 connected now"), "{html}");

    // The browser alone is not enough: a wrong password deletes nothing.
    let res = browser
        .submit(
            "/account/delete",
            "/account/delete",
            &[("confirm", "yes"), ("password", "wrong password entirely")],
        )
        .await;
    assert_eq!(res.status(), 403);
    assert!(
        pact_db::users::find(&a.db, user.id)
            .await
            .unwrap()
            .is_some()
    );
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m2",
            "show my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);

    let res = browser
        .submit(
            "/account/delete",
            "/account/delete",
            &[("confirm", "yes"), ("password", password)],
        )
        .await;
    assert_eq!(res.status(), 200);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("Your account was deleted")
    );

    // At once on node B: the token and the refresh token are dead.
    let res = b
        .node_send(
            "demo",
            &pa_jwt,
            Some(&bearer(&token)),
            "m3",
            "show my orders",
            None,
        )
        .await;
    assert_invalid_token(res).await;
    let res = b
        .http
        .post(b.node_a2a_url("demo", "oauth/token"))
        .bearer_auth(pa.token(SUB, b.audience()))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", ISS),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "invalid_grant", "{body}");

    // Personal data erased; evidence kept.
    assert!(
        pact_db::users::find(&a.db, user.id)
            .await
            .unwrap()
            .is_none()
    );
    let left: i64 = sqlx::query_scalar(
        "select (select count(*) from sessions where user_id = $1) \
         + (select count(*) from users where email = 'ann@example.com')",
    )
    .bind(user.id)
    .fetch_one(&a.db)
    .await
    .unwrap();
    assert_eq!(left, 0);
    let g = pact_db::grants::find(&a.db, grant.into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.user_sub, subject);
    assert_eq!(
        g.revoked_reason.as_deref(),
        Some(pact_db::grants::reason::ACCOUNT_DELETED)
    );
    // Issue 28, finding 3: the account's end and its grant's, in the audit
    // log under the person's own id (never the erased email).
    let entries: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "select actor_kind, actor, action, target from audit_log          where actor_kind = 'customer' order by id",
    )
    .fetch_all(&a.db)
    .await
    .unwrap();
    assert_eq!(
        entries,
        [
            (
                "customer".to_owned(),
                subject.to_string(),
                "grant.revoke".to_owned(),
                Some(grant.to_string())
            ),
            (
                "customer".to_owned(),
                subject.to_string(),
                "customer.delete".to_owned(),
                Some(user.id.to_string())
            ),
        ]
    );
    let kept = pact_db::receipts::list(&a.db, None).await.unwrap();
    assert!(kept.iter().any(|r| r.jws == first.jws));
    assert!(
        b.hears_revocation(grant).await,
        "node B did not hear of the revocation"
    );
}

/// PACT §5.5: a step-up asked in a delegated turn is for the person the turn
/// acted for. Someone else signed in at the brand with its code neither sees
/// what it asks nor decides it (before, they could approve it in their own
/// name and the personal agent collected a grant for the wrong account), and
/// it stays pending for the person, who can still approve it.
#[tokio::test]
async fn a_step_up_asked_for_one_person_is_nobody_elses_to_decide() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = access(&app.connect(&pa, SUB, "alice", &["orders:read"]).await);
    let order = seed_orders(&pact_tests::brand_id("demo"), &"alice".into())[0]
        .order_id
        .clone();
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &token,
            "m1",
            &format!("cancel {order}"),
            None,
        )
        .await;
    let v = ok_json(res).await;
    let link = v["task"]["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap();
    let auth = authorization_behind(&app, link).await;
    let code = auth.user_code.clone();

    pact_tests::pages::add_user(&app, "demo", "bob@example.com", "bob's password 1").await;
    let bob = pact_tests::pages::Browser::new(&app);
    let res = bob
        .sign_in("demo", "bob@example.com", "bob's password 1", "/account")
        .await;
    assert_eq!(res.status(), 303);
    bob.submit("/device", "/device", &[("user_code", &code)])
        .await;
    let (status, html) = bob.get_html("/device/consent").await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("another account"), "{html}");
    assert!(!html.contains("Cancel orders"), "{html}");
    for action in ["approve", "deny"] {
        let res = bob
            .submit(
                "/account",
                "/device/consent",
                &[
                    ("authorization", auth.id.to_string().as_str()),
                    ("action", action),
                    ("scope", "orders:cancel"),
                ],
            )
            .await;
        assert_eq!(res.status(), 403, "{action}");
    }
    // Nor through the decision itself, whoever calls it.
    let refused = pact_server::consent::approve(
        &app.state,
        pact_server::consent::Approval {
            authorization_id: auth.id,
            user_sub: &"mallory".into(),
            scopes: ["orders:cancel".to_owned()].into(),
            authorization_details: None,
        },
        OffsetDateTime::now_utc(),
    )
    .await;
    assert!(refused.is_err(), "{refused:?}");
    let still = pact_server::consent::find_by_user_code(&app.state, &code)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.status.as_str(), "pending");
    let grants: i64 = sqlx::query_scalar("select count(*) from grants")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(grants, 1, "only alice's first grant");

    // The person it was asked for approves it.
    let grant = app.approve(&code, "alice", &["orders:cancel"]).await;
    assert_eq!(grant.user_sub, "alice");
}
