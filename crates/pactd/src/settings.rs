//! Resolving settings: flag or env (clap) > config file > default.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use std::time::Duration;

use pact_server::web::limits::Rate;

use crate::cli::{Cli, LimitArgs, ServeArgs};

/// The config file (`--config pactd.toml`); every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    pub listen: Option<std::net::SocketAddr>,
    pub public_url: Option<String>,
    pub audience: Option<String>,
    pub allow_loopback_jwks: Option<bool>,
    /// `allowlist` or `open` (PACT §3.1).
    pub admission: Option<String>,
    pub no_migrate: Option<bool>,
    pub seed_demo: Option<bool>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub provider_name: Option<String>,
    pub header_timeout: Option<u64>,
    pub request_timeout: Option<u64>,
    pub body_limit: Option<usize>,
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub tree_head_interval: Option<u64>,
    pub shutdown_grace: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    pub trusted_proxies: Option<String>,
    pub db_pool_size: Option<u32>,
    pub db_acquire_timeout: Option<u64>,
    pub db_wait: Option<u64>,
    pub rate_limit_pa: Option<String>,
    pub rate_limit_user: Option<String>,
    pub rate_limit_sign_in: Option<String>,
    pub rate_limit_code_entry: Option<String>,
    pub rate_limit_code_misses: Option<String>,
    pub smtp_url: Option<String>,
    pub smtp_url_file: Option<PathBuf>,
    pub mail_from: Option<String>,
    // Deployment: secrets from files (see `with_file_secrets`).
    pub database_url_file: Option<PathBuf>,
    pub master_key_file: Option<PathBuf>,
}

pub fn load_file(path: Option<&Path>) -> anyhow::Result<FileSettings> {
    let Some(path) = path else {
        return Ok(FileSettings::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    // Only where and what: toml's own message quotes the offending line,
    // which may hold a password (a misspelt `databse_url = "postgres://…"`)
    // and would reach the journal or the container's log; and a value of the
    // wrong type is quoted in the message itself (`invalid type: string
    // "…"`), so quoted text is left out of it too.
    toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| {
            let before = text.as_bytes().get(..s.start).unwrap_or(text.as_bytes());
            before.iter().filter(|b| **b == b'\n').count() + 1
        });
        let at = line.map(|l| format!(" at line {l}")).unwrap_or_default();
        anyhow::anyhow!(
            "invalid config file {}{at}: {}",
            path.display(),
            without_quoted(e.message())
        )
    })
}

/// `message` with the text between each pair of double quotes left out.
fn without_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for (i, part) in message.split('"').enumerate() {
        if i > 0 {
            out.push('"');
        }
        if i % 2 == 0 {
            out.push_str(part);
        } else {
            out.push('…');
        }
    }
    out
}

/// The PostgreSQL URL: flag or environment (`--database-url` or
/// `--database-url-file`), else the config file's (`database_url` or
/// `database_url_file`). Giving both forms at one level is refused rather
/// than silently picking one.
pub fn database_url(cli: &Cli, file: &FileSettings) -> anyhow::Result<Option<String>> {
    if let Some(url) = one_of(
        cli.database_url.as_ref(),
        cli.database_url_file.as_deref(),
        "DATABASE_URL (--database-url) and DATABASE_URL_FILE (--database-url-file)",
    )? {
        return Ok(Some(url));
    }
    one_of(
        file.database_url.as_ref(),
        file.database_url_file.as_deref(),
        "`database_url` and `database_url_file` in the config file",
    )
}

fn one_of(
    value: Option<&String>,
    path: Option<&Path>,
    both: &str,
) -> anyhow::Result<Option<String>> {
    match (value, path) {
        (Some(_), Some(_)) => anyhow::bail!("{both} are both set: keep one"),
        (Some(v), None) => Ok(Some(v.clone())),
        (None, Some(p)) => read_secret_file(p).map(Some),
        (None, None) => Ok(None),
    }
}

/// A secret kept in a file (`*_FILE`, Docker and systemd credentials): the
/// whole file less surrounding whitespace, so a trailing newline is harmless.
/// The error names the file, never its contents.
pub fn read_secret_file(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read secret file {}", path.display()))?;
    let value = text.trim();
    anyhow::ensure!(!value.is_empty(), "secret file {} is empty", path.display());
    Ok(value.to_owned())
}

