//! `pactd healthcheck`: a probe for container HEALTHCHECKs and scripts that
//! needs nothing but the binary (slim images carry no curl). It asks the local
//! server's `/readyz` (or `/healthz` with `--live`) over plain HTTP/1.1 and
//! exits 0 only on `200`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cli::HealthcheckArgs;
use crate::settings::FileSettings;

/// pactd's own default listen address (`serve --listen`).
const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);
/// Enough for any status line and headers; the body is not read.
const MAX_ANSWER: usize = 8 * 1024;

pub async fn run(args: &HealthcheckArgs, file: &FileSettings) -> anyhow::Result<()> {
    let target = probe_address(args.listen.or(file.listen).unwrap_or(DEFAULT_LISTEN));
    let path = if args.live { "/healthz" } else { "/readyz" };
    let timeout = Duration::from_secs(args.timeout.max(1));
    let status = tokio::time::timeout(timeout, get_status(target, path))
        .await
        .with_context(|| format!("no answer from {target} within {timeout:?}"))??;
    if status != 200 {
        bail!("http://{target}{path} answered {status}");
    }
    println!("ok: http://{target}{path} answered 200");
    Ok(())
}

/// A server listening on every address (0.0.0.0 or ::) is reached on loopback.
pub fn probe_address(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), listen.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), listen.port())
        }
        _ => listen,
    }
}

async fn get_status(target: SocketAddr, path: &str) -> anyhow::Result<u16> {
    let mut stream = TcpStream::connect(target)
        .await
        .with_context(|| format!("cannot connect to {target}"))?;
    // RFC 9112 §3.2: HTTP/1.1 requests carry Host; `close` ends the answer
    // with the connection.
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\nAccept: */*\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    while !answer.windows(2).any(|w| w == b"\r\n") && answer.len() < MAX_ANSWER {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
    }
    parse_status_line(&answer).with_context(|| format!("{target} did not answer HTTP"))
}

/// RFC 9112 §4: `HTTP-version SP status-code SP [reason-phrase]`.
fn parse_status_line(answer: &[u8]) -> Option<u16> {
    let line_end = answer.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&answer[..line_end]).ok()?;
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let code = parts.next()?;
    if code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_addresses_are_probed_on_loopback() {
        assert_eq!(
            probe_address("0.0.0.0:8080".parse().unwrap()),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            probe_address("[::]:9000".parse().unwrap()),
            "[::1]:9000".parse().unwrap()
        );
        assert_eq!(
            probe_address("10.1.2.3:80".parse().unwrap()),
            "10.1.2.3:80".parse().unwrap()
        );
    }

    #[test]
    fn status_lines_are_parsed_and_anything_else_is_refused() {
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK\r\n\r\n"), Some(200));
        assert_eq!(parse_status_line(b"HTTP/1.0 503 \r\n"), Some(503));
        assert_eq!(parse_status_line(b"HTTP/1.1 204\r\n"), Some(204));
        assert_eq!(parse_status_line(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(parse_status_line(b"HTTP/1.1 2000 OK\r\n"), None);
        assert_eq!(parse_status_line(b"HTTP/1.1 200 OK"), None);
        assert_eq!(parse_status_line(b""), None);
    }
}
