//! A real SMTP server on a loopback port that keeps every message it is
//! given (RFC 5321's minimal command set: EHLO/HELO, MAIL, RCPT, DATA, RSET,
//! NOOP, QUIT). pactd talks to it through lettre exactly as to a mail relay.

use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// One delivered message: the envelope and the raw data (headers and body,
/// dot-unstuffed, CRLF line ends).
#[derive(Clone, Debug)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

impl Mail {
    /// The body with its quoted-printable encoding undone (RFC 2045 §6.7:
    /// soft line breaks and `=XX` octets, read as UTF-8), as lettre writes
    /// a plain-text body that is not all ASCII.
    pub fn text(&self) -> String {
        let body = self
            .data
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or(&self.data);
        let joined = body.replace("=\r\n", "");
        let bytes = joined.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match (bytes[i], hex) {
                (b'=', Some(octet)) => {
                    out.push(octet);
                    i += 3;
                }
                (b, _) => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).replace("\r\n", "\n")
    }

    /// The first `http(s)://` link in the body.
    pub fn link(&self) -> Option<String> {
        let text = self.text();
        let start = text.find("http")?;
        let rest = &text[start..];
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        Some(rest[..end].to_owned())
    }
}

pub struct SmtpSink {
    pub addr: SocketAddr,
    rx: mpsc::UnboundedReceiver<Mail>,
}

impl SmtpSink {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, tx.clone()));
            }
        });
        Self { addr, rx }
    }

    /// `smtp://127.0.0.1:PORT` (plain SMTP, as to a relay on the same host).
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    /// pactd's mail settings for this sink, as the demo store's sender.
    pub fn settings(&self) -> pact_server::mail::MailSettings {
        pact_server::mail::MailSettings {
            smtp_url: self.url(),
            from: "Demo Store <no-reply@shop.example>".to_owned(),
        }
    }

    /// The next delivered message; panics after 10 s without one.
    pub async fn next(&mut self) -> Mail {
        tokio::time::timeout(std::time::Duration::from_secs(10), self.rx.recv())
            .await
            .expect("no mail arrived within 10 s")
            .expect("the sink stopped")
    }
}

async fn session(stream: TcpStream, tx: mpsc::UnboundedSender<Mail>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    if !reply(&mut write, "220 sink ESMTP").await {
        return;
    }
    let (mut from, mut to) = (String::new(), Vec::new());
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let cmd = line.trim_end().to_owned();
        let upper = cmd.to_ascii_uppercase();
        let ok = if upper.starts_with("EHLO") {
            reply(&mut write, "250-sink\r\n250 8BITMIME").await
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            reply(&mut write, "250 ok").await
        } else if upper.starts_with("RSET") {
            (from, to) = (String::new(), Vec::new());
            reply(&mut write, "250 ok").await
        } else if upper.starts_with("MAIL FROM:") {
            from = cmd[10..].trim().trim_matches(['<', '>']).to_owned();
            reply(&mut write, "250 ok").await
        } else if upper.starts_with("RCPT TO:") {
            to.push(cmd[8..].trim().trim_matches(['<', '>']).to_owned());
            reply(&mut write, "250 ok").await
        } else if upper == "DATA" {
            if !reply(&mut write, "354 end with <CRLF>.<CRLF>").await {
                return;
            }
            let mut data = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                if line == ".\r\n" || line == ".\n" {
                    break;
                }
                // RFC 5321 §4.5.2: a leading dot was doubled by the sender.
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            let _ = tx.send(Mail {
                from: std::mem::take(&mut from),
                to: std::mem::take(&mut to),
                data,
            });
            reply(&mut write, "250 queued").await
        } else if upper.starts_with("QUIT") {
            let _ = reply(&mut write, "221 bye").await;
            return;
        } else {
            reply(&mut write, "502 not implemented").await
        };
        if !ok {
            return;
        }
    }
}

async fn reply(w: &mut tokio::net::tcp::OwnedWriteHalf, s: &str) -> bool {
    w.write_all(format!("{s}\r\n").as_bytes()).await.is_ok()
}
