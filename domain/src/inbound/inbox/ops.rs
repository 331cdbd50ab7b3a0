//! What ops do with the inbox: look, and send events back for processing. A
//! retry reprocesses the SAME row — same source and event id, through the
//! same natural-key upsert — so it can never create a second lead. An event
//! whose body was erased (with its person, or at the end of its retention)
//! has nothing left to process and is never sent back.

use crate::page::{self, IdWindow, Page};
use crate::store::{Store, Work};
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::InboxState;
use super::batch::{Settled, apply_batch};
use super::process::{Applied, FailureRecorded, ProcessError, record_failure};
use crate::entities::inbox_event::{self, Column, Model};
use crate::error::Error;
use crate::retry::RetryPolicy;

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

/// Newest first.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &InboxFilter,
    window: IdWindow,
) -> Result<Page<Model>, Error> {
    let query = inbox_event::Entity::find().filter(filter.condition());
    page::fetch_by_id(conn, query, Column::Id, window, |e| e.id).await
}

pub async fn get<C: ConnectionTrait>(conn: &C, id: i64) -> Result<Option<Model>, Error> {
    Ok(inbox_event::Entity::find_by_id(id).one(conn).await?)
}

/// Sends one event back to `received` with a fresh budget of attempts: the
/// workers' next pass claims it like a new event. An event whose body was erased is refused
/// (`InboxEventErased`) and left as it is: processed again, it could only
/// fail and end `dead`, a false alarm.
pub async fn retry<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    now: DateTime<Utc>,
) -> Result<Model, Error> {
    let reset = reset_for_retry(now, None)
        .filter(Column::Id.eq(id))
        .filter(retryable())
        .filter(holds_body())
        .exec_with_returning(conn)
        .await?;
    if let Some(event) = reset.into_iter().next() {
        return Ok(event);
    }
    match get(conn, id).await? {
        None => Err(Error::NotFound),
        Some(event) if event.body.is_empty() => Err(Error::InboxEventErased { id }),
        Some(event) => Err(Error::Conflict(format!(
            "event {id} is {}; only failed, dead, skipped or processed events can be retried",
            event.state
        ))),
    }
}

/// What a bulk retry takes: events matching `filter` (any retryable state
/// when it names none). `processed` events carry payloads already applied,
/// possibly older than what the lead holds now, so they are taken only when
/// `include_processed` says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkRetryRequest {
    pub filter: InboxFilter,
    pub include_processed: bool,
    /// Only count what would be re-applied.
    pub dry_run: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkRetry {
    /// Events matching the request, erased ones aside.
    pub matched: u64,
    /// Events matching the request whose body was erased: skipped, and left
    /// as they are (nothing is left to process).
    pub skipped_erased: u64,
    /// The matched events by their state before the retry.
    pub by_state: BTreeMap<String, u64>,
    /// Events re-applied (none on a dry run).
    pub retried: u64,
    /// What re-applying came to, by the event's new state: `processed`,
    /// `skipped`, `failed` (retried later by the workers) or `dead`.
    pub results: BTreeMap<String, u64>,
}

/// Who re-applies events in a bulk retry, as `locked_by` shows it.
pub const BULK_RETRY_WORKER: &str = "ops-bulk-retry";

