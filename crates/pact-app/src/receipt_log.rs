//! The receipt log (a pactd extension of PACT §5.6, docs/receipt-log.md):
//! every receipt is a leaf of one Merkle tree in the manner of Certificate
//! Transparency (RFC 9162 §2.1), signed tree heads are published at regular
//! intervals, and anyone can fetch inclusion and consistency proofs. A PA
//! that keeps an older head can then prove that a receipt it holds was
//! logged, and that a later head is (or is not) an extension of it: cutting
//! the newest receipts or a whole grant's chain is provable, not merely
//! detectable by pactd itself.

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use pact_crypto::merkle::{self, Hash, Tree};
use pact_db::receipt_log::{self as db_log, StoredTreeHead};
use pact_jose::ProviderKeySet;
use pact_proto::A2aError;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::error::ApiError;
use pact_node::node::{Node, NodeInner};

pub use pact_node::receipt_tree::LogCache;
pub use pact_node::tree_heads::{LogError, publish, run};
use pact_node::tree_heads::{as_i64, sync_tree, to_hash};

/// The job's refusals as the faces answer them: a database failure as
/// such (503 while it is unreachable), anything else an internal error.
impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::Db(e) => e.into(),
            other => ApiError::internal(other),
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP: public, unauthenticated, cacheable.

fn bad(message: &str) -> ApiError {
    ApiError::A2a(A2aError::invalid_params(message))
}

/// A public JSON answer; `immutable` for answers about a fixed tree size,
/// which can never change.
fn public_json(body: &Value, immutable: bool) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut res = Response::new(Body::from(bytes));
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=86400, immutable"
        } else {
            "public, max-age=10"
        }),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    res
}

/// The query's parameters, each at most once, none unknown.
fn params<'a>(
    raw: Option<&'a str>,
    allowed: &[&'a str],
) -> Result<Vec<(&'a str, String)>, ApiError> {
    let mut out: Vec<(&str, String)> = Vec::new();
    for (k, v) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        let Some(name) = allowed.iter().find(|a| **a == k) else {
            return Err(bad("Unknown query parameter"));
        };
        if out.iter().any(|(n, _)| n == name) {
            return Err(bad("A query parameter is repeated"));
        }
        out.push((*name, v.into_owned()));
    }
    Ok(out)
}