/// Carries the config file's `master_key_file` into `cli` when neither the
/// flags nor the environment name a key, so every command that needs the key
/// finds it in one place.
pub fn with_file_secrets(mut cli: Cli, file: &FileSettings) -> Cli {
    if cli.master_key.is_none() && cli.master_key_file.is_none() {
        cli.master_key_file.clone_from(&file.master_key_file);
    }
    cli
}

pub fn data_dir(cli: &Cli, file: &FileSettings) -> PathBuf {
    cli.data_dir
        .clone()
        .or_else(|| file.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from(".pactd"))
}

/// Builds the server config; `dev` turns loopback JWKS on unless told otherwise.
pub fn server_config(
    args: &ServeArgs,
    file: &FileSettings,
    dev: bool,
    master_key: std::sync::Arc<pact_crypto::MasterKey>,
) -> anyhow::Result<pact_server::Config> {
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 8080)));
    let mut config = pact_server::Config::for_listen(listen, master_key);
    if dev && listen.ip().is_loopback() {
        // WebAuthn refuses an IP address as the site, so `dev` names itself
        // `localhost`: passkeys work out of the box.
        config.public_url = format!("http://localhost:{}", listen.port());
        config.audience = pact_server::config::default_audience(&config.public_url);
    }
    if let Some(url) = args.public_url.clone().or_else(|| file.public_url.clone()) {
        let parsed =
            url::Url::parse(&url).with_context(|| format!("invalid public URL {url:?}"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https") && parsed.query().is_none(),
            "the public URL must be an http(s) URL without a query"
        );
        check_public_url_is_an_origin(&url, &parsed)?;
        config.public_url = url.trim_end_matches('/').to_owned();
    }
    config.audience = args
        .audience
        .clone()
        .or_else(|| file.audience.clone())
        .unwrap_or_else(|| pact_server::config::default_audience(&config.public_url));
    check_audience(&config.audience)?;
    config.jwks.allow_loopback = args
        .allow_loopback_jwks
        .or(file.allow_loopback_jwks)
        .unwrap_or(dev);
    config.admission.policy = match (args.admission, &file.admission) {
        (Some(p), _) => p,
        (None, Some(text)) => text
            .parse()
            .map_err(|e: String| anyhow::anyhow!("admission in the config file: {e}"))?,
        (None, None) => pact_server::admission::Policy::Allowlist,
    };
    config.metrics_listen = args.metrics_listen.or(file.metrics_listen);
    if let Some(secs) = args.tree_head_interval.or(file.tree_head_interval) {
        anyhow::ensure!(
            (1..=86_400).contains(&secs),
            "tree_head_interval must be between 1 and 86400 seconds"
        );
        config.tree_head_interval = std::time::Duration::from_secs(secs);
    }
    if let Some(name) = &file.provider_name {
        config.provider_name.clone_from(name);
    }
    apply_limits(&mut config, &args.limits, file)?;
    config.mail = mail_settings(&args.mail, file)?;
    Ok(config)
}

/// pactd answers PACT at `/a2a/{brand}/…` and its pages at the root of its
/// origin, and builds every URL it advertises (the Agent Card's interface, the
/// OAuth issuer and endpoints of RFC 8414, verification links) from the
/// public URL. A path in it would be advertised but never answered (the card
/// would name `/pact/a2a/shop`, a 404), so it is refused; a prefix belongs in
/// the reverse proxy, which strips it. No user info or fragment either: they
/// are not part of an origin (RFC 6454 §4).
fn check_public_url_is_an_origin(url: &str, parsed: &url::Url) -> anyhow::Result<()> {
    anyhow::ensure!(
        matches!(parsed.path(), "" | "/"),
        "the public URL {url:?} has a path ({:?}): pactd serves PACT at /a2a/{{brand}}/… and its \
         pages at the root, so the card and OAuth URLs built from it would not be answered. \
         Give the origin only (e.g. {}), and strip any path prefix in the reverse proxy",
        parsed.path(),
        parsed.origin().ascii_serialization()
    );
    anyhow::ensure!(
        parsed.username().is_empty() && parsed.password().is_none() && parsed.fragment().is_none(),
        "the public URL {url:?} must be an origin only: no user name, password or fragment"
    );
    Ok(())
}

