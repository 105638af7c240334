//! Bounded authority end to end (PACT §5.7, RFC 9396): the limits a person
//! approves reach the merchant's tool through pactd's gateway, cannot lapse
//! when staff edit declarations, are consumed atomically, and anything beyond
//! them goes back to the person. A stand-in agent holds each turn open so the
//! test can call the gateway inside it, as a merchant's agent (or a
//! misbehaving one) would; a stand-in API counts what really arrives.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::post;
use pact_db::merchant::BrandTool;
use pact_server::admin::brand_settings;
use pact_server::admin::role::{Actor, Role};
use pact_server::domain::authz_details::DetailsType;
use pact_tests::TestApp;
use pact_tests::held::{HeldAgent, serve};
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify, mpsc};

use crate::journey::{grant, ok_json, verified_receipt};

const ISS: &str = "https://pa.example/bounds";
const SUB: &str = "pa-user-1";

/// The merchant's API as the test sees it: every call that arrived.
#[derive(Default)]
struct Api {
    calls: Mutex<Vec<(String, Value)>>,
    /// Rung when a `slow` call has arrived (it then waits 400 ms, or `_ms`).
    slow_arrived: Notify,
}

impl Api {
    async fn count(&self, tool: &str) -> usize {
        self.calls
            .lock()
            .await
            .iter()
            .filter(|(t, _)| t == tool)
            .count()
    }
}

/// `/pay` answers with the effect it declares (`_effect` in the arguments
/// overrides the amount), or 500 when the arguments hold `_fail`; `/refuse`
/// is the merchant saying no; `/slow`
/// takes its time; anything else answers `{"ok": true}`.
async fn api_call(
    State(api): State<Arc<Api>>,
    Path(tool): Path<String>,
    Json(body): Json<Value>,
) -> (axum::http::StatusCode, Json<Value>) {
    api.calls.lock().await.push((tool.clone(), body.clone()));
    let args = &body["args"];
    match tool.as_str() {
        // It took the money, then failed before answering.
        "pay" if args.get("_fail").is_some() => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "internal"})),
        ),
        "pay" => {
            let effect = args.get("_effect").unwrap_or(&args["amount"]).clone();
            (
                axum::http::StatusCode::OK,
                Json(json!({"paid": true, "pactEffect": {"amount": effect}})),
            )
        }
        "refuse" => (
            axum::http::StatusCode::CONFLICT,
            Json(json!({"error": "already_shipped", "message": "Order SHOP-1002 has shipped"})),
        ),
        "slow" => {
            api.slow_arrived.notify_one();
            let ms = args.get("_ms").and_then(Value::as_u64).unwrap_or(400);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            (axum::http::StatusCode::OK, Json(json!({"ok": true})))
        }
        _ => (axum::http::StatusCode::OK, Json(json!({"ok": true}))),
    }
}

/// The demo brand answered by a held agent, with the payments and orders
/// types below and the tools `pay` (payments:charge: `total=amount`,
/// `per_call=amount`, `charges`), `cancel_order` (orders:cancel:
/// `order_ids=order_id`, and the count `max_cancellations`), `refuse` and
/// `slow` (orders:read).
struct Shop {
    app: Arc<TestApp>,
    api: Arc<Api>,
    held: Arc<HeldAgent>,
    turns: mpsc::UnboundedReceiver<Value>,
    pa: pact_tests::TestPa,
    pa_jwt: String,
}

fn owner() -> Actor {
    Actor {
        kind: "cli",
        name: "bounds-test".to_owned(),
        role: Role::Owner,
        brands: None,
    }
}

async fn shop() -> Shop {
    shop_with(|_| {}).await
}

