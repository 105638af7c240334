//! A private PostgreSQL cluster started from the system's own server binaries.
//!
//! pactd keeps everything in PostgreSQL, yet a newcomer should run `pactd dev` with one command and
//! no configuration, and the integration tests need a real server that nobody had to set up
//! (a real database in every test, no mocks). Both get a cluster of their own under a data directory: `pactd dev` and the
//! admin commands keep one across runs (by default `./.pactd/pg`), the tests throw one away per test
//! binary ([`LocalCluster::start_ephemeral_with_watchdog`]).
//!
//! The cluster is meant for development and tests only: it listens on 127.0.0.1 and on a Unix
//! socket, with `trust` authentication for a superuser named `postgres`, so anybody who can open a
//! connection on this machine gets in. Production points `DATABASE_URL` at a real database instead.
//!
//! PostgreSQL refuses to run as root. CI machines and containers often are root, so there the
//! tools run as the `postgres` OS user (created by Debian's `postgresql` package) and the data
//! directory is handed over to that user.

use std::ffi::{OsStr, OsString};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::process::{Child, Command};

/// Where `pactd dev` keeps its cluster unless told otherwise, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = ".pactd/pg";

/// The text users see when no server binaries are installed; it says exactly what to do.
const BINARIES_NOT_FOUND: &str = "PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH or under /usr/lib/postgresql/*/bin. Install them (Debian/Ubuntu: `apt-get install -y postgresql`; macOS: `brew install postgresql`) or set DATABASE_URL to an existing database.";

/// Debian and Ubuntu install each major version under `<root>/<version>/bin`, off PATH.
const DEBIAN_PG_ROOT: &str = "/usr/lib/postgresql";

/// The database superuser created by initdb, and the OS user the tools run as when we are root.
const POSTGRES_USER: &str = "postgres";

/// Our settings live in a file of their own, included from `postgresql.conf`, so that rewriting
/// them on every start never touches the user's own edits.
const SETTINGS_FILE: &str = "pactd.conf";

/// The server's log, inside the data directory so that it goes away with an ephemeral cluster.
const SERVER_LOG: &str = "server.log";

/// A persistent cluster's log is set aside once it grows past this, so it cannot fill the disk.
const LOG_ROTATE_BYTES: u64 = 10 * 1024 * 1024;

/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// The socket file's name after its directory: `/.s.PGSQL.` plus up to five digits of port.
const SOCKET_NAME_LEN: usize = "/.s.PGSQL.65535".len();

/// How often to retry when a port we picked was taken before the server could bind it.
const START_ATTEMPTS: u32 = 5;

/// `pg_ctl -w` already waits for the server; this only covers the gap until TCP answers.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long pg_ctl may wait for a start or a stop, in seconds.
const PG_CTL_WAIT_SECS: &str = "60";

/// Errors from finding, initialising, starting or stopping the local cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{}", BINARIES_NOT_FOUND)]
    BinariesNotFound,
    #[error(
        "pactd runs as root, and PostgreSQL refuses to run as root, so the local cluster must run as the `postgres` OS user, which does not exist. Install Debian's `postgresql` package (it creates that user), run pactd as a regular user, or set DATABASE_URL to an existing database."
    )]
    NoPostgresUser,
    #[error(
        "pactd runs as root and needs `runuser` or `su` to start PostgreSQL as the `postgres` OS user, but found neither. Install util-linux, run pactd as a regular user, or set DATABASE_URL to an existing database."
    )]
    NoUserSwitch,
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed ({status}){hint}\n{output}")]
    Command {
        command: String,
        status: String,
        hint: String,
        output: String,
    },
    #[error(
        "PostgreSQL in {data_dir} did not start.\n{output}\n--- last lines of {log} ---\n{log_tail}"
    )]
    StartFailed {
        data_dir: PathBuf,
        log: PathBuf,
        output: String,
        log_tail: String,
    },
    #[error(
        "the PostgreSQL cluster in {data_dir} is already running on port {running}, not on the requested port {requested}; stop it (`pg_ctl stop -D {data_dir}`) or leave the port unset"
    )]
    PortMismatch {
        data_dir: PathBuf,
        running: u16,
        requested: u16,
    },
    #[error(
        "the PostgreSQL cluster in {data_dir} is running, but its postmaster.pid names no port"
    )]
    UnknownPort { data_dir: PathBuf },
    #[error(
        "invalid database name {0:?}: use 1 to 63 ASCII letters, digits, `_` or `-` (the name goes into URLs and SQL)"
    )]
    InvalidDatabaseName(String),
    #[error(
        "PostgreSQL on 127.0.0.1:{port} did not accept connections within {waited:?}: {source}"
    )]
    NotReady {
        port: u16,
        waited: Duration,
        #[source]
        source: sqlx::Error,
    },
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// How to run a cluster; see [`LocalCluster::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// The cluster's data directory; created (with its parents) when missing.
    pub data_dir: PathBuf,
    /// `None` picks a free port and remembers it in the data directory, so that the URL stays the
    /// same across runs for as long as the port stays free.
    pub port: Option<u16>,
    /// Throwaway cluster for tests: durability off (fsync, full page writes, synchronous commit),
    /// room for many connections, and the data directory removed by [`LocalCluster::stop`].
    pub ephemeral: bool,
}

/// The server programs a cluster needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBinaries {
    pub initdb: PathBuf,
    pub pg_ctl: PathBuf,
    /// pg_ctl and initdb find this themselves (next to their own resolved path); it is kept so that
    /// callers can show what will run.
    pub postgres: PathBuf,
}

impl PgBinaries {
    /// The three programs side by side in `dir`, as Debian and Homebrew install them.
    fn in_dir(dir: &Path) -> Option<Self> {
        let found = Self {
            initdb: dir.join("initdb"),
            pg_ctl: dir.join("pg_ctl"),
            postgres: dir.join("postgres"),
        };
        (is_executable(&found.initdb)
            && is_executable(&found.pg_ctl)
            && is_executable(&found.postgres))
        .then_some(found)
    }

