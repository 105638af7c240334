//! The command line. The forms of these commands are used by other tools
//! (tests, the conformance runner, scripts): keep them stable.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use pact_db::ids::BrandId;

#[derive(Debug, Parser)]
#[command(
    name = "pactd",
    version,
    about = "A self-hosted PACT authorization server"
)]
pub struct Cli {
    /// A TOML file with the same settings as the flags (flags and env win).
    #[arg(long, global = true, env = "PACTD_CONFIG")]
    pub config: Option<PathBuf>,
    /// PostgreSQL URL. Without it, `dev` and the admin commands use the
    /// private cluster in the data directory.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// Where `dev` keeps its private PostgreSQL and generated secrets.
    #[arg(long, global = true, env = "PACTD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The key-encryption key (32 bytes, base64) that seals private signing keys.
    #[arg(long, global = true, env = "PACTD_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,
    /// A file holding the key-encryption key (preferred over the variable).
    #[arg(long, global = true, env = "PACTD_MASTER_KEY_FILE")]
    pub master_key_file: Option<PathBuf>,
    // Deployment settings (docs/configuration.md): secrets from files, log format.
    /// A file holding the PostgreSQL URL, so a password stays out of the
    /// environment and the process list (instead of DATABASE_URL).
    #[arg(long, global = true, env = "DATABASE_URL_FILE")]
    pub database_url_file: Option<PathBuf>,
    /// Log lines as human-readable `text` or one JSON object per line.
    #[arg(long, global = true, env = "PACTD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Log progress (INFO) on standard error for the operator commands too;
    /// `serve` and `dev` always do. `RUST_LOG` overrides either way.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (migrates the database first unless --no-migrate).
    Serve(ServeArgs),
    /// Zero-configuration local server: private PostgreSQL, demo brand, loopback JWKS allowed.
    Dev(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage brands.
    #[command(subcommand)]
    Brand(BrandCommand),
    /// Manage registered personal agents (PACT §3).
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Trusted registries of personal agents (PACT §3.1; the `registry`
    /// admission policy): signed lists fetched from a URL with a pinned key.
    #[command(subcommand)]
    Registry(RegistryCommand),
    /// The Provider's signing keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Delegated grants (PACT §5).
    #[command(subcommand)]
    Grants(GrantsCommand),
    /// Receipts (PACT §5.6).
    #[command(subcommand)]
    Receipts(ReceiptsCommand),
    /// Brand customers' built-in accounts (PACT §5.2 sign-in).
    #[command(subcommand)]
    User(UserCommand),
    // Deployment commands.
    /// Exit 0 when the local server answers /readyz with 200, else 1 (for
    /// container HEALTHCHECKs; needs no curl).
    Healthcheck(HealthcheckArgs),
    /// The staff's console accounts and admin API credentials (docs/admin.md).
    #[command(subcommand)]
    Admin(AdminCommand),
}

/// `--login-oidc-client-auth`: the token endpoint's client authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OidcClientAuth {
    #[value(name = "client_secret_basic")]
    ClientSecretBasic,
    #[value(name = "private_key_jwt")]
    PrivateKeyJwt,
}

/// `--login-oidc-assertion-aud`: the `aud` of a private_key_jwt assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OidcAssertionAud {
    TokenEndpoint,
    Issuer,
}

