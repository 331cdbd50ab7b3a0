//! Housekeeping that runs in every process: deleting what has outlived its
//! retention (`domain::retention`), and closing import runs whose process
//! died. Every step is an
//! idempotent statement, so several nodes running it at once do no harm.

use std::time::Duration;

use domain::retention::{RetentionRules, Swept};
use sea_orm::{DatabaseConnection, DbErr};

/// How often housekeeping runs at least: an abandoned import is noticed,
/// and an erasure's pending scrub retried, within seconds.
const MAX_INTERVAL: Duration = Duration::from_secs(5);

/// Deletes expired Idempotency-Keys; returns how many.
pub async fn sweep_once(db: &DatabaseConnection) -> Result<u64, sea_orm::DbErr> {
    let deleted = domain::idempotency::sweep_expired(db, domain::clock::now()).await?;
    if deleted > 0 {
        tracing::info!(deleted, "swept expired idempotency keys");
    }
    Ok(deleted)
}

/// Marks imports whose process died (no heartbeat for `after`) `abandoned`.
pub async fn abandon_silent_imports(
    db: &DatabaseConnection,
    after: Duration,
) -> Result<u64, DbErr> {
    let abandoned = domain::import::abandon_silent_runs(db, domain::clock::now(), after).await?;
    if abandoned > 0 {
        tracing::warn!(
            abandoned,
            "marked import runs abandoned: their process stopped"
        );
    }
    Ok(abandoned)
}

/// How retention runs: its rules, and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionSettings {
    pub rules: RetentionRules,
    pub interval: Duration,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        Self {
            rules: RetentionRules::default(),
            interval: Duration::from_secs(600),
        }
    }
}

/// Deletes (or empties) what has outlived its retention; counts it in
/// `leadpipe_retention_removed_total{kind}` and stamps
/// `leadpipe_retention_last_sweep_timestamp_seconds` when the sweep ends.
pub async fn sweep_retention(
    db: &DatabaseConnection,
    rules: &RetentionRules,
) -> Result<Swept, DbErr> {
    let now = domain::clock::now();
    let mut swept = Swept::default();
    let result = domain::retention::sweep(db, rules, now, &mut swept).await;
    // What committed before a failure is gone and is counted now.
    for (kind, removed) in swept.by_kind() {
        metrics::counter!("leadpipe_retention_removed_total", "kind" => kind).increment(removed);
    }
    result?;
    metrics::gauge!("leadpipe_retention_last_sweep_timestamp_seconds")
        .set(domain::clock::now().timestamp() as f64);
    if swept != Swept::default() {
        tracing::info!(
            inbox_bodies = swept.inbox_bodies,
            inbox_events = swept.inbox_events,
            outbox_events = swept.outbox_events,
            outbox_deliveries = swept.outbox_deliveries,
            import_rows = swept.import_rows,
            reconcile_rejected = swept.reconcile_rejected,
            "retention sweep removed data past its retention"
        );
    }
    Ok(swept)
}

/// Sweeps every `interval` (at most [`MAX_INTERVAL`]) until the task is
/// dropped; retention runs on its own, longer interval.
pub async fn run(db: DatabaseConnection, interval: Duration, retention: RetentionSettings) {
    let mut ticker = tokio::time::interval(interval.min(MAX_INTERVAL));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut retention_ticker = tokio::time::interval(retention.interval);
    retention_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = retention_ticker.tick() => {
                if let Err(err) = sweep_retention(&db, &retention.rules).await {
                    tracing::warn!(error = %err, "retention sweep failed; retrying next time");
                }
                continue;
            }
        }
        if let Err(err) = sweep_once(&db).await {
            tracing::warn!(error = %err, "idempotency sweep failed; retrying next tick");
        }
        if let Err(err) = abandon_silent_imports(&db, domain::import::ABANDONED_AFTER).await {
            tracing::warn!(error = %err, "looking for abandoned imports failed; retrying next tick");
        }
        // A WAL checkpoint or vacuum after an erasure that could not finish.
        domain::db::scrub_if_pending(&db, domain::lead::erasure::ERASED_TABLES).await;
    }
}