    /// initdb and pg_ctl on PATH; they may be symlinks into a versioned directory.
    fn on_path() -> Option<Self> {
        let initdb = which("initdb")?;
        let pg_ctl = which("pg_ctl")?;
        // pg_ctl starts the `postgres` that sits next to its own resolved path, so look there first.
        let postgres = std::fs::canonicalize(&pg_ctl)
            .ok()
            .and_then(|real| real.parent().map(|dir| dir.join("postgres")))
            .filter(|candidate| is_executable(candidate))
            .or_else(|| which("postgres"))?;
        Some(Self {
            initdb,
            pg_ctl,
            postgres,
        })
    }

    /// An existing cluster only starts under the major version that created it, so when Debian
    /// has that version installed, prefer it over whatever PATH or "highest version" gave us.
    fn matching_cluster(self, data_dir: &Path) -> Self {
        let Ok(version) = std::fs::read_to_string(data_dir.join("PG_VERSION")) else {
            return self;
        };
        let version = version.trim();
        if parse_version(version).is_none() {
            return self;
        }
        Self::in_dir(&Path::new(DEBIAN_PG_ROOT).join(version).join("bin")).unwrap_or(self)
    }
}

/// The programs plus the identity they run under: everything needed to drive pg_ctl.
#[derive(Debug, Clone)]
struct Tools {
    bins: PgBinaries,
    run_as: RunAs,
}

impl Tools {
    async fn detect() -> Result<Self, ClusterError> {
        Ok(Self {
            bins: LocalCluster::find_binaries()?,
            run_as: RunAs::detect().await?,
        })
    }

    /// Runs `program args` under our identity and returns its output whatever its exit status.
    async fn output(&self, program: &Path, args: &[OsString]) -> Result<Output, ClusterError> {
        let (exe, argv) = self.run_as.argv(program, args);
        tracing::debug!(command = %describe(program, args), "running PostgreSQL tool");
        Command::new(&exe)
            .args(&argv)
            // The tools run as another user when we are root; a working directory that user cannot
            // enter makes them complain, and every path we pass is absolute anyway.
            .current_dir("/")
            // Untranslated messages, so that the log can be searched for a port clash.
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|source| ClusterError::Io {
                context: format!("could not run {}", exe.to_string_lossy()),
                source,
            })
    }

    /// Like [`Tools::output`], but a non-zero exit status is an error carrying the tool's output.
    async fn run(
        &self,
        program: &Path,
        args: &[OsString],
        hint: &str,
    ) -> Result<Output, ClusterError> {
        let output = self.output(program, args).await?;
        if output.status.success() {
            return Ok(output);
        }
        Err(ClusterError::Command {
            command: describe(program, args),
            status: output.status.to_string(),
            hint: hint.to_owned(),
            output: combined_output(&output),
        })
    }

    /// pg_ctl's "status" answers from postmaster.pid plus a liveness check of the pid in it.
    async fn is_running(&self, data_dir: &Path) -> Result<bool, ClusterError> {
        if !data_dir.join("postmaster.pid").exists() {
            return Ok(false);
        }
        let status = self
            .output(
                &self.bins.pg_ctl,
                &[os("status"), os("-D"), data_dir.into()],
            )
            .await?;
        Ok(status.status.success())
    }

    async fn stop_server(&self, data_dir: &Path, mode: &str) -> Result<(), ClusterError> {
        let args = [
            os("stop"),
            os("-D"),
            data_dir.into(),
            os("-m"),
            os(mode),
            os("-w"),
            os("-t"),
            os(PG_CTL_WAIT_SECS),
        ];
        self.run(&self.bins.pg_ctl, &args, "").await.map(drop)
    }

    /// Best-effort cleanup of a throwaway cluster whose start failed half-way.
    async fn discard(&self, data_dir: &Path) {
        if let Ok(true) = self.is_running(data_dir).await
            && let Err(error) = self.stop_server(data_dir, "immediate").await
        {
            tracing::warn!(%error, "could not stop a throwaway PostgreSQL; the watchdog will");
        }
        if let Err(error) = tokio::fs::remove_dir_all(data_dir).await {
            tracing::warn!(%error, data_dir = %data_dir.display(), "could not remove a throwaway PostgreSQL data directory");
        }
    }

    /// Writes a file inside the data directory and hands it to the cluster's owner.
    async fn write_owned(&self, path: &Path, contents: &str) -> Result<(), ClusterError> {
        tokio::fs::write(path, contents)
            .await
            .map_err(|source| io_error("could not write", path, source))?;
        self.run_as.chown(path)
    }
}

/// The identity the PostgreSQL tools run under.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RunAs {
    /// Not root: run the tools directly; the cluster belongs to the current user.
    CurrentUser,
    /// Root: PostgreSQL will not run as root, so switch to the `postgres` OS user.
    Postgres { uid: u32, gid: u32, switch: Switch },
}

/// The program that switches users; `runuser` is made for root and needs no PAM password stack.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Switch {
    Runuser(PathBuf),
    Su(PathBuf),
}

impl RunAs {
    async fn detect() -> Result<Self, ClusterError> {
        if effective_uid().await? != 0 {
            return Ok(Self::CurrentUser);
        }
        let uid = postgres_id("-u").await?;
        let gid = postgres_id("-g").await?;
        let switch =
            if let Some(path) = find_tool("runuser", &["/usr/sbin/runuser", "/sbin/runuser"]) {
                Switch::Runuser(path)
            } else if let Some(path) = find_tool("su", &["/bin/su", "/usr/bin/su"]) {
                Switch::Su(path)
            } else {
                return Err(ClusterError::NoUserSwitch);
            };
        Ok(Self::Postgres { uid, gid, switch })
    }

