//! "Who is asking": what the consent page shows about the personal-agent
//! platform (its links and logo) and about the brand (its logo and accent).
//!
//! The platform's links are the client metadata OAuth clients register
//! (RFC 7591 §2: `client_uri` shown as the homepage, `logo_uri`, `policy_uri`,
//! `tos_uri`), registered here by the operator with `pactd agent add`. The
//! person must be able to see who asks (PACT §5.2 consent), so the links are
//! shown as text with their host, and the logo is served from pactd's own
//! origin: the person's browser never contacts the platform while deciding.

use openssl::sha::sha256;
use pact_db::agents::AgentMetadata;
use pact_node::node::NodeInner;
use sqlx::PgConnection;
use time::{Duration, OffsetDateTime};

use crate::domain::hidden_chars;
use crate::state::AppState;

/// How long a fetched platform logo is used before it is fetched again. A
/// refresh that fails keeps the old copy and is retried after the same time.
pub const LOGO_TTL: Duration = Duration::hours(24);

/// The brand settings keys (docs/web-pages.md "Brand settings").
pub const ACCENT_KEY: &str = "accent";
pub const LOGO_KEY: &str = "logo";

/// Lowercase hex of the SHA-256 of `bytes`: the logo's name in `/logos/…`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha256(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` is a logo name as stored (64 lowercase hex digits).
pub fn is_logo_name(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A link the person will follow from the consent page, or a logo pactd will
/// fetch. The same rules as a jwksUri (https; http only for a loopback host,
/// for local development; no userinfo or fragment; no private address
/// literals), and no hidden or bidirectional characters: the person must
/// see where a link goes.
pub fn check_link(flag: &str, uri: &str) -> Result<(), String> {
    if let Some(c) = hidden_chars::first_hidden(uri) {
        return Err(format!("{flag}: {}", hidden_chars::refusal("the URL", c)));
    }
    pact_jose::check_jwks_uri(uri, true)
        .map(|_| ())
        .map_err(|e| {
            format!(
                "{flag}: {}",
                pact_node::logo_fetch::LogoError::from_guard(e)
            )
        })
}

/// The host (and port, when not the default) a link goes to, as the page
/// shows it next to the link.
pub fn link_host(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_owned(),
            _ => uri.to_owned(),
        },
        Err(_) => uri.to_owned(),
    }
}

/// The platform links given to `pactd agent add`: `None` keeps what is
/// stored, `Some("")` removes it, anything else replaces it.
#[derive(Clone, Debug, Default)]
pub struct LinkFlags {
    pub homepage: Option<String>,
    pub logo: Option<String>,
    pub policy: Option<String>,
    pub tos: Option<String>,
}

impl LinkFlags {
    /// Checks every given link (RFC 7591 §2 asks that these URLs be valid
    /// web pages; PACT's SSRF rules decide which ones pactd may fetch).
    pub fn check(&self) -> Result<(), String> {
        self.check_named(["--homepage", "--logo-uri", "--policy-uri", "--tos-uri"])
    }

    /// [`Self::check`], naming the fields as the caller knows them (the
    /// admin API's JSON fields, the console's form fields).
    pub fn check_named(&self, names: [&str; 4]) -> Result<(), String> {
        for (flag, value) in [
            (names[0], &self.homepage),
            (names[1], &self.logo),
            (names[2], &self.policy),
            (names[3], &self.tos),
        ] {
            if let Some(v) = value.as_deref().filter(|v| !v.is_empty()) {
                check_link(flag, v)?;
            }
        }
        Ok(())
    }

    pub fn any(&self) -> bool {
        self.homepage.is_some()
            || self.logo.is_some()
            || self.policy.is_some()
            || self.tos.is_some()
    }

    /// The logo to fetch now, when one is given.
    pub fn logo_to_fetch(&self) -> Option<&str> {
        self.logo.as_deref().filter(|v| !v.is_empty())
    }
}