/// The format of log lines on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args, Clone)]
pub struct HealthcheckArgs {
    /// The server's listen address; an unspecified address (0.0.0.0, ::)
    /// is checked on loopback [default: the config file's, else 127.0.0.1:8080].
    #[arg(long, env = "PACTD_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Check only that the process answers (/healthz), not that it can reach the database.
    #[arg(long)]
    pub live: bool,
    /// Seconds to wait for the answer.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub timeout: u64,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Add a console account. The password is read from standard input when
    /// it is not a terminal; otherwise one is generated and printed once. An
    /// authenticator app is set up at the first sign-in.
    Add {
        email: String,
        /// owner, operator or viewer.
        #[arg(long, value_parser = ["owner", "operator", "viewer"])]
        role: String,
        /// Limit the account to this brand (repeatable); without it, every brand.
        #[arg(long)]
        brand: Vec<String>,
    },
    /// List console accounts: email, role, brands, second factor, state.
    List,
    /// Remove a console account (its sessions end at once).
    Remove { email: String },
    /// Remove every second factor of a console account (authenticator app,
    /// passkeys, recovery codes) and end its sessions: the way back in for
    /// staff who lost both their device and their recovery codes. The next
    /// sign-in with the password sets up an authenticator app again.
    ResetFactors { email: String },
    /// Admin API credentials.
    #[command(subcommand)]
    Credential(AdminCredentialCommand),
}

