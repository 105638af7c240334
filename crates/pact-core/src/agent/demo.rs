//! The built-in demo agent: a small store that answers deterministically.
//!
//! Public questions (opening hours, return policy) are answered to anyone.
//! Account questions go through the tool gate: with a delegation that holds
//! the scope they are answered from the user's orders; without it, a brand
//! that offers delegation gets a step-up, and a brand that does not gets what
//! a chat widget would say — a request for the order number and no account
//! data, because a PA-JWT proves only who the platform is, not that `sub` owns
//! an account (PACT §3).

use pact_db::brands::Brand;
use pact_proto::card::AgentSkill;
use serde_json::{Value, json};

use super::demo_tools::{CancelOrder, ListOrders, OrderStatus};
use super::{AgentError, BoxFuture, BrandAgent, ToolError, ToolGate, Turn};

pub struct DemoAgent;

pub const HOURS: &str = "We're open Monday to Friday 9:00–18:00 and Saturday 10:00–16:00; closed on Sundays and public holidays.";
pub const RETURNS: &str = "You can return unused items within 30 days of delivery for a full refund. Returns are free; the refund reaches your original payment method within 5 business days of the item arriving back with us.";
pub const ASK_ORDER_NUMBER: &str =
    "I can help with your order. What is your order number? It looks like DEMO-12345.";
pub const NEED_ACCOUNT: &str = "Thanks. To protect your privacy I can only share order details with an agent that the account holder has connected to their account.";
pub const NEEDS_PERMISSION: &str = "I need your permission for that first.";

/// What the user asked for, decided from the text alone.
#[derive(Debug, PartialEq, Eq)]
pub enum Intent {
    Hours,
    Returns,
    ListOrders,
    OrderStatus(String),
    CancelOrder(String),
    Greeting,
    Other,
}

pub fn intent(text: &str) -> Intent {
    let t = text.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    let order_id = t
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .find(|w| is_order_number(w))
        .map(str::to_uppercase);
    match order_id {
        Some(id) if has(&["cancel"]) => Intent::CancelOrder(id),
        Some(id) => Intent::OrderStatus(id),
        None if has(&[
            "order",
            "parcel",
            "package",
            "delivery",
            "track",
            "cancel",
            "my account",
            "purchase",
        ]) =>
        {
            Intent::ListOrders
        }
        None if has(&["return", "refund", "exchange"]) => Intent::Returns,
        None if has(&["hour", "open", "close", "when are you"]) => Intent::Hours,
        None if has(&["hello", "hi ", "hey", "good morning", "good evening"])
            || t.trim() == "hi" =>
        {
            Intent::Greeting
        }
        None => Intent::Other,
    }
}

/// `DEMO-` followed by 3–10 digits.
fn is_order_number(word: &str) -> bool {
    word.strip_prefix("demo-")
        .is_some_and(|n| (3..=10).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Public answers and the chat-widget fallbacks, for turns without account access.
pub fn answer(brand_name: &str, text: &str) -> String {
    match intent(text) {
        Intent::Hours => HOURS.to_owned(),
        Intent::Returns => RETURNS.to_owned(),
        Intent::ListOrders => ASK_ORDER_NUMBER.to_owned(),
        Intent::OrderStatus(_) | Intent::CancelOrder(_) => NEED_ACCOUNT.to_owned(),
        Intent::Greeting => format!(
            "Hello! This is {brand_name}. I can tell you our opening hours, explain returns, or help with an order."
        ),
        Intent::Other => format!(
            "I'm the {brand_name} assistant. I can tell you our opening hours, explain our return policy, or help with an order."
        ),
    }
}

fn describe_order(o: &Value) -> String {
    format!(
        "{} ({}, placed {}, total {}): {}",
        o["order_id"].as_str().unwrap_or(""),
        o["items"].as_str().unwrap_or(""),
        o["placed_on"].as_str().unwrap_or(""),
        o["total"].as_str().unwrap_or(""),
        o["status"].as_str().unwrap_or("")
    )
}

async fn account_turn(
    brand: &Brand,
    text: &str,
    tools: &mut ToolGate<'_>,
) -> Result<String, ToolError> {
    match intent(text) {
        Intent::ListOrders => {
            let list = tools.call(&ListOrders, json!({})).await?;
            let lines: Vec<String> = list
                .as_array()
                .map(|a| a.iter().map(describe_order).collect())
                .unwrap_or_default();
            Ok(if lines.is_empty() {
                "You have no orders with us yet.".to_owned()
            } else {
                format!("Your orders:\n{}", lines.join("\n"))
            })
        }
        Intent::OrderStatus(id) => {
            let o = tools.call(&OrderStatus, json!({"order_id": id})).await?;
            Ok(if o.is_null() {
                format!("I can't find order {id} on your account.")
            } else {
                format!("Order {}", describe_order(&o))
            })
        }
        Intent::CancelOrder(id) => {
            let r = tools.call(&CancelOrder, json!({"order_id": id})).await?;
            Ok(match (r["cancelled"].as_bool(), r["reason"].as_str()) {
                (Some(true), _) => format!("Order {id} is cancelled. You won't be charged."),
                (_, Some("not_found")) => format!("I can't find order {id} on your account."),
                (_, Some(status)) => {
                    format!("Order {id} can't be cancelled: it is already {status}.")
                }
                _ => format!("Order {id} could not be cancelled."),
            })
        }
        _ => Ok(answer(&brand.name, text)),
    }
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

    fn respond<'a>(
        &'a self,
        turn: Turn<'a>,
        tools: &'a mut ToolGate<'_>,
    ) -> BoxFuture<'a, Result<String, AgentError>> {
        Box::pin(async move {
            let text = match account_turn(turn.brand, turn.text, tools).await {
                Ok(text) => text,
                // No delegation at this brand: behave like a chat widget.
                Err(ToolError::Unavailable) => answer(&turn.brand.name, turn.text),
                // The server turns this into a step-up task.
                Err(ToolError::MissingScope(_)) => NEEDS_PERMISSION.to_owned(),
                // Beyond what the person allowed: the server asks them (a step-up task).
                Err(ToolError::Beyond(_)) => {
                    "That goes beyond what you allowed your agent, so I need your approval for it first."
                        .to_owned()
                }
                Err(ToolError::NotPermitted(_)) | Err(ToolError::Unenforceable(_)) => {
                    "The permission you gave your agent doesn't cover that order, so I can't do it."
                        .to_owned()
                }
                Err(ToolError::BadArguments(why)) => format!("I couldn't do that: {why}."),
                Err(ToolError::Failed(why)) => return Err(AgentError::Failed(why)),
                Err(ToolError::DatabaseUnavailable) => {
                    return Err(AgentError::DatabaseUnavailable);
                }
            };
            Ok(text)
        })
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
    }

    #[test]
    fn intents_pick_out_order_numbers_and_cancellation() {
        assert_eq!(
            intent("please cancel demo-1234567"),
            Intent::CancelOrder("DEMO-1234567".into())
        );
        assert_eq!(
            intent("status of DEMO-1234567?"),
            Intent::OrderStatus("DEMO-1234567".into())
        );
        assert_eq!(intent("show my orders"), Intent::ListOrders);
        assert_eq!(intent("cancel my order"), Intent::ListOrders);
    }

    #[test]
    fn anything_else_gets_a_help_text_naming_the_brand() {
        assert!(answer("Acme", "what is the meaning of life").contains("Acme"));
    }
}