/// Fetches a platform logo for `pactd agent add --logo-uri`, under the same
/// SSRF guard as every other outbound fetch. A loopback address is fetched
/// only with `--allow-loopback` (`allow_loopback`): the URI is often pasted
/// from the platform's own registration data, and a host such as
/// `2130706433` or `[::ffff:7f00:1]` does not look like the loopback address
/// it is (issue 28, finding 7).
pub async fn fetch_for_registration(
    uri: &str,
    allow_loopback: bool,
) -> Result<pact_node::logo_fetch::Logo, String> {
    fetch_logo_as(uri, allow_loopback, "--logo-uri").await
}

/// Fetches a platform logo for a registration made over the network (the
/// admin API, the console): the caller is not on the server's machine, so a
/// loopback or private address is fetched only when the server fetches
/// JWKS from such addresses too (`--allow-loopback-jwks`); otherwise it
/// would be a way to make pactd reach its own internal services (SSRF).
pub async fn fetch_for_remote_registration(
    uri: &str,
    allow_loopback: bool,
    field: &str,
) -> Result<pact_node::logo_fetch::Logo, String> {
    fetch_logo_as(uri, allow_loopback, field).await
}

async fn fetch_logo_as(
    uri: &str,
    loopback: bool,
    field: &str,
) -> Result<pact_node::logo_fetch::Logo, String> {
    pact_node::logo_fetch::fetch_logo(uri, loopback)
        .await
        .map_err(|e| format!("{field}: the logo was not accepted: {e}"))
}

/// Registers (or re-registers) a platform with its links and fetched logo in
/// the caller's transaction: what `pactd agent add`, the console and the
/// admin API all do. Links not given keep what is stored.
pub async fn register_platform(
    tx: &mut PgConnection,
    issuer: &str,
    jwks_uri: &str,
    name: &str,
    links: &LinkFlags,
    logo: Option<&pact_node::logo_fetch::Logo>,
    now: OffsetDateTime,
) -> Result<(pact_db::agents::Agent, Option<AgentMetadata>), pact_db::Error> {
    let agent = pact_db::agents::upsert(&mut *tx, issuer, jwks_uri, name).await?;
    let meta = if links.any() {
        Some(store_links(tx, issuer, links, logo, now).await?)
    } else {
        None
    };
    Ok((agent, meta))
}

/// Stores the given links (and the logo fetched from `--logo-uri`) on a
/// registered platform, in the caller's transaction.
pub async fn store_links(
    tx: &mut PgConnection,
    issuer: &str,
    flags: &LinkFlags,
    logo: Option<&pact_node::logo_fetch::Logo>,
    now: OffsetDateTime,
) -> Result<AgentMetadata, pact_db::Error> {
    let mut m = pact_db::agents::metadata(&mut *tx, issuer)
        .await?
        .unwrap_or_default();
    let given = |v: &Option<String>, old: Option<String>| match v {
        None => old,
        Some(s) if s.is_empty() => None,
        Some(s) => Some(s.clone()),
    };
    m.homepage_uri = given(&flags.homepage, m.homepage_uri.take());
    m.policy_uri = given(&flags.policy, m.policy_uri.take());
    m.tos_uri = given(&flags.tos, m.tos_uri.take());
    let mut fetched_at = m.logo_fetched_at;
    if flags.logo.is_some() {
        m.logo_uri = given(&flags.logo, None);
        m.logo_sha256 = None;
        fetched_at = None;
        if let (Some(_), Some(logo)) = (&m.logo_uri, logo) {
            let name = sha256_hex(&logo.bytes);
            pact_db::logos::put(&mut *tx, &name, logo.content_type, &logo.bytes).await?;
            m.logo_sha256 = Some(name);
            fetched_at = Some(now);
        }
    }
    pact_db::agents::set_metadata(&mut *tx, issuer, &m, fetched_at).await?;
    m.logo_fetched_at = fetched_at;
    Ok(m)
}