/// [`shop`], with pactd's configuration changed by `change`.
async fn shop_with(change: impl FnOnce(&mut pact_server::Config)) -> Shop {
    let app = TestApp::spawn_with(|c| {
        c.delegation.poll_interval_secs = 1;
        change(c);
    })
    .await;
    app.enable_demo_delegation().await;
    pact_db::scopes::upsert(
        &app.db,
        &pact_tests::brand_id("demo"),
        "payments:charge",
        "Pay for things",
        false,
    )
    .await
    .unwrap();
    let types = json!({
        "order_cancellation": {
            "scope": "orders:cancel",
            "description": "Cancel only these orders: {order_ids}",
            "fields": {
                "order_ids": {"type": "string_array", "required": true},
                "max_cancellations": {"type": "count", "label": "cancellations"}
            }
        },
        "spending": {
            "scope": "payments:charge",
            "description": "Pay at most {per_call} a time, {total} in all",
            "fields": {
                "per_call": {"type": "amount"},
                "total": {"type": "cumulative_amount"}
            }
        }
    });
    pact_db::brands::set_setting(
        &app.db,
        &pact_tests::brand_id("demo"),
        pact_server::domain::authz_details::SETTINGS_KEY,
        &types,
    )
    .await
    .unwrap();
    let api = Arc::new(Api::default());
    let api_base = serve(
        axum::Router::new()
            .route("/tools/{tool}", post(api_call))
            .with_state(api.clone()),
    )
    .await;
    let (held, agent_url, turns) = HeldAgent::start().await;
    app.new_webhook_secret("demo").await;
    app.set_agent("demo", &agent_url, None).await;
    for (name, scope, enforce) in [
        (
            "pay",
            "payments:charge",
            json!(["total=amount", "per_call=amount"]),
        ),
        (
            "cancel_order",
            "orders:cancel",
            json!(["order_ids=order_id", "max_cancellations"]),
        ),
        ("refuse", "orders:read", json!([])),
        ("slow", "orders:read", json!([])),
    ] {
        pact_db::merchant::upsert_tool(
            &app.db,
            &BrandTool {
                enforce,
                ..BrandTool::at_url(
                    &pact_tests::brand_id("demo"),
                    name,
                    Some(scope),
                    &format!("{api_base}/tools/{name}"),
                )
            },
        )
        .await
        .unwrap();
    }
    app.settle().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    Shop {
        app: Arc::new(app),
        api,
        held,
        turns,
        pa,
        pa_jwt,
    }
}

/// A turn held open: its gateway URL and token, and the A2A reply once released.
struct Turn {
    tools_url: String,
    mcp_url: String,
    token: String,
    reply: tokio::task::JoinHandle<reqwest::Response>,
}

impl Shop {
    /// A second node of the same deployment (same public URL and audience),
    /// for calls that reach another node than the turn's own.
    async fn second_node(&self) -> TestApp {
        let (public, audience) = (
            self.app.state.config.public_url.clone(),
            self.app.state.config.audience.clone(),
        );
        self.app
            .spawn_peer(move |c| {
                c.public_url = public;
                c.audience = audience;
            })
            .await
    }

    async fn grant(&self, scopes: &[&str], details: Value) -> String {
        grant(&self.app, &self.pa, SUB, "ann", scopes, Some(&details)).await
    }

    /// A grant with `scopes` to cancel SHOP-1001 (twice at most), a turn
    /// `m1` under it held open, and the cancellation done in that turn.
    async fn turn_that_cancelled(&mut self, scopes: &[&str]) -> (String, Turn) {
        let token = self
            .grant(
                scopes,
                json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 2}]),
            )
            .await;
        let turn = self.open_turn(&token, "m1").await;
        let (status, body) = call(
            &self.app,
            &turn,
            "cancel_order",
            &json!({"order_id": "SHOP-1001"}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        (token, turn)
    }

    async fn open_turn(&mut self, token: &str, message_id: &str) -> Turn {
        self.open_turn_in(token, message_id, None).await
    }

    /// A turn in an existing context (`context`) or a new one.
    async fn open_turn_in(&mut self, token: &str, message_id: &str, context: Option<&str>) -> Turn {
        let app = self.app.clone();
        let (pa_jwt, token, message_id, context) = (
            self.pa_jwt.clone(),
            token.to_owned(),
            message_id.to_owned(),
            context.map(str::to_owned),
        );
        let reply = tokio::spawn(async move {
            app.send_delegated(
                "demo",
                &pa_jwt,
                &token,
                &message_id,
                "do it",
                context.as_deref(),
            )
            .await
        });
        let t = self.turns.recv().await.unwrap();
        Turn {
            tools_url: t["tools"]["url"].as_str().unwrap().to_owned(),
            mcp_url: t["tools"]["mcpUrl"].as_str().unwrap().to_owned(),
            token: t["tools"]["token"].as_str().unwrap().to_owned(),
            reply,
        }
    }

    /// `m1` sent again in the context of its stored reply `msg`: answered
    /// from the store (not by the held agent, which would keep it waiting),
    /// the agent not called again, and one cancellation in all.
    async fn retry_is_answered_from_the_store(&mut self, token: &str, msg: &Value) {
        let context = msg["contextId"].as_str().unwrap().to_owned();
        let again = tokio::time::timeout(
            Duration::from_secs(20),
            self.app
                .send_delegated("demo", &self.pa_jwt, token, "m1", "do it", Some(&context)),
        )
        .await
        .expect("answered from the store, not by the held agent");
        assert_eq!(message(&ok_json(again).await)["parts"], msg["parts"]);
        assert!(
            self.turns.try_recv().is_err(),
            "the agent was not called again"
        );
        assert_eq!(self.api.count("cancel_order").await, 1);
    }

    async fn finish(&self, turn: Turn) -> Value {
        self.held.release_one();
        ok_json(turn.reply.await.unwrap()).await
    }
}

