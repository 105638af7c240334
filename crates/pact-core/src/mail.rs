//! Outgoing email (SMTP through `lettre`): today only the password-reset link.
//!
//! Configured by one URL (`--smtp-url`, `smtp://host:25`, `smtp://user:pass@host:587?tls=required`,
//! `smtps://…:465`) and a sender (`--mail-from`). Without them pactd sends no
//! mail and does not offer "Forgot your password?". Messages are sent from a
//! background task, never while a page waits, so an answer's timing does not
//! tell whether an address has an account. Neither the URL (it may carry a
//! password) nor a message body (it carries a link) is ever logged.

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

/// How long one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(20);

/// The mail settings as the operator gave them.
#[derive(Clone)]
pub struct MailSettings {
    pub smtp_url: String,
    pub from: String,
}

impl std::fmt::Debug for MailSettings {
    // The URL may carry the SMTP password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailSettings")
            .field("smtp_url", &"<redacted>")
            .field("from", &self.from)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("invalid SMTP URL (expected smtp://host[:port], smtp://…?tls=required or smtps://…)")]
    Url,
    #[error(
        "invalid sender address {0:?} (expected name@example.com or \"Name <name@example.com>\")"
    )]
    From(String),
    #[error("invalid recipient address")]
    To,
    #[error("building the message failed")]
    Build,
    #[error("the SMTP server refused or could not be reached: {0}")]
    Send(String),
}

/// A configured mail sender.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer").field("from", &self.from).finish()
    }
}

impl Mailer {
    /// Checks the settings now, so a typo stops `pactd serve` at start rather
    /// than the first person who forgot a password.
    pub fn new(settings: &MailSettings) -> Result<Self, MailError> {
        let from: Mailbox = settings
            .from
            .parse()
            .map_err(|_| MailError::From(settings.from.clone()))?;
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&settings.smtp_url)
            .map_err(|_| MailError::Url)?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        if let Some(host) = sent_in_clear(&settings.smtp_url) {
            // Only the host: the URL may carry the SMTP password.
            tracing::warn!(
                %host,
                "mail is sent without TLS: reset links (and the SMTP password, if any) cross the \
                 network in clear; use smtps:// or ?tls=required"
            );
        }
        Ok(Self { transport, from })
    }

    /// Sends one plain-text message.
    pub async fn send(&self, to: &str, subject: &str, body: String) -> Result<(), MailError> {
        let to: Mailbox = to.parse().map_err(|_| MailError::To)?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|_| MailError::Build)?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError::Send(failure_kind(&e)))
    }
}

/// The SMTP host when the URL sends mail unencrypted to another machine:
/// lettre reads `smtp://` without `tls=` as no TLS at all, so
/// `smtp://user:pass@relay:587` sends the password and every reset link (a
/// way into an account) in clear. Loopback (a local relay) is not reported.
fn sent_in_clear(smtp_url: &str) -> Option<String> {
    let url = url::Url::parse(smtp_url).ok()?;
    if url.scheme() != "smtp" {
        return None;
    }
    let tls = url
        .query_pairs()
        .find(|(k, _)| k == "tls")
        .map(|(_, v)| v.into_owned());
    if matches!(tls.as_deref(), Some("required" | "opportunistic")) {
        return None;
    }
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!loopback).then(|| host.to_owned())
}

/// What went wrong in a send, without the server's reply text: a refusal's
/// text often quotes the recipient's address ("550 5.1.1 <ann@…>: Recipient
/// address rejected"), and the error reaches the log, where it would name
/// the person and tell its readers the address has an account. Its kind and
/// SMTP code are enough for the operator.
fn failure_kind(e: &lettre::transport::smtp::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_tls() {
        "TLS failed"
    } else if e.is_permanent() {
        "permanent refusal"
    } else if e.is_transient() {
        "transient refusal"
    } else {
        "connection or protocol error"
    };
    match e.status() {
        Some(code) => format!("{kind} (SMTP {code})"),
        None => kind.to_owned(),
    }
}

#[cfg(test)]
mod clear_text_tests {
    use super::sent_in_clear;

    #[test]
    fn plain_smtp_to_another_machine_is_reported_by_host_only() {
        assert_eq!(
            sent_in_clear("smtp://user:secret@relay.example:587").as_deref(),
            Some("relay.example")
        );
        assert_eq!(
            sent_in_clear("smtp://relay.example:25?tls=none").as_deref(),
            Some("relay.example")
        );
        for fine in [
            "smtp://relay.example:587?tls=required",
            "smtp://relay.example:25?tls=opportunistic",
            "smtps://relay.example:465",
            "smtp://127.0.0.1:2525",
            "smtp://localhost:25",
            "smtp://[::1]:25",
        ] {
            assert_eq!(sent_in_clear(fine), None, "{fine}");
        }
    }
}