/// Refreshes a platform's logo in the background when its copy is older
/// than [`LOGO_TTL`]. The page that asks is not delayed: it shows the copy
/// it has (or the initial) and the next page gets the new one.
pub fn refresh_in_background(
    state: &AppState,
    issuer: &str,
    m: &AgentMetadata,
    now: OffsetDateTime,
) {
    if m.logo_uri.is_none() || m.logo_fetched_at.is_some_and(|t| t > now - LOGO_TTL) {
        return;
    }
    let state = state.clone();
    let issuer = issuer.to_owned();
    tokio::spawn(async move {
        if let Err(e) = refresh(&state, &issuer, now).await {
            tracing::warn!(issuer = %issuer, error = %e, "agent logo refresh failed");
        }
    });
}

/// One refresh: claim it (one node does it), fetch under the node's guard
/// (loopback only when the node allows loopback JWKS), store if accepted.
pub async fn refresh(node: &NodeInner, issuer: &str, now: OffsetDateTime) -> Result<(), String> {
    let Some(uri) = pact_db::agents::claim_logo_refresh(&node.db, issuer, now, now - LOGO_TTL)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let logo = pact_node::logo_fetch::fetch_logo(&uri, node.config.jwks.allow_loopback)
        .await
        .map_err(|e| e.to_string())?;
    let name = sha256_hex(&logo.bytes);
    let mut tx = node.db.begin().await.map_err(|e| e.to_string())?;
    pact_db::logos::put(&mut *tx, &name, logo.content_type, &logo.bytes)
        .await
        .map_err(|e| e.to_string())?;
    pact_db::agents::set_logo(&mut *tx, issuer, &uri, &name)
        .await
        .map_err(|e| e.to_string())?;
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(())
}

// ------------------------------------------------------------ the brand's look

/// The largest brand logo accepted (the same cap as a platform's).
pub const MAX_BRAND_LOGO_BYTES: usize = pact_node::logo_fetch::MAX_LOGO_BYTES;

/// A brand logo file: PNG, JPEG or WebP by its bytes (never SVG, which is a
/// document that can carry script), at most 256 KiB.
pub fn check_brand_logo(bytes: &[u8]) -> Result<&'static str, String> {
    if bytes.len() > MAX_BRAND_LOGO_BYTES {
        return Err(format!(
            "--logo: the file is larger than {} KiB",
            MAX_BRAND_LOGO_BYTES / 1024
        ));
    }
    match pact_node::logo_fetch::sniff_image(bytes) {
        Some(t @ ("image/png" | "image/jpeg" | "image/webp")) => Ok(t),
        _ => Err("--logo: not a PNG, JPEG or WebP file (SVG is not accepted)".to_owned()),
    }
}

/// `#rrggbb` as its three channels.
fn parse_hex_colour(s: &str) -> Option<[u8; 3]> {
    let hex = s.strip_prefix('#')?;
    if hex.len() != 6 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
    Some([channel(0)?, channel(2)?, channel(4)?])
}

/// WCAG 2.x relative luminance of an sRGB colour.
fn luminance(rgb: [u8; 3]) -> f64 {
    let lin = |c: u8| {
        let c = f64::from(c) / 255.0;
        if c <= 0.039_28 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])
}

/// WCAG 2.x contrast ratio of two colours (1 to 21).
pub fn contrast_ratio(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    let (hi, lo) = if la > lb { (la, lb) } else { (lb, la) };
    (hi + 0.05) / (lo + 0.05)
}

/// A brand accent: `#rrggbb`, dark enough for the white text of the buttons
/// drawn in it (WCAG 2.x 1.4.3: at least 4.5:1). Returned lowercased.
pub fn check_accent(s: &str) -> Result<String, String> {
    let Some(rgb) = parse_hex_colour(s) else {
        return Err(format!(
            "--accent: {s:?} is not a colour like #0b5cad (# and six hex digits)"
        ));
    };
    let ratio = contrast_ratio(rgb, [255, 255, 255]);
    if ratio < 4.5 {
        return Err(format!(
            "--accent: {s} has a contrast of {ratio:.2}:1 with white; buttons show white text on it, \
             which needs at least 4.5:1 (WCAG 1.4.3). Choose a darker colour."
        ));
    }
    Ok(s.to_ascii_lowercase())
}

