//! The Delegated profile end to end (PACT §5): device flow, consent, token, delegated turns, step-up, revocation.

use pact_jose::ProviderKeySet;
use pact_proto::oauth::Receipt;
use pact_tests::TestApp;
use serde_json::Value;

const ISS: &str = "https://pa.example";

fn verify_receipt(jwks: &[Value], receipt: &Value) -> pact_proto::oauth::ReceiptClaims {
    let keys = ProviderKeySet::from_public_jwks(jwks).unwrap();
    let receipt: Receipt = serde_json::from_value(receipt.clone()).unwrap();
    pact_jose::verify_receipt(&receipt, &keys).unwrap()
}

#[tokio::test]
async fn device_flow_to_delegated_send_with_receipt_refresh_and_reuse_revocation() {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(ISS).await;

    // Device authorization (RFC 8628 §3.2).
    let auth = app
        .device_authorize(&pa, "pa-user-1", "orders:read orders:cancel", None)
        .await;
    let b = &auth.body;
    assert_eq!(b["verification_uri"], format!("{}/device", app.base_url));
    assert_eq!(
        b["verification_uri_complete"],
        format!("{}/device?user_code={}", app.base_url, auth.user_code)
    );
    assert_eq!(b["expires_in"], 600);
    assert_eq!(b["interval"], 1);
    assert!(regex_like_user_code(&auth.user_code), "{}", auth.user_code);
    assert_eq!(auth.device_code.len(), 43);
    // Only a hash of the device code is stored.
    let stored: i64 = sqlx::query_scalar(
        "select count(*) from device_authorizations where device_code_hash = $1",
    )
    .bind(auth.device_code.as_bytes())
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(stored, 0);

    // Pending, then too fast → slow_down with a growing interval.
    let (s, body) = app.poll(&pa, "pa-user-1", &auth.device_code).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (400, Some("authorization_pending"))
    );
    let (s, body) = app.poll(&pa, "pa-user-1", &auth.device_code).await;
    assert_eq!((s, body["error"].as_str()), (400, Some("slow_down")));
    assert_eq!(
        body["error_description"],
        "polling too fast; wait 6 s between requests"
    );

    // The person approves only orders:read; the token carries less than was asked.
    let grant = app
        .approve(&auth.user_code, "alice@brand", &["orders:read"])
        .await;
    let (s, tokens) = app.poll(&pa, "pa-user-1", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "orders:read");
    assert_eq!(tokens["expires_in"], 900);
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();

    // A delegated send: the user's orders, with a receipt that verifies against the published JWKS.
    let pa_jwt = pa.token("pa-user-1", app.audience());
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m1", "Show me my orders", None)
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    let text = v["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(text.contains("Your orders"), "{text}");
    let jwks = app.provider_jwks().await;
    let claims = verify_receipt(&jwks, &v["message"]["metadata"]["pact.receipt"]);
    assert_eq!(claims.grant_id, grant.id.to_string());
    assert_eq!(claims.user, "alice@brand");
    assert_eq!(claims.pa, ISS);
    assert_eq!(claims.brand, app.iface("demo"));
    assert_eq!(claims.scopes_used, vec!["orders:read".to_owned()]);
    assert_eq!(claims.actions[0].tool, "list_orders");
    assert!(claims.actions[0].args_hash.is_some());
    assert_eq!(claims.prev, None);

    // Cancelling needs orders:cancel, which was unticked: a step-up task, not a failure.
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let order = pact_server::agent::demo_tools::seed_orders(
        &pact_tests::brand_id("demo"),
        &"alice@brand".into(),
    )[0]
    .order_id
    .clone();
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &access,
            "m2",
            &format!("cancel {order}"),
            Some(&ctx),
        )
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED");
    assert_eq!(v["task"]["contextId"], ctx.as_str());
    assert_eq!(
        v["task"]["metadata"]["pact.missingScopes"],
        serde_json::json!(["orders:cancel"])
    );
    assert!(
        v["task"]["metadata"]["pact.verificationUriComplete"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/device?user_code=", app.base_url))
    );

    // Refresh: a new pair, same scope; the old refresh token presented again revokes the grant.
    let (s, refreshed) = app.refresh(&pa, "pa-user-1", &refresh).await;
    assert_eq!(s, 200, "{refreshed}");
    assert_eq!(refreshed["scope"], "orders:read");
    assert_ne!(refreshed["refresh_token"].as_str().unwrap(), refresh);
    let new_access = refreshed["access_token"].as_str().unwrap().to_owned();
    let res = app
        .send_delegated("demo", &pa_jwt, &new_access, "m3", "my orders", Some(&ctx))
        .await;
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    let claims3 = verify_receipt(&jwks, &v["message"]["metadata"]["pact.receipt"]);
    assert!(claims3.prev.is_some(), "receipts of a grant are chained");

    let (s, body) = app.refresh(&pa, "pa-user-1", &refresh).await;
    assert_eq!((s, body["error"].as_str()), (400, Some("invalid_grant")));
    // The grant is gone: the delegated call is refused with invalid_token.
    let res = app
        .send_delegated(
            "demo",
            &pa.token("pa-user-1", app.audience()),
            &new_access,
            "m4",
            "my orders",
            Some(&ctx),
        )
        .await;
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        r#"Bearer realm="a2a", error="invalid_token""#
    );
    assert!(res.bytes().await.unwrap().is_empty());
    // And the newer refresh token is dead too.
    let (s, _) = app
        .refresh(
            &pa,
            "pa-user-1",
            refreshed["refresh_token"].as_str().unwrap(),
        )
        .await;
    assert_eq!(s, 400);
}

