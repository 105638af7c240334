//! Checking a Provider's receipt log (a pactd extension of PACT §5.6, see
//! docs/receipt-log.md): the agent keeps the newest signed tree head it saw
//! per log, proves every newer head extends it (RFC 9162 §2.1.4 consistency
//! proof), and keeps an inclusion proof (RFC 9162 §2.1.3) for each receipt
//! it holds once a head covers it. A Provider that later cuts receipts or a
//! whole grant's chain cannot produce a consistency proof from the head the
//! agent holds, and that head, signed by the Provider, is the evidence.
//!
//! A receipt the Provider keeps out of the log altogether is caught too:
//! pactd logs a receipt at the next tree-head job after it is stored, so a
//! signed head whose timestamp is more than [`WITHHELD_AFTER`] after the
//! receipt's own `ts` must include it. One that does not is reported as
//! withheld, and `pact-agent receipts` fails (docs/receipt-log.md).

use std::collections::BTreeMap;

use anyhow::{Result, anyhow, bail};
use pact_crypto::merkle::{self, Hash};
use pact_jose::{ProviderKeySet, TreeHead};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::http::{Http, Request};
use crate::state::{Home, StoredReceipt};

/// A signed tree head as kept.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeldHead {
    pub tree_size: u64,
    pub root_hash: String,
    pub timestamp: u64,
    /// The compact JWS (`typ: pact-sth+jws`): the Provider's own signed word.
    pub jws: String,
}

/// An inclusion proof as kept, checked against the head of `tree_size`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HeldInclusion {
    pub leaf_index: u64,
    pub tree_size: u64,
    pub inclusion_path: Vec<String>,
}

/// What the agent keeps about one log (key: the tree head URI).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HeldLog {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<HeldHead>,
    /// By leaf hash (base64url).
    #[serde(default)]
    pub included: BTreeMap<String, HeldInclusion>,
    /// A signed head the Provider served that does not extend `head`, kept
    /// as evidence together with why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<(String, String)>,
}

/// The outcome for one log.
#[derive(Clone, Debug)]
pub struct LogReport {
    pub tree_head_uri: String,
    /// `Ok(size)`: consistent up to that size.
    pub verdict: std::result::Result<u64, String>,
    /// Receipts with a verified inclusion proof.
    pub included: usize,
    /// Receipts no head covers yet.
    pub pending: usize,
    /// Receipts a signed head newer than their `ts` plus [`WITHHELD_AFTER`]
    /// still leaves out: what the line says about each.
    pub withheld: Vec<String>,
}

impl LogReport {
    /// Whether the log check failed: a head that does not extend the held
    /// one (or cannot be checked), or a withheld receipt.
    pub fn failed(&self) -> bool {
        self.verdict.is_err() || !self.withheld.is_empty()
    }

    /// The line `pact-agent receipts` prints.
    pub fn line(&self) -> String {
        if let (Ok(size), false) = (&self.verdict, self.withheld.is_empty()) {
            return format!(
                "tree: FAILED: {} receipt(s) withheld from the log: {}; consistent up to size {size}",
                self.withheld.len(),
                self.withheld.join("; ")
            );
        }
        match &self.verdict {
            Ok(0) => format!(
                "tree: no signed tree head yet; {} receipts waiting for one",
                self.pending
            ),
            Ok(size) => {
                let mut s = format!(
                    "tree: consistent up to size {size}; {} receipts included",
                    self.included
                );
                if self.pending > 0 {
                    s.push_str(&format!("; {} not yet in a signed head", self.pending));
                }
                s
            }
            Err(e) => format!("tree: FAILED: {e}"),
        }
    }
}

const STATE: &str = "receipt_log.json";

/// How long after a receipt's `ts` a signed head may still leave it out.
/// pactd stores a receipt within its request (30 s at most by default) and
/// logs it at the next tree-head job, which then signs the head with its
/// current time; the margin covers that, the interval between jobs at its
/// default (60 s) several times over, and clock differences between the
/// nodes that signed the receipt and the head. It does not depend on the
/// interval: any head signed this long after the receipt includes it.
pub const WITHHELD_AFTER: time::Duration = time::Duration::minutes(5);

/// A kept receipt as the log check needs it: its compact JWS and its `ts`.
#[derive(Clone, Copy, Debug)]
pub struct HeldReceipt<'a> {
    pub jws: &'a str,
    /// The receipt's `ts` claim (RFC 3339), when it has a readable one.
    pub ts: Option<time::OffsetDateTime>,
}

