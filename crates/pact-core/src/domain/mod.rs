//! Domain rules as plain functions of their inputs and `now`: no I/O here, so
//! tests control time and every rule can be checked in isolation.

pub mod admission;
pub mod authz_details;
pub mod device_flow;
pub mod hidden_chars;
pub mod limits;
pub mod money;
pub mod proxies;
pub mod receipt_chain;
pub mod scopes;
pub mod secrets;
pub mod step_up_task;
pub mod terms;
pub mod tool_rules;
pub mod user_code;
