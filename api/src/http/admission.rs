//! Admission control for webhooks. When senders outrun the workers, the
//! unprocessed inbox grows until the database spends all its time on
//! receipts and processing starves. Past a bound the receiver answers 503
//! with `Retry-After` instead, before storing anything, and processing
//! keeps the database to itself until the backlog is below the bound.
//!
//! The backlog is counted in the background (one indexed count every
//! `REFRESH`), never on the request path; receipts in between are added
//! locally, so a burst cannot overshoot by more than one refresh's worth
//! from other processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::http::error::ApiError;

const REFRESH: Duration = Duration::from_millis(200);
/// Seconds a refused sender is asked to wait.
const RETRY_AFTER: u64 = 1;

#[derive(Debug)]
pub struct Admission {
    limit: u64,
    backlog: AtomicU64,
}

impl Admission {
    /// `limit` 0 admits everything and counts nothing.
    pub fn start(db: DatabaseConnection, limit: u64) -> Arc<Self> {
        let admission = Arc::new(Self {
            limit,
            backlog: AtomicU64::new(0),
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
            self.backlog.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn refresh_loop(admission: std::sync::Weak<Admission>, db: DatabaseConnection) {
    let mut ticks = tokio::time::interval(REFRESH);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(admission) = admission.upgrade() else {
            return;
        };
        match domain::inbound::inbox::batch::backlog_size(&db).await {
            Ok(n) => {
                admission.backlog.store(n, Ordering::Relaxed);
                metrics::gauge!("leadpipe_inbox_backlog").set(n as f64);
            }
            Err(error) => tracing::debug!(%error, "inbox backlog not counted"),
        }
    }
}