fn get_json<'a>(v: &'a Value, k: &str) -> Result<&'a Value> {
    v.get(k).ok_or_else(|| anyhow!("the answer has no {k}"))
}

fn hashes(v: &Value) -> Result<Vec<Hash>> {
    v.as_array()
        .ok_or_else(|| anyhow!("a proof is not an array"))?
        .iter()
        .map(|h| {
            h.as_str()
                .and_then(merkle::decode_hash)
                .ok_or_else(|| anyhow!("a proof hash is not 32 bytes of base64url"))
        })
        .collect()
}

fn held(head: &TreeHead, jws: &str) -> HeldHead {
    HeldHead {
        tree_size: head.tree_size,
        root_hash: head.root_hash.clone(),
        timestamp: head.timestamp,
        jws: jws.to_owned(),
    }
}

/// `GET` returning `(status, json)`.
async fn fetch(http: &Http, url: &str) -> Result<(u16, Value)> {
    let res = http.send(Request::get(url)).await?;
    let body = res.json().unwrap_or(Value::Null);
    Ok((res.status, body))
}

/// Fetches and verifies the newest head at `uri`.
async fn newest_head(http: &Http, uri: &str, keys: &ProviderKeySet) -> Result<(TreeHead, String)> {
    let (status, body) = fetch(http, uri).await?;
    if status != 200 {
        bail!("GET {uri}: HTTP {status}");
    }
    let jws = get_json(&body, "jws")?
        .as_str()
        .ok_or_else(|| anyhow!("the tree head's jws is not a string"))?;
    let head = pact_jose::verify_tree_head(jws, keys)
        .map_err(|e| anyhow!("the tree head does not verify: {e}"))?;
    Ok((head, jws.to_owned()))
}

