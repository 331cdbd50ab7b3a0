//! The worker role of `leadpipe serve` and `leadpipe work`: the apalis
//! workers, each over a backend that hands out passes over the table that
//! holds its work (`crate::drain_backend`), and the wake-up listener, until
//! shutdown.

use domain::store::Store;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apalis::layers::WorkerBuilderExt;
use apalis::prelude::{Event, EventListenerExt, ParallelizeExt, WorkerBuilder, WorkerError};
use futures::FutureExt;
use tokio::sync::watch;

use crate::housekeeping::{HousekeepingPass, Retention, RetentionPass};
use crate::inbox_job::{InboxPass, InboxProcessor};
use crate::lead_processor::{BacklogPass, LeadProcessor};
use crate::publisher::{PublisherRun, PublisherTask};
use crate::reconcile::scheduler::{SchedulePass, Scheduler};
use crate::settings::WorkerSettings;
use crate::shutdown::stopped;

/// The least time between two lead passes' starts: the leads written
/// meanwhile share one claim. Without it, every intake commit took a pass
/// of its own, and each pass's commit woke another; SQLite with its
/// workers in the process took 17–23% fewer requests a second
/// (docs/performance.md, 2026-12-06 late).
const LEAD_PASS_GATHER: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("invalid worker settings: {0}")]
    Settings(String),
}

/// An apalis worker over a drain backend (`crate::drain_backend`): it is
/// handed a `$pass` when `$signal` is bumped or every `$poll`, and `$job`
/// runs up to `$concurrency` passes at once.
macro_rules! drain_worker {
    ($name:expr, $label:expr, $pass:expr, $signal:expr, $poll:expr, $gather:expr, $concurrency:expr, $data:expr, $job:expr, $stop:expr $(,)?) => {{
        let stop = $stop;
        let backend = crate::drain_backend::backend($pass, $signal, $poll, $gather, stop.clone());
        let stopped = async move {
            stopped(stop).await;
            Ok::<(), WorkerError>(())
        };
        WorkerBuilder::new($name)
            .backend(backend)
            .on_event(|_, event| count_task($label, event))
            .concurrency($concurrency)
            .data($data)
            // Each task on its own tokio task: apalis otherwise runs a
            // worker's tasks inside the worker's future, one thread.
            .parallelize(tokio::spawn)
            .build($job)
            .run_until(stopped)
            // Boxed where its types are concrete: unboxed, rustc cannot
            // prove the spawned `run` future `Send` (a higher-ranked
            // lifetime error through the batch futures).
            .boxed()
    }};
}

