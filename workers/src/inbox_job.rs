//! Inbox processing: batches taken by the passes of this process's apalis
//! inbox drain (`crate::drain_backend`), woken by a stored or re-queued
//! event and polling as the fallback. A pass claims every claimable event:
//! new ones, failed ones whose retry is due, and ones whose lease ran out
//! (their worker died). Also one attempt at one event, for callers that
//! name it.

use domain::store::Store;
use std::sync::Arc;

use apalis::prelude::{BoxDynError, Data};
use chrono::{DateTime, Utc};
use domain::entities::inbox_event;
use domain::inbound::inbox::batch::{Settled, apply_batch, claim_batch};
use domain::inbound::inbox::process::{
    Applied, FailureRecorded, ProcessError, claim, record_failure,
};
use domain::lead::ingest::Outcome;
use futures::future::{BoxFuture, FutureExt};
use tracing::Instrument;

use crate::settings::WorkerSettings;

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not claimable: already done, in another worker's hands, or not due.
    NothingToDo,
    Processed {
        outcome: Outcome,
        /// `None` when `suppressed`: the key was erased, no lead.
        lead_id: Option<i64>,
    },
    Skipped,
    RetryScheduled(DateTime<Utc>),
    Dead(String),
    /// The lease ran out and another worker took the event over.
    LostClaim,
}

pub struct InboxProcessor {
    db: Store,
    settings: WorkerSettings,
    /// Recorded as `locked_by` on the events this process holds.
    worker: String,
}

impl InboxProcessor {
    pub fn new(db: Store, settings: WorkerSettings, worker: String) -> Self {
        Self {
            db,
            settings,
            worker,
        }
    }

    /// One attempt at event `id`. Errors are the database failing while
    /// claiming or recording; the event then stays as it was, and a pass
    /// claims it again once it is due or its lease has run out.
    pub async fn process(&self, id: i64) -> Result<Step, domain::Error> {
        let lease = self.settings.lease;
        let Some(event) = claim(&self.db, id, &self.worker, Utc::now(), lease).await? else {
            tracing::debug!(inbox_event_id = id, "nothing to do for inbox event");
            return Ok(Step::NothingToDo);
        };
        // The batch path, for a batch of one: one way to apply an event.
        let mut steps = self.apply_claimed(std::slice::from_ref(&event)).await?;
        Ok(steps.pop().unwrap_or(Step::NothingToDo))
    }

    /// Claims up to a batch of ready events and applies them in one
    /// transaction; returns how many it claimed (0: nothing is ready).
    pub async fn drain_once(&self) -> Result<usize, domain::Error> {
        let events = self.claim_batch().await?;
        if !events.is_empty() {
            self.apply_claimed(&events).await?;
        }
        Ok(events.len())
    }

    /// Claims up to a batch of ready events for this worker, under its lease.
    async fn claim_batch(&self) -> Result<Vec<inbox_event::Model>, domain::Error> {
        let lease = self.settings.lease;
        let limit = self.settings.batch_size as u64;
        claim_batch(&self.db, &self.worker, Utc::now(), lease, limit).await
    }

    /// Applies claimed `events` in one transaction and records every
    /// outcome, one step per event; the leads it wrote wake the lead drain
    /// by their commit.
    async fn apply_claimed(
        &self,
        events: &[inbox_event::Model],
    ) -> Result<Vec<Step>, domain::Error> {
        let span = tracing::info_span!(
            "inbox.batch",
            size = events.len(),
            path = tracing::field::Empty
        );
        async {
            let timeout = self.settings.attempt_timeout;
            let retry = &self.settings.retry;
            match tokio::time::timeout(timeout, apply_batch(&self.db, events, retry)).await {
                Ok(Ok((settled, path))) => {
                    tracing::Span::current().record("path", path.as_str());
                    metrics::counter!("leadpipe_inbox_batches_total", "path" => path.as_str())
                        .increment(1);
                    metrics::histogram!("leadpipe_inbox_batch_size").record(events.len() as f64);
                    Ok(settled.into_iter().map(|done| self.report(done)).collect())
                }
                // Nothing of the batch committed: every event counts a
                // transient failure and is retried with backoff.
                failed => {
                    let reason = match failed {
                        // `domain::Error::Db` reads "database error: …".
                        Ok(Err(error)) => error.to_string(),
                        _ => format!("attempt timed out after {} ms", timeout.as_millis()),
                    };
                    let error = ProcessError::Transient(reason);
                    let mut steps = Vec::with_capacity(events.len());
                    for event in events {
                        count_attempt(&event.source, &Err(error.clone()));
                        let recorded = record_failure(
                            &self.db,
                            self.db.hasher(),
                            event,
                            &error,
                            retry,
                            Utc::now(),
                        )
                        .await?;
                        steps.push(self.failed(event.id, &event.source, &error, recorded));
                    }
                    Ok(steps)
                }
            }
        }
        .instrument(span)
        .await
    }

