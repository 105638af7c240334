//! The demo store's account tools, over the `demo_orders` table.

use pact_db::demo_orders::{self, DemoOrder, OrderStatus as Stored};
use pact_db::ids::{BrandId, UserSub};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use time::{Date, Month};

use super::BoxFuture;
use super::tools::{Tool, ToolContext, ToolError};

pub const ORDERS_READ: &str = "orders:read";

/// The built-in tools, as the gate's limits see them (`agent::bounds`).
pub fn all() -> [&'static dyn Tool; 3] {
    [&ListOrders, &OrderStatus, &CancelOrder]
}
pub const ORDERS_CANCEL: &str = "orders:cancel";

/// The demo brand's scopes, seeded by `pactd dev` and the tests.
pub const DEMO_SCOPES: [(&str, &str); 2] = [
    (ORDERS_READ, "See your orders and their delivery status"),
    (ORDERS_CANCEL, "Cancel orders that have not shipped yet"),
];

fn db_err(e: pact_db::Error) -> ToolError {
    match pact_db::classify(&e) {
        pact_db::Failure::Unavailable => {
            tracing::warn!(error = %e, "database unavailable during a tool call");
            ToolError::DatabaseUnavailable
        }
        _ => ToolError::Failed(e.to_string()),
    }
}

/// Three orders per user, derived from the user id so they are stable across
/// runs: one still processing (cancellable), one shipped, one delivered.
pub fn seed_orders(brand_id: &BrandId, user_sub: &UserSub) -> Vec<DemoOrder> {
    let digest = Sha256::digest(format!("{brand_id}\n{user_sub}").as_bytes());
    let base =
        u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % 9_000_000 + 1_000_000;
    let date = |m, d| Date::from_calendar_date(2026, m, d).unwrap_or(Date::MIN);
    vec![
        DemoOrder {
            order_id: format!("DEMO-{}", base),
            placed_on: date(Month::November, 25),
            items: "Trail running shoes (size 42)".to_owned(),
            total_cents: 12_900,
            status: Stored::Processing,
        },
        DemoOrder {
            order_id: format!("DEMO-{}", base + 1),
            placed_on: date(Month::November, 18),
            items: "Rain jacket, 2 pairs of socks".to_owned(),
            total_cents: 8_450,
            status: Stored::Shipped,
        },
        DemoOrder {
            order_id: format!("DEMO-{}", base + 2),
            placed_on: date(Month::October, 30),
            items: "Water bottle".to_owned(),
            total_cents: 1_500,
            status: Stored::Delivered,
        },
    ]
}

async fn orders(
    conn: &mut PgConnection,
    ctx: ToolContext<'_>,
) -> Result<Vec<DemoOrder>, ToolError> {
    let existing = demo_orders::for_user(&mut *conn, &ctx.brand.id, ctx.user_sub)
        .await
        .map_err(db_err)?;
    if !existing.is_empty() {
        return Ok(existing);
    }
    for o in seed_orders(&ctx.brand.id, ctx.user_sub) {
        demo_orders::insert(&mut *conn, &ctx.brand.id, ctx.user_sub, &o)
            .await
            .map_err(db_err)?;
    }
    demo_orders::for_user(&mut *conn, &ctx.brand.id, ctx.user_sub)
        .await
        .map_err(db_err)
}

pub fn order_json(o: &DemoOrder) -> Value {
    json!({"order_id": o.order_id, "placed_on": o.placed_on.to_string(), "items": o.items,
           "total": format!("{}.{:02}", o.total_cents / 100, o.total_cents % 100), "status": o.status})
}

fn order_id_arg(args: &Value) -> Result<&str, ToolError> {
    args.get("order_id")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::BadArguments("order_id is required".to_owned()))
}

/// The `order_id` argument and the caller's order of that id, if it has one.
async fn named_order<'a>(
    conn: &mut PgConnection,
    ctx: ToolContext<'_>,
    args: &'a Value,
) -> Result<(&'a str, Option<DemoOrder>), ToolError> {
    let id = order_id_arg(args)?;
    let list = orders(conn, ctx).await?;
    Ok((id, list.into_iter().find(|o| o.order_id == id)))
}

pub struct ListOrders;
impl Tool for ListOrders {
    fn name(&self) -> &'static str {
        "list_orders"
    }
    fn scope(&self) -> &'static str {
        ORDERS_READ
    }
    fn run<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        ctx: ToolContext<'a>,
        _args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let list = orders(conn, ctx).await?;
            Ok(Value::Array(list.iter().map(order_json).collect()))
        })
    }
}

pub struct OrderStatus;
impl Tool for OrderStatus {
    fn name(&self) -> &'static str {
        "order_status"
    }
    fn scope(&self) -> &'static str {
        ORDERS_READ
    }
    fn run<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        ctx: ToolContext<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let (_, order) = named_order(conn, ctx, args).await?;
            Ok(order.as_ref().map(order_json).unwrap_or(Value::Null))
        })
    }
}

pub struct CancelOrder;
impl Tool for CancelOrder {
    fn name(&self) -> &'static str {
        "cancel_order"
    }
    fn scope(&self) -> &'static str {
        ORDERS_CANCEL
    }
    /// The demo brand's `order_cancellation.order_ids` names the orders
    /// this tool may cancel (`domain::authz_details::demo_types`).
    fn rules(&self) -> &'static [&'static str] {
        &["order_ids=order_id"]
    }
    fn summary(&self) -> &'static str {
        "Cancel order {order_id}"
    }
    fn run<'a>(
        &'a self,
        conn: &'a mut PgConnection,
        ctx: ToolContext<'a>,
        args: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            let (id, Some(order)) = named_order(&mut *conn, ctx, args).await? else {
                return Ok(json!({"cancelled": false, "reason": "not_found"}));
            };
            if demo_orders::cancel(&mut *conn, &ctx.brand.id, ctx.user_sub, id)
                .await
                .map_err(db_err)?
            {
                Ok(json!({"cancelled": true, "order_id": id}))
            } else {
                Ok(json!({"cancelled": false, "reason": order.status}))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_database_is_the_retryable_failure_not_a_tool_bug() {
        let lost = pact_db::Error::from(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "expected to read 5 bytes, got 0 bytes at EOF",
        )));
        assert!(matches!(db_err(lost), ToolError::DatabaseUnavailable));
        assert!(matches!(
            db_err(sqlx::Error::RowNotFound.into()),
            ToolError::Failed(_)
        ));
    }
}