    /// The program to execute and its arguments for running `program args` as this identity.
    fn argv(&self, program: &Path, args: &[OsString]) -> (OsString, Vec<OsString>) {
        match self {
            Self::CurrentUser => (program.into(), args.to_vec()),
            Self::Postgres {
                switch: Switch::Runuser(runuser),
                ..
            } => {
                let mut argv = vec![os("-u"), os(POSTGRES_USER), os("--"), program.into()];
                argv.extend(args.iter().cloned());
                (runuser.into(), argv)
            }
            Self::Postgres {
                switch: Switch::Su(su),
                ..
            } => {
                // su takes one shell command line, so every word is quoted for /bin/sh.
                let mut line = b"exec ".to_vec();
                line.extend(shell_quote(program.as_os_str()));
                for arg in args {
                    line.push(b' ');
                    line.extend(shell_quote(arg));
                }
                let argv = vec![
                    os("-s"),
                    os("/bin/sh"),
                    os("-c"),
                    OsString::from_vec(line),
                    os(POSTGRES_USER),
                ];
                (su.into(), argv)
            }
        }
    }

    /// Hands `path` to the `postgres` user when we are root; initdb and the server need to own it.
    fn chown(&self, path: &Path) -> Result<(), ClusterError> {
        match self {
            Self::CurrentUser => Ok(()),
            Self::Postgres { uid, gid, .. } => {
                std::os::unix::fs::chown(path, Some(*uid), Some(*gid)).map_err(|source| {
                    io_error("could not hand over to the postgres user", path, source)
                })
            }
        }
    }

    /// Shown when initdb fails as root: the usual cause is a parent directory only root can enter.
    fn init_hint(&self, data_dir: &Path) -> String {
        match self {
            Self::CurrentUser => String::new(),
            Self::Postgres { .. } => format!(
                "; as root the cluster runs as the `postgres` OS user, which needs search (x) permission on every directory above {}",
                data_dir.display()
            ),
        }
    }
}

/// A PostgreSQL cluster in a data directory of our own, reachable on 127.0.0.1.
#[derive(Debug)]
pub struct LocalCluster {
    tools: Tools,
    data_dir: PathBuf,
    port: u16,
    ephemeral: bool,
    started_by_us: bool,
    /// The throwaway cluster's guard process; see [`LocalCluster::start_ephemeral_with_watchdog`].
    watchdog: Option<Child>,
}

impl LocalCluster {
    /// Finds initdb, pg_ctl and postgres: on PATH, else under the highest version in
    /// /usr/lib/postgresql/*/bin (Debian keeps the server binaries off PATH).
    pub fn find_binaries() -> Result<PgBinaries, ClusterError> {
        PgBinaries::on_path()
            .or_else(|| {
                versioned_bin_dirs(Path::new(DEBIAN_PG_ROOT))
                    .iter()
                    .find_map(|dir| PgBinaries::in_dir(dir))
            })
            .ok_or(ClusterError::BinariesNotFound)
    }

    /// Initialises the data directory if it holds no cluster yet (trust authentication for the
    /// local socket and 127.0.0.1 only, UTF8, superuser `postgres`), then starts the server unless
    /// it is already running, in which case it is reused and [`LocalCluster::stop`] leaves it be.
    /// Returns once the server accepts connections.
    pub async fn start(opts: ClusterOptions) -> Result<LocalCluster, ClusterError> {
        let tools = Tools::detect().await?;
        // A failed ephemeral start removes its directory, so it must not be one that held
        // something else before we came.
        let discard_on_failure = opts.ephemeral && is_missing_or_empty(&opts.data_dir).await;
        let data_dir = prepare_data_dir(&opts.data_dir, &tools.run_as).await?;
        Self::start_in(tools, data_dir, &opts, discard_on_failure).await
    }

    /// A throwaway cluster for a test binary, in a fresh directory under the system's temp dir.
    ///
    /// Rust's test harness has no global teardown and test binaries are often killed, so the
    /// cluster is guarded by a detached watchdog process: it polls this process once a second and,
    /// once it is gone, stops the server (`pg_ctl stop -m immediate`) and removes the directory.
    /// No cluster is left behind however the tests end. The watchdog runs in its own process
    /// group so that Ctrl-C on the test run does not kill it along with the tests.
    pub async fn start_ephemeral_with_watchdog() -> Result<LocalCluster, ClusterError> {
        let tools = Tools::detect().await?;
        let dir = create_unique_temp_dir().await?;
        // The watchdog exists before the server does, so even a crash in between leaves nothing.
        let watchdog = match spawn_watchdog(&tools, std::process::id(), &dir) {
            Ok(child) => child,
            Err(error) => {
                tools.discard(&dir).await;
                return Err(error);
            }
        };
        let opts = ClusterOptions {
            data_dir: dir.clone(),
            port: None,
            ephemeral: true,
        };
        let data_dir = match prepare_data_dir(&dir, &tools.run_as).await {
            Ok(data_dir) => data_dir,
            Err(error) => {
                tools.discard(&dir).await;
                return Err(error);
            }
        };
        // On failure the watchdog stays: it finishes whatever cleanup `start_in` could not.
        let mut cluster = Self::start_in(tools, data_dir, &opts, true).await?;
        cluster.watchdog = Some(watchdog);
        Ok(cluster)
    }

