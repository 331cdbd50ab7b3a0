//! Processing many inbox events at once. A worker claims up to N ready
//! events in one statement, maps them, and writes all their leads and all
//! their outcomes in one transaction: one commit (one fsync) for the batch
//! instead of several per event.
//!
//! A bad event never fails its batch. Mapping errors are settled before the
//! write. Should the batched write itself fail (a row the database refuses),
//! the batch is written again one event per savepoint, still in one
//! transaction: the good events commit together and each failing one
//! records its own error and takes its retry or dead path.

use crate::natural_key::KeyHasher;
use crate::store::Store;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{CaseStatement, Expr, ExprTrait, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseTransaction, DbErr, EntityTrait, QueryFilter,
    QueryTrait, TransactionTrait,
};

use super::InboxState;
use super::blank_inbox_bodies;
use super::process::{
    Applied, FailureRecorded, Prepared, ProcessError, claimable, context_of, ended, finish,
    finish_ingested, prepare, record_failure,
};
use crate::entities::inbox_event::{self, Column, Model};
use crate::inbound::source::state::held_source_names;
use crate::inbound::source::{self, Source};
use crate::lead::ingest::{IngestItem, Origin, Outcome, ingest_counted_in, ingest_in};
use crate::retry::RetryPolicy;

/// The outcome of one event of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub id: i64,
    pub source: String,
    pub result: Result<Applied, ProcessError>,
    /// For a failure: what was recorded (retry at, dead, or lost claim).
    pub recorded: Option<FailureRecorded>,
}

pub use crate::db::BatchPath;

/// Claims up to `limit` ready events (oldest first) for `worker`, in one
/// statement. On PostgreSQL the candidates are taken `FOR UPDATE SKIP
/// LOCKED`, so workers claiming at once never wait for nor share an event,
/// in a transaction that keeps the walk in index order (`begin_ordered_claim`);
/// on SQLite it runs in this process's write turn (SQLite has one writer
/// anyway). Each returned row counts this attempt in `attempts`.
pub async fn claim_batch(
    db: &Store,
    worker: &str,
    now: DateTime<Utc>,
    lease: Duration,
    limit: u64,
) -> Result<Vec<Model>, crate::Error> {
    let mut candidates = Query::select();
    candidates
        .column(Column::Id)
        .from(inbox_event::Entity)
        // Implies the partial index's predicate, so the planner can use it.
        .and_where(Column::State.is_in(UNFINISHED.map(InboxState::as_str)))
        .cond_where(claimable(now, lease))
        // A paused source's events wait (and do not block the others').
        .and_where(Column::Source.not_in_subquery(held_source_names()))
        .order_by(Column::Id, sea_orm::Order::Asc)
        .limit(limit);
    let dialect = db.dialect();
    dialect.lock_claim_candidates(&mut candidates);
    let mut claim = Query::update();
    claim
        .table(inbox_event::Entity)
        .value(Column::State, InboxState::Processing.as_str())
        .value(Column::Attempts, Expr::col(Column::Attempts).add(1))
        .value(Column::LockedAt, now)
        .value(Column::LockedBy, worker)
        .value(Column::UpdatedAt, now)
        .cond_where(claimable(now, lease))
        .returning_all();
    dialect.update_of_candidates(&mut claim, Column::Id, candidates);
    let txn = db.begin_ordered_claim().await?;
    let mut claimed = inbox_event::Entity::find()
        .from_raw_sql(crate::store::statement(db, &claim))
        .all(&txn)
        .await?;
    txn.commit().await?;
    claimed.sort_by_key(|e| e.id);
    Ok(claimed)
}

/// States in which an event still waits for (or is in) an attempt.
pub const UNFINISHED: [InboxState; 3] = [
    InboxState::Received,
    InboxState::Failed,
    InboxState::Processing,
];

/// Events not yet finished: the backlog the workers have to work through
/// (a paused source's events wait for it, not for the workers).
pub async fn backlog_size(db: &Store) -> Result<u64, crate::Error> {
    use sea_orm::PaginatorTrait;
    Ok(inbox_event::Entity::find()
        .filter(Column::State.is_in(UNFINISHED.map(InboxState::as_str)))
        .filter(Column::Source.not_in_subquery(held_source_names()))
        .count(db)
        .await?)
}

