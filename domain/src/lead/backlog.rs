//! The lead-processing backlog, worked through in batches: a worker claims up
//! to N leads whose current version is unprocessed in one statement (`FOR
//! UPDATE SKIP LOCKED` on PostgreSQL, so any number of workers share it and
//! none takes a lead twice; on SQLite inside the process's write turn), does
//! their work (`processing`) and marks them processed in one transaction.
//!
//! Like the inbox, a bad lead never fails its batch: should the batch fail,
//! it is redone one savepoint per lead, and each failing lead records its
//! failure in `lead_processing_failure` with the inbox's classification and
//! backoff (`retry`): retried after a jittered delay, `dead` with its reason
//! when the error is permanent or the attempts run out. A dead version stays
//! out of the backlog until the lead changes again.

use crate::store::Store;
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};

use crate::db::BatchPath;
use crate::entities::lead;
use crate::entities::lead_processing_failure::{self as failure, Column as F};
use crate::error::Error;
use crate::lead::processing::{
    latest_correlation_ids, lock_pools, mark_processed, may_have_duplicates, work_on,
};
use crate::retry::{Decision, ProcessError, RetryPolicy};
use crate::routing::router::Router;
use crate::routing::waiting;

/// Failure states.
pub const FAILED: &str = "failed";
pub const DEAD: &str = "dead";

/// One lead of a batch: processed, or failed with what was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub lead_id: i64,
    pub result: Result<(), ProcessError>,
    /// For a failure: its retry time, or dead with the reason kept.
    pub decision: Option<Decision>,
}

/// What one batch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub settled: Vec<Settled>,
    pub path: BatchPath,
}

impl Batch {
    /// Leads taken from the backlog.
    pub fn taken(&self) -> usize {
        self.settled.len()
    }
}

/// The leads a worker may take at `now`: the current version unprocessed,
/// not given up at this version, and no retry pending after `now` (`None`:
/// whatever their retry time).
fn waiting(now: Option<DateTime<Utc>>) -> Condition {
    let mut held_back = Condition::any().add(
        Condition::all()
            .add(Expr::col((failure::Entity, F::State)).eq(DEAD))
            .add(
                Expr::col((failure::Entity, F::Version))
                    .equals((lead::Entity, lead::Column::Version)),
            ),
    );
    if let Some(now) = now {
        held_back = held_back.add(
            Condition::all()
                .add(Expr::col((failure::Entity, F::State)).eq(FAILED))
                .add(Expr::col((failure::Entity, F::NextAttemptAt)).gt(now)),
        );
    }
    let held_back = Query::select()
        .expr(Expr::val(1))
        .from(failure::Entity)
        .and_where(Expr::col((failure::Entity, F::LeadId)).equals((lead::Entity, lead::Column::Id)))
        .cond_where(held_back)
        .to_owned();
    Condition::all()
        // The partial index `lead_unprocessed_idx`'s predicate.
        .add(
            Expr::col((lead::Entity, lead::Column::ProcessedVersion))
                .lt(Expr::col((lead::Entity, lead::Column::Version))),
        )
        .add(Expr::exists(held_back).not())
}