    /// The TCP port the server listens on, on 127.0.0.1 only.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The absolute data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `postgres://postgres@127.0.0.1:{port}/{database}`; no password, authentication is `trust`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{POSTGRES_USER}@127.0.0.1:{port}/{database}",
            port = self.port
        )
    }

    /// Whether this process started the server, and so whether [`LocalCluster::stop`] stops it.
    pub fn started_by_us(&self) -> bool {
        self.started_by_us
    }

    /// Creates database `name` unless it exists. Safe to race: a concurrent creation counts as done.
    pub async fn ensure_database(&self, name: &str) -> Result<(), ClusterError> {
        validate_database_name(name)?;
        let mut conn = PgConnection::connect(&self.url(POSTGRES_USER)).await?;
        let exists: bool =
            sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
                .bind(name)
                .fetch_one(&mut conn)
                .await?;
        if !exists {
            // Identifiers cannot be bind parameters. The name was checked to hold only ASCII
            // letters, digits, `_` and `-`, and is quoted so that its case is kept.
            let create = format!("create database \"{name}\"");
            match sqlx::query(AssertSqlSafe(create)).execute(&mut conn).await {
                Ok(_) => {}
                Err(error) if is_duplicate_database(&error) => {}
                Err(error) => return Err(error.into()),
            }
        }
        conn.close().await?;
        Ok(())
    }

    /// Stops the server with `pg_ctl stop -m fast`, only if this process started it; an
    /// ephemeral cluster is stopped with `-m immediate` (nothing to keep) and its directory removed.
    pub async fn stop(mut self) -> Result<(), ClusterError> {
        if !self.started_by_us {
            return Ok(());
        }
        let mode = if self.ephemeral { "immediate" } else { "fast" };
        // If this fails the watchdog, if any, is kept: it cleans up when the process exits.
        self.tools.stop_server(&self.data_dir, mode).await?;
        tracing::info!(data_dir = %self.data_dir.display(), "stopped local PostgreSQL");
        if self.ephemeral {
            tokio::fs::remove_dir_all(&self.data_dir)
                .await
                .map_err(|source| io_error("could not remove", &self.data_dir, source))?;
        }
        if let Some(mut watchdog) = self.watchdog.take() {
            // Nothing is left to guard. A watchdog that already exited is not an error.
            let _ = watchdog.start_kill();
            let _ = watchdog.wait().await;
        }
        Ok(())
    }

    /// Initialises (when needed) and starts the cluster in an already prepared data directory; a
    /// throwaway cluster that fails half-way is discarded when `discard_on_failure`.
    async fn start_in(
        tools: Tools,
        data_dir: PathBuf,
        opts: &ClusterOptions,
        discard_on_failure: bool,
    ) -> Result<LocalCluster, ClusterError> {
        let started = Instant::now();
        let result = Self::init_and_start(tools.clone(), data_dir.clone(), opts).await;
        match result {
            Ok(cluster) => {
                tracing::info!(
                    data_dir = %cluster.data_dir.display(),
                    port = cluster.port,
                    reused = !cluster.started_by_us,
                    elapsed_ms = started.elapsed().as_millis(),
                    "local PostgreSQL is ready"
                );
                Ok(cluster)
            }
            Err(error) => {
                if discard_on_failure {
                    tools.discard(&data_dir).await;
                }
                Err(error)
            }
        }
    }

    async fn init_and_start(
        tools: Tools,
        data_dir: PathBuf,
        opts: &ClusterOptions,
    ) -> Result<LocalCluster, ClusterError> {
        if !data_dir.join("PG_VERSION").exists() {
            init_cluster(&tools, &data_dir, opts.ephemeral).await?;
        }
        let tools = Tools {
            bins: tools.bins.matching_cluster(&data_dir),
            run_as: tools.run_as,
        };
        let (port, started_by_us) = match running_port(&tools, &data_dir).await? {
            Some(running) => (running, false),
            None => start_server(&tools, &data_dir, opts).await?,
        };
        if let Some(requested) = opts.port
            && requested != port
        {
            return Err(ClusterError::PortMismatch {
                data_dir,
                running: port,
                requested,
            });
        }
        let cluster = LocalCluster {
            tools,
            data_dir,
            port,
            ephemeral: opts.ephemeral,
            started_by_us,
            watchdog: None,
        };
        cluster.wait_until_ready().await?;
        Ok(cluster)
    }

    /// `pg_ctl -w` waits until the server reports itself ready; this also proves that TCP on
    /// 127.0.0.1 answers (and catches a reused cluster that is shutting down).
    async fn wait_until_ready(&self) -> Result<(), ClusterError> {
        let url = self.url(POSTGRES_USER);
        let started = Instant::now();
        loop {
            match PgConnection::connect(&url).await {
                Ok(conn) => {
                    conn.close().await?;
                    return Ok(());
                }
                Err(_) if started.elapsed() < READY_TIMEOUT => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(source) => {
                    return Err(ClusterError::NotReady {
                        port: self.port,
                        waited: started.elapsed(),
                        source,
                    });
                }
            }
        }
    }
}

async fn is_missing_or_empty(dir: &Path) -> bool {
    match tokio::fs::read_dir(dir).await {
        Ok(mut entries) => matches!(entries.next_entry().await, Ok(None)),
        Err(error) => error.kind() == io::ErrorKind::NotFound,
    }
}

/// Makes the data directory absolute, creates it when missing and, as root, hands an empty one
/// to the `postgres` user so that initdb can fill it.
async fn prepare_data_dir(dir: &Path, run_as: &RunAs) -> Result<PathBuf, ClusterError> {
    let dir = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| ClusterError::Io {
                context: "could not read the current directory".to_owned(),
                source,
            })?
            .join(dir)
    };
    if !dir.exists() {
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|source| io_error("could not create", &dir, source))?;
    }
    // Only an empty directory is made ready for initdb: a non-empty one without a cluster is
    // refused by initdb anyway, and must not change owner on the way.
    if is_missing_or_empty(&dir).await {
        // PostgreSQL insists on a data directory only its owner can read.
        tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .await
            .map_err(|source| io_error("could not restrict access to", &dir, source))?;
        run_as.chown(&dir)?;
    }
    tokio::fs::canonicalize(&dir)
        .await
        .map_err(|source| io_error("could not resolve", &dir, source))
}

