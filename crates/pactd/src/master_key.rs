//! Resolving the key-encryption key: `--master-key-file` / `PACTD_MASTER_KEY_FILE`,
//! else `--master-key` / `PACTD_MASTER_KEY`; `dev` generates one into its data
//! directory (mode 0600) the first time.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use pact_crypto::MasterKey;

use crate::cli::Cli;

pub fn from_cli(cli: &Cli) -> anyhow::Result<Option<Arc<MasterKey>>> {
    if let Some(path) = &cli.master_key_file {
        return read_file(path).map(Some);
    }
    if let Some(b64) = &cli.master_key {
        let key = MasterKey::from_base64(b64)
            .map_err(|e| anyhow::anyhow!("PACTD_MASTER_KEY is not a valid key: {e}"))?;
        return Ok(Some(Arc::new(key)));
    }
    Ok(None)
}

pub fn required(cli: &Cli) -> anyhow::Result<Arc<MasterKey>> {
    from_cli(cli)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no master key: set PACTD_MASTER_KEY_FILE (or PACTD_MASTER_KEY) to a 32-byte base64 key; \
             `pactd keys generate-master-key` prints a new one. Keep it secret and keep it safe: \
             without it the stored signing keys cannot be used"
        )
    })
}

pub fn read_file(path: &Path) -> anyhow::Result<Arc<MasterKey>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read master key file {}", path.display()))?;
    let key = MasterKey::from_base64(&text)
        .map_err(|e| anyhow::anyhow!("master key file {} is invalid: {e}", path.display()))?;
    Ok(Arc::new(key))
}

/// For admin commands: the configured key, else the `dev` data directory's.
pub fn for_admin(cli: &Cli, data_dir: &Path) -> anyhow::Result<Arc<MasterKey>> {
    if let Some(key) = from_cli(cli)? {
        return Ok(key);
    }
    let path = data_dir.join("master.key");
    if path.exists() {
        return read_file(&path);
    }
    required(cli)
}

/// [`for_admin`], checked against the database before a command seals
/// anything with it: a key that does not open the stored signing keys (a
/// staging key, the `dev` data directory's beside a production
/// `DATABASE_URL`) would seal values no node can open, and every node would
/// stop at its next key reload or start.
pub async fn for_admin_on(
    cli: &Cli,
    data_dir: &Path,
    pool: &pact_db::PgPool,
) -> anyhow::Result<Arc<MasterKey>> {
    let key = for_admin(cli, data_dir)?;
    if let Some((kid, sealed)) = pact_db::sealed::any_signing_key(pool).await?
        && key.open(&sealed, kid.as_bytes()).is_err()
    {
        anyhow::bail!(
            "the master key in use does not open this database's signing keys (check \
             PACTD_MASTER_KEY_FILE, --master-key-file and DATABASE_URL); nothing was changed"
        );
    }
    Ok(key)
}

/// For `dev`: the key in the data directory, created on first use.
pub fn dev_key(cli: &Cli, data_dir: &Path) -> anyhow::Result<Arc<MasterKey>> {
    if let Some(key) = from_cli(cli)? {
        return Ok(key);
    }
    let path = data_dir.join("master.key");
    if path.exists() {
        return read_file(&path);
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let key =
        MasterKey::generate().map_err(|e| anyhow::anyhow!("cannot generate a master key: {e}"))?;
    write_private(&path, &key.to_base64())?;
    tracing::info!(path = %path.display(), "generated a development master key");
    Ok(Arc::new(key))
}

/// `pactd keys init-master-key`: the first start of a deployment (a container
/// init service, a package's install script) makes the key file once. An
/// existing file is never replaced, since that would make every sealed secret
/// unreadable; it is only checked. Creating with `create_new` makes two racing
/// first starts safe: one creates, the other finds the file.
pub fn init_file(cli: &Cli) -> anyhow::Result<()> {
    let Some(path) = &cli.master_key_file else {
        anyhow::bail!(
            "set PACTD_MASTER_KEY_FILE (or --master-key-file, or `master_key_file` in --config) \
             to where the master key file belongs"
        );
    };
    if path.exists() {
        read_file(path)?;
        println!("master key file {} exists; left unchanged", path.display());
        return Ok(());
    }
    let key =
        MasterKey::generate().map_err(|e| anyhow::anyhow!("cannot generate a master key: {e}"))?;
    match write_private(path, &format!("{}\n", key.to_base64())) {
        Ok(()) => {
            println!("created master key file {} (mode 0600)", path.display());
            Ok(())
        }
        // Another first start created it in the meantime: use theirs.
        Err(_) if path.exists() => read_file(path).map(|_| ()),
        Err(e) => Err(e),
    }
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}
