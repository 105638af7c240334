//! Runs a Playwright script of `tests/browser` (headless Debian Chromium,
//! driven by playwright-core) with its input on stdin; its last line of
//! output is the journey's result.
//!
//! At most [`AT_ONCE`] browsers run at a time in one test binary: on CI's two
//! cores, six journeys at once made each one several times slower than alone,
//! and a journey that times out says nothing about the pages it tests.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

/// Browsers at a time.
pub const AT_ONCE: usize = 2;
/// How long one journey may take once its browser may start (each step has
/// Playwright's own 15 s limit, so a stuck page fails well before this).
const LIMIT: Duration = Duration::from_secs(180);

static BROWSERS: Semaphore = Semaphore::const_new(AT_ONCE);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `npm ci` once per test run when playwright-core is not installed yet.
fn ensure_playwright() {
    static READY: OnceLock<()> = OnceLock::new();
    READY.get_or_init(|| {
        let dir = workspace().join("tests/browser");
        if dir.join("node_modules/playwright-core").exists()
            && dir.join("node_modules/axe-core").exists()
        {
            return;
        }
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm is needed for the browser tests (apt-get install -y nodejs npm)");
        assert!(status.success(), "npm ci failed in tests/browser");
    });
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "the browser tests need Debian's Chromium: apt-get install -y chromium (.ci/run does it)"
    );
}

/// Runs `script journey` with `input` (plus `shots`, the directory its
/// screenshots go to: `target/browser-screenshots/<shots>`); panics with the
/// script's output unless it succeeds, else returns its last line as JSON.
pub async fn run(script: &str, journey: &str, shots: &str, mut input: Value) -> Value {
    ensure_playwright();
    let shots = workspace().join("target/browser-screenshots").join(shots);
    std::fs::remove_dir_all(&shots).ok();
    std::fs::create_dir_all(&shots).unwrap();
    input["shots"] = json!(shots);
    let _browser = BROWSERS.acquire().await.unwrap();
    let started = std::time::Instant::now();
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .arg(journey)
        .current_dir(workspace().join("tests/browser"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node is needed for the browser tests");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .await
        .unwrap();
    let out = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the browser journey {script} {journey} did not finish in {} s; screenshots: {}",
                LIMIT.as_secs(),
                shots.display()
            )
        })
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "journey {script} {journey} failed after {:.1} s:\n{stderr}\n{stdout}\nscreenshots: {}",
        started.elapsed().as_secs_f64(),
        shots.display()
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or("{}")).unwrap()
}
