//! Worker settings by flags and `LEADPIPE_*` variables (`serve`, `work`).

use std::time::Duration;

use clap::Args;
use domain::retry::RetryPolicy;
use workers::WorkerSettings;

#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// Inbox workers in this process: batches of events (and of leads) in
    /// flight at once.
    #[arg(long, env = "LEADPIPE_WORKER_CONCURRENCY", default_value_t = 4)]
    pub worker_concurrency: usize,
    /// Most inbox events one batch claims and writes in one transaction
    /// (lead processing uses the same size), 1 to 1000.
    #[arg(long, env = "LEADPIPE_INBOX_BATCH", default_value_t = 100)]
    pub inbox_batch: usize,
    /// How often an idle worker looks for work when no wake-up came (a
    /// stored event wakes the workers at once; this is the fallback).
    #[arg(long, env = "LEADPIPE_WORKER_POLL_INTERVAL", default_value = "500ms", value_parser = parse_duration)]
    pub worker_poll_interval: Duration,
    /// Processing attempts per inbox event before it is `dead`.
    #[arg(long, env = "LEADPIPE_INBOX_MAX_ATTEMPTS", default_value_t = 8)]
    pub inbox_max_attempts: u32,
    /// Backoff ceiling of the first retry; doubles per attempt (full jitter).
    #[arg(long, env = "LEADPIPE_RETRY_BASE", default_value = "1s", value_parser = parse_duration)]
    pub retry_base: Duration,
    /// Largest backoff ceiling.
    #[arg(long, env = "LEADPIPE_RETRY_CAP", default_value = "5m", value_parser = parse_duration)]
    pub retry_cap: Duration,
    /// An attempt running longer is abandoned and retried.
    #[arg(long, env = "LEADPIPE_ATTEMPT_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub attempt_timeout: Duration,
    /// How often housekeeping runs (expired idempotency keys, abandoned
    /// imports); at least every 5 s.
    #[arg(long, env = "LEADPIPE_SWEEP_INTERVAL", default_value = "15s", value_parser = parse_duration)]
    pub sweep_interval: Duration,
    /// Accepted and ignored: there is no sweeper any more (a waiting event
    /// is claimed by the workers' next pass).
    #[arg(long, env = "LEADPIPE_SWEEP_GRACE", default_value = "60s", value_parser = parse_duration, hide = true)]
    pub sweep_grace: Duration,
    /// How long an attempt may hold an event before another worker may take it.
    #[arg(long, env = "LEADPIPE_PROCESSING_LEASE", default_value = "5m", value_parser = parse_duration)]
    pub processing_lease: Duration,
    /// Accepted and ignored: there is no job queue any more (the rows that
    /// hold the work are the queue).
    #[arg(long, env = "LEADPIPE_JOB_RETENTION", default_value = "10s", value_parser = parse_duration, hide = true)]
    pub job_retention: Duration,
    /// Finished inbox events' raw bodies (personal data) are emptied after
    /// this; the event row stays for deduplication.
    #[arg(long, env = "LEADPIPE_RETAIN_INBOX_BODIES", default_value = "30d", value_parser = parse_duration)]
    pub retain_inbox_bodies: Duration,
    /// Finished inbox events are deleted this long after their last
    /// delivery (at least 7d: a late redelivery must still be a duplicate).
    #[arg(long, env = "LEADPIPE_RETAIN_INBOX_EVENTS", default_value = "90d", value_parser = parse_duration)]
    pub retain_inbox_events: Duration,
    /// Outbox events delivered to every subscription, and their deliveries,
    /// are deleted after this (undelivered and dead ones never are).
    #[arg(long, env = "LEADPIPE_RETAIN_DELIVERED_OUTBOX", default_value = "30d", value_parser = parse_duration)]
    pub retain_delivered_outbox: Duration,
    /// Finished import runs' per-row reports are deleted after this (the
    /// run and its counts stay).
    #[arg(long, env = "LEADPIPE_RETAIN_RUN_DETAILS", default_value = "30d", value_parser = parse_duration)]
    pub retain_run_details: Duration,
    /// How often the retention sweep runs.
    #[arg(long, env = "LEADPIPE_RETENTION_INTERVAL", default_value = "10m", value_parser = parse_duration)]
    pub retention_interval: Duration,
    /// Timeout of one outgoing webhook request.
    #[arg(long, env = "LEADPIPE_DELIVERY_TIMEOUT", default_value = "15s", value_parser = parse_duration)]
    pub delivery_timeout: Duration,
    /// Outgoing webhook requests in flight at once, per worker process.
    #[arg(long, env = "LEADPIPE_DELIVERY_CONCURRENCY", default_value_t = 64)]
    pub delivery_concurrency: usize,
    /// Outgoing webhook requests in flight at once to one subscription, per
    /// worker process. A lead's own events always go one at a time, in order.
    #[arg(long, env = "LEADPIPE_DELIVERY_PER_SUBSCRIPTION", default_value_t = 16)]
    pub delivery_per_subscription: usize,
    /// Attempts per outgoing delivery before it is `dead`.
    #[arg(long, env = "LEADPIPE_DELIVERY_MAX_ATTEMPTS", default_value_t = 8)]
    pub delivery_max_attempts: u32,
    /// Timeout of one reconcile page request.
    #[arg(long, env = "LEADPIPE_RECONCILE_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub reconcile_timeout: Duration,
    /// Attempts per reconcile page (transient errors) before the run fails.
    #[arg(long, env = "LEADPIPE_RECONCILE_MAX_ATTEMPTS", default_value_t = 6)]
    pub reconcile_max_attempts: u32,
    /// A reconcile run without a heartbeat for this long is marked failed.
    #[arg(long, env = "LEADPIPE_RECONCILE_LEASE", default_value = "2m", value_parser = parse_duration)]
    pub reconcile_lease: Duration,
}

