//! The Node processes written with the official MCP TypeScript SDK: the
//! brand agent of tests/mcp (an MCP client of pactd's per-turn endpoint) and
//! the example MCP server of examples/mcp-server, each a real separate
//! process started with the webhook secret it verifies pactd's calls with.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// `npm ci` once per directory and test run when the locked MCP SDK is not
/// installed yet (.ci/run installs it up front).
fn ensure_sdk(dir: &Path) {
    static DONE: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if done.iter().any(|d| d == dir) || dir.join("node_modules/@modelcontextprotocol/sdk").is_dir()
    {
        return;
    }
    let status = std::process::Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm is needed for the MCP tests (apt-get install -y nodejs npm)");
    assert!(status.success(), "npm ci failed in {}", dir.display());
    done.push(dir.to_owned());
}

/// A Node script of this repository that prints "listening on port N" first,
/// started with the webhook secret(s) it verifies pactd's calls with.
pub struct NodeService {
    pub base: String,
    _child: Child,
}

impl NodeService {
    /// `dir` relative to the repository root.
    pub async fn start(dir: &str, script: &str, whsec: &str) -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        ensure_sdk(&dir);
        let mut child = Command::new("node")
            .arg(dir.join(script))
            .args(["--port", "0"])
            .env("MERCHANT_WEBHOOK_SECRET", whsec)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the service");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("the service starts")
            .unwrap()
            .expect("it prints its port");
        let port: u16 = line
            .strip_prefix("listening on port ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        Self {
            base: format!("http://127.0.0.1:{port}"),
            _child: child,
        }
    }

    /// The brand agent of tests/mcp: an MCP client of pactd's per-turn endpoint.
    pub async fn brand_agent(whsec: &str) -> Self {
        Self::start("tests/mcp", "brand-agent.mjs", whsec).await
    }

    /// Example Shop's order tools as an MCP server (examples/mcp-server).
    pub async fn example_mcp_server(whsec: &str) -> Self {
        Self::start("examples/mcp-server", "server.mjs", whsec).await
    }

    pub async fn stats(&self) -> Value {
        crate::http_get(format!("{}/stats", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// What the brand agent saw in the turn of this message.
    pub async fn seen(&self, message_id: &str) -> Value {
        self.stats().await["turns"][message_id].clone()
    }
}