/// The audience is compared with a PA-JWT's `aud` as a string (RFC 7519
/// §4.1.3) and published in the Agent Card (PACT §2, §3): one that is empty
/// or holds whitespace or control characters cannot be written reliably by a
/// personal agent (and is almost surely a quoting mistake).
fn check_audience(audience: &str) -> anyhow::Result<()> {
    anyhow::ensure!(!audience.is_empty(), "the audience must not be empty");
    anyhow::ensure!(
        !audience
            .chars()
            .any(|c| c.is_whitespace() || c.is_control()),
        "the audience {audience:?} contains whitespace or a control character: PA-JWTs carry it \
         in `aud` exactly, so use a URL or name without spaces (by default it is the public URL)"
    );
    Ok(())
}

/// Mail is all or nothing: a server without a sender (or the reverse) is a
/// mistake to report at start, not a feature that silently stays off.
fn mail_settings(
    args: &crate::cli::MailArgs,
    file: &FileSettings,
) -> anyhow::Result<Option<pact_server::mail::MailSettings>> {
    // The URL may carry the SMTP password: like the database URL, it may come
    // from a file, and both forms at one level are refused.
    let url = match one_of(
        args.smtp_url.as_ref(),
        args.smtp_url_file.as_deref(),
        "PACTD_SMTP_URL (--smtp-url) and PACTD_SMTP_URL_FILE (--smtp-url-file)",
    )? {
        Some(url) => Some(url),
        None => one_of(
            file.smtp_url.as_ref(),
            file.smtp_url_file.as_deref(),
            "`smtp_url` and `smtp_url_file` in the config file",
        )?,
    };
    let from = pick(args.mail_from.as_ref(), file.mail_from.as_ref());
    match (url, from) {
        (None, None) => Ok(None),
        (Some(smtp_url), Some(from)) => {
            Ok(Some(pact_server::mail::MailSettings { smtp_url, from }))
        }
        (Some(_), None) => {
            anyhow::bail!("--smtp-url needs --mail-from (the sender of pactd's mail)")
        }
        (None, Some(_)) => {
            anyhow::bail!("--mail-from needs --smtp-url (the server that sends pactd's mail)")
        }
    }
}

/// The flag's value, else the file's (flags and env win, PACT config order).
fn pick<T: Clone>(flag: Option<&T>, file: Option<&T>) -> Option<T> {
    flag.or(file).cloned()
}

/// The longest a request-scoped setting (header and request timeouts, the
/// shutdown grace) may be: an hour. Longer is no timeout at all in practice,
/// and a value near `u64::MAX` would overflow the clock arithmetic made with it.
const MAX_TIMEOUT_SECS: u64 = 3600;

/// A duration in whole seconds, between 1 and `max`.
fn secs(
    flag: Option<&u64>,
    file: Option<&u64>,
    name: &str,
    max: u64,
) -> anyhow::Result<Option<Duration>> {
    match pick(flag, file) {
        Some(0) => anyhow::bail!("{name} must be at least 1 second"),
        Some(n) if n > max => anyhow::bail!("{name} must be at most {max} seconds, not {n}"),
        Some(n) => Ok(Some(Duration::from_secs(n))),
        None => Ok(None),
    }
}

fn rate(flag: Option<&String>, file: Option<&String>, name: &str) -> anyhow::Result<Option<Rate>> {
    pick(flag, file)
        .map(|s| Rate::parse(&s).map_err(|e| anyhow::anyhow!("{name}: {e}")))
        .transpose()
}

