//! Configuration by flags and `LEADPIPE_*` environment variables.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use domain::sealed::Keyring;
use workers::settings::parse_duration;

use crate::telemetry::LogFormat;

#[derive(Debug, Clone, Args)]
pub struct DbSettings {
    /// Where leads live: `sqlite://FILE?mode=rwc` or `postgres://…`.
    ///
    /// PostgreSQL: `postgres://user:pass@host:port/db` (its value never
    /// shows in `--help`).
    // `hide_env_values`: a PostgreSQL URL carries its password, and `--help`
    // would print it.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://leadpipe.db?mode=rwc",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    pub database_url: String,
    /// Size of the connection pool [default: 16 on PostgreSQL, 8 on SQLite].
    ///
    /// Per process. On PostgreSQL, `serve` with workers opens
    /// `LEADPIPE_WORKER_CONCURRENCY` + 8 more for them, and intake's group
    /// committers open two each besides this pool (pinged only after a
    /// second idle). SQLite writes one transaction at a time and each connection
    /// keeps its own cache and thread, so a larger SQLite pool costs memory
    /// (about 1 MiB a connection) and gains little. Connections stay open
    /// once opened (sqlx's idle reaper is off: in sqlx 0.9.0 it can spin at
    /// 100% CPU, transact-rs/sqlx#3645); a broken one is replaced when the
    /// ping before each use fails.
    #[arg(
        long,
        env = "LEADPIPE_DB_MAX_CONNECTIONS",
        global = true,
        help_heading = "Global options"
    )]
    pub db_max_connections: Option<u32>,
    /// What sits between leadpipe and PostgreSQL: `none`, or `transaction`
    /// for a transaction-mode pooler (PgBouncer, RDS Proxy, Supavisor).
    ///
    /// `transaction`: no named prepared statements (the pooler hands each
    /// transaction to any server connection), and what needs a session of
    /// its own — the migration lock and `LISTEN` for wake-ups — goes to
    /// `DATABASE_DIRECT_URL`. Without that, workers poll for work (said at
    /// start) and pending migrations are refused: run `leadpipe migrate`
    /// against PostgreSQL itself.
    #[arg(
        long,
        env = "LEADPIPE_DB_POOLER",
        value_enum,
        default_value = "none",
        global = true,
        help_heading = "Global options"
    )]
    pub db_pooler: crate::storage::Pooler,
    /// PostgreSQL itself, past the pooler of `LEADPIPE_DB_POOLER`
    /// (`postgres://…`; its value never shows in `--help`).
    #[arg(
        long,
        env = "DATABASE_DIRECT_URL",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    pub database_direct_url: Option<String>,
}

impl DbSettings {
    /// Opens the store (see [`crate::storage::open`]), as [`Self::pooling`] says.
    pub async fn open(
        &self,
        max_connections: u32,
        run_migrations: bool,
        keyring: &Keyring,
    ) -> anyhow::Result<domain::store::Store> {
        crate::storage::open_behind(
            &self.database_url,
            &self.pooling(),
            max_connections,
            run_migrations,
            keyring,
        )
        .await
    }

    /// Applies pending migrations (see [`crate::storage::migrate`]).
    pub async fn migrate(&self) -> anyhow::Result<()> {
        crate::storage::migrate_behind(&self.database_url, &self.pooling()).await
    }

    /// How this process reaches PostgreSQL (see [`crate::storage::Pooling`]).
    pub fn pooling(&self) -> crate::storage::Pooling {
        crate::storage::Pooling {
            pooler: self.db_pooler,
            direct_url: self
                .database_direct_url
                .clone()
                .filter(|url| !url.trim().is_empty()),
        }
    }

    /// The pool size: the setting, else the backend's default. SQLite takes
    /// one writer at a time and every pooled connection keeps its own page
    /// cache, prepared statements and thread, so more than a few only cost
    /// memory.
    pub fn max_connections(&self) -> anyhow::Result<u32> {
        Ok(match self.db_max_connections {
            Some(n) => n,
            None => match crate::storage::Backend::of(&self.database_url)? {
                crate::storage::Backend::Sqlite => 8,
                crate::storage::Backend::Postgres => 16,
            },
        })
    }
}

