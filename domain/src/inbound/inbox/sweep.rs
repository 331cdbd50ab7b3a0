//! Finding events that no job is going to process: the push after the inbox
//! commit was lost (crash, database blip), a retry's job vanished, or a
//! worker died mid-attempt. Each is re-enqueued at most once per `grace`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::InboxState;
use crate::entities::inbox_event::{self, Column};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepRules {
    /// How long an event may wait for its job before the sweeper pushes
    /// another (also the minimum time between two pushes for one event).
    pub grace: Duration,
    /// How long an attempt may hold an event before it counts as abandoned.
    pub lease: Duration,
    /// Events handled per sweep.
    pub batch: u64,
}

/// Marks up to `rules.batch` stranded events as enqueued now and returns
/// their ids; the caller pushes one job each. The mark is a conditional
/// update, so two sweepers (two processes) do not both take an event.
pub async fn take_stranded<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
    rules: &SweepRules,
) -> Result<Vec<i64>, DbErr> {
    let stranded = stranded(now, rules);
    let candidates = Query::select()
        .column(Column::Id)
        .from(inbox_event::Entity)
        .cond_where(stranded.clone())
        .order_by(Column::Id, sea_orm::Order::Asc)
        .limit(rules.batch)
        .to_owned();
    let taken = inbox_event::Entity::update_many()
        .col_expr(Column::EnqueuedAt, Expr::value(now))
        .filter(Column::Id.in_subquery(candidates))
        // Checked again on the row itself, so a concurrent sweeper that got
        // there first makes this one skip it.
        .filter(stranded)
        .exec_with_returning(conn)
        .await?;
    Ok(taken.into_iter().map(|e| e.id).collect())
}

fn stranded(now: DateTime<Utc>, rules: &SweepRules) -> Condition {
    let before =
        |d: Duration| now - chrono::Duration::from_std(d).unwrap_or(chrono::TimeDelta::MAX);
    let quiet = before(rules.grace);
    let not_recently_enqueued = Condition::any()
        .add(Column::EnqueuedAt.is_null())
        .add(Column::EnqueuedAt.lte(quiet));
    let waiting = Condition::any()
        .add(Column::State.eq(InboxState::Received.as_str()))
        .add(
            Condition::all()
                .add(Column::State.eq(InboxState::Failed.as_str()))
                .add(
                    Condition::any()
                        .add(Column::NextAttemptAt.is_null())
                        .add(Column::NextAttemptAt.lte(quiet)),
                ),
        )
        .add(
            Condition::all()
                .add(Column::State.eq(InboxState::Processing.as_str()))
                .add(Column::LockedAt.lte(before(rules.lease))),
        );
    Condition::all().add(waiting).add(not_recently_enqueued)
}