#[derive(Debug, Subcommand)]
pub enum AdminCredentialCommand {
    /// Make a credential; prints its secret once.
    Add {
        /// The name the audit log shows for its requests.
        #[arg(long)]
        name: String,
        /// owner, operator or viewer.
        #[arg(long, value_parser = ["owner", "operator", "viewer"])]
        role: String,
        /// Limit the credential to this brand (repeatable); without it, every brand.
        #[arg(long)]
        brand: Vec<String>,
    },
    /// List credentials: name, role, brands, state, last use.
    List,
    /// Refuse the credential from the next request on.
    Revoke { name: String },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add an account. The password is read from standard input when it is
    /// not a terminal (`printf '%s' "$PW" | pactd user add …`); otherwise one
    /// is generated and printed once.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
        /// The id the brand's other channels use; delegation tokens carry it as `sub`.
        #[arg(long)]
        external_id: Option<String>,
    },
    /// List accounts: brand, email, id, external id, second factors, lock.
    List {
        #[arg(long)]
        brand: Option<String>,
    },
    /// Remove every second factor (authenticator app, passkeys, recovery
    /// codes), e.g. after a lost phone; a brand that requires MFA then asks
    /// for a new one at the next sign-in.
    ResetMfa {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
    },
    /// Stop an account from signing in: ends its sessions and revokes every
    /// grant it gave, on every node at once.
    Disable {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
    },
    /// Let a disabled account sign in again (revoked grants stay revoked).
    Enable {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
    },
    /// Remove an account: revokes its grants, then erases its email, second
    /// factors and sessions. Receipts stay verifiable (they name only the
    /// opaque user id).
    Remove {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
    },
    /// Set a new password: read from standard input when it is not a
    /// terminal, otherwise generated and printed once.
    SetPassword {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        email: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Publish a new signing key now; it signs after the overlap.
    Rotate {
        /// Seconds the new key is published before it signs [default: 600].
        #[arg(long)]
        overlap_secs: Option<u64>,
        /// Seconds a retired key stays published [default: 30 days].
        #[arg(long)]
        retain_secs: Option<u64>,
    },
    /// List signing keys and their schedule.
    List,
    /// Print a new random master key (base64) for PACTD_MASTER_KEY.
    GenerateMasterKey,
    /// Create the master key file (PACTD_MASTER_KEY_FILE) with a new random
    /// key, mode 0600, unless it exists; an existing file is checked, never replaced.
    InitMasterKey,
    /// Re-seal every stored secret (signing keys, TOTP secrets, webhook
    /// secrets) under a new master key, in one transaction. Stop every node
    /// first; start them again with the new key.
    Rewrap {
        /// The file holding the new key (the current one comes from PACTD_MASTER_KEY_FILE).
        #[arg(long, value_name = "PATH")]
        new_master_key_file: PathBuf,
        /// Delete every unused recovery code in the same transaction: they
        /// are keyed by the master key and cannot be carried over (without
        /// this, a rewrap refuses while any exists).
        #[arg(long)]
        forget_recovery_codes: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// List grants, newest first.
    List {
        #[arg(long)]
        brand: Option<String>,
        #[arg(long)]
        user: Option<String>,
        /// The PA issuer.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Revoke a grant at once, on every node.
    Revoke {
        grant_id: String,
        /// Shown to the customer on their account page (at most 200
        /// characters); without one, the page says only that staff ended it.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Revoke every grant of one person at a brand, on every node, and end
    /// their pactd sessions there (for an account deleted at the merchant).
    RevokeUser {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        /// The person's id at the brand: the delegation tokens' `sub`.
        user_id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReceiptsCommand {
    /// Check every receipt's signature and each grant's chain.
    Verify {
        #[arg(long)]
        grant: Option<String>,
        /// Receipts someone holds (a PA's `receipts.json`, or a JSON array of
        /// `{jws, claims}`): each one pactd signed must still be in the
        /// store, which catches a cut tail or a whole grant's chain deleted.
        #[arg(long, value_name = "FILE")]
        held: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Args, Default, Clone)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "PACTD_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Public base URL [default: http://<listen>].
    #[arg(long, env = "PACTD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The Provider-wide PA-JWT audience [default: <public-url>/a2a].
    #[arg(long, env = "PACTD_AUDIENCE")]
    pub audience: Option<String>,
    /// Accept http://127.0.0.1 / localhost JWKS URIs (development only).
    #[arg(long, env = "PACTD_ALLOW_LOOPBACK_JWKS", num_args = 0..=1, default_missing_value = "true")]
    pub allow_loopback_jwks: Option<bool>,
    /// Which personal agents are admitted (PACT §3.1): `allowlist`, only those
    /// registered with `pactd agent add`; `registry`, also those a trusted
    /// registry lists (`pactd registry`); `open`, also any whose https issuer
    /// serves OpenID discovery, as unverified. A brand may override it
    /// (`pactd brand set --admission`) [default: allowlist].
    #[arg(long, value_name = "POLICY", env = "PACTD_ADMISSION")]
    pub admission: Option<pact_server::admission::Policy>,
    /// Do not apply migrations on start.
    #[arg(long, env = "PACTD_NO_MIGRATE", num_args = 0..=1, default_missing_value = "true")]
    pub no_migrate: Option<bool>,
    /// Add the demo brand `demo` (built-in demo agent, its scopes) at start
    /// when it is missing, so a first run has a card to show; never changes
    /// an existing brand. `pactd dev` always does [default: false].
    #[arg(long, env = "PACTD_SEED_DEMO", num_args = 0..=1, default_missing_value = "true")]
    pub seed_demo: Option<bool>,
    /// Serve Prometheus metrics at GET /metrics on this address (e.g.
    /// 127.0.0.1:9090), never on the public listener [default: off].
    #[arg(long, value_name = "ADDR", env = "PACTD_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Seconds between signed tree heads of the receipt log, published only
    /// when it grew (docs/receipt-log.md) [default: 60].
    #[arg(long, value_name = "SECS", env = "PACTD_TREE_HEAD_INTERVAL")]
    pub tree_head_interval: Option<u64>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub mail: MailArgs,
}

/// Outgoing mail: password-reset links (each also a config-file key of the same name).
#[derive(Debug, Args, Default, Clone)]
pub struct MailArgs {
    /// SMTP server for password-reset links: smtp://host[:port],
    /// smtp://user:pass@host:587?tls=required or smtps://host:465. Without it
    /// no mail is sent and "Forgot your password?" is not offered [default: none].
    #[arg(
        long,
        value_name = "URL",
        env = "PACTD_SMTP_URL",
        hide_env_values = true
    )]
    pub smtp_url: Option<String>,
    /// A file holding the SMTP URL (it may carry a password), instead of --smtp-url.
    #[arg(long, value_name = "PATH", env = "PACTD_SMTP_URL_FILE")]
    pub smtp_url_file: Option<PathBuf>,
    /// The sender of pactd's mail, e.g. "Shop <no-reply@shop.example>" (required with --smtp-url).
    #[arg(long, value_name = "ADDRESS", env = "PACTD_MAIL_FROM")]
    pub mail_from: Option<String>,
}

/// Connection, database and rate limits (each also a config-file key of the same name).
#[derive(Debug, Args, Default, Clone)]
pub struct LimitArgs {
    /// Seconds a client has to send a request's headers; also the longest a
    /// kept-alive connection may sit idle [default: 10].
    #[arg(long, value_name = "SECS", env = "PACTD_HEADER_TIMEOUT")]
    pub header_timeout: Option<u64>,
    /// Seconds a request may take once its headers are in [default: 30].
    #[arg(long, value_name = "SECS", env = "PACTD_REQUEST_TIMEOUT")]
    pub request_timeout: Option<u64>,
    /// Largest request body accepted, in bytes; larger ones get 413 [default: 65536].
    #[arg(long, value_name = "BYTES", env = "PACTD_BODY_LIMIT")]
    pub body_limit: Option<usize>,
    /// Seconds in-flight requests get to finish after SIGTERM before the
    /// remaining connections are closed [default: 10].
    #[arg(long, value_name = "SECS", env = "PACTD_SHUTDOWN_GRACE")]
    pub shutdown_grace: Option<u64>,
    /// Open connections on this node [default: the open-files limit less 128].
    #[arg(long, value_name = "N", env = "PACTD_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Open connections from one address or IPv6 /64; trusted proxies are exempt [default: 128].
    #[arg(long, value_name = "N", env = "PACTD_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,
    /// Reverse proxies whose X-Forwarded-For is believed: addresses or
    /// networks, comma-separated (e.g. 10.0.0.0/8,192.0.2.7) [default: none].
    #[arg(long, value_name = "LIST", env = "PACTD_TRUSTED_PROXIES")]
    pub trusted_proxies: Option<String>,
    /// PostgreSQL connections in this node's pool [default: 4 per CPU, at least 8], plus half as
    /// many (at least 2) for the writes that do not wait for the WAL flush.
    #[arg(long, value_name = "N", env = "PACTD_DB_POOL_SIZE")]
    pub db_pool_size: Option<u32>,
    /// Seconds a request waits for a pooled connection before 503 [default: 3].
    #[arg(long, value_name = "SECS", env = "PACTD_DB_ACQUIRE_TIMEOUT")]
    pub db_acquire_timeout: Option<u64>,
    /// Seconds the server waits at start for PostgreSQL to accept connections,
    /// retrying with back-off; 0 gives up at the first failure [default: 60].
    #[arg(long, value_name = "SECS", env = "PACTD_DB_WAIT")]
    pub db_wait: Option<u64>,
    /// A2A/OAuth requests of one PA platform: RATE,BURST per second [default: 200,400].
    #[arg(long, value_name = "RATE,BURST", env = "PACTD_RATE_LIMIT_PA")]
    pub rate_limit_pa: Option<String>,
    /// Requests of one user of one PA: RATE,BURST [default: 10,30].
    #[arg(long, value_name = "RATE,BURST", env = "PACTD_RATE_LIMIT_USER")]
    pub rate_limit_user: Option<String>,
    /// Password sign-in attempts per address: RATE,BURST [default: 0.333,20].
    #[arg(long, value_name = "RATE,BURST", env = "PACTD_RATE_LIMIT_SIGN_IN")]
    pub rate_limit_sign_in: Option<String>,
    /// User-code entries per address: RATE,BURST [default: 0.1667,10].
    #[arg(long, value_name = "RATE,BURST", env = "PACTD_RATE_LIMIT_CODE_ENTRY")]
    pub rate_limit_code_entry: Option<String>,
    /// Wrong user codes, all visitors together (the guessing budget): RATE,BURST [default: 2,120].
    #[arg(long, value_name = "RATE,BURST", env = "PACTD_RATE_LIMIT_CODE_MISSES")]
    pub rate_limit_code_misses: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum BrandCommand {
    /// Add a brand.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "")]
        description: String,
    },
    /// List brands.
    List,
    /// A brand's scopes (a brand with scopes offers delegation).
    #[command(subcommand)]
    Scope(ScopeCommand),
    /// A brand's RFC 9396 authorization_details types.
    #[command(subcommand, name = "details-type")]
    DetailsType(DetailsTypeCommand),
    /// Change a brand's settings (only the options given).
    Set(Box<BrandSetArgs>),
    /// The secret that signs pactd's calls to the brand's agent and tools (Standard Webhooks).
    #[command(subcommand, name = "webhook-secret")]
    WebhookSecret(WebhookSecretCommand),
    /// Tools the brand's own agent may call through pactd's gateway.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// API credentials for the brand's resource servers (RFC 7662 introspection).
    #[command(subcommand)]
    Credential(CredentialCommand),
}

#[derive(Debug, Subcommand)]
pub enum WebhookSecretCommand {
    /// Print a new secret once; the old one keeps signing (a second signature) for the grace period.
    Rotate {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        /// How long the old secret still signs, e.g. 24h, 30m, 2d, 0s [default: 24h].
        #[arg(long, default_value = "24h")]
        grace: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Add or replace a tool.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        /// The name the agent calls it by (a-z, 0-9, '-', '_').
        name: String,
        /// The scope a call needs; without it the tool is public.
        #[arg(long)]
        scope: Option<String>,
        /// Where pactd forwards allowed calls (https).
        #[arg(long)]
        url: String,
        #[arg(long, default_value = "")]
        description: String,
        /// A limit rule (repeatable): FIELD=ARG checks the call argument ARG
        /// against the granted authorization_details field FIELD (of every
        /// type of the tool's scope that has it); TYPE.FIELD=ARG for one
        /// type only; FIELD alone for a count (each call uses one).
        #[arg(long, value_name = "RULE")]
        enforce: Vec<String>,
        /// A JSON Schema of the arguments, passed to the agent as documentation.
        #[arg(long, value_name = "JSON")]
        input_schema: Option<String>,
        /// How one call reads to a person asked to approve it on its own,
        /// with {arg} placeholders: "Move booking {booking_id} to {new_date}".
        #[arg(long, default_value = "")]
        summary: String,
    },
    /// Register every tool of the merchant's MCP server (its tools/list); pactd then calls
    /// the server's tools/call for allowed calls. Tools without --scope-map stay unusable
    /// until mapped with `set-scope`.
    ImportMcp {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        /// The server's Streamable HTTP endpoint (https).
        #[arg(long)]
        url: String,
        /// TOOL=SCOPE: the scope a call of TOOL needs (repeatable).
        #[arg(long, value_name = "TOOL=SCOPE")]
        scope_map: Vec<String>,
        /// Accept a loopback server (development, like `--allow-loopback-jwks`).
        #[arg(long)]
        allow_loopback: bool,
    },
    /// Give a tool the scope its calls need (or make it public), e.g. an imported MCP tool.
    SetScope {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        name: String,
        /// One of the brand's scopes.
        #[arg(required_unless_present = "public", conflicts_with = "public")]
        scope: Option<String>,
        /// Anyone's turn may call it, with or without a delegation.
        #[arg(long)]
        public: bool,
    },
    /// Set a tool's limit rules (and summary), e.g. for an imported MCP tool:
    /// --enforce order_ids=order_id. No --enforce clears them.
    SetRules {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        name: String,
        /// A limit rule (repeatable), as at `tool add --enforce`.
        #[arg(long, value_name = "RULE")]
        enforce: Vec<String>,
        /// How one call reads to a person asked to approve it on its own.
        #[arg(long)]
        summary: Option<String>,
    },
    List {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
    },
    Remove {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Make a credential; prints the client id and secret once.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        #[arg(long)]
        name: String,
    },
    List {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
    },
    /// Refuse the credential from the next request on.
    Revoke {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        client_id: String,
    },
}

#[derive(Debug, Args)]
pub struct BrandSetArgs {
    #[arg(value_parser = BrandId::parse)]
    pub brand_id: BrandId,
    /// The brand's name on its Agent Card and the consent page (1–200 characters).
    #[arg(long)]
    pub name: Option<String>,
    /// The Agent Card's description (at most 1000 characters; "" for one made from the name).
    #[arg(long)]
    pub description: Option<String>,
    /// The Agent Card's skills, a JSON array of {"id", "name", "description", "tags"};
    /// '[]' for the brand agent's own.
    #[arg(long, value_name = "JSON")]
    pub skills_json: Option<String>,
    /// Every built-in sign-in needs a second factor (people without one set it up first).
    #[arg(long, value_name = "true|false")]
    pub mfa_required: Option<bool>,
    /// The brand's own login page (PACT §5.2); needs --login-jwks-uri.
    #[arg(
        long,
        value_name = "URL",
        requires = "login_jwks_uri",
        conflicts_with = "no_external_login"
    )]
    pub login_url: Option<String>,
    /// Where the keys that sign the brand's login assertions are published.
    #[arg(
        long,
        value_name = "URL",
        requires = "login_url",
        conflicts_with = "no_external_login"
    )]
    pub login_jwks_uri: Option<String>,
    /// Use pactd's built-in accounts again (removes --login-url and
    /// --login-jwks-uri, and the OpenID provider settings).
    #[arg(long)]
    pub no_external_login: bool,
    /// Sign customers in with the merchant's OpenID provider at this issuer
    /// (discovered through <issuer>/.well-known/openid-configuration);
    /// register <public URL>/oidc/<brand>/callback there as the redirect URI.
    #[arg(
        long,
        value_name = "URL",
        requires = "login_oidc_client_id",
        conflicts_with_all = ["no_external_login", "login_url"]
    )]
    pub login_oidc_issuer: Option<String>,
    /// pactd's client id at the provider.
    #[arg(long, value_name = "ID", requires = "login_oidc_issuer")]
    pub login_oidc_client_id: Option<String>,
    /// A file holding the client secret (one line); stored sealed with the
    /// master key. Needed for client_secret_basic only.
    #[arg(long, value_name = "FILE", requires = "login_oidc_issuer")]
    pub login_oidc_client_secret_file: Option<PathBuf>,
    /// How pactd authenticates at the provider's token endpoint:
    /// client_secret_basic (with --login-oidc-client-secret-file), or
    /// private_key_jwt (an assertion signed with pactd's own key; register
    /// <public URL>/a2a/<brand>/oauth/jwks.json as the client's jwks_uri)
    /// [default: client_secret_basic].
    #[arg(
        long,
        value_name = "METHOD",
        value_enum,
        requires = "login_oidc_issuer"
    )]
    pub login_oidc_client_auth: Option<OidcClientAuth>,
    /// The private_key_jwt assertion's aud: token-endpoint (OpenID Connect
    /// Core §9; what Entra ID and Keycloak take) or issuer (what Auth0 takes)
    /// [default: token-endpoint].
    #[arg(long, value_name = "AUD", value_enum, requires = "login_oidc_issuer")]
    pub login_oidc_assertion_aud: Option<OidcAssertionAud>,
    /// The scope requested at the provider [default: "openid"]; must include openid.
    #[arg(long, value_name = "SCOPE", requires = "login_oidc_issuer")]
    pub login_oidc_scope: Option<String>,
    /// The ID token claim that becomes the person's id at the brand (the
    /// delegation token's sub): sub, email (only when email_verified), or
    /// another claim [default: sub].
    #[arg(long, value_name = "CLAIM", requires = "login_oidc_issuer")]
    pub user_claim: Option<String>,
    /// An acr value that counts as a second factor (repeatable); also sent
    /// as acr_values when a permission needs one.
    #[arg(long, value_name = "VALUE", requires = "login_oidc_issuer")]
    pub mfa_acr: Vec<String>,
    /// How long new grants last, 1–365 days.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=365))]
    pub grant_ttl_days: Option<i64>,
    /// Which personal agents the brand admits (PACT §3.1): allowlist,
    /// registry, open, or default (the Provider's `--admission`).
    #[arg(long, value_name = "POLICY", value_parser = ["allowlist", "registry", "open", "default"])]
    pub admission: Option<String>,
    /// Answer the brand with the merchant's own agent at this URL (https);
    /// the first time, prints the webhook signing secret once.
    #[arg(long, value_name = "URL", conflicts_with = "demo_agent")]
    pub agent_url: Option<String>,
    /// How long pactd waits for the agent, 100–25000 ms [default: 20000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i32).range(100..=25000))]
    pub agent_timeout_ms: Option<i32>,
    /// How long pactd waits for a tool, 100–25000 ms [default: 10000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(i32).range(100..=25000))]
    pub tool_timeout_ms: Option<i32>,
    /// Answer the brand with the built-in demo agent again.
    #[arg(long)]
    pub demo_agent: bool,
    /// The brand's logo on its pages: a PNG, JPEG or WebP file, at most 256 KiB.
    #[arg(long, value_name = "FILE", conflicts_with = "no_logo")]
    pub logo: Option<PathBuf>,
    /// Remove the brand's logo.
    #[arg(long)]
    pub no_logo: bool,
    /// The brand's colour for buttons and links, #rrggbb, with at least 4.5:1
    /// contrast to white ("none" removes it).
    #[arg(long, value_name = "#RRGGBB")]
    pub accent: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ScopeCommand {
    /// Add or update a scope; the description is shown verbatim on consent.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        scope_id: String,
        description: String,
        /// Consenting to it needs a second factor in the session.
        #[arg(long)]
        requires_mfa: bool,
        /// Agents admitted under the open policy and not yet verified by
        /// staff may request it (by default they may not).
        #[arg(long)]
        unverified_allowed: bool,
    },
    Remove {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        scope_id: String,
    },
    List {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
    },
}

