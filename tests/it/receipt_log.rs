//! The receipt log (docs/receipt-log.md, RFC 9162): signed tree heads over
//! every receipt, inclusion and consistency proofs, and what they catch that
//! the per-grant chains cannot — a cut tail, a whole grant's chain deleted —
//! both in `pactd receipts verify`'s audit and in a personal agent that held
//! an older head.

use pact_agent::http::Http;
use pact_agent::receipt_log::check_all;
use pact_agent::state::{Home, StoredReceipt};
use pact_crypto::merkle::{self, Hash};
use pact_jose::ProviderKeySet;
use pact_server::receipt_log::{audit, publish};
use pact_tests::TestApp;
use serde_json::Value;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::assert_a2a_error;

const ISS: &str = "https://pa.example";

async fn delegated_app() -> TestApp {
    // The job is run by hand here, never by the timer.
    let app = TestApp::spawn_with(|c| {
        c.delegation.poll_interval_secs = 1;
        c.tree_head_interval = std::time::Duration::from_secs(3600);
    })
    .await;
    app.enable_demo_delegation().await;
    app
}

/// `n` delegated turns under a new grant of `user` (PA subject `sub`): the
/// grant and the `{jws, claims}` receipts, in order.
async fn turns(app: &TestApp, sub: &str, user: &str, n: usize) -> (Uuid, Vec<Value>) {
    let pa = app.registered_pa(ISS).await;
    let tokens = app.connect(&pa, sub, user, &["orders:read"]).await;
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    more_turns(app, &pa, sub, &token, n).await
}

