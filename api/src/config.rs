//! Configuration by flags and `LEADPIPE_*` environment variables.

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct DbSettings {
    /// Where leads live: `sqlite://FILE?mode=rwc` or `postgres://…`.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://leadpipe.db?mode=rwc",
        global = true
    )]
    pub database_url: String,
    /// Size of the connection pool.
    #[arg(
        long,
        env = "LEADPIPE_DB_MAX_CONNECTIONS",
        default_value_t = 16,
        global = true
    )]
    pub db_max_connections: u32,
}

#[derive(Debug, Clone, Args)]
pub struct HttpSettings {
    /// Address the HTTP server listens on.
    #[arg(long, env = "LEADPIPE_BIND", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, env = "LEADPIPE_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    pub max_body_bytes: usize,
    /// How long an Idempotency-Key and its stored response are kept, in hours.
    #[arg(
        long,
        env = "LEADPIPE_IDEMPOTENCY_RETENTION_HOURS",
        default_value_t = 72
    )]
    pub idempotency_retention_hours: u32,
    /// How long a claimed Idempotency-Key may stay in progress before another
    /// request may take it over (its first holder presumed dead), in seconds.
    #[arg(long, env = "LEADPIPE_IDEMPOTENCY_LEASE_SECS", default_value_t = 60)]
    pub idempotency_lease_secs: u32,
    /// How often expired Idempotency-Keys are deleted, in seconds.
    #[arg(long, env = "LEADPIPE_SWEEP_INTERVAL_SECS", default_value_t = 300)]
    pub sweep_interval_secs: u64,
    /// Hosts (names or IPs, comma-separated) that outgoing requests may reach
    /// even though they are internal (loopback, private, link-local).
    #[arg(long, env = "LEADPIPE_OUTBOUND_ALLOW", default_value = "")]
    pub outbound_allow: String,
    /// Coalesce concurrent intake upserts into shared transactions (group commit).
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT", default_value_t = true, action = clap::ArgAction::Set)]
    pub group_commit: bool,
    /// Most records in one group-commit transaction.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT_MAX_BATCH", default_value_t = 128)]
    pub group_commit_max_batch: usize,
    /// Group-commit transactions in flight at once.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT_COMMITTERS", default_value_t = 4)]
    pub group_commit_committers: usize,
    /// Largest file accepted by `POST /api/imports`, in bytes (larger: 413).
    #[arg(long, env = "LEADPIPE_IMPORT_MAX_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub import_max_bytes: usize,
}

impl HttpSettings {
    pub fn for_tests() -> Self {
        Self {
            bind: "127.0.0.1:0".into(),
            max_body_bytes: 256 * 1024,
            idempotency_retention_hours: 72,
            idempotency_lease_secs: 60,
            sweep_interval_secs: 300,
            outbound_allow: "127.0.0.1,localhost".into(),
            group_commit: true,
            group_commit_max_batch: 128,
            group_commit_committers: 4,
            import_max_bytes: 64 * 1024 * 1024,
        }
    }

    pub fn outbound_policy(&self) -> domain::net_guard::OutboundPolicy {
        domain::net_guard::OutboundPolicy::from_list(&self.outbound_allow)
    }

    pub fn idempotency_policy(&self) -> domain::idempotency::Policy {
        domain::idempotency::Policy {
            retention: chrono::Duration::hours(i64::from(self.idempotency_retention_hours)),
            lease: chrono::Duration::seconds(i64::from(self.idempotency_lease_secs)),
        }
    }
}

/// Background work: the outbox publisher, lead processing, sweeping.
#[derive(Debug, Clone, Args)]
pub struct WorkerSettings {
    /// Timeout of one outgoing webhook request, in seconds.
    #[arg(long, env = "LEADPIPE_DELIVERY_TIMEOUT_SECS", default_value_t = 15)]
    pub delivery_timeout_secs: u64,
    /// Attempts per outgoing delivery before it is dead.
    #[arg(long, env = "LEADPIPE_DELIVERY_MAX_ATTEMPTS", default_value_t = 8)]
    pub delivery_max_attempts: u32,
    /// First retry delay ceiling, in milliseconds; doubles per attempt (full jitter).
    #[arg(long, env = "LEADPIPE_RETRY_BASE_MS", default_value_t = 1000)]
    pub retry_base_ms: u64,
    /// Largest retry delay, in seconds.
    #[arg(long, env = "LEADPIPE_RETRY_CAP_SECS", default_value_t = 300)]
    pub retry_cap_secs: u64,
    /// How long an idle worker loop waits before looking for work again, in milliseconds.
    #[arg(long, env = "LEADPIPE_POLL_INTERVAL_MS", default_value_t = 500)]
    pub poll_interval_ms: u64,
}

impl WorkerSettings {
    pub fn retry_policy(&self, max_attempts: u32) -> domain::retry::RetryPolicy {
        domain::retry::RetryPolicy {
            base: std::time::Duration::from_millis(self.retry_base_ms),
            cap: std::time::Duration::from_secs(self.retry_cap_secs),
            max_attempts,
        }
    }

    pub fn for_tests() -> Self {
        Self {
            delivery_timeout_secs: 5,
            delivery_max_attempts: 8,
            retry_base_ms: 10,
            retry_cap_secs: 1,
            poll_interval_ms: 50,
        }
    }
}