#[derive(Debug, Subcommand)]
pub enum DetailsTypeCommand {
    /// Declare a type, e.g. --json '{"scope":"orders:cancel","description":"Cancel only {order_ids}",
    /// "fields":{"order_ids":{"type":"string_array","required":true}}}'. Field kinds: string,
    /// string_array, enum (with "values"), amount, count, cumulative_amount, date_window,
    /// time_window. Which argument a field limits is the tools' --enforce rule.
    Add {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        type_name: String,
        #[arg(long)]
        json: String,
    },
    Remove {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
        type_name: String,
    },
    List {
        #[arg(value_parser = BrandId::parse)]
        brand_id: BrandId,
    },
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Register (or update) a personal-agent platform.
    Add {
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        jwks_uri: String,
        #[arg(long)]
        name: Option<String>,
        /// This PA's own limit for all its users together: RATE,BURST per
        /// second [default: the node's --rate-limit-pa].
        #[arg(long, value_name = "RATE,BURST")]
        rate_limit_pa: Option<String>,
        /// This PA's own limit per user: RATE,BURST [default: the node's --rate-limit-user].
        #[arg(long, value_name = "RATE,BURST")]
        rate_limit_user: Option<String>,
        /// The platform's logo (RFC 7591 §2 logo_uri), fetched now by pactd
        /// and served from pactd's own origin on consent ("" removes it).
        #[arg(long, value_name = "URL")]
        logo_uri: Option<String>,
        /// The platform's homepage (RFC 7591 §2 client_uri), linked on consent ("" removes it).
        #[arg(long, value_name = "URL")]
        homepage: Option<String>,
        /// The platform's privacy policy (RFC 7591 §2 policy_uri) ("" removes it).
        #[arg(long, value_name = "URL")]
        policy_uri: Option<String>,
        /// The platform's terms of service (RFC 7591 §2 tos_uri) ("" removes it).
        #[arg(long, value_name = "URL")]
        tos_uri: Option<String>,
        /// Fetch the logo from a loopback address (development, like
        /// `--allow-loopback-jwks`); without it the fetch is under the same
        /// SSRF guard as every other outbound fetch.
        #[arg(long)]
        allow_loopback: bool,
    },
    /// Set (or, without flags, clear) a registered PA's own rate limits.
    Limits {
        #[arg(long)]
        issuer: String,
        /// All its users together: RATE,BURST per second [default: the node's].
        #[arg(long, value_name = "RATE,BURST")]
        rate_limit_pa: Option<String>,
        /// Per user: RATE,BURST [default: the node's].
        #[arg(long, value_name = "RATE,BURST")]
        rate_limit_user: Option<String>,
    },
    /// Refuse this PA from the next request on, revoking every grant it holds.
    Disable {
        #[arg(long)]
        issuer: String,
        /// Stored with every grant this revokes and shown to each customer
        /// whose access ends (at most 200 characters).
        #[arg(long, default_value = "personal agent disabled")]
        reason: String,
    },
    /// Admit this PA again.
    Enable {
        #[arg(long)]
        issuer: String,
    },
    /// Move an agent the open policy admitted into the verified tier (PACT
    /// §3.1): brands that allowlist admit it, and it may request every scope.
    /// To block one, disable it.
    Verify {
        #[arg(long)]
        issuer: String,
    },
    /// Forget an unverified agent with its conversations and grants (it may
    /// be admitted again under the open policy).
    Forget {
        #[arg(long)]
        issuer: String,
    },
    /// List registered PAs and those admitted under the open policy, with
    /// their tier.
    List,
    /// Block every issuer on a host and under it (`evil.example` blocks
    /// `a.evil.example`): none is admitted under the open policy or taken
    /// from a registry list, and the agents stored there are disabled with
    /// their grants revoked, on every node.
    BlockHost {
        /// A DNS name, or a URL on it.
        #[arg(long)]
        host: String,
        /// Stored with every grant this revokes (at most 200 characters).
        #[arg(long)]
        reason: String,
    },
    /// Lift a host's block (the agents it disabled stay disabled).
    UnblockHost {
        #[arg(long)]
        host: String,
    },
    /// The blocked hosts.
    BlockedHosts,
}

#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Trust a registry: its list is fetched from URL and must be signed by
    /// one of the pinned keys (docs/operations.md, "Trusted registries").
    Add {
        /// A short name, shown as the tier of the agents it lists.
        name: String,
        #[arg(long)]
        url: String,
        /// A file holding the registry's public keys: a JWKS, an array of
        /// JWKs or one JWK (ES256, each with a kid).
        #[arg(long, value_name = "FILE")]
        keys: PathBuf,
        /// Seconds between two fetches of the list [default: 3600].
        #[arg(long, value_name = "SECS")]
        refresh_secs: Option<i32>,
        /// Allow a loopback URL (development, like `--allow-loopback-jwks`).
        #[arg(long)]
        allow_loopback: bool,
    },
    /// The registries, with what their last fetch did.
    List,
    /// Fetch and apply a registry's list now.
    Refresh {
        name: String,
        /// Allow a loopback URL (development).
        #[arg(long)]
        allow_loopback: bool,
    },
    /// Stop trusting a registry: the agents it listed are no longer admitted
    /// and their grants are revoked.
    Remove { name: String },
}