async fn more_turns(
    app: &TestApp,
    pa: &pact_tests::pa::TestPa,
    sub: &str,
    token: &str,
    n: usize,
) -> (Uuid, Vec<Value>) {
    let pa_jwt = pa.token(sub, app.audience());
    let mut out = Vec::new();
    let mut grant = Uuid::nil();
    for _ in 0..n {
        let res = app
            .send_delegated(
                "demo",
                &pa_jwt,
                token,
                &Uuid::new_v4().to_string(),
                "show my orders",
                None,
            )
            .await;
        assert_eq!(res.status(), 200);
        let v: Value = res.json().await.unwrap();
        let receipt = v["message"]["metadata"]["pact.receipt"].clone();
        grant = receipt["claims"]["grantId"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        out.push(receipt);
    }
    (grant, out)
}

async fn get(app: &TestApp, path_and_query: &str) -> reqwest::Response {
    app.http
        .get(format!("{}{path_and_query}", app.base_url))
        .send()
        .await
        .unwrap()
}

async fn get_json(app: &TestApp, path_and_query: &str) -> Value {
    let res = get(app, path_and_query).await;
    assert_eq!(res.status(), 200, "{path_and_query}");
    res.json().await.unwrap()
}

fn hash(v: &Value) -> Hash {
    merkle::decode_hash(v.as_str().unwrap()).unwrap()
}

fn hashes(v: &Value) -> Vec<Hash> {
    v.as_array().unwrap().iter().map(hash).collect()
}

/// The receipt key archive, as a PA fetches it.
async fn receipt_keys(app: &TestApp) -> ProviderKeySet {
    let doc = get_json(app, "/a2a/demo/oauth/receipt-keys.json").await;
    ProviderKeySet::from_public_jwks(doc["keys"].as_array().unwrap()).unwrap()
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// What `pact-agent` keeps for a receipt it received from `app`.
fn kept(app: &TestApp, receipt: &Value) -> StoredReceipt {
    StoredReceipt {
        brand: app.iface("demo"),
        sub: "s".into(),
        jwks_uri: format!("{}/oauth/jwks.json", app.iface("demo")),
        receipt_keys_uri: Some(format!("{}/oauth/receipt-keys.json", app.iface("demo"))),
        receipt_tree_head_uri: Some(format!("{}/receipts/tree-head", app.base_url)),
        received_at: 1,
        receipt: receipt.clone(),
        verified: true,
    }
}

/// Heads are published only when the log grew, signed with a key of the
/// receipt JWKS, advertised in the metadata; every receipt has an inclusion
/// proof (by leaf hash and by id) and a newer head a consistency proof;
/// a forged proof does not verify.
#[tokio::test]
async fn signed_tree_heads_and_proofs_verify() {
    let app = delegated_app().await;
    let meta = get_json(
        &app,
        "/a2a/demo/oauth/.well-known/oauth-authorization-server",
    )
    .await;
    assert_eq!(
        meta["receipt_tree_head_uri"],
        format!("{}/receipts/tree-head", app.base_url)
    );
    // Nothing logged yet: no head, and the job publishes none.
    assert_eq!(get(&app, "/receipts/tree-head").await.status(), 404);
    assert!(publish(&app.state, now()).await.unwrap().is_none());

    let (_, mut receipts) = turns(&app, "pa-user-1", "alice", 3).await;
    receipts.extend(turns(&app, "pa-user-2", "bob", 2).await.1);
    let published = publish(&app.state, now()).await.unwrap().unwrap();
    assert_eq!(published.tree_size, 5);
    // Not grown: no new head.
    assert!(publish(&app.state, now()).await.unwrap().is_none());

    let res = get(&app, "/receipts/tree-head").await;
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["cache-control"]
            .to_str()
            .unwrap()
            .starts_with("public")
    );
    let head: Value = res.json().await.unwrap();
    let keys = receipt_keys(&app).await;
    let signed = pact_jose::verify_tree_head(head["jws"].as_str().unwrap(), &keys).unwrap();
    assert_eq!(signed.tree_size, 5);
    assert_eq!(head["tree_size"], 5);
    assert_eq!(head["root_hash"], signed.root_hash);
    assert_eq!(head["timestamp"], signed.timestamp);
    assert!(
        keys.jwks_document()["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kid"] == head["kid"])
    );
    let root5 = signed.root().unwrap();
    // The root is the RFC 9162 MTH of the receipts' JWSs, in the order stored.
    let local = merkle::Tree::from_leaf_hashes(
        receipts
            .iter()
            .map(|r| merkle::receipt_leaf_hash(r["jws"].as_str().unwrap())),
    );
    assert_eq!(local.root(5), Some(root5));

    // Only a proof against a given size is immutable; without one it is
    // about the newest head, which moves on.
    let cache = |res: &reqwest::Response| {
        res.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let first = merkle::encode_hash(&merkle::receipt_leaf_hash(
        receipts[0]["jws"].as_str().unwrap(),
    ));
    let newest = get(&app, &format!("/receipts/proof/inclusion?receipt={first}")).await;
    assert_eq!(newest.status(), 200);
    assert!(!cache(&newest).contains("immutable"), "{}", cache(&newest));
    let fixed = get(
        &app,
        &format!("/receipts/proof/inclusion?receipt={first}&size=5"),
    )
    .await;
    assert_eq!(fixed.status(), 200);
    assert!(cache(&fixed).contains("immutable"), "{}", cache(&fixed));

    for (i, r) in receipts.iter().enumerate() {
        let leaf = merkle::receipt_leaf_hash(r["jws"].as_str().unwrap());
        let key = merkle::encode_hash(&leaf);
        let proof = get_json(&app, &format!("/receipts/proof/inclusion?receipt={key}")).await;
        assert_eq!(proof["leaf_index"], i as u64);
        assert_eq!(proof["tree_size"], 5);
        let path = hashes(&proof["inclusion_path"]);
        assert!(merkle::verify_inclusion(i as u64, 5, &leaf, &path, &root5));
        // The same proof by receipt id.
        let id = proof["receipt_id"].as_i64().unwrap();
        let by_id = get_json(
            &app,
            &format!("/receipts/proof/inclusion?receipt={id}&size=5"),
        )
        .await;
        assert_eq!(by_id["inclusion_path"], proof["inclusion_path"]);
        // Forged: any altered hash, or the proof of another leaf, is refused.
        if let Some(first) = path.first() {
            let mut forged = path.clone();
            forged[0] = merkle::node_hash(first, first);
            assert!(!merkle::verify_inclusion(
                i as u64, 5, &leaf, &forged, &root5
            ));
        }
        let other = merkle::receipt_leaf_hash("forged.receipt.jws");
        assert!(!merkle::verify_inclusion(
            i as u64, 5, &other, &path, &root5
        ));
    }

    // The log grows; the new head extends the old one, provably.
    receipts.extend(turns(&app, "pa-user-3", "carol", 1).await.1);
    let grown = publish(&app.state, now()).await.unwrap().unwrap();
    assert_eq!(grown.tree_size, 6);
    let old = get_json(&app, "/receipts/tree-head?size=5").await;
    assert_eq!(old["jws"], head["jws"]);
    let new = get_json(&app, "/receipts/tree-head").await;
    let root6 = pact_jose::verify_tree_head(new["jws"].as_str().unwrap(), &keys)
        .unwrap()
        .root()
        .unwrap();
    let c = get_json(&app, "/receipts/proof/consistency?first=5&second=6").await;
    let path = hashes(&c["consistency_path"]);
    assert!(merkle::verify_consistency(5, 6, &root5, &root6, &path));
    let mut forged = path.clone();
    forged[0][0] ^= 1;
    assert!(!merkle::verify_consistency(5, 6, &root5, &root6, &forged));
    assert!(!merkle::verify_consistency(5, 6, &root6, &root6, &path));
    let same = get_json(&app, "/receipts/proof/consistency?first=6&second=6").await;
    assert_eq!(same["consistency_path"], serde_json::json!([]));

    // The audit behind `pactd receipts verify` finds every head reproduced.
    let report = audit(&app.db, &keys).await.unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!(
        (report.entries, report.heads, report.newest),
        (6, 2, Some(6))
    );

    // A receipt whose pending marker is removed before the job ran would
    // never be logged: the audit says so.
    turns(&app, "pa-user-4", "dave", 1).await;
    sqlx::query("delete from receipt_log_pending")
        .execute(&app.db)
        .await
        .unwrap();
    let report = audit(&app.db, &keys).await.unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(report.problems[0].contains("neither in the log nor waiting"));
}

/// Bad query parameters are clean 400s in the A2A error envelope; a size or
/// receipt that is well-formed but unknown is a 404.
#[tokio::test]
async fn bad_query_parameters_get_clean_400s() {
    let app = delegated_app().await;
    turns(&app, "pa-user-1", "alice", 2).await;
    publish(&app.state, now()).await.unwrap().unwrap();
    for q in [
        "/receipts/tree-head?size=0",
        "/receipts/tree-head?size=abc",
        "/receipts/tree-head?size=-1",
        "/receipts/tree-head?size=3",
        "/receipts/tree-head?size=99999999999999999999999",
        "/receipts/tree-head?size=1&size=2",
        "/receipts/tree-head?other=1",
        "/receipts/proof/inclusion",
        "/receipts/proof/inclusion?receipt=",
        "/receipts/proof/inclusion?receipt=not-a-hash",
        "/receipts/proof/inclusion?receipt=AAAA",
        "/receipts/proof/inclusion?receipt=1&size=7",
        "/receipts/proof/consistency",
        "/receipts/proof/consistency?first=1",
        "/receipts/proof/consistency?first=2&second=1",
        "/receipts/proof/consistency?first=0&second=2",
        "/receipts/proof/consistency?first=1&second=5",
        "/receipts/proof/consistency?first=x&second=2",
    ] {
        let res = get(&app, q).await;
        assert_eq!(res.status(), 400, "{q}");
        assert_a2a_error(res, 400, "INVALID_PARAMS", None).await;
    }
    for q in [
        // Sizes in range without a published head of that size.
        "/receipts/tree-head?size=1",
        "/receipts/proof/consistency?first=1&second=2",
        // A receipt that is not in the log.
        "/receipts/proof/inclusion?receipt=999",
        "/receipts/proof/inclusion?receipt=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU",
    ] {
        assert_eq!(get(&app, q).await.status(), 404, "{q}");
    }
}

/// Cutting a whole grant's chain and the log's tail is reported by the
/// audit with the head that proves it; an operator who also erases the heads
/// and publishes afresh fools the audit, but not a personal agent that held
/// the older head: no consistency proof can be given.
#[tokio::test]
async fn deleted_chains_and_truncation_are_provable() {
    let app = delegated_app().await;
    let (_, a) = turns(&app, "pa-user-1", "alice", 3).await;
    let (grant_b, b) = turns(&app, "pa-user-2", "bob", 2).await;
    publish(&app.state, now()).await.unwrap().unwrap();
    let keys = receipt_keys(&app).await;

    // The PA keeps its receipts and checks the log: the head of size 5 held,
    // all five included.
    let home = Home::at(std::env::temp_dir().join(format!("pact-agent-log-{}", Uuid::new_v4())));
    let held: Vec<StoredReceipt> = a.iter().chain(&b).map(|r| kept(&app, r)).collect();
    let http = Http::new().unwrap();
    let reports = check_all(&http, &home, &held).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].verdict, Ok(5));
    assert_eq!(reports[0].included, 5);
    assert_eq!(
        reports[0].line(),
        "tree: consistent up to size 5; 5 receipts included"
    );
    assert!(audit(&app.db, &keys).await.unwrap().problems.is_empty());

    // 1. Grant B's whole chain is deleted from the receipts. The chains
    //    that remain are intact, so only the log shows it.
    for sql in [
        "alter table receipts disable trigger receipts_append_only",
        "alter table receipt_log disable trigger receipt_log_append_only",
        "alter table receipt_tree_heads disable trigger receipt_tree_heads_append_only",
    ] {
        sqlx::query(sql).execute(&app.db).await.unwrap();
    }
    sqlx::query("delete from receipts where grant_id = $1")
        .bind(grant_b)
        .execute(&app.db)
        .await
        .unwrap();
    let stored = pact_db::receipts::list(&app.db, None).await.unwrap();
    assert!(pact_server::domain::receipt_chain::verify(&stored, &keys).is_empty());
    let report = audit(&app.db, &keys).await.unwrap();
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    for p in &report.problems {
        assert!(p.contains("is no longer stored"), "{p}");
        assert!(p.contains("covered by the signed head of size 5"), "{p}");
    }

    // 2. The log's tail goes too: the head of size 5 proves the cut.
    sqlx::query("delete from receipt_log where log_index >= 3")
        .execute(&app.db)
        .await
        .unwrap();
    let report = audit(&app.db, &keys).await.unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("head of size 5")
            && report.problems[0].contains("only 3 log entries"),
        "{:?}",
        report.problems
    );

    // 3. The heads are erased and the log grows again; a node with a fresh
    //    copy of the tree publishes a head of size 6 over the rewritten log.
    sqlx::query("delete from receipt_tree_heads")
        .execute(&app.db)
        .await
        .unwrap();
    let pa = app.registered_pa(ISS).await;
    let tokens = app
        .connect(&pa, "pa-user-1", "alice", &["orders:read"])
        .await;
    more_turns(
        &app,
        &pa,
        "pa-user-1",
        tokens["access_token"].as_str().unwrap(),
        3,
    )
    .await;
    let peer = app
        .spawn_peer(|c| c.tree_head_interval = std::time::Duration::from_secs(3600))
        .await;
    let rewritten = publish(&peer.state, now()).await.unwrap().unwrap();
    assert_eq!(rewritten.tree_size, 6);
    // The store now agrees with itself: the audit alone cannot tell.
    assert!(audit(&app.db, &keys).await.unwrap().problems.is_empty());

    // The PA's held head can: there is no consistency proof from 5 to 6.
    let reports = check_all(&http, &home, &held).await.unwrap();
    let err = reports[0].verdict.clone().unwrap_err();
    assert!(
        err.contains("provider removed or rewrote receipts: consistency proof from 5 to 6 fails"),
        "{err}"
    );
    assert!(reports[0].line().starts_with("tree: FAILED: "));
    // The held head is kept, signed by the provider: the evidence.
    let state: std::collections::BTreeMap<String, pact_agent::receipt_log::HeldLog> =
        home.read_state("receipt_log.json").unwrap();
    let log = state.values().next().unwrap();
    let head = log.head.as_ref().unwrap();
    assert_eq!(head.tree_size, 5);
    assert_eq!(
        pact_jose::verify_tree_head(&head.jws, &keys)
            .unwrap()
            .tree_size,
        5
    );
    assert!(log.refused.is_some());
    // The receipts of grant B it holds were proved included in that head.
    for r in &b {
        let leaf = merkle::receipt_leaf_hash(r["jws"].as_str().unwrap());
        let inc = &log.included[&merkle::encode_hash(&leaf)];
        let path: Vec<Hash> = inc
            .inclusion_path
            .iter()
            .map(|h| merkle::decode_hash(h).unwrap())
            .collect();
        let root = merkle::decode_hash(&head.root_hash).unwrap();
        assert!(merkle::verify_inclusion(
            inc.leaf_index,
            5,
            &leaf,
            &path,
            &root
        ));
    }
    std::fs::remove_dir_all(home.dir()).ok();
    peer.stop().await;
}