/// A variable leadpipe reads outside its command line: read before the
/// command line is (`MALLOC_ARENA_MAX`), or another library's convention
/// (`RUST_LOG`). Listed here so the generated settings table has them too.
pub struct EnvironmentOnly {
    pub env: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

pub const ENVIRONMENT_ONLY: &[EnvironmentOnly] = &[
    EnvironmentOnly {
        env: "MALLOC_ARENA_MAX",
        // malloc::DEFAULT_ARENAS (a unit test holds them equal).
        default: "2",
        meaning: "glibc malloc arenas; leadpipe caps them at 2 when it starts (set by \
                  `leadpipe` itself, before any thread), which kept a SQLite server's peak \
                  memory about 20 MiB lower at the same throughput (docs/performance.md); \
                  set it to use glibc's default (8 per core) or another number",
    },
    EnvironmentOnly {
        env: "RUST_LOG",
        default: crate::telemetry::DEFAULT_FILTER,
        meaning: "The log filter (tracing's `EnvFilter` syntax)",
    },
];

/// A listening address, `HOST:PORT`, checked before anything runs: clap's
/// refusal names the flag (exit code 2), where binding it later said only
/// "invalid port value".
/// `http(s)://host[:port][/prefix]`, without a query or fragment; stored
/// without its trailing `/`. Empty: unset.
fn public_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(String::new());
    }
    let rule = "give the public base URL senders call, e.g. https://hooks.example.com (no query)";
    let url = reqwest::Url::parse(text).map_err(|e| format!("{e}: {rule}"))?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(rule.into());
    }
    Ok(text.trim_end_matches('/').to_owned())
}

fn listen_address(text: &str) -> Result<String, String> {
    if text.is_empty() {
        // Unset (see `Cli::empty_means_unset`).
        return Ok(String::new());
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err("give HOST:PORT, e.g. 127.0.0.1:8080".into());
    };
    if host.is_empty() {
        return Err("give HOST:PORT with a host, e.g. 127.0.0.1:8080".into());
    }
    if port.parse::<u16>().is_err() {
        return Err(format!(
            "port '{port}' is not a number from 0 to 65535 (HOST:PORT, e.g. 127.0.0.1:8080)"
        ));
    }
    Ok(text.to_owned())
}

/// A path, or an empty value, which `Cli::empty_means_unset` turns into
/// unset: clap's own path parser refuses `LEADPIPE_SPOOL_DIR=` (a line of
/// the environment template uncommented as it is) and `serve` did not start.
fn path_or_empty() -> impl clap::builder::TypedValueParser<Value = PathBuf> {
    clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), PathBuf::from)
}

/// `Some("")` as `None`: an empty variable (`KEY=` in an environment file)
/// is the setting left unset, its default.
pub fn unset_if_empty<T: AsRef<std::ffi::OsStr>>(value: &mut Option<T>) {
    if value.as_ref().is_some_and(|v| v.as_ref().is_empty()) {
        *value = None;
    }
}

impl HttpSettings {
    /// Empty settings as unset (see [`unset_if_empty`]).
    pub fn empty_means_unset(&mut self) {
        unset_if_empty(&mut self.spool_dir);
        unset_if_empty(&mut self.database_read_url);
        unset_if_empty(&mut self.metrics.bind);
    }
}

impl SecretSettings {
    /// Empty settings as unset (see [`unset_if_empty`]).
    pub fn empty_means_unset(&mut self) {
        unset_if_empty(&mut self.secret_key);
        unset_if_empty(&mut self.secret_key_file);
    }
}

/// `LEADPIPE_METRICS_REFRESH_SECS` unless set.
pub const DEFAULT_METRICS_REFRESH_SECS: f64 = 5.0;

/// This process's metrics: where `GET /metrics` is served without a token,
/// and how often the gauges are read. `serve` and `work` take the same flags.
#[derive(Debug, Clone, Args)]
pub struct MetricsSettings {
    /// Serve this process's `GET /metrics` on this address only, without a
    /// token (e.g. `127.0.0.1:9100`, reachable by the scraper alone). `serve`:
    /// the public listener then answers 404 for it; unset, `/metrics` is on
    /// the public listener and needs an ops or admin bearer token. `work`:
    /// the workers' counters (attempts, dead letters, deliveries, reconcile
    /// runs) live only here; unset, this process serves no metrics.
    #[arg(
        id = "metrics_bind",
        long = "metrics-bind",
        env = "LEADPIPE_METRICS_BIND",
        value_parser = listen_address
    )]
    pub bind: Option<String>,
    /// How often the gauges read from the database (backlogs, ages) are
    /// refreshed in the background, in seconds; a scrape serves the last
    /// values and never queries the database.
    ///
    /// Fractions allowed; at least 0.1.
    #[arg(
        id = "metrics_refresh_secs",
        long = "metrics-refresh-secs",
        env = "LEADPIPE_METRICS_REFRESH_SECS",
        default_value_t = DEFAULT_METRICS_REFRESH_SECS
    )]
    pub refresh_secs: f64,
}

