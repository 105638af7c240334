//! The `pactd` binary as an operator uses it: admin commands against a real
//! PostgreSQL, `serve` and `dev` as child processes on loopback ports, stopped
//! with SIGTERM like a service manager would.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pact_tests::TestPa;
use pact_tests::pa::{PaKey, b64, compact};
use serde_json::{Value, json};
use sqlx::Connection;
use tokio::process::{Child, Command};

use crate::support::{COMMAND_TIMEOUT, Run, free_port, pactd, run};

/// How long `serve` may take to answer `/healthz` on an existing database.
const SERVE_START_TIMEOUT: Duration = Duration::from_secs(30);
/// `dev` initialises a private PostgreSQL the first time.
const DEV_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// `pactd` on the database at `db_url`.
fn pactd_on(db_url: &str) -> Command {
    let mut cmd = pactd();
    cmd.env("DATABASE_URL", db_url);
    cmd
}

/// A new key-encryption key from `pactd keys generate-master-key`.
async fn new_master_key() -> String {
    let generated = run(pactd(), &["keys", "generate-master-key"]).await;
    let key = generated.succeeded().trim().to_owned();
    assert_eq!(
        key.len(),
        44,
        "32 bytes in base64: {}",
        generated.describe()
    );
    key
}

/// `pactd serve`'s environment: the database and a master key.
fn pactd_serving(db_url: &str, master_key: &str) -> Command {
    let mut cmd = pactd_on(db_url);
    cmd.env("PACTD_MASTER_KEY", master_key);
    cmd
}

/// A fresh directory under the system temp dir that the `postgres` OS user
/// can traverse (the private cluster runs as that user when tests run as
/// root). On drop it stops a private PostgreSQL left running in `pg/` (only
/// after a failed test) and removes everything.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(label: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "pactd-cli-{label}-{}-{nanos:x}-{n}",
            std::process::id()
        ));
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { path }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    fn postmaster_pid(&self) -> PathBuf {
        self.path.join("pg").join("postmaster.pid")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let pid_file = self.postmaster_pid();
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Some(pid) = text.lines().next().map(str::trim)
        {
            // SIGINT is PostgreSQL's fast shutdown.
            let _ = std::process::Command::new("kill")
                .args(["-INT", pid])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while pid_file.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A long-running `pactd serve` or `pactd dev`, its stdout and stderr in files.
struct Server {
    child: Child,
    base_url: String,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Server {
    /// Starts `cmd args` on 127.0.0.1:`port`, output into `logs`, and waits
    /// until `/healthz` answers.
    async fn start(
        mut cmd: Command,
        args: &[&str],
        port: u16,
        logs: &Scratch,
        name: &str,
        timeout: Duration,
    ) -> Self {
        let stdout = logs.file(&format!("{name}.stdout"));
        let stderr = logs.file(&format!("{name}.stderr"));
        cmd.args(args)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start pactd: {e}"));
        let mut server = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            stdout,
            stderr,
        };
        server.wait_healthy(timeout).await;
        server
    }

    async fn wait_healthy(&mut self, timeout: Duration) {
        let http = pact_jose::with_shared_tls(reqwest::Client::builder())
            .build()
            .unwrap();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("pactd exited before serving ({status})\n{}", self.output());
            }
            let answer = http
                .get(format!("{}/healthz", self.base_url))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if let Ok(res) = answer
                && res.status() == reqwest::StatusCode::OK
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "pactd did not answer /healthz within {timeout:?}\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn stdout(&self) -> String {
        read_lossy(&self.stdout)
    }

    fn stderr(&self) -> String {
        read_lossy(&self.stderr)
    }

    fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout(),
            self.stderr()
        )
    }

    /// Sends SIGTERM and waits for the exit.
    async fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().expect("pactd is still running");
        let kill = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(kill.success(), "kill -TERM {pid} failed");
        tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "pactd did not exit within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.output()
                )
            })
            .unwrap()
    }
}

fn read_lossy(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
}

/// `message:send` of `text` to the brand at `iface`.
async fn send(iface: &str, token: &str, text: &str) -> reqwest::Response {
    let body = json!({"message": {
        "messageId": uuid::Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }});
    pact_jose::with_shared_tls(reqwest::Client::builder())
        .build()
        .unwrap()
        .post(format!("{iface}/message:send"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Asserts a 200 agent reply and returns its text.
async fn reply_text(res: reqwest::Response) -> String {
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, reqwest::StatusCode::OK, "body: {body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["message"]["role"], "ROLE_AGENT", "{body}");
    body["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text part in {body}"))
        .to_owned()
}

/// Asserts PACT §3's bare 401.
async fn assert_unauthorized(res: reqwest::Response, what: &str) {
    let status = res.status();
    let challenge = res
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = res.text().await.unwrap();
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED, "{what}: {body}");
    assert_eq!(
        challenge.as_deref(),
        Some(r#"Bearer realm="a2a""#),
        "{what}"
    );
    assert!(body.is_empty(), "{what}: a 401 has no body, got {body}");
}

async fn get_json(url: &str) -> Value {
    let res = pact_tests::http_get(url).await.unwrap();
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, reqwest::StatusCode::OK, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// The state column (`enabled`/`disabled`) of `issuer` in `agent list`.
fn agent_state(list: &str, issuer: &str) -> Option<String> {
    list.lines().find_map(|line| {
        let fields: Vec<&str> = line.split('\t').collect();
        (fields.first() == Some(&issuer)).then(|| fields.get(1).unwrap().to_string())
    })
}

/// The lines of `brand list` whose id is `brand`.
fn brand_lines<'a>(list: &'a str, brand: &str) -> Vec<&'a str> {
    list.lines()
        .filter(|line| line.split('\t').next() == Some(brand))
        .collect()
}

/// The same claims as `token` but with another payload, keeping the signature.
fn with_swapped_payload(token: &str, payload: &Value) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "not a compact JWS: {token}");
    format!(
        "{}.{}.{}",
        parts[0],
        b64(payload.to_string().as_bytes()),
        parts[2]
    )
}

fn signature_of(token: &str) -> &str {
    token.rsplit('.').next().unwrap()
}

// ---------------------------------------------------------------------------
// Admin commands
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn brand_add_lists_the_brand_refuses_a_duplicate_and_refuses_an_invalid_id() {
    let db = pact_tests::db::fresh_database().await;

    let added = run(
        pactd_on(&db),
        &[
            "brand",
            "add",
            "demo2",
            "--name",
            "Demo Two",
            "--description",
            "The second demo store",
        ],
    )
    .await;
    assert!(added.succeeded().contains("demo2"), "{}", added.describe());

    let list = run(pactd_on(&db), &["brand", "list"]).await;
    assert_eq!(
        brand_lines(list.succeeded(), "demo2"),
        ["demo2\tDemo Two\tThe second demo store"],
        "{}",
        list.describe()
    );

    let again = run(
        pactd_on(&db),
        &["brand", "add", "demo2", "--name", "Demo Two Again"],
    )
    .await;
    let stderr = again.failed();
    assert!(
        stderr.contains("demo2") && stderr.contains("already exists"),
        "{}",
        again.describe()
    );

    let bad = run(pactd_on(&db), &["brand", "add", "Bad Id", "--name", "Bad"]).await;
    let stderr = bad.failed();
    assert!(stderr.contains("invalid brand id"), "{}", bad.describe());

    // Neither failure changed anything.
    let list = run(pactd_on(&db), &["brand", "list"]).await;
    let list = list.succeeded();
    assert_eq!(
        brand_lines(list, "demo2"),
        ["demo2\tDemo Two\tThe second demo store"]
    );
    assert!(!list.contains("Bad"), "{list}");
}

/// Names and descriptions shown on consent may not hold characters that
/// make them display differently from what they are (U+202E reverses the
/// rest of the line; U+200B is invisible).
#[tokio::test(flavor = "multi_thread")]
async fn bidi_and_invisible_characters_are_refused_in_shown_text() {
    let db = pact_tests::db::fresh_database().await;
    let name = "Shop\u{202E}tnegA";
    let refused = run(
        pactd_on(&db),
        &[
            "agent",
            "add",
            "--issuer",
            "https://pa.example",
            "--jwks-uri",
            "https://pa.example/jwks.json",
            "--name",
            name,
        ],
    )
    .await;
    assert!(
        refused.failed().contains("U+202E"),
        "{}",
        refused.describe()
    );
    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert!(!list.succeeded().contains("pa.example"));
    run(pactd_on(&db), &["brand", "add", "acme", "--name", "Acme"])
        .await
        .succeeded();
    let refused = run(
        pactd_on(&db),
        &[
            "brand",
            "scope",
            "add",
            "acme",
            "orders:peek",
            "See\u{200B} your orders",
        ],
    )
    .await;
    assert!(
        refused.failed().contains("U+200B"),
        "{}",
        refused.describe()
    );
    // A brand's name is shown on consent and its card: the same rule at
    // `brand add` as at `brand set --name`, and nothing is created.
    let refused = run(
        pactd_on(&db),
        &["brand", "add", "evil", "--name", "Acme\u{202E}emcA"],
    )
    .await;
    assert!(
        refused.failed().contains("U+202E"),
        "{}",
        refused.describe()
    );
    let list = run(pactd_on(&db), &["brand", "list"]).await;
    assert!(!list.succeeded().contains("evil"));
}

