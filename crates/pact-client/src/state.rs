//! The state directory: the agent's identity and key, remembered contexts,
//! delegation tokens and receipts.
//!
//! Where: `--home DIR`, else `PACT_AGENT_HOME`, else `~/.pact-agent`. The
//! directory is created mode 0700 and every file in it is written mode 0600,
//! atomically (a temporary file renamed over the old one), because
//! `key.pem` and `tokens.json` are secrets.
//!
//! | file | holds |
//! |---|---|
//! | `identity.json` | issuer, audience, default `sub`, name, the registered JWKS URI and listen address |
//! | `key.pem` | the ES256 private key (PKCS#8 PEM) |
//! | `contexts.json` | the last `contextId` per (interface URL, sub) |
//! | `tokens.json` | delegation and refresh tokens per (interface URL, sub) |
//! | `receipts.json` | every receipt received (PACT §5.6), with its verification |

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jwt::Signer;
use crate::keys::AgentKey;

/// The environment variable naming the state directory.
pub const HOME_ENV: &str = "PACT_AGENT_HOME";

const IDENTITY: &str = "identity.json";
const KEY: &str = "key.pem";
const CONTEXTS: &str = "contexts.json";
const TOKENS: &str = "tokens.json";
const RECEIPTS: &str = "receipts.json";

/// The state directory.
#[derive(Clone, Debug)]
pub struct Home {
    dir: PathBuf,
}

/// What `init` records, besides the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// The PA's issuer (PACT §3: compared exactly; also the OAuth `client_id`).
    pub issuer: String,
    /// The Provider-assigned audience (PACT §3). Never derived: the user sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The `sub` used when `--sub` is not given: stable and opaque.
    pub default_sub: String,
    /// The display name proposed for registration.
    pub name: String,
    /// The JWKS URI registered with the Provider; it must stay stable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// The address `serve-jwks` and `conformance` listen on to serve it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_listen: Option<String>,
    /// The `kid` of `key.pem`, for display.
    pub kid: String,
}

/// A loaded identity: settings and key.
#[derive(Clone, Debug)]
pub struct Identity {
    pub settings: Settings,
    pub key: Arc<AgentKey>,
}

impl Identity {
    /// A signer at `audience`, or at the stored audience. PACT §3: the
    /// audience is assigned by the Provider, so there is no default.
    pub fn signer(&self, audience: Option<&str>) -> Result<Signer> {
        let audience = audience
            .map(str::to_owned)
            .or_else(|| self.settings.audience.clone())
            .ok_or_else(|| {
                anyhow!(
                    "no audience: pass --audience (the Provider assigns it; pactd's default is \
                     <public-url>/a2a) or store one with `pact-agent init --audience ..`"
                )
            })?;
        Ok(Signer::new(
            self.settings.issuer.clone(),
            audience,
            self.key.clone(),
        ))
    }

    /// The exact command that registers this agent with pactd.
    pub fn registration_line(&self, jwks_uri: &str) -> String {
        format!(
            "pactd agent add --issuer {} --jwks-uri {} --name {}",
            shell_quote(&self.settings.issuer),
            shell_quote(jwks_uri),
            shell_quote(&self.settings.name)
        )
    }
}

/// Quotes a word for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Options of `pact-agent init`.
#[derive(Clone, Debug, Default)]
pub struct InitOptions {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub sub: Option<String>,
    pub name: Option<String>,
    pub jwks_uri: Option<String>,
    pub jwks_listen: Option<String>,
    /// Replace an existing identity (a new key: it must be registered again).
    pub force: bool,
}

/// Delegation tokens for one (brand, sub), as the token endpoint returned them.
#[derive(Clone, Serialize, Deserialize)]
pub struct StoredTokens {
    pub access_token: String,
    pub refresh_token: String,
    /// Unix seconds when the access token expires (from `expires_in`).
    pub expires_at: i64,
    /// The granted scope (PACT §5.3: may be less than requested).
    pub scope: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_details: Option<Value>,
}