    fn report(&self, done: Settled) -> Step {
        count_attempt(&done.source, &done.result);
        match (done.result, done.recorded) {
            (Ok(Applied::Processed { outcome, lead_id }), _) => {
                tracing::debug!(
                    inbox_event_id = done.id,
                    outcome = outcome.as_str(),
                    lead_id,
                    "inbox event processed"
                );
                Step::Processed { outcome, lead_id }
            }
            (Ok(Applied::Skipped), _) => {
                tracing::info!(
                    inbox_event_id = done.id,
                    "inbox event skipped: event type not allowed"
                );
                Step::Skipped
            }
            (Ok(Applied::LostClaim), _) | (Err(_), None) => self.lost_claim(),
            (Err(error), Some(recorded)) => self.failed(done.id, &done.source, &error, recorded),
        }
    }

    /// After a failure was recorded: log the retry (a pass claims the event
    /// once it is due), or count the dead.
    fn failed(
        &self,
        id: i64,
        source: &str,
        error: &ProcessError,
        recorded: FailureRecorded,
    ) -> Step {
        match recorded {
            FailureRecorded::RetryAt(at) => {
                tracing::warn!(inbox_event_id = id, error = %error, retry_at = %at, "inbox event failed; will retry");
                Step::RetryScheduled(at)
            }
            FailureRecorded::Dead => {
                metrics::counter!("leadpipe_inbox_dead_total", "source" => source.to_owned())
                    .increment(1);
                tracing::warn!(inbox_event_id = id, reason = %error, "inbox event is dead");
                Step::Dead(error.to_string())
            }
            FailureRecorded::LostClaim => self.lost_claim(),
        }
    }

    fn lost_claim(&self) -> Step {
        tracing::warn!("lease expired during the attempt; another worker owns the event now");
        Step::LostClaim
    }
}

fn count_attempt(source: &str, result: &Result<Applied, ProcessError>) {
    let label = match result {
        Ok(Applied::Processed { .. }) => "processed",
        Ok(Applied::Skipped) => "skipped",
        Ok(Applied::LostClaim) => "lost_claim",
        Err(ProcessError::Permanent(_)) => "permanent_error",
        Err(ProcessError::Transient(_)) => "transient_error",
    };
    metrics::counter!("leadpipe_inbox_attempts_total", "source" => source.to_owned(), "result" => label)
        .increment(1);
}

/// A pass of the inbox drain worker: claim the next batch of ready events
/// and apply it.
#[derive(Debug, Clone, Copy)]
pub struct InboxPass;

/// The apalis task function of the inbox drain: one batch; returns how many
/// events it took. A pass that claimed events asks for another before it
/// applies them, so a backlog is taken by as many passes at once as the
/// worker's concurrency allows.
///
/// Boxed: the pass runs on a tokio task of its own, and rustc proves its
/// future `Send` only here, where the lifetimes are concrete.
pub(crate) fn run_pass(
    _: InboxPass,
    processor: Data<Arc<InboxProcessor>>,
) -> BoxFuture<'static, Result<usize, BoxDynError>> {
    async move {
        let events = processor.claim_batch().await.map_err(|e| {
            tracing::warn!(error = %e, "claiming an inbox batch failed; the next pass will retry");
            e
        })?;
        if events.is_empty() {
            return Ok(0);
        }
        processor.db.signals().more_inbox_work();
        processor.apply_claimed(&events).await.map_err(|e| {
            // The events keep their claim until the lease runs out; then a
            // pass claims them again.
            tracing::warn!(size = events.len(), error = %e, "recording an inbox batch failed");
            e
        })?;
        // The batch wrote leads and their outbox events: this process's
        // lead drain and publisher look (on SQLite the commit told them).
        processor.db.signals().written_here();
        Ok(events.len())
    }
    .boxed()
}
