//! The A2A `message:send` body parser, `pact_proto::a2a::parse_send_message`
//! (PACT §4), on arbitrary bytes.
//!
//! Invariants: a refusal is a 4xx A2A error whose envelope reads back to the
//! same error; an accepted message has a `messageId` (and `contextId`, when
//! given) of 1 to `MAX_ID_LEN` bytes and a non-blank text of at most
//! `MAX_TEXT_BYTES`.

use pact_proto::a2a::{MAX_ID_LEN, MAX_TEXT_BYTES, parse_send_message};
use pact_proto::error::A2aError;

/// One input: returns when it is uninteresting, panics on a finding.
pub fn run(data: &[u8]) {
    match parse_send_message(data) {
        Ok(msg) => {
            assert!(!msg.message_id.is_empty() && msg.message_id.len() <= MAX_ID_LEN);
            if let Some(ctx) = &msg.context_id {
                assert!(!ctx.is_empty() && ctx.len() <= MAX_ID_LEN);
            }
            assert!(msg.text.len() <= MAX_TEXT_BYTES, "text over the cap");
            assert!(!msg.text.trim().is_empty(), "blank text accepted");
            #[cfg(feature = "strict-nul")]
            assert!(
                !msg.message_id.contains('\0')
                    && !msg.text.contains('\0')
                    && !msg.context_id.as_deref().unwrap_or("").contains('\0'),
                "NUL byte accepted"
            );
        }
        Err(err) => {
            let status = err.reason.http_status();
            assert!((400..500).contains(&status), "refusal with status {status}");
            let envelope = err.to_json();
            assert_eq!(
                A2aError::from_json(&envelope),
                Some(err),
                "envelope does not read back"
            );
        }
    }
}
