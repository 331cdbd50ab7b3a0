//! Admission control for webhooks. When senders outrun the workers, the
//! unprocessed inbox grows until the database spends all its time on
//! receipts and processing starves. Past a bound the receiver answers 503
//! with `Retry-After` instead, before storing anything, and processing
//! keeps the database to itself until the backlog is below the bound.
//!
//! The backlog is counted in the background (one indexed count every
//! `REFRESH`), never on the request path; receipts in between are added
//! locally, so a burst cannot overshoot by more than one refresh's worth
//! from other processes. A receipt admitted while a count runs is kept on
//! top of it (it may be counted twice, refusing a little early, never late).

use domain::store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::http::error::ApiError;

const REFRESH: Duration = Duration::from_millis(200);
/// Seconds a refused sender is asked to wait.
const RETRY_AFTER: u64 = 1;
/// How long a refusal is held before it is answered. A sender that resends
/// at once instead of after `Retry-After` (as load generators and careless
/// senders do) would otherwise be refused as fast as the server can answer,
/// and those refusals took the CPU the workers need to bring the backlog
/// down: 32 such senders drew about 9,700 refusals a second; held, 150.
pub const REFUSAL_HOLD: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub struct Admission {
    limit: u64,
    backlog: AtomicU64,
    /// Receipts this process admitted, ever: what a count that was running
    /// meanwhile may have missed.
    admitted: AtomicU64,
}

impl Admission {
    /// `limit` 0 admits everything and counts nothing.
    pub fn start(db: Store, limit: u64) -> Arc<Self> {
        let admission = Arc::new(Self {
            limit,
            backlog: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
        });
        if limit > 0 {
            tokio::spawn(refresh_loop(Arc::downgrade(&admission), db));
        }
        admission
    }

    /// `Err(503)` while the backlog is at the limit.
    pub fn check(&self) -> Result<(), ApiError> {
        let backlog = self.backlog.load(Ordering::Relaxed);
        if self.limit > 0 && backlog >= self.limit {
            return Err(ApiError::InboxBacklogFull {
                backlog,
                limit: self.limit,
                retry_after: RETRY_AFTER,
            });
        }
        Ok(())
    }

    /// A new event joined the backlog.
    pub fn admitted(&self) {
        if self.limit > 0 {
            // `admitted` first: a settling count that reads it is then
            // either retried by the `backlog` change or already includes it.
            self.admitted.fetch_add(1, Ordering::SeqCst);
            self.backlog.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Where a count starts: the receipts admitted so far.
    fn count_started(&self) -> u64 {
        self.admitted.load(Ordering::SeqCst)
    }

    /// Takes a finished count as the backlog, plus what this process
    /// admitted since the count started (a plain store would drop those,
    /// and the limit would let one more in per receipt in flight).
    fn settle(&self, counted: u64, started: u64) {
        let _ = self
            .backlog
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |_| {
                Some(counted + self.admitted.load(Ordering::SeqCst) - started)
            });
    }
}

async fn refresh_loop(admission: std::sync::Weak<Admission>, db: Store) {
    let mut ticks = tokio::time::interval(REFRESH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(admission) = admission.upgrade() else {
            return;
        };
        let started = admission.count_started();
        match domain::inbound::inbox::batch::backlog_size(&db).await {
            Ok(n) => {
                admission.settle(n, started);
                metrics::gauge!("leadpipe_inbox_backlog").set(n as f64);
            }
            Err(error) => tracing::debug!(%error, "inbox backlog not counted"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(limit: u64) -> Admission {
        Admission {
            limit,
            backlog: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
        }
    }

    #[test]
    fn a_receipt_admitted_while_a_count_runs_is_not_lost() {
        let admission = admission(3);
        admission.admitted();
        admission.admitted();
        // A count starts, a third receipt is admitted and committed after
        // the count's snapshot, and the count answers 2.
        let started = admission.count_started();
        admission.admitted();
        admission.settle(2, started);
        assert!(admission.check().is_err(), "the limit of 3 let a 4th in");
    }

    #[test]
    fn a_count_without_receipts_meanwhile_is_taken_as_it_is() {
        let admission = admission(3);
        admission.admitted();
        admission.admitted();
        admission.admitted();
        // The workers processed two of them.
        let started = admission.count_started();
        admission.settle(1, started);
        assert!(admission.check().is_ok());
        assert_eq!(admission.backlog.load(Ordering::SeqCst), 1);
    }
}