async fn call(app: &TestApp, turn: &Turn, tool: &str, args: &Value) -> (u16, Value) {
    let res = app
        .http
        .post(format!("{}/{tool}", turn.tools_url))
        .bearer_auth(&turn.token)
        .json(args)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn eur(a: &str) -> Value {
    json!({"currency": "EUR", "amount": a})
}

/// The reply's message (a step-up task's status message included).
fn message(v: &Value) -> &Value {
    if v.get("task").is_some() {
        &v["task"]["status"]["message"]
    } else {
        &v["message"]
    }
}

/// 20 parallel calls against a count of 1 forward exactly one, and against a
/// €50 total of €10 calls exactly five — ten rounds each, so a race that
/// lets one more through would show.
#[tokio::test]
async fn parallel_calls_forward_exactly_what_a_consumed_limit_allows() {
    let mut s = shop().await;
    for round in 0..10 {
        let token = s
            .grant(
                &["orders:cancel", "payments:charge"],
                json!([
                    {"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1},
                    {"type": "spending", "per_call": eur("10.00"), "total": eur("50.00")}
                ]),
            )
            .await;
        let turn = s.open_turn(&token, &format!("r{round}")).await;
        let turn = Arc::new(turn);
        let mut calls = Vec::new();
        for i in 0..20 {
            let (app, turn) = (s.app.clone(), turn.clone());
            calls.push(tokio::spawn(async move {
                let (tool, args) = if i % 2 == 0 {
                    ("cancel_order", json!({"order_id": "SHOP-1001"}))
                } else {
                    ("pay", json!({"amount": eur("10.00")}))
                };
                (tool, call(&app, &turn, tool, &args).await)
            }));
        }
        let mut forwarded = (0, 0);
        for c in calls {
            let (tool, (status, body)) = c.await.unwrap();
            match status {
                200 if tool == "cancel_order" => forwarded.0 += 1,
                200 => forwarded.1 += 1,
                403 => assert_eq!(body["error"], "beyond_limit", "{body}"),
                other => panic!("{tool}: {other} {body}"),
            }
        }
        assert_eq!(forwarded, (1, 5), "round {round}");
        let v = s.finish(Arc::try_unwrap(turn).ok().unwrap()).await;
        let claims = verified_receipt(&s.app, message(&v)).await;
        assert_eq!(
            claims.actions.len(),
            6,
            "round {round}: every forwarded call"
        );
        assert_eq!(
            claims.refused.len(),
            14,
            "round {round}: every refused call"
        );
    }
    assert_eq!(s.api.count("cancel_order").await, 10);
    assert_eq!(s.api.count("pay").await, 50);
}

/// Two staff declare a type each from the same view of the brand: both
/// types stand (the second edit re-reads the declarations under the brand's
/// lock instead of writing back the map it read before the first).
#[tokio::test]
async fn two_edits_of_the_declared_types_from_one_view_both_stand() {
    let s = shop().await;
    let seen = pact_db::brands::find(&s.app.db, "demo")
        .await
        .unwrap()
        .unwrap();
    for name in ["refund_a", "refund_b"] {
        let declaration: DetailsType = serde_json::from_value(json!({
            "scope": "orders:cancel",
            "fields": {"order_ids": {"type": "string_array"}}
        }))
        .unwrap();
        let mut tx = s.app.db.begin().await.unwrap();
        brand_settings::upsert_details_type(&mut tx, &owner(), None, &seen, name, declaration)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let now = pact_db::brands::find(&s.app.db, "demo")
        .await
        .unwrap()
        .unwrap();
    let types = pact_server::domain::authz_details::types_from_settings(&now.settings);
    for name in ["refund_a", "refund_b", "order_cancellation", "spending"] {
        assert!(types.contains_key(name), "{name} lost: {:?}", types.keys());
    }
}

/// The three ways a limit used to lapse, each tried on a grant for SHOP-1001:
/// the type re-declared (reworded), the type removed, and a second type of the
/// scope declared after the tool. The call for SHOP-1002 never reaches the API.
#[tokio::test]
async fn limits_never_lapse_when_staff_edit_the_declarations() {
    let mut s = shop().await;
    let details = json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"]}]);
    let token = s.grant(&["orders:cancel"], details).await;
    let other = json!({"order_id": "SHOP-1002"});
    let app = s.app.clone();
    let brand = || async {
        pact_db::brands::find(&app.db, "demo")
            .await
            .unwrap()
            .unwrap()
    };

    // 1. Re-declared, reworded, as the CLI, the API and the console do it.
    let reworded: DetailsType = serde_json::from_value(json!({
        "scope": "orders:cancel",
        "description": "Only cancel {order_ids}",
        "fields": {"order_ids": {"type": "string_array", "required": true},
                   "max_cancellations": {"type": "count"}}
    }))
    .unwrap();
    let mut tx = s.app.db.begin().await.unwrap();
    brand_settings::upsert_details_type(
        &mut tx,
        &owner(),
        None,
        &brand().await,
        "order_cancellation",
        reworded,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    s.app.settle().await;
    let turn = s.open_turn(&token, "m1").await;
    let (status, body) = call(&s.app, &turn, "cancel_order", &other).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );
    s.finish(turn).await;

    // 2. The type removed (a tool rule naming a field only it had is refused,
    // so first take the rules off the tool, as an owner would).
    let mut tx = s.app.db.begin().await.unwrap();
    brand_settings::set_tool_rules(
        &mut tx,
        &owner(),
        None,
        &brand().await,
        "cancel_order",
        vec![],
        None,
    )
    .await
    .unwrap();
    brand_settings::remove_details_type(
        &mut tx,
        &owner(),
        None,
        &brand().await,
        "order_cancellation",
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    s.app.settle().await;
    let turn = s.open_turn(&token, "m2").await;
    let (status, body) = call(&s.app, &turn, "cancel_order", &other).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );
    let (status, _) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(status, 200, "what the person allowed still works");
    s.finish(turn).await;
    assert_eq!(s.api.count("cancel_order").await, 1);

    // 3. A second type of the scope, declared after the tool: a grant of it
    // is enforced by the tool's FIELD=ARG rule.
    let second: DetailsType = serde_json::from_value(json!({
        "scope": "orders:cancel",
        "fields": {"order_ids": {"type": "string_array", "required": true}}
    }))
    .unwrap();
    let mut tx = s.app.db.begin().await.unwrap();
    brand_settings::upsert_details_type(
        &mut tx,
        &owner(),
        None,
        &brand().await,
        "vip_cancellation",
        second,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.app.db.begin().await.unwrap();
    brand_settings::set_tool_rules(
        &mut tx,
        &owner(),
        None,
        &brand().await,
        "cancel_order",
        vec!["order_ids=order_id".to_owned()],
        None,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    s.app.settle().await;
    let vip = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "vip_cancellation", "order_ids": ["SHOP-1003"]}]),
        )
        .await;
    let turn = s.open_turn(&vip, "m3").await;
    let (status, body) = call(&s.app, &turn, "cancel_order", &other).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );
    s.finish(turn).await;
    assert_eq!(
        s.api.count("cancel_order").await,
        1,
        "SHOP-1002 never reached the API"
    );

    // 4. The tool moved to a scope no entry limits, then made public: the
    // person approved its limits under orders:cancel, and they hold. Moved,
    // the call is beyond the grant (the person is asked); public, nothing
    // can be asked and the call is refused (staff told).
    let both = s
        .grant(
            &["orders:cancel", "orders:read"],
            json!([{"type": "vip_cancellation", "order_ids": ["SHOP-1001"]}]),
        )
        .await;
    for (scope, want) in [
        (Some("orders:read"), "beyond_limit"),
        (None, "not_permitted"),
    ] {
        pact_db::merchant::set_tool_scope(
            &s.app.db,
            &pact_tests::brand_id("demo"),
            "cancel_order",
            scope,
        )
        .await
        .unwrap();
        s.app.settle().await;
        let turn = s.open_turn(&both, &format!("moved-{want}")).await;
        let (status, body) = call(&s.app, &turn, "cancel_order", &other).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (403, Some(want)),
            "{scope:?}: {body}"
        );
        s.finish(turn).await;
    }
    assert_eq!(
        s.api.count("cancel_order").await,
        1,
        "nothing more was cancelled"
    );
}

