//! The inbox job: one attempt at one event — claim, apply under a timeout,
//! record the outcome, and queue the next attempt when a retry is due.

use std::sync::Arc;

use apalis::prelude::{BoxDynError, Data};
use chrono::{DateTime, Utc};
use domain::inbound::inbox::process::{
    Applied, FailureRecorded, ProcessError, apply, claim, record_failure,
};
use domain::lead::ingest::Outcome;
use sea_orm::{DatabaseConnection, DbErr};
use tracing::Instrument;

use crate::queue::{InboxQueue, ProcessInboxEvent};
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
    db: DatabaseConnection,
    queue: InboxQueue,
    settings: WorkerSettings,
    /// Recorded as `locked_by` on the events this process holds.
    worker: String,
}

impl InboxProcessor {
    pub fn new(
        db: DatabaseConnection,
        queue: InboxQueue,
        settings: WorkerSettings,
        worker: String,
    ) -> Self {
        Self {
            db,
            queue,
            settings,
            worker,
        }
    }

    /// One attempt at event `id`. Errors are the database failing while
    /// claiming or recording; the event then stays as it was and the sweeper
    /// re-enqueues it.
    pub async fn process(&self, id: i64) -> Result<Step, DbErr> {
        let lease = self.settings.sweep.lease;
        let Some(event) = claim(&self.db, id, &self.worker, Utc::now(), lease).await? else {
            tracing::debug!(inbox_event_id = id, "nothing to do for inbox event");
            return Ok(Step::NothingToDo);
        };
        let span = tracing::info_span!(
            "inbox.process",
            inbox_event_id = id,
            source = %event.source,
            attempt = event.attempts,
            correlation_id = event.correlation_id.as_deref().unwrap_or(""),
        );
        async move {
            let timeout = self.settings.attempt_timeout;
            let result = tokio::time::timeout(timeout, apply(&self.db, &event))
                .await
                .unwrap_or_else(|_| {
                    Err(ProcessError::Transient(format!(
                        "attempt timed out after {} ms",
                        timeout.as_millis()
                    )))
                });
                        let label = match &result {
                Ok(Applied::Processed { .. }) => "processed",
                Ok(Applied::Skipped) => "skipped",
                Ok(Applied::LostClaim) => "lost_claim",
                Err(ProcessError::Permanent(_)) => "permanent_error",
                Err(ProcessError::Transient(_)) => "transient_error",
            };
            metrics::counter!("leadpipe_inbox_attempts_total", "source" => event.source.clone(), "result" => label)
                .increment(1);
            match result {
                Ok(Applied::Processed { outcome, lead_id }) => {
                    tracing::info!(outcome = outcome.as_str(), lead_id, "inbox event processed");
                    Ok(Step::Processed { outcome, lead_id })
                }
                Ok(Applied::Skipped) => {
                    tracing::info!("inbox event skipped: event type not allowed");
                    Ok(Step::Skipped)
                }
                Ok(Applied::LostClaim) => Ok(self.lost_claim()),
                Err(error) => self.failed(&event, error).await,
            }
        }
        .instrument(span)
        .await
    }

    async fn failed(
        &self,
        event: &domain::entities::inbox_event::Model,
        error: ProcessError,
    ) -> Result<Step, DbErr> {
        let recorded =
            record_failure(&self.db, event, &error, &self.settings.retry, Utc::now()).await?;
        Ok(match recorded {
            FailureRecorded::RetryAt(at) => {
                tracing::warn!(error = %error, retry_at = %at, "inbox event failed; will retry");
                if let Err(push) = self.queue.push(event.id, Some(at)).await {
                    // The event is `failed` with its due time: the sweeper
                    // pushes it once that time has passed.
                    tracing::warn!(error = %push, "could not queue the retry; the sweeper will");
                }
                Step::RetryScheduled(at)
            }
            FailureRecorded::Dead => {
                metrics::counter!("leadpipe_inbox_dead_total", "source" => event.source.clone())
                    .increment(1);
                tracing::warn!(reason = %error, "inbox event is dead");
                Step::Dead(error.to_string())
            }
            FailureRecorded::LostClaim => self.lost_claim(),
        })
    }

    fn lost_claim(&self) -> Step {
        tracing::warn!("lease expired during the attempt; another worker owns the event now");
        Step::LostClaim
    }
}

/// The apalis task function.
pub(crate) async fn run_job(
    job: ProcessInboxEvent,
    processor: Data<Arc<InboxProcessor>>,
) -> Result<(), BoxDynError> {
    processor
        .process(job.inbox_event_id)
        .await
        .map(|_| ())
        .map_err(|e| {
            tracing::warn!(inbox_event_id = job.inbox_event_id, error = %e, "inbox job failed");
            e.into()
        })
}
