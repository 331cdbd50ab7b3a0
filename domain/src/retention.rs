//! Retention: what is deleted once it has served its purpose. Every step
//! works in bounded batches (a short statement, no long lock) and is
//! idempotent, so several processes may sweep at once.
//!
//! - Inbox bodies (personal data) are emptied after `inbox_body`; the row —
//!   the event id and body hash a redelivery is deduplicated against — stays
//!   until `inbox_event` (at least [`MIN_DEDUP`]). Only finished events
//!   (`processed`, `skipped`, `dead`) are touched.
//! - Outbox events delivered to every subscription, and their deliveries, go
//!   after `outbox`. An event with any delivery not yet `delivered` (pending,
//!   failing or dead) stays, and so does an event not yet fanned out, so the
//!   publisher's per-lead order (which looks only at unsent events) holds.
//! - The per-row details of finished import runs (`import_row`) go after
//!   `run_details`; the run and its counts stay, and so do the keys that make
//!   a re-run of the same file safe (`import_applied_row`). Reconcile's kept
//!   rejected records (`reconcile_rejected`) go once untouched for as long.

use crate::store::Store;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func, Query};
use sea_orm::{ColumnTrait, Condition, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entities::{
    import_row, import_run, inbox_event, outbox_delivery, outbox_event, reconcile_rejected,
};
use crate::inbound::inbox::InboxState;
use crate::outbound::outbox;

/// Stripe retries a webhook for three days; a week of event ids covers it
/// and any sender's late redelivery we know of.
pub const MIN_DEDUP: Duration = Duration::from_secs(7 * 24 * 3600);

const DAY: u64 = 24 * 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionRules {
    /// Finished inbox events' raw bodies are emptied after this.
    pub inbox_body: Duration,
    /// Finished inbox events (their dedup keys) are deleted after this
    /// since their last delivery.
    pub inbox_event: Duration,
    /// Fully delivered outbox events and their deliveries.
    pub outbox: Duration,
    /// Finished import runs' per-row details.
    pub run_details: Duration,
    /// Rows per statement.
    pub batch: u64,
}

impl Default for RetentionRules {
    fn default() -> Self {
        Self {
            inbox_body: Duration::from_secs(30 * DAY),
            inbox_event: Duration::from_secs(90 * DAY),
            outbox: Duration::from_secs(30 * DAY),
            run_details: Duration::from_secs(30 * DAY),
            batch: 500,
        }
    }
}

impl RetentionRules {
    pub fn validate(&self) -> Result<(), String> {
        if self.inbox_event < MIN_DEDUP {
            return Err(
                "inbox event retention must be at least 7 days: a late redelivery must still be \
                 recognised as a duplicate"
                    .into(),
            );
        }
        if self.inbox_event < self.inbox_body {
            return Err("inbox event retention must be at least the inbox body retention".into());
        }
        if self.batch == 0 {
            return Err("the retention batch must be at least 1".into());
        }
        Ok(())
    }
}

/// What one sweep removed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub inbox_bodies: u64,
    pub inbox_events: u64,
    pub outbox_events: u64,
    pub outbox_deliveries: u64,
    pub import_rows: u64,
    pub reconcile_rejected: u64,
}