#[derive(Debug, Clone, Args)]
pub struct HttpSettings {
    /// Address the HTTP server listens on.
    #[arg(long, env = "LEADPIPE_BIND", default_value = "127.0.0.1:8080", value_parser = listen_address)]
    pub bind: String,
    /// The service's public base URL as senders call it, behind any proxy
    /// (`https://hooks.example.com`, or with the path prefix a proxy strips).
    ///
    /// hubspot-v3 signs the full URL it called, which the server cannot see
    /// behind a proxy: without this setting such a source cannot be created
    /// through the API, and its deliveries are refused (401, reason
    /// `no_public_url`). See docs/guide/webhooks.md#hubspot.
    #[arg(long, env = "LEADPIPE_PUBLIC_URL", value_parser = public_url)]
    pub public_url: Option<String>,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, env = "LEADPIPE_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    pub max_body_bytes: usize,
    /// How long a request body has to arrive, in seconds, before the
    /// `LEADPIPE_BODY_MIN_RATE` allowance; slower: 408 and the connection
    /// closes (a sender trickling a body holds a connection open forever).
    ///
    /// 0.1 to 86,400. See docs/security/listener.md#slow-bodies-and-heads-408-or-the-connection-closes.
    #[arg(long, env = "LEADPIPE_BODY_TIMEOUT_SECS", default_value_t = 20.0)]
    pub body_timeout_secs: f64,
    /// Each byte of a request body received extends its deadline by
    /// 1/this seconds: a body must keep arriving at this many bytes a
    /// second (at least 1).
    ///
    /// 0 counts as 1.
    #[arg(long, env = "LEADPIPE_BODY_MIN_RATE", default_value_t = 500)]
    pub body_min_rate: u64,
    /// How long an Idempotency-Key and its stored response are kept, in hours.
    ///
    /// A repeat within this time gets the stored response replayed
    /// (docs/guide/idempotency.md).
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
    /// Filled from the global `--outbound-allow` (see `OutboundSettings`).
    #[arg(skip)]
    pub outbound_allow: String,
    /// How long an authenticated token is remembered, in seconds, sparing
    /// each request a database lookup; a revoked token keeps working for at
    /// most this long. 0 checks the database on every request.
    #[arg(long, env = "LEADPIPE_AUTH_CACHE_SECS", default_value_t = 5)]
    pub auth_cache_secs: u64,
    /// Coalesce concurrent intake upserts into shared transactions (group commit).
    ///
    /// Keyless intake requests only: one with an Idempotency-Key is written
    /// on its own.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT", default_value_t = true, action = clap::ArgAction::Set)]
    pub group_commit: bool,
    /// Most records in one group-commit transaction.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT_MAX_BATCH", default_value_t = 128)]
    pub group_commit_max_batch: usize,
    /// Group-commit transactions in flight at once (on PostgreSQL split
    /// among the HTTP workers, each running its share on its own thread).
    ///
    /// The split rounds up: every HTTP worker gets at least one.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT_COMMITTERS", default_value_t = 4)]
    pub group_commit_committers: usize,
    /// How long a group committer waits for more records to fill a batch,
    /// in microseconds; 0 (the default) commits what has queued at once.
    #[arg(long, env = "LEADPIPE_GROUP_COMMIT_MAX_WAIT_US", default_value_t = 0)]
    pub group_commit_max_wait_us: u64,
    /// HTTP worker threads; 0 is one per core.
    #[arg(long, env = "LEADPIPE_HTTP_WORKERS", default_value_t = 0)]
    pub http_workers: usize,
    /// Largest file accepted by `POST /api/imports`, in bytes (larger: 413).
    ///
    /// The upload streams to a temporary file (`LEADPIPE_SPOOL_DIR`), never
    /// into memory.
    #[arg(long, env = "LEADPIPE_IMPORT_MAX_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub import_max_bytes: usize,
    /// On a graceful stop (SIGTERM), how long `serve` waits for running
    /// imports to finish, in seconds; then each stops after its current
    /// batch and its run ends `interrupted` (import the file again to resume).
    ///
    /// Keep it under the service manager's stop timeout (systemd's
    /// `TimeoutStopSec`), or the process is killed first.
    #[arg(
        long,
        env = "LEADPIPE_IMPORT_SHUTDOWN_GRACE_SECS",
        default_value_t = 60
    )]
    pub import_shutdown_grace_secs: u64,
    /// Where uploads are spooled (0700; files 0600). Default: `leadpipe-spool`
    /// in the system's temp directory.
    #[arg(long, env = "LEADPIPE_SPOOL_DIR", value_parser = path_or_empty())]
    pub spool_dir: Option<PathBuf>,
    /// Runs started by `POST /api/ops/reconcile/{source}`: filled from the
    /// worker flags (`--reconcile-*`) and `--outbound-allow`.
    #[arg(skip)]
    pub reconcile: workers::reconcile::ReconcileSettings,
    #[command(flatten)]
    pub metrics: MetricsSettings,
    /// Failed authentications one client address may make per minute — bad
    /// bearer tokens and session cookies, webhook deliveries whose signature
    /// does not verify, and every sign-in attempt (`POST /api/session`)
    /// alike (a burst of this many, then one every 60/N seconds); more answer
    /// 429 with Retry-After. A valid token or signature is never limited; a
    /// password over the limit is not checked. 0: off.
    #[arg(long, env = "LEADPIPE_AUTH_FAIL_PER_MINUTE", default_value_t = 30)]
    pub auth_fail_per_minute: u32,
    /// Verified webhook deliveries accepted per second for one source; more
    /// answer 429 with Retry-After. Unverified ones never count here (they
    /// count against their address, `LEADPIPE_AUTH_FAIL_PER_MINUTE`), so no
    /// stranger can spend a sender's allowance. 0: off.
    #[arg(long, env = "LEADPIPE_WEBHOOK_RATE", default_value_t = 500)]
    pub webhook_rate: u32,
    /// Deliveries one source may send at once above `LEADPIPE_WEBHOOK_RATE`
    /// before it is limited (at least the rate).
    #[arg(long, env = "LEADPIPE_WEBHOOK_BURST", default_value_t = 1000)]
    pub webhook_burst: u32,
    /// Admission control for webhooks: while this many inbox events are
    /// unprocessed (received, failed or processing), `POST
    /// /webhooks/{source}` answers 503 with Retry-After and stores nothing,
    /// so senders slow down before the database saturates. 0: off.
    #[arg(long, env = "LEADPIPE_INBOX_BACKLOG_LIMIT", default_value_t = 10_000)]
    pub inbox_backlog_limit: u64,
    /// A PostgreSQL streaming replica for lists, searches, timelines,
    /// stats, traces and exports (`postgres://…`); unset, the primary
    /// serves every read.
    ///
    /// See docs/guide/operations.md#read-replicas.
    #[arg(long, env = "DATABASE_READ_URL", hide_env_values = true)]
    pub database_read_url: Option<String>,
    /// Seconds the read replica may lag before reads go to the primary.
    ///
    /// Reads go to the primary too while the replica does not answer.
    #[arg(long, env = "LEADPIPE_READ_MAX_LAG", default_value_t = 5.0)]
    pub read_max_lag_secs: f64,
    /// Seals secrets before they are stored: filled from `SecretSettings`.
    #[arg(skip)]
    pub keyring: Keyring,
    #[command(flatten)]
    pub sessions: SessionSettings,
}

