//! What ops do with lead processing that failed: look, and send leads back
//! for processing. A retry claims the lead through the same statement as a
//! worker's batch (reset and claim are one step: the failure row changes
//! only in the claiming transaction), so two retries at once, or a retry
//! and a worker, process it once: one set of activities and outbox events.

use crate::page::{self, IdWindow, Page};
use crate::store::Store;
use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::backlog::{Batch, DEAD, FAILED, process_claimed, retryable};
use crate::entities::lead;
use crate::entities::lead_processing_failure::{self as failure, Column as F, Model};
use crate::error::Error;
use crate::retry::{Decision, RetryPolicy};

/// The failure states, as the list filters them.
pub const STATES: [&str; 2] = [FAILED, DEAD];

/// Leads a bulk retry takes at most when the request names no limit, and
/// the most it may name: each is processed before the answer.
pub const DEFAULT_RETRY_LIMIT: u64 = 100;
pub const MAX_RETRY_LIMIT: u64 = 1000;

/// Leads claimed per transaction in a bulk retry, as a worker's batch.
const RETRY_BATCH: usize = 50;

/// Checks a state filter: `failed` or `dead`.
pub fn parse_state(state: &str) -> Result<&'static str, Error> {
    STATES
        .into_iter()
        .find(|s| *s == state)
        .ok_or_else(|| Error::invalid("state", "must be one of failed, dead"))
}

/// Failures by lead id, newest lead first (the window's `before` is a lead
/// id).
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    state: Option<&str>,
    window: IdWindow,
) -> Result<Page<Model>, Error> {
    let mut query = failure::Entity::find();
    if let Some(state) = state {
        query = query.filter(F::State.eq(state));
    }
    page::fetch_by_id(conn, query, F::LeadId, window, |f| f.lead_id).await
}

/// What a retry matched and what processing the leads came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryReport {
    /// Leads with a failure in the states asked for (a bulk retry takes at
    /// most its limit of them).
    pub matched: u64,
    /// Leads processed again (none on a dry run).
    pub retried: u64,
    /// The retried leads by outcome: `processed`, `failed` (the workers
    /// retry it later) or `dead`.
    pub results: BTreeMap<String, u64>,
    /// The batches processed, for the workers' metrics.
    pub batches: Vec<Batch>,
}

impl RetryReport {
    fn add(&mut self, batch: Batch) {
        self.retried += batch.taken() as u64;
        for settled in &batch.settled {
            let outcome = match &settled.decision {
                None => "processed",
                Some(Decision::RetryAt(_)) => FAILED,
                Some(Decision::Dead(_)) => DEAD,
            };
            *self.results.entry(outcome.to_owned()).or_default() += 1;
        }
        self.batches.push(batch);
    }
}

/// Processes one lead whose processing failed (`failed` or `dead`) now,
/// with a fresh budget of attempts. `NotFound` for no such lead,
/// `Conflict` when it has no failure to retry: processed meanwhile (by a
/// worker or another retry), or being processed right now.
pub async fn retry_one(
    db: &Store,
    lead_id: i64,
    policy: &RetryPolicy,
    now: DateTime<Utc>,
) -> Result<RetryReport, Error> {
    let claimable = retryable(&STATES).add(lead::Column::Id.eq(lead_id));
    let batch = process_claimed(db, claimable, 1, policy, now).await?;
    if batch.taken() == 1 {
        let mut report = RetryReport {
            matched: 1,
            ..Default::default()
        };
        report.add(batch);
        return Ok(report);
    }
    if lead::Entity::find_by_id(lead_id).one(db).await?.is_none() {
        return Err(Error::NotFound);
    }
    Err(Error::Conflict(format!(
        "lead {lead_id} has no failed or dead processing to retry \
         (processed, or being processed now)"
    )))
}

/// What a bulk retry takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkRetryRequest {
    /// `dead` (the default) or `failed` (its retry brought forward).
    pub state: &'static str,
    /// At most this many leads, lowest id first.
    pub limit: u64,
    /// Only count them.
    pub dry_run: bool,
}

impl Default for BulkRetryRequest {
    fn default() -> Self {
        Self {
            state: DEAD,
            limit: DEFAULT_RETRY_LIMIT,
            dry_run: false,
        }
    }
}

/// Processes up to `limit` leads whose processing is in `state`, in batches
/// claimed like a worker's. Ids are taken up front, so a lead that dies
/// again is not retried twice in one request.
pub async fn retry_matching(
    db: &Store,
    request: &BulkRetryRequest,
    policy: &RetryPolicy,
) -> Result<RetryReport, Error> {
    if !(1..=MAX_RETRY_LIMIT).contains(&request.limit) {
        return Err(Error::invalid(
            "limit",
            &format!("must be between 1 and {MAX_RETRY_LIMIT}"),
        ));
    }
    let states = [request.state];
    let matching = || lead::Entity::find().filter(retryable(&states));
    let mut report = RetryReport {
        matched: matching().count(db).await?,
        ..Default::default()
    };
    if request.dry_run {
        return Ok(report);
    }
    let ids: Vec<i64> = matching()
        .select_only()
        .column(lead::Column::Id)
        .order_by_asc(lead::Column::Id)
        .limit(request.limit)
        .into_tuple()
        .all(db)
        .await?;
    for chunk in ids.chunks(RETRY_BATCH) {
        let claimable: Condition =
            retryable(&states).add(lead::Column::Id.is_in(chunk.iter().copied()));
        let batch = process_claimed(
            db,
            claimable,
            chunk.len() as u64,
            policy,
            crate::clock::now(),
        )
        .await?;
        report.add(batch);
    }
    Ok(report)
}
