//! The demo brand's orders: a stand-in for a brand's own order system, so the
//! delegated tools have real rows to read and change.

use sqlx::PgExecutor;
use time::Date;

use crate::DbResult;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct DemoOrder {
    pub order_id: String,
    pub placed_on: Date,
    pub items: String,
    pub total_cents: i32,
    pub status: String,
}

pub async fn for_user(
    db: impl PgExecutor<'_>,
    brand_id: &str,
    user_sub: &str,
) -> DbResult<Vec<DemoOrder>> {
    sqlx::query_as(
        "select order_id, placed_on, items, total_cents, status from demo_orders \
         where brand_id = $1 and user_sub = $2 order by placed_on desc, order_id",
    )
    .bind(brand_id)
    .bind(user_sub)
    .fetch_all(db)
    .await
}

pub async fn find(
    db: impl PgExecutor<'_>,
    brand_id: &str,
    user_sub: &str,
    order_id: &str,
) -> DbResult<Option<DemoOrder>> {
    sqlx::query_as(
        "select order_id, placed_on, items, total_cents, status from demo_orders \
         where brand_id = $1 and user_sub = $2 and order_id = $3",
    )
    .bind(brand_id)
    .bind(user_sub)
    .bind(order_id)
    .fetch_optional(db)
    .await
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    brand_id: &str,
    user_sub: &str,
    o: &DemoOrder,
) -> DbResult<()> {
    sqlx::query(
        "insert into demo_orders (brand_id, user_sub, order_id, placed_on, items, total_cents, status) \
         values ($1, $2, $3, $4, $5, $6, $7) on conflict do nothing",
    )
    .bind(brand_id)
    .bind(user_sub)
    .bind(&o.order_id)
    .bind(o.placed_on)
    .bind(&o.items)
    .bind(o.total_cents)
    .bind(&o.status)
    .execute(db)
    .await
    .map(|_| ())
}

/// Cancels an order that has not shipped; false when it was not cancellable.
pub async fn cancel(
    db: impl PgExecutor<'_>,
    brand_id: &str,
    user_sub: &str,
    order_id: &str,
) -> DbResult<bool> {
    let done = sqlx::query(
        "update demo_orders set status = 'cancelled' where brand_id = $1 and user_sub = $2 and order_id = $3 \
         and status = 'processing'",
    )
    .bind(brand_id)
    .bind(user_sub)
    .bind(order_id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}
