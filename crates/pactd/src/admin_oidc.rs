//! The OpenID-provider part of `pactd brand set`, and `pactd grants
//! revoke-user`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use pact_crypto::MasterKey;
use pact_db::PgPool;
use pact_db::ids::{BrandId, UserSub};
use serde_json::Value;

use crate::admin_accounts::audit_cli as audit;
use crate::cli::{BrandSetArgs, OidcAssertionAud, OidcClientAuth};
use pact_db::brand_oidc::{assertion_aud, client_auth};

/// A client secret is a few dozen characters; the cap stops a wrong path
/// (a disk image, a log) from being read whole and sealed.
const MAX_SECRET_BYTES: u64 = 4096;

/// OpenID Connect Discovery 1.0 §2: the issuer is an https URL with no
/// query or fragment (http only to a loopback host, for development).
pub fn check_issuer(raw: &str) -> anyhow::Result<()> {
    let url =
        url::Url::parse(raw).map_err(|e| anyhow::anyhow!("invalid --login-oidc-issuer: {e}"))?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    if !(url.scheme() == "https" || (url.scheme() == "http" && loopback)) {
        bail!(
            "invalid --login-oidc-issuer: use https (http only for localhost / 127.0.0.1 / [::1])"
        );
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        bail!(
            "invalid --login-oidc-issuer: no query, #fragment or user name (OpenID Connect Discovery §2)"
        );
    }
    Ok(())
}

/// RFC 6749 §3.3: scope tokens are printable ASCII without space, quote or
/// backslash; the OpenID scope must be among them (Core §3.1.2.1).
pub fn check_scope(raw: &str) -> anyhow::Result<String> {
    let tokens: Vec<&str> = raw.split(' ').filter(|t| !t.is_empty()).collect();
    let nqchar = |c: char| c == '!' || ('#'..='[').contains(&c) || (']'..='~').contains(&c);
    if tokens.iter().any(|t| !t.chars().all(nqchar)) {
        bail!("invalid --login-oidc-scope: scope tokens are printable ASCII (RFC 6749 §3.3)");
    }
    if !tokens.contains(&"openid") {
        bail!("invalid --login-oidc-scope: it must include openid");
    }
    Ok(tokens.join(" "))
}

fn check_token(flag: &str, raw: &str, max: usize) -> anyhow::Result<()> {
    if raw.is_empty() || raw.len() > max || raw.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        bail!("invalid {flag}: 1–{max} characters, no spaces or control characters");
    }
    Ok(())
}

fn read_secret(path: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).with_context(|| {
        format!(
            "--login-oidc-client-secret-file: cannot read {}",
            path.display()
        )
    })?;
    let mut raw = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut raw)
        .with_context(|| {
            format!(
                "--login-oidc-client-secret-file: cannot read {} as text",
                path.display()
            )
        })?;
    if raw.len() as u64 > MAX_SECRET_BYTES {
        bail!("--login-oidc-client-secret-file: larger than {MAX_SECRET_BYTES} bytes");
    }
    let secret = raw.trim_end_matches(['\r', '\n']).to_owned();
    if secret.is_empty() || secret.contains(['\r', '\n']) {
        bail!("--login-oidc-client-secret-file: the file must hold the secret on one line");
    }
    Ok(secret)
}

