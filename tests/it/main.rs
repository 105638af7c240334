//! pactd integration tests: real PostgreSQL, real HTTP on loopback.
#![allow(clippy::disallowed_methods)] // test set-up writes rows at real times
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod a2a_sdk;
mod admin_api;
mod admin_browser;
mod admin_console;
mod admin_keys_brands;
mod admin_schemathesis;
mod admission;
mod architecture;
mod audit_coverage;
mod booking;
mod booking_journey;
mod bounds;
mod browser;
mod card;
mod conformance;
mod db_errors;
mod delegated_flow;
mod delegated_oauth;
mod delegated_send;
mod hardening;
mod journey;
mod jsonrpc;
mod jwks;
mod mcp;
mod mcp_server;
mod merchant;
mod messages;
mod metrics;
mod node_cache;
mod node_feed;
mod oidc_login;
mod ops;
mod pa_jwt_attacks;
mod pages_account;
mod pages_device;
mod pages_i18n;
mod pages_login;
mod password_reset;
mod receipt_log;
mod registries;
mod routes;
mod schema;
mod tasks;
mod who_is_asking;

use reqwest::Response;

/// Asserts the exact bare 401 of PACT §3.
pub async fn assert_bare_401(res: Response) {
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer realm="a2a""#)
    );
    assert!(res.bytes().await.unwrap().is_empty(), "a 401 has no body");
}

/// Asserts an A2A error envelope with this status, reason and message; returns nothing.
pub async fn assert_a2a_error(res: Response, status: u16, reason: &str, message: Option<&str>) {
    assert_eq!(res.status(), status);
    assert_eq!(
        res.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/a2a+json")
    );
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"]["code"], status);
    assert_eq!(v["error"]["details"][0]["reason"], reason, "{v}");
    assert_eq!(v["error"]["details"][0]["domain"], "a2a-protocol.org");
    assert_eq!(
        v["error"]["details"][0]["@type"],
        "type.googleapis.com/google.rpc.ErrorInfo"
    );
    if let Some(m) = message {
        assert_eq!(v["error"]["message"], m);
    }
}

/// Asserts a bare status with an empty body (404/405 of PACT §4).
pub async fn assert_bare(res: Response, status: u16) {
    assert_eq!(res.status(), status);
    assert!(res.bytes().await.unwrap().is_empty(), "no body expected");
}
