//! A load generator for pactd (see docs/performance.md).
//!
//! ```text
//! cargo build --release -p pactd
//! cargo run --release -p pact-tests --example load -- [--seconds N] [--concurrency C]
//! ```
//!
//! It starts the release `pactd serve` as a separate process on a fresh
//! database (the test harness's throwaway PostgreSQL, or `DATABASE_URL`'s
//! server), registers in-process test personal agents, and measures:
//!
//! * identity `message:send` ("When are you open?", a new conversation per request);
//! * the token endpoint while authorizations are pending (`authorization_pending`
//!   / `slow_down`), after creating them through `device_authorization`;
//! * delegated `message:send` ("Show me my orders") with a delegation token,
//!   whose replies carry a signed, chained receipt;
//! * delegated `message:send` that needs a scope the grant lacks: the reply is
//!   an `auth-required` step-up task with its device authorization;
//! * the token endpoint's `refresh_token` grant, with rotation;
//! * the same turns at a merchant's own agent (`load/merchant.rs`, a webhook
//!   agent in this process) with one tool call each through pactd's gateway:
//!   the JSON route, the MCP face (a session per turn, and the brand's shared
//!   session), delegated, and delegated with a consumed limit (a count the
//!   gateway charges before it forwards the call).
//!
//! Rate limits (per node, in memory): 200 req/s (burst 400) per PA platform and
//! 10 req/s (burst 30) per `(PA, sub)`. To measure the server rather than the
//! limiter, the load is spread over several registered PAs (`--pas`, default
//! one per worker) and each worker rotates through its own pool of `sub`s
//! (`--subs`). A `429` is counted separately, never as a success.
//!
//! Besides latency it samples CPU time from `/proc`: the pactd process, the
//! PostgreSQL backends serving this database, and this process — so a figure
//! on a small shared machine can be read for what it is. Only 127.0.0.1 traffic.
#![allow(clippy::disallowed_methods)] // test set-up writes rows at real times
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "load/merchant.rs"]
mod merchant;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use pact_crypto::MasterKey;
use pact_server::{AppState, Config};
use pact_tests::TestPa;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

/// A PA-JWT is reused for this long (it lives 120 s).
const TOKEN_REUSE: Duration = Duration::from_secs(60);
/// Hard cap on requests per worker in a timed phase (the loops are bounded).
const MAX_REQUESTS_PER_WORKER: u64 = 20_000_000;
/// Every this many requests a worker parses and checks the reply in full.
const CHECK_EVERY: u64 = 64;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

const USAGE: &str = "\
usage: load [--seconds N] [--concurrency C] [--pas P] [--subs S]
            [--device-codes K] [--sequential R] [--prefill N] [--markdown FILE]

  --seconds N        duration of each timed phase [10]
  --concurrency C    concurrent workers [16]
  --pas P            registered test PAs the workers are spread over [C]
                     (the limiter allows 200 req/s per PA platform)
  --subs S           PA-JWT subs each worker rotates through [64]
                     (the limiter allows 10 req/s per (PA, sub))
  --device-codes K   pending device authorizations to poll [500]
  --sequential R     requests in each sequential (concurrency 1) run [500]
  --prefill N        before the phases, store N old device authorizations and
                     N old receipts (of N/100 expired grants), to show that no
                     request's cost grows with the tables [0]
  --markdown FILE    also write the results table (markdown) to FILE
  --spray N          also measure open admission under a spray: identity turns
                     of a registered agent at a steady 1,000/s over C/2
                     workers, quietly, then while N
                     requests with random unknown issuers are sent to a brand
                     whose policy is open, spread over the phase (issue 31);
                     reports the discoveries and the rows they caused [0: skip]
  --fresh-pa-jwt yes|no  a new PA-JWT on every request instead of reusing
                     each for a minute as a PA may [no]
  --phases all|turns turns: only the message:send phases, the built-in demo
                     agent's and the merchant's own (webhook agent, JSON and
                     MCP tool calls, delegated), side by side [all]

Needs the release pactd: cargo build --release -p pactd (or PACTD_BIN=path).";

#[derive(Clone, Debug)]
struct Args {
    seconds: u64,
    concurrency: usize,
    pas: usize,
    subs: usize,
    device_codes: usize,
    sequential: usize,
    prefill: u64,
    markdown: Option<PathBuf>,
    /// Only the turn phases: demo agent and the merchant's own, side by side.
    turns_only: bool,
    /// A new PA-JWT (new `jti`, new signature to check) on every request.
    fresh_jwt: bool,
    /// Requests with random unknown issuers sent during the spray phase.
    spray: u64,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut a = Args {
        seconds: 10,
        concurrency: 16,
        pas: 0,
        subs: 64,
        device_codes: 500,
        sequential: 500,
        prefill: 0,
        markdown: None,
        turns_only: false,
        spray: 0,
        fresh_jwt: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value\n\n{USAGE}"))?;
        let num = || -> anyhow::Result<u64> {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| format!("{flag}: expected a positive integer, got {value:?}"))
        };
        match flag.as_str() {
            "--seconds" => a.seconds = num()?,
            "--concurrency" => a.concurrency = usize::try_from(num()?)?,
            "--pas" => a.pas = usize::try_from(num()?)?,
            "--subs" => a.subs = usize::try_from(num()?)?,
            "--device-codes" => a.device_codes = usize::try_from(num()?)?,
            "--sequential" => a.sequential = usize::try_from(num()?)?,
            "--prefill" => a.prefill = num()?,
            "--spray" => a.spray = num()?.min(1_000_000),
            "--markdown" => a.markdown = Some(PathBuf::from(value)),
            "--fresh-pa-jwt" => match value.as_str() {
                "yes" => a.fresh_jwt = true,
                "no" => a.fresh_jwt = false,
                _ => bail!("--fresh-pa-jwt: yes or no, got {value:?}"),
            },
            "--phases" => match value.as_str() {
                "all" => a.turns_only = false,
                "turns" => a.turns_only = true,
                _ => bail!("--phases: all or turns, got {value:?}"),
            },
            _ => bail!("unknown argument {flag:?}\n\n{USAGE}"),
        }
    }
    ensure!(a.concurrency <= 1024, "--concurrency is at most 1024");
    ensure!(a.seconds <= 3600, "--seconds is at most 3600");
    if a.pas == 0 {
        a.pas = a.concurrency;
    }
    Ok(a)
}

// ---------------------------------------------------------------------------
// History: the tables as a server that has run for a while holds them.