/// A limit no tool can check is refused, not ignored (fail closed), and staff
/// are told in the audit log.
#[tokio::test]
async fn a_limit_no_tool_enforces_refuses_the_call_and_tells_staff() {
    let mut s = shop().await;
    // `per_call` bound by no tool any longer: `pay` loses its rules.
    pact_db::merchant::set_tool_rules(
        &s.app.db,
        &pact_tests::brand_id("demo"),
        "pay",
        &json!(["total=amount"]),
        None,
    )
    .await
    .unwrap();
    s.app.settle().await;
    let token = s
        .grant(
            &["payments:charge"],
            json!([{"type": "spending", "per_call": eur("5.00")}]),
        )
        .await;
    let turn = s.open_turn(&token, "m1").await;
    let (status, body) = call(&s.app, &turn, "pay", &json!({"amount": eur("1.00")})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("not_permitted")),
        "{body}"
    );
    s.finish(turn).await;
    assert_eq!(s.api.count("pay").await, 0);
    let entries: i64 =
        sqlx::query_scalar("select count(*) from audit_log where action = 'grant.unenforceable'")
            .fetch_one(&s.app.db)
            .await
            .unwrap();
    assert_eq!(entries, 1);
}

/// A merchant's refusal reaches its agent as a structured error it can put in
/// words, and the receipt as a failed action; a declared effect beyond the
/// limit is flagged; a call still running when the agent replies is waited
/// for and in the receipt.
#[tokio::test]
async fn every_call_has_its_outcome_in_the_receipt() {
    let mut s = shop().await;
    let token = s
        .grant(
            &["orders:read", "payments:charge"],
            json!([{"type": "spending", "per_call": eur("10.00"), "total": eur("50.00")}]),
        )
        .await;
    let turn = s.open_turn(&token, "m1").await;
    let (status, body) = call(&s.app, &turn, "refuse", &json!({"order_id": "SHOP-1002"})).await;
    assert_eq!(status, 424, "{body}");
    assert_eq!(
        body,
        json!({"error": "tool_error", "status": 409, "code": "already_shipped",
               "message": "Order SHOP-1002 has shipped"})
    );
    // The merchant says it charged more than the call asked and the limit allows.
    let (status, _) = call(
        &s.app,
        &turn,
        "pay",
        &json!({"amount": eur("10.00"), "_effect": eur("12.00")}),
    )
    .await;
    assert_eq!(status, 200);
    // A 5xx does not say the tool did not act: the agent hears of the error,
    // the charge (€5) stands and the receipt's outcome is unknown.
    let (status, body) = call(
        &s.app,
        &turn,
        "pay",
        &json!({"amount": eur("5.00"), "_fail": true}),
    )
    .await;
    assert_eq!(status, 424, "{body}");
    assert_eq!(body["status"], 500, "{body}");
    // A call the agent does not wait for before it replies.
    let slow = {
        let (app, url, t) = (s.app.clone(), turn.tools_url.clone(), turn.token.clone());
        tokio::spawn(async move {
            app.http
                .post(format!("{url}/slow"))
                .bearer_auth(t)
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    s.api.slow_arrived.notified().await;
    let v = s.finish(turn).await;
    assert_eq!(slow.await.unwrap(), 200);
    let claims = verified_receipt(&s.app, message(&v)).await;
    let by_tool = |t: &str| claims.actions.iter().find(|a| a.tool == t).unwrap().clone();
    let refused = by_tool("refuse");
    assert_eq!(refused.outcome.as_deref(), Some("failed"));
    assert_eq!(refused.status, Some(409));
    assert_eq!(
        refused.error.as_ref().and_then(|e| e.code.as_deref()),
        Some("already_shipped")
    );
    let failed_pay = claims
        .actions
        .iter()
        .find(|a| a.tool == "pay" && a.status == Some(500))
        .unwrap();
    assert_eq!(failed_pay.outcome.as_deref(), Some("unknown"));
    let paid = by_tool("pay");
    assert!(paid.beyond_limit, "{paid:?}");
    assert_eq!(paid.effect, Some(json!({"amount": eur("12.00")})));
    assert_eq!(
        by_tool("slow").outcome.as_deref(),
        Some("done"),
        "waited for"
    );
    let flagged: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where action = 'grant.effect_beyond_limit'",
    )
    .fetch_one(&s.app.db)
    .await
    .unwrap();
    assert_eq!(flagged, 1);
    // The cumulative budget holds what really moved (€12), not what was
    // asked, and the €5 of the call that failed with a 5xx.
    let used: i64 = sqlx::query_scalar("select used from grant_budgets where currency = 'EUR'")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(used, 1700);
    // The signed call carried the limits that apply to it.
    let calls = s.api.calls.lock().await;
    let pay = &calls.iter().find(|(t, _)| t == "pay").unwrap().1;
    let kinds: Vec<&str> = pay["limits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["amount", "cumulative_amount"], "{pay}");
}

/// An agent that fails after a tool acted: its turn is stored with a stock
/// reply and a receipt listing the call (PACT §5.6), the count the call used
/// stays used, and a retry of the same message gets that stored answer
/// without calling the agent or the tool again. An agent that fails before
/// any call is a retryable 503 with nothing stored, as before.
#[tokio::test]
async fn an_agent_that_fails_after_acting_leaves_a_receipt_and_a_retry_acts_no_more() {
    let mut s = shop().await;
    let token = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1}]),
        )
        .await;
    let turn = s.open_turn(&token, "m0").await;
    s.held.fail_one();
    assert_eq!(turn.reply.await.unwrap().status(), 503);
    let stored: i64 = sqlx::query_scalar("select count(*) from receipts")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(stored, 0);

    let turn = s.open_turn(&token, "m1").await;
    let (status, body) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    s.held.fail_one();
    let v = ok_json(turn.reply.await.unwrap()).await;
    let msg = message(&v);
    assert!(
        msg["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("stopped before it could answer"),
        "{v}"
    );
    let claims = verified_receipt(&s.app, msg).await;
    assert_eq!(claims.actions.len(), 1, "{claims:?}");
    assert_eq!(claims.actions[0].tool, "cancel_order");
    assert_eq!(claims.actions[0].outcome.as_deref(), Some("done"));
    let used: i64 = sqlx::query_scalar("select used from grant_budgets")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(used, 1);

    // The same message again: the stored answer, and nobody acts twice.
    s.retry_is_answered_from_the_store(&token, msg).await;
}

