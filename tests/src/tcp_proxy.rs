//! A TCP forwarder between pactd and its PostgreSQL that a test can unplug
//! or freeze: a real outage as pactd sees one, without stopping the cluster
//! the other tests share.
//!
//! * [`TcpProxy::unplug`]: connections reset, new ones refused (a database
//!   that went away).
//! * [`TcpProxy::freeze`] / [`TcpProxy::freeze_all`]: bytes stop moving but
//!   nothing is closed (a NAT that dropped its mapping, a host that
//!   vanished): the peers' sockets stay open and their reads never return.
//!   [`TcpProxy::hold_new`] makes new connections the same: accepted, never
//!   forwarded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct TcpProxy {
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
    /// New connections start frozen.
    held: watch::Sender<bool>,
    /// Each forwarded connection's freeze switch, by the local port of its
    /// leg towards the server (what the server sees as `client_port`).
    frozen: Arc<Mutex<HashMap<u16, watch::Sender<bool>>>>,
}

impl TcpProxy {
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let (held, _) = watch::channel(false);
        let frozen: Arc<Mutex<HashMap<u16, watch::Sender<bool>>>> = Arc::default();
        let (up2, cut2, held2, frozen2) = (up.clone(), cut.clone(), held.clone(), frozen.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut_rx = cut2.subscribe();
                let target = target.clone();
                let gate = watch::Sender::new(*held2.borrow());
                let frozen = frozen2.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target.as_str()).await else {
                        return;
                    };
                    let port = server.local_addr().unwrap().port();
                    frozen.lock().unwrap().insert(port, gate.clone());
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::select! {
                        () = pump(cr, sw, gate.subscribe()) => {}
                        () = pump(sr, cw, gate.subscribe()) => {}
                        _ = cut_rx.changed() => {}
                    }
                    frozen.lock().unwrap().remove(&port);
                });
            }
        });
        Self {
            addr,
            up,
            cut,
            held,
            frozen,
        }
    }

    /// Closes every forwarded connection and refuses new ones.
    pub fn unplug(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn plug_in(&self) {
        self.up.store(true, Ordering::SeqCst);
    }

    /// Stops forwarding on the connection whose leg towards the server has
    /// local port `port` (the server's `client_port`), keeping it open;
    /// false when this proxy carries no such connection.
    pub fn freeze(&self, port: u16) -> bool {
        match self.frozen.lock().unwrap().get(&port) {
            Some(gate) => {
                gate.send_replace(true);
                true
            }
            None => false,
        }
    }

    /// New connections are accepted but never forwarded (`true`), or
    /// forwarded again (`false`; the ones held so far stay frozen until
    /// [`Self::thaw_all`]).
    pub fn hold_new(&self, hold: bool) {
        self.held.send_replace(hold);
    }

    /// Every connection, open and new, stops forwarding (nothing is closed).
    pub fn freeze_all(&self) {
        self.hold_new(true);
        for gate in self.frozen.lock().unwrap().values() {
            gate.send_replace(true);
        }
    }

    /// Everything forwards again: frozen connections resume where they stopped.
    pub fn thaw_all(&self) {
        self.hold_new(false);
        for gate in self.frozen.lock().unwrap().values() {
            gate.send_replace(false);
        }
    }

    /// `url` with its host and port replaced by this proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let mut u = url::Url::parse(url).unwrap();
        u.set_host(Some(&self.addr.ip().to_string())).unwrap();
        u.set_port(Some(self.addr.port())).unwrap();
        u.to_string()
    }

    /// The `host:port` a database URL points at.
    pub fn target_of(url: &str) -> String {
        let u = url::Url::parse(url).unwrap();
        format!("{}:{}", u.host_str().unwrap(), u.port().unwrap_or(5432))
    }
}

/// Copies `from` to `to` while the gate is open. Frozen, it reads nothing
/// (the sender's bytes pile up in the kernel's buffers, as on a path that
/// drops them) and writes nothing, and closes nothing.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            // Frozen while waiting: stop reading (a read is cancel-safe).
            _ = frozen.wait_for(|f| *f) => continue,
        };
        // Bytes read just before a freeze wait for the thaw too.
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
