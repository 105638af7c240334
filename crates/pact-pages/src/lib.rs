//! The people's pages (`web`): what a person sees in the browser while a
//! personal agent waits (RFC 8628 code entry, sign-in with a second factor,
//! consent, PACT §5.2), and their account page, where they see and revoke
//! what they allowed (§5.7). Every form POST begins with an extractor that
//! checks the Origin and the CSRF token before the form is read
//! (`web/extract.rs`).
//!
//! It stands on pact-app (the state, errors, the caller's address, consent's
//! decision) and below the other faces, which borrow its words: the limits
//! in a person's language (`limit_words`), the operations asked beyond a
//! limit (`operations`) and the page locale (`i18n`).

pub mod web;

// The layers below, under the paths the pages have always used
// (`crate::state::AppState`, `crate::domain::…`).
pub use pact_app::{client_ip, consent, error, state, who};
pub use pact_core::{accounts, agent, domain, page_limits};
pub use pact_node::oidc_discovery;
