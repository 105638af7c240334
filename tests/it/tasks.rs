//! A2A 1.0 Get Task on the step-up tasks pactd returns (PACT §5.5, A2A 1.0
//! §3.1.3): a generic client follows one by polling until the person decides.
//! Only the personal agent and user it was issued to can read it; everyone
//! else gets the same `TASK_NOT_FOUND` as for an id that never existed.

use std::time::Duration;

use pact_tests::TestApp;
use serde_json::{Value, json};

use crate::assert_a2a_error;

const ISS: &str = "https://pa.example";
const OTHER_ISS: &str = "https://other-pa.example";
const SUB: &str = "pa-user-1";

async fn delegated_app() -> TestApp {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    app
}

async fn ok_json(res: reqwest::Response) -> Value {
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "application/a2a+json"
    );
    res.json().await.unwrap()
}

async fn get_task(app: &TestApp, pa_jwt: &str, id: &str) -> reqwest::Response {
    app.http
        .get(format!("{}/tasks/{id}", app.iface("demo")))
        .bearer_auth(pa_jwt)
        .send()
        .await
        .unwrap()
}

fn user_code_of(task: &Value) -> String {
    let link = task["metadata"]["pact.verificationUriComplete"]
        .as_str()
        .unwrap();
    let url = url::Url::parse(link).unwrap();
    url.query_pairs()
        .find(|(k, _)| k == "user_code")
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

#[tokio::test]
async fn a_step_up_task_is_followed_with_get_task_until_the_person_approves() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let v = ok_json(
        app.send("demo", &pa_jwt, "m1", "show my orders", None)
            .await,
    )
    .await;
    let task = v["task"].clone();
    let id = task["id"].as_str().unwrap().to_owned();

    // Pending: the task exactly as returned, and where its authorization stands.
    let got = ok_json(get_task(&app, &pa_jwt, &id).await).await;
    let mut expected = task.clone();
    expected["metadata"]["pact.authorizationStatus"] = json!("pending");
    assert_eq!(got, expected);

    // Only the person's own agent can cancel nothing: the person decides.
    let res = app
        .http
        .post(format!("{}/tasks/{id}:cancel", app.iface("demo")))
        .bearer_auth(&pa_jwt)
        .send()
        .await
        .unwrap();
    assert_a2a_error(res, 409, "TASK_NOT_CANCELABLE", None).await;

    // Approved and collected: the task has ended, and says what to do next.
    let tokens = app.connect(&pa, SUB, "alice", &["orders:read"]).await;
    assert!(tokens["access_token"].is_string());
    let got = ok_json(get_task(&app, &pa_jwt, &id).await).await;
    let done = &got;
    assert_eq!(done["id"], id.as_str());
    assert_eq!(done["contextId"], task["contextId"]);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["status"]["message"]["role"], "ROLE_AGENT");
    let text = done["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.starts_with("Approved"), "{text}");
    assert_eq!(done["metadata"]["pact.authorizationStatus"], "approved");
    assert_eq!(
        done["metadata"]["pact.missingScopes"],
        json!(["orders:read"])
    );

    // The list stays PACT §4's empty one: step-up tasks are found by id.
    let res = app
        .http
        .get(format!("{}/tasks", app.iface("demo")))
        .bearer_auth(&pa_jwt)
        .send()
        .await
        .unwrap();
    assert_eq!(ok_json(res).await["tasks"], json!([]));
}

#[tokio::test]
async fn someone_elses_step_up_task_is_not_found_like_an_unknown_one() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let other_pa = app.registered_pa(OTHER_ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let v = ok_json(
        app.send("demo", &pa_jwt, "m1", "show my orders", None)
            .await,
    )
    .await;
    let id = v["task"]["id"].as_str().unwrap().to_owned();

    let not_found = format!("Task not found: {id}");
    // Another user of the same PA, and the same `sub` at another PA.
    for jwt in [
        pa.token("pa-user-2", app.audience()),
        other_pa.token(SUB, app.audience()),
    ] {
        assert_a2a_error(
            get_task(&app, &jwt, &id).await,
            404,
            "TASK_NOT_FOUND",
            Some(&not_found),
        )
        .await;
        let res = app
            .http
            .post(format!("{}/tasks/{id}:cancel", app.iface("demo")))
            .bearer_auth(&jwt)
            .send()
            .await
            .unwrap();
        assert_a2a_error(res, 404, "TASK_NOT_FOUND", Some(&not_found)).await;
    }
    // An id that never was, in either form.
    let unknown = uuid::Uuid::new_v4().to_string();
    assert_a2a_error(
        get_task(&app, &pa_jwt, &unknown).await,
        404,
        "TASK_NOT_FOUND",
        Some(&format!("Task not found: {unknown}")),
    )
    .await;
    // Without a valid PA-JWT: the bare 401 of PACT §3.
    let res = app
        .http
        .get(format!("{}/tasks/{id}", app.iface("demo")))
        .send()
        .await
        .unwrap();
    crate::assert_bare_401(res).await;
}

#[tokio::test]
async fn a_denied_step_up_task_is_rejected_and_an_undecided_one_fails_when_it_expires() {
    let app = delegated_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());

    let v = ok_json(
        app.send("demo", &pa_jwt, "m1", "show my orders", None)
            .await,
    )
    .await;
    let denied = v["task"].clone();
    app.deny(&user_code_of(&denied)).await;
    let got = ok_json(get_task(&app, &pa_jwt, denied["id"].as_str().unwrap()).await).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(got["metadata"]["pact.authorizationStatus"], "denied");

    // A new question gets a new link (the denied one is not live); nobody
    // decides it before its device code expires (600 s).
    let v = ok_json(
        app.send("demo", &pa_jwt, "m2", "show my orders", None)
            .await,
    )
    .await;
    let open = v["task"].clone();
    assert_ne!(user_code_of(&open), user_code_of(&denied));
    app.clock.advance(Duration::from_secs(601));
    let pa_jwt = pa.token_with(SUB, app.audience(), |_, claims| {
        let now = time::OffsetDateTime::now_utc().unix_timestamp() + 601;
        claims["iat"] = json!(now);
        claims["exp"] = json!(now + 60);
    });
    let got = ok_json(get_task(&app, &pa_jwt, open["id"].as_str().unwrap()).await).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(got["metadata"]["pact.authorizationStatus"], "expired");
    let text = got["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("expired"), "{text}");
}
