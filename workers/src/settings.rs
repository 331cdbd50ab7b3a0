//! The workers' settings: [`WorkerSettings`] and its parts (retention, the
//! outbox publisher, reconcile). These structs are what the `leadpipe`
//! command line fills (flags and `LEADPIPE_*` variables, clap with `env`)
//! and what the workers run with: one definition per setting, its flag,
//! variable, default and help together. `docs/guide/configuration.md` is
//! generated from them. Fields marked `skip` are not settings: what the
//! process hands in (the keyring, the outbound allow-list, a resolver).

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use domain::net_guard::OutboundPolicy;
use domain::retention::RetentionRules;
use domain::retry::RetryPolicy;
use domain::sealed::Keyring;

use crate::outbound::Dns;

/// The largest batch. A batch's statements bind parameters per row (SQLite's
/// upsert 13 a record, within 32,766; PostgreSQL's batch end 7 an event,
/// within 65,535): past the bound every batch would fail whole and be
/// written again one event at a time.
pub const MAX_BATCH: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct WorkerSettings {
    /// Inbox workers in this process: batches of events (and of leads) in
    /// flight at once.
    #[arg(
        id = "worker_concurrency",
        value_name = "WORKER_CONCURRENCY",
        long = "worker-concurrency",
        env = "LEADPIPE_WORKER_CONCURRENCY",
        default_value_t = 4
    )]
    pub concurrency: usize,
    /// Most inbox events one batch claims and writes in one transaction
    /// (lead processing uses the same size), 1 to 1000.
    #[arg(
        id = "inbox_batch",
        value_name = "INBOX_BATCH",
        long = "inbox-batch",
        env = "LEADPIPE_INBOX_BATCH",
        default_value_t = 100
    )]
    pub batch_size: usize,
    /// How often an idle worker looks for work when no wake-up came (a
    /// stored event wakes the workers at once; this is the fallback).
    ///
    /// Every kind of worker polls at this pace: inbox events, lead
    /// processing, the outbox publisher.
    // What a poll finds: a retry that came due, a lease that ran out, a
    // lost wake-up.
    #[arg(
        id = "worker_poll_interval",
        value_name = "WORKER_POLL_INTERVAL",
        long = "worker-poll-interval",
        env = "LEADPIPE_WORKER_POLL_INTERVAL",
        default_value = "500ms",
        value_parser = parse_duration
    )]
    pub poll_interval: Duration,
    /// Inbox events' (and leads') retries: `--inbox-max-attempts`, and the
    /// backoff every queue shares (`--retry-base`, `--retry-cap`).
    #[command(flatten)]
    pub retry: Retry<InboxAttempts>,
    /// An attempt running longer is abandoned and retried.
    // It counts as a transient failure.
    #[arg(long, env = "LEADPIPE_ATTEMPT_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub attempt_timeout: Duration,
    /// How often housekeeping runs (expired idempotency keys, abandoned
    /// imports); at least every 5 s.
    #[arg(
        id = "sweep_interval",
        value_name = "SWEEP_INTERVAL",
        long = "sweep-interval",
        env = "LEADPIPE_SWEEP_INTERVAL",
        default_value = "15s",
        value_parser = parse_duration
    )]
    pub housekeeping_interval: Duration,
    /// How long an attempt may hold an event before another worker may take it.
    ///
    /// Must be longer than `LEADPIPE_ATTEMPT_TIMEOUT`.
    // Its worker is then presumed dead.
    #[arg(
        id = "processing_lease",
        value_name = "PROCESSING_LEASE",
        long = "processing-lease",
        env = "LEADPIPE_PROCESSING_LEASE",
        default_value = "5m",
        value_parser = parse_duration
    )]
    pub lease: Duration,
    /// What is deleted when, and how often retention sweeps.
    #[command(flatten)]
    pub retention: RetentionSettings,
    /// Outgoing webhooks (the outbox publisher).
    #[command(flatten)]
    pub publisher: PublisherSettings,
    /// Reconcile runs and their cron scheduler.
    #[command(flatten)]
    pub reconcile: ReconcileSettings,
}

impl Default for WorkerSettings {
    /// The command line's defaults.
    fn default() -> Self {
        defaults()
    }
}

/// `T` as the command line fills it when given no flag and no variable:
/// the defaults are written once, on the flags.
pub(crate) fn defaults<T: Args + FromArgMatches>() -> T {
    let command = T::augment_args(Command::new("defaults").no_binary_name(true))
        .mut_args(|arg| arg.env(None));
    let parsed = command
        .try_get_matches_from(std::iter::empty::<String>())
        .and_then(|matches| T::from_arg_matches(&matches));
    match parsed {
        Ok(settings) => settings,
        // A default that does not parse is a bug in its flag, found by any test.
        Err(err) => panic!("the default settings do not parse: {err}"),
    }
}