/// Signed-in sessions of the page (`POST /api/session`).
#[derive(Debug, Clone, Args)]
pub struct SessionSettings {
    /// A session unused for this long is over (e.g. `30m`, `12h`).
    ///
    /// Units: ms, s, m, h, d. Use moves the end on (noted at most once a
    /// minute).
    #[arg(long, env = "LEADPIPE_SESSION_IDLE", default_value = "12h", value_parser = parse_duration)]
    pub session_idle: Duration,
    /// A session is over this long after it started, however much it is
    /// used (e.g. `7d`); the cookie's `Max-Age`.
    #[arg(long, env = "LEADPIPE_SESSION_LIFETIME", default_value = "7d", value_parser = parse_duration)]
    pub session_lifetime: Duration,
    /// Behind a proxy that ends TLS: trust its `X-Forwarded-Proto: https`
    /// and mark the session cookie `Secure`.
    ///
    /// Only when every request comes through that proxy: a client could
    /// send the header itself. The cookie is always `Secure` when leadpipe
    /// serves TLS itself.
    #[arg(
        long,
        env = "LEADPIPE_TRUST_FORWARDED_PROTO",
        default_value_t = false,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub trust_forwarded_proto: bool,
}

impl SessionSettings {
    pub fn for_tests() -> Self {
        Self {
            session_idle: Duration::from_secs(12 * 3600),
            session_lifetime: Duration::from_secs(7 * 86_400),
            trust_forwarded_proto: false,
        }
    }

