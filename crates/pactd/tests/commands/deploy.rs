//! Running pactd for real: the container files agree with the binary, the
//! configuration reference agrees with `--help` and the config file, secrets
//! come from files, `pactd healthcheck` and `keys init-master-key` behave as
//! the container and the package rely on, and `keys rewrap` re-seals every
//! stored secret under a new master key.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pact_crypto::MasterKey;
use pact_server::merchant::signing::WebhookSecret;
use serde_json::json;
use serde_yaml_ng::Value as Yaml;
use tokio::process::{Child, Command};
use uuid::Uuid;

use crate::support::{free_port, pactd, repo_file, run};

const START_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

async fn help(path: &[&str]) -> String {
    let mut args = path.to_vec();
    args.push("--help");
    run(pactd(), &args).await.succeeded().to_owned()
}

/// A private directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "pactd-deploy-{label}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `pactd serve` child on 127.0.0.1:`port`.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    async fn start(mut cmd: Command, args: &[&str], port: u16, logs: &Scratch) -> Self {
        let log = logs.file(&format!("serve-{port}.log"));
        cmd.args(args)
            .stdout(std::fs::File::create(logs.file("serve.stdout")).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut server = Self {
            child: cmd.spawn().unwrap(),
            port,
            log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("pactd exited before serving ({status}): {}", server.log());
            }
            let url = format!("http://127.0.0.1:{port}/healthz");
            if let Ok(res) = pact_tests::http_get(&url).await
                && res.status() == 200
            {
                return server;
            }
            assert!(Instant::now() < deadline, "no /healthz: {}", server.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{status}: {}", self.log());
    }
}

// ---------------------------------------------------------------------------
// What `--help` says
// ---------------------------------------------------------------------------

/// The options of one help page: long flag -> its environment variable.
fn options(help: &str) -> BTreeMap<String, Option<String>> {
    let mut found = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in help.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('-') {
            current = trimmed
                .split([' ', ','])
                .find(|w| w.starts_with("--"))
                .map(str::to_owned);
            if let Some(flag) = &current {
                found.insert(flag.clone(), None);
            }
        }
        if let (Some(flag), Some(at)) = (&current, line.find("[env: ")) {
            let env: String = line[at + 6..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.insert(flag.clone(), Some(env));
        }
    }
    found.remove("--help");
    found.remove("--version");
    found
}

/// The subcommands a help page lists.
fn subcommands(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Follows `words` down pactd's subcommands, checking each exists; flags
/// (`--x` or `--x=v`) must be options of the command reached, and every
/// variable in `env` one of its `[env: …]` settings. Returns the path.
async fn check_command_line(origin: &str, words: &[String], env: &[String]) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    let mut page = help(&[]).await;
    let mut rest = words.iter();
    for word in rest.by_ref() {
        if word.starts_with('-') {
            break;
        }
        let known = subcommands(&page);
        if known.is_empty() {
            break;
        }
        assert!(
            known.contains(word),
            "{origin}: `pactd {}` has no subcommand {word:?} (it has {known:?})",
            path.join(" ")
        );
        path.push(word.clone());
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        page = help(&refs).await;
    }
    assert!(
        !path.is_empty(),
        "{origin}: no pactd subcommand in {words:?}"
    );
    let opts = options(&page);
    for word in words.iter().filter(|w| w.starts_with("--")) {
        let flag = word.split('=').next().unwrap();
        assert!(
            opts.contains_key(flag),
            "{origin}: `pactd {}` has no option {flag}",
            path.join(" ")
        );
    }
    let envs: BTreeSet<&str> = opts.values().flatten().map(String::as_str).collect();
    for var in env {
        assert!(
            envs.contains(var.as_str()),
            "{origin}: `pactd {}` reads no variable {var} (it reads {envs:?})",
            path.join(" ")
        );
    }
    path
}

fn strings(value: &Yaml) -> Vec<String> {
    value
        .as_sequence()
        .unwrap_or_else(|| panic!("expected a list, got {value:?}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn env_of(service: &Yaml) -> BTreeMap<String, String> {
    let Some(map) = service.get("environment").and_then(Yaml::as_mapping) else {
        return BTreeMap::new();
    };
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                Yaml::String(s) => s.clone(),
                other => panic!("environment values are strings in compose: {other:?}"),
            };
            (k.as_str().unwrap().to_owned(), value)
        })
        .collect()
}