async fn mcp(
    app: &TestApp,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut req = app
        .http
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let id = res
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, id, res.json().await.unwrap_or(Value::Null))
}

/// Behind a plain round-robin proxy a turn's calls reach any node: a call
/// on another node than the turn's own is judged and charged the same, is in
/// the receipt, and is refused once the turn is over; an MCP session opened
/// on one node works on the other, and one ended there is ended.
/// PACT §5.5: a delegated turn runs "limited to `scope`", the token's, which
/// a refresh may narrow below the grant's (RFC 6749 §6). A tool call that
/// reaches another node than the turn's own is held to the same scope: that
/// node rebuilds the turn from the grant row, which still holds the wider one.
#[tokio::test]
async fn a_narrowed_token_is_as_narrow_on_every_node() {
    let mut s = shop().await;
    let b = s.second_node().await;
    let details =
        json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1}]);
    let auth = s
        .app
        .device_authorize(&s.pa, SUB, "orders:read orders:cancel", Some(&details))
        .await;
    s.app
        .approve(&auth.user_code, "ann", &["orders:read", "orders:cancel"])
        .await;
    let (status, tokens) = s.app.poll(&s.pa, SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    let res = s
        .app
        .oauth_post(
            "demo",
            "token",
            &s.pa.token(SUB, s.app.audience()),
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
                ("client_id", &s.pa.issuer),
                ("scope", "orders:read"),
            ],
        )
        .await;
    assert_eq!(res.status(), 200);
    let narrow: Value = res.json().await.unwrap();
    assert_eq!(narrow["scope"], "orders:read");

    let turn = s
        .open_turn(narrow["access_token"].as_str().unwrap(), "m1")
        .await;
    let on_b = turn.tools_url.replace(&s.app.base_url, &b.base_url);
    let res = s
        .app
        .http
        .post(format!("{on_b}/cancel_order"))
        .bearer_auth(&turn.token)
        .json(&json!({"order_id": "SHOP-1001"}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap_or(Value::Null);
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("missing_scope")),
        "{body}"
    );
    // The same on the turn's own node; the merchant saw neither call.
    let (status, body) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("missing_scope")),
        "{body}"
    );
    assert_eq!(s.api.count("cancel_order").await, 0);
}