    /// The lifetimes as the domain takes them (a value too large for a
    /// date is a hundred years).
    pub fn lifetimes(&self) -> domain::session::Lifetimes {
        let of = |d: Duration| {
            chrono::Duration::from_std(d)
                .unwrap_or(chrono::Duration::days(36_500))
                .min(chrono::Duration::days(36_500))
        };
        domain::session::Lifetimes {
            idle: of(self.session_idle),
            absolute: of(self.session_lifetime),
        }
    }
}

impl HttpSettings {
    pub fn for_tests() -> Self {
        Self {
            bind: "127.0.0.1:0".into(),
            max_body_bytes: 256 * 1024,
            body_timeout_secs: 20.0,
            body_min_rate: 500,
            idempotency_retention_hours: 72,
            idempotency_lease_secs: 60,
            auth_cache_secs: 5,
            outbound_allow: "127.0.0.1,localhost".into(),
            group_commit: true,
            group_commit_max_batch: 128,
            group_commit_committers: 4,
            http_workers: 0,
            group_commit_max_wait_us: 0,
            import_max_bytes: 64 * 1024 * 1024,
            import_shutdown_grace_secs: 60,
            spool_dir: None,
            reconcile: workers::reconcile::ReconcileSettings::for_tests(),
            metrics: MetricsSettings {
                bind: None,
                refresh_secs: 0.5,
            },
            auth_fail_per_minute: 30,
            webhook_rate: 500,
            webhook_burst: 1000,
            public_url: None,
            inbox_backlog_limit: 10_000,
            database_read_url: None,
            read_max_lag_secs: 5.0,
            keyring: Keyring::for_tests(),
            sessions: SessionSettings::for_tests(),
        }
    }

    /// How far the read replica may lag (at least 100 ms).
    pub fn read_max_lag(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.read_max_lag_secs)
            .unwrap_or_default()
            .max(std::time::Duration::from_millis(100))
    }

    /// [`Self::public_url`], when set.
    pub fn public_base(&self) -> Option<&str> {
        self.public_url.as_deref().filter(|url| !url.is_empty())
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

/// Worker settings an older leadpipe had: still accepted, so an old
/// environment file still starts (a value must still parse), and ignored.
#[derive(Debug, Clone, Args)]
pub struct RetiredWorkerSettings {
    /// Accepted and ignored: there is no sweeper any more (a waiting event
    /// is claimed by the workers' next pass).
    ///
    /// Retries come due and expired leases are claimed by the workers' poll.
    #[arg(long, env = "LEADPIPE_SWEEP_GRACE", default_value = "60s", value_parser = parse_duration, hide = true)]
    pub sweep_grace: Duration,
    /// Accepted and ignored: there is no job queue any more (the rows that
    /// hold the work are the queue).
    ///
    /// See docs/guide/operations.md#upgrading-from-a-version-with-a-job-queue.
    #[arg(long, env = "LEADPIPE_JOB_RETENTION", default_value = "10s", value_parser = parse_duration, hide = true)]
    pub job_retention: Duration,
}

/// Where outgoing requests (webhooks to subscribers, pulls from sources) may go.
#[derive(Debug, Clone, Args)]
pub struct OutboundSettings {
    /// Hosts (names or IPs, comma-separated) that outgoing requests may reach
    /// even though they are internal (loopback, private, link-local).
    ///
    /// Outgoing requests are webhooks to subscribers and reconcile pulls;
    /// e.g. `127.0.0.1,localhost`. Empty: public addresses only.
    #[arg(
        long,
        env = "LEADPIPE_OUTBOUND_ALLOW",
        default_value = "",
        global = true,
        help_heading = "Global options"
    )]
    pub outbound_allow: String,
}