/// Stores `n` device authorizations as a busy hour leaves them (housekeeping
/// removes what was decided or expired over an hour ago, so a full table is a
/// recent one): a third pending with live user codes, the rest decided half
/// an hour ago, every tenth a step-up one, spread over the PAs. Also `n` old
/// receipts in chains of 100 on `n / 100` expired grants, each with its
/// conversation. The receipts bypass the receipt log's queue (its trigger is
/// off during the insert): the log is the tree-head job's business, not a
/// request's, and a million queued leaves would have that job working
/// through them during the phases.
///
/// It runs on a connection of its own, closed at the end: the CPU probe reads
/// the backends of the database, and one that did this work must not be
/// counted as a phase's.
async fn prefill(db_url: &str, issuers: &[String], n: u64) -> anyhow::Result<()> {
    use sqlx::Connection as _;
    let n = i64::try_from(n)?;
    let grants = (n / 100).max(1);
    let mut conn = sqlx::PgConnection::connect(db_url).await?;
    let mut tx = conn.begin().await?;
    sqlx::query(
        "insert into device_authorizations (id, brand_id, pa_issuer, pa_sub, device_code_hash, \
             user_code, scopes, status, interval_secs, last_polled_at, expires_at, created_at, \
             origin, decided_at, user_sub) \
         select gen_random_uuid(), 'demo', ($1::text[])[1 + i % cardinality($1::text[])], \
             'old-' || (i % 5000), sha256(('prefill-' || i)::bytea), \
             (select string_agg(substr('BCDFGHJKLMNPQRSTVWXZ', \
                 1 + ((i / power(20, k)::bigint) % 20)::int, 1), '' order by k) \
              from generate_series(0, 7) k), \
             array['orders:read'], (array['redeemed', 'denied', 'pending'])[1 + i % 3], 5, \
             now() - interval '30 minutes', now() + interval '2 hours', \
             now() - interval '35 minutes', \
             case when i % 10 = 0 then 'step_up' else 'client' end, \
             case when i % 3 = 2 then null else now() - interval '30 minutes' end, \
             'old-user-' || (i % 5000) \
         from generate_series(1, $2::bigint) i",
    )
    .bind(issuers)
    .bind(n)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into grants (id, brand_id, pa_issuer, user_sub, scopes, created_at, expires_at) \
         select ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'demo', \
             ($1::text[])[1 + g % cardinality($1::text[])], 'old-user-' || g, \
             array['orders:read'], now() - interval '40 days', now() - interval '10 days' \
         from generate_series(1, $2::bigint) g",
    )
    .bind(issuers)
    .bind(grants)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into conversations (id, brand_id, pa_issuer, pa_sub, user_sub) \
         select id, brand_id, pa_issuer, 'old-pa-user', user_sub from grants \
         where user_sub like 'old-user-%'",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query("alter table receipts disable trigger receipts_log_pending")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "insert into receipts (grant_id, seq, conversation_id, message_id, jws, claims, created_at) \
         select g.id, s, g.id, 'old-' || s, \
             'eyJhbGciOiJFUzI1NiJ9.' || encode(sha256((g.id::text || s)::bytea), 'hex') || '.sig', \
             jsonb_build_object('seq', s, 'grant', g.id), now() - interval '20 days' \
         from grants g, generate_series(1, 100) s where g.user_sub like 'old-user-%' \
         limit $1",
    )
    .bind(n)
    .execute(&mut *tx)
    .await?;
    sqlx::query("alter table receipts enable trigger receipts_log_pending")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    // Vacuumed and analysed now, so that autovacuum does not start on a
    // million new rows during the phases (its CPU would be counted as theirs).
    for table in [
        "device_authorizations",
        "grants",
        "conversations",
        "receipts",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(format!("vacuum (analyze) {table}")))
            .execute(&mut conn)
            .await?;
    }
    // And written out: a checkpoint of the million rows' WAL would otherwise
    // compete with the phases' commit flushes (needs a superuser; skipped
    // when the role is not one).
    if let Err(e) = sqlx::query("checkpoint").execute(&mut conn).await {
        eprintln!("note: no checkpoint after the prefill ({e})");
    }
    conn.close().await?;
    Ok(())
}

// ---------------------------------------------------------------------------
// The pactd process.

/// The release binary next to this example's target directory, or `PACTD_BIN`.
fn pactd_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("PACTD_BIN") {
        let path = PathBuf::from(path);
        ensure!(
            path.is_file(),
            "PACTD_BIN={} does not exist",
            path.display()
        );
        return Ok(path);
    }
    // This example runs from <target>/<profile>/examples/load.
    let exe = std::env::current_exe().context("cannot locate this executable")?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("release").join("pactd");
    if !path.is_file() {
        bail!(
            "the release pactd binary is missing at {}.\n\
             Build it first:  cargo build --release -p pactd\n\
             (or point PACTD_BIN at a pactd binary)",
            path.display()
        );
    }
    Ok(path)
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

struct Pactd {
    bin: PathBuf,
    env: Vec<(&'static str, String)>,
    child: tokio::process::Child,
    pid: u32,
    addr: SocketAddr,
    base_url: String,
    /// The metrics listener's `/metrics`.
    metrics_url: String,
    log: PathBuf,
}

/// Settings that would change what we measure if inherited from the shell.
const SCRUBBED_ENV: [&str; 7] = [
    "PACTD_CONFIG",
    "PACTD_MASTER_KEY_FILE",
    "PACTD_PUBLIC_URL",
    "PACTD_AUDIENCE",
    "PACTD_LISTEN",
    "PACTD_NO_MIGRATE",
    "PACTD_LOG_FORMAT",
];

impl Pactd {
    async fn start(bin: PathBuf, db_url: &str, master: &MasterKey) -> anyhow::Result<Self> {
        let port = free_port()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let metrics_port = free_port()?;
        let env = vec![
            ("PACTD_METRICS_LISTEN", format!("127.0.0.1:{metrics_port}")),
            ("DATABASE_URL", db_url.to_owned()),
            ("PACTD_MASTER_KEY", master.to_base64()),
            ("PACTD_ALLOW_LOOPBACK_JWKS", "true".to_owned()),
            ("RUST_LOG", "warn".to_owned()),
        ];
        let log = std::env::temp_dir().join(format!("pactd-load-{port}.log"));
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.args(["serve", "--listen", &addr.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true);
        for k in SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let pid = child.id().context("pactd exited at once")?;
        let mut me = Self {
            bin,
            env,
            child,
            pid,
            addr,
            base_url: format!("http://{addr}"),
            metrics_url: format!("http://127.0.0.1:{metrics_port}/metrics"),
            log,
        };
        me.wait_ready().await?;
        Ok(me)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let http = pact_jose::with_shared_tls(reqwest::Client::builder())
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()?;
        let url = format!("{}/readyz", self.base_url);
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "pactd exited during start-up ({status}):\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            if let Ok(res) = http.get(&url).send().await
                && res.status() == 200
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "pactd was not ready within 30 s (log: {})",
            self.log.display()
        )
    }

    /// Runs an admin command with the server's environment.
    async fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args).stdin(Stdio::null());
        for k in SCRUBBED_ENV {
            cmd.env_remove(k);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (*k, v.as_str())));
        let out = cmd.output().await?;
        ensure!(
            out.status.success(),
            "pactd {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// SIGTERM, then wait (graceful shutdown); SIGKILL after 20 s.
    async fn stop(mut self) -> anyhow::Result<String> {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        if !sent.is_ok_and(|s| s.success()) {
            self.child.kill().await?;
            return Ok("killed (SIGTERM could not be sent)".to_owned());
        }
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(status) => Ok(format!("stopped on SIGTERM: {}", status?)),
            Err(_) => {
                self.child.kill().await?;
                Ok("did not stop within 20 s of SIGTERM; killed".to_owned())
            }
        }
    }
}

// ---------------------------------------------------------------------------
// CPU accounting from /proc.

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (all its threads), in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name start at field 3 (state).
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".to_owned())
}

#[derive(Clone, Default)]
struct CpuSnap {
    pactd: Option<u64>,
    me: Option<u64>,
    /// PostgreSQL backend pid → ticks, for the backends on our database.
    pg: HashMap<i32, u64>,
}

#[derive(Clone, Copy, Default)]
struct CpuUse {
    pactd: Option<f64>,
    pg: Option<f64>,
    me: Option<f64>,
}

struct CpuProbe {
    pactd_pid: String,
    pool: sqlx::PgPool,
    ticks: f64,
}

impl CpuProbe {
    async fn snap(&self) -> CpuSnap {
        let pids: Vec<i32> = sqlx::query_scalar(
            "select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()",
        )
        .fetch_all(&self.pool)
        .await
        .unwrap_or_default();
        CpuSnap {
            pactd: cpu_ticks(&self.pactd_pid),
            me: cpu_ticks("self"),
            pg: pids
                .into_iter()
                .filter_map(|p| cpu_ticks(&p.to_string()).map(|t| (p, t)))
                .collect(),
        }
    }