/// The OpenID-provider settings of `brand set`; true when something changed.
/// Entering the mode removes the brand's own-login settings; leaving it
/// (`--no-external-login`, or `--login-url`) removes the provider row.
pub async fn set(
    pool: &PgPool,
    master: impl FnOnce() -> anyhow::Result<Arc<MasterKey>>,
    a: &BrandSetArgs,
) -> anyhow::Result<bool> {
    if a.no_external_login || a.login_url.is_some() {
        let mut tx = pool.begin().await?;
        let removed = pact_db::brand_oidc::remove(&mut *tx, &a.brand_id).await?;
        let mut grants_revoked = 0;
        if removed {
            // The provider's names mean nothing to the brand's own login:
            // neither the sessions nor the grants given under them last.
            let sessions_ended =
                pact_db::brand_oidc::end_external_sessions(&mut *tx, &a.brand_id).await?;
            grants_revoked = pact_db::grants::revoke_external_names(&mut *tx, &a.brand_id).await?;
            audit(
                &mut *tx,
                "brand.login_oidc_remove",
                &a.brand_id,
                Some(&a.brand_id),
                serde_json::json!({"sessions_ended": sessions_ended,
                                   "grants_revoked": grants_revoked}),
            )
            .await?;
        }
        tx.commit().await?;
        if removed {
            println!(
                "{}: no longer signs in through an OpenID provider{}",
                a.brand_id,
                revoked_note(grants_revoked)
            );
        }
        return Ok(false);
    }
    let (Some(issuer), Some(client_id)) = (&a.login_oidc_issuer, &a.login_oidc_client_id) else {
        return Ok(false);
    };
    let method = a
        .login_oidc_client_auth
        .unwrap_or(OidcClientAuth::ClientSecretBasic);
    // A secret where none is used would sit sealed in the database for
    // nothing; a missing one would fail every sign-in. Both are refused here.
    let secret_file = match (method, &a.login_oidc_client_secret_file) {
        (OidcClientAuth::ClientSecretBasic, Some(f)) => Some(f),
        (OidcClientAuth::ClientSecretBasic, None) => bail!(
            "--login-oidc-client-secret-file is needed for client_secret_basic \
             (or use --login-oidc-client-auth private_key_jwt)"
        ),
        (OidcClientAuth::PrivateKeyJwt, Some(_)) => bail!(
            "--login-oidc-client-secret-file is not used with private_key_jwt: pactd signs \
             with its own key (leave the flag out)"
        ),
        (OidcClientAuth::PrivateKeyJwt, None) => None,
    };
    if a.login_oidc_assertion_aud.is_some() && method != OidcClientAuth::PrivateKeyJwt {
        bail!(
            "--login-oidc-assertion-aud applies to --login-oidc-client-auth private_key_jwt only"
        );
    }
    let (method, aud) = match method {
        OidcClientAuth::ClientSecretBasic => (
            client_auth::CLIENT_SECRET_BASIC,
            assertion_aud::TOKEN_ENDPOINT,
        ),
        OidcClientAuth::PrivateKeyJwt => (
            client_auth::PRIVATE_KEY_JWT,
            match a.login_oidc_assertion_aud {
                Some(OidcAssertionAud::Issuer) => assertion_aud::ISSUER,
                Some(OidcAssertionAud::TokenEndpoint) | None => assertion_aud::TOKEN_ENDPOINT,
            },
        ),
    };
    check_issuer(issuer)?;
    check_token("--login-oidc-client-id", client_id, 255)?;
    let scope = check_scope(a.login_oidc_scope.as_deref().unwrap_or("openid"))?;
    let user_claim = a.user_claim.as_deref().unwrap_or("sub");
    check_token("--user-claim", user_claim, 64)?;
    pact_server::web::oidc_login::user_claim_rule(user_claim)
        .map_err(|e| anyhow::anyhow!("invalid --user-claim: {e}"))?;
    for acr in &a.mfa_acr {
        check_token("--mfa-acr", acr, 255)?;
    }
    let sealed = match secret_file {
        Some(file) => {
            let secret = read_secret(file)?;
            let master = master()?;
            Some(
                master
                    .seal(
                        secret.as_bytes(),
                        &pact_db::brand_oidc::client_secret_aad(&a.brand_id),
                    )
                    .map_err(|e| anyhow::anyhow!("sealing the client secret: {e}"))?,
            )
        }
        None => None,
    };
    let mut tx = pool.begin().await?;
    // Another provider, or another claim naming people: the sessions signed
    // in under the old names end, and the agents' grants given under them are
    // revoked (the old names mean nothing now, and the new provider may give
    // one of them to someone else, who would hold that person's grants).
    let renamed = pact_db::brand_oidc::find(&mut *tx, &a.brand_id)
        .await?
        .is_none_or(|before| before.issuer != *issuer || before.user_claim != user_claim);
    let (sessions_ended, grants_revoked) = if renamed {
        (
            pact_db::brand_oidc::end_external_sessions(&mut *tx, &a.brand_id).await?,
            pact_db::grants::revoke_external_names(&mut *tx, &a.brand_id).await?,
        )
    } else {
        (0, 0)
    };
    pact_db::brand_oidc::upsert(
        &mut *tx,
        &pact_db::brand_oidc::NewBrandOidc {
            brand_id: &a.brand_id,
            issuer,
            client_id,
            client_secret_sealed: sealed.as_deref(),
            client_auth: method,
            assertion_aud: aud,
            scope: &scope,
            user_claim,
            mfa_acr: &a.mfa_acr,
        },
    )
    .await?;
    for key in ["login_url", "login_jwks_uri"] {
        pact_db::brands::set_setting(&mut *tx, &a.brand_id, key, &Value::Null).await?;
    }
    audit(
        &mut *tx,
        "brand.login_oidc",
        &a.brand_id,
        Some(&a.brand_id),
        serde_json::json!({"issuer": issuer, "client_id": client_id, "scope": scope,
                           "user_claim": user_claim, "mfa_acr": a.mfa_acr,
                           "client_auth": method, "assertion_aud": aud,
                           "sessions_ended": sessions_ended,
                           "grants_revoked": grants_revoked}),
    )
    .await?;
    tx.commit().await?;
    println!(
        "{}: customers sign in at {issuer} (client {client_id}, {method}, scope \"{scope}\", user id from `{user_claim}`){}",
        a.brand_id,
        revoked_note(grants_revoked)
    );
    if method == client_auth::PRIVATE_KEY_JWT {
        println!(
            "register at the provider: token endpoint authentication private_key_jwt with ES256, \
             jwks_uri <public URL>/a2a/{}/oauth/jwks.json (assertion aud: the provider's {})",
            a.brand_id,
            if aud == assertion_aud::ISSUER {
                "issuer"
            } else {
                "token endpoint URL"
            }
        );
    }
    println!(
        "register at the provider: redirect URI <public URL>/oidc/{0}/callback, \
         back-channel logout URI <public URL>/oidc/{0}/backchannel-logout",
        a.brand_id
    );
    Ok(true)
}

