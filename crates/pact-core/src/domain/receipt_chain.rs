//! Auditing a grant's receipt chain (a pactd extension of PACT §5.6): every
//! receipt's signature, its stored claims against its signed payload, its
//! sequence number, and its `prev` link to the receipt before it.

use pact_db::ids::GrantId;
use pact_db::receipts::StoredReceipt;
use pact_jose::ProviderKeySet;
use pact_proto::oauth::{Receipt, ReceiptClaims};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainBreak {
    pub grant_id: GrantId,
    pub seq: i32,
    pub problem: String,
}

/// Checks receipts ordered by (grant, seq), as `pact_db::receipts::list` returns them.
pub fn verify(receipts: &[StoredReceipt], keys: &ProviderKeySet) -> Vec<ChainBreak> {
    let mut breaks = Vec::new();
    let mut prev: Option<&StoredReceipt> = None;
    for r in receipts {
        let same_grant = prev.filter(|p| p.grant_id == r.grant_id);
        let mut problem = |what: String| {
            breaks.push(ChainBreak {
                grant_id: r.grant_id,
                seq: r.seq,
                problem: what,
            })
        };
        let expected_seq = same_grant.map_or(1, |p| p.seq + 1);
        if r.seq != expected_seq {
            problem(format!(
                "sequence gap: expected {expected_seq}, found {}",
                r.seq
            ));
        }
        match serde_json::from_value::<ReceiptClaims>(r.claims.clone()) {
            Err(e) => problem(format!("stored claims are malformed: {e}")),
            Ok(claims) => {
                let receipt = Receipt {
                    jws: r.jws.clone(),
                    claims,
                };
                match pact_jose::verify_receipt(&receipt, keys) {
                    Err(e) => problem(format!("signature or payload check failed: {e}")),
                    Ok(signed) => {
                        if signed.grant_id != r.grant_id.to_string() {
                            problem("receipt names another grant".to_owned());
                        }
                        let expected_prev = same_grant.map(|p| pact_jose::receipt_hash(&p.jws));
                        if signed.prev != expected_prev {
                            problem(
                                "prev does not match the hash of the previous receipt".to_owned(),
                            );
                        }
                    }
                }
            }
        }
        prev = Some(r);
    }
    breaks
}
