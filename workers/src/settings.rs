//! The worker's knobs; the `leadpipe` command fills them from flags and
//! `LEADPIPE_*` variables.

use std::time::Duration;

use domain::retry::RetryPolicy;

use crate::housekeeping::RetentionSettings;
use crate::publisher::PublisherSettings;
use crate::reconcile::ReconcileSettings;

/// The largest batch. A batch's statements bind parameters per row (SQLite's
/// upsert 13 a record, within 32,766; PostgreSQL's batch end 7 an event,
/// within 65,535): past the bound every batch would fail whole and be
/// written again one event at a time.
pub const MAX_BATCH: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSettings {
    /// Inbox workers (batches in flight) in this process.
    pub concurrency: usize,
    /// Most inbox events (and leads) one batch takes.
    pub batch_size: usize,
    /// How often an idle worker looks for work no wake-up announced: a
    /// retry that came due, a lease that ran out, a lost wake-up.
    pub poll_interval: Duration,
    pub retry: RetryPolicy,
    /// An attempt taking longer is abandoned and counts as a transient failure.
    pub attempt_timeout: Duration,
    /// How often housekeeping runs (expired idempotency keys, abandoned
    /// imports), at most every 5 s.
    pub housekeeping_interval: Duration,
    /// How long an attempt holds an inbox event before another worker may
    /// claim it (its worker is presumed dead).
    pub lease: Duration,
    /// What is deleted when, and how often retention sweeps.
    pub retention: RetentionSettings,
    /// Outgoing webhooks (the outbox publisher).
    pub publisher: PublisherSettings,
    /// Reconcile runs and their cron scheduler.
    pub reconcile: ReconcileSettings,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            concurrency: 4,
            batch_size: 100,
            poll_interval: Duration::from_millis(500),
            retry: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(30),
            housekeeping_interval: Duration::from_secs(15),
            lease: Duration::from_secs(300),
            retention: RetentionSettings::default(),
            publisher: PublisherSettings::default(),
            reconcile: ReconcileSettings::default(),
        }
    }
}

impl WorkerSettings {
    /// The keys that open sealed secrets, for the publisher and reconcile.
    pub fn with_keyring(mut self, keyring: &domain::sealed::Keyring) -> Self {
        self.publisher.keyring = keyring.clone();
        self.reconcile.keyring = keyring.clone();
        self
    }

    /// Fast everything, for tests that wait on real workers.
    pub fn for_tests() -> Self {
        Self {
            concurrency: 4,
            batch_size: 100,
            poll_interval: Duration::from_millis(50),
            retry: RetryPolicy {
                base: Duration::from_millis(50),
                cap: Duration::from_millis(200),
                max_attempts: 8,
            },
            attempt_timeout: Duration::from_secs(5),
            housekeeping_interval: Duration::from_millis(200),
            lease: Duration::from_secs(10),
            retention: RetentionSettings {
                interval: Duration::from_millis(200),
                ..RetentionSettings::default()
            },
            publisher: PublisherSettings {
                request_timeout: Duration::from_secs(5),
                retry: RetryPolicy {
                    base: Duration::from_millis(20),
                    cap: Duration::from_millis(200),
                    max_attempts: 8,
                },
                outbound: domain::net_guard::OutboundPolicy::from_list("127.0.0.1,localhost"),
                keyring: domain::sealed::Keyring::for_tests(),
                ..PublisherSettings::default()
            },
            reconcile: ReconcileSettings::for_tests(),
        }
    }

    /// Connections the workers of one process use at most at once: the
    /// inbox drain's passes, the lead drain's pass, the publisher's fan-out,
    /// claims and settlements, housekeeping, retention, reconcile and the
    /// wake-up listener.
    pub fn connections_wanted(&self) -> u32 {
        u32::try_from(self.concurrency)
            .unwrap_or(u32::MAX)
            .saturating_add(8)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.concurrency == 0 {
            return Err("worker concurrency must be at least 1".into());
        }
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            return Err(format!(
                "the inbox batch size must be between 1 and {MAX_BATCH}"
            ));
        }
        if self.retry.max_attempts == 0 {
            return Err("max attempts must be at least 1".into());
        }
        if self.retry.base.is_zero() || self.retry.cap < self.retry.base {
            return Err("retry base must be positive and at most the retry cap".into());
        }
        // A lease shorter than an attempt would let a second worker take an
        // event that the first is still working on.
        if self.lease <= self.attempt_timeout {
            return Err("the processing lease must be longer than the attempt timeout".into());
        }
        if self.publisher.concurrency == 0 || self.publisher.per_subscription == 0 {
            return Err(
                "delivery concurrency and its per-subscription limit must be at least 1".into(),
            );
        }
        if self.poll_interval.is_zero() || self.housekeeping_interval.is_zero() {
            return Err("poll and housekeeping intervals must be positive".into());
        }
        if self.retention.interval.is_zero() {
            return Err("the retention interval must be positive".into());
        }
        self.retention.rules.validate()?;
        self.reconcile.validate()
    }
}
