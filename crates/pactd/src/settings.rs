//! Resolving settings: flag or env (clap) > config file > default.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::cli::{Cli, ServeArgs};

/// The config file (`--config pactd.toml`); every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSettings {
    pub listen: Option<std::net::SocketAddr>,
    pub public_url: Option<String>,
    pub audience: Option<String>,
    pub allow_loopback_jwks: Option<bool>,
    pub no_migrate: Option<bool>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub provider_name: Option<String>,
}

pub fn load_file(path: Option<&Path>) -> anyhow::Result<FileSettings> {
    let Some(path) = path else {
        return Ok(FileSettings::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

pub fn database_url(cli: &Cli, file: &FileSettings) -> Option<String> {
    cli.database_url
        .clone()
        .or_else(|| file.database_url.clone())
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
    master_key: std::sync::Arc<pact_jose::MasterKey>,
) -> anyhow::Result<pact_server::Config> {
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 8080)));
    let mut config = pact_server::Config::for_listen(listen, master_key);
    if let Some(url) = args.public_url.clone().or_else(|| file.public_url.clone()) {
        let parsed =
            url::Url::parse(&url).with_context(|| format!("invalid public URL {url:?}"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https") && parsed.query().is_none(),
            "the public URL must be an http(s) URL without a query"
        );
        config.public_url = url.trim_end_matches('/').to_owned();
    }
    config.audience = args
        .audience
        .clone()
        .or_else(|| file.audience.clone())
        .unwrap_or_else(|| pact_server::config::default_audience(&config.public_url));
    config.jwks.allow_loopback = args
        .allow_loopback_jwks
        .or(file.allow_loopback_jwks)
        .unwrap_or(dev);
    if let Some(name) = &file.provider_name {
        config.provider_name.clone_from(name);
    }
    Ok(config)
}