/// (volume, mount point) of a service's named-volume mounts.
fn mounts(service: &Yaml) -> Vec<(String, String, bool)> {
    service
        .get("volumes")
        .map(strings)
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let parts: Vec<&str> = m.split(':').collect();
            let read_only = parts.get(2) == Some(&"ro");
            (parts[0].to_owned(), parts[1].to_owned(), read_only)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// docker-compose.yml and the Dockerfile
// ---------------------------------------------------------------------------

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn dockerfile_instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let (word, rest) = pending.split_once(' ').unwrap_or((&pending, ""));
        out.push((word.to_uppercase(), rest.trim().to_owned()));
        pending.clear();
    }
    out
}

#[tokio::test]
async fn compose_file_and_dockerfile_use_only_commands_options_and_variables_pactd_has() {
    // The Dockerfile: ENTRYPOINT pactd, CMD a subcommand, ENV settings, HEALTHCHECK through pactd.
    let dockerfile = std::fs::read_to_string(repo_file("Dockerfile")).unwrap();
    let instructions = dockerfile_instructions(&dockerfile);
    let last_stage = instructions.iter().rposition(|(w, _)| w == "FROM").unwrap();
    let runtime = &instructions[last_stage..];
    let exec_form = |rest: &str| -> Vec<String> { serde_json::from_str(rest).unwrap() };
    let entrypoint = runtime.iter().find(|(w, _)| w == "ENTRYPOINT").unwrap();
    assert_eq!(exec_form(&entrypoint.1), ["pactd"]);
    let cmd = runtime.iter().find(|(w, _)| w == "CMD").unwrap();
    let mut env_vars = Vec::new();
    for (_, rest) in runtime.iter().filter(|(w, _)| w == "ENV") {
        let (key, _) = rest.split_once('=').expect("ENV KEY=VALUE");
        env_vars.push(key.to_owned());
    }
    assert!(!env_vars.is_empty());
    assert_eq!(
        check_command_line("Dockerfile CMD", &exec_form(&cmd.1), &env_vars).await,
        ["serve"]
    );
    let healthcheck = runtime.iter().find(|(w, _)| w == "HEALTHCHECK").unwrap();
    let (_, command) = healthcheck.1.split_once("CMD ").unwrap();
    let command = exec_form(command);
    assert_eq!(
        command[0], "pactd",
        "the slim image has no curl: {command:?}"
    );
    assert_eq!(
        check_command_line("Dockerfile HEALTHCHECK", &command[1..], &[]).await,
        ["healthcheck"]
    );
    let user = runtime.iter().find(|(w, _)| w == "USER").unwrap();
    let uid = user.1.split(':').next().unwrap().to_owned();

    // docker-compose.yml (YAML merge keys resolved as compose resolves them).
    let text = std::fs::read_to_string(repo_file("docker-compose.yml")).unwrap();
    let mut compose: Yaml = serde_yaml_ng::from_str(&text).unwrap();
    compose.apply_merge().unwrap();
    let services = compose["services"].as_mapping().unwrap();
    let declared_volumes: BTreeSet<String> = compose["volumes"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();

    let mut runs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut builders: Vec<String> = Vec::new();
    for (name, service) in services {
        let name = name.as_str().unwrap().to_owned();
        if service.get("image").and_then(Yaml::as_str) != Some("pactd:local") {
            continue;
        }
        // One service builds the image (three building the same context at
        // once raced for cargo's cache under Podman); the others never pull it.
        match service.get("build").and_then(Yaml::as_str) {
            Some(".") => builders.push(name.clone()),
            Some(other) => panic!("{name}: builds {other:?}, not the repository"),
            None => assert_eq!(
                service.get("pull_policy").and_then(Yaml::as_str),
                Some("never"),
                "{name}: uses the image another service builds, so `up --build` never pulls it"
            ),
        }
        let command = strings(&service["command"]);
        let env: Vec<String> = env_of(service).into_keys().collect();
        let path = check_command_line(&format!("compose service {name}"), &command, &env).await;
        for (volume, _, _) in mounts(service) {
            assert!(declared_volumes.contains(&volume), "{name}: {volume}");
        }
        runs.insert(name, path);
    }
    assert_eq!(
        builders.len(),
        1,
        "exactly one service builds pactd:local: {builders:?}"
    );

    // The first start: one service makes the master key, one migrates, the
    // servers wait for both and do not migrate again.
    let key_makers: Vec<&String> = runs
        .iter()
        .filter(|(_, p)| *p == &["keys", "init-master-key"])
        .map(|(n, _)| n)
        .collect();
    let migrators: Vec<&String> = runs
        .iter()
        .filter(|(_, p)| *p == &["migrate"])
        .map(|(n, _)| n)
        .collect();
    assert_eq!(key_makers.len(), 1, "{runs:?}");
    assert_eq!(migrators.len(), 1, "{runs:?}");
    let key_maker = &services[key_makers[0].as_str()];
    let key_file = env_of(key_maker)["PACTD_MASTER_KEY_FILE"].clone();
    let key_dir = Path::new(&key_file).parent().unwrap().to_str().unwrap();
    let key_volume = mounts(key_maker)
        .into_iter()
        .find(|(_, at, ro)| at == key_dir && !ro)
        .unwrap_or_else(|| panic!("{key_dir} is not a writable volume of the key maker"))
        .0;
    assert!(
        dockerfile.contains(&format!("mkdir -p {key_dir}"))
            && dockerfile.contains(&format!("chown -R {uid}:{uid}")),
        "the image makes {key_dir} for uid {uid}, so the named volume starts owned by pactd"
    );
    let servers: Vec<&String> = runs
        .iter()
        .filter(|(_, p)| *p == &["serve"])
        .map(|(n, _)| n)
        .collect();
    assert!(!servers.is_empty());
    for name in servers {
        let service = &services[name.as_str()];
        let env = env_of(service);
        assert_eq!(env["PACTD_MASTER_KEY_FILE"], key_file, "{name}");
        assert_eq!(env["PACTD_NO_MIGRATE"], "true", "{name} migrates again");
        assert!(
            mounts(service)
                .iter()
                .any(|(v, at, ro)| *v == key_volume && at == key_dir && *ro),
            "{name} mounts the key volume read-only at {key_dir}"
        );
        let depends = &service["depends_on"];
        for first in [key_makers[0], migrators[0]] {
            assert_eq!(
                depends[first.as_str()]["condition"].as_str(),
                Some("service_completed_successfully"),
                "{name} waits for {first}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// docs/configuration.md
// ---------------------------------------------------------------------------

/// The rows of the "## Settings" table: (flag, env, config-file key), `None` for "—".
fn documented_settings() -> Vec<[Option<String>; 3]> {
    let text = std::fs::read_to_string(repo_file("docs/configuration.md")).unwrap();
    let cell = |c: &str| -> Option<String> {
        let c = c.trim();
        (c != "—").then(|| c.trim_matches('`').to_owned())
    };
    text.lines()
        .skip_while(|l| *l != "## Settings")
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            let cells: Vec<&str> = l.split('|').collect();
            [cell(cells[1]), cell(cells[2]), cell(cells[3])]
        })
        .collect()
}

/// The keys the config file accepts: an unknown key is refused with the list of the known ones.
async fn accepted_config_keys() -> BTreeSet<String> {
    let dir = Scratch::new("keys");
    let config = dir.write("pactd.toml", "zz_not_a_setting = 1\n");
    let refused = run(pactd(), &["--config", config.to_str().unwrap(), "serve"]).await;
    let message = refused.failed();
    let list = message
        .split("expected one of")
        .nth(1)
        .unwrap_or_else(|| panic!("no key list in: {message}"));
    list.lines()
        .next()
        .unwrap()
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_configuration_reference_lists_every_option_variable_and_config_file_key() {
    let rows = documented_settings();
    assert!(rows.len() > 20, "{rows:?}");

    // Flags and their variables, exactly as `pactd serve --help` has them.
    let from_help = options(&help(&["serve"]).await);
    let documented: BTreeMap<String, Option<String>> = rows
        .iter()
        .filter_map(|[flag, env, _]| flag.clone().map(|f| (f, env.clone())))
        .collect();
    assert_eq!(
        documented, from_help,
        "docs/configuration.md vs `pactd serve --help`"
    );

    // Config-file keys, exactly as the file parser accepts them.
    let accepted = accepted_config_keys().await;
    let documented_keys: BTreeSet<String> =
        rows.iter().filter_map(|[_, _, key]| key.clone()).collect();
    assert_eq!(
        documented_keys, accepted,
        "docs/configuration.md vs the config file's keys"
    );
    // A key and its flag are the same setting: `--x-y` is `x_y`.
    for [flag, _, key] in &rows {
        if let (Some(flag), Some(key)) = (flag, key) {
            assert_eq!(flag.trim_start_matches("--").replace('-', "_"), *key);
        }
    }
}

// ---------------------------------------------------------------------------
// Secrets from files, init-master-key, healthcheck
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn secrets_come_from_files_the_key_file_is_made_once_and_healthcheck_follows_the_server() {
    let db_url = pact_tests::db::fresh_database().await;
    let dir = Scratch::new("secrets");

    // `keys init-master-key`: made once with mode 0600, then left alone.
    let key_file = dir.file("keys/master.key");
    std::fs::create_dir_all(key_file.parent().unwrap()).unwrap();
    let key_path = key_file.to_str().unwrap();
    let mut init = pactd();
    init.env("PACTD_MASTER_KEY_FILE", key_path);
    let made = run(init, &["keys", "init-master-key"]).await;
    assert!(made.succeeded().contains("created master key file"));
    let key_text = std::fs::read_to_string(&key_file).unwrap();
    MasterKey::from_base64(&key_text).unwrap();
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = run(
        pactd(),
        &["--master-key-file", key_path, "keys", "init-master-key"],
    )
    .await;
    assert!(again.succeeded().contains("left unchanged"));
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), key_text);
    let garbage = dir.write("garbage.key", "hunter2-not-a-key\n");
    let refused = run(
        pactd(),
        &[
            "--master-key-file",
            garbage.to_str().unwrap(),
            "keys",
            "init-master-key",
        ],
    )
    .await;
    let err = refused.failed();
    assert!(
        err.contains("is invalid") && !err.contains("hunter2"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&garbage).unwrap(),
        "hunter2-not-a-key\n"
    );
    let nowhere = run(pactd(), &["keys", "init-master-key"]).await;
    assert!(nowhere.failed().contains("PACTD_MASTER_KEY_FILE"));

    // `serve` with both secrets from files named by variables.
    let url_file = dir.write("database.url", &format!("{db_url}\n"));
    let port = free_port();
    let mut cmd = pactd();
    cmd.env("DATABASE_URL_FILE", &url_file)
        .env("PACTD_MASTER_KEY_FILE", &key_file)
        .env("PACTD_LISTEN", format!("127.0.0.1:{port}"));
    let server = Server::start(cmd, &["serve"], port, &dir).await;

    // healthcheck: ready, live, and 0.0.0.0 probed on loopback.
    let listen = format!("127.0.0.1:{port}");
    let ready = run(pactd(), &["healthcheck", "--listen", &listen]).await;
    assert!(ready.succeeded().contains("/readyz answered 200"));
    let live = run(pactd(), &["healthcheck", "--listen", &listen, "--live"]).await;
    assert!(live.succeeded().contains("/healthz answered 200"));
    let mut any = pactd();
    any.env("PACTD_LISTEN", format!("0.0.0.0:{port}"));
    run(any, &["healthcheck"]).await.succeeded();
    server.stop().await;
    let down = run(pactd(), &["healthcheck", "--listen", &listen]).await;
    assert!(
        down.failed().contains("cannot connect"),
        "{}",
        down.describe()
    );

    // The same from the config file's keys; healthcheck reads `listen` there too.
    let port = free_port();
    let config = dir.write(
        "pactd.toml",
        &format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase_url_file = {:?}\nmaster_key_file = {:?}\n",
            url_file.to_str().unwrap(),
            key_path
        ),
    );
    let config = config.to_str().unwrap();
    let server = Server::start(pactd(), &["--config", config, "serve"], port, &dir).await;
    run(pactd(), &["--config", config, "healthcheck"])
        .await
        .succeeded();
    server.stop().await;

    // Two forms of one secret, or an empty file, are refused before anything starts.
    let mut both = pactd();
    both.env("DATABASE_URL", &db_url)
        .env("DATABASE_URL_FILE", &url_file)
        .env("PACTD_MASTER_KEY_FILE", &key_file);
    let err = run(both, &["serve"]).await;
    assert!(err.failed().contains("both set"), "{}", err.describe());
    let empty = dir.write("empty.url", "\n");
    let mut cmd = pactd();
    cmd.env("DATABASE_URL_FILE", &empty);
    let err = run(cmd, &["brand", "list"]).await;
    assert!(err.failed().contains("is empty"), "{}", err.describe());
    let mut cmd = pactd();
    cmd.env("DATABASE_URL_FILE", dir.file("missing.url"));
    let err = run(cmd, &["brand", "list"]).await;
    assert!(
        err.failed().contains("cannot read secret file"),
        "{}",
        err.describe()
    );
    // Admin commands read the URL from the file as well.
    let mut cmd = pactd();
    cmd.env("DATABASE_URL_FILE", &url_file);
    run(cmd, &["brand", "list"]).await.succeeded();
}

// ---------------------------------------------------------------------------
// keys rewrap
// ---------------------------------------------------------------------------

/// Which of the stored sealed values open with `key`: (signing keys, TOTP,
/// webhook, console TOTP, OpenID client secrets) counts.
async fn opening_with(pool: &sqlx::PgPool, key: &MasterKey) -> [usize; 5] {
    let mut tx = pool.begin().await.unwrap();
    let keys = pact_db::sealed::lock_signing_keys(&mut tx).await.unwrap();
    let totp = pact_db::sealed::lock_totp_secrets(&mut tx).await.unwrap();
    let hooks = pact_db::sealed::lock_webhook_secrets(&mut tx)
        .await
        .unwrap();
    let admins = pact_db::sealed::lock_admin_totp_secrets(&mut tx)
        .await
        .unwrap();
    let oidc = pact_db::brand_oidc::lock_client_secrets(&mut tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    [
        keys.iter()
            .filter(|(kid, s)| key.open(s, kid.as_bytes()).is_ok())
            .count(),
        totp.iter()
            .filter(|(id, s)| key.open(s, id.as_bytes()).is_ok())
            .count(),
        hooks
            .iter()
            .filter(|(id, brand, s)| WebhookSecret::open(key, s, brand, *id).is_ok())
            .count(),
        admins
            .iter()
            .filter(|(id, s)| key.open(s, &pact_db::sealed::admin_totp_aad(*id)).is_ok())
            .count(),
        oidc.iter()
            .filter(|(brand, s)| {
                key.open(s, &pact_db::brand_oidc::client_secret_aad(brand))
                    .is_ok()
            })
            .count(),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn rewrap_reseals_every_stored_secret_under_the_new_key_in_one_transaction() {
    let app = pact_tests::TestApp::spawn().await;
    let pool = app.db.clone();
    let old = app.master_key.clone();
    let db_url = app.db_url.clone();

    // Every sealed column of the schema is one the rewrap knows.
    let columns: Vec<(String, String)> = sqlx::query_as(
        "select table_name::text, column_name::text from information_schema.columns \
         where table_schema = current_schema() and column_name like '%sealed%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let in_schema: BTreeSet<(String, String)> = columns.into_iter().collect();
    let known: BTreeSet<(String, String)> = pact_db::sealed::SEALED_COLUMNS
        .iter()
        .map(|(t, c)| ((*t).to_owned(), (*c).to_owned()))
        .collect();
    assert_eq!(
        in_schema, known,
        "a sealed column the rewrap does not cover"
    );

    // One of each: a signing key (made at start) that has signed a receipt,
    // a TOTP secret, a webhook secret and a console account's TOTP secret.
    app.enable_demo_delegation().await;
    let pa = app.registered_pa("https://pa.example").await;
    // The grant is an account's of the brand: a grant under a name no account
    // has would be one of an external sign-in, which the OpenID set-up below
    // ends (grants::revoke_external_names).
    let user = pact_db::users::insert(
        &pool,
        Uuid::new_v4(),
        &pact_tests::brand_id("demo"),
        "t@example.com",
        None,
        "x",
    )
    .await
    .unwrap();
    let tokens = app
        .connect(&pa, "pa-u", &user.id.to_string(), &["orders:read"])
        .await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let res = app
        .send_delegated(
            "demo",
            &pa.token("pa-u", app.audience()),
            &access,
            "m1",
            "my orders",
            None,
        )
        .await;
    assert_eq!(res.status(), 200);
    let totp = old.seal(b"totp secret bytes", user.id.as_bytes()).unwrap();
    pact_db::users::set_totp(&pool, user.id, Some(&totp))
        .await
        .unwrap();
    let hook_id = Uuid::new_v4();
    let hook = WebhookSecret::generate().unwrap();
    pact_db::merchant::insert_secret(
        &pool,
        hook_id,
        &pact_tests::brand_id("demo"),
        &hook
            .seal(&old, &pact_tests::brand_id("demo"), hook_id)
            .unwrap(),
    )
    .await
    .unwrap();
    let admin = pact_db::admins::insert(
        &pool,
        Uuid::new_v4(),
        "ops@example.com",
        "x",
        pact_db::admins::Role::Owner,
        None,
    )
    .await
    .unwrap();
    let admin_totp = old
        .seal(b"console totp", &pact_db::sealed::admin_totp_aad(admin.id))
        .unwrap();
    pact_db::admins::set_totp(&pool, admin.id, Some(&admin_totp))
        .await
        .unwrap();
    let public_url = app.state.config.public_url.clone();
    let audience = app.audience().to_owned();
    app.stop().await;

    let dir = Scratch::new("rewrap");
    // And a brand's OpenID client secret, sealed by `brand set` (never printed).
    let secret_file = dir.write("oidc-secret", "oidc-client-secret-5d1e\n");
    let mut set = pactd();
    set.env("DATABASE_URL", &db_url)
        .env("PACTD_MASTER_KEY", old.to_base64());
    let out = run(
        set,
        &[
            "brand",
            "set",
            "demo",
            "--login-oidc-issuer",
            "https://id.shop.example",
            "--login-oidc-client-id",
            "pactd",
            "--login-oidc-client-secret-file",
            secret_file.to_str().unwrap(),
        ],
    )
    .await;
    let said = out.succeeded();
    assert!(said.contains("/oidc/demo/callback"), "{}", out.describe());
    assert!(
        !said.contains("oidc-client-secret-5d1e")
            && !out.stderr.contains("oidc-client-secret-5d1e")
    );
    assert_eq!(opening_with(&pool, &old).await, [1, 1, 1, 1, 1]);

    let new_key = MasterKey::generate().unwrap();
    let new_file = dir.write("new.key", &new_key.to_base64());
    let new_path = new_file.to_str().unwrap();
    let with_old = || {
        let mut cmd = pactd();
        cmd.env("DATABASE_URL", &db_url)
            .env("PACTD_MASTER_KEY", old.to_base64());
        cmd
    };

    // The current key as the "new" one is refused.
    let same = dir.write("same.key", &old.to_base64());
    let err = run(
        with_old(),
        &[
            "keys",
            "rewrap",
            "--new-master-key-file",
            same.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        err.failed().contains("is the current one"),
        "{}",
        err.describe()
    );

    // A command that would seal with a key that is not this database's (a
    // staging key, the dev directory's) is refused before it seals anything.
    let stranger = MasterKey::generate().unwrap();
    let with_stranger = || {
        let mut cmd = pactd();
        cmd.env("DATABASE_URL", &db_url)
            .env("PACTD_MASTER_KEY", stranger.to_base64());
        cmd
    };
    let keys_before: i64 = sqlx::query_scalar("select count(*) from signing_keys")
        .fetch_one(&pool)
        .await
        .unwrap();
    let err = run(with_stranger(), &["keys", "rotate", "--overlap-secs", "0"]).await;
    assert!(
        err.failed()
            .contains("does not open this database's signing keys"),
        "{}",
        err.describe()
    );
    let keys_after: i64 = sqlx::query_scalar("select count(*) from signing_keys")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(keys_after, keys_before, "nothing was sealed");
    let err = run(
        with_stranger(),
        &[
            "brand",
            "set",
            "demo",
            "--login-oidc-issuer",
            "https://id.other.example",
            "--login-oidc-client-id",
            "pactd",
            "--login-oidc-client-secret-file",
            secret_file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        err.failed()
            .contains("does not open this database's signing keys"),
        "{}",
        err.describe()
    );

    // A value neither key opens stops the whole rewrap: nothing changes.
    let bad_id = Uuid::new_v4();
    let bad = WebhookSecret::generate().unwrap();
    pact_db::brands::insert(&pool, &pact_tests::brand_id("other"), "Other", "")
        .await
        .unwrap();
    pact_db::merchant::insert_secret(
        &pool,
        bad_id,
        &pact_tests::brand_id("other"),
        &bad.seal(&stranger, &pact_tests::brand_id("other"), bad_id)
            .unwrap(),
    )
    .await
    .unwrap();
    let err = run(
        with_old(),
        &["keys", "rewrap", "--new-master-key-file", new_path],
    )
    .await;
    assert!(
        err.failed().contains("opens with neither") && err.stderr.contains("nothing was changed"),
        "{}",
        err.describe()
    );
    assert_eq!(opening_with(&pool, &old).await, [1, 1, 1, 1, 1]);
    assert_eq!(opening_with(&pool, &new_key).await, [0, 0, 0, 0, 0]);
    sqlx::query("delete from brand_webhook_secrets where id = $1")
        .bind(bad_id)
        .execute(&pool)
        .await
        .unwrap();

    // Recovery codes are keyed by the master key and cannot be carried
    // over: while one is unused, the rewrap refuses and changes nothing;
    // told to, it forgets them in the same transaction.
    let codes = pact_server::accounts::recovery::hash_all(
        &old,
        user.id,
        &["abcd-efgh-ijkl".to_owned(), "mnop-qrst-uvwx".to_owned()],
    )
    .unwrap();
    pact_db::users::replace_recovery_codes(&mut pool.acquire().await.unwrap(), user.id, &codes)
        .await
        .unwrap();
    let err = run(
        with_old(),
        &["keys", "rewrap", "--new-master-key-file", new_path],
    )
    .await;
    assert!(
        err.failed().contains("2 unused recovery code(s)")
            && err.stderr.contains("--forget-recovery-codes"),
        "{}",
        err.describe()
    );
    assert_eq!(opening_with(&pool, &new_key).await, [0, 0, 0, 0, 0]);

    // The rewrap: afterwards only the new key opens them; a second run finds nothing to do.
    let done = run(
        with_old(),
        &[
            "keys",
            "rewrap",
            "--new-master-key-file",
            new_path,
            "--forget-recovery-codes",
        ],
    )
    .await;
    assert!(
        done.succeeded()
            .contains("forgot 2 unused recovery code(s)"),
        "{}",
        done.describe()
    );
    assert_eq!(
        pact_db::users::unused_recovery_codes(&pool, user.id)
            .await
            .unwrap(),
        0
    );
    assert!(
        done.succeeded().contains("re-sealed 5 secret(s)"),
        "{}",
        done.describe()
    );
    assert_eq!(opening_with(&pool, &old).await, [0, 0, 0, 0, 0]);
    assert_eq!(opening_with(&pool, &new_key).await, [1, 1, 1, 1, 1]);
    let again = run(
        with_old(),
        &["keys", "rewrap", "--new-master-key-file", new_path],
    )
    .await;
    assert!(
        again
            .succeeded()
            .contains("re-sealed 0 secret(s) under the new master key (5 already were)"),
        "{}",
        again.describe()
    );
    let (_, _, stored) = pact_db::sealed::lock_webhook_secrets(&mut pool.acquire().await.unwrap())
        .await
        .unwrap()
        .into_iter()
        .find(|(id, _, _)| *id == hook_id)
        .unwrap();
    assert_eq!(
        WebhookSecret::open(&new_key, &stored, &pact_tests::brand_id("demo"), hook_id)
            .unwrap()
            .to_whsec(),
        hook.to_whsec(),
        "the secret itself is unchanged"
    );

    // The server refuses the old key, starts with the new one, accepts the
    // delegation token issued before and chains a new receipt to the old one.
    let port = free_port();
    let serve_args = [
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--public-url",
        &public_url,
        "--allow-loopback-jwks",
    ];
    let refused = run(with_old(), &serve_args).await;
    assert!(
        refused.failed().contains("cannot be unsealed"),
        "{}",
        refused.describe()
    );
    let mut with_new = pactd();
    with_new
        .env("DATABASE_URL", &db_url)
        .env("PACTD_MASTER_KEY_FILE", &new_file);
    let server = Server::start(with_new, &serve_args, port, &dir).await;
    let res = pact_jose::with_shared_tls(reqwest::Client::builder())
        .build()
        .unwrap()
        .post(format!(
            "http://127.0.0.1:{}/a2a/demo/message:send",
            server.port
        ))
        .bearer_auth(pa.token("pa-u", &audience))
        .header("X-A2A-User-Delegation", format!("Bearer {access}"))
        .json(&json!({"message": {"messageId": "m2", "role": "ROLE_USER",
            "parts": [{"text": "my orders"}]}}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    assert_eq!(status, 200, "{}", res.text().await.unwrap());
    server.stop().await;
    let mut verify = pactd();
    verify.env("DATABASE_URL", &db_url);
    let verified = run(verify, &["receipts", "verify"]).await;
    assert!(
        verified
            .succeeded()
            .contains("OK: 2 receipt(s) in 1 chain(s) verified"),
        "{}",
        verified.describe()
    );
}

// ---------------------------------------------------------------------------
// Upgrades
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn a_pactd_keeps_running_on_a_schema_that_a_newer_release_expanded() {
    let db_url = pact_tests::db::fresh_database().await;
    let pool = pact_db::connect(&db_url, 2).await.unwrap();
    // What a newer release's additive migration leaves behind: a new
    // nullable column and a version this binary does not know.
    sqlx::query("alter table brands add column from_a_newer_release text")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "insert into _sqlx_migrations (version, description, success, checksum, execution_time) \
         values (99990101, 'expand from a newer release', true, '\\x00'::bytea, 0)",
    )
    .execute(&pool)
    .await
    .unwrap();

    let on_db = || {
        let mut cmd = pactd();
        cmd.env("DATABASE_URL", &db_url);
        cmd
    };
    run(on_db(), &["migrate"]).await.succeeded();
    run(on_db(), &["brand", "add", "acme", "--name", "Acme"])
        .await
        .succeeded();
    let dir = Scratch::new("upgrade");
    let port = free_port();
    let mut serve = on_db();
    serve.env(
        "PACTD_MASTER_KEY",
        MasterKey::generate().unwrap().to_base64(),
    );
    let server = Server::start(
        serve,
        &["serve", "--listen", &format!("127.0.0.1:{port}")],
        port,
        &dir,
    )
    .await;
    let card = pact_tests::http_get(format!(
        "http://127.0.0.1:{port}/a2a/acme/.well-known/agent-card.json"
    ))
    .await
    .unwrap();
    assert_eq!(card.status(), 200);
    server.stop().await;

    // Tolerating newer versions is not ignoring changed ones: a known
    // migration whose recorded checksum differs is still refused.
    sqlx::query("update _sqlx_migrations set checksum = '\\x00'::bytea where version = 1")
        .execute(&pool)
        .await
        .unwrap();
    let refused = run(on_db(), &["migrate"]).await;
    assert!(
        refused.failed().contains("migrations failed"),
        "{}",
        refused.describe()
    );
}

// ---------------------------------------------------------------------------
// The Debian package's files
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_debian_package_runs_a_real_command_line_with_a_config_file_that_has_every_key() {
    let manifest: toml::Value = toml::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap(),
    )
    .unwrap();
    let deb = &manifest["package"]["metadata"]["deb"];
    let assets: Vec<(String, String)> = deb["assets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a[0].as_str().unwrap().to_owned(),
                a[1].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(assets.contains(&("target/release/pactd".into(), "usr/bin/".into())));
    let (conf_source, conf_target) = assets
        .iter()
        .find(|(_, to)| to.starts_with("etc/pactd/"))
        .unwrap();
    assert_eq!(deb["systemd-units"]["unit-name"].as_str(), Some("pactd"));

    // The unit: its ExecStart is a pactd command line that exists, with the packaged config.
    let debian = Path::new(env!("CARGO_MANIFEST_DIR")).join("debian");
    let unit = std::fs::read_to_string(debian.join("pactd.service")).unwrap();
    let directive = |name: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
            .collect()
    };
    let exec: Vec<String> = directive("ExecStart")[0]
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(exec[0], "/usr/bin/pactd");
    assert_eq!(
        exec[1..3],
        ["--config".to_owned(), format!("/{conf_target}")]
    );
    assert_eq!(
        check_command_line("pactd.service ExecStart", &exec[3..], &[]).await,
        ["serve"]
    );
    assert!(options(&help(&[]).await).contains_key("--config"));
    for (name, value) in [
        ("User", "pactd"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("StateDirectory", "pactd"),
        ("ReadWritePaths", "/var/lib/pactd"),
    ] {
        assert_eq!(directive(name), [value], "{name}=");
    }

    // The packaged config names every key (set or commented out), and with
    // every one of them uncommented pactd still reads it.
    let conf =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(conf_source)).unwrap();
    let written: BTreeSet<String> = conf
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix('#').unwrap_or(l);
            let (key, _) = l.split_once(" = ")?;
            key.chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
                .then(|| key.to_owned())
        })
        .collect();
    assert_eq!(written, accepted_config_keys().await, "{conf_source}");
    let uncommented: String = conf
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if rest.contains(" = ") && !rest.starts_with(' ') => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dir = Scratch::new("deb");
    let all = dir.write("pactd.toml", &uncommented);
    let closed = format!("127.0.0.1:{}", free_port());
    let probe = run(
        pactd(),
        &[
            "--config",
            all.to_str().unwrap(),
            "healthcheck",
            "--listen",
            &closed,
        ],
    )
    .await;
    assert!(
        probe.failed().contains("cannot connect"),
        "the packaged config does not parse: {}",
        probe.describe()
    );
    for script in ["postinst", "postrm"] {
        let text = std::fs::read_to_string(debian.join(script)).unwrap();
        assert!(text.contains("#DEBHELPER#"), "{script}");
        let mode = std::fs::metadata(debian.join(script))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{script} is executable");
    }
}