/// Runs initdb and restricts client authentication to the local socket and 127.0.0.1.
async fn init_cluster(tools: &Tools, data_dir: &Path, ephemeral: bool) -> Result<(), ClusterError> {
    tracing::info!(data_dir = %data_dir.display(), "initialising a local PostgreSQL cluster");
    let mut args = vec![
        os("-D"),
        data_dir.into(),
        os("-U"),
        os(POSTGRES_USER),
        os("--auth-local=trust"),
        os("--auth-host=trust"),
        os("--encoding=UTF8"),
        // The C locale exists everywhere, sorts bytewise and suits UTF8.
        os("--locale=C"),
    ];
    if ephemeral {
        // Skipping the final fsync saves most of initdb's time; the data is thrown away anyway.
        args.push(os("--no-sync"));
    }
    tools
        .run(&tools.bins.initdb, &args, &tools.run_as.init_hint(data_dir))
        .await?;
    // initdb's own pg_hba.conf also trusts ::1 and replication; keep exactly what we need.
    tools
        .write_owned(
            &data_dir.join("pg_hba.conf"),
            "# Written by pactd: trust the local socket and 127.0.0.1, nothing else.\n\
             # TYPE  DATABASE  USER  ADDRESS       METHOD\n\
             local   all       all                 trust\n\
             host    all       all   127.0.0.1/32  trust\n",
        )
        .await?;
    Ok(())
}

/// The port of the server already running in `data_dir`, if one is.
async fn running_port(tools: &Tools, data_dir: &Path) -> Result<Option<u16>, ClusterError> {
    if !tools.is_running(data_dir).await? {
        return Ok(None);
    }
    let pid_file = data_dir.join("postmaster.pid");
    let contents = tokio::fs::read_to_string(&pid_file)
        .await
        .map_err(|source| io_error("could not read", &pid_file, source))?;
    match port_from_pid_file(&contents) {
        Some(port) => Ok(Some(port)),
        None => Err(ClusterError::UnknownPort {
            data_dir: data_dir.to_path_buf(),
        }),
    }
}

/// Starts the server, choosing the port and retrying when a port we picked ourselves was taken in
/// the meantime. Returns the port and whether we started it (false when another process won a
/// race to start the same cluster).
async fn start_server(
    tools: &Tools,
    data_dir: &Path,
    opts: &ClusterOptions,
) -> Result<(u16, bool), ClusterError> {
    let settings_path = data_dir.join(SETTINGS_FILE);
    let mut port = match (opts.port, remembered_port(&settings_path).await) {
        (Some(requested), _) => requested,
        (None, Some(remembered)) if port_is_free(remembered) => remembered,
        (None, Some(remembered)) => {
            let port = free_port()?;
            tracing::warn!(
                remembered,
                port,
                "the local PostgreSQL's usual port is taken; using another, so its URL changes"
            );
            port
        }
        (None, None) => free_port()?,
    };
    include_settings(tools, data_dir).await?;
    let log = data_dir.join(SERVER_LOG);
    let mut attempt = 1;
    loop {
        let settings = settings_text(port, &socket_dir(data_dir), opts.ephemeral);
        tools.write_owned(&settings_path, &settings).await?;
        rotate_log(&log).await?;
        let log_start = file_len(&log).await;
        let args = [
            os("start"),
            os("-D"),
            data_dir.into(),
            os("-l"),
            log.clone().into(),
            os("-w"),
            os("-t"),
            os(PG_CTL_WAIT_SECS),
        ];
        let output = tools.output(&tools.bins.pg_ctl, &args).await?;
        if output.status.success() {
            return Ok((port, true));
        }
        if let Some(running) = running_port(tools, data_dir).await? {
            tracing::info!("another process started the local PostgreSQL first; reusing it");
            return Ok((running, false));
        }
        let log_tail = read_log_tail(&log, log_start).await;
        if opts.port.is_none() && attempt < START_ATTEMPTS && is_port_clash(&log_tail) {
            attempt += 1;
            port = free_port()?;
            tracing::debug!(
                port,
                "port was taken before PostgreSQL could bind it; retrying"
            );
            continue;
        }
        return Err(ClusterError::StartFailed {
            data_dir: data_dir.to_path_buf(),
            log,
            output: combined_output(&output),
            log_tail,
        });
    }
}

/// Makes `postgresql.conf` include our settings file, once.
async fn include_settings(tools: &Tools, data_dir: &Path) -> Result<(), ClusterError> {
    let conf = data_dir.join("postgresql.conf");
    let text = tokio::fs::read_to_string(&conf)
        .await
        .map_err(|source| io_error("could not read", &conf, source))?;
    let include = format!("include_if_exists = '{SETTINGS_FILE}'");
    if text.lines().any(|line| line.trim() == include) {
        return Ok(());
    }
    let text = format!(
        "{text}\n# Added by pactd: port, listen address and socket directory of the local cluster.\n{include}\n"
    );
    tools.write_owned(&conf, &text).await
}

/// The settings pactd owns, rewritten on every start; the port line is how the port is remembered.
fn settings_text(port: u16, socket_dir: &Path, ephemeral: bool) -> String {
    let mut text = format!(
        "# Written by pactd on every start; put your own settings in postgresql.conf.\n\
         port = {port}\n\
         listen_addresses = '127.0.0.1'\n\
         unix_socket_directories = '{}'\n",
        conf_quote(&socket_dir.to_string_lossy())
    );
    if ephemeral {
        text.push_str(
            "# Throwaway test cluster: durability off, room for many test connections.\n\
             fsync = off\n\
             full_page_writes = off\n\
             synchronous_commit = off\n\
             max_connections = 300\n\
             shared_buffers = '32MB'\n",
        );
    }
    text
}

/// The port remembered in our settings file from an earlier run.
async fn remembered_port(settings_path: &Path) -> Option<u16> {
    let text = tokio::fs::read_to_string(settings_path).await.ok()?;
    text.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "port")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// Line 4 of postmaster.pid is the port (PostgreSQL's `LOCK_FILE_LINE_PORT`).
fn port_from_pid_file(contents: &str) -> Option<u16> {
    contents.lines().nth(3)?.trim().parse().ok()
}

