//! The booking example (examples/booking, its own process) behind pactd, at
//! the API level (issue 26, item 7): its agent quotes, then moves a booking
//! through pactd's gateway; a move within the person's limits is forwarded,
//! one beyond them ("no extra charge", a €15.00 fee) goes back to the person
//! as a step-up for that one move, which once allowed goes through exactly
//! once; the service's own refusals reach its agent as structured tool
//! errors and the receipt as failed actions. The journey through the real
//! pages is `booking_journey.rs`.

use pact_tests::TestApp;
use pact_tests::booking::{Booking, MONDAY, TUESDAY, eur};
use serde_json::{Value, json};

use crate::journey::{beyond_task, grant, ok_json, send_ok, text, user_code_of, verified_receipt};

const ISS: &str = "https://pa.example/booking";
const SUB: &str = "pa-user-1";

async fn booking_app() -> (TestApp, Booking) {
    let app = TestApp::spawn_with(|c| c.delegation.poll_interval_secs = 1).await;
    let booking = app.booking_brand("demo").await;
    (app, booking)
}

/// "No extra charge" on the two bookings: the grant the personal agent asks for.
fn no_extra_charge() -> Value {
    json!([{"type": "booking_change", "booking_ids": ["K7PQ2M", "X9LR4T"],
            "max_fee": eur("0.00")}])
}

fn move_args(booking: &str, day: &str, fee: &str) -> Value {
    json!({"booking_id": booking, "new_date": day, "fee": eur(fee)})
}

/// The reply's message (a step-up task's status message included).
fn message(v: &Value) -> &Value {
    if v.get("task").is_some() {
        &v["task"]["status"]["message"]
    } else {
        &v["message"]
    }
}

/// The booking service's brand, and Ann's agent connected to it with "no
/// extra charge": its PA-JWT and delegation token.
async fn connected() -> (TestApp, Booking, String, String) {
    let (app, booking) = booking_app().await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let token = grant(
        &app,
        &pa,
        SUB,
        "ann",
        &["bookings:read", "bookings:change"],
        Some(&no_extra_charge()),
    )
    .await;
    (app, booking, pa_jwt, token)
}

