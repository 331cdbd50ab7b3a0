//! Reconcile's moving parts: the pull client (HTTP), the run executor, and
//! the scheduler that starts runs by each source's cron in every worker
//! process. The rules and the run rows are `domain::reconcile`.

pub mod pull;
pub mod runner;
pub mod scheduler;

use std::time::Duration;

use domain::net_guard::OutboundPolicy;
use domain::retry::RetryPolicy;

pub use runner::{ExecuteError, Progress, Reconciler};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileSettings {
    /// Timeout of one page request.
    pub request_timeout: Duration,
    /// Page fetch retries (transient errors): backoff and attempts.
    pub retry: RetryPolicy,
    /// A run without a heartbeat for this long is presumed dead and marked
    /// failed; its process renews it with every page and while it waits.
    pub lease: Duration,
    /// How often the scheduler looks for due cron ticks.
    pub scheduler_interval: Duration,
    pub outbound: OutboundPolicy,
    /// Resolves pull hosts (the system resolver but in tests).
    pub dns: crate::outbound::Dns,
    /// Opens the sources' sealed pull auth values.
    pub keyring: domain::sealed::Keyring,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(30),
            retry: RetryPolicy {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(60),
                max_attempts: 6,
            },
            lease: Duration::from_secs(120),
            scheduler_interval: Duration::from_secs(1),
            outbound: OutboundPolicy::default(),
            dns: crate::outbound::Dns::default(),
            keyring: domain::sealed::Keyring::none(),
        }
    }
}

impl ReconcileSettings {
    /// Fast retries and a loopback allow-list, for tests and the demo.
    pub fn for_tests() -> Self {
        Self {
            request_timeout: Duration::from_secs(5),
            retry: RetryPolicy {
                base: Duration::from_millis(20),
                cap: Duration::from_millis(200),
                max_attempts: 4,
            },
            lease: Duration::from_secs(30),
            scheduler_interval: Duration::from_millis(100),
            outbound: OutboundPolicy::from_list("127.0.0.1,localhost"),
            dns: crate::outbound::Dns::default(),
            keyring: domain::sealed::Keyring::for_tests(),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.retry.max_attempts == 0 {
            return Err("reconcile attempts must be at least 1".into());
        }
        // A page request must end well inside the lease, or a live run
        // could be taken for dead while it waits for an answer.
        if self.lease <= self.request_timeout * 2 {
            return Err("the reconcile lease must be more than twice the request timeout".into());
        }
        if self.scheduler_interval.is_zero() {
            return Err("the reconcile scheduler interval must be positive".into());
        }
        Ok(())
    }
}
