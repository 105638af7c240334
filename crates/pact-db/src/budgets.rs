//! Budgets of consumed limits (`count`, `cumulative_amount`, and one-off
//! approvals), charged by the tool gateway before a call is forwarded.
//! Migration 0025 explains why they belong to no single grant.

use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::DbResult;

#[derive(Clone, Debug)]
pub struct NewBudget<'a> {
    pub id: Uuid,
    pub cap: i64,
    pub currency: Option<&'a str>,
}

/// Creates budgets (none used yet) living until `expires_at`.
pub async fn insert(
    db: impl PgExecutor<'_>,
    budgets: &[NewBudget<'_>],
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    if budgets.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = budgets.iter().map(|b| b.id).collect();
    let caps: Vec<i64> = budgets.iter().map(|b| b.cap).collect();
    let currencies: Vec<Option<String>> = budgets
        .iter()
        .map(|b| b.currency.map(str::to_owned))
        .collect();
    sqlx::query!(
        "insert into grant_budgets (id, cap, currency, expires_at) \
         select id, cap, currency, $4 from unnest($1::uuid[], $2::bigint[], $3::text[]) \
           as b(id, cap, currency)",
        &ids,
        &caps,
        &currencies as &[Option<String>],
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// A grant that carries budgets made for an earlier one keeps them alive as
/// long as it lives.
pub async fn extend(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
    expires_at: OffsetDateTime,
) -> DbResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "update grant_budgets set expires_at = greatest(expires_at, $2) where id = any($1)",
        ids,
        expires_at,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Charges each budget its amount, all or none (`pactd_charge_budgets`):
/// false when one of them has not that much left (or does not exist).
pub async fn charge(db: impl PgExecutor<'_>, ids: &[Uuid], amounts: &[i64]) -> DbResult<bool> {
    if let ([id], [amount]) = (ids, amounts) {
        // One budget, the usual call (one count, or one running total): a
        // single conditional update is all or nothing by itself, so the
        // function's savepoint (its exception block, a subtransaction) is
        // not needed. Same rule: a negative amount, or more than is left,
        // or no such row, charges nothing.
        let done = sqlx::query!(
            "update grant_budgets set used = used + $2 \
             where id = $1 and $2::bigint >= 0 and used + $2::bigint <= cap",
            id,
            amount,
        )
        .execute(db)
        .await?;
        return Ok(done.rows_affected() == 1);
    }
    sqlx::query_scalar!(
        "select pactd_charge_budgets($1, $2) as \"charged!\"",
        ids,
        amounts,
    )
    .fetch_one(db)
    .await
    .map_err(Into::into)
}

/// Gives back what a call was charged when the merchant refused it (it did
/// not act); never below zero.
pub async fn release(db: impl PgExecutor<'_>, ids: &[Uuid], amounts: &[i64]) -> DbResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "update grant_budgets g set used = greatest(g.used - c.amount, 0) \
         from unnest($1::uuid[], $2::bigint[]) as c(id, amount) where g.id = c.id",
        ids,
        amounts,
    )
    .execute(db)
    .await
    .map(|_| ())
    .map_err(Into::into)
}

/// Corrects budgets by what the merchant declared a call really moved (it
/// happened, so it is recorded even past the cap). Returns the ids now over
/// their cap.
pub async fn correct(db: impl PgExecutor<'_>, ids: &[Uuid], deltas: &[i64]) -> DbResult<Vec<Uuid>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar!(
        "update grant_budgets g set used = greatest(g.used + c.delta, 0) \
         from unnest($1::uuid[], $2::bigint[]) as c(id, delta) where g.id = c.id \
         returning case when g.used > g.cap then g.id end",
        ids,
        deltas,
    )
    .fetch_all(db)
    .await
    .map(|rows| rows.into_iter().flatten().collect())
    .map_err(Into::into)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Usage {
    pub id: Uuid,
    pub cap: i64,
    pub used: i64,
    pub currency: Option<String>,
}

/// How much of each budget is used (the account page, the console).
pub async fn usage(db: impl PgExecutor<'_>, ids: &[Uuid]) -> DbResult<Vec<Usage>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_as!(
        Usage,
        "select id, cap, used, currency from grant_budgets where id = any($1)",
        ids,
    )
    .fetch_all(db)
    .await
    .map_err(Into::into)
}

/// Removes budgets no live grant can hold any longer.
pub async fn delete_expired(db: impl PgExecutor<'_>, before: OffsetDateTime) -> DbResult<u64> {
    let done = sqlx::query!("delete from grant_budgets where expires_at < $1", before)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}