/// Checks one log: the newest head against the held one, and inclusion of
/// the given receipts (their JWSs). Updates `state` only with what verified.
pub async fn check_log(
    http: &Http,
    uri: &str,
    keys: &ProviderKeySet,
    receipts: &[HeldReceipt<'_>],
    state: &mut HeldLog,
) -> LogReport {
    let mut report = LogReport {
        tree_head_uri: uri.to_owned(),
        verdict: Ok(0),
        included: 0,
        pending: 0,
        withheld: Vec::new(),
    };
    match check_inner(http, uri, keys, receipts, state, &mut report).await {
        Ok(size) => report.verdict = Ok(size),
        Err(e) => report.verdict = Err(e.to_string()),
    }
    report
}

async fn check_inner(
    http: &Http,
    uri: &str,
    keys: &ProviderKeySet,
    receipts: &[HeldReceipt<'_>],
    state: &mut HeldLog,
    report: &mut LogReport,
) -> Result<u64> {
    let base = uri
        .strip_suffix("/tree-head")
        .ok_or_else(|| anyhow!("{uri} does not end in /tree-head"))?;
    // No head published yet is not a failure while none was ever held: the
    // receipts wait for the first one (a head that vanished after being
    // held is, below).
    if state.head.is_none() {
        let (status, _) = fetch(http, uri).await?;
        if status == 404 {
            report.pending = receipts.len();
            return Ok(0);
        }
    }
    let (new, new_jws) = newest_head(http, uri, keys).await?;
    let new_root = new
        .root()
        .ok_or_else(|| anyhow!("the tree head's root is malformed"))?;
    if let Some(old) = state.head.clone() {
        let old_root = merkle::decode_hash(&old.root_hash)
            .ok_or_else(|| anyhow!("the held tree head's root is malformed"))?;
        let (m, n) = (old.tree_size, new.tree_size);
        let refuse = |state: &mut HeldLog, why: String| {
            state.refused = Some((new_jws.clone(), why.clone()));
            anyhow!(why)
        };
        if n < m {
            return Err(refuse(
                state,
                format!(
                    "provider removed or rewrote receipts: its newest signed head has size {n}, \
                     smaller than the head of size {m} held"
                ),
            ));
        }
        if n == m {
            if new_root != old_root {
                return Err(refuse(
                    state,
                    format!(
                        "provider removed or rewrote receipts: two different signed heads of \
                         size {n}"
                    ),
                ));
            }
        } else {
            let url = format!("{base}/proof/consistency?first={m}&second={n}");
            let (status, body) = fetch(http, &url).await?;
            let proof = if status == 200 {
                get_json(&body, "consistency_path").and_then(hashes).ok()
            } else {
                None
            };
            let ok =
                proof.is_some_and(|p| merkle::verify_consistency(m, n, &old_root, &new_root, &p));
            if !ok {
                return Err(refuse(
                    state,
                    format!(
                        "provider removed or rewrote receipts: consistency proof from {m} to \
                         {n} fails (HTTP {status})"
                    ),
                ));
            }
        }
    }
    state.head = Some(held(&new, &new_jws));
    state.refused = None;

    let n = new.tree_size;
    let head_time = time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(new.timestamp).saturating_mul(1_000_000),
    )
    .ok();
    for r in receipts {
        let leaf = merkle::receipt_leaf_hash(r.jws);
        let key = merkle::encode_hash(&leaf);
        // A proof kept against an older head still holds: every head since
        // was proved to extend it.
        if state.included.contains_key(&key) {
            report.included += 1;
            continue;
        }
        let url = format!("{base}/proof/inclusion?receipt={key}&size={n}");
        let (status, body) = fetch(http, &url).await?;
        if status == 404 {
            // Not in this head. Fine while the head may predate the
            // receipt's logging; not once it was signed well after it.
            match (r.ts, head_time) {
                (Some(ts), Some(at)) if at > ts + WITHHELD_AFTER => {
                    report.withheld.push(format!(
                        "the receipt of {} (leaf {key}) is not in the signed head of size {n}                          from {}, more than {} minutes later",
                        rfc3339(ts),
                        rfc3339(at),
                        WITHHELD_AFTER.whole_minutes()
                    ));
                }
                _ => report.pending += 1,
            }
            continue;
        }
        if status != 200 {
            bail!("GET {url}: HTTP {status}");
        }
        let index = get_json(&body, "leaf_index")?
            .as_u64()
            .ok_or_else(|| anyhow!("leaf_index is not a number"))?;
        let path = hashes(get_json(&body, "inclusion_path")?)?;
        if !merkle::verify_inclusion(index, n, &leaf, &path, &new_root) {
            bail!(
                "the inclusion proof of a held receipt (leaf {key}) in the head of size {n} fails"
            );
        }
        state.included.insert(
            key,
            HeldInclusion {
                leaf_index: index,
                tree_size: n,
                inclusion_path: path.iter().map(merkle::encode_hash).collect(),
            },
        );
        report.included += 1;
    }
    Ok(n)
}

fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The receipt's `ts` claim, as kept with it.
fn receipt_ts(r: &StoredReceipt) -> Option<time::OffsetDateTime> {
    let ts = r.receipt.get("claims")?.get("ts")?.as_str()?;
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()
}

/// The keys a head is verified with: the receipt key archive (every key
/// the Provider ever signed with; heads are kept as long as receipts),
/// else `jwks_uri`.
async fn keys_of(http: &Http, r: &StoredReceipt) -> Result<ProviderKeySet> {
    let uri = r.receipt_keys_uri.as_deref().unwrap_or(&r.jwks_uri);
    crate::oauth::provider_keys(http, uri).await.map(|(_, k)| k)
}

/// Checks every log the kept receipts name and saves what verified in
/// `receipt_log.json` in the state directory.
pub async fn check_all(
    http: &Http,
    home: &Home,
    receipts: &[StoredReceipt],
) -> Result<Vec<LogReport>> {
    let mut state: BTreeMap<String, HeldLog> = home.read_state(STATE)?;
    let mut by_log: BTreeMap<String, (&StoredReceipt, Vec<HeldReceipt<'_>>)> = BTreeMap::new();
    for r in receipts {
        let Some(uri) = &r.receipt_tree_head_uri else {
            continue;
        };
        let Some(jws) = r.receipt.get("jws").and_then(Value::as_str) else {
            continue;
        };
        by_log
            .entry(uri.clone())
            .or_insert((r, Vec::new()))
            .1
            .push(HeldReceipt {
                jws,
                ts: receipt_ts(r),
            });
    }
    let mut out = Vec::new();
    for (uri, (first, jwss)) in by_log {
        let held = state.entry(uri.clone()).or_default();
        let report = match keys_of(http, first).await {
            Ok(keys) => check_log(http, &uri, &keys, &jwss, held).await,
            Err(e) => LogReport {
                tree_head_uri: uri,
                verdict: Err(format!("cannot fetch the provider's keys: {e}")),
                included: 0,
                pending: 0,
                withheld: Vec::new(),
            },
        };
        out.push(report);
    }
    home.write_state(STATE, &state)?;
    Ok(out)
}