impl OutboundSettings {
    pub fn policy(&self) -> domain::net_guard::OutboundPolicy {
        domain::net_guard::OutboundPolicy::from_list(&self.outbound_allow)
    }
}

/// How log lines are written. Their filter is `RUST_LOG`, the tracing
/// ecosystem's own variable (see [`ENVIRONMENT_ONLY`]).
#[derive(Debug, Clone, Args)]
pub struct LogSettings {
    /// `json` writes one JSON object per log line; anything else, text.
    // Hidden: an environment setting first (the units' EnvironmentFile),
    // and `--help` lists what it always listed.
    #[arg(
        long,
        env = "LEADPIPE_LOG_FORMAT",
        default_value = "text",
        value_parser = LogFormat::parse,
        global = true,
        help_heading = "Global options",
        hide = true
    )]
    pub log_format: LogFormat,
}

/// The keys that seal secrets at rest (source secrets, pull auth values,
/// subscription secrets). See docs/security/secrets.md.
#[derive(Clone, Args)]
pub struct SecretSettings {
    /// Sealing keys, comma-separated `ID:BASE64` entries of 32 random bytes
    /// (`openssl rand -base64 32`); the first seals, every one opens. Prefer
    /// the environment variable or --secret-key-file to this flag.
    ///
    /// Without a key, storing a secret answers 503
    /// (`/problems/secret-key-missing`); see docs/security/secrets.md.
    #[arg(
        long,
        env = "LEADPIPE_SECRET_KEY",
        hide_env_values = true,
        global = true,
        help_heading = "Global options"
    )]
    pub secret_key: Option<String>,
    /// A file of sealing keys, one `ID:BASE64` a line, the sealing one first.
    #[arg(
        long,
        env = "LEADPIPE_SECRET_KEY_FILE",
        global = true,
        help_heading = "Global options",
        value_parser = path_or_empty()
    )]
    pub secret_key_file: Option<PathBuf>,
    /// Development only: without a key, seal secrets under a well-known key
    /// (no confidentiality at all). `leadpipe secrets rotate` upgrades them
    /// once a real key is set.
    #[arg(
        long,
        env = "LEADPIPE_INSECURE_DEV_SECRETS",
        global = true,
        help_heading = "Global options",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub insecure_dev_secrets: bool,
}

// Hand-written: key material never reaches a log line.
impl fmt::Debug for SecretSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretSettings")
            .field(
                "secret_key",
                &self.secret_key.as_ref().map(|_| "[redacted]"),
            )
            .field("secret_key_file", &self.secret_key_file)
            .field("insecure_dev_secrets", &self.insecure_dev_secrets)
            .finish()
    }
}

impl SecretSettings {
    pub fn keyring(&self) -> anyhow::Result<Keyring> {
        let mut spec = self.secret_key.clone().unwrap_or_default();
        if let Some(path) = &self.secret_key_file {
            let keys = std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read LEADPIPE_SECRET_KEY_FILE {}: {e}",
                    path.display()
                )
            })?;
            spec.push('\n');
            spec.push_str(&keys);
        }
        Ok(Keyring::parse(&spec, self.insecure_dev_secrets)?)
    }
}

/// Says at start-up what sealing will do, once.
pub fn log_keyring(keyring: &Keyring) {
    if keyring.is_insecure_dev() {
        tracing::warn!(
            "LEADPIPE_INSECURE_DEV_SECRETS: secrets are sealed under a well-known key and have \
             NO confidentiality; never use this in production"
        );
    } else if let Some(id) = keyring.current_key_id() {
        tracing::info!(
            key_id = id,
            keys = keyring.key_ids().len(),
            "secrets are sealed at rest"
        );
    } else {
        tracing::warn!(
            "no LEADPIPE_SECRET_KEY: sources and subscriptions cannot be given secrets \
             (503 /problems/secret-key-missing); set it, or LEADPIPE_INSECURE_DEV_SECRETS=1 \
             to try things out"
        );
    }
}