/// Re-applies every event matching the request, one at a time in the order
/// they were received (`received_at`, then id). Applying them here rather
/// than through the concurrent job queue is what keeps two events for one
/// lead in their original order: the later one ends up on the lead. Each
/// event is reset, claimed and applied through the same steps as a job, so a
/// retry still cannot create a second lead.
pub async fn retry_matching(
    db: &Store,
    request: &BulkRetryRequest,
    policy: &RetryPolicy,
) -> Result<BulkRetry, Error> {
    let states = retry_states(request)?;
    let in_states = request
        .filter
        .condition()
        .add(Column::State.is_in(states.iter().map(|s| s.as_str())));
    let skipped_erased = inbox_event::Entity::find()
        .filter(in_states.clone())
        .filter(holds_body().not())
        .count(db)
        .await?;
    let condition = in_states.add(holds_body());
    let mut by_state = BTreeMap::new();
    let counted: Vec<(String, i64)> = inbox_event::Entity::find()
        .select_only()
        .column(Column::State)
        .column_as(Column::Id.count(), "n")
        .filter(condition.clone())
        .group_by(Column::State)
        .into_tuple()
        .all(db)
        .await?;
    for (state, n) in counted {
        by_state.insert(state, u64::try_from(n).unwrap_or(0));
    }
    let mut done = BulkRetry {
        matched: by_state.values().sum(),
        skipped_erased,
        by_state,
        ..Default::default()
    };
    if request.dry_run {
        return Ok(done);
    }
    // Ids only, taken up front: an event that fails again may match the
    // filter again, and must not be re-applied twice in one retry.
    let ids: Vec<i64> = inbox_event::Entity::find()
        .select_only()
        .column(Column::Id)
        .filter(condition)
        .order_by_asc(Column::ReceivedAt)
        .order_by_asc(Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    let allowed: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    for id in ids {
        let now = crate::clock::now();
        // Reset and claimed in one statement, so a worker woken meanwhile
        // cannot take the event between the two; and only while it is still
        // in a state the request takes and holds its body: a job may have
        // finished it, or an erasure emptied it, meanwhile.
        let claimed = reset_for_retry(now, Some(BULK_RETRY_WORKER))
            .filter(Column::Id.eq(id))
            .filter(Column::State.is_in(allowed.clone()))
            .filter(holds_body())
            .exec_with_returning(db)
            .await?;
        let Some(event) = claimed.into_iter().next() else {
            continue;
        };
        done.retried += 1;
        // The workers' batch path, for a batch of one: one way to apply an
        // event. A batch that fails whole is a transient failure, recorded
        // as the workers record it.
        let settled = match apply_batch(db, std::slice::from_ref(&event), policy).await {
            Ok((mut settled, _)) => settled.pop(),
            Err(error) => {
                // Transient whatever failed; `Error::Db` reads "database error: …".
                let error = ProcessError::Transient(error.to_string());
                let recorded = record_failure(db, db.hasher(), &event, &error, policy, now).await?;
                Some(Settled {
                    id: event.id,
                    source: event.source.clone(),
                    result: Err(error),
                    recorded: Some(recorded),
                })
            }
        };
        let result = match settled.map(|s| (s.result, s.recorded)) {
            Some((Ok(Applied::Processed { .. }), _)) => InboxState::Processed.as_str(),
            Some((Ok(Applied::Skipped), _)) => InboxState::Skipped.as_str(),
            Some((Err(_), Some(FailureRecorded::RetryAt(_)))) => InboxState::Failed.as_str(),
            Some((Err(_), Some(FailureRecorded::Dead))) => InboxState::Dead.as_str(),
            _ => "lost_claim",
        };
        *done.results.entry(result.to_owned()).or_default() += 1;
    }
    if done.results.contains_key(InboxState::Processed.as_str()) {
        // Re-applied here and now: the leads they wrote wait for processing.
        db.enqueued(Work::Leads);
    }
    Ok(done)
}

/// What to tell the operator when processed events are (or would be)
/// re-applied; `None` when none matched.
pub fn historic_note(done: &BulkRetry, dry_run: bool) -> Option<String> {
    let processed = done
        .by_state
        .get(InboxState::Processed.as_str())
        .copied()
        .unwrap_or(0);
    (processed > 0).then(|| {
        format!(
            "{processed} processed event(s) {} historic payloads: a payload without a newer \
             source_updated_at overwrites what the lead holds now",
            if dry_run {
                "would re-apply"
            } else {
                "re-applied"
            }
        )
    })
}

fn retry_states(request: &BulkRetryRequest) -> Result<Vec<InboxState>, Error> {
    let states: Vec<InboxState> = match request.filter.state {
        Some(state) if !InboxState::RETRYABLE.contains(&state) => {
            return Err(Error::invalid(
                "state",
                "must be one a bulk retry can take: failed, dead, skipped or processed",
            ));
        }
        Some(state) => vec![state],
        None => InboxState::RETRYABLE
            .into_iter()
            .filter(|s| *s != InboxState::Processed || request.include_processed)
            .collect(),
    };
    if states.contains(&InboxState::Processed) && !request.include_processed {
        return Err(Error::invalid(
            "include_processed",
            "must be true to retry processed events: they re-apply historic payloads, \
             which may be older than what the lead holds now",
        ));
    }
    Ok(states)
}

fn retryable() -> Condition {
    Condition::all().add(Column::State.is_in(InboxState::RETRYABLE.map(InboxState::as_str)))
}

/// The event still holds its body: erasure (and retention) empty it and keep
/// the row, and an empty body has nothing to process.
fn holds_body() -> Condition {
    Condition::all().add(Expr::expr(Func::cust("LENGTH").arg(Expr::col(Column::Body))).gt(0))
}

/// A fresh budget: back to `received` for the workers, or (`claim_by`)
/// straight to `processing` under that claimant, its first attempt counted.
fn reset_for_retry(
    now: DateTime<Utc>,
    claim_by: Option<&str>,
) -> sea_orm::UpdateMany<inbox_event::Entity> {
    let state = match claim_by {
        Some(_) => InboxState::Processing,
        None => InboxState::Received,
    };
    inbox_event::Entity::update_many()
        .col_expr(Column::State, Expr::value(state.as_str()))
        .col_expr(Column::Attempts, Expr::value(i32::from(claim_by.is_some())))
        .col_expr(Column::Retries, Expr::col(Column::Retries).add(1))
        .col_expr(
            Column::NextAttemptAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(Column::EnqueuedAt, Expr::value(now))
        .col_expr(Column::LockedAt, Expr::value(claim_by.map(|_| now)))
        .col_expr(Column::LockedBy, Expr::value(claim_by.map(str::to_owned)))
        .col_expr(Column::UpdatedAt, Expr::value(now))
}
