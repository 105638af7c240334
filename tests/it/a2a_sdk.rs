//! pactd driven by the official A2A SDKs, used as an agent developer would
//! (docs/a2a-clients.md): the JavaScript `@a2a-js/sdk` (tests/a2a-js, locked
//! by npm) and the Python `a2a-sdk` (tests/a2a-py/requirements.txt, installed
//! from PyPI into a virtual environment under the test's temporary
//! directory), each over both bindings on pactd's card (HTTP+JSON and
//! JSON-RPC). The script is a real separate process; this side mints its
//! PA-JWTs (on a loopback endpoint, as they live two minutes), approves its
//! step-up as the person, checks every line it prints and verifies the
//! delegated turn's receipt with the provider's published keys.
//!
//! The Python test skips, saying why, only when the virtual environment
//! cannot be made or PyPI cannot be reached.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use pact_tests::{TestApp, TestPa};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const ISS: &str = "https://pa.example/sdk";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What the script's PA-JWT endpoint signs for.
struct Minter {
    pa: Arc<TestPa>,
    sub: String,
    audience: String,
}

async fn mint(State(m): State<Arc<Minter>>) -> String {
    m.pa.token(&m.sub, &m.audience)
}

/// Runs one script over one binding as `sub`: the lines it printed, by
/// step. The person approves `orders:read` at the step-up task's link once
/// the script says it has seen the task pending through Get Task.
async fn run(app: &TestApp, pa: &Arc<TestPa>, sub: &str, mut cmd: Command, binding: &str) -> Value {
    let helper = pact_tests::held::serve(
        axum::Router::new()
            .route("/pa-jwt", axum::routing::get(mint))
            .with_state(Arc::new(Minter {
                pa: pa.clone(),
                sub: sub.to_owned(),
                audience: app.audience().to_owned(),
            })),
    )
    .await;
    let mut child = cmd
        .env(
            "A2A_CARD_URL",
            format!("{}/.well-known/agent-card.json", app.iface("demo")),
        )
        .env("A2A_BINDING", binding)
        .env("PA_HELPER_URL", helper)
        .env("PA_ISSUER", &pa.issuer)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the SDK script starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut steps = serde_json::Map::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{binding}: not a JSON line ({e}): {line}"));
            let step = v["step"].as_str().unwrap().to_owned();
            if step == "pending" {
                // The person opens the task's link and approves, while the
                // script follows the task it has just seen pending.
                let link = &v["task"]["metadata"]["pact.verificationUriComplete"];
                let code = link.as_str().unwrap().split("user_code=").nth(1).unwrap();
                app.approve(code, "alice", &["orders:read"]).await;
            }
            steps.insert(step, v);
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read)
        .await
        .unwrap_or_else(|_| panic!("{binding}: the script did not finish in 2 minutes"));
    let status = child.wait().await.unwrap();
    assert!(
        status.success(),
        "{binding}: the script failed ({status}): {steps:?}"
    );
    assert!(steps.contains_key("done"), "{binding}: {steps:?}");
    Value::Object(steps)
}

fn text(message: &Value) -> &str {
    message["parts"][0]["text"].as_str().unwrap_or("")
}

