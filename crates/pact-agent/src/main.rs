//! `pact-agent`: a PACT personal agent on the command line, and a
//! conformance suite for any PACT provider. A thin wrapper over the library.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use clap::{Parser, Subcommand, ValueEnum};
use pact_agent::card;
use pact_agent::client::{self, Agent, ConnectOptions, Reply, SendOptions, TerminalUi};
use pact_agent::conformance::{
    self, Approver, CommandApprover, Config, InteractiveApprover, JwksServing, Outcome,
    PactdLoginApprover, Profile,
};
use pact_agent::http::Http;
use pact_agent::jwks_server::{JWKS_PATH, JwksServer};
use pact_agent::pactd_login::LoginAccount;
use pact_agent::state::{Home, Identity, InitOptions};
use pact_agent::totp::TotpSecret;

#[derive(Parser)]
#[command(
    name = "pact-agent",
    version,
    about = "A PACT personal agent, and a conformance suite for PACT providers"
)]
struct Cli {
    /// State directory (default: $PACT_AGENT_HOME, else ~/.pact-agent).
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the agent's identity: an ES256 key (kid = RFC 7638 thumbprint) and settings.
    Init {
        /// The issuer the Provider registers (default: https://pact-agent.invalid/<kid prefix>).
        #[arg(long)]
        issuer: Option<String>,
        /// The PA-JWT audience the Provider assigned (pactd: <public-url>/a2a).
        #[arg(long)]
        audience: Option<String>,
        /// The default `sub` (a stable opaque user id; default: random).
        #[arg(long)]
        sub: Option<String>,
        /// The name proposed for registration.
        #[arg(long)]
        name: Option<String>,
        /// The JWKS URI to register, when the JWKS is served elsewhere (e.g. behind HTTPS).
        #[arg(long)]
        jwks_uri: Option<String>,
        /// The address `serve-jwks` and `conformance` listen on.
        #[arg(long)]
        jwks_listen: Option<SocketAddr>,
        /// Replace an existing identity (its key must then be registered again).
        #[arg(long)]
        force: bool,
    },
    /// Show the identity.
    Whoami,
    /// Publish the JWKS at /.well-known/jwks.json and print the registration command.
    ServeJwks {
        /// Address to listen on (default: the stored one, else 127.0.0.1:9000).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The public URL of the JWKS when a proxy serves it (stored as the JWKS URI).
        #[arg(long)]
        public_uri: Option<String>,
    },
    /// Print a PA-JWT (PACT §3) for curl and friends.
    PaJwt {
        #[arg(long)]
        sub: Option<String>,
        #[arg(long)]
        audience: Option<String>,
    },
    /// Fetch an Agent Card, validate it (PACT §2) and summarise it.
    Card { card_url: String },
    /// Send a message and print the reply.
    Send {
        card_url: String,
        text: String,
        /// Continue this conversation (default: the remembered one for this brand and sub).
        #[arg(long)]
        context: Option<String>,
        /// Start a new conversation.
        #[arg(long)]
        new: bool,
        #[arg(long)]
        sub: Option<String>,
        #[arg(long)]
        audience: Option<String>,
        /// On a step-up, print the store's message and stop instead of waiting
        /// for the approval and asking again (waiting is the default).
        #[arg(long, alias = "no-auto-connect")]
        no_wait: bool,
        /// Accepted for compatibility: following a step-up is now the default.
        #[arg(long, hide = true, conflicts_with = "no_wait")]
        auto_connect: bool,
        /// Print the delegation tokens when they change.
        #[arg(long)]
        show_tokens: bool,
        /// Do not draw the verification link as a QR code.
        #[arg(long)]
        no_qr: bool,
    },
    /// Ask the person for permissions (RFC 8628 device flow) and keep the tokens.
    Connect {
        card_url: String,
        /// A scope to ask for (repeat).
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        #[arg(long)]
        sub: Option<String>,
        #[arg(long)]
        audience: Option<String>,
        /// Start over with a new code when one expires.
        #[arg(long)]
        restart_on_expiry: bool,
        /// RFC 9396 authorization_details (a JSON array).
        #[arg(long)]
        authorization_details: Option<String>,
        #[arg(long)]
        show_tokens: bool,
        #[arg(long)]
        no_qr: bool,
    },
    /// List the kept receipts and verify them again (signatures and chains).
    Receipts {
        #[arg(long)]
        audience: Option<String>,
    },
    /// Check a PACT provider, rule by rule (docs/protocol.md §2–6).
    Conformance(Box<ConformanceArgs>),
}

