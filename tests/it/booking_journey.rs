//! The proof of issue 26, through the real pages in Chromium: the personal
//! agent asks to move booking K7PQ2M to Tuesday with no extra charge →
//! consent shows the booking and "no extra charge" → the booking service's
//! agent tries Tuesday at €15.00 → not forwarded; a step-up task with the
//! exact terms → the person allows that move at €15.00 on the consent page
//! → the retry is forwarded exactly once → the receipt shows the action,
//! its amount and its outcome; a move with other arguments is refused.

use pact_tests::booking::{TUESDAY, eur};
use pact_tests::pages::{add_totp, add_user};
use serde_json::{Value, json};

use crate::browser::{app, journey};
use crate::journey::{beyond_task, send_ok, text, user_code_of, verified_receipt};

const ISS: &str = "https://pa.example/booking-journey";
const SUB: &str = "pa-bea";
const PASSWORD: &str = "correct horse battery staple";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_a_booking_to_tuesday_with_no_extra_charge_through_the_real_pages() {
    let app = app().await;
    let booking = app.booking_brand("demo").await;
    let pa = app.registered_pa(ISS).await;
    let pa_jwt = pa.token(SUB, app.audience());
    let user = add_user(&app, "demo", "bea@example.com", PASSWORD).await;
    let totp = hex(&add_totp(&app, &user).await);
    let person = |link: &Value, code: &str, offset: i64, expect: &[&str]| {
        json!({
            "base": app.state.config.public_url,
            "brand": "demo",
            "email": "bea@example.com",
            "password": PASSWORD,
            "totp_secret_hex": totp,
            "totp_offset": offset,
            "link": link,
            "user_code": code,
            "expect_on_consent": expect,
        })
    };

    // "Move booking K7PQ2M to Tuesday, with no extra charge."
    let details = json!([{"type": "booking_change", "booking_ids": ["K7PQ2M"],
                          "new_date": {"from": TUESDAY, "to": TUESDAY},
                          "max_fee": eur("0.00")}]);
    let auth = app
        .device_authorize(&pa, SUB, "bookings:read bookings:change", Some(&details))
        .await;
    let mut inp = person(
        &auth.body["verification_uri_complete"],
        &auth.user_code,
        0,
        &[
            "Move booking K7PQ2M",
            "new date: only Tue 8 Dec 2026",
            "no extra charge",
        ],
    );
    inp["shots_name"] = json!("booking-consent");
    let out = journey("password-totp", inp).await;
    println!("consent page:\n{}", out["consent"].as_str().unwrap_or(""));
    let (status, tokens) = app.poll(&pa, SUB, &auth.device_code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["authorization_details"], details);
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    let send = |id: &'static str, words: &'static str, ctx: Option<String>| {
        let (app, pa_jwt, token) = (&app, &pa_jwt, &token);
        async move { send_ok(app, pa_jwt, token, id, words, ctx.as_deref()).await }
    };

    // The agent quotes Tuesday (€15.00) and tries it: not forwarded.
    let v = send("m1", "Move booking K7PQ2M to Tuesday", None).await;
    let tuesday = json!({"booking_id": "K7PQ2M", "new_date": TUESDAY, "fee": eur("15.00")});
    let op = beyond_task(&v, "move_booking", &tuesday);
    let terms = "Move booking K7PQ2M to Tue 8 Dec 2026 — extra charge €15.00";
    assert_eq!(op["description"], terms);
    assert_eq!(op["beyond"]["field"], "max_fee");
    let ctx = v["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(booking.moves().await, json!([]));
    assert_eq!(booking.stats().await["tool_calls"]["quote_change"], 1);

    // The person allows exactly that move, once, on the consent page.
    let link = v["task"]["metadata"]["pact.verificationUriComplete"].clone();
    let mut inp = person(
        &link,
        &user_code_of(&v["task"]),
        1,
        &[
            terms,
            "Why you are asked: this goes beyond what you allowed (no extra charge).",
        ],
    );
    inp["shots_name"] = json!("booking-allow-once");
    let out = journey("allow-once", inp).await;
    println!("allow once:\n{}", out["text"].as_str().unwrap_or(""));

    // The agent's retry with the same arguments: forwarded, exactly once.
    let v = send("m2", "Move booking K7PQ2M to Tuesday", Some(ctx.clone())).await;
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
        .unwrap_or_else(|| panic!("{claims:?}"));
    assert_eq!(moved.outcome.as_deref(), Some("done"));
    assert!(moved.approved_once);
    assert_eq!(
        moved.args_hash.as_deref(),
        Some(pact_jose::args_hash(&tuesday).as_str())
    );
    assert_eq!(moved.effect, Some(json!({"amount": eur("15.00")})));
    assert!(!moved.beyond_limit);
    assert_eq!(booking.moves().await, json!([["K7PQ2M", TUESDAY, "15.00"]]));

    // Used: the same move again is asked again; a move with other
    // arguments (another day) is refused and asked about too.
    for (id, words) in [
        ("m3", "Move booking K7PQ2M to Tuesday"),
        ("m4", "Move booking K7PQ2M to Wednesday"),
    ] {
        let v = send(id, words, Some(ctx.clone())).await;
        assert_eq!(
            v["task"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{words}: {v}"
        );
        let claims = verified_receipt(&app, &v["task"]["status"]["message"]).await;
        assert_eq!(claims.refused[0].reason, "beyond_limit", "{claims:?}");
    }
    assert_eq!(booking.moves().await, json!([["K7PQ2M", TUESDAY, "15.00"]]));
    assert_eq!(booking.stats().await["tool_calls"]["move_booking"], 1);
}
