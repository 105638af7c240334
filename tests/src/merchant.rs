//! The example merchant (`examples/merchant/merchant.py`) as a real separate
//! process, and a brand pointed at it the way `pactd brand set --agent-url`
//! and `pactd brand tool add` do.

use std::process::Stdio;

use pact_db::merchant::BrandTool;
use pact_server::merchant::signing::WebhookSecret;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use uuid::Uuid;

use crate::TestApp;

/// Starts one of the Python examples (`script`, from the repository's root)
/// with `args` and its webhook secrets (comma-separated) in
/// `MERCHANT_WEBHOOK_SECRET`: the process and the port it says it listens on.
pub(crate) async fn start_example(script: &str, args: &[&str], secrets: &str) -> (Child, u16) {
    let path = format!("{}/../{script}", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new("python3")
        .arg(&path)
        .args(args)
        .env("MERCHANT_WEBHOOK_SECRET", secrets)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("python3 runs {script}: {e}"));
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{script} starts"))
        .unwrap()
        .expect("it prints its port");
    let port: u16 = line
        .strip_prefix("listening on port ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (child, port)
}

pub struct Merchant {
    /// `http://127.0.0.1:{port}`
    pub base: String,
    /// The `whsec_…` it verifies with.
    pub secret: String,
    _child: Child,
    http: reqwest::Client,
}

impl Merchant {
    /// Starts the example on a free loopback port with these secrets (comma-separated).
    pub async fn start(secrets: &str) -> Self {
        Self::start_on(0, secrets).await
    }

    /// Starts the example on `port` (0: any free port).
    pub async fn start_on(port: u16, secrets: &str) -> Self {
        let (child, port) = start_example(
            "examples/merchant/merchant.py",
            &["--port", &port.to_string()],
            secrets,
        )
        .await;
        Self {
            base: format!("http://127.0.0.1:{port}"),
            secret: secrets.to_owned(),
            _child: child,
            http: pact_jose::with_shared_tls(reqwest::Client::builder())
                .build()
                .unwrap(),
        }
    }

    pub fn agent_url(&self) -> String {
        format!("{}/pact", self.base)
    }

    /// What really reached the example: agent calls, tool calls, cancellations.
    pub async fn stats(&self) -> Value {
        self.http
            .get(format!("{}/stats", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// POSTs raw bytes with the given Standard Webhooks headers (signature tests).
    pub async fn post_raw(&self, path: &str, headers: &[(&str, String)], body: &[u8]) -> u16 {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        req.send().await.unwrap().status().as_u16()
    }
}

impl TestApp {
    /// A new webhook secret for `brand`, stored sealed as the CLI does; its `whsec_…`.
    pub async fn new_webhook_secret(&self, brand: &str) -> String {
        let secret = WebhookSecret::generate().unwrap();
        let id = Uuid::new_v4();
        let sealed = secret
            .seal(&self.master_key, &crate::brand_id(brand), id)
            .unwrap();
        let mut tx = self.db.begin().await.unwrap();
        pact_db::merchant::retire_current_secret(
            &mut *tx,
            &crate::brand_id(brand),
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
        pact_db::merchant::insert_secret(&mut *tx, id, &crate::brand_id(brand), &sealed)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        // Nodes keep the secrets in memory; the change is announced (migration 0040).
        self.settle().await;
        secret.to_whsec()
    }

    /// Points `brand` at `agent_url` (webhook kind) with an agent timeout.
    pub async fn set_agent(&self, brand: &str, agent_url: &str, agent_timeout_ms: Option<i32>) {
        pact_db::merchant::set_agent(
            &self.db,
            &crate::brand_id(brand),
            agent_url,
            agent_timeout_ms,
            None,
        )
        .await
        .unwrap();
        self.settle().await;
    }

    /// Starts the example merchant and serves `brand` with it: agent URL, a
    /// fresh secret, and its two tools (`lookup_orders`: orders:read;
    /// `cancel_order`: orders:cancel, its `order_id` limited by the demo
    /// details type's `order_ids`: the rule `order_ids=order_id`).
    pub async fn merchant_brand(&self, brand: &str) -> Merchant {
        let whsec = self.new_webhook_secret(brand).await;
        let m = Merchant::start(&whsec).await;
        self.set_agent(brand, &m.agent_url(), None).await;
        for (name, scope, path, enforce) in [
            ("lookup_orders", "orders:read", "lookup-orders", json!([])),
            (
                "cancel_order",
                "orders:cancel",
                "cancel-order",
                json!(["order_ids=order_id"]),
            ),
        ] {
            pact_db::merchant::upsert_tool(
                &self.db,
                &BrandTool {
                    brand_id: crate::brand_id(brand),
                    name: name.to_owned(),
                    scope: Some(scope.to_owned()),
                    url: format!("{}/tools/{path}", m.base),
                    description: String::new(),
                    enforce,
                    input_schema: None,
                    kind: pact_db::merchant::TOOL_KIND_URL.to_owned(),
                    remote_name: None,
                    mapped: true,
                    summary: String::new(),
                },
            )
            .await
            .unwrap();
        }
        self.settle().await;
        m
    }
}