/// What a change of sign-in did to the agents' grants, for the command's output.
fn revoked_note(grants_revoked: u64) -> String {
    match grants_revoked {
        0 => String::new(),
        n => format!(
            "; {n} agent grant(s) given under the old sign-in's names revoked \
             (each person approves their agent again)"
        ),
    }
}

/// `pactd grants revoke-user <brand> <user-id>`: every live grant of that
/// person at the brand is revoked in one transaction (the grants trigger
/// tells every node at once), and their pactd sessions there end.
pub async fn revoke_user(
    pool: &PgPool,
    brand_id: &BrandId,
    user_id: &UserSub,
) -> anyhow::Result<()> {
    if pact_db::brands::find(pool, brand_id).await?.is_none() {
        bail!("unknown brand {brand_id:?}");
    }
    let mut tx = pool.begin().await?;
    let revoked = pact_db::grants::revoke_all_for_user(
        &mut *tx,
        brand_id,
        user_id,
        pact_db::grants::reason::BY_ADMIN,
    )
    .await?;
    let sessions = pact_db::brand_oidc::end_user_sessions(&mut *tx, brand_id, user_id).await?;
    audit(
        &mut *tx,
        "grant.revoke_user",
        user_id,
        Some(brand_id),
        serde_json::json!({"grants": revoked.len(), "sessions": sessions}),
    )
    .await?;
    tx.commit().await?;
    println!(
        "{brand_id}: revoked {} grant(s) of {user_id:?} and ended {sessions} session(s)",
        revoked.len()
    );
    Ok(())
}