impl std::fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTokens")
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl StoredTokens {
    /// The granted scopes.
    pub fn scopes(&self) -> Vec<String> {
        self.scope
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// A receipt as kept (PACT §5.6: PAs should verify and keep receipts).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredReceipt {
    /// The interface URL of the brand.
    pub brand: String,
    pub sub: String,
    /// Where the brand's keys are (`jwks_uri` of its RFC 8414 metadata).
    pub jwks_uri: String,
    /// The brand's receipt key archive (`receipt_keys_uri`, a pactd
    /// extension), where the key stays after it leaves `jwks_uri`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_keys_uri: Option<String>,
    /// The Provider's receipt log (`receipt_tree_head_uri`, a pactd
    /// extension), where inclusion and consistency proofs are fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_tree_head_uri: Option<String>,
    /// Unix seconds when we received it.
    pub received_at: i64,
    /// `{jws, claims}` exactly as received.
    pub receipt: Value,
    /// Whether it verified when received.
    pub verified: bool,
}

/// `iface` + `sub`, the key of the per-conversation maps.
pub fn key_of(iface: &str, sub: &str) -> String {
    format!("{iface} {sub}")
}

impl Home {
    /// `explicit`, else `PACT_AGENT_HOME`, else `~/.pact-agent`.
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Self> {
        if let Some(dir) = explicit {
            return Ok(Self::at(dir));
        }
        if let Some(dir) = std::env::var_os(HOME_ENV).filter(|d| !d.is_empty()) {
            return Ok(Self::at(PathBuf::from(dir)));
        }
        let home = std::env::var_os("HOME")
            .filter(|d| !d.is_empty())
            .ok_or_else(|| anyhow!("HOME is not set: pass --home or set {HOME_ENV}"))?;
        Ok(Self::at(PathBuf::from(home).join(".pact-agent")))
    }

    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn ensure_dir(&self) -> Result<()> {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt as _;
            builder.mode(0o700);
        }
        builder
            .create(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))
    }

    /// Writes `bytes` to `name` atomically with mode 0600.
    fn write_private(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.ensure_dir()?;
        let target = self.path(name);
        let tmp = self.path(&format!(".{name}.{}.tmp", std::process::id()));
        let mut options = fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = options
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        #[cfg(unix)]
        {
            // A leftover temporary file may have had other permissions.
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(fs::Permissions::from_mode(0o600))?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &target)
            .with_context(|| format!("cannot replace {}", target.display()))?;
        Ok(())
    }

    fn read_json<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T> {
        match fs::read(self.path(name)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not valid", self.path(name).display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", self.path(name).display())),
        }
    }

    fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value)?;
        bytes.push(b'\n');
        self.write_private(name, &bytes)
    }

    /// Reads a JSON state file of the directory (default when absent).
    pub fn read_state<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T> {
        self.read_json(name)
    }

    /// Writes a JSON state file of the directory (mode 0600, atomically).
    pub fn write_state<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        self.write_json(name, value)
    }

    /// `true` when an identity exists here.
    pub fn has_identity(&self) -> bool {
        self.path(IDENTITY).exists() && self.path(KEY).exists()
    }

    /// Creates the identity: a new key, and the settings.
    pub fn init(&self, opts: InitOptions) -> Result<Identity> {
        if self.has_identity() && !opts.force {
            bail!(
                "{} already holds an identity; pass --force to replace it (the new key must be \
                 registered again)",
                self.dir.display()
            );
        }
        let key = AgentKey::generate()?;
        let issuer = opts.issuer.unwrap_or_else(|| {
            // A reserved name (RFC 2606), unique per key, clearly not a real host.
            format!(
                "https://pact-agent.invalid/{}",
                key.kid().get(..16).unwrap_or(key.kid())
            )
        });
        if issuer.trim() != issuer || issuer.is_empty() {
            bail!(
                "the issuer must be non-empty, without surrounding spaces (it is compared exactly)"
            );
        }
        let settings = Settings {
            name: opts.name.unwrap_or_else(|| "pact-agent".to_owned()),
            issuer,
            audience: opts.audience,
            default_sub: opts
                .sub
                .unwrap_or_else(|| format!("user-{}", uuid::Uuid::new_v4().simple())),
            jwks_uri: opts.jwks_uri,
            jwks_listen: opts.jwks_listen,
            kid: key.kid().to_owned(),
        };
        self.write_private(KEY, &key.to_pem()?)?;
        self.write_json(IDENTITY, &settings)?;
        Ok(Identity {
            settings,
            key: Arc::new(key),
        })
    }

    /// Loads the identity; a clear error when `init` has not run.
    pub fn identity(&self) -> Result<Identity> {
        if !self.has_identity() {
            bail!(
                "no identity in {}: run `pact-agent init --issuer <url> --audience <aud>` first",
                self.dir.display()
            );
        }
        let settings: Settings = serde_json::from_slice(
            &fs::read(self.path(IDENTITY)).context("cannot read identity.json")?,
        )
        .context("identity.json is not valid")?;
        let key = AgentKey::from_pem(&fs::read(self.path(KEY)).context("cannot read key.pem")?)?;
        if key.kid() != settings.kid {
            bail!("key.pem does not match identity.json (kid differs)");
        }
        Ok(Identity {
            settings,
            key: Arc::new(key),
        })
    }

    pub fn save_settings(&self, settings: &Settings) -> Result<()> {
        self.write_json(IDENTITY, settings)
    }

    pub fn contexts(&self) -> Result<BTreeMap<String, String>> {
        self.read_json(CONTEXTS)
    }

    pub fn save_contexts(&self, map: &BTreeMap<String, String>) -> Result<()> {
        self.write_json(CONTEXTS, map)
    }

    pub fn tokens(&self) -> Result<BTreeMap<String, StoredTokens>> {
        self.read_json(TOKENS)
    }

    pub fn save_tokens(&self, map: &BTreeMap<String, StoredTokens>) -> Result<()> {
        self.write_json(TOKENS, map)
    }

    pub fn receipts(&self) -> Result<Vec<StoredReceipt>> {
        self.read_json(RECEIPTS)
    }

    /// Appends a receipt, unless the same JWS is already kept (a retried
    /// `messageId` returns the same receipt, PACT §4).
    pub fn keep_receipt(&self, receipt: StoredReceipt) -> Result<bool> {
        let mut all = self.receipts()?;
        let jws = receipt.receipt.get("jws");
        if all.iter().any(|r| r.receipt.get("jws") == jws) {
            return Ok(false);
        }
        all.push(receipt);
        self.write_json(RECEIPTS, &all)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn temp_home() -> Home {
        Home::at(std::env::temp_dir().join(format!("pact-agent-test-{}", uuid::Uuid::new_v4())))
    }

    #[test]
    fn init_writes_private_files_and_loads_back() {
        let home = temp_home();
        let id = home
            .init(InitOptions {
                issuer: Some("https://pa.example".into()),
                audience: Some("https://p.example/a2a".into()),
                ..Default::default()
            })
            .unwrap();
        let again = home.identity().unwrap();
        assert_eq!(again.settings, id.settings);
        assert_eq!(again.key.kid(), id.key.kid());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            for f in [IDENTITY, KEY] {
                let mode = fs::metadata(home.path(f)).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "{f}");
            }
            let mode = fs::metadata(home.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert!(
            home.init(InitOptions::default()).is_err(),
            "no silent overwrite"
        );
        fs::remove_dir_all(home.dir()).ok();
    }

    #[test]
    fn audience_is_never_invented() {
        let home = temp_home();
        let id = home.init(InitOptions::default()).unwrap();
        assert!(id.signer(None).is_err());
        assert_eq!(id.signer(Some("aud")).unwrap().audience, "aud");
        assert!(
            id.settings
                .issuer
                .starts_with("https://pact-agent.invalid/")
        );
        fs::remove_dir_all(home.dir()).ok();
    }

    #[test]
    fn receipts_are_kept_once() {
        let home = temp_home();
        let r = StoredReceipt {
            brand: "b".into(),
            sub: "s".into(),
            jwks_uri: "j".into(),
            receipt_keys_uri: None,
            receipt_tree_head_uri: None,
            received_at: 1,
            receipt: serde_json::json!({"jws": "x.y.z", "claims": {}}),
            verified: true,
        };
        assert!(home.keep_receipt(r.clone()).unwrap());
        assert!(!home.keep_receipt(r).unwrap());
        assert_eq!(home.receipts().unwrap().len(), 1);
        fs::remove_dir_all(home.dir()).ok();
    }

    #[test]
    fn registration_line_quotes_what_needs_it() {
        assert_eq!(shell_quote("https://a.example/x"), "https://a.example/x");
        assert_eq!(shell_quote("My agent"), "'My agent'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
