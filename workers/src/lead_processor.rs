//! Lead processing (assignment, duplicate hints) for every lead whose current
//! version is unprocessed, in batches (`domain::lead::backlog`). The lead
//! table is the backlog, so a lead is never forgotten even if no wake-up or
//! job reached a worker; several workers may run at once.
//!
//! Driven like the inbox: an apalis drain worker per process
//! (`crate::drain_backend`), woken by every write that leaves leads to
//! process, polling as the fallback. The poll also finds a failed lead whose
//! retry came due: its claim takes every waiting lead whose retry is not in
//! the future, so a retry needs no job of its own.

use domain::store::Store;
use std::sync::Arc;

use apalis::prelude::{BoxDynError, Data};
use chrono::Utc;
use domain::lead::backlog::{Batch, process_batch};
use domain::retry::{Decision, RetryPolicy};
use futures::future::{BoxFuture, FutureExt};
use tracing::Instrument;

use crate::settings::WorkerSettings;

/// Processes one batch of up to `limit` leads with the default retry policy;
/// returns how many it took. For callers without a queue (the tests, by
/// hand): a failed lead's retry is found by the lead drain's next pass.
pub async fn run_once(db: &Store, limit: u64) -> Result<usize, domain::Error> {
    let batch = process_batch(db, limit, &RetryPolicy::default(), Utc::now()).await?;
    report(&batch);
    Ok(batch.taken())
}

pub struct LeadProcessor {
    db: Store,
    settings: WorkerSettings,
}

impl LeadProcessor {
    pub fn new(db: Store, settings: WorkerSettings) -> Self {
        Self { db, settings }
    }

    /// Processes one batch; returns how many leads it took (0: none ready).
    pub async fn drain_once(&self) -> Result<usize, domain::Error> {
        let span = tracing::info_span!("lead.batch", size = tracing::field::Empty);
        async {
            let batch = process_batch(
                &self.db,
                self.settings.batch_size as u64,
                &self.settings.retry,
                Utc::now(),
            )
            .await?;
            tracing::Span::current().record("size", batch.taken());
            report(&batch);
            Ok(batch.taken())
        }
        .instrument(span)
        .await
    }
}

/// Metrics and logs of one batch (a worker's, or an ops retry's).
pub fn report(batch: &Batch) {
    if batch.taken() == 0 {
        return;
    }
    metrics::counter!("leadpipe_leads_processed_total").increment(batch.taken() as u64);
    metrics::counter!("leadpipe_lead_processing_batches_total", "path" => batch.path.as_str())
        .increment(1);
    metrics::histogram!("leadpipe_lead_processing_batch_size").record(batch.taken() as f64);
    for settled in &batch.settled {
        let result = match &settled.result {
            Ok(()) => "processed",
            Err(domain::retry::ProcessError::Permanent(_)) => "permanent_error",
            Err(domain::retry::ProcessError::Transient(_)) => "transient_error",
        };
        metrics::counter!("leadpipe_lead_processing_attempts_total", "result" => result)
            .increment(1);
        match (&settled.result, &settled.decision) {
            (Err(error), Some(Decision::RetryAt(at))) => {
                tracing::warn!(lead_id = settled.lead_id, %error, retry_at = %at, "lead processing failed; will retry");
            }
            (Err(_), Some(Decision::Dead(reason))) => {
                metrics::counter!("leadpipe_lead_processing_dead_total").increment(1);
                tracing::warn!(lead_id = settled.lead_id, %reason, "lead processing is dead");
            }
            _ => {}
        }
    }
}

/// A pass of the lead drain worker: one batch of the backlog. The backlog's
/// claim is inside the transaction that processes it, so the pass claims
/// when it runs, as the inbox's does.
#[derive(Debug, Clone, Copy)]
pub struct BacklogPass;

/// The apalis task function of the lead drain: one batch; returns how many
/// leads it took. A pass that took leads asks for the next.
///
/// Boxed: the pass runs on a tokio task of its own, and rustc proves its
/// future `Send` only here, where the lifetimes are concrete.
pub(crate) fn run_pass(
    _: BacklogPass,
    processor: Data<Arc<LeadProcessor>>,
) -> BoxFuture<'static, Result<usize, BoxDynError>> {
    async move {
        match processor.drain_once().await {
            Ok(taken) => {
                if taken > 0 {
                    // More may wait, and the outbox events written go out.
                    processor.db.signals().written_here();
                }
                Ok(taken)
            }
            Err(error) => {
                tracing::warn!(%error, "lead processing batch failed; the next pass will retry");
                Err(error.into())
            }
        }
    }
    .boxed()
}
