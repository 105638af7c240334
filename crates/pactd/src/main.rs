//! `pactd`: the PACT Provider server and its admin commands.

mod admin;
mod admin_accounts;
mod admin_merchant;
mod admin_oidc;
mod cli;
mod commands;
mod database;
mod healthcheck;
mod master_key;
mod rewrap;
mod settings;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    init_tracing(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Human-readable logs by default, JSON with `--log-format json`
/// (`PACTD_LOG_FORMAT=json`); level from `RUST_LOG`. Logs never carry tokens:
/// handlers log reasons and ids only.
fn init_tracing(format: cli::LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if format == cli::LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}
