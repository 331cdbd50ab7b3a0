//! What ops do with the inbox: look, and send events back for processing. A
//! retry reprocesses the SAME row — same source and event id, through the
//! same natural-key upsert — so it can never create a second lead.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect,
};

use super::InboxState;
use crate::entities::inbox_event::{self, Column, Model};
use crate::error::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxFilter {
    pub source: Option<String>,
    pub state: Option<InboxState>,
    pub received_since: Option<DateTime<Utc>>,
    pub received_until: Option<DateTime<Utc>>,
}

impl InboxFilter {
    fn condition(&self) -> Condition {
        let mut c = Condition::all();
        if let Some(source) = &self.source {
            c = c.add(Column::Source.eq(source));
        }
        if let Some(state) = self.state {
            c = c.add(Column::State.eq(state.as_str()));
        }
        if let Some(since) = self.received_since {
            c = c.add(Column::ReceivedAt.gte(since));
        }
        if let Some(until) = self.received_until {
            c = c.add(Column::ReceivedAt.lt(until));
        }
        c
    }
}

/// Newest first; `before_id` continues a previous page.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &InboxFilter,
    before_id: Option<i64>,
    limit: u64,
) -> Result<Vec<Model>, DbErr> {
    let mut query = inbox_event::Entity::find().filter(filter.condition());
    if let Some(before) = before_id {
        query = query.filter(Column::Id.lt(before));
    }
    query.order_by_desc(Column::Id).limit(limit).all(conn).await
}

pub async fn get<C: ConnectionTrait>(conn: &C, id: i64) -> Result<Option<Model>, DbErr> {
    inbox_event::Entity::find_by_id(id).one(conn).await
}

/// Sends one event back to `received` with a fresh budget of attempts. The
/// caller then pushes its job.
pub async fn retry<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    now: DateTime<Utc>,
) -> Result<Model, Error> {
    let reset = reset_for_retry(now)
        .filter(Column::Id.eq(id))
        .filter(retryable())
        .exec_with_returning(conn)
        .await?;
    if let Some(event) = reset.into_iter().next() {
        return Ok(event);
    }
    match get(conn, id).await? {
        None => Err(Error::NotFound),
        Some(event) => Err(Error::Conflict(format!(
            "event {id} is {}; only failed, dead, skipped or processed events can be retried",
            event.state
        ))),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkRetry {
    /// Events matching the filter.
    pub matched: u64,
    /// Events sent back for processing (empty on a dry run).
    pub retried: Vec<i64>,
}

/// Retries every event matching `filter`, whose `state` must be given and
/// retryable; `dry_run` only counts.
pub async fn retry_matching<C: ConnectionTrait>(
    conn: &C,
    filter: &InboxFilter,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<BulkRetry, Error> {
    if !filter
        .state
        .is_some_and(|s| InboxState::RETRYABLE.contains(&s))
    {
        return Err(Error::invalid(
            "state",
            "is required for a bulk retry: failed, dead, skipped or processed",
        ));
    }
    if dry_run {
        let matched = inbox_event::Entity::find()
            .filter(filter.condition())
            .count(conn)
            .await?;
        return Ok(BulkRetry {
            matched,
            retried: Vec::new(),
        });
    }
    let reset = reset_for_retry(now)
        .filter(filter.condition())
        .exec_with_returning(conn)
        .await?;
    let retried: Vec<i64> = reset.into_iter().map(|e| e.id).collect();
    Ok(BulkRetry {
        matched: retried.len() as u64,
        retried,
    })
}

fn retryable() -> Condition {
    Condition::all().add(Column::State.is_in(InboxState::RETRYABLE.map(InboxState::as_str)))
}

fn reset_for_retry(now: DateTime<Utc>) -> sea_orm::UpdateMany<inbox_event::Entity> {
    inbox_event::Entity::update_many()
        .col_expr(Column::State, Expr::value(InboxState::Received.as_str()))
        .col_expr(Column::Attempts, Expr::value(0))
        .col_expr(Column::Retries, Expr::col(Column::Retries).add(1))
        .col_expr(
            Column::NextAttemptAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(Column::EnqueuedAt, Expr::value(now))
        .col_expr(Column::LockedAt, Expr::value(Option::<DateTime<Utc>>::None))
        .col_expr(Column::LockedBy, Expr::value(Option::<String>::None))
        .col_expr(Column::UpdatedAt, Expr::value(now))
}
