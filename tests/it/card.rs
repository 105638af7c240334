use pact_tests::TestApp;
use serde_json::json;

use crate::assert_bare;

#[tokio::test]
async fn the_card_is_public_and_shaped_as_section_2_says() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/.well-known/agent-card.json", app.iface("demo")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let h = res.headers();
    assert_eq!(h["content-type"], "application/a2a+json");
    assert_eq!(h["cache-control"], "public, max-age=300");
    assert_eq!(h["access-control-allow-origin"], "*");
    let card: serde_json::Value = res.json().await.unwrap();
    assert_eq!(card["name"], "Demo Store");
    assert_eq!(
        card["supportedInterfaces"][0],
        json!({"url": app.iface("demo"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
    );
    assert_eq!(
        card["securitySchemes"]["paJwt"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}})
    );
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"paJwt": {"list": []}}}])
    );
    assert_eq!(
        card["capabilities"],
        json!({"streaming": false, "pushNotifications": false, "extendedAgentCard": false})
    );
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));
    assert_eq!(card["provider"]["organization"], "pactd");
    assert_eq!(card["provider"]["url"], app.base_url);
    assert!(card["version"].is_string());
    assert!(card["description"].is_string());
    let skills = card["skills"].as_array().unwrap();
    assert!(!skills.is_empty());
    for s in skills {
        for field in ["id", "name", "description"] {
            assert!(s[field].is_string(), "{s}");
        }
        assert!(s["tags"].is_array());
    }
}

#[tokio::test]
async fn an_unknown_brand_has_no_card_just_a_bare_404() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/.well-known/agent-card.json", app.iface("nope")))
        .send()
        .await
        .unwrap();
    assert_bare(res, 404).await;
}

#[tokio::test]
async fn each_brand_gets_its_own_interface_url() {
    let app = TestApp::spawn().await;
    app.add_brand("acme", "Acme").await;
    let card: serde_json::Value = app
        .http
        .get(format!("{}/.well-known/agent-card.json", app.iface("acme")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["name"], "Acme");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a/acme", app.base_url)
    );
}

/// Issue 32: A2A 1.0 marks `description` required. A brand without one gets
/// one from its name; owners set the card's text through the admin API (as
/// the console and `pactd brand set --name --description` do), bad text is
/// refused and changes nothing, and the card shows the change at once.
#[tokio::test]
async fn the_cards_name_and_description_are_set_by_owners_and_never_empty() {
    let app = TestApp::spawn().await;
    app.add_brand("shop", "Shop").await;
    let card = |app: &TestApp| {
        let url = format!("{}/.well-known/agent-card.json", app.iface("shop"));
        let http = app.http.clone();
        async move {
            let v: serde_json::Value = http.get(url).send().await.unwrap().json().await.unwrap();
            v
        }
    };
    let v = card(&app).await;
    assert!(
        v["description"]
            .as_str()
            .unwrap()
            .starts_with("The agent of Shop"),
        "{v}"
    );

    let owner = crate::admin_api::credential(&app, "root", "owner", None).await;
    for bad in [
        json!({"name": ""}),
        json!({"name": "x".repeat(201)}),
        json!({"description": "y".repeat(1001)}),
        json!({"description": "tab\u{7}bell"}),
        json!({}),
        json!({"name": "Shop", "logo": "x"}),
    ] {
        let res =
            crate::admin_api::call(&app, &owner, "post", "/brands/shop/card", Some(bad.clone()))
                .await;
        assert_eq!(res.status(), 400, "{bad}");
    }
    assert_eq!(card(&app).await["name"], "Shop");

    let v = crate::admin_api::call_ok(
        &app,
        &owner,
        "post",
        "/brands/shop/card",
        Some(json!({"name": "Shop & Tea", "description": "Loose-leaf tea, shipped weekly"})),
    )
    .await;
    assert_eq!(v["name"], "Shop & Tea");
    let v = card(&app).await;
    assert_eq!(v["name"], "Shop & Tea");
    assert_eq!(v["description"], "Loose-leaf tea, shipped weekly");
    crate::admin_api::assert_audited(&app, "root", &["brand.card"]).await;

    // Skills: the owner's replace the agent's own; bad ones change nothing; [] goes back.
    let derived = card(&app).await["skills"].clone();
    let skills = json!([{"id": "tea-advice", "name": "Tea advice", "description": "Which tea, how to brew it",
                         "tags": ["tea"]}]);
    for bad in [
        json!([{"id": "Bad Id", "name": "x", "description": "", "tags": []}]),
        json!([{"id": "a", "name": "", "description": "", "tags": []}]),
        json!([{"id": "a", "name": "A", "description": "", "tags": []},
               {"id": "a", "name": "B", "description": "", "tags": []}]),
        json!([{"id": "a", "name": "A", "description": "", "tags": ["t\u{0}"]}]),
    ] {
        let res = crate::admin_api::call(
            &app,
            &owner,
            "post",
            "/brands/shop/card",
            Some(json!({"skills": bad})),
        )
        .await;
        assert_eq!(res.status(), 400, "{bad}");
    }
    assert_eq!(card(&app).await["skills"], derived);
    crate::admin_api::call_ok(
        &app,
        &owner,
        "post",
        "/brands/shop/card",
        Some(json!({"skills": skills})),
    )
    .await;
    assert_eq!(card(&app).await["skills"], skills);
    crate::admin_api::call_ok(
        &app,
        &owner,
        "post",
        "/brands/shop/card",
        Some(json!({"skills": []})),
    )
    .await;
    assert_eq!(card(&app).await["skills"], derived);
}