/// The socket goes into the data directory itself: it belongs to the cluster's owner (who can
/// create files there even when we are root and the cluster runs as `postgres`), and its 0700 mode
/// keeps the `trust`ed socket to that owner. A path too long for a socket falls back to /tmp.
fn socket_dir(data_dir: &Path) -> PathBuf {
    match data_dir.to_str() {
        Some(dir) if dir.len() + SOCKET_NAME_LEN <= MAX_SOCKET_PATH && !dir.contains('\'') => {
            data_dir.to_path_buf()
        }
        _ => PathBuf::from("/tmp"),
    }
}

/// Sets a persistent cluster's log aside before it grows without bound.
async fn rotate_log(log: &Path) -> Result<(), ClusterError> {
    if file_len(log).await <= LOG_ROTATE_BYTES {
        return Ok(());
    }
    let old = log.with_extension("log.old");
    tokio::fs::rename(log, &old)
        .await
        .map_err(|source| io_error("could not rotate", log, source))
}

async fn file_len(path: &Path) -> u64 {
    tokio::fs::metadata(path)
        .await
        .map(|meta| meta.len())
        .unwrap_or(0)
}

/// The last lines the server logged since `start`: why a start failed.
async fn read_log_tail(log: &Path, start: u64) -> String {
    let Ok(bytes) = tokio::fs::read(log).await else {
        return String::from("(no log)");
    };
    let start = usize::try_from(start).unwrap_or(0).min(bytes.len());
    let text = String::from_utf8_lossy(bytes.get(start..).unwrap_or_default());
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Whether a failed start was a lost race for the port we picked.
fn is_port_clash(log_tail: &str) -> bool {
    log_tail.contains("Address already in use")
        || log_tail.contains("could not bind")
        || log_tail.contains("could not create lock file")
}

/// A port the kernel says is free right now. Another process may take it before the server binds
/// it; [`start_server`] retries when that happens.
fn free_port() -> Result<u16, ClusterError> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|source| ClusterError::Io {
            context: "could not find a free port on 127.0.0.1".to_owned(),
            source,
        })
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// `<temp>/pactd-pg-<pid>-<time>-<n>`: unique per process, per call and across pid reuse.
async fn create_unique_temp_dir() -> Result<PathBuf, ClusterError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    #[allow(clippy::disallowed_methods)] // a unique name, not a time anything is judged by
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("pactd-pg-{}-{nanos:x}-{n}", std::process::id()));
    // create_dir, not create_dir_all: an existing directory must never be adopted and later removed.
    tokio::fs::create_dir(&dir)
        .await
        .map_err(|source| io_error("could not create", &dir, source))?;
    tokio::fs::canonicalize(&dir)
        .await
        .map_err(|source| io_error("could not resolve", &dir, source))
}

/// The watchdog's script. Paths arrive as positional parameters, never spliced into the script,
/// so no quoting can go wrong: $1 is the pid to outlive, $2 the data directory, the rest is the
/// complete `pg_ctl stop` command line (including any switch to the `postgres` user).
const WATCHDOG_SCRIPT: &str = r#"parent=$1
data=$2
shift 2
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
if [ -f "$data/postmaster.pid" ]; then "$@" >/dev/null 2>&1; fi
rm -rf -- "$data"
"#;

/// Spawns the detached process that stops the cluster in `data_dir` and removes that directory
/// once process `parent_pid` has exited.
fn spawn_watchdog(tools: &Tools, parent_pid: u32, data_dir: &Path) -> Result<Child, ClusterError> {
    let stop = [
        os("stop"),
        os("-D"),
        data_dir.into(),
        os("-m"),
        os("immediate"),
        os("-w"),
        os("-t"),
        os(PG_CTL_WAIT_SECS),
    ];
    let (program, args) = tools.run_as.argv(&tools.bins.pg_ctl, &stop);
    Command::new("/bin/sh")
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("pactd-pg-watchdog")
        .arg(parent_pid.to_string())
        .arg(data_dir)
        .arg(program)
        .args(args)
        .current_dir("/")
        .env("LC_ALL", "C")
        // Inherited pipes would keep whoever reads the test output waiting for the watchdog.
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: Ctrl-C on the tests must not take the watchdog down with them.
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| ClusterError::Io {
            context: "could not start the PostgreSQL watchdog (/bin/sh)".to_owned(),
            source,
        })
}

/// Database names go into URLs and, quoted, into `create database`; keep them boring.
fn validate_database_name(name: &str) -> Result<(), ClusterError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ClusterError::InvalidDatabaseName(name.to_owned()))
    }
}

/// `duplicate_database`, or the unique index on pg_database when two creations race.
fn is_duplicate_database(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "42P04" || code == "23505")
}

/// The effective uid, from /proc where there is one (Linux), else from `id -u`.
async fn effective_uid() -> Result<u32, ClusterError> {
    if let Ok(status) = tokio::fs::read_to_string("/proc/self/status").await
        && let Some(uid) = status.lines().find_map(|line| {
            // "Uid:" lists the real, effective, saved and filesystem uids.
            line.strip_prefix("Uid:")?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
    {
        return Ok(uid);
    }
    let output = Command::new("id")
        .arg("-u")
        .output()
        .await
        .map_err(|source| ClusterError::Io {
            context: "could not run `id -u`".to_owned(),
            source,
        })?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|_| ClusterError::Io {
            context: "could not tell whether pactd runs as root".to_owned(),
            source: io::Error::other("`id -u` printed no number"),
        })
}

/// The `postgres` user's uid (`-u`) or gid (`-g`).
async fn postgres_id(flag: &str) -> Result<u32, ClusterError> {
    let output = Command::new("id")
        .arg(flag)
        .arg(POSTGRES_USER)
        .output()
        .await
        .map_err(|source| ClusterError::Io {
            context: format!("could not run `id {flag} {POSTGRES_USER}`"),
            source,
        })?;
    if !output.status.success() {
        return Err(ClusterError::NoPostgresUser);
    }
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|_| ClusterError::NoPostgresUser)
}

