//! A TCP forwarder between pactd and its PostgreSQL that a test can unplug:
//! a real outage as pactd sees one (connections reset, new ones refused),
//! without stopping the cluster the other tests share.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct TcpProxy {
    pub addr: SocketAddr,
    up: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
}

impl TcpProxy {
    pub async fn start(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let (up2, cut2) = (up.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if !up2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut cut_rx = cut2.subscribe();
                let target = target.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target.as_str()).await else {
                        return;
                    };
                    let (mut c, mut s) = (client, server);
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut c, &mut s) => {}
                        _ = cut_rx.changed() => {}
                    }
                });
            }
        });
        Self { addr, up, cut }
    }

    /// Closes every forwarded connection and refuses new ones.
    pub fn unplug(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn plug_in(&self) {
        self.up.store(true, Ordering::SeqCst);
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