/// Applies claimed events: every lead, timeline and outbox row and every
/// event's outcome commit in one transaction. Returns each event's outcome
/// and how the batch was written. An `Err` is the database failing outside
/// any one event (begin, commit); the events then stay claimed until their
/// lease runs out, or until the caller records the failure.
///
/// `processed_at` (and a retry's schedule) is the time the batch is written,
/// read once this process's write turn is taken: a time read before the
/// claim waited for its turn could precede an event stored meanwhile, and
/// its receipt-to-processed latency come out negative.
pub async fn apply_batch(
    db: &Store,
    events: &[Model],
    policy: &RetryPolicy,
) -> Result<(Vec<Settled>, BatchPath), crate::Error> {
    let mut sources: HashMap<&str, Option<Source>> = HashMap::new();
    for event in events {
        if !sources.contains_key(event.source.as_str()) {
            let found = source::find_without_secrets(db, &event.source).await?;
            sources.insert(event.source.as_str(), found);
        }
    }
    let prepared: Vec<Result<Prepared, ProcessError>> = events
        .iter()
        .map(|e| prepare(sources.get(e.source.as_str()).and_then(Option::as_ref), e))
        .collect();

    let now = Utc::now();
    let txn = db.begin_write().await?;
    match write_whole(&txn, db.hasher(), events, &prepared, now).await {
        Ok(Some(applied)) => {
            let settled = settle(&txn, db.hasher(), events, applied, policy, now).await?;
            txn.commit().await?;
            return Ok((settled, BatchPath::Whole));
        }
        // A lost claim (or a failing row) must not take the others with it.
        Ok(None) | Err(_) => txn.rollback().await?,
    }
    let txn = db.begin_write().await?;
    let applied = write_split(&txn, db.hasher(), events, prepared, now).await?;
    let settled = settle(&txn, db.hasher(), events, applied, policy, now).await?;
    txn.commit().await?;
    Ok((settled, BatchPath::Split))
}

/// One multi-row ingest for every event to ingest; `None` when any claim was
/// lost (the caller rolls back and splits).
async fn write_whole(
    txn: &DatabaseTransaction,
    hasher: &KeyHasher,
    events: &[Model],
    prepared: &[Result<Prepared, ProcessError>],
    now: DateTime<Utc>,
) -> Result<Option<Vec<Result<Applied, ProcessError>>>, crate::Error> {
    let mut items = Vec::new();
    let mut positions = Vec::new();
    for (index, (event, prep)) in events.iter().zip(prepared).enumerate() {
        if let Ok(Prepared::Ingest(new)) = prep {
            items.push(IngestItem {
                new: new.clone(),
                origin: Origin::Webhook,
                ctx: context_of(event),
            });
            positions.push(index);
        }
    }
    let ingested = if items.is_empty() {
        Vec::new()
    } else {
        ingest_counted_in(txn, hasher, &items).await?
    };
    let mut applied: Vec<Result<Applied, ProcessError>> = prepared
        .iter()
        .map(|p| match p {
            Err(error) => Err(error.clone()),
            Ok(_) => Ok(Applied::Skipped),
        })
        .collect();
    let skipped: Vec<usize> = (0..events.len())
        .filter(|&index| matches!(prepared[index], Ok(Prepared::Skip)))
        .collect();
    let ends: Vec<Ending<'_>> = positions
        .iter()
        .zip(&ingested)
        .map(|(&index, done)| Ending {
            event: &events[index],
            state: InboxState::Processed,
            result: Some((done.outcome, done.lead_id)),
        })
        .chain(skipped.iter().map(|&index| Ending {
            event: &events[index],
            state: InboxState::Skipped,
            result: None,
        }))
        .collect();
    let held = finish_many(txn, &ends, now).await?;
    if positions
        .iter()
        .any(|&index| !held.contains(&events[index].id))
    {
        return Ok(None);
    }
    let suppressed: Vec<i64> = positions
        .iter()
        .zip(&ingested)
        .filter(|(_, done)| done.outcome == Outcome::Suppressed)
        .map(|(&index, _)| events[index].id)
        .collect();
    if !suppressed.is_empty() {
        // The people were erased: their data must not stay here either.
        blank_inbox_bodies(txn, Column::Id.is_in(suppressed)).await?;
    }
    for (index, done) in positions.into_iter().zip(ingested) {
        applied[index] = Ok(Applied::Processed {
            outcome: done.outcome,
            lead_id: done.lead_id,
        });
    }
    for index in skipped {
        if !held.contains(&events[index].id) {
            applied[index] = Ok(Applied::LostClaim);
        }
    }
    Ok(Some(applied))
}

/// One successful attempt's end, for [`finish_many`].
struct Ending<'a> {
    event: &'a Model,
    state: InboxState,
    result: Option<(Outcome, Option<i64>)>,
}

