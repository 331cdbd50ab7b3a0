//! Reconcile's moving parts: the pull client (HTTP), the run executor, and
//! the scheduler that starts runs by each source's cron in every worker
//! process. The rules and the run rows are `domain::reconcile`.

pub mod pull;
pub mod runner;
pub mod scheduler;

use std::time::Duration;

use domain::net_guard::OutboundPolicy;
use domain::retry::RetryPolicy;

use crate::settings::{ReconcileAttempts, Retry, parse_duration};

pub use runner::{ExecuteError, Progress, Reconciler};

#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ReconcileSettings {
    /// Timeout of one reconcile page request.
    #[arg(
        id = "reconcile_timeout",
        value_name = "RECONCILE_TIMEOUT",
        long = "reconcile-timeout",
        env = "LEADPIPE_RECONCILE_TIMEOUT",
        default_value = "30s",
        value_parser = parse_duration
    )]
    pub request_timeout: Duration,
    /// `--reconcile-max-attempts` (page fetches, transient errors) and the
    /// shared backoff.
    #[command(flatten)]
    pub retry: Retry<ReconcileAttempts>,
    /// A reconcile run without a heartbeat for this long is marked failed.
    ///
    /// Must be more than twice `LEADPIPE_RECONCILE_TIMEOUT`. Applies to runs
    /// started over the API too.
    // Its process renews it with every page and while it waits.
    #[arg(
        id = "reconcile_lease",
        value_name = "RECONCILE_LEASE",
        long = "reconcile-lease",
        env = "LEADPIPE_RECONCILE_LEASE",
        default_value = "2m",
        value_parser = parse_duration
    )]
    pub lease: Duration,
    /// How often the scheduler looks for due cron ticks.
    #[arg(skip = Duration::from_secs(1))]
    pub scheduler_interval: Duration,
    /// The global `--outbound-allow` (`WorkerSettings::with_outbound`).
    #[arg(skip)]
    pub outbound: OutboundPolicy,
    /// Resolves pull hosts (the system resolver but in tests).
    #[arg(skip)]
    pub dns: crate::outbound::Dns,
    /// Opens the sources' sealed pull auth values.
    #[arg(skip)]
    pub keyring: domain::sealed::Keyring,
}

impl Default for ReconcileSettings {
    /// The command line's defaults.
    fn default() -> Self {
        crate::settings::defaults()
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
            }
            .into(),
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