fn apply_limits(
    config: &mut pact_server::Config,
    a: &LimitArgs,
    f: &FileSettings,
) -> anyhow::Result<()> {
    let c = &mut config.connections;
    if let Some(d) = secs(
        a.header_timeout.as_ref(),
        f.header_timeout.as_ref(),
        "header_timeout",
        MAX_TIMEOUT_SECS,
    )? {
        c.header_timeout = d;
    }
    if let Some(d) = secs(
        a.shutdown_grace.as_ref(),
        f.shutdown_grace.as_ref(),
        "shutdown_grace",
        MAX_TIMEOUT_SECS,
    )? {
        c.shutdown_grace = d;
    }
    if let Some(n) = pick(a.max_connections.as_ref(), f.max_connections.as_ref()) {
        anyhow::ensure!(n >= 1, "max_connections must be at least 1");
        c.max_connections = n;
    }
    if let Some(n) = pick(
        a.max_connections_per_ip.as_ref(),
        f.max_connections_per_ip.as_ref(),
    ) {
        anyhow::ensure!(n >= 1, "max_connections_per_ip must be at least 1");
        c.max_connections_per_ip = n;
    }
    if let Some(d) = secs(
        a.request_timeout.as_ref(),
        f.request_timeout.as_ref(),
        "request_timeout",
        MAX_TIMEOUT_SECS,
    )? {
        config.request_timeout = d;
    }
    if let Some(n) = pick(a.body_limit.as_ref(), f.body_limit.as_ref()) {
        anyhow::ensure!(
            n >= 1024,
            "body_limit must be at least 1024 bytes (a PACT message with its metadata needs that)"
        );
        config.body_limit = n;
    }
    if let Some(list) = pick(a.trusted_proxies.as_ref(), f.trusted_proxies.as_ref()) {
        config.trusted_proxies = pact_server::client_ip::TrustedProxies::parse(&list)
            .map_err(|e| anyhow::anyhow!("trusted_proxies: {e}"))?;
    }
    if let Some(r) = rate(
        a.rate_limit_pa.as_ref(),
        f.rate_limit_pa.as_ref(),
        "rate_limit_pa",
    )? {
        config.rate_limits.per_pa_rate = r.per_second;
        config.rate_limits.per_pa_burst = r.burst;
    }
    if let Some(r) = rate(
        a.rate_limit_user.as_ref(),
        f.rate_limit_user.as_ref(),
        "rate_limit_user",
    )? {
        config.rate_limits.per_user_rate = r.per_second;
        config.rate_limits.per_user_burst = r.burst;
    }
    let p = &mut config.page_limits;
    if let Some(r) = rate(
        a.rate_limit_sign_in.as_ref(),
        f.rate_limit_sign_in.as_ref(),
        "rate_limit_sign_in",
    )? {
        p.sign_in_per_ip = r;
    }
    if let Some(r) = rate(
        a.rate_limit_code_entry.as_ref(),
        f.rate_limit_code_entry.as_ref(),
        "rate_limit_code_entry",
    )? {
        p.user_code_per_ip = r;
    }
    if let Some(r) = rate(
        a.rate_limit_code_misses.as_ref(),
        f.rate_limit_code_misses.as_ref(),
        "rate_limit_code_misses",
    )? {
        p.user_code_misses = r;
    }
    Ok(())
}

/// How long `serve` and `dev` wait at start for PostgreSQL by default: long
/// enough for a database container started alongside (compose, a pod) to
/// come up, short enough that a wrong address is reported within a minute.
const DEFAULT_DB_WAIT: Duration = Duration::from_secs(60);
/// The longest wait accepted: past an hour a supervisor should decide.
const MAX_DB_WAIT_SECS: u64 = 3600;

/// How long `serve` and `dev` wait at start for PostgreSQL (`db_wait`).
pub fn db_wait(args: &ServeArgs, file: &FileSettings) -> anyhow::Result<Duration> {
    match pick(args.limits.db_wait.as_ref(), file.db_wait.as_ref()) {
        Some(n) if n > MAX_DB_WAIT_SECS => {
            anyhow::bail!("db_wait must be at most {MAX_DB_WAIT_SECS} seconds (an hour), not {n}")
        }
        Some(n) => Ok(Duration::from_secs(n)),
        None => Ok(DEFAULT_DB_WAIT),
    }
}

/// The database pool of `serve` and `dev`.
pub fn pool(args: &ServeArgs, file: &FileSettings) -> anyhow::Result<pact_db::PoolSettings> {
    let mut pool = pact_db::PoolSettings::default();
    if let Some(n) = pick(
        args.limits.db_pool_size.as_ref(),
        file.db_pool_size.as_ref(),
    ) {
        anyhow::ensure!(n >= 1, "db_pool_size must be at least 1");
        pool.max_connections = n;
    }
    if let Some(d) = secs(
        args.limits.db_acquire_timeout.as_ref(),
        file.db_acquire_timeout.as_ref(),
        "db_acquire_timeout",
        // A request waits this long for a connection: beyond the longest
        // request timeout it could never be used.
        MAX_TIMEOUT_SECS,
    )? {
        pool.acquire_timeout = d;
    }
    Ok(pool)
}
