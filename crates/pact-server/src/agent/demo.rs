//! The built-in demo agent: a small store that answers deterministically.
//!
//! Public questions (opening hours, return policy) are answered to anyone.
//! Account questions without delegation get what a chat widget would say: a
//! request for the order number, and no account data, because a PA-JWT proves
//! only who the platform is, not that `sub` owns an account (PACT §3).

use pact_db::brands::Brand;
use pact_proto::card::AgentSkill;

use super::{AgentError, BoxFuture, BrandAgent, Outcome, Turn};

pub struct DemoAgent;

pub const HOURS: &str = "We're open Monday to Friday 9:00–18:00 and Saturday 10:00–16:00; closed on Sundays and public holidays.";
pub const RETURNS: &str = "You can return unused items within 30 days of delivery for a full refund. Returns are free; the refund reaches your original payment method within 5 business days of the item arriving back with us.";
pub const ASK_ORDER_NUMBER: &str =
    "I can help with your order. What is your order number? It looks like DEMO-12345.";
pub const NEED_ACCOUNT: &str = "Thanks. To protect your privacy I can only share order details with an agent that the account holder has connected to their account.";

/// Classifies the user's text; a plain function so the demo's behaviour is easy to test.
pub fn answer(brand_name: &str, text: &str) -> String {
    let t = text.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(&["demo-"])
        && t.split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
            .any(is_order_number)
    {
        NEED_ACCOUNT.to_owned()
    } else if has(&[
        "order",
        "parcel",
        "package",
        "delivery",
        "track",
        "cancel",
        "my account",
    ]) {
        ASK_ORDER_NUMBER.to_owned()
    } else if has(&["return", "refund", "exchange"]) {
        RETURNS.to_owned()
    } else if has(&["hour", "open", "close", "when are you"]) {
        HOURS.to_owned()
    } else if has(&["hello", "hi ", "hey", "good morning", "good evening"]) || t.trim() == "hi" {
        format!(
            "Hello! This is {brand_name}. I can tell you our opening hours, explain returns, or help with an order."
        )
    } else {
        format!(
            "I'm the {brand_name} assistant. I can tell you our opening hours, explain our return policy, or help with an order."
        )
    }
}

/// `DEMO-` followed by 3–10 digits.
fn is_order_number(word: &str) -> bool {
    word.strip_prefix("demo-")
        .is_some_and(|n| (3..=10).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

impl BrandAgent for DemoAgent {
    fn skills(&self, _brand: &Brand) -> Vec<AgentSkill> {
        vec![
            AgentSkill {
                id: "store-info".to_owned(),
                name: "Store information".to_owned(),
                description: "Opening hours and the return policy.".to_owned(),
                tags: vec!["hours".to_owned(), "returns".to_owned()],
            },
            AgentSkill {
                id: "orders".to_owned(),
                name: "Orders".to_owned(),
                description: "Order status and cancellation for connected accounts.".to_owned(),
                tags: vec!["orders".to_owned()],
            },
        ]
    }

    fn respond<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<Outcome, AgentError>> {
        Box::pin(async move { Ok(Outcome::Reply(answer(&turn.brand.name, turn.text))) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_questions_are_answered_to_anyone() {
        assert_eq!(answer("Demo", "When are you open on Saturday?"), HOURS);
        assert_eq!(answer("Demo", "What's your return policy?"), RETURNS);
    }

    #[test]
    fn account_questions_ask_for_the_order_number_and_reveal_nothing() {
        assert_eq!(answer("Demo", "Where is my order?"), ASK_ORDER_NUMBER);
        assert_eq!(answer("Demo", "It's DEMO-12345"), NEED_ACCOUNT);
        assert_eq!(answer("Demo", "order demo-12345 please"), NEED_ACCOUNT);
    }

    #[test]
    fn anything_else_gets_a_help_text_naming_the_brand() {
        assert!(answer("Acme", "what is the meaning of life").contains("Acme"));
    }
}