/// [`finish`] for many events in one statement; returns the ids whose claim
/// still held. One round trip instead of one per event: while acks keep
/// both cores busy, every round trip waits for one.
async fn finish_many(
    txn: &DatabaseTransaction,
    ends: &[Ending<'_>],
    now: DateTime<Utc>,
) -> Result<HashSet<i64>, DbErr> {
    if ends.is_empty() {
        return Ok(HashSet::new());
    }
    let (mut state, mut outcome, mut lead_id) = (
        CaseStatement::new(),
        CaseStatement::new(),
        CaseStatement::new(),
    );
    // Only the holder of each current claim writes: same attempt, still
    // `processing` (as `finish` checks one row at a time).
    // Ordered, so equal batches send equal SQL (the statement caches).
    let mut by_attempt: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for end in ends {
        let id = end.event.id;
        state = state.case(Column::Id.eq(id), Expr::val(end.state.as_str()));
        outcome = outcome.case(
            Column::Id.eq(id),
            Expr::val(end.result.map(|(o, _)| o.as_str())),
        );
        lead_id = lead_id.case(
            Column::Id.eq(id),
            Expr::val(end.result.and_then(|(_, lead)| lead)),
        );
        by_attempt.entry(end.event.attempts).or_default().push(id);
    }
    let mut owned = Condition::any();
    for (attempts, ids) in by_attempt {
        owned = owned.add(
            Condition::all()
                .add(Column::Attempts.eq(attempts))
                .add(Column::Id.is_in(ids)),
        );
    }
    let mut update = ended(inbox_event::Entity::update_many(), now)
        .col_expr(Column::State, state.into())
        .col_expr(Column::Outcome, outcome.into())
        .col_expr(Column::LeadId, lead_id.into())
        .filter(Column::State.eq(InboxState::Processing.as_str()))
        .filter(owned)
        .into_query();
    update.returning_col(Column::Id);
    let rows = txn.query_all(&update).await?;
    rows.iter()
        .map(|row| row.try_get::<i64>("", "id"))
        .collect()
}

/// Each event under its own savepoint: a failing one is rolled back alone.
async fn write_split(
    txn: &DatabaseTransaction,
    hasher: &KeyHasher,
    events: &[Model],
    prepared: Vec<Result<Prepared, ProcessError>>,
    now: DateTime<Utc>,
) -> Result<Vec<Result<Applied, ProcessError>>, crate::Error> {
    let mut applied = Vec::with_capacity(events.len());
    for (event, prep) in events.iter().zip(prepared) {
        let new = match prep {
            Err(error) => {
                applied.push(Err(error));
                continue;
            }
            Ok(Prepared::Skip) => {
                let done = finish(txn, event, InboxState::Skipped, None, now).await?;
                applied.push(Ok(if done {
                    Applied::Skipped
                } else {
                    Applied::LostClaim
                }));
                continue;
            }
            Ok(Prepared::Ingest(new)) => new,
        };
        let savepoint = txn.begin().await?;
        let written = match ingest_in(
            &savepoint,
            hasher,
            &new,
            Origin::Webhook,
            &context_of(event),
        )
        .await
        {
            Ok(done) => finish_ingested(&savepoint, event, &done, now)
                .await
                .map(|kept| (kept, done)),
            Err(error) => Err(error),
        };
        match written {
            Ok((true, done)) => {
                savepoint.commit().await?;
                applied.push(Ok(Applied::Processed {
                    outcome: done.outcome,
                    lead_id: done.lead_id(),
                }));
            }
            Ok((false, _)) => {
                savepoint.rollback().await?;
                applied.push(Ok(Applied::LostClaim));
            }
            Err(error) => {
                savepoint.rollback().await?;
                applied.push(Err(ProcessError::from(error)));
            }
        }
    }
    Ok(applied)
}

/// Records every failure in the batch's transaction.
async fn settle(
    txn: &DatabaseTransaction,
    hasher: &KeyHasher,
    events: &[Model],
    applied: Vec<Result<Applied, ProcessError>>,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Vec<Settled>, crate::Error> {
    let mut settled = Vec::with_capacity(events.len());
    for (event, result) in events.iter().zip(applied) {
        let recorded = match &result {
            Err(error) => Some(record_failure(txn, hasher, event, error, policy, now).await?),
            Ok(_) => None,
        };
        settled.push(Settled {
            id: event.id,
            source: event.source.clone(),
            result,
            recorded,
        });
    }
    Ok(settled)
}