/// What both SDKs must have seen over `binding`, whatever their language.
/// `errors` are the SDK's own error names for an unknown context, an unknown
/// task, a non-text part and cancelling one's own step-up task.
async fn check(app: &TestApp, v: &Value, binding: &str, errors: [&str; 4]) {
    let card = &v["card"];
    assert_eq!(card["transport"], binding, "{card}");
    assert_eq!(card["description"], "A small demo store", "{card}");
    assert_eq!(
        card["interfaces"],
        json!(["HTTP+JSON", "JSONRPC"]),
        "{card}"
    );

    // Identity turns: a reply in a context pactd minted, then the same one.
    let first = &v["identity"]["message"];
    assert_eq!(first["role"], "ROLE_AGENT", "{v}");
    assert!(!text(first).is_empty(), "{first}");
    let ctx = first["contextId"].as_str().unwrap();
    assert!(!ctx.is_empty());
    let again = &v["continued"]["message"];
    assert_eq!(again["contextId"], ctx, "{again}");
    assert!(first["metadata"].get("pact.receipt").is_none(), "{first}");

    // The step-up: an auth-required task in the same context; the PA's own
    // device authorization for the missing scope took over the task's link.
    let up = &v["step-up"];
    let task = &up["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{up}");
    assert_eq!(task["contextId"], ctx, "{up}");
    assert_eq!(
        task["metadata"]["pact.missingScopes"],
        json!(["orders:read"])
    );
    assert_eq!(up["userCode"], up["linkUserCode"], "{up}");

    // Followed with Get Task: the task as returned, pending, then completed
    // once approved.
    let mut pending = task.clone();
    pending["metadata"]["pact.authorizationStatus"] = json!("pending");
    assert_eq!(v["pending"]["task"], pending, "{v}");
    let followed = &v["followed"];
    assert_eq!(
        followed["states"],
        json!(["TASK_STATE_AUTH_REQUIRED", "TASK_STATE_COMPLETED"]),
        "{followed}"
    );
    assert_eq!(followed["task"]["id"], task["id"]);
    assert_eq!(
        followed["task"]["metadata"]["pact.authorizationStatus"],
        "approved"
    );

    // The delegated turn, with the collected token: the orders, receipted.
    let reply = &v["delegated"]["message"];
    assert_eq!(reply["contextId"], ctx, "{reply}");
    assert!(text(reply).starts_with("Your orders:"), "{reply}");
    let claims = app.verified_receipt(reply).await;
    assert_eq!(claims.scopes_used, ["orders:read"]);
    assert_eq!(claims.user, "alice");
    assert_eq!(claims.pa, ISS);

    assert_eq!(v["listed"]["count"], 0, "{v}");

    // The error cases, as the SDK's typed errors.
    let e = &v["errors"];
    for (case, name, reason) in [
        ("unknownContext", errors[0], "INVALID_PARAMS"),
        ("unknownTask", errors[1], "TASK_NOT_FOUND"),
        ("nonText", errors[2], "CONTENT_TYPE_NOT_SUPPORTED"),
        ("cancel", errors[3], "TASK_NOT_CANCELABLE"),
    ] {
        assert_eq!(e[case]["thrown"], true, "{binding} {case}: {e}");
        assert_eq!(e[case]["name"], name, "{binding} {case}: {e}");
        assert_eq!(e[case]["reason"], reason, "{binding} {case}: {e}");
    }
}

async fn delegated_app() -> (TestApp, Arc<TestPa>) {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    app.enable_demo_delegation().await;
    let pa = Arc::new(app.registered_pa(ISS).await);
    (app, pa)
}

/// `npm ci` in tests/a2a-js unless the locked SDK is there (.ci/run installs it).
fn js_sdk() -> PathBuf {
    let dir = repo().join("tests/a2a-js");
    if !dir.join("node_modules/@a2a-js/sdk").is_dir() {
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm is needed for the A2A SDK tests (apt-get install -y nodejs npm)");
        assert!(status.success(), "npm ci failed in {}", dir.display());
    }
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_javascript_sdk_runs_identity_step_up_and_delegated_turns() {
    let dir = js_sdk();
    let (app, pa) = delegated_app().await;
    for (binding, sub, errors) in [
        (
            "HTTP+JSON",
            "js-rest",
            [
                "RestRequestMalformedError",
                "RestTaskNotFoundError",
                "RestContentTypeNotSupportedError",
                "RestTaskNotCancelableError",
            ],
        ),
        (
            "JSONRPC",
            "js-jsonrpc",
            [
                "JsonRpcRequestMalformedError",
                "JsonRpcTaskNotFoundError",
                "JsonRpcContentTypeNotSupportedError",
                "JsonRpcTaskNotCancelableError",
            ],
        ),
    ] {
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("pa-client.mjs")).current_dir(&dir);
        let v = run(&app, &pa, sub, cmd, binding).await;
        check(&app, &v, binding, errors).await;
    }
}