fn regex_like_user_code(code: &str) -> bool {
    let b = code.as_bytes();
    b.len() == 9
        && b[4] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || b"BCDFGHJKLMNPQRSTVWXZ".contains(c))
}

/// PACT §5.5: after a step-up task the PA runs §5.1 again for the missing
/// scopes; pactd joins that request to the authorization the task's link
/// names, so the person approves one code and the PA can redeem it.
#[tokio::test]
async fn the_pas_own_device_authorization_after_a_step_up_is_the_one_the_link_names() {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(ISS).await;
    let first = app
        .connect(&pa, "pa-u", "alice@brand", &["orders:read"])
        .await;
    let access = first["access_token"].as_str().unwrap().to_owned();
    let pa_jwt = pa.token("pa-u", app.audience());
    let order = pact_server::agent::demo_tools::seed_orders(
        &pact_tests::brand_id("demo"),
        &"alice@brand".into(),
    )[0]
    .order_id
    .clone();

    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            &access,
            "m1",
            &format!("cancel {order}"),
            None,
        )
        .await;
    let task: Value = res.json().await.unwrap();
    let link = task["task"]["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap()
        .to_owned();
    let ctx = task["task"]["contextId"].as_str().unwrap().to_owned();
    let link_code = link.rsplit('=').next().unwrap().to_owned();

    // The PA asks for exactly the missing scope: same user code as the link.
    let auth = app
        .device_authorize(&pa, "pa-u", "orders:cancel", None)
        .await;
    assert_eq!(auth.user_code, link_code);
    // Another user of the same PA does not get it.
    let other = app
        .device_authorize(&pa, "pa-other", "orders:cancel", None)
        .await;
    assert_ne!(other.user_code, link_code);

    // The person approves the code from the link; the PA redeems it.
    app.approve(&link_code, "alice@brand", &["orders:cancel"])
        .await;
    let (s, tokens) = app.poll(&pa, "pa-u", &auth.device_code).await;
    assert_eq!(s, 200, "{tokens}");
    assert_eq!(tokens["scope"], "orders:cancel orders:read");
    let wider = tokens["access_token"].as_str().unwrap();
    let res = app
        .send_delegated(
            "demo",
            &pa_jwt,
            wider,
            "m2",
            &format!("cancel {order}"),
            Some(&ctx),
        )
        .await;
    let v: Value = res.json().await.unwrap();
    assert!(
        v["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("is cancelled"),
        "{v}"
    );
    // The narrower grant was superseded when the wider one was redeemed.
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m3", "my orders", Some(&ctx))
        .await;
    assert_eq!(res.status(), 401);
}