/// PACT §5.5, §5.7: a free move is forwarded; the €15.00 move is not, and
/// the person is asked about exactly it; allowed once, the same move goes
/// through once, and the same again or another move is asked about again.
#[tokio::test]
async fn a_move_beyond_no_extra_charge_goes_back_to_the_person_and_once_allowed_runs_once() {
    let (app, booking, pa_jwt, token) = connected().await;
    let send = |id: &'static str, words: &'static str, ctx: Option<String>| {
        let (app, pa_jwt, token) = (&app, &pa_jwt, &token);
        async move { send_ok(app, pa_jwt, token, id, words, ctx.as_deref()).await }
    };

    // Within the limits: Monday is free, so the move is forwarded.
    let v = send("m1", "Move booking K7PQ2M to Monday", None).await;
    assert_eq!(
        text(&v["message"]),
        "Booking K7PQ2M is moved to Mon 7 Dec 2026 (no extra charge).",
        "{v}"
    );
    let ctx = v["message"]["contextId"].as_str().unwrap().to_owned();
    let claims = verified_receipt(&app, &v["message"]).await;
    let tools: Vec<&str> = claims.actions.iter().map(|a| a.tool.as_str()).collect();
    assert_eq!(tools, ["quote_change", "move_booking"]);
    let moved = &claims.actions[1];
    assert_eq!(moved.outcome.as_deref(), Some("done"));
    assert_eq!(moved.effect, Some(json!({"amount": eur("0.00")})));
    assert!(!moved.beyond_limit);
    assert!(
        moved.limits.iter().any(|l| l["field"] == "max_fee"),
        "{moved:?}"
    );
    assert_eq!(booking.moves().await, json!([["K7PQ2M", MONDAY, "0.00"]]));

    // Tuesday costs €15.00: beyond "no extra charge", not forwarded.
    let tuesday = move_args("K7PQ2M", TUESDAY, "15.00");
    let v = send("m2", "Move booking K7PQ2M to Tuesday", Some(ctx.clone())).await;
    let op = beyond_task(&v, "move_booking", &tuesday);
    assert_eq!(
        op["description"],
        "Move booking K7PQ2M to Tue 8 Dec 2026 — extra charge €15.00"
    );
    assert_eq!(op["beyond"]["type"], "booking_change");
    assert_eq!(op["beyond"]["field"], "max_fee");
    assert_eq!(op["beyond"]["limit"], eur("0.00"));
    assert!(
        text(message(&v)).contains("Move booking K7PQ2M to Tue 8 Dec 2026 — extra charge €15.00"),
        "{v}"
    );
    let claims = verified_receipt(&app, message(&v)).await;
    assert!(claims.actions.iter().all(|a| a.tool != "move_booking"));
    assert_eq!(claims.refused.len(), 1, "{claims:?}");
    assert_eq!(claims.refused[0].tool, "move_booking");
    assert_eq!(claims.refused[0].reason, "beyond_limit");
    assert_eq!(booking.moves().await.as_array().unwrap().len(), 1);

    // Someone else signed in at the brand neither sees what it asks nor
    // decides it: the request is the person's whose grant the call was under.
    let code = user_code_of(&v["task"]);
    pact_tests::pages::add_user(&app, "demo", "bob@example.com", "bob's password 1").await;
    let bob = pact_tests::pages::Browser::new(&app);
    let res = bob
        .sign_in("demo", "bob@example.com", "bob's password 1", "/account")
        .await;
    assert_eq!(res.status(), 303);
    bob.submit("/device", "/device", &[("user_code", &code)])
        .await;
    let (status, html) = bob.get_html("/device/consent").await;
    assert_eq!(status, 403, "{html}");
    assert!(!html.contains("K7PQ2M"), "{html}");
    let auth = pact_server::consent::find_by_user_code(&app.state, &code)
        .await
        .unwrap()
        .unwrap();
    let res = bob
        .submit(
            "/account",
            "/device/consent",
            &[("authorization", &auth.id.to_string()), ("action", "deny")],
        )
        .await;
    assert_eq!(res.status(), 403);
    let still: String =
        sqlx::query_scalar("select status::text from device_authorizations where id = $1")
            .bind(auth.id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(still, "pending");

    // The person allows that one move, once; the retry goes through.
    assert_eq!(app.approve_once(&code, "ann").await.len(), 1);
    let v = send("m3", "Move booking K7PQ2M to Tuesday", Some(ctx.clone())).await;
    assert_eq!(
        text(&v["message"]),
        "Booking K7PQ2M is moved to Tue 8 Dec 2026 (extra charge €15.00).",
        "{v}"
    );
    let claims = verified_receipt(&app, &v["message"]).await;
    let moved = claims
        .actions
        .iter()
        .find(|a| a.tool == "move_booking")
        .unwrap();
    assert!(moved.approved_once, "{moved:?}");
    assert_eq!(moved.outcome.as_deref(), Some("done"));
    assert_eq!(
        moved.args_hash.as_deref(),
        Some(pact_jose::args_hash(&tuesday).as_str())
    );
    assert_eq!(moved.effect, Some(json!({"amount": eur("15.00")})));
    assert!(!moved.beyond_limit, "€15.00 is what the person allowed");

    // Exactly once: the same move again, and another one, are asked again.
    for (id, words) in [
        ("m4", "Move booking K7PQ2M to Tuesday"),
        ("m5", "Move booking K7PQ2M to Friday"),
    ] {
        let v = send(id, words, Some(ctx.clone())).await;
        assert_eq!(
            v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{words}: {v}"
        );
    }
    assert_eq!(
        booking.moves().await,
        json!([["K7PQ2M", MONDAY, "0.00"], ["K7PQ2M", TUESDAY, "15.00"]])
    );
    let stats = booking.stats().await;
    assert_eq!(stats["tool_calls"]["move_booking"], 2, "{stats}");
    assert_eq!(stats["refused_signatures"], 0, "{stats}");
}

/// The service refuses by itself: a booking already travelled on (409), and
/// a careless agent that asks to move without the fee, which pactd's limits
/// let through (€0.00 asked) but the service catches from the limits signed
/// into the call (the real fee is €15.00). Both reach the agent as
/// structured tool errors it puts in words, and the receipt as failed
/// actions with the service's status and code; nothing is moved.
#[tokio::test]
async fn the_booking_services_own_refusals_reach_its_agent_and_the_receipt() {
    let (app, booking, pa_jwt, token) = connected().await;
    for (id, words, reply, status, code) in [
        (
            "m1",
            "Move booking X9LR4T to Monday",
            "Our booking system said no: Booking X9LR4T has been travelled on and cannot be moved.",
            409,
            "already_travelled",
        ),
        (
            "m2",
            "Move booking K7PQ2M to Tuesday #nofee",
            "Our booking system said no: Cannot move K7PQ2M to Tue 8 Dec 2026: \
             the fee €15.00 is more than the €0.00 the person allowed.",
            403,
            "over_limit",
        ),
    ] {
        let v = ok_json(
            app.send_delegated("demo", &pa_jwt, &token, id, words, None)
                .await,
        )
        .await;
        assert!(v.get("task").is_none(), "{v}");
        assert_eq!(text(&v["message"]), reply);
        let claims = verified_receipt(&app, &v["message"]).await;
        let failed = claims
            .actions
            .iter()
            .find(|a| a.tool == "move_booking")
            .unwrap_or_else(|| panic!("{claims:?}"));
        assert_eq!(failed.outcome.as_deref(), Some("failed"));
        assert_eq!(failed.status, Some(status));
        assert_eq!(
            failed.error.as_ref().and_then(|e| e.code.as_deref()),
            Some(code)
        );
        assert!(failed.effect.is_none());
    }
    let stats = booking.stats().await;
    assert_eq!(stats["moves"], json!([]), "{stats}");
    assert_eq!(
        stats["refused_moves"],
        json!({"already_travelled": 1, "over_limit": 1})
    );
}

/// The booking service checks every request as docs/merchant-agent.md
/// section 3 says: unsigned, or signed with another secret, is 401; a call
/// signed for `quote_change` replayed to the move endpoint is 403; the same
/// webhook-id twice is a replay (401). Nothing is moved.
#[tokio::test]
async fn the_booking_service_refuses_unsigned_replayed_and_misdirected_calls() {
    let (_app, booking) = booking_app().await;
    let quote = json!({"type": "pact.tool_call", "tool": "quote_change",
                       "url": format!("{}/tools/quote-change", booking.base),
                       "args": {"booking_id": "K7PQ2M", "new_date": TUESDAY}, "limits": []})
    .to_string();
    let quote = quote.as_bytes();
    assert_eq!(
        booking.post_raw("/tools/move-booking", &[], quote).await,
        401,
        "unsigned"
    );
    let other = pact_server::merchant::signing::WebhookSecret::generate()
        .unwrap()
        .to_whsec();
    assert_eq!(
        booking
            .post_signed("/tools/quote-change", &other, "msg_a", quote)
            .await,
        401,
        "another secret"
    );
    let s = booking.secret.clone();
    assert_eq!(
        booking
            .post_signed("/tools/move-booking", &s, "msg_b", quote)
            .await,
        403,
        "a quote is not a move"
    );
    assert_eq!(
        booking
            .post_signed("/tools/quote-change", &s, "msg_c", quote)
            .await,
        200
    );
    assert_eq!(
        booking
            .post_signed("/tools/quote-change", &s, "msg_c", quote)
            .await,
        401,
        "a replay"
    );
    let stats = booking.stats().await;
    assert_eq!(stats["tool_calls"], json!({"quote_change": 1}), "{stats}");
    assert_eq!(stats["refused_misdirected"], 1, "{stats}");
    assert_eq!(stats["refused_replays"], 1, "{stats}");
    assert_eq!(stats["moves"], json!([]), "{stats}");
}