    fn delta(&self, a: &CpuSnap, b: &CpuSnap) -> CpuUse {
        let secs = |x: Option<u64>, y: Option<u64>| Some(y?.saturating_sub(x?) as f64 / self.ticks);
        // Backends are the pool's long-lived connections; a new one starts at 0.
        let pg = (!b.pg.is_empty()).then(|| {
            b.pg.iter()
                .map(|(pid, t)| t.saturating_sub(a.pg.get(pid).copied().unwrap_or(0)))
                .sum::<u64>() as f64
                / self.ticks
        });
        CpuUse {
            pactd: secs(a.pactd, b.pactd),
            pg,
            me: secs(a.me, b.me),
        }
    }
}

// ---------------------------------------------------------------------------
// Phases.

enum Outcome {
    Ok,
    /// A success of the kind the scenario expects (e.g. `authorization_pending`).
    Expected(&'static str),
    Limited,
    Error(String, String),
}

#[derive(Clone, Copy)]
enum Plan {
    /// Each worker runs until the deadline.
    For(Duration),
    /// This many requests in all, shared among the workers.
    Requests(usize),
    /// Until the deadline at a fixed total rate (requests per second), each
    /// request sent at its due time and timed from there: the latency of a
    /// steady load, which a closed loop at full speed cannot show.
    Paced(Duration, u32),
}

#[derive(Default)]
struct Tally {
    lat_us: Vec<u32>,
    limited: usize,
    expected: BTreeMap<&'static str, usize>,
    errors: BTreeMap<String, (usize, String)>,
}

impl Tally {
    fn record(&mut self, outcome: Outcome, took: Duration) {
        let us = u32::try_from(took.as_micros()).unwrap_or(u32::MAX);
        match outcome {
            Outcome::Ok => self.lat_us.push(us),
            Outcome::Expected(kind) => {
                self.lat_us.push(us);
                *self.expected.entry(kind).or_default() += 1;
            }
            Outcome::Limited => self.limited += 1,
            Outcome::Error(kind, sample) => {
                let e = self.errors.entry(kind).or_insert((0, sample));
                e.0 += 1;
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        self.lat_us.extend(other.lat_us);
        self.limited += other.limited;
        for (k, n) in other.expected {
            *self.expected.entry(k).or_default() += n;
        }
        for (k, (n, sample)) in other.errors {
            self.errors.entry(k).or_insert((0, sample)).0 += n;
        }
    }
}

struct PhaseResult {
    name: String,
    concurrency: usize,
    wall: Duration,
    tally: Tally,
    cpu: CpuUse,
    load_after: String,
}

impl PhaseResult {
    fn answered(&self) -> usize {
        self.tally.lat_us.len()
    }
    fn errors(&self) -> usize {
        self.tally.errors.values().map(|(n, _)| n).sum()
    }
    fn total(&self) -> usize {
        self.answered() + self.tally.limited + self.errors()
    }
    fn rps(&self) -> f64 {
        self.answered() as f64 / self.wall.as_secs_f64()
    }
    fn percentile_ms(&self, q: f64) -> Option<f64> {
        let v = &self.tally.lat_us;
        if v.is_empty() {
            return None;
        }
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Some(f64::from(v[rank - 1]) / 1000.0)
    }
    fn cpu_per_req(&self, secs: Option<f64>) -> String {
        match secs {
            Some(s) if self.total() > 0 => format!("{:.0}", s * 1e6 / self.total() as f64),
            _ => "n/a".to_owned(),
        }
    }
}

async fn run_phase<F, Fut>(
    name: &str,
    concurrency: usize,
    plan: Plan,
    probe: &CpuProbe,
    f: F,
) -> PhaseResult
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    eprint!("  {name} ... ");
    let f = Arc::new(f);
    let next = Arc::new(AtomicUsize::new(0));
    let before = probe.snap().await;
    let start = Instant::now();
    let deadline = match plan {
        Plan::For(d) | Plan::Paced(d, _) => Some(start + d),
        Plan::Requests(_) => None,
    };
    // Paced: worker w sends its i-th request at start + (i·C + w) / rate.
    let gap = match plan {
        Plan::Paced(_, rate) => Some(Duration::from_secs(1).div_f64(f64::from(rate.max(1)))),
        _ => None,
    };
    let mut workers = Vec::with_capacity(concurrency);
    for w in 0..concurrency {
        let f = f.clone();
        let next = next.clone();
        workers.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            for i in 0..MAX_REQUESTS_PER_WORKER {
                // When paced, a request is timed from when it was due, so a
                // server that falls behind shows its queue in the latency.
                let mut due = None;
                let seq = match plan {
                    Plan::For(_) | Plan::Paced(..) => {
                        if let Some(gap) = gap {
                            let at = start + gap.mul_f64((i as usize * concurrency + w) as f64);
                            tokio::time::sleep_until(at.into()).await;
                            due = Some(at);
                        }
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            break;
                        }
                        i
                    }
                    Plan::Requests(n) => {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n {
                            break;
                        }
                        k as u64
                    }
                };
                let t = due.unwrap_or_else(Instant::now);
                let outcome = f(w, seq).await;
                tally.record(outcome, t.elapsed());
            }
            tally
        }));
    }
    let mut tally = Tally::default();
    for w in workers {
        tally.merge(w.await.expect("worker panicked"));
    }
    let wall = start.elapsed();
    let after = probe.snap().await;
    tally.lat_us.sort_unstable();
    let r = PhaseResult {
        name: name.to_owned(),
        concurrency,
        wall,
        tally,
        cpu: probe.delta(&before, &after),
        load_after: loadavg(),
    };
    eprintln!(
        "{} answered, {} limited, {} errors, {:.0} req/s",
        r.answered(),
        r.tally.limited,
        r.errors(),
        r.rps()
    );
    r
}

// ---------------------------------------------------------------------------
// Open admission under a spray of unknown issuers (issue 31).

