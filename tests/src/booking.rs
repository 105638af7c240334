//! The example booking service (`examples/booking/booking.py`) as a real
//! separate process, and a brand pointed at it the way docs/merchant-agent.md
//! section 6 declares it: the scopes, the `booking_change` details type and
//! the three tools with their limit rules, through the same checked
//! functions the CLI and the admin API call.

use pact_server::admin::brand_settings::{self, ToolDefinition};
use pact_server::admin::role::{Actor, Role};
use pact_server::domain::authz_details::DetailsType;
use serde_json::{Value, json};
use tokio::process::Child;

use crate::TestApp;

/// The agent's "today" in every test run (a Wednesday): "Tuesday" is
/// 2026-12-08 (a €15.00 move), "Monday" 2026-12-07 (free).
pub const TODAY: &str = "2026-12-02";
pub const TUESDAY: &str = "2026-12-08";
pub const MONDAY: &str = "2026-12-07";
pub const WEDNESDAY: &str = "2026-12-09";

/// The `booking_change` type as section 6 declares it.
pub fn booking_change_type() -> Value {
    json!({
        "scope": "bookings:change",
        "description": "Move booking {booking_ids}",
        "fields": {
            "booking_ids": {"type": "string_array", "required": true},
            "new_date": {"type": "date_window", "label": "new date"},
            "max_fee": {"type": "amount", "label": "extra charge"},
            "moves": {"type": "count", "label": "moves"}
        }
    })
}

/// `{"currency": "EUR", "amount": a}`.
pub fn eur(a: &str) -> Value {
    json!({"currency": "EUR", "amount": a})
}

pub struct Booking {
    /// `http://127.0.0.1:{port}`
    pub base: String,
    /// The `whsec_…` it verifies with.
    pub secret: String,
    _child: Child,
    http: reqwest::Client,
}

impl Booking {
    /// Starts the example on a free loopback port, its today fixed at [`TODAY`].
    pub async fn start(secret: &str) -> Self {
        let (child, port) = crate::merchant::start_example(
            "examples/booking/booking.py",
            &["--port", "0", "--today", TODAY],
            secret,
        )
        .await;
        Self {
            base: format!("http://127.0.0.1:{port}"),
            secret: secret.to_owned(),
            _child: child,
            http: pact_jose::with_shared_tls(reqwest::Client::builder())
                .build()
                .unwrap(),
        }
    }

    pub fn agent_url(&self) -> String {
        format!("{}/pact", self.base)
    }

    /// What really reached the service: agent calls, tool calls, moves made.
    pub async fn stats(&self) -> Value {
        self.http
            .get(format!("{}/stats", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The moves made: `[booking, new date, fee charged]`.
    pub async fn moves(&self) -> Value {
        self.stats().await["moves"].clone()
    }

    /// POSTs `body` to `path` signed the Standard Webhooks way with `secret`
    /// (a `whsec_…`), as pactd would: the status.
    pub async fn post_signed(&self, path: &str, secret: &str, msg_id: &str, body: &[u8]) -> u16 {
        use base64::Engine as _;
        let key = base64::engine::general_purpose::STANDARD
            .decode(secret.trim_start_matches("whsec_"))
            .unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let sig = pact_server::merchant::signing::WebhookSecret::from_bytes(key)
            .sign(msg_id, now, body)
            .unwrap();
        let headers = [
            ("webhook-id", msg_id.to_owned()),
            ("webhook-timestamp", now.to_string()),
            ("webhook-signature", sig),
        ];
        self.post_raw(path, &headers, body).await
    }

    /// POSTs raw bytes with the given headers (direct calls in tests).
    pub async fn post_raw(&self, path: &str, headers: &[(&str, String)], body: &[u8]) -> u16 {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        req.send().await.unwrap().status().as_u16()
    }
}

fn owner() -> Actor {
    Actor {
        kind: "cli",
        name: "booking-test".to_owned(),
        role: Role::Owner,
        brands: None,
    }
}

impl TestApp {
    /// Starts the example booking service and serves `brand` with it: agent
    /// URL and a fresh secret, the scopes `bookings:read` and
    /// `bookings:change`, the `booking_change` type, and the tools
    /// `find_booking`, `quote_change` (bookings:read) and `move_booking`
    /// (bookings:change, with the rules `booking_ids=booking_id`,
    /// `new_date=new_date`, `max_fee=fee` and the count `moves`).
    pub async fn booking_brand(&self, brand: &str) -> Booking {
        let whsec = self.new_webhook_secret(brand).await;
        let b = Booking::start(&whsec).await;
        self.set_agent(brand, &b.agent_url(), None).await;
        for (id, description) in [
            (
                "bookings:read",
                "See your bookings and what moving one costs",
            ),
            ("bookings:change", "Move your bookings to another day"),
        ] {
            pact_db::scopes::upsert(&self.db, &crate::brand_id(brand), id, description, false)
                .await
                .unwrap();
        }
        let declared: DetailsType = serde_json::from_value(booking_change_type()).unwrap();
        let found = pact_db::brands::find(&self.db, brand)
            .await
            .unwrap()
            .unwrap();
        let mut tx = self.db.begin().await.unwrap();
        brand_settings::upsert_details_type(
            &mut tx,
            &owner(),
            None,
            &found,
            "booking_change",
            declared,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        let found = pact_db::brands::find(&self.db, brand)
            .await
            .unwrap()
            .unwrap();
        let date = json!({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"});
        let tools = [
            ToolDefinition {
                description: "Your bookings".to_owned(),
                ..tool("find_booking", "bookings:read", &b.base, "find-booking")
            },
            ToolDefinition {
                description: "What moving a booking to another day costs".to_owned(),
                input_schema: Some(json!({
                    "type": "object", "required": ["booking_id", "new_date"],
                    "properties": {"booking_id": {"type": "string"}, "new_date": date}
                })),
                ..tool("quote_change", "bookings:read", &b.base, "quote-change")
            },
            ToolDefinition {
                description: "Move a booking to another day".to_owned(),
                enforce: [
                    "booking_ids=booking_id",
                    "new_date=new_date",
                    "max_fee=fee",
                    "moves",
                ]
                .map(str::to_owned)
                .to_vec(),
                input_schema: Some(json!({
                    "type": "object", "required": ["booking_id", "new_date", "fee"],
                    "properties": {"booking_id": {"type": "string"}, "new_date": date,
                                   "fee": {"type": "object", "required": ["currency", "amount"]}}
                })),
                summary: "Move booking {booking_id} to {new_date} — extra charge {fee}".to_owned(),
                ..tool("move_booking", "bookings:change", &b.base, "move-booking")
            },
        ];
        for def in tools {
            let mut tx = self.db.begin().await.unwrap();
            brand_settings::upsert_tool(&mut tx, &owner(), None, &found, def)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
        self.settle().await;
        b
    }
}

fn tool(name: &str, scope: &str, base: &str, path: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        scope: Some(scope.to_owned()),
        url: format!("{base}/tools/{path}"),
        description: String::new(),
        enforce: Vec::new(),
        input_schema: None,
        summary: String::new(),
    }
}