impl WorkerSettings {
    /// The keys that open sealed secrets, for the publisher and reconcile.
    pub fn with_keyring(mut self, keyring: &domain::sealed::Keyring) -> Self {
        self.publisher.keyring = keyring.clone();
        self.reconcile.keyring = keyring.clone();
        self
    }

    /// Where the publisher's and reconcile's requests may go (the global
    /// `--outbound-allow`, which commands other than the workers' use too).
    pub fn with_outbound(mut self, outbound: domain::net_guard::OutboundPolicy) -> Self {
        self.publisher.outbound = outbound.clone();
        self.reconcile.outbound = outbound;
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
            }
            .into(),
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
                }
                .into(),
                outbound: domain::net_guard::OutboundPolicy::from_list("127.0.0.1,localhost"),
                keyring: Keyring::for_tests(),
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
        self.retention.rules().validate()?;
        self.reconcile.validate()
    }
}

/// How retention runs: what is deleted when, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Args)]
pub struct RetentionSettings {
    /// Finished inbox events' raw bodies (personal data) are emptied after
    /// this; the event row stays for deduplication.
    ///
    /// See docs/guide/data-protection.md.
    #[arg(
        id = "retain_inbox_bodies",
        value_name = "RETAIN_INBOX_BODIES",
        long = "retain-inbox-bodies",
        env = "LEADPIPE_RETAIN_INBOX_BODIES",
        default_value = "30d",
        value_parser = parse_duration
    )]
    pub inbox_body: Duration,
    /// Finished inbox events are deleted this long after their last
    /// delivery (at least 7d: a late redelivery must still be a duplicate).
    #[arg(
        id = "retain_inbox_events",
        value_name = "RETAIN_INBOX_EVENTS",
        long = "retain-inbox-events",
        env = "LEADPIPE_RETAIN_INBOX_EVENTS",
        default_value = "90d",
        value_parser = parse_duration
    )]
    pub inbox_event: Duration,
    /// Outbox events delivered to every subscription, and their deliveries,
    /// are deleted after this (undelivered and dead ones never are).
    #[arg(
        id = "retain_delivered_outbox",
        value_name = "RETAIN_DELIVERED_OUTBOX",
        long = "retain-delivered-outbox",
        env = "LEADPIPE_RETAIN_DELIVERED_OUTBOX",
        default_value = "30d",
        value_parser = parse_duration
    )]
    pub outbox: Duration,
    /// Finished import runs' per-row reports are deleted after this (the
    /// run and its counts stay).
    ///
    /// Rejected reconcile records untouched for as long go too.
    #[arg(
        id = "retain_run_details",
        value_name = "RETAIN_RUN_DETAILS",
        long = "retain-run-details",
        env = "LEADPIPE_RETAIN_RUN_DETAILS",
        default_value = "30d",
        value_parser = parse_duration
    )]
    pub run_details: Duration,
    /// How often the retention sweep runs.
    #[arg(
        id = "retention_interval",
        value_name = "RETENTION_INTERVAL",
        long = "retention-interval",
        env = "LEADPIPE_RETENTION_INTERVAL",
        default_value = "10m",
        value_parser = parse_duration
    )]
    pub interval: Duration,
}

impl Default for RetentionSettings {
    /// The command line's defaults.
    fn default() -> Self {
        defaults()
    }
}

impl RetentionSettings {
    /// The rules a sweep applies (rows per statement: the domain's).
    pub fn rules(&self) -> RetentionRules {
        RetentionRules {
            inbox_body: self.inbox_body,
            inbox_event: self.inbox_event,
            outbox: self.outbox,
            run_details: self.run_details,
            ..RetentionRules::default()
        }
    }
}