/// The sum of the samples of `metric` whose labels contain `label` in a
/// Prometheus text exposition.
fn metric_sum(text: &str, metric: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The registered agent's steady load while the spray runs (and before it),
/// in requests per second: below what its rate limits allow (10 per second
/// for each of the workers' 64 subs), so that each request is answered and
/// the spray's effect on its latency is what the phases compare.
const SPRAY_BASELINE_RATE: u32 = 1_000;

#[allow(clippy::too_many_arguments)]
async fn spray_phases(
    results: &mut Vec<PhaseResult>,
    server: &Pactd,
    state: &AppState,
    pool: &sqlx::PgPool,
    ctx: &Arc<Ctx>,
    spray: u64,
    seconds: Duration,
    probe: &CpuProbe,
) -> anyhow::Result<()> {
    server
        .admin(&["brand", "add", "open-door", "--name", "Open door"])
        .await?;
    server
        .admin(&["brand", "set", "open-door", "--admission", "open"])
        .await?;
    let open_send = format!(
        "{}/message:send",
        state
            .config
            .interface_url(&pact_tests::brand_id("open-door"))
    );
    let workers = (ctx.pools.len() / 2).max(1);
    let identity = |ctx: Arc<Ctx>| {
        move |w: usize, seq: u64| {
            let ctx = ctx.clone();
            async move {
                let jwt = ctx.worker_jwt(w, seq);
                send_message(&ctx, &ctx.send_url, &jwt, None, "When are you open?", false).await
            }
        }
    };
    let agents = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from agents")
            .fetch_one(pool)
            .await
    };
    results.push(
        run_phase(
            "identity message:send, quiet (spray baseline)",
            workers,
            Plan::Paced(seconds, SPRAY_BASELINE_RATE),
            probe,
            identity(ctx.clone()),
        )
        .await,
    );
    let scrape = || async { ctx.http.get(&server.metrics_url).send().await?.text().await };
    // Every spray token is signed before the phase, so the load generator's
    // signing does not compete with pactd for the cores while it is measured.
    let senders = 8_u64;
    let per_sender = spray.div_ceil(senders);
    let tokens: Vec<Vec<String>> = (0..senders)
        .map(|s| {
            (0..per_sender)
                .map(|i| {
                    let iss = format!("https://s{s}-{i}-{}.spray.invalid", Uuid::new_v4().simple());
                    ctx.pas[0].token_with("spray", &ctx.audience, |_, c| c["iss"] = json!(iss))
                })
                .collect()
        })
        .collect();
    let rows_before = agents().await?;
    let metrics_before = scrape().await?;

    // The spray: `spray` requests, each with an issuer never seen (a random
    // name under .invalid, RFC 6761: it resolves nowhere), paced evenly over
    // the phase by 8 senders. A bounded loop, loopback only.
    let gap = seconds.div_f64(per_sender.max(1) as f64);
    let mut tasks = Vec::new();
    for jwts in tokens {
        let ctx = ctx.clone();
        let url = open_send.clone();
        tasks.push(tokio::spawn(async move {
            let (mut sent, mut refused) = (0_u64, 0_u64);
            let start = Instant::now();
            for (i, jwt) in jwts.iter().enumerate() {
                let due = start + gap.mul_f64(i as f64);
                tokio::time::sleep_until(due.into()).await;
                let body = json!({"message": {"messageId": Uuid::new_v4().to_string(),
                    "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
                if let Ok(res) = ctx
                    .http
                    .post(&url)
                    .bearer_auth(jwt)
                    .json(&body)
                    .send()
                    .await
                {
                    sent += 1;
                    refused += u64::from(res.status() == 401);
                }
            }
            (sent, refused, start.elapsed())
        }));
    }
    results.push(
        run_phase(
            "identity message:send, while unknown issuers spray",
            workers,
            Plan::Paced(seconds, SPRAY_BASELINE_RATE),
            probe,
            identity(ctx.clone()),
        )
        .await,
    );
    let (mut sent, mut refused, mut spray_took) = (0, 0, Duration::ZERO);
    for t in tasks {
        let (s, r, took) = t.await?;
        sent += s;
        refused += r;
        spray_took = spray_took.max(took);
    }
    let metrics_after = scrape().await?;
    let rows_after = agents().await?;
    let counted = |label: &str| {
        metric_sum(&metrics_after, "pactd_open_admission_total", label)
            - metric_sum(&metrics_before, "pactd_open_admission_total", label)
    };
    let discoveries = counted("reason=\"discovery\"") + counted("result=\"admitted\"");
    eprintln!(
        "  spray: {sent} requests with unknown issuers sent over {:.1} s, {refused} answered 401; \
         {discoveries:.0} discoveries attempted (≤ 2 fetches each), {:.0} refused by the budget, \
         {:.0} backing off; agents rows {rows_before} → {rows_after}",
        spray_took.as_secs_f64(),
        counted("reason=\"budget\""),
        counted("reason=\"backing_off\""),
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Requests.

/// One PA-JWT, re-signed when older than `TOKEN_REUSE`.
struct Slot {
    pa: usize,
    sub: String,
    minted: Mutex<(Instant, String)>,
}

struct Ctx {
    http: reqwest::Client,
    pas: Vec<TestPa>,
    audience: String,
    send_url: String,
    device_url: String,
    token_url: String,
    /// The brand answered by the merchant's own agent (`load/merchant.rs`).
    shop_send_url: String,
    shop_device_url: String,
    shop_token_url: String,
    /// Per worker, the PA-JWTs it rotates through (all of PA `w % pas`).
    pools: Vec<Vec<Slot>>,
    /// Per pending device authorization: its PA-JWT slot and its device code.
    pending: Vec<(Slot, String)>,
    /// Per worker, its delegation token.
    delegations: Vec<String>,
    /// Per worker, its delegation token at the merchant's brand.
    shop_delegations: Vec<String>,
    /// Per worker, a delegation token at the merchant's brand whose grant
    /// holds a consumed limit (a count of lookups, charged per call).
    shop_counted_delegations: Vec<String>,
    /// Per worker, the latest refresh token of its grant (rotated on each use).
    refresh: Vec<Mutex<String>>,
    poll_cursor: AtomicUsize,
    /// Mint a new PA-JWT for every request (`--fresh-pa-jwt yes`).
    fresh_jwt: bool,
}

impl Ctx {
    fn slot(&self, pa: usize, sub: String) -> Slot {
        let token = self.pas[pa].token(&sub, &self.audience);
        Slot {
            pa,
            sub,
            minted: Mutex::new((Instant::now(), token)),
        }
    }

    fn jwt(&self, slot: &Slot) -> String {
        if self.fresh_jwt {
            return self.pas[slot.pa].token(&slot.sub, &self.audience);
        }
        let mut m = slot.minted.lock().unwrap();
        if m.0.elapsed() >= TOKEN_REUSE {
            *m = (
                Instant::now(),
                self.pas[slot.pa].token(&slot.sub, &self.audience),
            );
        }
        m.1.clone()
    }

    fn worker_jwt(&self, w: usize, seq: u64) -> String {
        let pool = &self.pools[w];
        self.jwt(&pool[(seq % pool.len() as u64) as usize])
    }
}

fn error(kind: impl Into<String>, sample: impl Into<String>) -> Outcome {
    let mut sample: String = sample.into();
    sample.truncate(300);
    Outcome::Error(kind.into(), sample)
}

async fn send_message(
    ctx: &Ctx,
    url: &str,
    pa_jwt: &str,
    delegation: Option<&str>,
    text: &str,
    check: bool,
) -> Outcome {
    let body = json!({"message": {
        "messageId": Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }});
    let mut req = ctx.http.post(url).bearer_auth(pa_jwt).json(&body);
    if let Some(d) = delegation {
        req = req.header("X-A2A-User-Delegation", format!("Bearer {d}"));
    }
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) => return error("transport", e.to_string()),
    };
    let status = res.status().as_u16();
    let bytes = match res.bytes().await {
        Ok(b) => b,
        Err(e) => return error("transport (body)", e.to_string()),
    };
    match status {
        200 => {}
        429 => return Outcome::Limited,
        s => {
            return error(
                format!("HTTP {s}"),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
    }
    if check {
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let msg = &v["message"];
        if msg["role"] != "ROLE_AGENT" || !msg["parts"][0]["text"].is_string() {
            return error("bad reply", v.to_string());
        }
        if delegation.is_some() {
            let receipt = &msg["metadata"]["pact.receipt"];
            if !receipt["jws"].is_string() || !receipt["claims"]["grantId"].is_string() {
                return error("reply without pact.receipt", v.to_string());
            }
        }
    }
    Outcome::Ok
}

async fn oauth_post(
    ctx: &Ctx,
    url: &str,
    pa_jwt: &str,
    form: &[(&str, &str)],
) -> Result<(u16, Value), String> {
    let res = ctx
        .http
        .post(url)
        .bearer_auth(pa_jwt)
        .form(form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let bytes = res.bytes().await.map_err(|e| e.to_string())?;
    Ok((
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
    ))
}

/// A delegated turn that needs a scope the grant lacks: the reply must be an
/// `auth-required` task with its verification link.
async fn step_up_turn(ctx: &Ctx, w: usize, seq: u64) -> Outcome {
    let jwt = ctx.worker_jwt(w, seq);
    let body = json!({"message": {
        "messageId": Uuid::new_v4().to_string(),
        "role": "ROLE_USER",
        "parts": [{"text": "Please cancel DEMO-1234567"}],
    }});
    let res = ctx
        .http
        .post(&ctx.send_url)
        .bearer_auth(&jwt)
        .header(
            "X-A2A-User-Delegation",
            format!("Bearer {}", ctx.delegations[w]),
        )
        .json(&body)
        .send()
        .await;
    let res = match res {
        Ok(r) => r,
        Err(e) => return error("transport", e.to_string()),
    };
    let status = res.status().as_u16();
    let v: Value = match res.json().await {
        Ok(v) => v,
        Err(e) => return error("transport (body)", e.to_string()),
    };
    match status {
        200 if v["task"]["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
            && v["task"]["metadata"]["pact.verificationUriComplete"].is_string() =>
        {
            Outcome::Ok
        }
        429 => Outcome::Limited,
        s => error(format!("HTTP {s} (no step-up task)"), v.to_string()),
    }
}

/// One refresh of worker `w`'s grant; the new refresh token replaces the old.
async fn refresh_grant(ctx: &Ctx, w: usize, seq: u64) -> Outcome {
    let jwt = ctx.worker_jwt(w, seq);
    let slot = &ctx.pools[w][0];
    let issuer = ctx.pas[slot.pa].issuer.as_str();
    // Each worker is the only user of its token, so the lock is never contended.
    let current = ctx.refresh[w].lock().unwrap().clone();
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", current.as_str()),
        ("client_id", issuer),
    ];
    match oauth_post(ctx, &ctx.token_url, &jwt, &form).await {
        Err(e) => error("transport", e),
        Ok((429, _)) => Outcome::Limited,
        Ok((200, v)) => match v["refresh_token"].as_str() {
            Some(next) if v["access_token"].is_string() => {
                *ctx.refresh[w].lock().unwrap() = next.to_owned();
                Outcome::Ok
            }
            _ => error("no tokens", v.to_string()),
        },
        Ok((s, v)) => error(
            format!("HTTP {s} {}", v["error"].as_str().unwrap_or("")),
            v.to_string(),
        ),
    }
}

/// One round-robin poll of a pending device code.
async fn poll_pending(ctx: &Ctx) -> Outcome {
    let i = ctx.poll_cursor.fetch_add(1, Ordering::Relaxed) % ctx.pending.len();
    let (slot, device_code) = &ctx.pending[i];
    let jwt = ctx.jwt(slot);
    let issuer = ctx.pas[slot.pa].issuer.as_str();
    let form = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", device_code.as_str()),
        ("client_id", issuer),
    ];
    match oauth_post(ctx, &ctx.token_url, &jwt, &form).await {
        Err(e) => error("transport", e),
        Ok((429, _)) => Outcome::Limited,
        Ok((400, v)) if v["error"] == "authorization_pending" => {
            Outcome::Expected("authorization_pending")
        }
        Ok((400, v)) if v["error"] == "slow_down" => Outcome::Expected("slow_down"),
        Ok((s, v)) => error(
            format!("HTTP {s} {}", v["error"].as_str().unwrap_or("")),
            v.to_string(),
        ),
    }
}

/// `device_authorization`, retrying a 429 after its Retry-After (a few times).
async fn device_authorize(
    ctx: &Ctx,
    url: &str,
    slot: &Slot,
    scope: &str,
    details: Option<&str>,
) -> anyhow::Result<(String, String)> {
    let issuer = ctx.pas[slot.pa].issuer.clone();
    for _ in 0..10 {
        let jwt = ctx.jwt(slot);
        let mut form = vec![("client_id", issuer.as_str()), ("scope", scope)];
        if let Some(d) = details {
            form.push(("authorization_details", d));
        }
        let (status, v) = oauth_post(ctx, url, &jwt, &form)
            .await
            .map_err(anyhow::Error::msg)?;
        match status {
            200 => {
                return Ok((
                    v["device_code"]
                        .as_str()
                        .context("no device_code")?
                        .to_owned(),
                    v["user_code"].as_str().context("no user_code")?.to_owned(),
                ));
            }
            429 => tokio::time::sleep(Duration::from_secs(1)).await,
            s => bail!("device_authorization answered {s}: {v}"),
        }
    }
    bail!("device_authorization stayed rate-limited")
}

/// What the counted grants ask for: more lookups than any run makes.
const COUNTED_DETAILS: &str = r#"[{"type":"order_lookups","max_lookups":1000000}]"#;

/// One grant of `scope` for `user`, with the `authorization_details` the
/// agent asks for when there are any, approved through the consent
/// domain function (as the consent page would), its tokens by polling at
/// `urls` (device authorization, token endpoint): the delegation token and
/// the refresh token.
async fn grant(
    ctx: &Ctx,
    state: &AppState,
    slot: &Slot,
    user: &str,
    urls: (&str, &str),
    (scope, details): (&str, Option<&str>),
) -> anyhow::Result<(String, String)> {
    let (device_code, user_code) = device_authorize(ctx, urls.0, slot, scope, details).await?;
    let auth = pact_server::consent::find_by_user_code(state, &user_code)
        .await?
        .context("the user code is not live")?;
    pact_server::consent::approve(
        state,
        pact_server::consent::Approval {
            authorization_id: auth.id,
            user_sub: &user.into(),
            scopes: BTreeSet::from([scope.to_owned()]),
            // As the agent asked (RFC 9396: the person may only narrow it).
            authorization_details: None,
        },
        OffsetDateTime::now_utc(),
    )
    .await?;
    let issuer = ctx.pas[slot.pa].issuer.clone();
    let form = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", device_code.as_str()),
        ("client_id", issuer.as_str()),
    ];
    let (status, v) = oauth_post(ctx, urls.1, &ctx.jwt(slot), &form)
        .await
        .map_err(anyhow::Error::msg)?;
    ensure!(status == 200, "token request answered {status}: {v}");
    Ok((
        v["access_token"]
            .as_str()
            .context("no access_token")?
            .to_owned(),
        v["refresh_token"]
            .as_str()
            .context("no refresh_token")?
            .to_owned(),
    ))
}

// ---------------------------------------------------------------------------
/// A phase at the merchant's own agent: its figures, and a note on where
/// its turns' time went (what the merchant saw over exactly this phase).
#[allow(clippy::too_many_arguments)]
async fn merchant_phase<F, Fut>(
    results: &mut Vec<PhaseResult>,
    held: &mut Vec<Option<String>>,
    merchant: &merchant::Merchant,
    name: &str,
    concurrency: usize,
    plan: Plan,
    probe: &CpuProbe,
    f: F,
) where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let before = merchant.seen();
    results.push(run_phase(name, concurrency, plan, probe, f).await);
    held.push(merchant_note(results, &merchant.seen(), &before));
}

// Reporting.

/// Where a merchant phase's turn time went: the mean turn at the PA, the
/// part the merchant's agent held it, and within that its gateway calls;
/// the rest of the turn is pactd's before and after the agent.
fn merchant_note(
    results: &[PhaseResult],
    now: &merchant::Seen,
    before: &merchant::Seen,
) -> Option<String> {
    let r = results.last()?;
    let (n, hold, gateway) = now.per_turn_since(before)?;
    let mean = r.tally.lat_us.iter().map(|&u| f64::from(u)).sum::<f64>()
        / r.tally.lat_us.len().max(1) as f64;
    Some(format!(
        "- {}: per turn (mean of {n}): {:.2} ms at the PA, of which the agent held the turn {:.2} ms, its gateway calls (as the merchant saw them) {:.2} ms; pactd before and after the agent {:.2} ms",
        r.name,
        mean / 1000.0,
        hold / 1000.0,
        gateway / 1000.0,
        (mean - hold) / 1000.0
    ))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |x| format!("{x:.2}"))
}

fn table(results: &[PhaseResult]) -> String {
    let mut s = String::new();
    s.push_str(
        "| Scenario | Conc. | Requests | Answered | 429 | Errors | req/s | p50 ms | p90 ms | p99 ms | max ms | pactd CPU µs/req | PG CPU µs/req | loadgen CPU µs/req | loadavg after |\n\
         |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n",
    );
    for r in results {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            r.concurrency,
            r.total(),
            r.answered(),
            r.tally.limited,
            r.errors(),
            r.rps(),
            ms(r.percentile_ms(0.50)),
            ms(r.percentile_ms(0.90)),
            ms(r.percentile_ms(0.99)),
            ms(r.percentile_ms(1.0)),
            r.cpu_per_req(r.cpu.pactd),
            r.cpu_per_req(r.cpu.pg),
            r.cpu_per_req(r.cpu.me),
            r.load_after,
        );
    }
    s
}

fn notes(results: &[PhaseResult]) -> String {
    let mut s = String::new();
    for r in results {
        if !r.tally.expected.is_empty() {
            let kinds: Vec<String> = r
                .tally
                .expected
                .iter()
                .map(|(k, n)| format!("`{k}` {n}"))
                .collect();
            let _ = writeln!(s, "- {}: answers {}", r.name, kinds.join(", "));
        }
        for (kind, (n, sample)) in &r.tally.errors {
            let _ = writeln!(s, "- {}: {n} × {kind}, e.g. `{sample}`", r.name);
        }
        if r.tally.limited > 0 {
            let _ = writeln!(s, "- {}: {} × 429 (rate limited)", r.name, r.tally.limited);
        }
        if let (Some(p), Some(g), Some(m)) = (r.cpu.pactd, r.cpu.pg, r.cpu.me) {
            let wall = r.wall.as_secs_f64();
            let _ = writeln!(
                s,
                "- {}: {:.1} s wall; CPU busy: pactd {:.0} %, PostgreSQL backends {:.0} %, load generator {:.0} % (of one core)",
                r.name,
                wall,
                p / wall * 100.0,
                g / wall * 100.0,
                m / wall * 100.0
            );
        }
    }
    s
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn commit() -> String {
    let head = git(&["rev-parse", "--short=12", "HEAD"])
        .unwrap_or_else(|| "unknown (not run from a git checkout)".to_owned());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{head} (with uncommitted changes)")
    } else {
        head
    }
}

// ---------------------------------------------------------------------------

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let command_line =
        std::iter::once("cargo run --release -p pact-tests --example load --".to_owned())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" ");
    if cfg!(debug_assertions) {
        eprintln!("warning: the load generator is a debug build; run it with --release");
    }
    let bin = pactd_binary()?;
    let load_start = loadavg();
    let started_at = OffsetDateTime::now_utc()
        .replace_nanosecond(0)?
        .format(&Rfc3339)?;
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let seconds = Duration::from_secs(args.seconds);
    let c = args.concurrency;

    eprintln!("pactd binary: {}", bin.display());
    eprintln!("load average at start: {load_start}; {cores} CPUs");
    let db_url = pact_tests::db::fresh_database().await;
    let master = MasterKey::generate().map_err(|e| anyhow::anyhow!("{e}"))?;
    let server = Pactd::start(bin, &db_url, &master).await?;
    eprintln!("pactd serving at {} (pid {})", server.base_url, server.pid);

    // Setup through the admin CLI, as an operator would.
    server
        .admin(&["brand", "add", "demo", "--name", "Demo"])
        .await?;
    server
        .admin(&[
            "brand",
            "scope",
            "add",
            "demo",
            "orders:read",
            "See your orders",
        ])
        .await?;
    server
        .admin(&[
            "brand",
            "scope",
            "add",
            "demo",
            "orders:cancel",
            "Cancel your orders",
        ])
        .await?;
    let mut pas = Vec::with_capacity(args.pas);
    for i in 0..args.pas {
        let pa = TestPa::start(&format!("https://pa{i}.load.example")).await;
        server
            .admin(&[
                "agent",
                "add",
                "--issuer",
                &pa.issuer,
                "--jwks-uri",
                &pa.jwks_uri,
                // A large platform's own limit (the node default, 200/s, would
                // cap the sequential phases, which all run as one PA).
                "--rate-limit-pa",
                "5000,10000",
            ])
            .await?;
        pas.push(pa);
    }

    // The merchant's brand: answered by its own agent (`load/merchant.rs`),
    // with a public tool and one needing orders:read.
    let merchant_port = free_port()?;
    let merchant_url = format!("http://127.0.0.1:{merchant_port}");
    server
        .admin(&["brand", "add", "shop", "--name", "Shop"])
        .await?;
    server
        .admin(&[
            "brand",
            "scope",
            "add",
            "shop",
            "orders:read",
            "See your orders",
        ])
        .await?;
    let shown = server
        .admin(&[
            "brand",
            "set",
            "shop",
            "--agent-url",
            &format!("{merchant_url}/agent"),
        ])
        .await?;
    let whsec = shown
        .lines()
        .find(|l| l.starts_with("whsec_"))
        .context("brand set --agent-url printed no webhook secret")?;
    // A consumed limit (PACT §5.7): `order_lookups` grants a count of
    // lookups, and `counted_orders` uses one per call.
    server
        .admin(&[
            "brand",
            "scope",
            "add",
            "shop",
            "orders:lookup",
            "Look up your orders, a set number of times",
        ])
        .await?;
    server
        .admin(&[
            "brand",
            "details-type",
            "add",
            "shop",
            "order_lookups",
            "--json",
            r#"{"scope":"orders:lookup","description":"At most {max_lookups} lookups",
                "fields":{"max_lookups":{"type":"count","label":"lookups"}}}"#,
        ])
        .await?;
    for (tool, scope, enforce) in [
        ("store_hours", None, None),
        ("my_orders", Some("orders:read"), None),
        ("counted_orders", Some("orders:lookup"), Some("max_lookups")),
    ] {
        let url = format!("{merchant_url}/tools/{tool}");
        let mut a = vec!["brand", "tool", "add", "shop", tool, "--url", &url];
        if let Some(scope) = scope {
            a.extend(["--scope", scope]);
        }
        if let Some(rule) = enforce {
            a.extend(["--enforce", rule]);
        }
        server.admin(&a).await?;
    }
    let merchant = merchant::start(whsec, merchant_port).await?;

    // The domain side, for approvals (as the consent page would), and the probe.
    let pool = pact_db::connect(&db_url, 4).await?;
    let master = Arc::new(master);
    let mut config = Config::for_listen(server.addr, master.clone());
    config.public_url.clone_from(&server.base_url);
    let state = AppState::new(config, pool.clone()).await?;
    let pg_version: String = sqlx::query_scalar("show server_version")
        .fetch_one(&pool)
        .await?;
    let fsync: String = sqlx::query_scalar("show fsync").fetch_one(&pool).await?;
    let sync_commit: String = sqlx::query_scalar("show synchronous_commit")
        .fetch_one(&pool)
        .await?;
    if args.prefill > 0 {
        let issuers: Vec<String> = pas.iter().map(|p| p.issuer.clone()).collect();
        let started = Instant::now();
        prefill(&db_url, &issuers, args.prefill).await?;
        eprintln!(
            "prefilled {} device authorizations and {} receipts in {:.0} s",
            args.prefill,
            args.prefill,
            started.elapsed().as_secs_f64()
        );
    }
    let probe = CpuProbe {
        pactd_pid: server.pid.to_string(),
        pool: pool.clone(),
        ticks: clock_ticks(),
    };

    let http = pact_jose::with_shared_tls(reqwest::Client::builder())
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(4 * c)
        .build()?;
    let iface = state.config.interface_url(&pact_tests::brand_id("demo"));
    let shop = state.config.interface_url(&pact_tests::brand_id("shop"));
    let mut ctx = Ctx {
        http,
        pas,
        audience: state.config.audience.clone(),
        send_url: format!("{iface}/message:send"),
        device_url: format!("{iface}/oauth/device_authorization"),
        token_url: format!("{iface}/oauth/token"),
        shop_send_url: format!("{shop}/message:send"),
        shop_device_url: format!("{shop}/oauth/device_authorization"),
        shop_token_url: format!("{shop}/oauth/token"),
        pools: Vec::new(),
        pending: Vec::new(),
        delegations: Vec::new(),
        shop_delegations: Vec::new(),
        shop_counted_delegations: Vec::new(),
        refresh: Vec::new(),
        poll_cursor: AtomicUsize::new(0),
        fresh_jwt: args.fresh_jwt,
    };
    let pools = (0..c)
        .map(|w| {
            (0..args.subs)
                .map(|k| ctx.slot(w % args.pas, format!("load-w{w}-s{k}")))
                .collect()
        })
        .collect();
    ctx.pools = pools;

    // Warm-up: one call per PA, so its JWKS is fetched and cached before timing.
    for w in 0..c.min(args.pas) {
        let jwt = ctx.worker_jwt(w, 0);
        if let Outcome::Error(kind, sample) =
            send_message(&ctx, &ctx.send_url, &jwt, None, "When are you open?", true).await
        {
            bail!("warm-up request failed: {kind}: {sample}");
        }
        let jwt = ctx.worker_jwt(w, 1);
        for text in ["#json", "#mcp", "#mcp-shared"] {
            if let Outcome::Error(kind, sample) =
                send_message(&ctx, &ctx.shop_send_url, &jwt, None, text, true).await
            {
                bail!("warm-up turn at the merchant's agent failed: {kind}: {sample}");
            }
        }
    }

    let mut results = Vec::new();
    let ctx = Arc::new(ctx);
    eprintln!("phases:");

    // 1. Identity message:send.
    let identity = |ctx: Arc<Ctx>| {
        move |w: usize, seq: u64| {
            let ctx = ctx.clone();
            async move {
                let jwt = ctx.worker_jwt(w, seq);
                send_message(
                    &ctx,
                    &ctx.send_url,
                    &jwt,
                    None,
                    "When are you open?",
                    seq.is_multiple_of(CHECK_EVERY),
                )
                .await
            }
        }
    };
    results.push(
        run_phase(
            "identity message:send, sequential",
            1,
            Plan::Requests(args.sequential),
            &probe,
            identity(ctx.clone()),
        )
        .await,
    );
    results.push(
        run_phase(
            "identity message:send",
            c,
            Plan::For(seconds),
            &probe,
            identity(ctx.clone()),
        )
        .await,
    );

    // 1a. Open admission under a spray (issue 31): a registered agent's
    // identity turns, quiet and then while random unknown issuers knock.
    if args.spray > 0 {
        spray_phases(
            &mut results,
            &server,
            &state,
            &pool,
            &ctx,
            args.spray,
            seconds,
            &probe,
        )
        .await?;
    }

    // 1b. The same turns at the merchant's own agent, with one tool call
    // each: the JSON route, then pactd's MCP face.
    let mut held = Vec::new();
    // A turn at the merchant's brand: `text` says how its agent calls the
    // tool (`load/merchant.rs`), `delegation` which token the worker sends.
    let shop_turns =
        |ctx: Arc<Ctx>, text: &'static str, delegation: fn(&Ctx, usize) -> Option<&str>| {
            move |w: usize, seq: u64| {
                let ctx = ctx.clone();
                async move {
                    let jwt = ctx.worker_jwt(w, seq);
                    send_message(
                        &ctx,
                        &ctx.shop_send_url,
                        &jwt,
                        delegation(&ctx, w),
                        text,
                        seq.is_multiple_of(CHECK_EVERY),
                    )
                    .await
                }
            }
        };
    let no_grant: fn(&Ctx, usize) -> Option<&str> = |_, _| None;
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "webhook agent + 1 JSON tool call, sequential",
        1,
        Plan::Requests(args.sequential),
        &probe,
        shop_turns(ctx.clone(), "#json", no_grant),
    )
    .await;
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "webhook agent + 1 JSON tool call",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#json", no_grant),
    )
    .await;
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "webhook agent + 1 MCP tool call",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#mcp", no_grant),
    )
    .await;
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "webhook agent + 1 MCP tool call, one session for all turns",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#mcp-shared", no_grant),
    )
    .await;

    let ctx = if args.turns_only {
        ctx
    } else {
        // 2. Device authorizations, then the token endpoint while they are pending.
        // One user per authorization (as in life), spread over the PAs.
        let ctx = Arc::try_unwrap(ctx).ok().context("ctx still shared")?;
        let slots: Vec<Slot> = (0..args.device_codes)
            .map(|i| ctx.slot(i % args.pas, format!("pending-u{i}")))
            .collect();
        let codes = Arc::new(Mutex::new(vec![String::new(); args.device_codes]));
        let shared = Arc::new((ctx, slots));
        {
            let shared = shared.clone();
            let codes = codes.clone();
            results.push(
                run_phase(
                    "device_authorization (create)",
                    c,
                    Plan::Requests(args.device_codes),
                    &probe,
                    move |_w, seq| {
                        let shared = shared.clone();
                        let codes = codes.clone();
                        async move {
                            let (ctx, slots) = &*shared;
                            let i = usize::try_from(seq).unwrap_or(usize::MAX);
                            let slot = &slots[i];
                            let jwt = ctx.jwt(slot);
                            let issuer = ctx.pas[slot.pa].issuer.as_str();
                            let form = [("client_id", issuer), ("scope", "orders:read")];
                            match oauth_post(ctx, &ctx.device_url, &jwt, &form).await {
                                Err(e) => error("transport", e),
                                Ok((429, _)) => Outcome::Limited,
                                Ok((200, v)) => match v["device_code"].as_str() {
                                    Some(code) => {
                                        codes.lock().unwrap()[i] = code.to_owned();
                                        Outcome::Ok
                                    }
                                    None => error("no device_code", v.to_string()),
                                },
                                Ok((s, v)) => error(format!("HTTP {s}"), v.to_string()),
                            }
                        }
                    },
                )
                .await,
            );
        }
        let (mut ctx, slots) = Arc::try_unwrap(shared).ok().context("ctx still shared")?;
        let codes = std::mem::take(&mut *codes.lock().unwrap());
        ctx.pending = slots
            .into_iter()
            .zip(codes)
            .filter(|(_, code)| !code.is_empty())
            .collect();
        ensure!(
            !ctx.pending.is_empty(),
            "no device authorization was created"
        );
        let ctx = Arc::new(ctx);
        {
            let ctx = ctx.clone();
            results.push(
                run_phase(
                    "token (pending device codes)",
                    c,
                    Plan::For(seconds),
                    &probe,
                    move |_w, _seq| {
                        let ctx = ctx.clone();
                        async move { poll_pending(&ctx).await }
                    },
                )
                .await,
            );
        }
        ctx
    };

    // 3. Delegated message:send: one grant per worker (a different brand user
    // each), approved through the consent domain function, token by polling.
    let mut ctx = Arc::try_unwrap(ctx).ok().context("ctx still shared")?;
    eprintln!("  setting up {c} grants ...");
    for w in 0..c {
        let slot = ctx.slot(w % args.pas, format!("grant-w{w}"));
        let (access, refresh) = grant(
            &ctx,
            &state,
            &slot,
            &format!("brand-user-{w}"),
            (&ctx.device_url, &ctx.token_url),
            ("orders:read", None),
        )
        .await?;
        ctx.delegations.push(access);
        ctx.refresh.push(Mutex::new(refresh));
        let slot = ctx.slot(w % args.pas, format!("shop-grant-w{w}"));
        let (access, _) = grant(
            &ctx,
            &state,
            &slot,
            &format!("shop-user-{w}"),
            (&ctx.shop_device_url, &ctx.shop_token_url),
            ("orders:read", None),
        )
        .await?;
        ctx.shop_delegations.push(access);
        // A grant with a consumed limit: each call of `counted_orders` is
        // charged against its budget row, atomically, before it is forwarded.
        let slot = ctx.slot(w % args.pas, format!("shop-counted-w{w}"));
        let (access, _) = grant(
            &ctx,
            &state,
            &slot,
            &format!("shop-counted-user-{w}"),
            (&ctx.shop_device_url, &ctx.shop_token_url),
            ("orders:lookup", Some(COUNTED_DETAILS)),
        )
        .await?;
        ctx.shop_counted_delegations.push(access);
    }
    let ctx = Arc::new(ctx);
    let delegated = |ctx: Arc<Ctx>| {
        move |w: usize, seq: u64| {
            let ctx = ctx.clone();
            async move {
                let jwt = ctx.worker_jwt(w, seq);
                let d = ctx.delegations[w].as_str();
                send_message(
                    &ctx,
                    &ctx.send_url,
                    &jwt,
                    Some(d),
                    "Show me my orders",
                    seq.is_multiple_of(CHECK_EVERY),
                )
                .await
            }
        }
    };
    results.push(
        run_phase(
            "delegated message:send + receipt, sequential",
            1,
            Plan::Requests(args.sequential),
            &probe,
            delegated(ctx.clone()),
        )
        .await,
    );
    results.push(
        run_phase(
            "delegated message:send + receipt",
            c,
            Plan::For(seconds),
            &probe,
            delegated(ctx.clone()),
        )
        .await,
    );
    // 3b. Delegated turns at the merchant's own agent: one scoped tool call
    // (my_orders, orders:read) each, and the turn's receipt.
    let shop_grant: fn(&Ctx, usize) -> Option<&str> = |c, w| Some(c.shop_delegations[w].as_str());
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "delegated webhook agent + 1 JSON tool call + receipt",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#json", shop_grant),
    )
    .await;
    // The same with a consumed limit: the gateway charges the grant's count
    // (one statement on its budget row) before it forwards the call.
    let counted_grant: fn(&Ctx, usize) -> Option<&str> =
        |c, w| Some(c.shop_counted_delegations[w].as_str());
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "delegated webhook agent + 1 JSON tool call charged to a count + receipt",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#json #counted", counted_grant),
    )
    .await;
    // The phase measured what it says only if every answered turn's call
    // was charged: the budgets' use must cover them.
    let charged: i64 =
        sqlx::query_scalar("select coalesce(sum(used), 0)::bigint from grant_budgets")
            .fetch_one(&pool)
            .await?;
    let answered = results.last().map_or(0, PhaseResult::answered);
    ensure!(
        usize::try_from(charged).unwrap_or(0) >= answered,
        "the counted phase answered {answered} turns but its budgets were charged {charged} times"
    );
    held.push(Some(format!(
        "- the counted phase: {answered} turns answered, {charged} calls charged to their grants' counts"
    )));
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "delegated webhook agent + 1 MCP tool call + receipt",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#mcp", shop_grant),
    )
    .await;
    merchant_phase(
        &mut results,
        &mut held,
        &merchant,
        "delegated webhook agent + 1 MCP tool call + receipt, one session for all turns",
        c,
        Plan::For(seconds),
        &probe,
        shop_turns(ctx.clone(), "#mcp-shared", shop_grant),
    )
    .await;

    if !args.turns_only {
        // 4. Step-up: the grant lacks orders:cancel, so the reply is an
        // `auth-required` task carrying a device authorization (PACT §5.5),
        // created in the turn's own transaction (after the first, the live one
        // is pointed at again).
        {
            let ctx = ctx.clone();
            results.push(
                run_phase(
                    "delegated message:send, step-up task",
                    c,
                    Plan::For(seconds),
                    &probe,
                    move |w, seq| {
                        let ctx = ctx.clone();
                        async move { step_up_turn(&ctx, w, seq).await }
                    },
                )
                .await,
            );
        }

        // 5. Refresh grants with rotation (RFC 9700 §4.14.2): each worker keeps
        // the newest refresh token of its own grant.
        {
            let ctx = ctx.clone();
            results.push(
                run_phase(
                    "token, refresh_token grant (rotation)",
                    c,
                    Plan::For(seconds),
                    &probe,
                    move |w, seq| {
                        let ctx = ctx.clone();
                        async move { refresh_grant(&ctx, w, seq).await }
                    },
                )
                .await,
            );
        }
    }

    let (turns, tool_calls, failures) = (
        merchant.turns.load(Ordering::Relaxed),
        merchant.tool_calls.load(Ordering::Relaxed),
        merchant.failures.load(Ordering::Relaxed),
    );
    let receipts: i64 = sqlx::query_scalar("select count(*) from receipts")
        .fetch_one(&pool)
        .await
        .unwrap_or(-1);
    pool.close().await;
    drop(state);
    let log_path = server.log.clone();
    let stopped = server.stop().await?;
    drop(ctx);
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let log_lines: Vec<&str> = log.lines().collect();

    let mut md = String::new();
    let _ = writeln!(md, "- Command: `{command_line}`");
    let _ = writeln!(md, "- Date: {started_at}; commit {}", commit());
    let _ = writeln!(
        md,
        "- Machine: `nproc` = {cores}; load average (1/5/15 min) at start {load_start}, at end {}",
        loadavg()
    );
    let _ = writeln!(
        md,
        "- pactd: release build, separate process, `RUST_LOG=warn`, {} PA(s), {} subs per worker, {}; PostgreSQL {pg_version} (fsync={fsync}, synchronous_commit={sync_commit}); {receipts} receipts stored",
        args.pas,
        args.subs,
        if args.fresh_jwt {
            "a new PA-JWT on every request"
        } else {
            "each PA-JWT reused for 60 s"
        }
    );
    let _ = writeln!(
        md,
        "- The merchant (in this process): {turns} turns, {tool_calls} tool calls reached its API, {failures} failures"
    );
    md.push('\n');
    md.push_str(&table(&results));
    md.push('\n');
    md.push_str(&notes(&results));
    for line in held.iter().flatten() {
        let _ = writeln!(md, "{line}");
    }
    let _ = writeln!(
        md,
        "- pactd log at warn and above: {} line(s){}",
        log_lines.len(),
        if log_lines.is_empty() {
            ""
        } else {
            " (tail below)"
        }
    );
    println!("\n{md}");
    println!("pactd {stopped}");
    if !log_lines.is_empty() {
        println!("pactd log ({}), last lines:", log_path.display());
        for line in &log_lines[log_lines.len().saturating_sub(20)..] {
            println!("  {line}");
        }
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, &md).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
