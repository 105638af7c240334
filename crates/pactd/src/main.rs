//! `pactd`: the PACT Provider server and its admin commands.

mod admin;
mod admin_accounts;
mod admin_merchant;
mod admin_oidc;
mod admin_registry;
mod cli;
mod commands;
mod database;
mod healthcheck;
mod master_key;
mod otel;
mod rewrap;
mod settings;

use clap::Parser;

/// mimalloc instead of the system allocator: a request allocates and frees
/// many small buffers (headers, JSON, SQL rows), and glibc's malloc spent
/// about a tenth of the server's CPU on them under load (docs/performance.md,
/// "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    // Traces are exported by the servers only, and only when asked for.
    let provider = if matches!(cli.command, cli::Command::Serve(_) | cli::Command::Dev(_)) {
        match otel::from_env() {
            Ok(p) => p,
            Err(e) => {
                eprintln!("error: {}", once(&e));
                return std::process::ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    // The operator commands speak to the person at the terminal: their
    // output is the answer, and progress lines ("local PostgreSQL is ready")
    // are noise unless asked for with -v (issue 30, item 10). Warnings and
    // errors are always shown.
    let server = matches!(cli.command, cli::Command::Serve(_) | cli::Command::Dev(_));
    let level = if server || cli.verbose {
        "info"
    } else {
        "warn"
    };
    init_tracing(cli.log_format, level, provider.as_ref());
    let code = run(cli);
    // After the drain: what the last requests traced is sent before the exit.
    if let Some(provider) = provider {
        otel::shutdown(&provider);
    }
    code
}

fn run(cli: cli::Cli) -> std::process::ExitCode {
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
            eprintln!("error: {}", once(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each said once. Many errors put
/// their cause in their own message too (`"mail: {0}"` over the mail error):
/// anyhow's `{:#}` then printed it twice ("mail: invalid SMTP URL: invalid
/// SMTP URL"). A cause whose text already ends the line is left out.
fn once(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Human-readable logs by default, JSON with `--log-format json`
/// (`PACTD_LOG_FORMAT=json`); level from `RUST_LOG`, else `level`. Logs never carry tokens:
/// handlers log reasons and ids only. With trace export on, the log lines of
/// a request carry its `trace_id` and `span_id` (fields of the `http` span),
/// and the OpenTelemetry layers get their own filter, so `RUST_LOG` decides
/// what is logged and not what is traced.
fn init_tracing(
    format: cli::LogFormat,
    level: &str,
    provider: Option<&opentelemetry_sdk::trace::SdkTracerProvider>,
) {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        if level == "info" {
            EnvFilter::new("info,sqlx=warn,tower_http=info")
        } else {
            EnvFilter::new(level)
        }
    });
    let Some(provider) = provider else {
        // No export: the plain subscriber, as cheap as before tracing existed.
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr);
        if format == cli::LogFormat::Json {
            builder.json().init();
        } else {
            builder.init();
        }
        return;
    };
    pact_server::trace_context::enable();
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let fmt = if format == cli::LogFormat::Json {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel::layers(provider))
        .init();
}