/// What a brand's pages show of the brand: its logo and its accent's stylesheet.
#[derive(Clone, Debug, Default)]
pub struct Look {
    /// `/logos/{sha256}`
    pub logo: Option<String>,
    /// `/theme/{rrggbb}.css`
    pub theme: Option<String>,
}

impl Look {
    /// From the brand settings; values that are not what `pactd brand set`
    /// writes are ignored rather than put into a page.
    pub fn of(settings: &serde_json::Value) -> Self {
        let logo = settings
            .get(LOGO_KEY)
            .and_then(|v| v.as_str())
            .filter(|s| is_logo_name(s))
            .map(|s| format!("/logos/{s}"));
        let theme = settings
            .get(ACCENT_KEY)
            .and_then(|v| v.as_str())
            .filter(|s| parse_hex_colour(s).is_some())
            .map(|s| {
                format!(
                    "/theme/{}.css",
                    s.trim_start_matches('#').to_ascii_lowercase()
                )
            });
        Self { logo, theme }
    }

    pub fn none() -> Self {
        Self::default()
    }
}

/// The stylesheet of an accent (`rrggbb`, no `#`): served by pactd so the
/// page CSP can keep refusing inline styles. Light scheme only: the accent is
/// checked against white text, and the dark scheme keeps its own light
/// accent; there the brand's colour marks the top bar only.
pub fn theme_css(hex: &str) -> Option<String> {
    let rgb = parse_hex_colour(&format!("#{hex}"))?;
    if contrast_ratio(rgb, [255, 255, 255]) < 4.5 {
        return None;
    }
    let hex = hex.to_ascii_lowercase();
    Some(format!(
        ":root {{ --brand-accent: #{hex}; }}\n\
         @media not (prefers-color-scheme: dark) {{\n  :root {{ --accent: #{hex}; --accent-ink: #ffffff; }}\n}}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accent_needs_contrast_with_white() {
        assert_eq!(check_accent("#0B5CAD"), Ok("#0b5cad".to_owned()));
        assert!(check_accent("#000000").is_ok());
        // #767676 is the classic 4.54:1 grey; #777777 is 4.48:1.
        assert!(check_accent("#767676").is_ok());
        assert!(check_accent("#777777").is_err());
        assert!(check_accent("#ffcc00").is_err());
        for bad in [
            "0b5cad", "#0b5ca", "#0b5cadd", "#gg0000", "red", "", "#0b5 ad",
        ] {
            assert!(check_accent(bad).is_err(), "{bad}");
        }
        let white = contrast_ratio([255, 255, 255], [0, 0, 0]);
        assert!((white - 21.0).abs() < 1e-9);
    }

    #[test]
    fn links_follow_the_jwks_uri_rules_and_show_their_host() {
        assert!(check_link("--homepage", "https://pa.example/").is_ok());
        assert!(check_link("--homepage", "http://127.0.0.1:8080/x").is_ok());
        for bad in [
            "http://pa.example/",
            "javascript:alert(1)",
            "https://user@pa.example/",
            "https://10.0.0.1/logo.png",
            "https://pa.example/\u{202e}gnp.exe",
            "data:image/png;base64,AAAA",
        ] {
            assert!(check_link("--logo-uri", bad).is_err(), "{bad}");
        }
        assert_eq!(link_host("https://pa.example/privacy"), "pa.example");
        assert_eq!(link_host("http://127.0.0.1:9000/"), "127.0.0.1:9000");
    }

    #[test]
    fn look_ignores_values_pactd_did_not_write() {
        let good = serde_json::json!({"accent": "#0B5CAD", "logo": "a".repeat(64)});
        let look = Look::of(&good);
        assert_eq!(look.theme.as_deref(), Some("/theme/0b5cad.css"));
        assert_eq!(look.logo, Some(format!("/logos/{}", "a".repeat(64))));
        let bad = serde_json::json!({"accent": "red;}body{", "logo": "../x"});
        let look = Look::of(&bad);
        assert!(look.theme.is_none() && look.logo.is_none());
        assert!(theme_css("ffcc00").is_none());
        assert!(theme_css("0b5cad").is_some_and(|c| c.contains("--accent: #0b5cad")));
    }
}
