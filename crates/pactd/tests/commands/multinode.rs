//! The shape a merchant runs, with real processes: three `pactd serve` nodes
//! on one PostgreSQL behind Debian's nginx running `deploy/nginx/pactd.conf`,
//! and (in `failover`) pactd through HAProxy running `deploy/haproxy/pactd.cfg`
//! while a streaming replica is promoted.
//!
//! Short by default (CI); `PACTD_SLOW_SUITE=long` runs more rounds for longer.
//! nginx and HAProxy are required, not optional: a machine without them fails
//! here with the apt command (`.ci/run` installs them), instead of passing
//! without having run anything.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pact_tests::{TestApp, TestPa};
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::support::{PACTD, free_port, repo_file};

const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The client's own address, the proxy's address towards the nodes, and a
/// forged one: all distinct, so the test sees which one pactd recorded.
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const PROXY_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const FORGED_IP: &str = "203.0.113.9";
const ISSUER: &str = "https://pa.example";

fn long_suite() -> bool {
    std::env::var("PACTD_SLOW_SUITE").is_ok_and(|v| v == "long")
}

/// A system tool the test cannot run without: on PATH or in Debian's sbin.
fn required_tool(name: &str, package: &str) -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("{name} is needed for this test: apt-get install -y {package} (.ci/run does it)")
    })
}

/// A private directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "pactd-multinode-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        // nginx's and PostgreSQL's unprivileged processes work in here when we are root.
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        Self(path)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