/// Outgoing webhooks: the outbox publisher.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct PublisherSettings {
    /// Timeout of one outgoing webhook request.
    #[arg(
        id = "delivery_timeout",
        value_name = "DELIVERY_TIMEOUT",
        long = "delivery-timeout",
        env = "LEADPIPE_DELIVERY_TIMEOUT",
        default_value = "15s",
        value_parser = parse_duration
    )]
    pub request_timeout: Duration,
    /// Outgoing webhook requests in flight at once, per worker process.
    #[arg(
        id = "delivery_concurrency",
        value_name = "DELIVERY_CONCURRENCY",
        long = "delivery-concurrency",
        env = "LEADPIPE_DELIVERY_CONCURRENCY",
        default_value_t = 64
    )]
    pub concurrency: usize,
    /// Outgoing webhook requests in flight at once to one subscription, per
    /// worker process. A lead's own events always go one at a time, in order.
    #[arg(
        id = "delivery_per_subscription",
        value_name = "DELIVERY_PER_SUBSCRIPTION",
        long = "delivery-per-subscription",
        env = "LEADPIPE_DELIVERY_PER_SUBSCRIPTION",
        default_value_t = 16
    )]
    pub per_subscription: usize,
    /// `--delivery-max-attempts` and the shared backoff.
    #[command(flatten)]
    pub retry: Retry<DeliveryAttempts>,
    /// A subscription whose deliveries have failed this long with no
    /// success in between is disabled (its deliveries are held, not lost,
    /// until `POST /api/subscriptions/{id}/enable`).
    #[arg(
        id = "subscription_disable_after",
        value_name = "SUBSCRIPTION_DISABLE_AFTER",
        long = "subscription-disable-after",
        env = "LEADPIPE_SUBSCRIPTION_DISABLE_AFTER",
        default_value = "5d",
        value_parser = parse_duration
    )]
    pub disable_after: Duration,
    /// The global `--outbound-allow` (`WorkerSettings::with_outbound`).
    #[arg(skip)]
    pub outbound: OutboundPolicy,
    /// Deliveries claimed per claim, at most.
    #[arg(skip = 256_u64)]
    pub batch: u64,
    /// Resolves receivers' host names (the system resolver but in tests).
    #[arg(skip)]
    pub dns: Dns,
    /// Opens the subscriptions' sealed signing secrets.
    #[arg(skip)]
    pub keyring: Keyring,
}

impl Default for PublisherSettings {
    /// The command line's defaults.
    fn default() -> Self {
        defaults()
    }
}

/// Reconcile runs (started by the scheduler, over the API, or by
/// `leadpipe reconcile`) and the cron scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
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
    pub dns: Dns,
    /// Opens the sources' sealed pull auth values.
    #[arg(skip)]
    pub keyring: Keyring,
}

impl Default for ReconcileSettings {
    /// The command line's defaults.
    fn default() -> Self {
        defaults()
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
            dns: Dns::default(),
            keyring: Keyring::for_tests(),
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

/// One queue's retry policy as the command line gives it: the attempts are
/// the queue's own flag, the backoff (`--retry-base`, `--retry-cap`) one
/// pair of flags every queue shares. clap's derive cannot read one flag
/// into several fields, hence this hand-written `Args`: the first queue
/// flattened declares the shared pair, every queue reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry<Q> {
    policy: RetryPolicy,
    queue: PhantomData<Q>,
}

/// A queue's attempts flag.
pub trait Attempts {
    /// The flag's id.
    const ID: &'static str;
    /// The flag, with its id, name, variable, default and help.
    fn arg() -> Arg;
}

/// `--inbox-max-attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboxAttempts;

impl Attempts for InboxAttempts {
    const ID: &'static str = "inbox_max_attempts";
    fn arg() -> Arg {
        attempts_arg(Self::ID, "inbox-max-attempts", "INBOX_MAX_ATTEMPTS", "8")
            .env("LEADPIPE_INBOX_MAX_ATTEMPTS")
            .help("Processing attempts per inbox event before it is `dead`")
    }
}

/// `--delivery-max-attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryAttempts;

impl Attempts for DeliveryAttempts {
    const ID: &'static str = "delivery_max_attempts";
    fn arg() -> Arg {
        attempts_arg(
            Self::ID,
            "delivery-max-attempts",
            "DELIVERY_MAX_ATTEMPTS",
            "8",
        )
        .env("LEADPIPE_DELIVERY_MAX_ATTEMPTS")
        .help("Attempts per outgoing delivery before it is `dead`")
    }
}

/// `--reconcile-max-attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileAttempts;

impl Attempts for ReconcileAttempts {
    const ID: &'static str = "reconcile_max_attempts";
    fn arg() -> Arg {
        attempts_arg(
            Self::ID,
            "reconcile-max-attempts",
            "RECONCILE_MAX_ATTEMPTS",
            "6",
        )
        .env("LEADPIPE_RECONCILE_MAX_ATTEMPTS")
        .help("Attempts per reconcile page (transient errors) before the run fails")
    }
}

/// `--{long} <{VALUE}>`, a number of attempts.
fn attempts_arg(
    id: &'static str,
    long: &'static str,
    value: &'static str,
    default: &'static str,
) -> Arg {
    Arg::new(id)
        .long(long)
        .value_name(value)
        .default_value(default)
        .value_parser(clap::value_parser!(u32))
}

const RETRY_BASE: &str = "retry_base";
const RETRY_CAP: &str = "retry_cap";

impl<Q> Retry<Q> {
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            queue: PhantomData,
        }
    }
}

