//! The `pactd` command's tests, in one binary (each file a module): the
//! operator's commands and `serve` (`cli`), the staff commands (`cli_admin`),
//! the merchant commands (`cli_merchant`), the packaging and configuration
//! files (`deploy`), trace export (`trace_export`) and several nodes behind
//! nginx and HAProxy (`multinode`). One binary links once where six did.
#![allow(clippy::disallowed_methods)] // test set-up writes rows at real times
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod cli_admin;
mod cli_merchant;
mod deploy;
mod multinode;
mod trace_export;
