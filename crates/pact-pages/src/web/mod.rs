//! The browser side (PACT §5.2): sign-in with a second factor, the device
//! pages and consent, a brand's own login, and the "connected agents" page.
//!
//! Every page is server-rendered (askama) with one small stylesheet; the only
//! script is for WebAuthn. Safety rules live in `security.rs` and `session.rs`
//! and apply to every page: hashed, rotated session ids in HttpOnly SameSite
//! cookies, a CSRF token plus an Origin check on every POST, strict security
//! headers, `no-store` on anything personal, same-origin redirects only.

pub mod account;
pub mod account_delete;
pub mod assets;
pub mod brand_login;
pub mod consent_limits;
pub mod device;
pub mod extract;
pub mod form;
pub mod home;
pub mod i18n;
pub mod limit_words;
pub mod login;
pub mod logos;
pub mod mfa;
pub mod oidc_login;
pub mod operations;
pub mod page;
pub mod passkeys;
pub mod password_reset;
pub mod security;
pub mod session;

/// The pages' rate limits live below the web layer, in the node's state.
pub use crate::page_limits as limits;
pub use page::{PageError, render};
pub use session::Browser;