impl Swept {
    /// `(kind, count)` for metrics and logs.
    pub fn by_kind(&self) -> [(&'static str, u64); 6] {
        [
            ("inbox_body", self.inbox_bodies),
            ("inbox_event", self.inbox_events),
            ("outbox_event", self.outbox_events),
            ("outbox_delivery", self.outbox_deliveries),
            ("import_row", self.import_rows),
            ("reconcile_rejected", self.reconcile_rejected),
        ]
    }
}

fn before(now: DateTime<Utc>, age: Duration) -> DateTime<Utc> {
    now - chrono::TimeDelta::from_std(age).unwrap_or(chrono::TimeDelta::MAX)
}

const FINISHED_INBOX: [InboxState; 3] =
    [InboxState::Processed, InboxState::Skipped, InboxState::Dead];

/// Sweeps everything past its retention, batch after batch, until nothing
/// is left to do. Each statement's rows are added to `swept` as it
/// commits, so a sweep that fails half-way still counts what it removed
/// (a later pass finds none of it to count again).
pub async fn sweep(
    db: &Store,
    rules: &RetentionRules,
    now: DateTime<Utc>,
    swept: &mut Swept,
) -> Result<(), crate::Error> {
    let batch = rules.batch;
    let finished_inbox = || {
        Condition::all()
            .add(inbox_event::Column::State.is_in(FINISHED_INBOX.map(InboxState::as_str)))
    };
    let bodies = finished_inbox()
        .add(inbox_event::Column::ReceivedAt.lt(before(now, rules.inbox_body)))
        .add(Expr::expr(Func::cust("LENGTH").arg(Expr::col(inbox_event::Column::Body))).gt(0));
    let events = finished_inbox()
        .add(inbox_event::Column::LastDeliveryAt.lt(before(now, rules.inbox_event)));
    let rejected = Condition::all()
        .add(reconcile_rejected::Column::UpdatedAt.lt(before(now, rules.run_details)));
    loop {
        let ids =
            oldest::<inbox_event::Entity>(db, inbox_event::Column::Id, &bodies, batch).await?;
        let txn = db.begin_write().await?;
        let emptied = inbox_event::Entity::update_many()
            .col_expr(inbox_event::Column::Body, Expr::value(Vec::<u8>::new()))
            .filter(inbox_event::Column::Id.is_in(ids.clone()))
            .filter(bodies.clone())
            .exec(&txn)
            .await?;
        txn.commit().await?;
        swept.inbox_bodies += emptied.rows_affected;
        if (ids.len() as u64) < batch {
            break;
        }
    }
    delete_all::<inbox_event::Entity>(
        db,
        inbox_event::Column::Id,
        &events,
        batch,
        &mut swept.inbox_events,
    )
    .await?;
    loop {
        let (events, deliveries) =
            delete_delivered_outbox(db, before(now, rules.outbox), batch).await?;
        swept.outbox_events += events;
        swept.outbox_deliveries += deliveries;
        if events < batch {
            break;
        }
    }
    delete_all::<reconcile_rejected::Entity>(
        db,
        reconcile_rejected::Column::Id,
        &rejected,
        batch,
        &mut swept.reconcile_rejected,
    )
    .await?;
    while let Some(n) = delete_import_rows(db, before(now, rules.run_details), batch).await? {
        swept.import_rows += n;
    }
    Ok(())
}

/// The ids of up to `batch` rows matching `condition`, oldest first.
async fn oldest<E: EntityTrait>(
    db: &Store,
    id: E::Column,
    condition: &Condition,
    batch: u64,
) -> Result<Vec<i64>, DbErr> {
    E::find()
        .select_only()
        .column(id)
        .filter(condition.clone())
        .order_by_asc(id)
        .limit(batch)
        .into_tuple()
        .all(db)
        .await
}

/// Deletes every row matching `condition`, `batch` rows per statement (the
/// condition is checked again by each delete), adding each to `deleted`.
async fn delete_all<E: EntityTrait>(
    db: &Store,
    id: E::Column,
    condition: &Condition,
    batch: u64,
    deleted: &mut u64,
) -> Result<(), crate::Error> {
    loop {
        let ids = oldest::<E>(db, id, condition, batch).await?;
        if ids.is_empty() {
            return Ok(());
        }
        let taken = ids.len() as u64;
        let txn = db.begin_write().await?;
        *deleted += E::delete_many()
            .filter(id.is_in(ids))
            .filter(condition.clone())
            .exec(&txn)
            .await?
            .rows_affected;
        txn.commit().await?;
        if taken < batch {
            return Ok(());
        }
    }
}

/// Deletes fanned-out events created before `cutoff` whose every delivery
/// is `delivered`, deliveries first; returns (events, deliveries).
async fn delete_delivered_outbox(
    db: &Store,
    cutoff: DateTime<Utc>,
    batch: u64,
) -> Result<(u64, u64), crate::Error> {
    let unsent = Query::select()
        .column(outbox_delivery::Column::OutboxEventId)
        .from(outbox_delivery::Entity)
        .and_where(outbox_delivery::Column::State.ne(crate::outbound::delivery::DELIVERED))
        .to_owned();
    let old = Condition::all()
        .add(outbox_event::Column::State.eq(outbox::DISPATCHED))
        .add(outbox_event::Column::CreatedAt.lt(cutoff))
        .add(outbox_event::Column::Id.not_in_subquery(unsent.clone()));
    let ids = oldest::<outbox_event::Entity>(db, outbox_event::Column::Id, &old, batch).await?;
    if ids.is_empty() {
        return Ok((0, 0));
    }
    let txn = db.begin_write().await?;
    // Guarded again inside the transaction: a delivery retried by ops since
    // the ids were read keeps its event.
    let ids: Vec<i64> = outbox_event::Entity::find()
        .select_only()
        .column(outbox_event::Column::Id)
        .filter(outbox_event::Column::Id.is_in(ids))
        .filter(outbox_event::Column::Id.not_in_subquery(unsent))
        .into_tuple()
        .all(&txn)
        .await?;
    let deliveries = outbox_delivery::Entity::delete_many()
        .filter(outbox_delivery::Column::OutboxEventId.is_in(ids.clone()))
        .filter(outbox_delivery::Column::State.eq(crate::outbound::delivery::DELIVERED))
        .exec(&txn)
        .await?
        .rows_affected;
    let events = outbox_event::Entity::delete_many()
        .filter(outbox_event::Column::Id.is_in(ids))
        .exec(&txn)
        .await?
        .rows_affected;
    txn.commit().await?;
    Ok((events, deliveries))
}

/// Deletes up to `batch` report rows of one finished run that ended before
/// `cutoff`; `None` when no such run has rows left.
async fn delete_import_rows(
    db: &Store,
    cutoff: DateTime<Utc>,
    batch: u64,
) -> Result<Option<u64>, crate::Error> {
    let with_rows = Query::select()
        .column(import_row::Column::RunId)
        .from(import_row::Entity)
        .to_owned();
    let run: Option<i64> = import_run::Entity::find()
        .select_only()
        .column(import_run::Column::Id)
        .filter(import_run::Column::State.ne(crate::import::STATE_RUNNING))
        .filter(import_run::Column::FinishedAt.lt(cutoff))
        .filter(import_run::Column::Id.in_subquery(with_rows))
        .order_by_asc(import_run::Column::Id)
        .into_tuple()
        .one(db)
        .await?;
    let Some(run) = run else {
        return Ok(None);
    };
    let last: Option<i64> = import_row::Entity::find()
        .select_only()
        .column(import_row::Column::RowNumber)
        .filter(import_row::Column::RunId.eq(run))
        .order_by_asc(import_row::Column::RowNumber)
        .offset(batch - 1)
        .into_tuple()
        .one(db)
        .await?;
    let mut delete = import_row::Entity::delete_many().filter(import_row::Column::RunId.eq(run));
    if let Some(last) = last {
        delete = delete.filter(import_row::Column::RowNumber.lte(last));
    }
    let txn = db.begin_write().await?;
    let deleted = delete.exec(&txn).await?.rows_affected;
    txn.commit().await?;
    Ok(Some(deleted))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dedup_rows_outlive_a_week_and_their_bodies() {
        assert_eq!(RetentionRules::default().validate(), Ok(()));
        let short = RetentionRules {
            inbox_event: Duration::from_secs(6 * DAY),
            inbox_body: Duration::from_secs(DAY),
            ..RetentionRules::default()
        };
        assert!(short.validate().unwrap_err().contains("at least 7 days"));
        let shorter_than_bodies = RetentionRules {
            inbox_event: MIN_DEDUP,
            ..RetentionRules::default()
        };
        assert!(
            shorter_than_bodies
                .validate()
                .unwrap_err()
                .contains("body retention")
        );
    }
}
