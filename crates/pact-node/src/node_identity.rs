//! Who this process is, for its row in `nodes` (pact-server's `nodes.rs`
//! writes the heartbeat).

use time::OffsetDateTime;
use uuid::Uuid;

/// Who this process is; the id is random per process, so a restarted node is
/// a new row and the old one is swept.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub id: Uuid,
    pub hostname: String,
    pub version: &'static str,
    pub started_at: OffsetDateTime,
}

impl NodeIdentity {
    pub fn new(now: OffsetDateTime) -> Self {
        Self {
            id: Uuid::new_v4(),
            hostname: hostname(),
            version: env!("CARGO_PKG_VERSION"),
            started_at: now,
        }
    }
}

/// The kernel's host name (Linux), else `$HOSTNAME`, else "unknown"; bounded
/// to what the table accepts.
fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let clean: String = raw
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(255)
        .collect();
    if clean.is_empty() {
        "unknown".to_owned()
    } else {
        clean
    }
}