#[tokio::test]
async fn a_turns_calls_and_mcp_sessions_work_on_any_node() {
    let mut s = shop().await;
    let b = s.second_node().await;
    let token = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1}]),
        )
        .await;
    let turn = s.open_turn(&token, "m1").await;
    let on_b = |url: &str| url.replace(&s.app.base_url, &b.base_url);
    let at_b = |tool: &str| format!("{}/{tool}", on_b(&turn.tools_url));
    let post_b = |tool: &str, args: Value| {
        let req = s
            .app
            .http
            .post(at_b(tool))
            .bearer_auth(&turn.token)
            .json(&args);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            (status, res.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, body) = post_b("cancel_order", json!({"order_id": "SHOP-1001"})).await;
    assert_eq!(status, 200, "{body}");
    // The count is used up, whichever node charged it.
    let (status, body) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );
    let (status, body) = post_b("cancel_order", json!({"order_id": "SHOP-1002"})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("beyond_limit")),
        "{body}"
    );
    // A token altered in any way is refused on the other node.
    let forged = format!("{}x", turn.token);
    let res = s
        .app
        .http
        .post(at_b("cancel_order"))
        .bearer_auth(&forged)
        .json(&json!({"order_id": "SHOP-1001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // MCP: the session from node A, used and ended on node B.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}});
    let (status, session, _) = mcp(&s.app, &turn.mcp_url, &turn.token, None, init).await;
    assert_eq!(status, 200);
    let session = session.unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, body) = mcp(
        &s.app,
        &on_b(&turn.mcp_url),
        &turn.token,
        Some(&session),
        list.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    let res = s
        .app
        .http
        .delete(on_b(&turn.mcp_url))
        .bearer_auth(&turn.token)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let (status, _, _) = mcp(
        &s.app,
        &on_b(&turn.mcp_url),
        &turn.token,
        Some(&session),
        list,
    )
    .await;
    assert_eq!(status, 404, "ended on every node");

    let (late_url, late_token) = (at_b("cancel_order"), turn.token.clone());
    let v = s.finish(turn).await;
    // Over: the other node refuses the turn's token too.
    let res = s
        .app
        .http
        .post(late_url)
        .bearer_auth(late_token)
        .json(&json!({"order_id": "SHOP-1001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let claims = verified_receipt(&s.app, message(&v)).await;
    let outcomes: Vec<(&str, Option<&str>)> = claims
        .actions
        .iter()
        .map(|a| (a.tool.as_str(), a.outcome.as_deref()))
        .collect();
    assert_eq!(
        outcomes,
        [("cancel_order", Some("done"))],
        "node B's call is in the receipt"
    );
    assert_eq!(claims.refused.len(), 2, "{claims:?}");
    assert_eq!(s.api.count("cancel_order").await, 1);
}

/// A turn whose calls all ran on its own node ends on every node with its
/// reply (the reply's statement writes the turn's end): the other node then
/// refuses the token, for the first turn of a context and for a later one.
#[tokio::test]
async fn a_turn_that_stayed_on_its_node_is_over_on_every_node_once_it_replied() {
    let mut s = shop().await;
    let b = s.second_node().await;
    let token = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 2}]),
        )
        .await;
    let mut context: Option<String> = None;
    for (i, order) in ["SHOP-1001", "SHOP-1001"].iter().enumerate() {
        let turn = s
            .open_turn_in(&token, &format!("stay-{i}"), context.as_deref())
            .await;
        let (status, body) = call(&s.app, &turn, "cancel_order", &json!({"order_id": order})).await;
        assert_eq!(status, 200, "{body}");
        let late = format!(
            "{}/cancel_order",
            turn.tools_url.replace(&s.app.base_url, &b.base_url)
        );
        let late_token = turn.token.clone();
        let v = s.finish(turn).await;
        let res = s
            .app
            .http
            .post(late)
            .bearer_auth(late_token)
            .json(&json!({"order_id": order}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "turn {i}: over on the other node too");
        let claims = verified_receipt(&s.app, message(&v)).await;
        assert_eq!(claims.actions.len(), 1, "turn {i}: {claims:?}");
        context = Some(message(&v)["contextId"].as_str().unwrap().to_owned());
    }
    let ended: i64 = sqlx::query_scalar("select count(*) from turn_fences where ended")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(ended, 2, "each turn's end was written");
    assert_eq!(s.api.count("cancel_order").await, 2);
}

/// The person's account page shows each limit of a grant and how much of a
/// consumed one is used, after calls on it (issue 26, item 4).
#[tokio::test]
async fn the_account_page_shows_each_limit_and_how_much_is_used() {
    let mut s = shop().await;
    let ann =
        pact_tests::pages::add_user(&s.app, "demo", "ann@example.com", "correct horse battery")
            .await;
    let token = grant(
        &s.app,
        &s.pa,
        SUB,
        &ann.subject(),
        &["orders:cancel", "payments:charge"],
        Some(&json!([
            {"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 1},
            {"type": "spending", "per_call": eur("20.00"), "total": eur("50.00")}
        ])),
    )
    .await;
    let turn = s.open_turn(&token, "m1").await;
    let (status, body) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(&s.app, &turn, "pay", &json!({"amount": eur("15.00")})).await;
    assert_eq!(status, 200, "{body}");
    s.finish(turn).await;

    // A session for Ann, as the sign-in page leaves it.
    let (raw, hash) = pact_server::domain::secrets::new_secret();
    let (csrf, _) = pact_server::domain::secrets::new_secret();
    pact_db::sessions::insert(
        &s.app.db,
        &hash,
        &csrf,
        &pact_db::sessions::SessionState {
            brand_id: Some(pact_tests::brand_id("demo")),
            user_id: Some(ann.id),
            ..Default::default()
        },
        time::OffsetDateTime::now_utc() + time::Duration::hours(1),
    )
    .await
    .unwrap();
    let b = pact_tests::pages::Browser::new(&s.app);
    let url = reqwest::Url::parse(&s.app.base_url).unwrap();
    b.jar.add_cookie_str(&format!("pactd_session={raw}"), &url);
    let (status, html) = b.get_html("/account").await;
    assert_eq!(status, 200);
    for words in [
        "Cancel only these orders: SHOP-1001",
        "1 of 1 cancellations used",
        "€15.00 of €50.00 used",
    ] {
        assert!(html.contains(words), "{words:?} not on the page:\n{html}");
    }
}

/// PACT §4: the same first message sent twice at once without a contextId
/// (a personal agent that retried before the first reply arrived) runs once:
/// the copy waits for the first's reply and gets it, and the merchant's
/// agent is called, and the order cancelled, once.
#[tokio::test]
async fn a_first_message_sent_twice_at_once_acts_once() {
    let mut s = shop().await;
    let token = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 2}]),
        )
        .await;
    let turn = s.open_turn(&token, "m1").await;
    let (app, pa_jwt, copy_token) = (s.app.clone(), s.pa_jwt.clone(), token.clone());
    let copy = tokio::spawn(async move {
        app.send_delegated("demo", &pa_jwt, &copy_token, "m1", "do it", None)
            .await
    });
    let (status, body) = call(
        &s.app,
        &turn,
        "cancel_order",
        &json!({"order_id": "SHOP-1001"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // The copy is not handed to the agent while the first runs (it was,
    // and the order would have been cancelled twice).
    let second = tokio::time::timeout(Duration::from_secs(1), s.turns.recv()).await;
    assert!(second.is_err(), "the agent got the message twice");
    let first = s.finish(turn).await;
    let copy = ok_json(copy.await.unwrap()).await;
    assert_eq!(copy, first);
    assert_eq!(s.api.count("cancel_order").await, 1);
    let contexts: i64 = sqlx::query_scalar("select count(*) from conversations")
        .fetch_one(&s.app.db)
        .await
        .unwrap();
    assert_eq!(contexts, 1);
}

/// PACT §5.6 and docs/merchant-agent.md: an agent that fails after one of its
/// calls acted leaves a stored turn with its receipt, also when that call
/// went through another node than the turn's own. (The failure was decided
/// from this node's calls alone: a 503, nothing stored, and the personal
/// agent's retry ran the agent again, which cancelled again.)
#[tokio::test]
async fn an_agent_that_fails_after_acting_through_another_node_leaves_a_receipt() {
    let mut s = shop().await;
    let b = s.second_node().await;
    let token = s
        .grant(
            &["orders:cancel"],
            json!([{"type": "order_cancellation", "order_ids": ["SHOP-1001"], "max_cancellations": 2}]),
        )
        .await;
    let turn = s.open_turn(&token, "m1").await;
    let on_b = format!(
        "{}/cancel_order",
        turn.tools_url.replace(&s.app.base_url, &b.base_url)
    );
    let res = s
        .app
        .http
        .post(on_b)
        .bearer_auth(&turn.token)
        .json(&json!({"order_id": "SHOP-1001"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    s.held.fail_one();
    let v = ok_json(turn.reply.await.unwrap()).await;
    let msg = message(&v);
    assert!(
        msg["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("stopped before it could answer"),
        "{v}"
    );
    let claims = verified_receipt(&s.app, msg).await;
    assert_eq!(claims.actions.len(), 1, "{claims:?}");
    assert_eq!(claims.actions[0].tool, "cancel_order");

    s.retry_is_answered_from_the_store(&token, msg).await;
}

/// A turn whose agent alone outlasts the request (its 20 s against a 3 s
/// request timeout here), after a call that acted, is ended in time and
/// stored with that call: before, the request was cut with a 503, nothing
/// named the cancellation, and the retry ran the agent again.
#[tokio::test]
async fn an_agent_slower_than_the_request_is_cut_in_time_to_store_what_acted() {
    let mut s = shop_with(|c| c.request_timeout = Duration::from_secs(3)).await;
    let (token, turn) = s.turn_that_cancelled(&["orders:cancel"]).await;
    // The held agent never answers.
    let v = ok_json(turn.reply.await.unwrap()).await;
    let msg = message(&v);
    let claims = verified_receipt(&s.app, msg).await;
    assert_eq!(claims.actions.len(), 1, "{claims:?}");
    assert_eq!(claims.actions[0].tool, "cancel_order");

    s.retry_is_answered_from_the_store(&token, msg).await;
    s.held.release_one();
}

/// A turn whose agent's time and the wait for its calls together exceed the
/// request timeout (by default 20 s + 11 s against 30 s; here a 3 s request
/// timeout and a call still running) is stored in time with the calls that
/// acted, instead of being cut: before, the personal agent got a 503, no
/// receipt named the cancellation, and its retry ran the agent again.
#[tokio::test]
async fn a_turn_longer_than_its_request_may_take_is_stored_with_what_acted() {
    let mut s = shop_with(|c| c.request_timeout = Duration::from_secs(3)).await;
    let (token, turn) = s
        .turn_that_cancelled(&["orders:cancel", "orders:read"])
        .await;
    // A call the merchant holds longer than the request may last.
    let slow = {
        let req = s
            .app
            .http
            .post(format!("{}/slow", turn.tools_url))
            .bearer_auth(&turn.token)
            .json(&json!({"_ms": 8000}));
        tokio::spawn(async move { req.send().await })
    };
    s.api.slow_arrived.notified().await;
    let reply = s.finish(turn).await;
    let msg = message(&reply);
    let claims = verified_receipt(&s.app, msg).await;
    assert!(
        claims.actions.iter().any(|a| a.tool == "cancel_order"),
        "{claims:?}"
    );

    s.retry_is_answered_from_the_store(&token, msg).await;
    slow.abort();
}
