//! Housekeeping that runs in every worker process, as two apalis workers
//! whose passes come by the clock: deleting what has outlived its retention
//! (`domain::retention`), and expired idempotency keys, import runs whose
//! process died and an erasure's unfinished scrub. Every step is an
//! idempotent statement, so several nodes running it at once do no harm.

use domain::store::Store;
use std::sync::Arc;
use std::time::Duration;

use apalis::prelude::{BoxDynError, Data};
use domain::retention::{RetentionRules, Swept};
use futures::future::{BoxFuture, FutureExt};

pub use crate::settings::RetentionSettings;

/// How often housekeeping runs at least: an abandoned import is noticed,
/// and an erasure's pending scrub retried, within seconds.
const MAX_INTERVAL: Duration = Duration::from_secs(5);

/// Deletes expired Idempotency-Keys; returns how many.
pub async fn sweep_once(db: &Store) -> Result<u64, domain::Error> {
    let deleted = domain::idempotency::sweep_expired(db, domain::clock::now()).await?;
    if deleted > 0 {
        tracing::info!(deleted, "swept expired idempotency keys");
    }
    Ok(deleted)
}

/// Marks imports whose process died (no heartbeat for `after`) `abandoned`.
pub async fn abandon_silent_imports(db: &Store, after: Duration) -> Result<u64, domain::Error> {
    let abandoned = domain::import::abandon_silent_runs(db, domain::clock::now(), after).await?;
    if abandoned > 0 {
        tracing::warn!(
            abandoned,
            "marked import runs abandoned: their process stopped"
        );
    }
    Ok(abandoned)
}

/// Deletes (or empties) what has outlived its retention; counts it in
/// `leadpipe_retention_removed_total{kind}` and stamps
/// `leadpipe_retention_last_sweep_timestamp_seconds` when the sweep ends.
pub async fn sweep_retention(db: &Store, rules: &RetentionRules) -> Result<Swept, domain::Error> {
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

/// Marks available the sales principals whose return time has passed, and
/// routes the leads waiting for an owner again if any came back.
pub async fn end_past_absences(db: &Store) -> Result<u64, domain::Error> {
    let now = domain::clock::now();
    // A read first: an idle process takes no write turn for this.
    if !domain::routing::staff::has_past_absences(db, now).await? {
        return Ok(0);
    }
    let txn = db.begin_write().await?;
    let back = domain::routing::staff::end_past_absences(&*txn, now).await?;
    txn.enqueued(domain::store::Work::Leads);
    txn.commit().await?;
    if back > 0 {
        tracing::info!(back, "sales principals back from away");
    }
    Ok(back)
}

/// Hands overdue, unanswered leads to whom their team's escalation names.
pub async fn escalate_overdue(db: &Store) -> Result<u64, domain::Error> {
    use domain::lead::speed_to_lead::escalation;
    // A read first: an idle process takes no write turn for this.
    if escalation::escalatable(db, domain::clock::now()).await? == 0 {
        return Ok(0);
    }
    let txn = db.begin_write().await?;
    // After the write turn: waiting for it must not backdate the new due times.
    let moved = escalation::escalate_overdue(&*txn, domain::clock::now()).await?;
    txn.enqueued(domain::store::Work::Leads);
    txn.commit().await?;
    if moved > 0 {
        tracing::info!(moved, "overdue leads escalated to another owner");
    }
    Ok(moved)
}

/// How often the housekeeping worker's passes come: every `interval`, at
/// most [`MAX_INTERVAL`].
pub(crate) fn housekeeping_tick(interval: Duration) -> Duration {
    interval.min(MAX_INTERVAL)
}

/// A pass of the housekeeping worker: expired idempotency keys, imports
/// whose process died, sales principals back from away, overdue leads to
/// escalate, an erasure's scrub that could not finish.
#[derive(Debug, Clone, Copy)]
pub struct HousekeepingPass;

/// A pass of the retention worker: one retention sweep.
#[derive(Debug, Clone, Copy)]
pub struct RetentionPass;

/// The apalis task function of housekeeping; returns how many rows it
/// changed. Each step is tried whatever the one before came to.
///
/// Boxed: the pass runs on a tokio task of its own, and rustc proves its
/// future `Send` only here, where the lifetimes are concrete.
pub(crate) fn run_housekeeping(
    _: HousekeepingPass,
    db: Data<Store>,
) -> BoxFuture<'static, Result<usize, BoxDynError>> {
    let db = (*db).clone();
    async move {
        let keys = sweep_once(&db).await.inspect_err(|err| {
            tracing::warn!(error = %err, "idempotency sweep failed; retrying next tick");
        });
        let imports = abandon_silent_imports(&db, domain::import::ABANDONED_AFTER)
            .await
            .inspect_err(|err| {
                tracing::warn!(error = %err, "looking for abandoned imports failed; retrying next tick");
            });
        let returns = end_past_absences(&db).await.inspect_err(|err| {
            tracing::warn!(error = %err, "looking for principals back from away failed; retrying next tick");
        });
        let escalated = escalate_overdue(&db).await.inspect_err(|err| {
            tracing::warn!(error = %err, "escalating overdue leads failed; retrying next tick");
        });
        // A WAL checkpoint or vacuum after an erasure that could not finish.
        db.scrub_if_pending(domain::erasure::ERASED_TABLES).await;
        let changed = keys?
            .saturating_add(imports?)
            .saturating_add(returns?)
            .saturating_add(escalated?);
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }
    .boxed()
}

/// What the retention worker's passes need.
pub(crate) struct Retention {
    pub db: Store,
    pub rules: RetentionRules,
}

/// The apalis task function of retention: one sweep; returns whether it
/// removed anything (1) or not (0).
pub(crate) fn run_retention(
    _: RetentionPass,
    retention: Data<Arc<Retention>>,
) -> BoxFuture<'static, Result<usize, BoxDynError>> {
    let retention = (*retention).clone();
    async move {
        let swept = sweep_retention(&retention.db, &retention.rules)
            .await
            .inspect_err(|err| {
                tracing::warn!(error = %err, "retention sweep failed; retrying next time");
            })?;
        Ok(usize::from(swept != Swept::default()))
    }
    .boxed()
}