/// Two nodes running the job at once publish one head per size, never two
/// conflicting ones: the advisory lock serialises them and the size is unique.
#[tokio::test]
async fn two_nodes_publish_one_head_per_size() {
    let app = delegated_app().await;
    let peer = app
        .spawn_peer(|c| c.tree_head_interval = std::time::Duration::from_secs(3600))
        .await;
    turns(&app, "pa-user-1", "alice", 2).await;
    let (a, b) = tokio::join!(publish(&app.state, now()), publish(&peer.state, now()));
    let published: Vec<_> = [a.unwrap(), b.unwrap()].into_iter().flatten().collect();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].tree_size, 2);
    let heads = pact_db::receipt_log::heads(&app.db).await.unwrap();
    assert_eq!(heads.len(), 1);
    // Both nodes serve the same head and the same proofs.
    let on_peer = get_json(&peer, "/receipts/tree-head").await;
    assert_eq!(on_peer, get_json(&app, "/receipts/tree-head").await);
    assert_eq!(
        get_json(&peer, "/receipts/proof/inclusion?receipt=1").await,
        get_json(&app, "/receipts/proof/inclusion?receipt=1").await
    );
    peer.stop().await;
}

/// Issue 28, finding 6: a receipt the Provider keeps out of the log. While
/// the newest head may be older than its logging it is only pending; once a
/// head signed more than `WITHHELD_AFTER` after the receipt's `ts` still
/// leaves it out, the check fails with a line that says so (and
/// `pact-agent receipts` exits non-zero on `failed()`).
#[tokio::test]
async fn a_receipt_kept_out_of_the_log_is_reported_as_withheld() {
    let app = delegated_app().await;
    let (_, held) = turns(&app, "pa-user-1", "alice", 2).await;
    // The second receipt never reaches the log: its pending marker is gone.
    sqlx::query(
        "delete from receipt_log_pending where receipt_id = \
         (select id from receipts where jws = $1)",
    )
    .bind(held[1]["jws"].as_str().unwrap())
    .execute(&app.db)
    .await
    .unwrap();
    publish(&app.state, now()).await.unwrap().unwrap();
    let home = Home::at(std::env::temp_dir().join(format!("pact-agent-held-{}", Uuid::new_v4())));
    let kept: Vec<StoredReceipt> = held.iter().map(|r| kept(&app, r)).collect();
    let http = Http::new().unwrap();
    let reports = check_all(&http, &home, &kept).await.unwrap();
    assert!(!reports[0].failed(), "{}", reports[0].line());
    assert_eq!(
        reports[0].line(),
        "tree: consistent up to size 1; 1 receipts included; 1 not yet in a signed head"
    );

    // The log goes on growing; a head signed six minutes later still leaves it out.
    turns(&app, "pa-user-2", "bob", 1).await;
    let later = now() + time::Duration::minutes(6);
    let head = publish(&app.state, later).await.unwrap().unwrap();
    assert_eq!(head.tree_size, 2);
    let reports = check_all(&http, &home, &kept).await.unwrap();
    let r = &reports[0];
    assert!(r.failed(), "{}", r.line());
    assert_eq!(r.verdict, Ok(2), "the tree itself is consistent");
    assert_eq!((r.included, r.pending, r.withheld.len()), (1, 0, 1));
    let line = r.line();
    assert!(
        line.starts_with("tree: FAILED: 1 receipt(s) withheld from the log: the receipt of ")
            && line.contains("is not in the signed head of size 2")
            && line.contains("more than 5 minutes later"),
        "{line}"
    );
    std::fs::remove_dir_all(home.dir()).ok();
}
