//! The demo brand's orders: a stand-in for a brand's own order system, so the
//! delegated tools have real rows to read and change.

use crate::ids::{BrandId, UserSub};
use sqlx::PgExecutor;
use time::Date;

use crate::DbResult;

/// An order's state, the text of the `status` column (its CHECK constraint, migrations/0002,
/// allows exactly these four); tool results show it in the same words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::Type, serde::Serialize)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    Processing,
    Shipped,
    Delivered,
    Cancelled,
}

impl OrderStatus {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processing => "processing",
            Self::Shipped => "shipped",
            Self::Delivered => "delivered",
            Self::Cancelled => "cancelled",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct DemoOrder {
    pub order_id: String,
    pub placed_on: Date,
    pub items: String,
    pub total_cents: i32,
    pub status: OrderStatus,
}

pub async fn for_user(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
) -> DbResult<Vec<DemoOrder>> {
    sqlx::query_as!(
        DemoOrder,
        "select order_id, placed_on, items, total_cents, status as \"status: OrderStatus\" from demo_orders \
         where brand_id = $1 and user_sub = $2 order by placed_on desc, order_id",
        brand_id,
        user_sub,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

pub async fn find(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    order_id: &str,
) -> DbResult<Option<DemoOrder>> {
    sqlx::query_as!(
        DemoOrder,
        "select order_id, placed_on, items, total_cents, status as \"status: OrderStatus\" from demo_orders \
         where brand_id = $1 and user_sub = $2 and order_id = $3",
        brand_id,
        user_sub,
        order_id,
    )
    .fetch_optional(db)
    .await
    .map_err(Into::into)
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    o: &DemoOrder,
) -> DbResult<()> {
    sqlx::query!(
        "insert into demo_orders (brand_id, user_sub, order_id, placed_on, items, total_cents, status) \
         values ($1, $2, $3, $4, $5, $6, $7) on conflict do nothing",
        brand_id,
        user_sub,
        &o.order_id,
        o.placed_on,
        &o.items,
        o.total_cents,
        o.status as OrderStatus,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Cancels an order that has not shipped; false when it was not cancellable.
pub async fn cancel(
    db: impl PgExecutor<'_>,
    brand_id: &BrandId,
    user_sub: &UserSub,
    order_id: &str,
) -> DbResult<bool> {
    let done = sqlx::query!(
        "update demo_orders set status = 'cancelled' where brand_id = $1 and user_sub = $2 and order_id = $3 \
         and status = 'processing'",
        brand_id,
        user_sub,
        order_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
