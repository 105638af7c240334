//! A property-based fuzzer (schemathesis, from PyPI) against the admin API's
//! own OpenAPI document: no generated request may produce a 5xx, and every
//! answer must be one the document describes. Runs with an owner credential
//! on a database holding a grant, a customer and an agent platform.
//!
//! The test skips, saying why, only when schemathesis is neither installed
//! nor installable (`pip install schemathesis==`[`SCHEMATHESIS`]; `.ci/run`
//! needs python3 with pip and network access to PyPI).

use std::process::Stdio;

use pact_tests::TestApp;
use uuid::Uuid;

/// The release the checks and options below are written for: pinned, so a
/// new release cannot change what this test means.
const SCHEMATHESIS: &str = "4.32.5";

fn schemathesis_available() -> Result<(), String> {
    let works = || {
        std::process::Command::new("schemathesis")
            .arg("--version")
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| {
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains(SCHEMATHESIS)
            })
    };
    if works() {
        return Ok(());
    }
    let installed = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet"])
        .arg(format!("schemathesis=={SCHEMATHESIS}"))
        .status();
    match installed {
        Ok(s) if s.success() && works() => Ok(()),
        Ok(s) => Err(format!(
            "`python3 -m pip install schemathesis=={SCHEMATHESIS}` failed ({s})"
        )),
        Err(e) => Err(format!("python3 is not available: {e}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_undocumented_answer() {
    if let Err(why) = schemathesis_available() {
        pact_tests::skip(&format!("schemathesis cannot run here: {why}"));
        return;
    }
    let app = TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let (secret, hash) = pact_server::admin::credential::new_secret();
    pact_db::admins::insert_credential(
        &app.db,
        Uuid::new_v4(),
        "fuzz",
        pact_db::admins::Role::Owner,
        None,
        &hash,
    )
    .await
    .unwrap();
    let pa = app.registered_pa("https://pa.example").await;
    app.node_connect("demo", &pa, "pa-sub", "alice", &["orders:read"], None)
        .await;
    pact_tests::pages::add_user(&app, "demo", "ann@example.com", "correct horse battery").await;

    let work = std::env::temp_dir().join(format!("pactd-schemathesis-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&work).unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        tokio::process::Command::new("schemathesis")
            .args([
                "run",
                &format!("{}/admin/api/v1/openapi.json", app.base_url),
                "--url",
                &format!("{}/admin/api/v1", app.base_url),
                "--header",
                &format!("Authorization: Bearer {secret}"),
                "--checks",
                // negative_data_rejection: a body or parameter the document
                // does not admit is refused. Not positive_data_acceptance: a
                // body the document admits may still name a logo that does
                // not load, keys that are no keys, a cursor or an agent that
                // is not there, which no schema can say.
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,negative_data_rejection",
                "--max-examples",
                "25",
                "--generation-deterministic",
                // It could revoke the very credential the run uses.
                "--exclude-operation-id",
                "revokeCredential",
                "--workers",
                "1",
            ])
            .current_dir(&work)
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("schemathesis did not finish in 5 minutes")
    .unwrap();
    std::fs::remove_dir_all(&work).ok();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{stdout}\n{stderr}"
    );
}