/// Issue 9, item 8 ("Who is asking"), through the binary: the platform's
/// links (RFC 7591 §2 client_uri, logo_uri, policy_uri, tos_uri) and the
/// brand's logo and accent. A logo that is not a raster image, or a colour
/// white text cannot be read on, is refused and changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn who_is_asking_flags_store_links_logos_and_accents_and_refuse_bad_ones() {
    use pact_tests::logo_server::{BRAND_LOGO, EVIL_SVG, LogoServer, PA_LOGO};
    let db = pact_tests::db::fresh_database().await;
    let platform = LogoServer::start().await;
    let add = |extra: &[&str]| {
        let mut args = vec![
            "agent",
            "add",
            "--issuer",
            "https://pa.example",
            "--jwks-uri",
            "https://pa.example/jwks.json",
        ];
        args.extend_from_slice(extra);
        args.iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<String>>()
    };
    let svg = platform.url("/logo.svg");
    for (extra, says) in [
        (vec!["--homepage", "http://pa.example/"], "--homepage"),
        (
            vec!["--tos-uri", "https://10.0.0.1/terms"],
            "forbidden address",
        ),
        (
            vec!["--policy-uri", "https://pa.example/\u{202e}"],
            "U+202E",
        ),
        (
            vec!["--allow-loopback", "--logo-uri", svg.as_str()],
            "not a PNG",
        ),
    ] {
        let args = add(&extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = run(pactd_on(&db), &args).await;
        assert!(refused.failed().contains(says), "{}", refused.describe());
    }
    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert!(
        !list.succeeded().contains("pa.example"),
        "nothing registered"
    );

    // Issue 28, finding 7: the logo fetch has the SSRF guard of every other
    // outbound fetch. A loopback address spelt as a decimal number or as
    // IPv4-mapped IPv6 is still loopback, refused before any connection;
    // a development logo server on loopback needs --allow-loopback.
    let port = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = connections.clone();
        tokio::spawn(async move {
            while let Ok(_conn) = listener.accept().await {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        });
        (port, connections)
    };
    let fetched = platform.hits.load(std::sync::atomic::Ordering::SeqCst);
    for disguised in [
        format!("https://2130706433:{}/logo.png", port.0),
        format!("https://[::ffff:7f00:1]:{}/logo.png", port.0),
        platform.url("/logo.png"),
    ] {
        let args = add(&["--logo-uri", &disguised]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let refused = run(pactd_on(&db), &args).await;
        assert!(
            refused.failed().contains("forbidden address"),
            "{}",
            refused.describe()
        );
    }
    assert_eq!(
        port.1.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no connection to the loopback port"
    );
    assert_eq!(
        platform.hits.load(std::sync::atomic::Ordering::SeqCst),
        fetched,
        "nothing fetched from the loopback logo server"
    );

    let png = platform.url("/logo.png");
    let args = add(&[
        "--allow-loopback",
        "--logo-uri",
        &png,
        "--homepage",
        "https://pa.example/",
        "--policy-uri",
        "https://pa.example/privacy",
        "--tos-uri",
        "https://pa.example/terms",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let added = run(pactd_on(&db), &args).await;
    let name = pact_server::who::sha256_hex(PA_LOGO);
    assert!(
        added.succeeded().contains(&format!("/logos/{name}")),
        "{}",
        added.describe()
    );

    run(pactd_on(&db), &["brand", "add", "acme", "--name", "Acme"])
        .await
        .succeeded();
    let dir = std::env::temp_dir().join(format!("pactd-who-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (good, bad) = (dir.join("logo.png"), dir.join("logo.svg"));
    std::fs::write(&good, BRAND_LOGO).unwrap();
    std::fs::write(&bad, EVIL_SVG).unwrap();
    let refused = run(
        pactd_on(&db),
        &["brand", "set", "acme", "--accent", "#ffcc00"],
    )
    .await;
    assert!(refused.failed().contains("4.5:1"), "{}", refused.describe());
    let refused = run(
        pactd_on(&db),
        &["brand", "set", "acme", "--logo", bad.to_str().unwrap()],
    )
    .await;
    assert!(refused.failed().contains("SVG"), "{}", refused.describe());
    let set = run(
        pactd_on(&db),
        &[
            "brand",
            "set",
            "acme",
            "--accent",
            "#7A1F5C",
            "--logo",
            good.to_str().unwrap(),
        ],
    )
    .await;
    let out = set.succeeded();
    assert!(
        out.contains(r##"accent = "#7a1f5c""##),
        "{}",
        set.describe()
    );
    assert!(
        out.contains(&pact_server::who::sha256_hex(BRAND_LOGO)),
        "{}",
        set.describe()
    );
    std::fs::remove_dir_all(&dir).ok();

    // What the card says of the brand: the console's and the API's checks.
    let refused = run(pactd_on(&db), &["brand", "set", "acme", "--name", " "]).await;
    assert!(
        refused.failed().contains("1 to 200"),
        "{}",
        refused.describe()
    );
    let set = run(
        pactd_on(&db),
        &[
            "brand",
            "set",
            "acme",
            "--name",
            "Acme Tea",
            "--description",
            "Tea, shipped",
        ],
    )
    .await;
    assert!(
        set.succeeded().contains(r#"name = "Acme Tea""#),
        "{}",
        set.describe()
    );

    let mut conn = sqlx::PgConnection::connect(&db).await.unwrap();
    let (name, description): (String, String) =
        sqlx::query_as("select name, description from brands where id = 'acme'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        (name.as_str(), description.as_str()),
        ("Acme Tea", "Tea, shipped")
    );
    let audited: i64 =
        sqlx::query_scalar("select count(*) from audit_log where action = 'brand.card'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(audited, 1);
    let logos: i64 = sqlx::query_scalar("select count(*) from logos")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(logos, 2, "the platform's and the brand's");
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_are_added_disabled_and_enabled_and_bad_input_is_refused() {
    let db = pact_tests::db::fresh_database().await;
    let issuer = "https://pa.example";

    let added = run(
        pactd_on(&db),
        &[
            "agent",
            "add",
            "--issuer",
            issuer,
            "--jwks-uri",
            "https://pa.example/jwks.json",
            "--name",
            "X",
        ],
    )
    .await;
    added.succeeded();

    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert_eq!(
        list.succeeded().trim_end(),
        "https://pa.example\tenabled\thttps://pa.example/jwks.json\tX\tverified",
        "{}",
        list.describe()
    );

    run(pactd_on(&db), &["agent", "disable", "--issuer", issuer])
        .await
        .succeeded();
    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert_eq!(
        agent_state(list.succeeded(), issuer).as_deref(),
        Some("disabled"),
        "{}",
        list.describe()
    );

    run(pactd_on(&db), &["agent", "enable", "--issuer", issuer])
        .await
        .succeeded();
    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert_eq!(
        agent_state(list.succeeded(), issuer).as_deref(),
        Some("enabled"),
        "{}",
        list.describe()
    );

    let unknown = run(
        pactd_on(&db),
        &["agent", "disable", "--issuer", "https://unknown.example"],
    )
    .await;
    assert!(
        unknown.failed().contains("https://unknown.example"),
        "{}",
        unknown.describe()
    );

    for bad_uri in [
        "ftp://x",
        "not a url",
        "jwks.json",
        "http://pa.example/jwks.json",
    ] {
        let refused = run(
            pactd_on(&db),
            &[
                "agent",
                "add",
                "--issuer",
                "https://other.example",
                "--jwks-uri",
                bad_uri,
            ],
        )
        .await;
        assert!(
            refused.failed().contains("invalid --jwks-uri"),
            "{bad_uri}: {}",
            refused.describe()
        );
    }
    // The CLI checks a registration as the admin API and the console do (one
    // function): a name too long or with a control character, an issuer with
    // a control character, are refused here too.
    let long_name = "n".repeat(201);
    for (flag, args) in [
        ("--name", ["https://other.example", long_name.as_str()]),
        ("--name", ["https://other.example", "Agent\u{7}"]),
        ("--issuer", ["https://other.example/\u{1}", "Agent"]),
    ] {
        let refused = run(
            pactd_on(&db),
            &[
                "agent",
                "add",
                "--issuer",
                args[0],
                "--jwks-uri",
                "https://other.example/jwks.json",
                "--name",
                args[1],
            ],
        )
        .await;
        assert!(
            refused.failed().contains(&format!("invalid {flag}")),
            "{args:?}: {}",
            refused.describe()
        );
    }

    // Only the first agent was ever registered.
    let list = run(pactd_on(&db), &["agent", "list"]).await;
    assert_eq!(list.succeeded().lines().count(), 1, "{}", list.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn migrate_creates_the_tables_in_an_empty_database_and_can_run_again() {
    // A database with nothing in it, on the harness's server.
    let fresh = pact_tests::db::fresh_database().await;
    let name = format!("pactd_cli_empty_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&fresh).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let (server, _) = fresh.rsplit_once('/').unwrap();
    let empty = format!("{server}/{name}");

    let tables = ["brands", "agents", "conversations", "messages"];
    let exists = |table: &'static str| {
        let empty = empty.clone();
        async move {
            let mut conn = sqlx::PgConnection::connect(&empty).await.unwrap();
            let found: bool = sqlx::query_scalar("select to_regclass($1) is not null")
                .bind(format!("public.{table}"))
                .fetch_one(&mut conn)
                .await
                .unwrap();
            conn.close().await.unwrap();
            found
        }
    };
    for table in tables {
        assert!(!exists(table).await, "{table} exists before migrate");
    }
    // Other admin commands never migrate a shared database behind the operator's back.
    let behind = run(pactd_on(&empty), &["brand", "list"]).await;
    assert!(
        behind.failed().contains("pactd migrate"),
        "{}",
        behind.describe()
    );
    assert!(!exists("brands").await, "brand list migrated the database");

    let first = run(pactd_on(&empty), &["migrate"]).await;
    assert!(
        first.succeeded().contains("migrations applied"),
        "{}",
        first.describe()
    );
    for table in tables {
        assert!(exists(table).await, "{table} missing after migrate");
    }

    let mut conn = sqlx::PgConnection::connect(&empty).await.unwrap();
    let applied: i64 = sqlx::query_scalar("select count(*) from _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert!(applied >= 1);

    let second = run(pactd_on(&empty), &["migrate"]).await;
    assert!(
        second.succeeded().contains("migrations applied"),
        "{}",
        second.describe()
    );
    let applied_again: i64 = sqlx::query_scalar("select count(*) from _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(applied_again, applied, "a second migrate applies nothing");
    conn.close().await.unwrap();
}

// ---------------------------------------------------------------------------
// serve
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn serve_answers_registered_agents_refuses_bad_tokens_and_disabled_agents_stops_on_sigterm_and_never_logs_tokens()
 {
    let db = pact_tests::db::fresh_database().await;
    let scratch = Scratch::new("serve");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let master_key = new_master_key().await;
    let mut cmd = pactd_serving(&db, &master_key);
    cmd.env("PACTD_ALLOW_LOOPBACK_JWKS", "true")
        .env("RUST_LOG", "debug");
    let mut server = Server::start(
        cmd,
        &["serve", "--listen", &listen],
        port,
        &scratch,
        "serve",
        SERVE_START_TIMEOUT,
    )
    .await;

    let pa = TestPa::start("https://pa.serve.test").await;
    run(
        pactd_on(&db),
        &[
            "agent",
            "add",
            "--issuer",
            &pa.issuer,
            "--jwks-uri",
            &pa.jwks_uri,
            "--name",
            "Serve PA",
        ],
    )
    .await
    .succeeded();
    run(
        pactd_on(&db),
        &["brand", "add", "shop", "--name", "Corner Shop"],
    )
    .await
    .succeeded();

    let iface = format!("{}/a2a/shop", server.base_url);
    let audience = format!("{}/a2a", server.base_url);
    let mut sent = Vec::new();

    let valid = pa.token("user-1", &audience);
    sent.push(valid.clone());
    let text = reply_text(send(&iface, &valid, "hello").await).await;
    assert!(text.contains("Corner Shop"), "{text}");
    assert!(pa.jwks_hits() >= 1, "the PA's JWKS was fetched");

    let wrong_aud = pa.token("user-1", &iface);
    sent.push(wrong_aud.clone());
    assert_unauthorized(send(&iface, &wrong_aud, "hello").await, "wrong aud").await;

    let tampered = with_swapped_payload(
        &pa.token("user-1", &audience),
        &pa.claims("mallory", &audience),
    );
    sent.push(tampered.clone());
    assert_unauthorized(send(&iface, &tampered, "hello").await, "tampered").await;

    let forged = compact(
        &pa.header(),
        &pa.claims("user-1", &audience),
        &PaKey::new_ec(pa.current_key().kid()),
    );
    sent.push(forged.clone());
    assert_unauthorized(send(&iface, &forged, "hello").await, "foreign key").await;

    // A valid token still works after the failures...
    let again = pa.token("user-1", &audience);
    sent.push(again.clone());
    reply_text(send(&iface, &again, "When are you open?").await).await;

    // ...and stops working once the operator disables the PA: the server, a
    // process of its own, hears of it on `pactd_config` (the table trigger's
    // notification), so within that notification's travel time, which a
    // loaded CI machine stretches; never later than the 5 s allowed here.
    run(pactd_on(&db), &["agent", "disable", "--issuer", &pa.issuer])
        .await
        .succeeded();
    let disabled = std::time::Instant::now();
    let refused = loop {
        let after_disable = pa.token("user-1", &audience);
        sent.push(after_disable.clone());
        let res = send(&iface, &after_disable, "hello").await;
        if res.status() != reqwest::StatusCode::OK
            || disabled.elapsed() > std::time::Duration::from_secs(5)
        {
            break res;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_unauthorized(refused, "disabled PA").await;

    let status = server.terminate().await;
    assert!(status.success(), "exit {status}\n{}", server.output());

    let log = server.stderr();
    // The log is real and detailed: it records why tokens were refused.
    assert!(log.contains("PA-JWT rejected"), "{log}");
    assert!(log.contains("issuer disabled"), "{log}");
    assert!(
        log.contains("DEBUG"),
        "RUST_LOG=debug was not applied:\n{log}"
    );
    assert!(
        !log.contains(&master_key),
        "the master key leaked into the log"
    );
    for token in &sent {
        assert!(!log.contains(token.as_str()), "a token leaked into the log");
        assert!(
            !log.contains(signature_of(token)),
            "a token's signature leaked into the log"
        );
    }
}

/// `serve --seed-demo` (what docker-compose.yml turns on) adds the demo
/// brand when it is missing, so a first run has a card to show; without it
/// nothing is added, and an existing demo brand is never changed.
#[tokio::test]
async fn serve_seeds_the_demo_brand_only_when_asked_and_never_changes_it() {
    let db = pact_tests::db::fresh_database().await;
    let scratch = Scratch::new("seed");
    let master_key = new_master_key().await;
    let card = |base: &str| format!("{base}/a2a/demo/.well-known/agent-card.json");
    let start = |seed: bool| {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut cmd = pactd_serving(&db, &master_key);
        if seed {
            cmd.env("PACTD_SEED_DEMO", "true");
        }
        let scratch = &scratch;
        async move {
            Server::start(
                cmd,
                &["serve", "--listen", &listen],
                port,
                scratch,
                "serve",
                SERVE_START_TIMEOUT,
            )
            .await
        }
    };
    let mut plain = start(false).await;
    let res = pact_tests::http_get(card(&plain.base_url)).await.unwrap();
    assert_eq!(res.status(), 404, "no demo brand unless asked");
    let status = plain.terminate().await;
    assert!(status.success(), "exit {status}\n{}", plain.output());

    let mut seeded = start(true).await;
    let res = pact_tests::http_get(card(&seeded.base_url)).await.unwrap();
    assert_eq!(res.status(), 200, "the first run shows the demo card");
    let status = seeded.terminate().await;
    assert!(status.success(), "exit {status}\n{}", seeded.output());
    run(
        pactd_on(&db),
        &["brand", "set", "demo", "--name", "Our Own Demo"],
    )
    .await
    .succeeded();
    let mut again = start(true).await;
    let body = get_json(&card(&again.base_url)).await;
    assert_eq!(
        body["name"], "Our Own Demo",
        "an existing brand is left as it is"
    );
    let status = again.terminate().await;
    assert!(status.success(), "exit {status}\n{}", again.output());
}

#[tokio::test]
async fn admin_commands_without_database_url_refuse_to_create_a_new_database() {
    let dir =
        std::env::temp_dir().join(format!("pactd-cli-nodb-{}", uuid::Uuid::new_v4().simple()));
    let data_dir = dir.to_str().unwrap().to_owned();
    let out = run(
        pactd(),
        &[
            "--data-dir",
            &data_dir,
            "brand",
            "add",
            "oops",
            "--name",
            "Oops",
        ],
    )
    .await;
    let err = out.failed();
    assert!(err.contains("DATABASE_URL"), "{}", out.describe());
    assert!(!dir.join("pg").exists(), "a private cluster was created");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_without_database_url_says_to_set_it_or_to_use_pactd_dev() {
    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let refused = run(pactd(), &["serve", "--listen", &listen]).await;
    let stderr = refused.failed();
    assert!(stderr.contains("DATABASE_URL"), "{}", refused.describe());
    assert!(stderr.contains("pactd dev"), "{}", refused.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_config_file_sets_listen_public_url_and_audience_and_flags_and_env_override_it() {
    let db = pact_tests::db::fresh_database().await;
    let scratch = Scratch::new("config");
    let port = free_port();
    let config = scratch.file("pactd.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\n\
             public_url = \"https://pactd.example\"\n\
             audience = \"urn:test:aud\"\n\
             allow_loopback_jwks = true\n"
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap().to_owned();

    run(
        pactd_on(&db),
        &["brand", "add", "cfgshop", "--name", "Config Shop"],
    )
    .await
    .succeeded();
    let pa = TestPa::start("https://pa.config.test").await;
    run(
        pactd_on(&db),
        &[
            "agent",
            "add",
            "--issuer",
            &pa.issuer,
            "--jwks-uri",
            &pa.jwks_uri,
        ],
    )
    .await
    .succeeded();

    // Everything from the file: no --listen, yet it serves on the file's port.
    let master_key = new_master_key().await;
    let mut server = Server::start(
        pactd_serving(&db, &master_key),
        &["serve", "--config", &config],
        port,
        &scratch,
        "from-file",
        SERVE_START_TIMEOUT,
    )
    .await;
    let local_iface = format!("{}/a2a/cfgshop", server.base_url);
    let card = get_json(&format!("{local_iface}/.well-known/agent-card.json")).await;
    assert_eq!(
        card["supportedInterfaces"][0]["url"], "https://pactd.example/a2a/cfgshop",
        "{card}"
    );
    reply_text(send(&local_iface, &pa.token("u1", "urn:test:aud"), "hello").await).await;
    assert_unauthorized(
        send(
            &local_iface,
            &pa.token("u1", &format!("{}/a2a", server.base_url)),
            "hello",
        )
        .await,
        "the default audience is replaced by the file's",
    )
    .await;
    let status = server.terminate().await;
    assert!(status.success(), "exit {status}\n{}", server.output());

    // A flag and an env variable beat the file.
    let other_port = free_port();
    let mut cmd = pactd_serving(&db, &master_key);
    cmd.env("PACTD_LISTEN", format!("127.0.0.1:{other_port}"));
    let mut server = Server::start(
        cmd,
        &["serve", "--config", &config, "--audience", "urn:flag:aud"],
        other_port,
        &scratch,
        "overridden",
        SERVE_START_TIMEOUT,
    )
    .await;
    let local_iface = format!("{}/a2a/cfgshop", server.base_url);
    reply_text(send(&local_iface, &pa.token("u1", "urn:flag:aud"), "hello").await).await;
    assert_unauthorized(
        send(&local_iface, &pa.token("u1", "urn:test:aud"), "hello").await,
        "the file's audience is overridden by --audience",
    )
    .await;
    let card = get_json(&format!("{local_iface}/.well-known/agent-card.json")).await;
    assert_eq!(
        card["supportedInterfaces"][0]["url"], "https://pactd.example/a2a/cfgshop",
        "settings not overridden still come from the file: {card}"
    );
    let status = server.terminate().await;
    assert!(status.success(), "exit {status}\n{}", server.output());

    // A misspelt key is an error, not silently ignored.
    let bad = scratch.file("bad.toml");
    std::fs::write(
        &bad,
        format!(
            "listen = \"127.0.0.1:{}\"\naudiense = \"postgres://pactd:S3cret-77@db/pactd\"\n",
            free_port()
        ),
    )
    .unwrap();
    let refused = run(pactd_on(&db), &["serve", "--config", bad.to_str().unwrap()]).await;
    let stderr = refused.failed();
    assert!(
        stderr.contains("audiense")
            && stderr.contains("invalid config file")
            && stderr.contains("at line 2"),
        "{}",
        refused.describe()
    );
    // Where and what, never the line itself: a misspelt key may hold a password.
    assert!(!stderr.contains("S3cret-77"), "{}", refused.describe());
    // Nor a value of the wrong type, which the parser's message quotes.
    std::fs::write(
        &bad,
        format!(
            "listen = \"127.0.0.1:{}\"\nrequest_timeout = \"S3cret-78\"\n",
            free_port()
        ),
    )
    .unwrap();
    let refused = run(pactd_on(&db), &["serve", "--config", bad.to_str().unwrap()]).await;
    let stderr = refused.failed();
    assert!(
        stderr.contains("invalid config file") && stderr.contains("at line 2"),
        "{}",
        refused.describe()
    );
    assert!(!stderr.contains("S3cret-78"), "{}", refused.describe());
}

// ---------------------------------------------------------------------------
// dev
// ---------------------------------------------------------------------------

/// `pactd` on the private cluster in `data_dir` (no DATABASE_URL).
fn pactd_local(data_dir: &Path) -> Command {
    let mut cmd = pactd();
    cmd.env("PACTD_DATA_DIR", data_dir);
    cmd
}

async fn start_dev(data: &Scratch, name: &str) -> Server {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let data_dir = data.path.to_str().unwrap().to_owned();
    Server::start(
        pactd(),
        &["dev", "--data-dir", &data_dir, "--listen", &listen],
        port,
        data,
        name,
        DEV_START_TIMEOUT,
    )
    .await
}

/// Stops `dev` with SIGTERM; it must exit 0 and stop its PostgreSQL.
async fn stop_dev(server: &mut Server, data: &Scratch) {
    let status = server.terminate().await;
    assert!(status.success(), "exit {status}\n{}", server.output());
    let pid_file = data.postmaster_pid();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_file.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !pid_file.exists(),
        "dev left its PostgreSQL running ({} exists)\n{}",
        pid_file.display(),
        server.output()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dev_runs_on_its_own_postgres_serves_the_demo_brand_and_keeps_its_data_across_runs() {
    // Declared first so it is dropped last: after a failure it stops a
    // PostgreSQL left behind and removes the directory.
    let data = Scratch::new("dev");

    let mut first = start_dev(&data, "dev-1").await;
    // dev names itself `localhost` (WebAuthn refuses an IP address as the site).
    let public = first.base_url.replace("127.0.0.1", "localhost");
    let card_url = format!("{public}/a2a/demo/.well-known/agent-card.json");
    assert!(
        first.stdout().contains(&card_url),
        "the banner names the demo card {card_url}\n{}",
        first.output()
    );
    for hint in [
        "pactd user add demo",
        "pact-agent init --audience",
        "/device",
        "Passkeys:                 available",
        // Issue 30, item 10: the console and the command for its first account.
        &format!("Staff console:            {public}/admin"),
        "pactd admin add staff@example.com --role owner",
    ] {
        assert!(
            first.stdout().contains(hint),
            "the banner says {hint:?}\n{}",
            first.output()
        );
    }
    let card = get_json(&format!(
        "{}/a2a/demo/.well-known/agent-card.json",
        first.base_url
    ))
    .await;
    assert_eq!(card["name"], "Demo Store", "{card}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{public}/a2a/demo"),
        "{card}"
    );

    // The admin command finds the cluster dev is running and leaves it running,
    // quietly (issue 30, item 10): its output is the answer, progress lines
    // only with -v.
    let pa = TestPa::start("https://pa.dev.test").await;
    let listed = run(pactd_local(&data.path), &["brand", "list"]).await;
    listed.succeeded();
    assert!(!listed.stderr.contains("INFO"), "{}", listed.describe());
    let verbose = run(pactd_local(&data.path), &["brand", "list", "-v"]).await;
    verbose.succeeded();
    assert!(
        verbose.stderr.contains("local PostgreSQL is ready"),
        "{}",
        verbose.describe()
    );
    run(
        pactd_local(&data.path),
        &[
            "agent",
            "add",
            "--data-dir",
            data.path.to_str().unwrap(),
            "--issuer",
            &pa.issuer,
            "--jwks-uri",
            &pa.jwks_uri,
            "--name",
            "Dev PA",
        ],
    )
    .await
    .succeeded();
    assert!(
        data.postmaster_pid().exists(),
        "the admin command stopped dev's PostgreSQL"
    );

    let iface = format!("{}/a2a/demo", first.base_url);
    let token = pa.token("dev-user", &format!("{public}/a2a"));
    let text = reply_text(send(&iface, &token, "When are you open?").await).await;
    assert!(text.contains("Monday"), "{text}");

    stop_dev(&mut first, &data).await;
    assert!(
        first.stderr().contains("seeded the demo brand"),
        "{}",
        first.output()
    );

    // dev made itself a master key only its owner can read.
    let key_file = data.file("master.key");
    let key_mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(key_mode & 0o077, 0, "master.key is mode {key_mode:o}");
    let first_key = std::fs::read_to_string(&key_file).unwrap();

    // Second run on the same directory: same data, no second seeding.
    let mut second = start_dev(&data, "dev-2").await;
    let brands = run(pactd_local(&data.path), &["brand", "list"]).await;
    assert_eq!(
        brand_lines(brands.succeeded(), "demo").len(),
        1,
        "{}",
        brands.describe()
    );
    let agents = run(pactd_local(&data.path), &["agent", "list"]).await;
    assert_eq!(
        agent_state(agents.succeeded(), &pa.issuer).as_deref(),
        Some("enabled"),
        "the PA registered in the first run is still there: {}",
        agents.describe()
    );
    let token = pa.token(
        "dev-user",
        &format!("{}/a2a", second.base_url.replace("127.0.0.1", "localhost")),
    );
    let iface = format!("{}/a2a/demo", second.base_url);
    reply_text(send(&iface, &token, "hello").await).await;

    stop_dev(&mut second, &data).await;
    assert_eq!(
        std::fs::read_to_string(&key_file).unwrap(),
        first_key,
        "the second run kept the master key"
    );
    assert!(
        !second.stderr().contains("seeded the demo brand"),
        "the demo brand was seeded again\n{}",
        second.output()
    );
}

/// `pactd ARGS` with `input` on standard input (a pipe, not a terminal).
async fn run_with_stdin(db: &str, args: &[&str], input: &str) -> Run {
    use tokio::io::AsyncWriteExt;
    let what = args.join(" ");
    let mut cmd = pactd_on(db);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`pactd {what}` did not finish"))
        .unwrap();
    Run {
        what,
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn users_are_added_with_a_password_from_stdin_listed_and_their_mfa_reset_and_brand_settings_change()
 {
    async fn settings(pool: &sqlx::PgPool, brand: &str) -> Value {
        pact_db::brands::find(pool, brand)
            .await
            .unwrap()
            .unwrap()
            .settings
    }

    let db = pact_tests::db::fresh_database().await;
    run(pactd_on(&db), &["brand", "add", "shop", "--name", "Shop"])
        .await
        .succeeded();
    let pool = pact_db::connect(&db, 2).await.unwrap();
    let password = "correct horse battery staple";

    // Added with the password from stdin; the email is stored lower-cased.
    let added = run_with_stdin(
        &db,
        &[
            "user",
            "add",
            "shop",
            " Ann@Example.com",
            "--external-id",
            "cust-1",
        ],
        &format!("{password}\n"),
    )
    .await;
    let out = added.succeeded();
    assert!(
        out.contains("added user ann@example.com to shop"),
        "{}",
        added.describe()
    );
    assert!(out.contains("subject cust-1"), "{}", added.describe());
    assert!(!out.contains(password), "the password is never printed");
    let user =
        pact_db::users::find_by_email(&pool, &pact_tests::brand_id("shop"), "ann@example.com")
            .await
            .unwrap()
            .expect("stored");
    assert_eq!(user.external_id.as_deref(), Some("cust-1"));
    let hash = user.password_hash.clone().unwrap();
    assert!(
        hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{hash}"
    );
    assert_eq!(
        pact_server::accounts::password::verify(password, Some(&hash)),
        pact_server::accounts::password::Verified::Yes,
        "the stdin line, without its line ending, is the password"
    );

    // Refused: the same email again, no password on stdin, a short one, an unknown brand.
    let again = run_with_stdin(
        &db,
        &["user", "add", "shop", "ann@example.com"],
        "another password\n",
    )
    .await;
    assert!(
        again.failed().contains("already has an account"),
        "{}",
        again.describe()
    );
    let empty = run(pactd_on(&db), &["user", "add", "shop", "bob@example.com"]).await;
    assert!(
        empty.failed().contains("no password on standard input"),
        "{}",
        empty.describe()
    );
    let short = run_with_stdin(&db, &["user", "add", "shop", "bob@example.com"], "short\n").await;
    assert!(
        short.failed().contains("8 to 1024 characters"),
        "{}",
        short.describe()
    );
    let nobrand = run_with_stdin(
        &db,
        &["user", "add", "nope", "bob@example.com"],
        "long enough pw\n",
    )
    .await;
    assert!(
        nobrand.failed().contains("no brand"),
        "{}",
        nobrand.describe()
    );
    let bad = run_with_stdin(
        &db,
        &["user", "add", "shop", "not-an-email"],
        "long enough pw\n",
    )
    .await;
    assert!(bad.failed().contains("invalid email"), "{}", bad.describe());
    run_with_stdin(
        &db,
        &["user", "add", "shop", "bob@example.com"],
        "bob's long password",
    )
    .await
    .succeeded();

    // Listed, with second factors.
    let secret = pact_server::accounts::totp::new_secret().unwrap();
    let key = pact_crypto::MasterKey::generate().unwrap();
    let sealed = key.seal(&secret, user.id.as_bytes()).unwrap();
    pact_db::users::set_totp(&pool, user.id, Some(&sealed))
        .await
        .unwrap();
    let codes: Vec<Vec<u8>> = pact_server::accounts::recovery::generate()
        .iter()
        .map(|c| pact_server::accounts::recovery::hash(&key, user.id, c).unwrap())
        .collect();
    let mut conn = pool.acquire().await.unwrap();
    pact_db::users::replace_recovery_codes(&mut conn, user.id, &codes)
        .await
        .unwrap();
    drop(conn);
    let list = run(pactd_on(&db), &["user", "list", "--brand", "shop"]).await;
    let lines: Vec<&str> = list.succeeded().lines().collect();
    assert_eq!(lines.len(), 2, "{}", list.describe());
    assert_eq!(
        lines[0],
        format!(
            "shop\tann@example.com\t{}\tcust-1\ttotp,recovery-codes:10\t-",
            user.id
        ),
        "{}",
        list.describe()
    );
    assert!(
        lines[1].starts_with("shop\tbob@example.com\t") && lines[1].ends_with("\t-\tno-mfa\t-")
    );
    let all = run(pactd_on(&db), &["user", "list"]).await;
    assert_eq!(all.succeeded().lines().count(), 2);

    // reset-mfa removes every factor.
    let reset = run(
        pactd_on(&db),
        &["user", "reset-mfa", "shop", "ANN@example.com"],
    )
    .await;
    assert!(
        reset.succeeded().contains("removed every second factor"),
        "{}",
        reset.describe()
    );
    let after = pact_db::users::find(&pool, user.id).await.unwrap().unwrap();
    assert!(after.totp_secret_sealed.is_none());
    assert_eq!(
        pact_db::users::unused_recovery_codes(&pool, user.id)
            .await
            .unwrap(),
        0
    );
    let list = run(pactd_on(&db), &["user", "list", "--brand", "shop"]).await;
    assert!(
        list.succeeded()
            .lines()
            .next()
            .unwrap()
            .ends_with("\tcust-1\tno-mfa\t-")
    );
    let unknown = run(
        pactd_on(&db),
        &["user", "reset-mfa", "shop", "carol@example.com"],
    )
    .await;
    assert!(
        unknown.failed().contains("no account"),
        "{}",
        unknown.describe()
    );

    // brand set: only the options given change.
    let set = run(
        pactd_on(&db),
        &[
            "brand",
            "set",
            "shop",
            "--mfa-required",
            "true",
            "--grant-ttl-days",
            "7",
        ],
    )
    .await;
    set.succeeded();
    let s = settings(&pool, "shop").await;
    assert_eq!(s["mfa_required"], json!(true), "{s}");
    assert_eq!(s["grant_ttl_days"], json!(7));
    run(
        pactd_on(&db),
        &[
            "brand",
            "set",
            "shop",
            "--login-url",
            "https://login.shop.example/pact",
            "--login-jwks-uri",
            "https://login.shop.example/jwks.json",
        ],
    )
    .await
    .succeeded();
    let s = settings(&pool, "shop").await;
    assert_eq!(s["login_url"], json!("https://login.shop.example/pact"));
    assert_eq!(
        s["login_jwks_uri"],
        json!("https://login.shop.example/jwks.json")
    );
    assert_eq!(s["mfa_required"], json!(true), "untouched");
    run(
        pactd_on(&db),
        &[
            "brand",
            "set",
            "shop",
            "--no-external-login",
            "--mfa-required",
            "false",
        ],
    )
    .await
    .succeeded();
    let s = settings(&pool, "shop").await;
    assert!(
        s["login_url"].is_null() && s["login_jwks_uri"].is_null(),
        "{s}"
    );
    assert_eq!(s["mfa_required"], json!(false));
    assert_eq!(s["grant_ttl_days"], json!(7));
    for (args, why) in [
        (vec!["brand", "set", "shop"], "nothing to change"),
        (
            vec!["brand", "set", "shop", "--login-url", "https://x.example"],
            "--login-jwks-uri",
        ),
        (
            vec![
                "brand",
                "set",
                "shop",
                "--login-url",
                "http://login.example",
                "--login-jwks-uri",
                "https://x.example/j",
            ],
            "invalid --login-url",
        ),
        (
            vec!["brand", "set", "shop", "--grant-ttl-days", "0"],
            "grant-ttl-days",
        ),
        (
            vec!["brand", "set", "shop", "--mfa-required", "maybe"],
            "mfa-required",
        ),
        (
            vec!["brand", "set", "nope", "--mfa-required", "true"],
            "no brand",
        ),
    ] {
        let r = run(pactd_on(&db), &args).await;
        assert!(r.failed().contains(why), "{why}: {}", r.describe());
    }
    assert_eq!(
        settings(&pool, "shop").await,
        s,
        "refused commands changed nothing"
    );
    pool.close().await;
}

// ---------------------------------------------------------------------------
// delegation admin: scopes, details types, keys, grants, receipts
// ---------------------------------------------------------------------------

/// `brand scope`, `brand details-type`, `keys rotate/list`, `grants list/revoke`
/// and `receipts verify` against a database a running pactd (in-process here)
/// has filled with a real grant and chained receipts.
#[tokio::test(flavor = "multi_thread")]
async fn delegation_admin_commands_manage_scopes_keys_grants_and_audit_receipts() {
    let app = pact_tests::TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    let db = app.db_url.clone();
    let key = app.master_key.to_base64();

    // Scopes and an authorization_details type on a new brand.
    run(pactd_on(&db), &["brand", "add", "acme", "--name", "Acme"])
        .await
        .succeeded();
    run(
        pactd_on(&db),
        &[
            "brand",
            "scope",
            "add",
            "acme",
            "orders:read",
            "See your orders",
        ],
    )
    .await
    .succeeded();
    let bad = run(
        pactd_on(&db),
        &["brand", "scope", "add", "acme", "has space", "x"],
    )
    .await;
    assert!(
        bad.failed().contains("invalid scope id"),
        "{}",
        bad.describe()
    );
    let listed = run(pactd_on(&db), &["brand", "scope", "list", "acme"]).await;
    assert_eq!(listed.succeeded().trim(), "orders:read\tSee your orders");
    let decl =
        r#"{"scope":"orders:read","fields":{"ids":{"type":"string_array","required":true}}}"#;
    run(
        pactd_on(&db),
        &[
            "brand",
            "details-type",
            "add",
            "acme",
            "order_view",
            "--json",
            decl,
        ],
    )
    .await
    .succeeded();
    let unknown_scope = r#"{"scope":"nope","fields":{"ids":{"type":"string_array"}}}"#;
    let refused = run(
        pactd_on(&db),
        &[
            "brand",
            "details-type",
            "add",
            "acme",
            "x",
            "--json",
            unknown_scope,
        ],
    )
    .await;
    assert!(
        refused.failed().contains("no scope"),
        "{}",
        refused.describe()
    );
    let types = run(pactd_on(&db), &["brand", "details-type", "list", "acme"]).await;
    assert!(
        types.succeeded().starts_with("order_view\torders:read"),
        "{}",
        types.describe()
    );
    // Declared through the same edit as the console's and the API's: audited.
    let audited: Vec<(String, String)> = sqlx::query_as(
        "select actor_kind, action from audit_log where brand_id = 'acme' \
         and target = 'order_view' order by id",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        audited,
        [("cli".to_owned(), "details_type.upsert".to_owned())]
    );

    // A real grant with three chained receipts, made through pactd's endpoints.
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example").await;
    let tokens = app.connect(&pa, "pa-u", "alice", &["orders:read"]).await;
    let access = tokens["access_token"].as_str().unwrap();
    for i in 0..3 {
        let res = app
            .send_delegated(
                "demo",
                &pa.token("pa-u", app.audience()),
                access,
                &format!("m{i}"),
                "my orders",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
    }
    // The receipt log's job (normally on a timer) covers the three receipts
    // with a signed tree head (docs/receipt-log.md).
    pact_server::receipt_log::publish(&app.state, time::OffsetDateTime::now_utc())
        .await
        .unwrap();
    let ok = run(pactd_on(&db), &["receipts", "verify"]).await;
    assert!(
        ok.succeeded()
            .contains("OK: 3 receipt(s) in 1 chain(s) verified"),
        "{}",
        ok.describe()
    );
    assert!(
        ok.stdout.contains("the newest of size 3"),
        "{}",
        ok.describe()
    );

    // The PA's copies of the three receipts, as `pact-agent` keeps them.
    let pool = sqlx::PgPool::connect(&db).await.unwrap();
    let copies: Vec<(String, serde_json::Value)> =
        sqlx::query_as("select jws, claims::json from receipts order by seq")
            .fetch_all(&pool)
            .await
            .unwrap();
    let held: Vec<serde_json::Value> = copies
        .into_iter()
        .map(|(jws, claims)| serde_json::json!({"receipt": {"jws": jws, "claims": claims}}))
        .chain([serde_json::json!({"jws": "not.a.receipt", "claims": {}})])
        .collect();
    let held_path = std::env::temp_dir().join(format!("pactd-held-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&held_path, serde_json::to_string(&held).unwrap()).unwrap();
    let held_arg = held_path.to_str().unwrap().to_owned();
    let all_there = run(pactd_on(&db), &["receipts", "verify", "--held", &held_arg]).await;
    assert!(
        all_there
            .succeeded()
            .contains("held: 3 receipt(s) signed by pactd, 0 missing"),
        "{}",
        all_there.describe()
    );

    // Tamper with a stored receipt behind the append-only trigger's back.
    sqlx::query("alter table receipts disable trigger receipts_append_only")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "update receipts set claims = jsonb_set(claims, '{user}', '\"mallory\"') where seq = 2",
    )
    .execute(&pool)
    .await
    .unwrap();
    let broken = run(pactd_on(&db), &["receipts", "verify"]).await;
    assert!(!broken.status.success(), "{}", broken.describe());
    assert!(
        broken.stdout.contains("BROKEN") && broken.stdout.contains("receipt #2"),
        "{}",
        broken.describe()
    );

    // Cut the newest receipt: the store's own chains cannot tell, the PA's
    // signed copy can.
    sqlx::query("delete from receipts where seq = 3")
        .execute(&pool)
        .await
        .unwrap();
    let cut = run(pactd_on(&db), &["receipts", "verify", "--held", &held_arg]).await;
    assert!(
        cut.failed()
            .contains("1 receipt(s) signed by pactd are missing"),
        "{}",
        cut.describe()
    );
    assert!(cut.stdout.contains("MISSING"), "{}", cut.describe());
    // Without the PA's copies, the signed tree head proves the cut too.
    let cut = run(pactd_on(&db), &["receipts", "verify"]).await;
    assert!(!cut.status.success(), "{}", cut.describe());
    assert!(
        cut.stdout.contains("BROKEN: receipt log")
            && cut.stdout.contains("covered by the signed head of size 3"),
        "{}",
        cut.describe()
    );
    std::fs::remove_file(&held_path).ok();

    // Grants: listed, then revoked; the delegated call is refused at once.
    let grants = run(pactd_on(&db), &["grants", "list", "--user", "alice"]).await;
    let line = grants.succeeded().lines().next().unwrap().to_owned();
    assert!(
        line.contains("\tactive\tdemo\talice\thttps://pa.example\torders:read"),
        "{line}"
    );
    let grant_id = line.split('\t').next().unwrap().to_owned();
    run(pactd_on(&db), &["grants", "revoke", &grant_id])
        .await
        .succeeded();
    let again = run(pactd_on(&db), &["grants", "revoke", &grant_id]).await;
    assert!(
        again.failed().contains("no active grant"),
        "{}",
        again.describe()
    );
    let res = app
        .send_delegated(
            "demo",
            &pa.token("pa-u", app.audience()),
            access,
            "m9",
            "my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 401);

    // Keys: rotation publishes a second key; without the master key it is refused.
    let no_key = run(pactd_on(&db), &["keys", "rotate"]).await;
    assert!(
        no_key.failed().contains("master key"),
        "{}",
        no_key.describe()
    );
    let mut with_key = pactd_on(&db);
    with_key.env("PACTD_MASTER_KEY", &key);
    let rotated = run(with_key, &["keys", "rotate", "--overlap-secs", "0"]).await;
    assert!(
        rotated.succeeded().contains("new signing key"),
        "{}",
        rotated.describe()
    );
    let keys = run(pactd_on(&db), &["keys", "list"]).await;
    assert_eq!(keys.succeeded().lines().count(), 2, "{}", keys.describe());
}

/// Issue 8: a client that never finishes its request must not keep `serve`
/// from stopping. The limits come from the config file (flags and env are
/// tested elsewhere through the same resolution).
#[tokio::test]
async fn serve_exits_0_after_the_grace_period_on_sigterm_while_a_slow_client_stays_connected() {
    use tokio::io::AsyncWriteExt;

    let db = pact_tests::db::fresh_database().await;
    let scratch = Scratch::new("drain");
    let port = free_port();
    let config = scratch.path.join("pactd.toml");
    std::fs::write(
        &config,
        "header_timeout = 300\nshutdown_grace = 1\nmax_connections_per_ip = 50\n",
    )
    .unwrap();
    let master_key = new_master_key().await;
    let mut cmd = pactd_serving(&db, &master_key);
    cmd.env("PACTD_CONFIG", &config);
    let listen = format!("127.0.0.1:{port}");
    let mut server = Server::start(
        cmd,
        &["serve", "--listen", &listen],
        port,
        &scratch,
        "drain",
        SERVE_START_TIMEOUT,
    )
    .await;
    let mut slow = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // A request whose body never arrives. `Expect: 100-continue` makes the
    // server say when its handler starts reading the body, so SIGTERM is sent
    // only once the request is surely in flight (a connection still in the
    // accept queue, or one whose bytes were not read yet, counts as idle and
    // is closed at once, which would not test the drain).
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: x\r\nOrigin: http://{listen}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
        let mut buf = [0u8; 1024];
        let n = tokio::io::AsyncReadExt::read(&mut slow, &mut buf)
            .await
            .unwrap();
        assert!(
            n > 0,
            "the server closed the connection before reading the body"
        );
        answer.extend_from_slice(&buf[..n]);
    }
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    slow.write_all(b"email=").await.unwrap();
    let status = server.terminate().await;
    assert!(status.success(), "{status}\n{}", server.output());
    assert!(
        server
            .stderr()
            .contains("closing the remaining connections")
            || server
                .stdout()
                .contains("closing the remaining connections"),
        "{}",
        server.output()
    );
}

/// Issue 28, finding 4: under `ulimit -n 200`, 260 idle connections to the
/// metrics port used up the process's file descriptors and the public
/// `/healthz` timed out ("accept failed: Too many open files"). The metrics
/// listener now has the public one's accept loop and a budget of its own:
/// the flood is refused at its cap and the public listener keeps answering.
#[tokio::test]
async fn a_flood_of_idle_metrics_connections_leaves_the_public_listener_its_descriptors() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    const FLOOD: usize = 260;
    let db = pact_tests::db::fresh_database().await;
    let master_key = new_master_key().await;
    let scratch = Scratch::new("fds");
    let (port, metrics_port) = (free_port(), free_port());
    // `pactd serve` under a low open-files limit, set by the shell it execs from.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 200 && exec \"$0\" \"$@\"")
        .arg(crate::support::PACTD);
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("PACTD_") || name.starts_with("DATABASE_URL") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("RUST_LOG")
        .env("DATABASE_URL", &db)
        .env("PACTD_MASTER_KEY", &master_key)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let listen = format!("127.0.0.1:{port}");
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut server = Server::start(
        cmd,
        &[
            "serve",
            "--listen",
            &listen,
            "--metrics-listen",
            &metrics,
            "--header-timeout",
            "5",
        ],
        port,
        &scratch,
        "fds",
        SERVE_START_TIMEOUT,
    )
    .await;

    // The flood: connections that never send a byte. Each one pactd refuses
    // is closed at once; count those.
    let closed = Arc::new(AtomicUsize::new(0));
    let mut idle = Vec::new();
    for _ in 0..FLOOD {
        let mut s = tokio::net::TcpStream::connect(&metrics).await.unwrap();
        let closed = closed.clone();
        idle.push(tokio::spawn(async move {
            let mut byte = [0u8; 1];
            let read = tokio::io::AsyncReadExt::read(&mut s, &mut byte);
            if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_secs(20), read).await {
                closed.fetch_add(1, Ordering::SeqCst);
            }
            s
        }));
    }
    // Until pactd has taken them all off its accept queue: then all but its
    // budget for the metrics listener are closed (bounded: the old loop
    // closed none and ran out of descriptors instead).
    let budget = pact_server::telemetry::METRICS_MAX_CONNECTIONS;
    let deadline = Instant::now() + Duration::from_secs(5);
    while closed.load(Ordering::SeqCst) < FLOOD - budget && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // With the flood still open, the public listener answers at once.
    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .build()
        .unwrap();
    for path in ["/healthz", "/readyz"] {
        let res = http
            .get(format!("http://{listen}{path}"))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}\n{}", server.output()));
        assert_eq!(res.status(), 200, "{path}");
    }
    assert!(
        closed.load(Ordering::SeqCst) >= FLOOD - budget,
        "only {} of {FLOOD} flood connections were refused",
        closed.load(Ordering::SeqCst)
    );
    // The flood's own idle connections are cut at the header timeout, and
    // the metrics page is served again.
    for task in idle {
        drop(task.await.unwrap());
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let res = http
            .get(format!("http://{metrics}/metrics"))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        if res.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "no metrics\n{}", server.output());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = server.output();
    assert!(!output.contains("Too many open files"), "{output}");
    assert!(server.terminate().await.success(), "{}", server.output());
}

#[tokio::test]
async fn serve_refuses_bad_limit_settings_with_a_clear_message() {
    let db = pact_tests::db::fresh_database().await;
    let master_key = new_master_key().await;
    for (args, says) in [
        (
            vec!["--trusted-proxies", "proxy.example"],
            "trusted_proxies",
        ),
        (vec!["--rate-limit-pa", "fast"], "rate_limit_pa"),
        (vec!["--header-timeout", "0"], "header_timeout"),
    ] {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend(args);
        let out = run(pactd_serving(&db, &master_key), &all).await;
        assert!(out.failed().contains(says), "{}", out.describe());
    }
}

/// Issue 33, item 7: settings that start but cannot work are refused at
/// start, each with a message naming the setting: a public URL with a path
/// (the card would advertise `/pact/a2a/…`, which is a 404), an audience with
/// whitespace, durations beyond an hour (one near `u64::MAX` overflowed the
/// clock arithmetic), from a flag or the config file alike.
#[tokio::test]
async fn serve_refuses_a_public_url_with_a_path_an_audience_with_spaces_and_durations_out_of_bounds()
 {
    let db = pact_tests::db::fresh_database().await;
    let master_key = new_master_key().await;
    for (args, says) in [
        (
            vec!["--public-url", "http://localhost:27310/pact"],
            "has a path (\"/pact\")",
        ),
        (
            vec!["--public-url", "https://user:pw@shop.example"],
            "must be an origin only",
        ),
        (
            vec!["--audience", "aud with spaces"],
            "contains whitespace or a control character",
        ),
        (vec!["--audience", ""], "the audience must not be empty"),
        (
            vec!["--shutdown-grace", "99999999999999"],
            "shutdown_grace must be at most 3600 seconds, not 99999999999999",
        ),
        (
            vec!["--request-timeout", "3601"],
            "request_timeout must be at most 3600 seconds",
        ),
        (
            vec!["--header-timeout", "86400"],
            "header_timeout must be at most 3600 seconds",
        ),
        (
            vec!["--db-acquire-timeout", "100000"],
            "db_acquire_timeout must be at most 3600 seconds",
        ),
        (
            vec!["--db-wait", "100000"],
            "db_wait must be at most 3600 seconds",
        ),
    ] {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend(args);
        let out = run(pactd_serving(&db, &master_key), &all).await;
        let stderr = out.failed();
        assert!(stderr.contains(says), "{}", out.describe());
        assert!(!stderr.contains("pactd serving"), "{}", out.describe());
    }
    // The same from the config file.
    let scratch = Scratch::new("bad-config");
    let config = scratch.file("pactd.toml");
    std::fs::write(&config, "public_url = \"https://shop.example/pact/\"\n").unwrap();
    let out = run(
        pactd_serving(&db, &master_key),
        &[
            "--config",
            config.to_str().unwrap(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
    )
    .await;
    assert!(out.failed().contains("has a path"), "{}", out.describe());
    // An origin with a trailing slash is still an origin.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = Server::start(
        pactd_serving(&db, &master_key),
        &[
            "serve",
            "--listen",
            &listen,
            "--public-url",
            &format!("http://localhost:{port}/"),
        ],
        port,
        &scratch,
        "origin",
        SERVE_START_TIMEOUT,
    )
    .await;
    assert!(server.terminate().await.success(), "{}", server.output());
}

/// Issue 33, item 7: a fatal start error (here a metrics port in use, and an
/// SMTP URL that cannot be used) came after "pactd serving" and printed its
/// message twice ("mail: invalid SMTP URL …: invalid SMTP URL …"). It now
/// comes before any "serving" line, once, with its cause.
#[tokio::test]
async fn fatal_start_errors_come_before_serving_once_with_their_cause() {
    let db = pact_tests::db::fresh_database().await;
    let master_key = new_master_key().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let metrics = taken.local_addr().unwrap().to_string();
    for (args, says) in [
        (
            vec!["--metrics-listen", metrics.as_str()],
            // With its cause, the OS's word for it.
            format!("cannot listen on {metrics} for metrics: Address already in use"),
        ),
        (
            vec![
                "--smtp-url",
                "ftp://mail.example",
                "--mail-from",
                "shop@example.com",
            ],
            "invalid SMTP URL".to_owned(),
        ),
    ] {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend(args);
        let out = run(pactd_serving(&db, &master_key), &all).await;
        let stderr = out.failed();
        assert_eq!(stderr.matches(&says).count(), 1, "{}", out.describe());
        assert!(stderr.contains("error: "), "{}", out.describe());
        let all_output = format!("{}{}", out.stdout, stderr);
        assert!(!all_output.contains("pactd serving"), "{}", out.describe());
    }
    drop(taken);
}

/// Issue 33, item 6: `serve` exited after one pool timeout when PostgreSQL
/// was not up yet (a `compose restart`). It now retries with back-off up to
/// `--db-wait`, saying so in the log, and serves once the database accepts
/// connections; past the limit it gives up with a message saying how long it
/// waited.
#[tokio::test(flavor = "multi_thread")]
async fn serve_waits_for_a_postgresql_that_comes_up_late_and_gives_up_after_db_wait() {
    use pact_tests::tcp_proxy::TcpProxy;

    let db = pact_tests::db::fresh_database().await;
    let master_key = new_master_key().await;
    let proxy = TcpProxy::start(TcpProxy::target_of(&db)).await;
    let through_proxy = proxy.url_for(&db);
    // PostgreSQL is "down": connections to it are refused.
    proxy.unplug();

    // A short limit: given up, saying so, before serving.
    let out = run(
        pactd_serving(&through_proxy, &master_key),
        // Each attempt waits at most a second for its connection.
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--db-wait",
            "3",
            "--db-acquire-timeout",
            "1",
        ],
    )
    .await;
    let stderr = out.failed();
    assert!(
        stderr.contains("PostgreSQL is not reachable yet: waiting for it"),
        "{}",
        out.describe()
    );
    assert!(stderr.contains("gave up after"), "{}", out.describe());
    assert!(stderr.contains("db_wait is 3 s"), "{}", out.describe());
    assert!(!stderr.contains("pactd serving"), "{}", out.describe());

    // The default limit: the database comes up while pactd waits.
    let scratch = Scratch::new("db-wait");
    let stderr_file = scratch.file("late.stderr");
    let plug = tokio::spawn(async move {
        // Once pactd has said it waits, the database "comes up".
        while !read_lossy(&stderr_file).contains("waiting for it") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        proxy.plug_in();
        proxy
    });
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut server = Server::start(
        pactd_serving(&through_proxy, &master_key),
        &["serve", "--listen", &listen],
        port,
        &scratch,
        "late",
        SERVE_START_TIMEOUT,
    )
    .await;
    let _proxy = plug.await.unwrap();
    let log = server.stderr();
    let waited = log.find("waiting for it").unwrap();
    let reachable = log.find("PostgreSQL is reachable").expect(&log);
    let serving = log.find("pactd serving").expect(&log);
    assert!(waited < reachable && reachable < serving, "{log}");
    assert!(server.terminate().await.success(), "{}", server.output());
}

/// Issue 9 (item 7) and issue 16 (item 5): an account's end ends its grants.
/// Disabling signs it out and revokes every grant (a delegated turn and a
/// refresh are refused at once) and it answers sign-in like an unknown email;
/// enabling lets it sign in again; removing erases it while its receipts stay
/// verifiable; a new password can be set from standard input.
#[tokio::test(flavor = "multi_thread")]
async fn disabling_or_removing_an_account_revokes_its_grants_and_stops_its_sign_in() {
    use pact_tests::pages::{Browser, add_user};

    let app = pact_tests::TestApp::spawn().await;
    app.enable_demo_delegation().await;
    let db = app.db_url.clone();
    let pa = app.registered_pa("https://pa.lifecycle.test").await;
    let ann = add_user(&app, "demo", "ann@example.com", "correct horse battery").await;
    let tokens = app
        .connect(&pa, "pa-ann", &ann.subject(), &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_owned();
    let pa_jwt = pa.token("pa-ann", app.audience());
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m1", "show my orders", None)
        .await;
    assert_eq!(res.status(), 200);

    // Signed in, in a browser.
    let b = Browser::new(&app);
    let res = b
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/account",
        )
        .await;
    assert_eq!(res.status(), 303);

    let disabled = run(
        pactd_on(&db),
        &["user", "disable", "demo", "ann@example.com"],
    )
    .await;
    assert!(
        disabled.succeeded().contains("1 grant(s) revoked"),
        "{}",
        disabled.describe()
    );
    // The next delegated turn and refresh are refused.
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m2", "show my orders", None)
        .await;
    assert_eq!(res.status(), 401);
    let (status, _) = app.refresh(&pa, "pa-ann", &refresh).await;
    assert_eq!(status, 400);
    // The browser is signed out; the right password answers like an unknown email.
    let res = b.get("/account").await;
    assert_ne!(res.status(), 200);
    let right = Browser::new(&app)
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/account",
        )
        .await;
    let unknown = Browser::new(&app)
        .sign_in(
            "demo",
            "nobody@example.com",
            "correct horse battery",
            "/account",
        )
        .await;
    assert_eq!(right.status(), 400);
    assert_eq!(unknown.status(), 400);
    let listed = run(pactd_on(&db), &["user", "list", "--brand", "demo"]).await;
    assert!(
        listed.succeeded().contains("disabled-since"),
        "{}",
        listed.describe()
    );

    // Enabled again: signs in; the revoked grant stays revoked.
    run(
        pactd_on(&db),
        &["user", "enable", "demo", "ann@example.com"],
    )
    .await
    .succeeded();
    let before_change = Browser::new(&app);
    let res = before_change
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/account",
        )
        .await;
    assert_eq!(res.status(), 303);
    assert_eq!(before_change.get("/account").await.status(), 200);
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m3", "show my orders", None)
        .await;
    assert_eq!(res.status(), 401);
    // A reset link mailed before the operator sets a password.
    let link_hash = [7u8; 32];
    let at = time::OffsetDateTime::now_utc();
    pact_db::password_resets::insert(
        &app.db,
        &link_hash,
        ann.id,
        at,
        at + time::Duration::minutes(30),
        None,
    )
    .await
    .unwrap();

    // A new password, from standard input: whoever was signed in with the old
    // one is signed out, and the earlier reset link no longer works.
    let set = run_with_stdin(
        &db,
        &["user", "set-password", "demo", "ann@example.com"],
        "a brand new long password\n",
    )
    .await;
    assert!(set.succeeded().contains("changed"), "{}", set.describe());
    assert_ne!(before_change.get("/account").await.status(), 200);
    assert_eq!(
        pact_db::password_resets::live_user(&app.db, &link_hash, time::OffsetDateTime::now_utc())
            .await
            .unwrap(),
        None
    );
    let old = Browser::new(&app)
        .sign_in(
            "demo",
            "ann@example.com",
            "correct horse battery",
            "/account",
        )
        .await;
    assert_eq!(old.status(), 400);
    let new = Browser::new(&app)
        .sign_in(
            "demo",
            "ann@example.com",
            "a brand new long password",
            "/account",
        )
        .await;
    assert_eq!(new.status(), 303);

    // Removed: a second grant is revoked, the account is gone, receipts still verify.
    let tokens = app
        .connect(&pa, "pa-ann", &ann.subject(), &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m4", "show my orders", None)
        .await;
    assert_eq!(res.status(), 200);
    let removed = run(
        pactd_on(&db),
        &["user", "remove", "demo", "ann@example.com"],
    )
    .await;
    assert!(
        removed.succeeded().contains("1 grant(s) revoked"),
        "{}",
        removed.describe()
    );
    let res = app
        .send_delegated("demo", &pa_jwt, &access, "m5", "show my orders", None)
        .await;
    assert_eq!(res.status(), 401);
    assert!(
        pact_db::users::find(&app.db, ann.id)
            .await
            .unwrap()
            .is_none(),
        "the account is erased"
    );
    let sessions: i64 = sqlx::query_scalar("select count(*) from sessions where user_id = $1")
        .bind(ann.id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
    let mut verify = pactd_on(&db);
    verify.env("PACTD_MASTER_KEY", app.master_key.to_base64());
    let verified = run(verify, &["receipts", "verify"]).await;
    verified.succeeded();
    let gone = run(
        pactd_on(&db),
        &["user", "disable", "demo", "ann@example.com"],
    )
    .await;
    assert!(gone.failed().contains("no account"), "{}", gone.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_own_rate_limits_are_set_kept_and_cleared() {
    let db = pact_tests::db::fresh_database().await;
    let issuer = "https://big.pa.example";
    let add = |extra: &'static [&'static str]| {
        let db = db.clone();
        async move {
            let mut args = vec![
                "agent",
                "add",
                "--issuer",
                issuer,
                "--jwks-uri",
                "https://big.pa.example/jwks.json",
            ];
            args.extend_from_slice(extra);
            run(pactd_on(&db), &args).await
        }
    };
    add(&["--rate-limit-pa", "2000,4000", "--rate-limit-user", "20,60"])
        .await
        .succeeded();
    let pool = pact_db::connect(&db, 1).await.unwrap();
    let limits = |a: pact_db::agents::Agent| (a.pa_limit(), a.user_limit());
    let big = |rate, burst| Some(pact_db::agents::AgentLimit { rate, burst });
    let stored = pact_db::agents::find(&pool, issuer).await.unwrap().unwrap();
    assert_eq!(limits(stored), (big(2000.0, 4000.0), big(20.0, 60.0)));

    // Re-registering without the flags keeps them; `agent limits` replaces both.
    add(&[]).await.succeeded();
    let stored = pact_db::agents::find(&pool, issuer).await.unwrap().unwrap();
    assert_eq!(limits(stored), (big(2000.0, 4000.0), big(20.0, 60.0)));
    run(
        pactd_on(&db),
        &[
            "agent",
            "limits",
            "--issuer",
            issuer,
            "--rate-limit-pa",
            "500,900",
        ],
    )
    .await
    .succeeded();
    let stored = pact_db::agents::find(&pool, issuer).await.unwrap().unwrap();
    assert_eq!(limits(stored), (big(500.0, 900.0), None));

    let bad = add(&["--rate-limit-pa", "lots"]).await;
    assert!(
        bad.failed().contains("--rate-limit-pa"),
        "{}",
        bad.describe()
    );
    let unknown = run(
        pactd_on(&db),
        &["agent", "limits", "--issuer", "https://unknown.example"],
    )
    .await;
    assert!(
        unknown.failed().contains("unknown.example"),
        "{}",
        unknown.describe()
    );
}

/// `brand set --login-oidc-*`: bad settings refused, the secret sealed (never
/// printed), the mode left with `--no-external-login`; `grants revoke-user`
/// revokes every grant of one person at a brand, which the running node
/// refuses at once, and ends their sessions there.
#[tokio::test(flavor = "multi_thread")]
async fn brand_login_oidc_is_set_sealed_and_left_and_revoke_user_ends_a_persons_access() {
    let app = pact_tests::TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    let db = app.db_url.clone();
    let key = app.master_key.to_base64();
    let dir = Scratch::new("oidc");
    let secret_path = dir.file("secret");
    std::fs::write(&secret_path, "oidc-secret-9b7e\n").unwrap();
    let secret = secret_path.to_str().unwrap();
    let base = |issuer: &'static str| {
        vec![
            "brand",
            "set",
            "demo",
            "--login-oidc-issuer",
            issuer,
            "--login-oidc-client-id",
            "pactd",
        ]
    };

    for (extra, issuer, says) in [
        (vec![], "http://id.shop.example", "use https"),
        (vec![], "https://id.shop.example?x=1", "no query"),
        (
            vec!["--login-oidc-scope", "email profile"],
            "https://id.shop.example",
            "must include openid",
        ),
        (
            vec!["--user-claim", "two words"],
            "https://id.shop.example",
            "invalid --user-claim",
        ),
        // Issue 28, finding 7: a claim the person edits cannot name them.
        (
            vec!["--user-claim", "preferred_username"],
            "https://id.shop.example",
            "cannot be the user claim",
        ),
    ] {
        let mut args = base(issuer);
        args.extend(["--login-oidc-client-secret-file", secret]);
        args.extend(extra);
        let out = run(pactd_serving(&db, &key), &args).await;
        assert!(out.failed().contains(says), "{}", out.describe());
    }
    let no_secret = run(pactd_serving(&db, &key), &base("https://id.shop.example")).await;
    assert!(
        no_secret
            .failed()
            .contains("--login-oidc-client-secret-file"),
        "{}",
        no_secret.describe()
    );
    assert!(
        pact_db::brand_oidc::find(&app.db, &pact_tests::brand_id("demo"))
            .await
            .unwrap()
            .is_none()
    );

    let mut args = base("https://id.shop.example");
    args.extend([
        "--login-oidc-client-secret-file",
        secret,
        "--login-oidc-scope",
        "openid  email",
        "--user-claim",
        "email",
        "--mfa-acr",
        "urn:shop:mfa",
        "--mfa-acr",
        "urn:shop:hwk",
    ]);
    let out = run(pactd_serving(&db, &key), &args).await;
    let said = out.succeeded();
    assert!(said.contains("/oidc/demo/callback"), "{}", out.describe());
    assert!(!said.contains("oidc-secret-9b7e") && !out.stderr.contains("oidc-secret-9b7e"));
    let row = pact_db::brand_oidc::find(&app.db, &pact_tests::brand_id("demo"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.scope, "openid email");
    assert_eq!(row.user_claim, "email");
    assert_eq!(row.mfa_acr, ["urn:shop:mfa", "urn:shop:hwk"]);
    assert_eq!(row.client_auth, "client_secret_basic");
    let sealed = row.client_secret_sealed.clone().unwrap();
    assert!(!sealed.windows(16).any(|w| w == b"oidc-secret-9b7e"));
    let opened = app
        .master_key
        .open(
            &sealed,
            &pact_db::brand_oidc::client_secret_aad(&pact_tests::brand_id("demo")),
        )
        .unwrap();
    assert_eq!(opened, b"oidc-secret-9b7e");
    // Sealed for this brand: it does not open as another brand's.
    assert!(
        app.master_key
            .open(
                &sealed,
                &pact_db::brand_oidc::client_secret_aad(&pact_tests::brand_id("other"))
            )
            .is_err()
    );

    // private_key_jwt: no secret (one given is refused, not stored), the
    // assertion's audience chosen, the jwks_uri to register printed.
    let mut args = base("https://id.shop.example");
    args.extend([
        "--login-oidc-client-auth",
        "private_key_jwt",
        "--login-oidc-client-secret-file",
        secret,
    ]);
    let out = run(pactd_serving(&db, &key), &args).await;
    assert!(
        out.failed().contains("not used with private_key_jwt"),
        "{}",
        out.describe()
    );
    let mut args = base("https://id.shop.example");
    args.extend([
        "--login-oidc-assertion-aud",
        "issuer",
        "--login-oidc-client-secret-file",
        secret,
    ]);
    let out = run(pactd_serving(&db, &key), &args).await;
    assert!(
        out.failed().contains("private_key_jwt only"),
        "{}",
        out.describe()
    );
    // A session signed in under the names `email` gave: it ends when the
    // claim that names people changes (to `sub` here), and one signed in
    // under the current names outlives a change of anything else.
    let signed_in = |name: &'static str| {
        let db = app.db.clone();
        async move {
            let (_, hash) = pact_server::domain::secrets::new_secret();
            let (csrf, _) = pact_server::domain::secrets::new_secret();
            pact_db::sessions::insert(
                &db,
                &hash,
                &csrf,
                &pact_db::sessions::SessionState {
                    brand_id: Some(pact_tests::brand_id("demo")),
                    external_sub: Some(name.to_owned()),
                    ..Default::default()
                },
                time::OffsetDateTime::now_utc() + time::Duration::hours(1),
            )
            .await
            .unwrap();
        }
    };
    let external_sessions = || {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "select count(*) from sessions where external_sub is not null",
            )
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    signed_in("ann@shop.example").await;
    // An agent's grant given under a name `email` gave, and one given to an
    // account of pactd's own: only the first is revoked when the claim
    // changes (under `sub`, "ann@shop.example" may be someone else's name).
    app.enable_demo_delegation().await;
    let renamed_pa = app.registered_pa("https://pa.example/renamed").await;
    app.connect(&renamed_pa, "pa-r", "ann@shop.example", &["orders:read"])
        .await;
    let own = pact_tests::pages::add_user(&app, "demo", "own@shop.example", "Pw-own-123456").await;
    app.connect(&renamed_pa, "pa-s", &own.id.to_string(), &["orders:read"])
        .await;
    let live_grants = || {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "select user_sub from grants where revoked_at is null order by user_sub",
            )
            .fetch_all(&db)
            .await
            .unwrap()
        }
    };
    assert_eq!(live_grants().await.len(), 2);
    let mut args = base("https://id.shop.example");
    args.extend([
        "--login-oidc-client-auth",
        "private_key_jwt",
        "--login-oidc-assertion-aud",
        "issuer",
    ]);
    let out = run(pactd_serving(&db, &key), &args).await;
    assert!(
        out.succeeded().contains("/a2a/demo/oauth/jwks.json"),
        "{}",
        out.describe()
    );
    assert!(
        out.stdout
            .contains("1 agent grant(s) given under the old sign-in's names revoked"),
        "{}",
        out.describe()
    );
    assert_eq!(
        external_sessions().await,
        0,
        "the claim changed: signed out"
    );
    assert_eq!(
        live_grants().await,
        vec![own.id.to_string()],
        "the claim changed: the grant under the old name is revoked, the account's kept"
    );
    let reason = sqlx::query_scalar::<_, String>(
        "select revoked_reason from grants where user_sub = 'ann@shop.example'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(reason, pact_db::grants::reason::SIGN_IN_CHANGED);
    signed_in("a1b2c3").await;
    run(pactd_serving(&db, &key), &args).await.succeeded();
    assert_eq!(external_sessions().await, 1, "same provider, same claim");
    let row = pact_db::brand_oidc::find(&app.db, &pact_tests::brand_id("demo"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.client_auth, "private_key_jwt");
    assert_eq!(row.assertion_aud, "issuer");
    assert!(row.client_secret_sealed.is_none());
    run(
        pactd_on(&db),
        &["brand", "set", "demo", "--no-external-login"],
    )
    .await
    .succeeded();
    assert!(
        pact_db::brand_oidc::find(&app.db, &pact_tests::brand_id("demo"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        external_sessions().await,
        0,
        "the provider is gone: signed out"
    );

    // revoke-user: two grants of one person (two agents), one of someone else.
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example/one").await;
    let pa2 = app.registered_pa("https://pa.example/two").await;
    let gone = app
        .connect(&pa, "pa-u", "shop-user-1", &["orders:read"])
        .await;
    app.connect(&pa2, "pa-u", "shop-user-1", &["orders:read"])
        .await;
    let kept = app
        .connect(&pa, "pa-v", "shop-user-2", &["orders:read"])
        .await;
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    drop(raw);
    pact_db::sessions::insert(
        &app.db,
        &hash,
        "csrf",
        &pact_db::sessions::SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            external_sub: Some("shop-user-1".into()),
            ..Default::default()
        },
        time::OffsetDateTime::now_utc() + time::Duration::hours(1),
    )
    .await
    .unwrap();

    let out = run(
        pactd_on(&db),
        &["grants", "revoke-user", "demo", "shop-user-1"],
    )
    .await;
    assert!(
        out.succeeded()
            .contains("revoked 2 grant(s) of \"shop-user-1\" and ended 1 session(s)"),
        "{}",
        out.describe()
    );
    let send = |pa: &TestPa, sub: &'static str, tokens: &Value, id: &'static str| {
        let token = tokens["access_token"].as_str().unwrap().to_owned();
        let pa_jwt = pa.token(sub, app.audience());
        let app = &app;
        async move {
            app.send_delegated("demo", &pa_jwt, &token, id, "my orders", None)
                .await
                .status()
        }
    };
    assert_eq!(send(&pa, "pa-u", &gone, "m1").await, 401);
    assert_eq!(send(&pa, "pa-v", &kept, "m2").await, 200);
    let sessions: i64 = sqlx::query_scalar("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
    let unknown = run(
        pactd_on(&db),
        &["grants", "revoke-user", "nope", "shop-user-1"],
    )
    .await;
    assert!(
        unknown.failed().contains("unknown brand"),
        "{}",
        unknown.describe()
    );
}
