//! The operation rows of PACT §4, and routing decided before authentication.

use pact_tests::TestApp;
use serde_json::json;

use crate::{assert_a2a_error, assert_bare, assert_bare_401};

#[tokio::test]
async fn get_tasks_is_an_empty_page_with_a_validated_page_size() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    let get = |q: &'static str| {
        let url = format!("{}/tasks{q}", app.iface("demo"));
        let req = app.http.get(url).bearer_auth(&token);
        async move { req.send().await.unwrap() }
    };
    let res = get("").await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/a2a+json");
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(
        v,
        json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0})
    );

    let v: serde_json::Value = get("?pageSize=7&status=whatever&foo=bar")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["pageSize"], 7);
    for bad in [
        "?pageSize=0",
        "?pageSize=101",
        "?pageSize=abc",
        "?pageSize=-5",
        "?pageSize=+5",
        "?pageSize=5&pageSize=5",
        "?pageSize=",
    ] {
        assert_a2a_error(get(bad).await, 400, "INVALID_PARAMS", None).await;
    }
}

#[tokio::test]
async fn task_lookups_and_cancels_are_task_not_found_with_the_id() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    let res = app
        .http
        .get(format!("{}/tasks/abc-123", app.iface("demo")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_a2a_error(res, 404, "TASK_NOT_FOUND", Some("Task not found: abc-123")).await;
    let res = app
        .http
        .post(format!("{}/tasks/abc-123:cancel", app.iface("demo")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_a2a_error(res, 404, "TASK_NOT_FOUND", Some("Task not found: abc-123")).await;
}

#[tokio::test]
async fn streaming_subscribe_and_extended_card_are_unsupported_operations() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    let iface = app.iface("demo");
    for req in [
        app.http.post(format!("{iface}/message:stream")).body("{}"),
        app.http.post(format!("{iface}/tasks/t1:subscribe")),
        app.http.get(format!("{iface}/extendedAgentCard")),
    ] {
        let res = req.bearer_auth(&token).send().await.unwrap();
        assert_a2a_error(res, 400, "UNSUPPORTED_OPERATION", None).await;
    }
}

#[tokio::test]
async fn every_push_notification_config_row_is_not_supported() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    let token = pa.token("u1", app.audience());
    let iface = app.iface("demo");
    for req in [
        app.http
            .get(format!("{iface}/tasks/t1/pushNotificationConfigs")),
        app.http
            .post(format!("{iface}/tasks/t1/pushNotificationConfigs"))
            .body("{}"),
        app.http
            .get(format!("{iface}/tasks/t1/pushNotificationConfigs/c1")),
        app.http
            .delete(format!("{iface}/tasks/t1/pushNotificationConfigs/c1")),
    ] {
        let res = req.bearer_auth(&token).send().await.unwrap();
        assert_a2a_error(res, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", None).await;
    }
}

#[tokio::test]
async fn unknown_paths_are_bare_404_and_wrong_methods_bare_405_before_authentication() {
    let app = TestApp::spawn().await;
    let iface = app.iface("demo");
    let not_found = [
        app.http.post(format!("{iface}/message:frobnicate")),
        app.http.get(format!("{iface}/nope")),
        app.http.post(format!("{iface}/tasks/t1:explode")),
        app.http.get(format!("{}/a2a", app.base_url)),
        app.http
            .get(format!("{}/.well-known/nothing", app.base_url)),
    ];
    for req in not_found {
        // No credentials at all: still 404, never 401.
        assert_bare(req.send().await.unwrap(), 404).await;
    }
    // Outside the A2A paths a person's browser gets a page, not Chromium's own error page.
    let res = app
        .http
        .get(format!("{}/elsewhere", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("There is no page at this address")
    );
    let wrong_method = [
        app.http.get(format!("{iface}/message:send")),
        app.http.put(format!("{iface}/message:send")),
        app.http.post(format!("{iface}/tasks")),
        app.http.post(format!("{iface}/tasks/t1")),
        app.http.get(format!("{iface}/tasks/t1:cancel")),
        app.http
            .delete(format!("{iface}/tasks/t1/pushNotificationConfigs")),
        app.http
            .post(format!("{iface}/.well-known/agent-card.json")),
    ];
    for req in wrong_method {
        let res = req.send().await.unwrap();
        // Every 405 names what the resource takes (RFC 9110 §15.5.6).
        assert!(res.headers().contains_key("allow"), "{res:?}");
        assert_bare(res, 405).await;
    }
    // HEAD is GET without a body, on a task as on every GET route: here
    // the bare 401 of a request without a PA-JWT, not a 405.
    let res = app
        .http
        .head(format!("{iface}/tasks/t1"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn every_operation_requires_the_pa_jwt() {
    let app = TestApp::spawn().await;
    let iface = app.iface("demo");
    for req in [
        app.http.post(format!("{iface}/message:send")).body("{}"),
        app.http.post(format!("{iface}/message:stream")),
        app.http.get(format!("{iface}/tasks")),
        app.http.get(format!("{iface}/tasks/t1")),
        app.http.post(format!("{iface}/tasks/t1:cancel")),
        app.http.post(format!("{iface}/tasks/t1:subscribe")),
        app.http.get(format!("{iface}/extendedAgentCard")),
        app.http
            .get(format!("{iface}/tasks/t1/pushNotificationConfigs")),
        app.http
            .delete(format!("{iface}/tasks/t1/pushNotificationConfigs/c1")),
    ] {
        assert_bare_401(req.send().await.unwrap()).await;
    }
}

#[tokio::test]
async fn authentication_comes_before_the_brand_lookup() {
    let app = TestApp::spawn().await;
    let pa = app.registered_pa("https://pa.example").await;
    // Unauthenticated: an unknown brand does not reveal itself.
    let res = app
        .post_a2a("no-such-brand", "message:send", None, &json!({}))
        .await;
    assert_bare_401(res).await;
    // Authenticated: now the unknown brand is a bare 404, for every operation.
    let token = pa.token("u1", app.audience());
    let res = app
        .post_a2a("no-such-brand", "message:send", Some(&token), &json!({}))
        .await;
    assert_bare(res, 404).await;
    let res = app
        .http
        .get(format!("{}/tasks/t1", app.iface("no-such-brand")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_bare(res, 404).await;
}

/// Issue 33: the server's root says what it is and where its parts are (a
/// first run answered 404 here), in the person's language, and tells an
/// operator how to add the first brand only while there is none.
#[tokio::test]
async fn the_root_page_says_what_this_server_is() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/", app.base_url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/html; charset=utf-8");
    let html = res.text().await.unwrap();
    assert!(
        html.contains("This is a PACT authorization server"),
        "{html}"
    );
    assert!(html.contains("href=\"/admin\""));
    assert!(!html.contains("id=\"no-brand\""), "the demo brand exists");

    sqlx::query("delete from brands")
        .execute(&app.db)
        .await
        .unwrap();
    let html = app
        .http
        .get(format!("{}/", app.base_url))
        .header("accept-language", "de")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("Dies ist ein PACT-Autorisierungsserver"),
        "{html}"
    );
    assert!(html.contains("id=\"no-brand\""), "{html}");
    assert!(html.contains("pactd brand add shop"));
}