/// Runs the workers until `shutdown` resolves, then lets in-flight jobs
/// finish. A worker whose backend fails (the database went away) is
/// restarted under a new name after a pause.
pub async fn run(
    db: Store,
    settings: WorkerSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RuntimeError> {
    settings.validate().map_err(RuntimeError::Settings)?;
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let publisher = crate::publisher::Publisher::new(db.clone(), settings.publisher.clone())
        .map_err(|e| RuntimeError::Settings(format!("cannot build the HTTP client: {e}")))?;
    let reconciler = crate::reconcile::Reconciler::new(db.clone(), settings.reconcile.clone())
        .map_err(|e| RuntimeError::Settings(format!("cannot build the HTTP client: {e}")))?;
    let base = worker_base_name();
    let processor = Arc::new(InboxProcessor::new(
        db.clone(),
        settings.clone(),
        base.clone(),
    ));
    tracing::info!(worker = %base, concurrency = settings.concurrency, batch = settings.batch_size, "inbox worker starting");
    let leads = Arc::new(LeadProcessor::new(db.clone(), settings.clone()));
    // Other processes announce their work by NOTIFY, on PostgreSQL alone.
    if db.postgres_pool().is_some() && matches!(db.wake_ups(), domain::store::WakeUps::Polling) {
        tracing::warn!(
            poll_interval = ?settings.poll_interval,
            "behind a transaction-mode pooler without DATABASE_DIRECT_URL: workers find new work by polling, not by LISTEN"
        );
    }
    let listener = db
        .postgres_pool()
        .is_some()
        .then(|| tokio::spawn(crate::wake::listen(db.clone(), stop.clone())));
    // What this process's workers commit (a reconcile page) is announced to
    // the others too; a no-op where `serve` started it already.
    tokio::spawn(crate::wake::announce(db.clone()));
    // Each worker on a tokio task of its own, so none is polled because
    // another's future was woken.
    let inbox_drain = {
        let (db, processor, settings, stop) = (
            db.clone(),
            processor.clone(),
            settings.clone(),
            stop.clone(),
        );
        tokio::spawn(supervise(
            base.clone(),
            "inbox-drain",
            stop.clone(),
            move |name| {
                drain_worker!(
                    name,
                    "inbox_drain",
                    InboxPass,
                    Some(db.signals().inbox_work()),
                    settings.poll_interval,
                    Duration::ZERO,
                    settings.concurrency,
                    processor.clone(),
                    crate::inbox_job::run_pass,
                    stop.clone(),
                )
            },
        ))
    };
    let lead_drain = {
        let (db, leads, settings, stop) =
            (db.clone(), leads.clone(), settings.clone(), stop.clone());
        tokio::spawn(supervise(
            base.clone(),
            "lead-drain",
            stop.clone(),
            move |name| {
                // One pass at a time: a pass takes a whole batch, and several
                // passes in one process would only contend for the same rows.
                drain_worker!(
                    name,
                    "lead_drain",
                    BacklogPass,
                    Some(db.signals().lead_work()),
                    settings.poll_interval,
                    LEAD_PASS_GATHER,
                    1,
                    leads.clone(),
                    crate::lead_processor::run_pass,
                    stop.clone(),
                )
            },
        ))
    };
    let publisher = {
        let task = Arc::new(PublisherTask {
            publisher,
            idle: settings.poll_interval,
            stop: stop.clone(),
        });
        let stop = stop.clone();
        tokio::spawn(supervise(
            base.clone(),
            "publisher",
            stop.clone(),
            move |name| {
                // One task, which runs until stop: handed out again only
                // should it end early.
                drain_worker!(
                    name,
                    "publisher",
                    PublisherRun,
                    None,
                    Duration::from_secs(1),
                    Duration::ZERO,
                    1,
                    task.clone(),
                    crate::publisher::run_task,
                    stop.clone(),
                )
            },
        ))
    };
    let housekeeping = {
        let (db, settings, stop) = (db.clone(), settings.clone(), stop.clone());
        tokio::spawn(supervise(
            base.clone(),
            "housekeeping",
            stop.clone(),
            move |name| {
                drain_worker!(
                    name,
                    "housekeeping",
                    HousekeepingPass,
                    None,
                    crate::housekeeping::housekeeping_tick(settings.housekeeping_interval),
                    Duration::ZERO,
                    1,
                    db.clone(),
                    crate::housekeeping::run_housekeeping,
                    stop.clone(),
                )
            },
        ))
    };
    let retention = {
        let retention = Arc::new(Retention {
            db: db.clone(),
            rules: settings.retention.rules(),
        });
        let (every, stop) = (settings.retention.interval, stop.clone());
        tokio::spawn(supervise(
            base.clone(),
            "retention",
            stop.clone(),
            move |name| {
                drain_worker!(
                    name,
                    "retention",
                    RetentionPass,
                    None,
                    every,
                    Duration::ZERO,
                    1,
                    retention.clone(),
                    crate::housekeeping::run_retention,
                    stop.clone(),
                )
            },
        ))
    };
    let scheduler = Arc::new(Scheduler::new(Arc::new(reconciler), stop.clone()));
    let reconcile_scheduler = {
        let (scheduler, every, stop) = (
            scheduler.clone(),
            settings.reconcile.scheduler_interval,
            stop.clone(),
        );
        tokio::spawn(supervise(
            base.clone(),
            "reconcile-scheduler",
            stop.clone(),
            move |name| {
                drain_worker!(
                    name,
                    "reconcile_scheduler",
                    SchedulePass,
                    None,
                    every,
                    Duration::ZERO,
                    1,
                    scheduler.clone(),
                    crate::reconcile::scheduler::run_pass,
                    stop.clone(),
                )
            },
        ))
    };
    for worker in [
        inbox_drain,
        lead_drain,
        publisher,
        housekeeping,
        retention,
        reconcile_scheduler,
    ] {
        let _ = worker.await;
    }
    // The runs it started end at stop (interrupted).
    scheduler.finish().await;
    if let Some(task) = listener {
        let _ = task.await;
    }
    tracing::info!(worker = %base, "inbox worker stopped");
    Ok(())
}

/// Runs the apalis worker `start` makes until shutdown; a worker whose
/// backend fails (the database went away) is restarted under a new name
/// after a pause, since apalis refuses a name whose last heartbeat is recent.
async fn supervise<F, W>(base: String, kind: &str, stop: watch::Receiver<bool>, mut start: F)
where
    F: FnMut(String) -> W,
    W: Future<Output = Result<(), WorkerError>>,
{
    let mut restarts: u32 = 0;
    loop {
        let name = format!("{base}-{kind}-{restarts}");
        let result = start(name.clone()).await;
        if *stop.borrow() {
            break;
        }
        match result {
            Ok(()) => tracing::warn!(worker = %name, "apalis worker stopped; restarting"),
            Err(error) => {
                tracing::error!(worker = %name, %error, "apalis worker failed; restarting")
            }
        }
        restarts = restarts.saturating_add(1);
        let pause = Duration::from_secs(1u64 << restarts.min(5));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stopped(stop.clone()) => break,
        }
    }
}

/// Counts a finished task of the apalis worker `worker`
/// (`leadpipe_worker_tasks_total`): every kind of background work shows in
/// one series.
fn count_task(worker: &'static str, event: &Event) {
    let result = match event {
        // A drain's pass that found nothing (an idle poll) is not a task
        // worth counting.
        Event::Success(taken) if taken.downcast_ref::<usize>() == Some(&0) => return,
        Event::Success(_) => "ok",
        Event::Error(_) => "error",
        _ => return,
    };
    metrics::counter!("leadpipe_worker_tasks_total", "worker" => worker, "result" => result)
        .increment(1);
}

/// `leadpipe-<host>-<pid>-<random>`: unique per live process, and per
/// runtime within one (the tests run several).
fn worker_base_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!(
        "leadpipe-{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    )
}