/// `name` on PATH, else the first of `fallbacks` that exists (root's PATH may lack sbin).
fn find_tool(name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    which(name).or_else(|| {
        fallbacks
            .iter()
            .map(PathBuf::from)
            .find(|path| is_executable(path))
    })
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The bin directories under Debian's PostgreSQL root, highest version first.
fn versioned_bin_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = parse_version(entry.file_name().to_str()?)?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// "15" → [15], "9.6" → [9, 6]; anything else is not a version directory.
fn parse_version(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

/// Quotes one word for /bin/sh: inside single quotes only `'` itself needs care.
fn shell_quote(word: &OsStr) -> Vec<u8> {
    let mut quoted = vec![b'\''];
    for &byte in word.as_bytes() {
        if byte == b'\'' {
            quoted.extend_from_slice(b"'\\''");
        } else {
            quoted.push(byte);
        }
    }
    quoted.push(b'\'');
    quoted
}

/// Escapes a value for a single-quoted string in postgresql.conf, where `\` is an escape too.
fn conf_quote(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "''")
}

fn os(text: &str) -> OsString {
    OsString::from(text)
}

fn io_error(what: &str, path: &Path, source: io::Error) -> ClusterError {
    ClusterError::Io {
        context: format!("{what} {}", path.display()),
        source,
    }
}

/// A command line for error messages; it only ever holds paths and flags, never secrets.
fn describe(program: &Path, args: &[OsString]) -> String {
    let mut text = program.display().to_string();
    for arg in args {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

fn combined_output(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    format!("{}\n{}", stdout.trim(), stderr.trim())
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn select_one(url: &str) -> i32 {
        let mut conn = PgConnection::connect(url).await.expect("connect");
        let one: i32 = sqlx::query_scalar("select 1")
            .fetch_one(&mut conn)
            .await
            .expect("select 1");
        conn.close().await.expect("close");
        one
    }

    /// A persistent-mode directory for a test, guarded by a watchdog that watches this test
    /// process, so a failing assertion cannot leave a server behind.
    async fn guarded_temp_dir() -> (Tools, PathBuf, Child) {
        let tools = Tools::detect().await.expect("tools");
        let dir = create_unique_temp_dir().await.expect("temp dir");
        let watchdog = spawn_watchdog(&tools, std::process::id(), &dir).expect("watchdog");
        (tools, dir, watchdog)
    }

    #[tokio::test]
    async fn an_ephemeral_cluster_serves_a_fresh_database_and_leaves_nothing_behind() {
        let started = Instant::now();
        let cluster = LocalCluster::start_ephemeral_with_watchdog()
            .await
            .expect("start ephemeral cluster");
        let elapsed = started.elapsed();
        eprintln!("ephemeral cluster start-up took {elapsed:?}");
        assert!(cluster.started_by_us());
        let dir = cluster.data_dir().to_path_buf();
        assert!(dir.join("PG_VERSION").exists());

        cluster.ensure_database("pact_it").await.expect("create");
        cluster
            .ensure_database("pact_it")
            .await
            .expect("second ensure is a no-op");
        assert_eq!(select_one(&cluster.url("pact_it")).await, 1);

        cluster.stop().await.expect("stop");
        assert!(!dir.exists(), "{} should be gone", dir.display());
    }

    #[tokio::test]
    async fn a_cluster_outlives_the_runtime_that_started_it() {
        // The integration harness starts its cluster once, on a runtime of its own, and every
        // test then uses it from its own runtime.
        let cluster = std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(LocalCluster::start_ephemeral_with_watchdog())
        })
        .join()
        .expect("thread")
        .expect("start");
        let dir = cluster.data_dir().to_path_buf();
        assert_eq!(select_one(&cluster.url(POSTGRES_USER)).await, 1);
        tokio::time::timeout(Duration::from_secs(30), cluster.stop())
            .await
            .expect("stop does not hang")
            .expect("stop");
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn starting_a_running_persistent_cluster_reuses_it_and_keeps_its_port() {
        let (tools, dir, mut watchdog) = guarded_temp_dir().await;
        let opts = ClusterOptions {
            data_dir: dir.clone(),
            port: None,
            ephemeral: false,
        };

        let first = LocalCluster::start(opts.clone())
            .await
            .expect("first start");
        assert!(first.started_by_us());
        let second = LocalCluster::start(opts.clone())
            .await
            .expect("second start");
        assert!(!second.started_by_us());
        assert_eq!(second.port(), first.port());
        second.ensure_database("reused").await.expect("create");
        assert_eq!(select_one(&second.url("reused")).await, 1);

        // Stopping the reusing handle leaves the server to its owner.
        second.stop().await.expect("stop reusing handle");
        assert_eq!(select_one(&first.url("reused")).await, 1);
        let port = first.port();
        first.stop().await.expect("stop");
        assert!(!tools.is_running(&dir).await.expect("status"));
        assert!(
            dir.join("PG_VERSION").exists(),
            "a persistent cluster keeps its data"
        );

        // The next run finds the same port and the same data.
        let again = LocalCluster::start(opts).await.expect("restart");
        assert!(again.started_by_us());
        assert_eq!(again.port(), port);
        assert_eq!(select_one(&again.url("reused")).await, 1);
        again.stop().await.expect("stop again");

        tokio::fs::remove_dir_all(&dir).await.expect("cleanup");
        watchdog.start_kill().expect("kill watchdog");
        watchdog.wait().await.expect("reap watchdog");
    }

    #[tokio::test]
    async fn asking_a_running_cluster_for_another_port_is_refused() {
        let (_tools, dir, _watchdog) = guarded_temp_dir().await;
        let opts = ClusterOptions {
            data_dir: dir.clone(),
            port: None,
            ephemeral: true,
        };
        let cluster = LocalCluster::start(opts).await.expect("start");
        let other = if cluster.port() == u16::MAX {
            cluster.port() - 1
        } else {
            cluster.port() + 1
        };
        let error = LocalCluster::start(ClusterOptions {
            data_dir: dir.clone(),
            port: Some(other),
            ephemeral: false,
        })
        .await
        .expect_err("port mismatch");
        assert!(
            matches!(error, ClusterError::PortMismatch { .. }),
            "{error}"
        );
        cluster.stop().await.expect("stop");
        assert!(!dir.exists());
    }

    #[tokio::test]
    async fn the_watchdog_stops_the_cluster_and_removes_it_once_its_process_is_gone() {
        let tools = Tools::detect().await.expect("tools");
        let dir = create_unique_temp_dir().await.expect("temp dir");
        let cluster = LocalCluster::start(ClusterOptions {
            data_dir: dir.clone(),
            port: None,
            ephemeral: true,
        })
        .await
        .expect("start");
        let url = cluster.url(POSTGRES_USER);
        // Stand-in for the test process: a child that exits at once and is reaped, so its pid is gone.
        let mut stand_in = Command::new("/bin/sh")
            .arg("-c")
            .arg("exit 0")
            .spawn()
            .expect("stand-in");
        let pid = stand_in.id().expect("pid");
        let _watchdog = spawn_watchdog(&tools, pid, cluster.data_dir()).expect("watchdog");
        stand_in.wait().await.expect("reap stand-in");

        let deadline = Instant::now() + Duration::from_secs(20);
        while dir.exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            !dir.exists(),
            "the watchdog should have removed {}",
            dir.display()
        );
        assert!(
            PgConnection::connect(&url).await.is_err(),
            "server still up"
        );
        // The handle is stale now; nothing of it needs stopping.
        drop(cluster);
    }

    #[tokio::test]
    async fn a_failed_ephemeral_start_keeps_a_directory_it_did_not_create() {
        let dir = create_unique_temp_dir().await.expect("temp dir");
        std::fs::write(dir.join("precious.txt"), "keep me").expect("write");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o751)).expect("chmod");
        let error = LocalCluster::start(ClusterOptions {
            data_dir: dir.clone(),
            port: None,
            ephemeral: true,
        })
        .await
        .expect_err("initdb refuses a non-empty directory");
        assert!(matches!(error, ClusterError::Command { .. }), "{error}");
        assert!(dir.join("precious.txt").exists());
        let mode = std::fs::metadata(&dir).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o751, "the directory was left as it was");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_binaries_are_found_on_this_machine() {
        let bins = LocalCluster::find_binaries().expect("PostgreSQL is installed where tests run");
        assert!(is_executable(&bins.initdb));
        assert!(is_executable(&bins.pg_ctl));
        assert!(is_executable(&bins.postgres));
    }

    #[test]
    fn the_missing_binaries_error_says_what_to_do() {
        let text = ClusterError::BinariesNotFound.to_string();
        assert!(text.contains("apt-get install -y postgresql"));
        assert!(text.contains("brew install postgresql"));
        assert!(text.contains("DATABASE_URL"));
    }

    #[test]
    fn versions_sort_numerically_highest_first() {
        let root = std::env::temp_dir().join(format!("pactd-versions-{}", std::process::id()));
        for name in ["9.6", "15", "13", "notes", "16beta"] {
            std::fs::create_dir_all(root.join(name)).expect("mkdir");
        }
        let dirs = versioned_bin_dirs(&root);
        std::fs::remove_dir_all(&root).expect("cleanup");
        let names: Vec<_> = dirs
            .iter()
            .map(|dir| dir.strip_prefix(&root).expect("under root").to_path_buf())
            .collect();
        assert_eq!(
            names,
            ["15/bin", "13/bin", "9.6/bin"].map(PathBuf::from).to_vec()
        );
    }

    #[test]
    fn shell_quoting_survives_quotes_and_spaces() {
        let quoted = shell_quote(OsStr::new("/tmp/it's a dir"));
        assert_eq!(quoted, b"'/tmp/it'\\''s a dir'".to_vec());
    }

    #[test]
    fn su_gets_one_quoted_command_line() {
        let run_as = RunAs::Postgres {
            uid: 1,
            gid: 1,
            switch: Switch::Su(PathBuf::from("/bin/su")),
        };
        let (program, args) = run_as.argv(Path::new("/usr/bin/pg_ctl"), &[os("-D"), os("/a b")]);
        assert_eq!(program, os("/bin/su"));
        assert_eq!(
            args,
            [
                "-s",
                "/bin/sh",
                "-c",
                "exec '/usr/bin/pg_ctl' '-D' '/a b'",
                "postgres"
            ]
            .map(os)
            .to_vec()
        );
    }

    #[test]
    fn conf_values_escape_quotes_and_backslashes() {
        assert_eq!(conf_quote(r"/tmp/a'b\c"), r"/tmp/a''b\\c");
    }

    #[test]
    fn long_data_dirs_put_the_socket_in_tmp() {
        let short = Path::new("/tmp/pactd-pg-1");
        assert_eq!(socket_dir(short), short);
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(100)));
        assert_eq!(socket_dir(&long), Path::new("/tmp"));
    }

    #[test]
    fn the_port_is_remembered_from_the_settings_and_read_from_the_pid_file() {
        let text = settings_text(54321, Path::new("/tmp/x"), true);
        assert!(text.contains("port = 54321\n"));
        assert!(text.contains("fsync = off"));
        assert_eq!(
            port_from_pid_file("123\n/data\n1700000000\n54321\n/tmp\n127.0.0.1\n"),
            Some(54321)
        );
    }

    #[test]
    fn database_names_are_boring() {
        assert!(validate_database_name("pact_test-1").is_ok());
        for bad in ["", "a\"b", "a b", "ä", &"x".repeat(64)] {
            assert!(validate_database_name(bad).is_err(), "{bad:?}");
        }
    }
}