impl<Q> From<RetryPolicy> for Retry<Q> {
    fn from(policy: RetryPolicy) -> Self {
        Self::new(policy)
    }
}

impl<Q> Deref for Retry<Q> {
    type Target = RetryPolicy;
    fn deref(&self) -> &RetryPolicy {
        &self.policy
    }
}

impl<Q> DerefMut for Retry<Q> {
    fn deref_mut(&mut self) -> &mut RetryPolicy {
        &mut self.policy
    }
}

impl<Q: Attempts> Args for Retry<Q> {
    fn augment_args(command: Command) -> Command {
        let command = command.arg(Q::arg());
        if command.get_arguments().any(|a| a.get_id() == RETRY_BASE) {
            return command;
        }
        command
            .arg(
                Arg::new(RETRY_BASE)
                    .long("retry-base")
                    .env("LEADPIPE_RETRY_BASE")
                    .default_value("1s")
                    .value_name("RETRY_BASE")
                    .value_parser(parse_duration)
                    .help("Backoff ceiling of the first retry; doubles per attempt (full jitter)")
                    .long_help(
                        "Backoff ceiling of the first retry; doubles per attempt (full \
                         jitter).\n\n\
                         Shared by every retry: inbox events, lead processing, outgoing \
                         deliveries and reconcile pages. At most `LEADPIPE_RETRY_CAP`.",
                    ),
            )
            .arg(
                Arg::new(RETRY_CAP)
                    .long("retry-cap")
                    .env("LEADPIPE_RETRY_CAP")
                    .default_value("5m")
                    .value_name("RETRY_CAP")
                    .value_parser(parse_duration)
                    .help("Largest backoff ceiling"),
            )
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl<Q: Attempts> FromArgMatches for Retry<Q> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self::new(RetryPolicy {
            base: value(matches, RETRY_BASE)?,
            cap: value(matches, RETRY_CAP)?,
            max_attempts: value(matches, Q::ID)?,
        }))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        if matches.contains_id(RETRY_BASE) {
            self.policy.base = value(matches, RETRY_BASE)?;
        }
        if matches.contains_id(RETRY_CAP) {
            self.policy.cap = value(matches, RETRY_CAP)?;
        }
        if matches.contains_id(Q::ID) {
            self.policy.max_attempts = value(matches, Q::ID)?;
        }
        Ok(())
    }
}

/// A value of the matches, left in place: several queues read the backoff.
fn value<T: Clone + Send + Sync + 'static>(
    matches: &ArgMatches,
    id: &str,
) -> Result<T, clap::Error> {
    match matches.try_get_one::<T>(id) {
        Ok(Some(value)) => Ok(value.clone()),
        Ok(None) => Err(clap::Error::raw(
            clap::error::ErrorKind::MissingRequiredArgument,
            format!("the following required argument was not provided: {id}"),
        )),
        Err(err) => Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidValue,
            format!("{id}: {err}"),
        )),
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

    /// The defaults are the flags' own, and every queue reads the one
    /// backoff the command line has.
    #[test]
    fn the_defaults_are_the_flags_defaults() {
        let settings = WorkerSettings::default();
        assert_eq!(settings.concurrency, 4);
        assert_eq!(settings.batch_size, 100);
        assert_eq!(settings.poll_interval, Duration::from_millis(500));
        assert_eq!(settings.lease, Duration::from_secs(300));
        assert_eq!(settings.retention.interval, Duration::from_secs(600));
        assert_eq!(
            settings.retention.rules(),
            domain::retention::RetentionRules::default()
        );
        assert_eq!(settings.publisher.batch, 256);
        assert_eq!(
            settings.reconcile.scheduler_interval,
            Duration::from_secs(1)
        );
        for (policy, attempts) in [
            (*settings.retry, 8),
            (*settings.publisher.retry, 8),
            (*settings.reconcile.retry, 6),
        ] {
            assert_eq!(
                policy,
                RetryPolicy {
                    base: Duration::from_secs(1),
                    cap: Duration::from_secs(300),
                    max_attempts: attempts,
                }
            );
        }
        settings.validate().unwrap();
    }
}