fn get<'a>(params: &'a [(&str, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

/// A tree size: decimal, at least 1, at most the newest head's.
fn size_param(value: &str, name: &str, latest: u64) -> Result<u64, ApiError> {
    let ok = !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit());
    let n = ok
        .then(|| value.parse::<u64>().ok())
        .flatten()
        .ok_or_else(|| bad(&format!("{name} must be a positive decimal tree size")))?;
    if n == 0 {
        return Err(bad(&format!("{name} must be at least 1")));
    }
    if n > latest {
        return Err(bad(&format!(
            "{name} exceeds the newest signed tree head's size ({latest})"
        )));
    }
    Ok(n)
}

fn head_json(h: &StoredTreeHead) -> Value {
    json!({
        "tree_size": h.tree_size,
        "root_hash": merkle::encode_hash(&h.root_hash.clone().try_into().unwrap_or([0; 32])),
        "timestamp": h.timestamp_ms,
        "kid": h.kid,
        "jws": h.jws,
    })
}

async fn latest_size(node: &NodeInner) -> Result<(u64, Option<StoredTreeHead>), ApiError> {
    let latest = db_log::latest_head(&node.db).await?;
    let size = latest
        .as_ref()
        .map_or(0, |h| u64::try_from(h.tree_size).unwrap_or(0));
    Ok((size, latest))
}

/// A published head of exactly `size`; its absence is a 404.
async fn head_of(node: &NodeInner, size: u64) -> Result<StoredTreeHead, ApiError> {
    db_log::head_of_size(&node.db, as_i64(size)?)
        .await?
        .ok_or(ApiError::NotFound)
}

/// `GET /receipts/tree-head[?size=N]`: the newest signed tree head, or the
/// one of size N. 404 when none is published (yet).
pub async fn tree_head(
    State(node): State<Node>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let p = params(query.as_deref(), &["size"])?;
    let (latest_size, latest) = latest_size(&node).await?;
    match get(&p, "size") {
        None => {
            let head = latest.ok_or(ApiError::NotFound)?;
            Ok(public_json(&head_json(&head), false))
        }
        Some(v) => {
            let size = size_param(v, "size", latest_size)?;
            let head = head_of(&node, size).await?;
            Ok(public_json(&head_json(&head), true))
        }
    }
}

/// `GET /receipts/proof/inclusion?receipt=<id or leaf hash>[&size=N]`
/// (RFC 9162 §2.1.3): where the receipt is in the tree of a published head
/// (the newest by default) and its audit path. 404 when the receipt is not
/// in that tree (not logged yet, or unknown).
pub async fn inclusion(
    State(node): State<Node>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let p = params(query.as_deref(), &["receipt", "size"])?;
    let receipt = get(&p, "receipt").ok_or_else(|| bad("receipt is required"))?;
    let (by_id, by_hash) = if !receipt.is_empty()
        && receipt.len() <= 19
        && receipt.bytes().all(|b| b.is_ascii_digit())
    {
        let id = receipt
            .parse::<i64>()
            .map_err(|_| bad("receipt id out of range"))?;
        (Some(id), None)
    } else {
        let h = merkle::decode_hash(receipt).ok_or_else(|| {
            bad("receipt must be a receipt id or the base64url SHA-256 leaf hash of its JWS")
        })?;
        (None, Some(h))
    };
    let (latest, head) = latest_size(&node).await?;
    let head = head.ok_or(ApiError::NotFound)?;
    let fixed = get(&p, "size").is_some();
    let (size, head) = match get(&p, "size") {
        None => (latest, head),
        Some(v) => {
            let size = size_param(v, "size", latest)?;
            (size, head_of(&node, size).await?)
        }
    };
    let (index, receipt_id, leaf) =
        db_log::find(&node.db, by_id, by_hash.as_ref().map(|h| h.as_slice()))
            .await?
            .ok_or(ApiError::NotFound)?;
    let index = u64::try_from(index).map_err(|_| ApiError::NotFound)?;
    if index >= size {
        return Err(ApiError::NotFound);
    }
    sync_tree(&node, size).await?;
    let path = node
        .receipt_log
        .with_tree(|t| t.inclusion_proof(index, size))
        .ok_or_else(|| ApiError::Internal("no inclusion proof for a logged receipt".into()))?;
    let leaf = to_hash(&leaf)?;
    Ok(public_json(
        &json!({
            "leaf_index": index,
            "receipt_id": receipt_id,
            "leaf_hash": merkle::encode_hash(&leaf),
            "tree_size": size,
            "tree_head": head_json(&head),
            "inclusion_path": path.iter().map(merkle::encode_hash).collect::<Vec<_>>(),
        }),
        // Only a proof against a given size never changes; without one it
        // is about the newest head, which moves on.
        fixed,
    ))
}

/// `GET /receipts/proof/consistency?first=M&second=N` (RFC 9162 §2.1.4):
/// proves the tree of the published head of size M is a prefix of that of
/// size N. `1 <= M <= N <= ` the newest head's size; both heads must exist.
pub async fn consistency(
    State(node): State<Node>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let p = params(query.as_deref(), &["first", "second"])?;
    let (first, second) = match (get(&p, "first"), get(&p, "second")) {
        (Some(f), Some(s)) => (f, s),
        _ => return Err(bad("first and second are required")),
    };
    let (latest, _) = latest_size(&node).await?;
    let first = size_param(first, "first", latest)?;
    let second = size_param(second, "second", latest)?;
    if first > second {
        return Err(bad("first must not exceed second"));
    }
    let first_head = head_of(&node, first).await?;
    let second_head = head_of(&node, second).await?;
    sync_tree(&node, second).await?;
    let path = node
        .receipt_log
        .with_tree(|t| t.consistency_proof(first, second))
        .ok_or_else(|| ApiError::Internal("no consistency proof between heads".into()))?;
    Ok(public_json(
        &json!({
            "first": first,
            "second": second,
            "first_tree_head": head_json(&first_head),
            "second_tree_head": head_json(&second_head),
            "consistency_path": path.iter().map(merkle::encode_hash).collect::<Vec<_>>(),
        }),
        true,
    ))
}

// ---------------------------------------------------------------------------
// The audit behind `pactd receipts verify`.

/// What the log audit found.
#[derive(Clone, Debug, Default)]
pub struct LogAudit {
    pub entries: u64,
    pub heads: usize,
    /// The newest head's size, when one is published.
    pub newest: Option<u64>,
    pub problems: Vec<String>,
}

fn when(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// Checks that the stored receipts reproduce every signed tree head: each
/// head's signature (a key pactd ever signed with), and its root recomputed
/// from the receipts themselves (leaf hashes recomputed from each stored
/// JWS, not read from the log). Truncating the receipts, deleting a whole
/// grant's chain, editing or reordering receipts is reported together with
/// the head that proves it.
pub async fn audit(
    db: &pact_db::PgPool,
    keys: &ProviderKeySet,
) -> Result<LogAudit, pact_db::Error> {
    let entries = db_log::entries(db).await?;
    let heads = db_log::heads(db).await?;
    let mut out = LogAudit {
        entries: entries.len() as u64,
        heads: heads.len(),
        newest: heads
            .last()
            .map(|h| u64::try_from(h.tree_size).unwrap_or(0)),
        problems: Vec::new(),
    };
    // The smallest head covering log index `i`: the evidence for entry `i`.
    let covering = |i: u64| {
        heads
            .iter()
            .find(|h| u64::try_from(h.tree_size).unwrap_or(0) > i)
            .map(|h| {
                format!(
                    " (covered by the signed head of size {} of {})",
                    h.tree_size,
                    when(h.timestamp_ms)
                )
            })
            .unwrap_or_default()
    };
    let mut tree = Tree::new();
    for e in &entries {
        let position = tree.len();
        if u64::try_from(e.log_index).ok() != Some(position) {
            out.problems.push(format!(
                "log entries from index {position} up to {} are missing{}",
                e.log_index,
                covering(position)
            ));
            // Everything after a gap sits at a shifted position: no head
            // past it can be reproduced, which the checks below report.
            break;
        }
        let stored: Option<Hash> = e.leaf_hash.as_slice().try_into().ok();
        let leaf = match &e.jws {
            Some(jws) => {
                let h = merkle::receipt_leaf_hash(jws);
                if stored != Some(h) {
                    out.problems.push(format!(
                        "log entry {position}: receipt {} no longer matches its logged leaf \
                         hash (edited){}",
                        e.receipt_id,
                        covering(position)
                    ));
                }
                h
            }
            None => {
                out.problems.push(format!(
                    "log entry {position}: receipt {} is no longer stored (deleted){}",
                    e.receipt_id,
                    covering(position)
                ));
                stored.unwrap_or([0; 32])
            }
        };
        tree.push(leaf);
    }
    for id in db_log::unlogged(db).await? {
        out.problems.push(format!(
            "receipt {id} is neither in the log nor waiting for it: it would never be covered \
             by a signed head"
        ));
    }
    for h in &heads {
        let size = u64::try_from(h.tree_size).unwrap_or(0);
        let signed_at = when(h.timestamp_ms);
        match pact_jose::verify_tree_head(&h.jws, keys) {
            Err(e) => out.problems.push(format!(
                "the tree head of size {size} of {signed_at} does not verify: {e}"
            )),
            Ok(signed) => {
                if signed.tree_size != size
                    || signed.root().map(|r| r.to_vec()) != Some(h.root_hash.clone())
                {
                    out.problems.push(format!(
                        "the stored tree head of size {size} differs from its signed JWS"
                    ));
                }
            }
        }
        match tree.root(size) {
            None => out.problems.push(format!(
                "the signed tree head of size {size} of {signed_at} covers {size} receipts, but \
                 only {} log entries are in order: receipts were cut from the end or deleted",
                tree.len()
            )),
            Some(root) if root.to_vec() != h.root_hash => out.problems.push(format!(
                "the stored receipts do not reproduce the signed tree head of size {size} of \
                 {signed_at}: receipts were removed, edited or reordered"
            )),
            Some(_) => {}
        }
    }
    Ok(out)
}