impl WorkerArgs {
    pub fn settings(&self, outbound: domain::net_guard::OutboundPolicy) -> WorkerSettings {
        WorkerSettings {
            concurrency: self.worker_concurrency,
            batch_size: self.inbox_batch,
            poll_interval: self.worker_poll_interval,
            retry: RetryPolicy {
                base: self.retry_base,
                cap: self.retry_cap,
                max_attempts: self.inbox_max_attempts,
            },
            attempt_timeout: self.attempt_timeout,
            housekeeping_interval: self.sweep_interval,
            lease: self.processing_lease,
            retention: workers::housekeeping::RetentionSettings {
                rules: domain::retention::RetentionRules {
                    inbox_body: self.retain_inbox_bodies,
                    inbox_event: self.retain_inbox_events,
                    outbox: self.retain_delivered_outbox,
                    run_details: self.retain_run_details,
                    ..Default::default()
                },
                interval: self.retention_interval,
            },
            publisher: workers::publisher::PublisherSettings {
                request_timeout: self.delivery_timeout,
                retry: RetryPolicy {
                    base: self.retry_base,
                    cap: self.retry_cap,
                    max_attempts: self.delivery_max_attempts,
                },
                outbound: outbound.clone(),
                concurrency: self.delivery_concurrency,
                per_subscription: self.delivery_per_subscription,
                ..Default::default()
            },
            reconcile: workers::reconcile::ReconcileSettings {
                request_timeout: self.reconcile_timeout,
                retry: RetryPolicy {
                    base: self.retry_base,
                    cap: self.retry_cap,
                    max_attempts: self.reconcile_max_attempts,
                },
                lease: self.reconcile_lease,
                outbound,
                ..Default::default()
            },
        }
    }
}

/// `250ms`, `30s`, `5m`, `1h`, `30d`; a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration like 250ms, 30s, 5m, 1h or 30d"))?;
    let millis = match unit.trim() {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        other => return Err(format!("unknown duration unit '{other}' (ms, s, m, h, d)")),
    };
    millis
        .map(Duration::from_millis)
        .ok_or_else(|| format!("'{text}' is too long"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        for bad in ["", "s", "5w", "-1s", "1.5s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