#[derive(Clone, Copy, ValueEnum)]
enum ProfileArg {
    Identity,
    Delegated,
}

#[derive(Clone, Copy, ValueEnum)]
enum ApproveArg {
    Interactive,
    PactdLogin,
    /// Run the program after `--` for each decision (the request is in its environment).
    Command,
}

#[derive(clap::Args)]
struct ConformanceArgs {
    /// The brand's Agent Card URL.
    card_url: Option<String>,
    /// The registered issuer (creates the identity in --home when there is none).
    #[arg(long)]
    issuer: Option<String>,
    /// The Provider-assigned audience.
    #[arg(long)]
    audience: Option<String>,
    #[arg(long, value_enum, default_value = "delegated")]
    profile: ProfileArg,
    /// A second brand's card URL at the same Provider.
    #[arg(long)]
    other_brand: Option<String>,
    /// Who approves device authorizations: a person (interactive), pactd's
    /// own pages (pactd-login), or `command -- <program> [args]`, run with
    /// PACT_VERIFICATION_URI(_COMPLETE), PACT_USER_CODE, PACT_REQUESTED_SCOPES,
    /// PACT_DECISION, PACT_APPROVE_SCOPES, PACT_DENY_SCOPES, PACT_ACCOUNT,
    /// PACT_BRAND, PACT_BRAND_NAME and PACT_PURPOSE in its environment.
    #[arg(long, value_enum, default_value = "interactive")]
    approve: ApproveArg,
    /// command: the program and its arguments, after `--`.
    #[arg(last = true)]
    approve_command: Vec<String>,
    /// command: longest wait for one decision, in seconds.
    #[arg(long, default_value_t = 120)]
    approve_timeout: u64,
    /// pactd-login: the email of a built-in account at the brand.
    #[arg(long)]
    login_email: Option<String>,
    /// pactd-login: its password.
    #[arg(long, env = "PACT_AGENT_LOGIN_PASSWORD", hide_env_values = true)]
    login_password: Option<String>,
    /// pactd-login: its authenticator secret (base32, as authenticator apps take it).
    #[arg(long, env = "PACT_AGENT_TOTP_SECRET", hide_env_values = true)]
    totp_secret: Option<String>,
    /// pactd-login: a second account at the brand (for §5.5's one-user-per-context check).
    #[arg(long)]
    second_login_email: Option<String>,
    /// pactd-login: the second account's password.
    #[arg(long, env = "PACT_AGENT_SECOND_LOGIN_PASSWORD", hide_env_values = true)]
    second_login_password: Option<String>,
    /// pactd-login: the second account's authenticator secret (base32).
    #[arg(long, env = "PACT_AGENT_SECOND_TOTP_SECRET", hide_env_values = true)]
    second_totp_secret: Option<String>,
    /// Write the report: *.xml as JUnit, anything else as JSON.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Serve the agent's JWKS here during the run; it must be the registered URI's address.
    #[arg(long)]
    jwks_listen: Option<SocketAddr>,
    /// Also show pactd's conventions (INFO when not followed; they never fail a run).
    #[arg(long, alias = "pactd-rules")]
    pactd: bool,
    /// Show every check, pactd's conventions included.
    #[arg(long, short)]
    verbose: bool,
    /// A message that needs a scope.
    #[arg(long, default_value = "Show me my orders")]
    scoped_prompt: String,
    /// A message anyone gets an answer to.
    #[arg(long, default_value = "When are you open?")]
    public_prompt: String,
    /// Only checks whose names start with this (repeat).
    #[arg(long)]
    only: Vec<String>,
    /// Longest single wait, in seconds (e.g. for a device code to expire).
    #[arg(long, default_value_t = 30)]
    max_wait: u64,
    /// Print what the Provider must register, and exit.
    #[arg(long)]
    print_registration: bool,
    /// List every check with its level and source, and exit.
    #[arg(long)]
    list_checks: bool,
    /// With --list-checks: as Markdown (docs/conformance-checks.md).
    #[arg(long, requires = "list_checks")]
    markdown: bool,
    #[arg(long)]
    no_qr: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let home = Home::resolve(cli.home)?;
    match cli.command {
        Command::Init {
            issuer,
            audience,
            sub,
            name,
            jwks_uri,
            jwks_listen,
            force,
        } => {
            let jwks_uri = jwks_uri.or_else(|| jwks_listen.map(jwks_uri_of));
            let id = home.init(InitOptions {
                issuer,
                audience,
                sub,
                name,
                jwks_uri,
                jwks_listen: jwks_listen.map(|a| a.to_string()),
                force,
            })?;
            println!("Created an identity in {}", home.dir().display());
            print_identity(&id);
            println!();
            match &id.settings.jwks_uri {
                Some(uri) => {
                    println!("Register it with the Provider:");
                    println!("    {}", id.registration_line(uri));
                }
                None => println!(
                    "Next: `pact-agent serve-jwks --listen 127.0.0.1:9000` publishes the JWKS and prints the registration command."
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Whoami => {
            let id = home.identity()?;
            println!("home: {}", home.dir().display());
            print_identity(&id);
            Ok(ExitCode::SUCCESS)
        }
        Command::ServeJwks { listen, public_uri } => serve_jwks(&home, listen, public_uri).await,
        Command::PaJwt { sub, audience } => {
            let agent = Agent::load(home, audience.as_deref())?;
            let sub = agent.sub(sub.as_deref());
            println!("{}", agent.signer.token(&sub)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Card { card_url } => {
            let http = Http::new()?;
            let (_, info) = card::fetch(&http, &card_url).await?;
            print!("{}", card::summary(&info));
            let problems = card::validate(&info.card);
            if problems.is_empty() {
                println!("The card follows PACT §2.");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("The card does not follow PACT §2:");
                for p in problems {
                    println!("  - {p}");
                }
                Ok(ExitCode::from(1))
            }
        }
        Command::Send {
            card_url,
            text,
            context,
            new,
            sub,
            audience,
            no_wait,
            auto_connect: _,
            show_tokens,
            no_qr,
        } => {
            let agent = Agent::load(home, audience.as_deref())?;
            let mut ui = TerminalUi { qr: !no_qr };
            let reply = client::send(
                &agent,
                &SendOptions {
                    card_url,
                    text,
                    context,
                    new_conversation: new,
                    sub,
                    no_wait,
                    show_tokens,
                },
                &mut ui,
            )
            .await?;
            match reply {
                Reply::Message { text, context_id } => {
                    println!("{text}");
                    eprintln!("(context {context_id})");
                    Ok(ExitCode::SUCCESS)
                }
                Reply::StepUp { text, missing, .. } => {
                    println!("{text}");
                    let scopes: String = missing.iter().map(|s| format!(" --scope {s}")).collect();
                    if no_wait {
                        // pactd gives this device authorization the step-up
                        // one the link names, so the approval is collected.
                        eprintln!(
                            "(needs permission: {}; after approving the link, run `pact-agent \
                             connect <card-url>{scopes}` to collect it, then send again)",
                            missing.join(", ")
                        );
                    } else {
                        eprintln!(
                            "(still needs permission after the approval: {}; the person did \
                             not grant it)",
                            missing.join(", ")
                        );
                    }
                    Ok(ExitCode::from(3))
                }
            }
        }
        Command::Connect {
            card_url,
            scopes,
            sub,
            audience,
            restart_on_expiry,
            authorization_details,
            show_tokens,
            no_qr,
        } => {
            let agent = Agent::load(home, audience.as_deref())?;
            let mut ui = TerminalUi { qr: !no_qr };
            let stored = client::connect(
                &agent,
                &ConnectOptions {
                    card_url,
                    scopes,
                    sub,
                    restart_on_expiry,
                    show_tokens,
                    authorization_details,
                },
                &mut ui,
            )
            .await?;
            if show_tokens && let Some(s) = client::token_summary(&stored.access_token) {
                println!("{s}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Receipts { audience } => {
            let agent = Agent::load(home, audience.as_deref())?;
            let checks = client::check_receipts(&agent).await?;
            if checks.is_empty() {
                println!("No receipts kept yet.");
                return Ok(ExitCode::SUCCESS);
            }
            let mut ok = true;
            for c in &checks {
                let claims = c.stored.receipt.get("claims").cloned().unwrap_or_default();
                let s = |k: &str| {
                    claims
                        .get(k)
                        .and_then(|v| v.as_str())
                        .unwrap_or("?")
                        .to_owned()
                };
                let list = |k: &str| {
                    claims
                        .get(k)
                        .and_then(|v| v.as_array())
                        .map(|a| {
                            a.iter()
                                .map(|x| {
                                    x.as_str()
                                        .map(str::to_owned)
                                        .or_else(|| {
                                            x.get("tool")
                                                .and_then(|t| t.as_str())
                                                .map(str::to_owned)
                                        })
                                        .unwrap_or_default()
                                })
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                        .unwrap_or_default()
                };
                let sig = match &c.signature {
                    Ok(()) => "signature ok".to_owned(),
                    Err(e) => {
                        ok = false;
                        format!("SIGNATURE FAILED: {e}")
                    }
                };
                let chain = match &c.chain {
                    None => "no chain".to_owned(),
                    Some(Ok(())) => "chain ok".to_owned(),
                    Some(Err(e)) => {
                        ok = false;
                        format!("CHAIN BROKEN: {e}")
                    }
                };
                println!(
                    "{}  {}  grant {}  scopes [{}]  actions [{}]  {sig}; {chain}",
                    s("ts"),
                    c.stored.brand,
                    s("grantId"),
                    list("scopesUsed"),
                    list("actions")
                );
            }
            // The Provider's receipt log (pactd extension, RFC 9162): heads
            // held, consistency with newer ones, inclusion of each receipt.
            let kept: Vec<_> = checks.iter().map(|c| c.stored.clone()).collect();
            for report in
                pact_agent::receipt_log::check_all(&agent.http, &agent.home, &kept).await?
            {
                if report.failed() {
                    ok = false;
                }
                println!("{}  {}", report.tree_head_uri, report.line());
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Conformance(args) => conformance_command(&home, *args).await,
    }
}

/// The accounts `--approve pactd-login` signs in with.
fn pactd_login_approver(args: &ConformanceArgs) -> Result<PactdLoginApprover> {
    let account = |email: &Option<String>,
                   password: &Option<String>,
                   totp: &Option<String>,
                   flags: (&str, &str, &str)|
     -> Result<Option<LoginAccount>> {
        let (email_flag, password_flag, totp_flag) = flags;
        let Some(email) = email else {
            return Ok(None);
        };
        let password = password.clone().ok_or_else(|| {
            anyhow!("--approve pactd-login needs {password_flag} for {email_flag}")
        })?;
        let totp = totp
            .as_deref()
            .map(TotpSecret::from_base32)
            .transpose()
            .with_context(|| totp_flag.to_owned())?;
        Ok(Some(LoginAccount::new(email.clone(), password, totp)))
    };
    let primary = account(
        &args.login_email,
        &args.login_password,
        &args.totp_secret,
        (
            "--login-email",
            "--login-password (or PACT_AGENT_LOGIN_PASSWORD)",
            "--totp-secret",
        ),
    )?
    .ok_or_else(|| anyhow!("--approve pactd-login needs --login-email"))?;
    let secondary = account(
        &args.second_login_email,
        &args.second_login_password,
        &args.second_totp_secret,
        (
            "--second-login-email",
            "--second-login-password (or PACT_AGENT_SECOND_LOGIN_PASSWORD)",
            "--second-totp-secret",
        ),
    )?;
    if secondary.is_none() && matches!(args.profile, ProfileArg::Delegated) {
        eprintln!(
            "note: without --second-login-email, §5.5.context-other-user and \
             §5.3.refresh-reuse-revokes SKIP (they need a second account)"
        );
    }
    PactdLoginApprover::new(primary, secondary)
}

fn jwks_uri_of(addr: SocketAddr) -> String {
    format!("http://{addr}{JWKS_PATH}")
}

fn print_identity(id: &Identity) {
    let s = &id.settings;
    println!("issuer:      {}", s.issuer);
    println!("kid:         {}", s.kid);
    println!(
        "audience:    {}",
        s.audience.as_deref().unwrap_or("(none: pass --audience)")
    );
    println!("default sub: {}", s.default_sub);
    println!(
        "JWKS URI:    {}",
        s.jwks_uri.as_deref().unwrap_or("(not set)")
    );
}

async fn serve_jwks(
    home: &Home,
    listen: Option<SocketAddr>,
    public_uri: Option<String>,
) -> Result<ExitCode> {
    let mut id = home.identity()?;
    let addr = match listen {
        Some(a) => a,
        None => id
            .settings
            .jwks_listen
            .as_deref()
            .unwrap_or("127.0.0.1:9000")
            .parse()
            .context("the stored jwks_listen is not an address")?,
    };
    // Also the OpenID discovery document naming the JWKS, for Providers that
    // admit unregistered agents (PACT §3.1, `pactd serve --admission open`):
    // reachable when the issuer is this server's origin.
    let listener_uri = format!("http://{addr}{}", pact_client::jwks_server::JWKS_PATH);
    let doc_jwks_uri = public_uri.clone().unwrap_or(listener_uri);
    // A port still to be picked (0) cannot be named in the document.
    let discovery = (addr.port() != 0 || public_uri.is_some())
        .then(|| (id.settings.issuer.clone(), doc_jwks_uri));
    let server = JwksServer::start_discoverable(addr, id.key.jwks(), discovery).await?;
    let served = public_uri.clone().unwrap_or_else(|| server.uri());
    let stable = server.addr().port() != 0 && addr.port() != 0;
    let changed = id.settings.jwks_uri.as_deref() != Some(served.as_str());
    if stable
        && (id.settings.jwks_uri.is_none() || listen.is_some() || public_uri.is_some())
        && changed
    {
        if let Some(old) = &id.settings.jwks_uri {
            eprintln!(
                "note: the stored JWKS URI was {old}; it is now {served} (register it again)"
            );
        }
        id.settings.jwks_uri = Some(served.clone());
        id.settings.jwks_listen = Some(server.addr().to_string());
        home.save_settings(&id.settings)?;
    } else if changed && let Some(old) = &id.settings.jwks_uri {
        eprintln!("warning: the registered JWKS URI is {old}, but this serves {served}");
    }
    println!(
        "Serving the JWKS (kid {}) at {}",
        id.key.kid(),
        server.uri()
    );
    println!("Register this agent with the Provider (pactd):");
    println!("    {}", id.registration_line(&served));
    println!("(Ctrl-C to stop; the URI must stay stable, keys rotate behind it.)");
    tokio::select! {
        () = server.wait() => {}
        r = tokio::signal::ctrl_c() => { r.ok(); }
    }
    Ok(ExitCode::SUCCESS)
}

async fn conformance_command(home: &Home, args: ConformanceArgs) -> Result<ExitCode> {
    if args.list_checks {
        let out = if args.markdown {
            conformance::checks_markdown()
        } else {
            list_checks()
        };
        // A closed pipe (`| head`) is not worth a panic.
        std::io::stdout().write_all(out.as_bytes()).ok();
        return Ok(ExitCode::SUCCESS);
    }
    // The identity: the one in --home, or a new one for --issuer.
    let mut id = if home.has_identity() {
        let id = home.identity()?;
        if let Some(issuer) = &args.issuer
            && issuer != &id.settings.issuer
        {
            bail!(
                "{} holds the identity of {}, not {issuer}; pass another --home",
                home.dir().display(),
                id.settings.issuer
            );
        }
        id
    } else {
        let issuer = args.issuer.clone().ok_or_else(|| {
            anyhow!(
                "no identity in {}: pass --issuer (and --audience)",
                home.dir().display()
            )
        })?;
        eprintln!(
            "Creating an identity for {issuer} in {}",
            home.dir().display()
        );
        home.init(InitOptions {
            issuer: Some(issuer),
            audience: args.audience.clone(),
            ..Default::default()
        })?
    };
    let audience = args
        .audience
        .clone()
        .or_else(|| id.settings.audience.clone())
        .ok_or_else(|| {
            anyhow!(
                "pass --audience (the Provider-assigned PA-JWT audience; pactd: <public-url>/a2a)"
            )
        })?;
    if id.settings.audience.is_none() {
        id.settings.audience = Some(audience.clone());
        home.save_settings(&id.settings)?;
    }

    // Where the JWKS comes from during the run. The registered URI must not
    // change between runs, so a fixed --jwks-listen is stored.
    let jwks = match args.jwks_listen {
        Some(addr) => {
            let uri = jwks_uri_of(addr);
            if addr.port() != 0 && id.settings.jwks_uri.as_deref() != Some(uri.as_str()) {
                if let Some(old) = &id.settings.jwks_uri {
                    eprintln!(
                        "note: the stored JWKS URI was {old}; it is now {uri} (register it again)"
                    );
                }
                id.settings.jwks_uri = Some(uri);
                id.settings.jwks_listen = Some(addr.to_string());
                home.save_settings(&id.settings)?;
            }
            JwksServing::Serve(addr)
        }
        None => match (&id.settings.jwks_listen, &id.settings.jwks_uri) {
            (Some(listen), _) => JwksServing::Serve(
                listen
                    .parse()
                    .context("the stored jwks_listen is not an address")?,
            ),
            (None, Some(_)) => JwksServing::External,
            (None, None) => {
                eprintln!(
                    "warning: no JWKS address is stored, so this run serves the JWKS on an ephemeral port that \
                     cannot have been registered. Use --jwks-listen 127.0.0.1:9000 (once) and register the URI it prints."
                );
                JwksServing::Serve(([127, 0, 0, 1], 0).into())
            }
        },
    };

    if args.print_registration {
        let uri = match jwks {
            JwksServing::Serve(addr) if addr.port() != 0 => jwks_uri_of(addr),
            _ => id
                .settings
                .jwks_uri
                .clone()
                .ok_or_else(|| anyhow!("no JWKS URI yet: pass --jwks-listen ADDR"))?,
        };
        println!("{}", id.registration_line(&uri));
        println!("(audience this agent uses: {audience})");
        return Ok(ExitCode::SUCCESS);
    }

    let card_url = args
        .card_url
        .clone()
        .ok_or_else(|| anyhow!("pass the brand's card URL"))?;
    let mut config = Config::new(card_url, id.clone(), audience);
    config.profile = match args.profile {
        ProfileArg::Identity => Profile::Identity,
        ProfileArg::Delegated => Profile::Delegated,
    };
    config.other_brand = args.other_brand.clone();
    config.jwks = jwks;
    config.scoped_prompt = args.scoped_prompt.clone();
    config.public_prompt = args.public_prompt.clone();
    config.only = args.only.clone();
    config.max_wait = Duration::from_secs(args.max_wait);
    let show_pactd = args.pactd || args.verbose;
    config.progress = Some(Arc::new(move |c: &conformance::Check| {
        if show_pactd || c.shown_by_default() {
            println!("{}", c.line());
        }
    }));

    let approver: Box<dyn Approver> = match args.approve {
        ApproveArg::Interactive => Box::new(InteractiveApprover { qr: !args.no_qr }),
        ApproveArg::PactdLogin => Box::new(pactd_login_approver(&args)?),
        ApproveArg::Command => {
            let Some((program, rest)) = args.approve_command.split_first() else {
                bail!(
                    "--approve command needs the program after `--`: --approve command -- ./approve.py"
                );
            };
            let mut c = CommandApprover::new(program.clone(), rest.to_vec());
            c.timeout = Duration::from_secs(args.approve_timeout);
            Box::new(c)
        }
    };
    if !args.approve_command.is_empty() && !matches!(args.approve, ApproveArg::Command) {
        bail!("a program after `--` is only for --approve command");
    }
    let report = conformance::run(config, approver.as_ref()).await;
    println!();
    let failed: Vec<&conformance::Check> = report
        .checks
        .iter()
        .filter(|c| c.outcome == Outcome::Fail)
        .collect();
    if !failed.is_empty() {
        println!("Failed:");
        for c in &failed {
            println!(
                "  {} [{}] — {}",
                c.name(),
                c.source,
                c.reason.lines().next().unwrap_or("")
            );
        }
    }
    if let Some(c) = report.get("§3.valid-token-accepted")
        && c.outcome == Outcome::Fail
        && c.reason.contains("pactd agent add")
    {
        println!();
        println!("{}", c.reason);
    }
    let hidden = report
        .checks
        .iter()
        .filter(|c| !c.shown_by_default() && c.outcome == Outcome::Info)
        .count();
    if hidden > 0 && !show_pactd {
        println!("({hidden} pactd conventions not followed: INFO, shown with --pactd)");
    }
    println!(
        "{} in {:.1} s",
        report.summary(),
        report.duration.as_secs_f64()
    );
    if let Some(path) = &args.report {
        let text = if path.extension().is_some_and(|e| e == "xml") {
            report.to_junit()
        } else {
            serde_json::to_string_pretty(&report.to_json())?
        };
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("report written to {}", path.display());
    }
    if let Some(path) = &args.html {
        std::fs::write(path, report.to_html())
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("HTML report written to {}", path.display());
    }
    Ok(if report.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--list-checks`: every check by section, with its level and source.
fn list_checks() -> String {
    let mut out = String::new();
    let mut section = "";
    for id in conformance::RuleId::ALL {
        let rule = id.rule();
        if rule.section() != section {
            section = rule.section();
            out.push_str(section);
            out.push('\n');
        }
        out.push_str(&format!(
            "  {:<40} {:<6} {}\n  {:<40}        from {}: \"{}\"\n",
            rule.name,
            rule.level.as_str(),
            rule.text,
            "",
            rule.source,
            rule.quote
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn no_wait_of(args: &[&str]) -> Result<bool, clap::Error> {
        let mut argv = vec!["pact-agent", "send", "http://card", "hello"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Send { no_wait, .. } => Ok(no_wait),
            _ => panic!("not send"),
        }
    }

    /// Following a step-up is the default (issue 9); `--no-wait` and its
    /// alias turn it off; the old `--auto-connect` still parses.
    #[test]
    fn send_waits_for_a_step_up_unless_told_not_to() {
        assert!(!no_wait_of(&[]).unwrap());
        assert!(!no_wait_of(&["--auto-connect"]).unwrap());
        assert!(no_wait_of(&["--no-wait"]).unwrap());
        assert!(no_wait_of(&["--no-auto-connect"]).unwrap());
        assert!(no_wait_of(&["--no-wait", "--auto-connect"]).is_err());
    }

    #[test]
    fn approve_command_takes_the_program_after_the_double_dash() {
        let cli = Cli::try_parse_from([
            "pact-agent",
            "conformance",
            "http://card",
            "--approve",
            "command",
            "--pactd-rules",
            "--",
            "python3",
            "approve.py",
            "--flag",
        ])
        .unwrap();
        let Command::Conformance(args) = cli.command else {
            panic!("not conformance");
        };
        assert!(matches!(args.approve, ApproveArg::Command));
        assert_eq!(args.approve_command, ["python3", "approve.py", "--flag"]);
        assert!(args.pactd, "--pactd-rules is still accepted");
    }
}
