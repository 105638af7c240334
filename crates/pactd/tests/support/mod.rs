//! What every test file that runs the real `pactd` binary shares: a clean
//! command, running it to its end, free ports and repository files. Each test
//! file is its own binary and uses part of this, hence `dead_code` allowed.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::process::Command;

pub const PACTD: &str = env!("CARGO_BIN_EXE_pactd");

/// How long an admin command may take (it migrates, and may start the private cluster).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// `pactd` with none of the caller's settings leaking in: every `PACTD_*`
/// and `DATABASE_URL*` variable and `RUST_LOG` are removed.
pub fn pactd() -> Command {
    let mut cmd = Command::new(PACTD);
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("PACTD_") || name.starts_with("DATABASE_URL") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// The outcome of a command that ran to its end.
pub struct Run {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn describe(&self) -> String {
        format!(
            "`pactd {}` exited with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.status, self.stdout, self.stderr
        )
    }

    /// Asserts success and returns stdout.
    pub fn succeeded(&self) -> &str {
        assert!(self.status.success(), "{}", self.describe());
        &self.stdout
    }

    /// Asserts a non-zero exit (not a signal) and returns stderr.
    pub fn failed(&self) -> &str {
        assert!(
            !self.status.success() && self.status.code().is_some(),
            "expected a non-zero exit: {}",
            self.describe()
        );
        &self.stderr
    }
}

/// Runs `cmd args` to its end (at most [`COMMAND_TIMEOUT`]).
pub async fn run(mut cmd: Command, args: &[&str]) -> Run {
    let what = args.join(" ");
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = tokio::time::timeout(COMMAND_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("`pactd {what}` did not finish within {COMMAND_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("cannot run `pactd {what}`: {e}"));
    Run {
        what,
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A file of the repository (deployment files, docs).
pub fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name)
}