/// A virtual environment with tests/a2a-py/requirements.txt installed, under
/// `work`: its python, or why it cannot be had here (no venv module, PyPI
/// out of reach). Once PyPI answers, a failing install is a failure, not a
/// skip: the pins must stay installable.
fn python_sdk(work: &Path) -> Result<PathBuf, String> {
    let venv = work.join("venv");
    let made = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("python3 is not available: {e}"))?;
    if !made.status.success() {
        return Err(format!(
            "`python3 -m venv` failed (Debian: apt-get install -y python3-venv): {}",
            String::from_utf8_lossy(&made.stderr).trim()
        ));
    }
    let pip = |args: &[&str]| {
        std::process::Command::new(venv.join("bin/pip"))
            .args(["--quiet", "--disable-pip-version-check"])
            .args(args)
            .current_dir(work)
            .output()
    };
    // Reachability through pip itself, so its own index and proxy settings apply.
    let probe = pip(&["download", "--no-deps", "--dest", "probe", "a2a-sdk==1.3.0"])
        .map_err(|e| format!("pip did not run: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "PyPI cannot be reached (`pip download a2a-sdk==1.3.0` failed): {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    let requirements = repo().join("tests/a2a-py/requirements.txt");
    let installed = pip(&["install", "-r", requirements.to_str().unwrap()]).unwrap();
    assert!(
        installed.status.success(),
        "PyPI answers, but tests/a2a-py/requirements.txt does not install: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    Ok(venv.join("bin/python"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_sdk_runs_identity_step_up_and_delegated_turns() {
    let work = std::env::temp_dir().join(format!("pactd-a2a-py-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&work).unwrap();
    let python = match tokio::task::spawn_blocking({
        let work = work.clone();
        move || python_sdk(&work)
    })
    .await
    .unwrap()
    {
        Ok(python) => python,
        Err(why) => {
            std::fs::remove_dir_all(&work).ok();
            pact_tests::skip(&format!(
                "the A2A Python SDK cannot be installed here: {why}"
            ));
            return;
        }
    };
    let (app, pa) = delegated_app().await;
    let script = repo().join("tests/a2a-py/pa_client.py");
    for (binding, sub) in [("HTTP+JSON", "py-rest"), ("JSONRPC", "py-jsonrpc")] {
        let mut cmd = Command::new(&python);
        cmd.arg(&script).current_dir(&work);
        let v = run(&app, &pa, sub, cmd, binding).await;
        // The SDK's default, JSON-RPC only, finds its interface on the card.
        assert_eq!(v["card"]["defaultTransport"], "JSONRPC", "{v}");
        check(
            &app,
            &v,
            binding,
            [
                "InvalidParamsError",
                "TaskNotFoundError",
                "ContentTypeNotSupportedError",
                "TaskNotCancelableError",
            ],
        )
        .await;
    }
    std::fs::remove_dir_all(&work).ok();
}

/// The lines between `[doc:name]` and `[/doc:name]` (in a `//` or `#`
/// comment) of a script, without their common indentation.
fn marked(script: &str, name: &str) -> Option<String> {
    let mut lines = script.lines();
    lines.find(|l| {
        let l = l.trim_start();
        l == format!("// [doc:{name}]") || l == format!("# [doc:{name}]")
    })?;
    let body: Vec<&str> = lines
        .take_while(|l| !l.trim_start().ends_with(&format!("[/doc:{name}]")))
        .collect();
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    Some(
        body.iter()
            .map(|l| format!("{}\n", l.get(indent..).unwrap_or("")))
            .collect(),
    )
}

/// docs/a2a-clients.md quotes the scripts these tests run: each block after
/// a `<!-- from PATH#NAME -->` line is exactly that marked part of PATH.
#[test]
fn the_client_guide_quotes_the_scripts_the_tests_run() {
    let doc = std::fs::read_to_string(repo().join("docs/a2a-clients.md")).unwrap();
    let mut quoted = 0;
    let mut rest = doc.as_str();
    while let Some(at) = rest.find("<!-- from ") {
        rest = &rest[at + "<!-- from ".len()..];
        let (source, after) = rest.split_once(" -->\n").unwrap();
        let (path, name) = source.split_once('#').unwrap();
        let (_fence, block) = after.split_once('\n').unwrap();
        let (block, _) = block.split_once("```").unwrap();
        let script = std::fs::read_to_string(repo().join(path)).unwrap();
        let expected = marked(&script, name).unwrap_or_else(|| panic!("no [doc:{name}] in {path}"));
        assert_eq!(block, expected, "docs/a2a-clients.md quotes {path}#{name}");
        quoted += 1;
    }
    assert_eq!(quoted, 14, "every snippet of the guide is checked");
}