async fn wait_for_port(addr: SocketAddr, what: &str, log: impl Fn() -> String) {
    let deadline = Instant::now() + START_TIMEOUT;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen: {}",
            log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------
// pactd nodes
// ---------------------------------------------------------------------------

/// What every node of one deployment shares.
#[derive(Clone)]
struct Deployment {
    db_url: String,
    master_key: String,
    public_url: String,
    trusted_proxies: String,
}

impl Deployment {
    fn audience(&self) -> String {
        format!("{}/a2a", self.public_url)
    }

    /// `pactd` with none of the caller's settings leaking in, on this deployment's database.
    fn pactd(&self) -> Command {
        let mut cmd = Command::new(PACTD);
        for (key, _) in std::env::vars_os() {
            let key_text = key.to_string_lossy();
            if key_text.starts_with("PACTD_") || key_text.starts_with("DATABASE_URL") {
                cmd.env_remove(&key);
            }
        }
        cmd.env("DATABASE_URL", &self.db_url)
            .env("PACTD_MASTER_KEY", &self.master_key)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }
}

/// A `pactd serve` child on 127.0.0.1:`port`.
struct Node {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Node {
    async fn start(deployment: &Deployment, port: u16, logs: &Scratch) -> Self {
        Self::start_with(deployment, port, logs, &[]).await
    }

    async fn start_with(
        deployment: &Deployment,
        port: u16,
        logs: &Scratch,
        extra: &[String],
    ) -> Self {
        let log = logs.file(&format!("pactd-{port}.log"));
        let mut cmd = deployment.pactd();
        cmd.args(["serve", "--no-migrate", "--allow-loopback-jwks"])
            .args(extra)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--public-url")
            .arg(&deployment.public_url)
            .arg("--trusted-proxies")
            .arg(&deployment.trusted_proxies)
            // The stream sends as fast as it can from a few users; the limits are
            // not what this test is about.
            .args(["--rate-limit-pa", "100000,100000"])
            .args(["--rate-limit-user", "100000,100000"])
            // A retry of a turn whose node died waits at most this long less 2 s.
            .args(["--request-timeout", "6"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut node = Self {
            child: cmd.spawn().unwrap(),
            port,
            log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = node.child.try_wait().unwrap() {
                panic!("pactd exited before serving ({status}): {}", node.log());
            }
            if let Ok(res) = pact_tests::http_get(format!("{}/healthz", node.url())).await
                && res.status() == 200
            {
                return node;
            }
            assert!(Instant::now() < deadline, "no /healthz: {}", node.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no drain, whatever is in flight is cut.
    async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

// ---------------------------------------------------------------------------
// nginx with the shipped configuration
// ---------------------------------------------------------------------------

struct Nginx {
    child: Child,
    port: u16,
    dir: Scratch,
}

impl Nginx {
    /// `deploy/nginx/pactd.conf` with only the listen address, the certificate
    /// lines and the nodes' addresses replaced, nginx's connections to the
    /// nodes made from [`PROXY_IP`].
    async fn start(node_ports: &[u16], port: u16) -> Self {
        let nginx = required_tool("nginx", "nginx-light");
        let dir = Scratch::new("nginx");
        let shipped = std::fs::read_to_string(repo_file("deploy/nginx/pactd.conf")).unwrap();
        let mut conf = String::new();
        let mut servers = node_ports.iter();
        let mut replaced = 0;
        for line in shipped.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("server 10.0.0.") {
                let port = servers.next().expect("more upstream lines than nodes");
                let rest = trimmed
                    .split_once(' ')
                    .unwrap()
                    .1
                    .split_once(' ')
                    .unwrap()
                    .1;
                conf.push_str(&format!("    server 127.0.0.1:{port} {rest}\n"));
                replaced += 1;
            } else if trimmed == "listen 443 ssl;" {
                conf.push_str(&format!("    listen 127.0.0.1:{port};\n"));
                replaced += 1;
            } else if trimmed.starts_with("ssl_certificate") {
                replaced += 1;
            } else if let Some(format) =
                trimmed.strip_prefix("access_log /var/log/nginx/pactd-access.log ")
            {
                // The shipped log, here, beside the test's own (a server-level
                // access_log hides the http level's).
                conf.push_str(&format!(
                    "    access_log {}/shipped-access.log {format}\n    access_log {}/access.log upstream;\n",
                    dir.0.display(),
                    dir.0.display()
                ));
                replaced += 1;
            } else {
                conf.push_str(line);
                conf.push('\n');
            }
        }
        assert_eq!(
            replaced,
            node_ports.len() + 4,
            "deploy/nginx/pactd.conf no longer has the lines this test replaces"
        );
        assert!(servers.next().is_none(), "fewer upstream lines than nodes");
        std::fs::write(dir.file("pactd.conf"), conf).unwrap();
        let d = dir.0.display();
        let main = format!(
            "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  log_format upstream '$upstream_addr $request_method $uri $status';\n\
             access_log {d}/access.log upstream;\n\
             client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
             fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
             proxy_bind {PROXY_IP};\n  include {d}/pactd.conf;\n}}\n"
        );
        std::fs::write(dir.file("nginx.conf"), main).unwrap();
        let mut cmd = Command::new(nginx);
        cmd.arg("-p")
            .arg(&dir.0)
            .arg("-c")
            .arg(dir.file("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.file("stderr.log")).unwrap())
            .kill_on_drop(true);
        let child = cmd.spawn().unwrap();
        let this = Self { child, port, dir };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        wait_for_port(addr, "nginx", || this.logs()).await;
        this
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the shipped configuration's access log holds.
    fn shipped_log(&self) -> String {
        std::fs::read_to_string(self.dir.file("shipped-access.log")).unwrap_or_default()
    }

    /// The node each request to a path containing `part` went to, in order
    /// (`$upstream_addr` from the access log).
    fn upstreams_of(&self, part: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.file("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(part))
            .filter_map(|l| l.split(' ').next().map(str::to_owned))
            .collect()
    }

    fn logs(&self) -> String {
        let read = |n: &str| std::fs::read_to_string(self.dir.file(n)).unwrap_or_default();
        format!("{}{}", read("stderr.log"), read("error.log"))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master stops its workers too (SIGKILL would leave them
        // holding the port).
        if let Some(pid) = self.child.id() {
            signal(pid, "-TERM");
            for _ in 0..100 {
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The PA's side
// ---------------------------------------------------------------------------

/// An HTTP client on [`CLIENT_IP`], so pactd can tell it from the proxy.
fn client() -> reqwest::Client {
    pact_jose::with_shared_tls(reqwest::Client::builder())
        .local_address(IpAddr::V4(CLIENT_IP))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

struct Agent {
    pa: TestPa,
    audience: String,
    http: reqwest::Client,
}

/// One user's grant, as the PA holds it.
struct Connected {
    sub: String,
    access: String,
    refresh: String,
}

impl Agent {
    async fn device_authorization(
        &self,
        base: &str,
        sub: &str,
        forwarded_for: Option<&str>,
    ) -> Value {
        self.device_authorization_for(base, sub, forwarded_for, &["orders:read"], None)
            .await
    }

    /// Device authorization for `scopes`, with RFC 9396 `details` if any.
    async fn device_authorization_for(
        &self,
        base: &str,
        sub: &str,
        forwarded_for: Option<&str>,
        scopes: &[&str],
        details: Option<&Value>,
    ) -> Value {
        let scope = scopes.join(" ");
        let details = details.map(Value::to_string);
        let mut form = vec![("client_id", ISSUER), ("scope", scope.as_str())];
        if let Some(d) = &details {
            form.push(("authorization_details", d.as_str()));
        }
        let mut req = self
            .http
            .post(format!("{base}/a2a/demo/oauth/device_authorization"))
            .bearer_auth(self.pa.token(sub, &self.audience))
            .form(&form);
        if let Some(xff) = forwarded_for {
            req = req.header("X-Forwarded-For", xff);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 200);
        res.json().await.unwrap()
    }

    /// Device authorization and token through `base`; the person approves in between.
    async fn connect(&self, app: &TestApp, base: &str, sub: &str) -> Connected {
        self.connect_for(app, base, sub, &["orders:read"], None)
            .await
    }

    /// [`Self::connect`] for `scopes` and `details`, all approved as asked.
    async fn connect_for(
        &self,
        app: &TestApp,
        base: &str,
        sub: &str,
        scopes: &[&str],
        details: Option<&Value>,
    ) -> Connected {
        let auth = self
            .device_authorization_for(base, sub, None, scopes, details)
            .await;
        app.approve(
            auth["user_code"].as_str().unwrap(),
            &format!("user-{sub}"),
            scopes,
        )
        .await;
        let res = self
            .http
            .post(format!("{base}/a2a/demo/oauth/token"))
            .bearer_auth(self.pa.token(sub, &self.audience))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", auth["device_code"].as_str().unwrap()),
                ("client_id", ISSUER),
            ])
            .send()
            .await
            .unwrap();
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, 200, "{body}");
        Connected {
            sub: sub.to_owned(),
            access: body["access_token"].as_str().unwrap().to_owned(),
            refresh: body["refresh_token"].as_str().unwrap().to_owned(),
        }
    }

    /// The whole delegated journey through `base`: device authorization, the
    /// person's approval (on `state`, as the consent page does it), the token
    /// poll and a first turn. The first answer that is not a 200 ends it.
    async fn journey(&self, state: &pact_server::AppState, base: &str, sub: &str) -> Outcome {
        let res = self
            .http
            .post(format!("{base}/a2a/demo/oauth/device_authorization"))
            .bearer_auth(self.pa.token(sub, &self.audience))
            .form(&[("client_id", ISSUER), ("scope", "orders:read")])
            .send()
            .await;
        let auth: Value = match res {
            Ok(r) if r.status() == 200 => r.json().await.unwrap(),
            other => return outcome(other).await,
        };
        let found =
            pact_server::consent::find_by_user_code(state, auth["user_code"].as_str().unwrap())
                .await
                .unwrap()
                .expect("live user code");
        pact_server::consent::approve(
            state,
            pact_server::consent::Approval {
                authorization_id: found.id,
                user_sub: &format!("user-{sub}").into(),
                scopes: ["orders:read".to_owned()].into(),
                authorization_details: None,
            },
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
        let res = self
            .http
            .post(format!("{base}/a2a/demo/oauth/token"))
            .bearer_auth(self.pa.token(sub, &self.audience))
            .form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", auth["device_code"].as_str().unwrap()),
                ("client_id", ISSUER),
            ])
            .send()
            .await;
        let tokens: Value = match res {
            Ok(r) if r.status() == 200 => r.json().await.unwrap(),
            other => return outcome(other).await,
        };
        let user = Connected {
            sub: sub.to_owned(),
            access: tokens["access_token"].as_str().unwrap().to_owned(),
            refresh: tokens["refresh_token"].as_str().unwrap().to_owned(),
        };
        outcome(self.send(base, &user, "first").await).await
    }

    async fn send(
        &self,
        base: &str,
        user: &Connected,
        message_id: &str,
    ) -> reqwest::Result<reqwest::Response> {
        let message = json!({"messageId": message_id, "role": "ROLE_USER",
                             "parts": [{"text": "my orders"}]});
        self.http
            .post(format!("{base}/a2a/demo/message:send"))
            .bearer_auth(self.pa.token(&user.sub, &self.audience))
            .header("X-A2A-User-Delegation", format!("Bearer {}", user.access))
            .json(&json!({ "message": message }))
            .send()
            .await
    }

    async fn revoke(&self, base: &str, user: &Connected) -> u16 {
        self.http
            .post(format!("{base}/a2a/demo/oauth/revoke"))
            .bearer_auth(self.pa.token(&user.sub, &self.audience))
            .form(&[("token", user.refresh.as_str()), ("client_id", ISSUER)])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

/// How one request ended, as a client sees it.
#[derive(Debug)]
enum Outcome {
    Ok,
    /// 503 with `Retry-After` and a JSON body: the client may retry.
    Retryable,
    Bad(String),
}

async fn outcome(res: reqwest::Result<reqwest::Response>) -> Outcome {
    let res = match res {
        Ok(r) => r,
        Err(e) => return Outcome::Bad(format!("transport: {e}")),
    };
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    let body = res.text().await.unwrap_or_default();
    match status {
        200 => Outcome::Ok,
        503 if retry_after && serde_json::from_str::<Value>(&body).is_ok() => Outcome::Retryable,
        _ => Outcome::Bad(format!("{status}: {body}")),
    }
}

/// The failures by kind, most frequent first, each with its count: printed
/// before any log, so a failure cut short by CI's output limit still says
/// what went wrong.
fn kinds(bad: &[String]) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for why in bad {
        *counts.entry(why.chars().take(160).collect()).or_default() += 1;
    }
    let mut by_count: Vec<_> = counts.into_iter().collect();
    by_count.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    by_count
        .iter()
        .take(8)
        .map(|(why, n)| format!("{n}x {why}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    retryable: AtomicU64,
    bad: std::sync::Mutex<Vec<String>>,
}

impl Tally {
    fn add(&self, o: Outcome) {
        match o {
            Outcome::Ok => self.ok.fetch_add(1, Ordering::Relaxed),
            Outcome::Retryable => self.retryable.fetch_add(1, Ordering::Relaxed),
            Outcome::Bad(why) => {
                self.bad.lock().unwrap().push(why);
                0
            }
        };
    }

    fn figures(&self) -> (u64, u64, Vec<String>) {
        (
            self.ok.load(Ordering::Relaxed),
            self.retryable.load(Ordering::Relaxed),
            self.bad.lock().unwrap().clone(),
        )
    }
}

/// The database holds nothing half-written: every delegated turn with a reply
/// has its receipt and every receipt its reply, and every chain verifies.
async fn assert_nothing_half_written(deployment: &Deployment, db: &sqlx::PgPool) -> i64 {
    let orphans: i64 = sqlx::query_scalar(
        "select count(*) from messages m where m.grant_id is not null and m.reply is not null \
         and not exists (select 1 from receipts r where r.conversation_id = m.conversation_id \
                         and r.message_id = m.message_id)",
    )
    .fetch_one(db)
    .await
    .unwrap();
    assert_eq!(orphans, 0, "replies stored without their receipt");
    let unreplied: i64 = sqlx::query_scalar(
        "select count(*) from receipts r where not exists (select 1 from messages m \
         where m.conversation_id = r.conversation_id and m.message_id = r.message_id \
         and m.reply is not null)",
    )
    .fetch_one(db)
    .await
    .unwrap();
    assert_eq!(unreplied, 0, "receipts without their stored reply");
    let out = deployment
        .pactd()
        .args(["receipts", "verify"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "pactd receipts verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    sqlx::query_scalar("select count(*) from receipts")
        .fetch_one(db)
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------
// Three nodes behind nginx
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_behind_nginx_lose_only_the_killed_nodes_requests_in_flight() {
    let long = long_suite();
    let nginx_port = free_port();
    let public_url = format!("http://127.0.0.1:{nginx_port}");
    // The in-process node only seeds the database and stands in for the
    // person's consent; all traffic goes through nginx to the real nodes.
    let app = TestApp::spawn_with(|c| {
        c.public_url.clone_from(&public_url);
        c.audience = format!("{public_url}/a2a");
    })
    .await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(ISSUER).await;
    let deployment = Deployment {
        db_url: app.db_url.clone(),
        master_key: app.master_key.to_base64(),
        public_url: public_url.clone(),
        trusted_proxies: PROXY_IP.to_string(),
    };
    let logs = Scratch::new("nodes");
    let ports = [free_port(), free_port(), free_port()];
    let mut nodes = Vec::new();
    for port in ports {
        nodes.push(Node::start(&deployment, port, &logs).await);
    }
    // nginx must listen on the port the nodes were told is public.
    let nginx = Nginx::start(&ports, nginx_port).await;
    let agent = Arc::new(Agent {
        pa,
        audience: deployment.audience(),
        http: client(),
    });

    // Trusted proxy: through nginx pactd records the client's address (not
    // nginx's, not a forged one); straight to a node, a forged header is ignored.
    let latest_ip = || async {
        sqlx::query_scalar::<_, Option<String>>(
            "select request_ip from device_authorizations order by created_at desc limit 1",
        )
        .fetch_one(&app.db)
        .await
        .unwrap()
    };
    agent
        .device_authorization(&nginx.url(), "ip-check", Some(FORGED_IP))
        .await;
    assert_eq!(latest_ip().await.as_deref(), Some("127.0.0.3"));
    agent
        .device_authorization(&nodes[0].url(), "ip-check", Some(FORGED_IP))
        .await;
    assert_eq!(latest_ip().await.as_deref(), Some("127.0.0.3"));

    // The shipped access log records requests, never their query: a user code
    // in it could be approved by whoever reads the log.
    let res = client()
        .get(format!("{}/device?user_code=WDJB-MJHT", nginx.url()))
        .send()
        .await
        .unwrap();
    assert!(res.status().as_u16() < 500, "{}", res.status());
    // nginx writes the line once the answer is sent, so it may come a moment
    // after the answer arrives here.
    let mut logged = nginx.shipped_log();
    for _ in 0..50 {
        if logged.contains("GET /device ") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        logged = nginx.shipped_log();
    }
    assert!(logged.contains("GET /device "), "{logged}");
    assert!(!logged.contains("WDJB"), "{logged}");

    // The users, each connected through nginx.
    let senders = if long { 12 } else { 6 };
    let mut users = Vec::new();
    for i in 0..senders {
        users.push(Arc::new(
            agent.connect(&app, &nginx.url(), &format!("u{i}")).await,
        ));
    }

    let rounds = if long { 5 } else { 1 };
    let round_secs = if long { 20 } else { 4 };
    let turns = Arc::new(Tally::default());
    let gets = Arc::new(Tally::default());
    let journeys = Arc::new(Tally::default());
    let started = Instant::now();
    for round in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (i, user) in users.iter().enumerate() {
            let (agent, user, turns, stop) =
                (agent.clone(), user.clone(), turns.clone(), stop.clone());
            let base = nginx.url();
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("r{round}-w{i}-m{n}");
                    turns.add(outcome(agent.send(&base, &user, &id).await).await);
                    n += 1;
                }
            }));
        }
        // Whole journeys, each a new user: a cut one is started again, as a PA would.
        for j in 0..2 {
            let (agent, journeys, stop) = (agent.clone(), journeys.clone(), stop.clone());
            let state = app.state.clone();
            let base = nginx.url();
            tasks.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let sub = format!("r{round}-j{j}-{n}");
                    journeys.add(agent.journey(&state, &base, &sub).await);
                    n += 1;
                }
            }));
        }
        // GETs change nothing, so nginx sends them on to another node even
        // when the one they reached dies: none may fail.
        for _ in 0..2 {
            let (http, gets, stop) = (agent.http.clone(), gets.clone(), stop.clone());
            let url = format!("{}/a2a/demo/.well-known/agent-card.json", nginx.url());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    gets.add(outcome(http.get(&url).send().await).await);
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs(round_secs / 2)).await;
        let victim = round % nodes.len();
        nodes[victim].kill().await;
        tokio::time::sleep(Duration::from_secs(round_secs / 2)).await;
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        if round + 1 < rounds {
            nodes[victim] = Node::start(&deployment, ports[victim], &logs).await;
        }
    }
    let elapsed = started.elapsed().as_secs_f64();

    let (ok, retryable, bad) = turns.figures();
    let (gets_ok, gets_retryable, gets_bad) = gets.figures();
    let (journeys_ok, journeys_retryable, journeys_bad) = journeys.figures();
    eprintln!(
        "multinode: {rounds} kill(s) in {elapsed:.1} s: {} turns ({ok} ok, {retryable} retryable 503, \
         {} other), {} GETs ({gets_ok} ok, {gets_retryable} retryable, {} other)",
        ok + retryable + bad.len() as u64,
        bad.len(),
        gets_ok + gets_retryable + gets_bad.len() as u64,
        gets_bad.len(),
    );
    if !bad.is_empty() || !gets_bad.is_empty() {
        eprintln!(
            "multinode: failed turns by kind:\n{}\nfailed GETs by kind:\n{}",
            kinds(&bad),
            kinds(&gets_bad)
        );
    }
    assert!(
        bad.is_empty(),
        "turns that failed unclean: {}\n{}",
        kinds(&bad),
        nginx.logs()
    );
    eprintln!(
        "multinode: {} whole journeys (device authorization, approval, token, turn): \
         {journeys_ok} ok, {journeys_retryable} cut with a retryable 503, {} other",
        journeys_ok + journeys_retryable + journeys_bad.len() as u64,
        journeys_bad.len()
    );
    assert!(
        gets_bad.is_empty(),
        "GETs that failed: {}",
        kinds(&gets_bad)
    );
    assert!(
        journeys_bad.is_empty(),
        "journeys that failed unclean: {}",
        kinds(&journeys_bad)
    );
    assert!(journeys_ok > 0);
    assert_eq!(gets_retryable, 0, "a GET was not retried on another node");
    // At most one turn per sender was in flight on the killed node at each kill.
    assert!(
        retryable + journeys_retryable <= ((senders + 2) * rounds) as u64,
        "{retryable} + {journeys_retryable} retryable answers: more than were in flight"
    );
    assert!(ok > 0 && gets_ok > 0);

    // Nothing half-written; a turn the killed node finished but could not
    // answer may hold a receipt its client never saw.
    let receipts = assert_nothing_half_written(&deployment, &app.db).await;
    let (answered, cut) = (ok + journeys_ok, retryable + journeys_retryable);
    assert!(
        receipts >= answered as i64 && receipts <= (answered + cut) as i64,
        "{receipts} receipts for {answered} answered turns and {cut} cut requests"
    );

    // Revoked on one node, refused through another at once.
    let alive: Vec<&Node> = nodes.iter().filter(|n| n.child.id().is_some()).collect();
    let (a, b) = (alive[0], alive[1]);
    let user = &users[0];
    assert_eq!(
        agent
            .send(&b.url(), user, "before-revoke")
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(agent.revoke(&a.url(), user).await, 200);
    let revoked_at = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let res = agent
            .send(&b.url(), user, &format!("after-revoke-{attempts}"))
            .await
            .unwrap();
        if res.status() == 401 {
            break;
        }
        assert!(
            revoked_at.elapsed() < Duration::from_secs(5),
            "node B still honours a revoked grant"
        );
    }
    let to_refusal = revoked_at.elapsed();
    let through_nginx = agent.send(&nginx.url(), user, "after-revoke-lb").await;
    assert_eq!(through_nginx.unwrap().status(), 401);
    eprintln!(
        "multinode: revoked on node A, refused on node B after {:.1} ms ({attempts} attempt(s))",
        to_refusal.as_secs_f64() * 1000.0
    );
    assert_eq!(attempts, 1);
    drop(nginx);
    app.stop().await;
}

// ---------------------------------------------------------------------------
// A merchant's turn through round-robin nginx, no affinity
// ---------------------------------------------------------------------------

/// The merchant's tool API: which tools were really called.
#[derive(Default)]
struct ToolApi(std::sync::Mutex<Vec<String>>);

async fn tool_endpoint(
    axum::extract::State(api): axum::extract::State<Arc<ToolApi>>,
    axum::extract::Path(tool): axum::extract::Path<String>,
) -> axum::Json<Value> {
    api.0.lock().unwrap().push(tool);
    axum::Json(json!({"ok": true}))
}

/// The whole merchant path behind nginx's plain round robin, as a merchant
/// deploys it without affinity: the device flow, a delegated turn answered
/// by the merchant's own agent, its JSON tool calls and an MCP session — each
/// request on whichever node nginx picks. Every call is judged on the grant
/// (a count of one holds across nodes), every call is in the one receipt, and
/// the turn's token dies with the turn on every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_merchant_turn_and_its_mcp_session_work_through_round_robin_nginx() {
    let nginx_port = free_port();
    let public_url = format!("http://127.0.0.1:{nginx_port}");
    let app = TestApp::spawn_with(|c| {
        c.public_url.clone_from(&public_url);
        c.audience = format!("{public_url}/a2a");
    })
    .await;
    app.enable_demo_delegation().await;
    let tools = Arc::new(ToolApi::default());
    let api = pact_tests::held::serve(
        axum::Router::new()
            .route("/tools/{tool}", axum::routing::post(tool_endpoint))
            .with_state(tools.clone()),
    )
    .await;
    let (held, agent_url, mut turns) = pact_tests::held::HeldAgent::start().await;
    app.new_webhook_secret("demo").await;
    app.set_agent("demo", &agent_url, None).await;
    for (name, scope, enforce) in [
        ("lookup_orders", "orders:read", json!([])),
        (
            "cancel_order",
            "orders:cancel",
            json!(["order_ids=order_id"]),
        ),
    ] {
        pact_db::merchant::upsert_tool(
            &app.db,
            &pact_db::merchant::BrandTool {
                enforce,
                ..pact_db::merchant::BrandTool::at_url(
                    &pact_tests::brand_id("demo"),
                    name,
                    Some(scope),
                    &format!("{api}/tools/{name}"),
                )
            },
        )
        .await
        .unwrap();
    }
    app.settle().await;
    let pa = app.registered_pa(ISSUER).await;
    let deployment = Deployment {
        db_url: app.db_url.clone(),
        master_key: app.master_key.to_base64(),
        public_url: public_url.clone(),
        trusted_proxies: PROXY_IP.to_string(),
    };
    let logs = Scratch::new("merchant-nodes");
    let ports = [free_port(), free_port(), free_port()];
    let mut nodes = Vec::new();
    for port in ports {
        nodes.push(Node::start(&deployment, port, &logs).await);
    }
    let nginx = Nginx::start(&ports, nginx_port).await;
    let lb = nginx.url();
    let agent = Arc::new(Agent {
        pa,
        audience: deployment.audience(),
        http: client(),
    });
    let http = agent.http.clone();

    // The device flow through nginx, for a cancellation limited to SHOP-1001.
    let user = agent
        .connect_for(
            &app,
            &lb,
            "merchant-path",
            &["orders:read", "orders:cancel"],
            Some(&json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}])),
        )
        .await;

    // The delegated turn through nginx; the merchant's agent holds it open.
    let reply = {
        let (agent, lb) = (agent.clone(), lb.clone());
        tokio::spawn(async move { agent.send(&lb, &user, "mp-1").await.unwrap() })
    };
    let turn = tokio::time::timeout(Duration::from_secs(20), turns.recv())
        .await
        .expect("the merchant's agent gets the turn")
        .unwrap();
    let tools_url = turn["tools"]["url"].as_str().unwrap().to_owned();
    let mcp_url = turn["tools"]["mcpUrl"].as_str().unwrap().to_owned();
    let brand_mcp_url = turn["tools"]["brandMcpUrl"].as_str().unwrap().to_owned();
    let token = turn["tools"]["token"].as_str().unwrap().to_owned();
    assert!(
        tools_url.starts_with(&lb),
        "the gateway is reached through nginx"
    );
    let call = |tool: &str, args: Value| {
        let req = http
            .post(format!("{tools_url}/{tool}"))
            .bearer_auth(&token)
            .json(&args);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };

    // Six reads: round robin puts them on every node.
    for _ in 0..6 {
        let (status, body) = call("lookup_orders", json!({})).await;
        assert_eq!(status, 200, "{body}");
    }
    // Within the grant's limit, then outside it, on whichever node.
    let (status, body) = call("cancel_order", json!({"order_id": "SHOP-1001"})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call("cancel_order", json!({"order_id": "SHOP-1002"})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );

    // An MCP session: initialize, list and call, each on the next node.
    let mcp_at = |url: &str, session: Option<String>, body: Value| {
        let mut req = http
            .post(url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(id) = &session {
            req = req
                .header("mcp-session-id", id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let id = res
                .headers()
                .get("mcp-session-id")
                .map(|v| v.to_str().unwrap().to_owned());
            (status, id, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let mcp = |session: Option<String>, body: Value| mcp_at(&mcp_url, session, body);
    let initialize = || {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "multinode", "version": "1"}}})
    };
    let (status, session, body) = mcp(None, initialize()).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("an MCP session id");
    let (status, _, body) = mcp(
        Some(session.clone()),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let listed: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(listed.contains(&"lookup_orders"), "{body}");
    let (status, _, body) = mcp(
        Some(session.clone()),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "lookup_orders", "arguments": {}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["result"]["isError"], json!(true), "{body}");

    // The brand's shared MCP endpoint: a session opened on one node serves
    // the turn's calls on the others (signed for the brand with the key every
    // node derives from the master key).
    let (status, session, body) = mcp_at(&brand_mcp_url, None, initialize()).await;
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a shared MCP session id");
    for id in 2..5 {
        let (status, _, body) = mcp_at(
            &brand_mcp_url,
            Some(session.clone()),
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "lookup_orders", "arguments": {}}}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_ne!(body["result"]["isError"], json!(true), "{body}");
    }
    let shared_requests = nginx.upstreams_of("/a2a/demo/mcp ");
    let mut spread_shared = shared_requests.clone();
    spread_shared.sort();
    spread_shared.dedup();
    assert_eq!(spread_shared.len(), 3, "{shared_requests:?}");

    let turn_requests = nginx.upstreams_of("/turns/");
    let mut spread = turn_requests.clone();
    spread.sort();
    spread.dedup();
    assert_eq!(
        spread.len(),
        3,
        "nginx spread the turn's {} requests over every node: {turn_requests:?}",
        turn_requests.len()
    );

    // The agent replies; the turn ends on every node.
    held.release_one();
    let res = tokio::time::timeout(Duration::from_secs(20), reply)
        .await
        .expect("the reply")
        .unwrap();
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    // The call beyond the limit made the turn a step-up for that one operation
    // (PACT §5.5), whichever node judged it; its message carries the receipt.
    let task_status = &v["task"]["status"];
    assert_eq!(task_status["state"], "TASK_STATE_AUTH_REQUIRED", "{v}");
    assert!(
        v["task"]["metadata"]["pact.missingAuthorizationDetails"].is_array(),
        "{v}"
    );
    let claims = app.verified_receipt(&task_status["message"]).await;
    let done: Vec<&str> = claims
        .actions
        .iter()
        .filter(|a| a.outcome.as_deref() == Some("done"))
        .map(|a| a.tool.as_str())
        .collect();
    // Six JSON reads, one cancellation, one MCP call per-turn, three on the shared session.
    assert_eq!(
        done.len(),
        11,
        "every call from every node is in the receipt: {claims:?}"
    );
    assert_eq!(claims.refused.len(), 1, "{claims:?}");
    assert_eq!(
        tools.0.lock().unwrap().len(),
        11,
        "what reached the merchant is what the receipt says"
    );
    for port in ports {
        let res = http
            .post(format!("http://127.0.0.1:{port}{}/lookup_orders", {
                tools_url.strip_prefix(&lb).unwrap()
            }))
            .bearer_auth(&token)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            401,
            "node {port} still honours the ended turn"
        );
    }
    drop(nginx);
    drop(nodes);
    app.stop().await;
}

// ---------------------------------------------------------------------------
// Database failover: a real primary and a real streaming replica, HAProxy
// ---------------------------------------------------------------------------

/// Where initdb really is (it may be a symlink on PATH): pg_basebackup sits
/// next to it, not necessarily on PATH.
fn pg_bin_dir() -> PathBuf {
    let bins = pact_devdb::LocalCluster::find_binaries()
        .expect("the PostgreSQL server binaries (apt-get install -y postgresql)");
    let initdb = std::fs::canonicalize(&bins.initdb).unwrap_or(bins.initdb);
    initdb.parent().unwrap().to_owned()
}

/// A PostgreSQL program, as the `postgres` OS user when we are root (the
/// server refuses to run as root).
fn pg_command(program: &str) -> Command {
    let path = pg_bin_dir().join(program);
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let mut cmd = if root {
        let mut c = Command::new(required_tool("runuser", "util-linux"));
        c.args(["-u", "postgres", "--"]).arg(path);
        c
    } else {
        Command::new(path)
    };
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    cmd
}

async fn pg(program: &str, args: &[&str]) {
    let out = pg_command(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One PostgreSQL server on 127.0.0.1:`port`, data in `data`.
struct PgServer {
    data: String,
    log: String,
    sockets: String,
    port: u16,
}

impl PgServer {
    fn new(dir: &Scratch, name: &str) -> Self {
        Self {
            data: dir.file(name).display().to_string(),
            log: dir.file(&format!("{name}.log")).display().to_string(),
            sockets: dir.0.display().to_string(),
            port: free_port(),
        }
    }

    async fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port, self.sockets
        );
        pg(
            "pg_ctl",
            &[
                "-D", &self.data, "-l", &self.log, "-o", &options, "-w", "start",
            ],
        )
        .await;
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let pg_ctl = pg_bin_dir().join("pg_ctl");
        let args = ["-D", &self.data, "-m", "immediate", "stop"];
        let root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let _ = if root {
            std::process::Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&pg_ctl)
                .args(args)
                .output()
        } else {
            std::process::Command::new(&pg_ctl).args(args).output()
        };
    }
}

/// HAProxy running `deploy/haproxy/pactd.cfg` in front of `servers`.
struct Haproxy {
    child: Child,
    port: u16,
    _dir: Scratch,
}

impl Haproxy {
    async fn start(servers: [u16; 2]) -> Self {
        let haproxy = required_tool("haproxy", "haproxy");
        let dir = Scratch::new("haproxy");
        let port = free_port();
        let shipped = std::fs::read_to_string(repo_file("deploy/haproxy/pactd.cfg")).unwrap();
        let mut replaced = 0;
        let conf: String = shipped
            .lines()
            .map(|line| {
                let t = line.trim_start();
                let new = if t == "bind 127.0.0.1:6432" {
                    format!("    bind 127.0.0.1:{port}")
                } else if let Some(rest) = t.strip_prefix("server pg1 10.0.0.21:5432") {
                    format!("    server pg1 127.0.0.1:{}{rest}", servers[0])
                } else if let Some(rest) = t.strip_prefix("server pg2 10.0.0.22:5432") {
                    format!("    server pg2 127.0.0.1:{}{rest}", servers[1])
                } else {
                    return format!("{line}\n");
                };
                replaced += 1;
                format!("{new}\n")
            })
            .collect();
        assert_eq!(
            replaced, 3,
            "deploy/haproxy/pactd.cfg no longer has the lines this test replaces"
        );
        std::fs::write(dir.file("haproxy.cfg"), conf).unwrap();
        let child = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(dir.file("haproxy.cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.file("haproxy.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = dir.file("haproxy.log");
        wait_for_port(SocketAddr::from(([127, 0, 0, 1], port)), "haproxy", || {
            std::fs::read_to_string(&log).unwrap_or_default()
        })
        .await;
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Waits until new connections through HAProxy reach only the primary.
async fn until_routed_to_primary(url: &str) {
    use sqlx::Connection;
    let deadline = Instant::now() + START_TIMEOUT;
    let mut in_a_row = 0;
    while in_a_row < 6 {
        assert!(
            Instant::now() < deadline,
            "HAProxy never routed to the primary only"
        );
        let primary = match sqlx::PgConnection::connect(url).await {
            Ok(mut c) => sqlx::query_scalar::<_, bool>("select not pg_is_in_recovery()")
                .fetch_one(&mut c)
                .await
                .unwrap_or(false),
            Err(_) => false,
        };
        in_a_row = if primary { in_a_row + 1 } else { 0 };
        tokio::time::sleep(Duration::from_millis(if primary { 20 } else { 250 })).await;
    }
}

/// A counter or gauge from a node's `/metrics`.
async fn metric(metrics_port: u16, name: &str) -> f64 {
    let text = pact_tests::http_get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn until_metric(metrics_port: u16, name: &str, at_least: f64, what: &str) -> Duration {
    let start = Instant::now();
    while metric(metrics_port, name).await < at_least {
        assert!(start.elapsed() < Duration::from_secs(30), "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_promoted_replica_takes_over_without_restarting_pactd() {
    let long = long_suite();
    let dir = Scratch::new("failover");
    let primary = PgServer::new(&dir, "primary");
    let replica = PgServer::new(&dir, "replica");
    pg(
        "initdb",
        &[
            "-D",
            &primary.data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
    )
    .await;
    primary.start().await;
    {
        let admin = pact_db::connect(&primary.url("postgres"), 1).await.unwrap();
        for sql in ["create role haproxy_check login", "create database pactd"] {
            sqlx::query(sql).execute(&admin).await.unwrap();
        }
        admin.close().await;
        let db = pact_db::connect(&primary.url("pactd"), 1).await.unwrap();
        pact_db::migrate(&db).await.unwrap();
        db.close().await;
    }
    let port = primary.port.to_string();
    pg(
        "pg_basebackup",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "postgres",
            "-D",
            &replica.data,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ],
    )
    .await;
    replica.start().await;
    // A write that reaches a standby (SQLSTATE 25006) is the retryable kind,
    // like a lost connection: what pactd answers if a connection lands on the
    // wrong server while the router catches up.
    {
        let standby = pact_db::connect(&replica.url("pactd"), 1).await.unwrap();
        let err: pact_db::Error = sqlx::query("insert into brands (id, name) values ('x', 'x')")
            .execute(&standby)
            .await
            .unwrap_err()
            .into();
        assert_eq!(
            pact_db::classify(&err),
            pact_db::Failure::Unavailable,
            "{err}"
        );
        standby.close().await;
    }
    let router = Haproxy::start([primary.port, replica.port]).await;
    let db_url = router.url("pactd");
    until_routed_to_primary(&db_url).await;

    // Seeded through the router like everything else.
    let public_url = "http://pact.test".to_owned();
    let master = Arc::new(pact_crypto::MasterKey::generate().unwrap());
    let app = TestApp::spawn_full(
        db_url.clone(),
        master.clone(),
        |c| {
            c.public_url.clone_from(&public_url);
            c.audience = format!("{public_url}/a2a");
        },
        pact_server::agent::BrandAgents::builtin(),
    )
    .await;
    app.enable_demo_delegation().await;
    let pa = app.registered_pa(ISSUER).await;
    let deployment = Deployment {
        db_url: db_url.clone(),
        master_key: master.to_base64(),
        public_url,
        trusted_proxies: PROXY_IP.to_string(),
    };
    let logs = Scratch::new("failover-nodes");
    let metrics_ports = [free_port(), free_port()];
    let mut nodes = Vec::new();
    for m in metrics_ports {
        let extra = ["--metrics-listen".to_owned(), format!("127.0.0.1:{m}")];
        nodes.push(Node::start_with(&deployment, free_port(), &logs, &extra).await);
    }
    for m in metrics_ports {
        until_metric(m, "pactd_listener_connected", 1.0, "a node never listened").await;
    }
    let agent = Arc::new(Agent {
        pa,
        audience: deployment.audience(),
        http: client(),
    });
    let mut users = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        users.push(Arc::new(
            agent.connect(&app, &node.url(), &format!("f{i}")).await,
        ));
    }

    // Turns on both nodes, all along.
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Arc<std::sync::Mutex<Vec<(Instant, usize, Outcome)>>> = Arc::default();
    let mut tasks = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let (agent, user, stop, seen) =
            (agent.clone(), users[i].clone(), stop.clone(), seen.clone());
        let base = node.url();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let o = outcome(agent.send(&base, &user, &format!("n{i}-m{n}")).await).await;
                let retry = matches!(o, Outcome::Retryable);
                seen.lock().unwrap().push((Instant::now(), i, o));
                n += 1;
                if retry {
                    // What a client does with Retry-After, shortened.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The primary dies; an operator (or a failover manager) promotes the replica.
    let crashed_at = Instant::now();
    pg("pg_ctl", &["-D", &primary.data, "-m", "immediate", "stop"]).await;
    let outage = Duration::from_secs(if long { 10 } else { 2 });
    tokio::time::sleep(outage).await;
    let promoted_at = Instant::now();
    pg("pg_ctl", &["-D", &replica.data, "-w", "promote"]).await;
    let promote_took = promoted_at.elapsed();
    // How much of the wait is the router's: the first new connection through
    // HAProxy that reaches a writable server.
    let routed_after = {
        use sqlx::Connection;
        loop {
            let attempt = tokio::time::timeout(Duration::from_millis(500), async {
                let mut c = sqlx::PgConnection::connect(&db_url).await.ok()?;
                sqlx::query_scalar::<_, bool>("select not pg_is_in_recovery()")
                    .fetch_one(&mut c)
                    .await
                    .ok()
            })
            .await;
            if let Ok(Some(true)) = attempt {
                break promoted_at.elapsed();
            }
            assert!(
                promoted_at.elapsed() < Duration::from_secs(60),
                "never routed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let deadline = promoted_at + Duration::from_secs(60);
    let first_ok = loop {
        let firsts: Vec<Option<Instant>> = (0..nodes.len())
            .map(|node| {
                seen.lock()
                    .unwrap()
                    .iter()
                    .find(|(t, n, o)| *n == node && *t > promoted_at && matches!(o, Outcome::Ok))
                    .map(|(t, _, _)| *t)
            })
            .collect();
        if firsts.iter().all(Option::is_some) {
            break firsts.into_iter().flatten().collect::<Vec<_>>();
        }
        assert!(
            Instant::now() < deadline,
            "no turn succeeded after the promotion"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    tokio::time::sleep(Duration::from_secs(if long { 10 } else { 1 })).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    let during: Vec<&(Instant, usize, Outcome)> =
        seen.iter().filter(|(t, _, _)| *t > crashed_at).collect();
    let retryable = during
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Retryable))
        .count();
    let bad: Vec<String> = seen
        .iter()
        .filter_map(|(_, _, o)| match o {
            Outcome::Bad(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    let secs: Vec<String> = first_ok
        .iter()
        .map(|t| format!("{:.2}", (*t - promoted_at).as_secs_f64()))
        .collect();
    eprintln!(
        "failover: {} turns, {} after the crash ({retryable} retryable 503, {} other); \
         first successful turn per node {} s after `pg_ctl promote` began \
         (the promotion itself took {:.2} s, HAProxy routed to the new primary after {:.2} s)",
        seen.len(),
        during.len(),
        bad.len(),
        secs.join(" and "),
        promote_took.as_secs_f64(),
        routed_after.as_secs_f64()
    );
    let errors: Vec<String> = nodes
        .iter()
        .flat_map(|n| n.log().lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.contains("ERROR"))
        .collect();
    assert!(
        bad.is_empty(),
        "answers that were not 200 or 503 + Retry-After: {}\n{}",
        kinds(&bad),
        errors.join("\n")
    );
    assert!(retryable > 0, "the outage was never seen");

    // The listeners are back on the new primary, without a restart, and carry
    // a revocation from one node to the other at once.
    for m in metrics_ports {
        until_metric(
            m,
            "pactd_listener_connected",
            1.0,
            "a listener never came back",
        )
        .await;
    }
    for (from, to) in [(0, 1), (1, 0)] {
        let before = metric(metrics_ports[to], "pactd_revocations_total").await;
        assert_eq!(agent.revoke(&nodes[from].url(), &users[from]).await, 200);
        let heard = until_metric(
            metrics_ports[to],
            "pactd_revocations_total",
            before + 1.0,
            "the other node never heard the revocation",
        )
        .await;
        eprintln!(
            "failover: revoked on node {from}, heard by node {to} after {:.1} ms",
            heard.as_secs_f64() * 1000.0
        );
        let res = agent
            .send(&nodes[to].url(), &users[from], "after-revoke")
            .await;
        assert_eq!(res.unwrap().status(), 401);
    }
    assert_nothing_half_written(&deployment, &app.db).await;
    for n in &nodes {
        assert!(!n.log().contains("panicked"), "{}", n.log());
    }
    app.stop().await;
}