/// Claims up to `limit` waiting leads, processes them and records every
/// outcome in one transaction. An `Err` is the database failing outside any
/// one lead (begin, claim, commit): nothing was recorded and the leads stay
/// in the backlog.
pub async fn process_batch(
    db: &Store,
    limit: u64,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Batch, Error> {
    process_claimed(db, waiting(Some(now)), limit, policy, now).await
}

/// The leads an ops retry may take: unprocessed, with a failure recorded in
/// one of `states` (whatever its version: a dead version of a lead that has
/// changed since is waiting anyway).
pub(crate) fn retryable(states: &[&str]) -> Condition {
    let failed = Query::select()
        .expr(Expr::val(1))
        .from(failure::Entity)
        .and_where(Expr::col((failure::Entity, F::LeadId)).equals((lead::Entity, lead::Column::Id)))
        .and_where(Expr::col((failure::Entity, F::State)).is_in(states.iter().copied()))
        .to_owned();
    Condition::all()
        .add(
            Expr::col((lead::Entity, lead::Column::ProcessedVersion))
                .lt(Expr::col((lead::Entity, lead::Column::Version))),
        )
        .add(Expr::exists(failed))
}

/// Claims up to `limit` leads matching `claimable` and processes them: the
/// claim is the one statement that takes a lead (row locks skipped on
/// PostgreSQL, the write turn on SQLite), so whoever claims — a worker's
/// batch or an ops retry — a lead is processed once.
pub(crate) async fn process_claimed(
    db: &Store,
    claimable: Condition,
    limit: u64,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Batch, Error> {
    let txn = db.begin_write().await?;
    let mut claim = lead::Entity::find()
        .filter(claimable)
        .order_by_asc(lead::Column::Id)
        .limit(limit);
    db.dialect()
        .lock_claim_candidates(QuerySelect::query(&mut claim));
    let leads = claim.all(&txn).await?;
    if leads.is_empty() {
        txn.commit().await?;
        return Ok(Batch {
            settled: Vec::new(),
            path: BatchPath::Whole,
        });
    }
    let ids: Vec<i64> = leads.iter().map(|l| l.id).collect();
    let router = Router::load(&txn).await?;
    lock_pools(&txn, &router.pools_to_lock(&leads)).await?;
    let waits = waiting::among(&txn, &ids).await?;
    let correlations = latest_correlation_ids(&txn, &ids).await?;
    let correlation = |id: i64| correlations.get(&id).cloned().flatten();
    let shared = may_have_duplicates(&txn, &leads).await?;

    // The whole batch under one savepoint; the split path only if it fails.
    let whole = txn.begin().await?;
    let mut written = Ok(());
    for lead in &leads {
        written = work_on(
            &whole,
            lead,
            &correlation(lead.id),
            &router,
            shared.contains(&lead.id),
            waits.contains(&lead.id),
        )
        .await
        .map(|_| ());
        if written.is_err() {
            break;
        }
    }
    if written.is_ok() {
        written = mark_processed(&whole, &ids).await;
    }
    let (results, path) = if written.is_ok() {
        whole.commit().await?;
        (vec![Ok(()); leads.len()], BatchPath::Whole)
    } else {
        whole.rollback().await?;
        let mut results = Vec::with_capacity(leads.len());
        for lead in &leads {
            let one = txn.begin().await?;
            let correlation_id = correlation(lead.id);
            let shared = shared.contains(&lead.id);
            let waits = waits.contains(&lead.id);
            let worked = work_on(&one, lead, &correlation_id, &router, shared, waits).await;
            let done = match worked {
                Ok(_) => mark_processed(&one, &[lead.id]).await,
                Err(error) => Err(error),
            };
            match done {
                Ok(()) => {
                    one.commit().await?;
                    results.push(Ok(()));
                }
                Err(error) => {
                    one.rollback().await?;
                    results.push(Err(ProcessError::from(error)));
                }
            }
        }
        (results, BatchPath::Split)
    };

    let done: Vec<i64> = leads
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.is_ok())
        .map(|(l, _)| l.id)
        .collect();
    if !done.is_empty() {
        // A processed lead has nothing left to retry or give up on.
        failure::Entity::delete_many()
            .filter(F::LeadId.is_in(done))
            .exec(&txn)
            .await?;
    }
    let mut settled = Vec::with_capacity(leads.len());
    for (lead, result) in leads.iter().zip(results) {
        let decision = match &result {
            Err(error) => Some(record_failure(&txn, lead, error, policy, now).await?),
            Ok(()) => None,
        };
        settled.push(Settled {
            lead_id: lead.id,
            result,
            decision,
        });
    }
    txn.commit().await?;
    Ok(Batch { settled, path })
}

/// What a failure row records beside its lead.
const KEPT: [F; 6] = [
    F::Version,
    F::State,
    F::Attempts,
    F::LastError,
    F::NextAttemptAt,
    F::UpdatedAt,
];

/// Counts a failed attempt at the lead's current version (a newer version
/// starts again at one) and decides its retry or its death.
async fn record_failure<C: ConnectionTrait>(
    conn: &C,
    lead: &lead::Model,
    error: &ProcessError,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<Decision, DbErr> {
    let before = failure::Entity::find_by_id(lead.id).one(conn).await?;
    let attempts = match before {
        Some(f) if f.version == lead.version && f.state == FAILED => f.attempts.saturating_add(1),
        _ => 1,
    };
    let decision = policy.decide(error, u32::try_from(attempts).unwrap_or(0), now);
    let (state, last_error, next_attempt_at) = match &decision {
        Decision::RetryAt(at) => (FAILED, error.to_string(), Some(*at)),
        Decision::Dead(reason) => (DEAD, reason.clone(), None),
    };
    let mut upsert = Query::insert();
    upsert
        .into_table(failure::Entity)
        .columns([F::LeadId].into_iter().chain(KEPT))
        .values([
            lead.id.into(),
            lead.version.into(),
            state.into(),
            attempts.into(),
            last_error.into(),
            next_attempt_at.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(
            OnConflict::column(F::LeadId)
                .update_columns(KEPT)
                .to_owned(),
        );
    conn.execute(&upsert).await?;
    Ok(decision)
}

/// The backlog at a glance, for ops.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Leads waiting to be processed (those waiting for a retry included).
    pub backlog: i64,
    /// Leads whose last attempt failed and will be retried.
    pub failed: i64,
    /// Lead versions given up.
    pub dead: i64,
    /// When the longest-waiting lead changed.
    pub oldest: Option<DateTime<Utc>>,
}

pub async fn counts<C: ConnectionTrait>(conn: &C) -> Result<Counts, Error> {
    let (backlog, oldest): (i64, Option<DateTime<Utc>>) = lead::Entity::find()
        .select_only()
        .column_as(Expr::col(lead::Column::Id).count(), "n")
        .column_as(Expr::col(lead::Column::UpdatedAt).min(), "oldest")
        .filter(waiting(None))
        .into_tuple()
        .one(conn)
        .await?
        .unwrap_or((0, None));
    let by_state: Vec<(String, i64)> = failure::Entity::find()
        .select_only()
        .column(F::State)
        .column_as(Expr::col(F::LeadId).count(), "n")
        .group_by(F::State)
        .into_tuple()
        .all(conn)
        .await?;
    let in_state = |state: &str| {
        by_state
            .iter()
            .find(|(s, _)| s == state)
            .map_or(0, |(_, n)| *n)
    };
    Ok(Counts {
        backlog,
        failed: in_state(FAILED),
        dead: in_state(DEAD),
        oldest,
    })
}
