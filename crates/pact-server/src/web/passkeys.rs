//! WebAuthn passkeys (webauthn-rs): registration from the account page and
//! sign-in with a passkey instead of password + TOTP. Ceremony state is kept
//! in Postgres so any node can finish a ceremony another node started.

use webauthn_rs::{Webauthn, WebauthnBuilder};

use crate::config::Config;

/// The relying party for the public URL. WebAuthn RP ids are domain names,
/// so an IP-address host gets none and passkeys are not offered.
pub fn relying_party(config: &Config) -> Option<Webauthn> {
    let origin = url::Url::parse(&config.public_url).ok()?;
    let host = origin.host_str()?.to_owned();
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return None;
    }
    WebauthnBuilder::new(&host, &origin)
        .ok()?
        .rp_name(&config.provider_name)
        .build()
        .ok()
}
