//! The worker role of `leadpipe serve` and `leadpipe work`: the apalis worker
//! for inbox jobs plus the sweeper, until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apalis::layers::WorkerBuilderExt;
use apalis::prelude::{BackendExt, WorkerBuilder, WorkerError};
use sea_orm::DatabaseConnection;
use tokio::sync::watch;

use crate::inbox_job::{InboxProcessor, run_job};
use crate::poll::Ticker;
use crate::queue::InboxQueue;
use crate::settings::WorkerSettings;
use crate::shutdown::{stopped, until_stopped};
use crate::storage::StorageError;
use crate::sweeper;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("invalid worker settings: {0}")]
    Settings(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Runs the workers until `shutdown` resolves, then lets in-flight jobs
/// finish. A worker whose backend fails (the database went away) is
/// restarted under a new name after a pause.
pub async fn run(
    db: DatabaseConnection,
    settings: WorkerSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RuntimeError> {
    settings.validate().map_err(RuntimeError::Settings)?;
    let queue = InboxQueue::for_connection(&db)?;
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });

    let sweeper = tokio::spawn(sweeper::run(
        db.clone(),
        queue.clone(),
        settings.sweep,
        settings.sweep_interval,
        stop.clone(),
    ));
    // The loops whose state lives wholly in their tables: outbox publishing,
    // lead processing, housekeeping. Stopped with the rest.
    let publisher = crate::publisher::Publisher::new(db.clone(), settings.publisher.clone())
        .map_err(|e| RuntimeError::Settings(format!("cannot build the HTTP client: {e}")))?;
    let reconciler = crate::reconcile::Reconciler::new(db.clone(), settings.reconcile.clone())
        .map_err(|e| RuntimeError::Settings(format!("cannot build the HTTP client: {e}")))?;
    let loops = [
        tokio::spawn(publisher.run(settings.poll_interval, stop.clone())),
        // Finishes its batch on stop, so not wrapped in `until_stopped`.
        tokio::spawn(crate::lead_processor::run(
            db.clone(),
            settings.poll_interval,
            settings.batch_size as u64,
            stop.clone(),
        )),
        tokio::spawn(until_stopped(
            crate::housekeeping::run(
                db.clone(),
                settings.sweep_interval,
                settings.job_retention,
                settings.retention,
            ),
            stop.clone(),
        )),
        // Interrupts its own runs on stop, so not wrapped in `until_stopped`.
        tokio::spawn(crate::reconcile::scheduler::run(
            Arc::new(reconciler),
            stop.clone(),
        )),
    ];

    let base = worker_base_name();
    let processor = Arc::new(InboxProcessor::new(
        db.clone(),
        queue.clone(),
        settings.clone(),
        base.clone(),
    ));
    tracing::info!(worker = %base, concurrency = settings.concurrency, batch = settings.batch_size, "inbox worker starting");
    let mut drains: Vec<_> = (0..settings.concurrency)
        .map(|_| tokio::spawn(processor.clone().drain_loop(stop.clone())))
        .collect();
    if db.get_database_backend() == sea_orm::DatabaseBackend::Postgres {
        drains.push(tokio::spawn(crate::wake::listen(db.clone(), stop.clone())));
    }
    let mut restarts: u32 = 0;
    loop {
        // apalis refuses a name whose last heartbeat is recent, so every
        // (re)start registers a new one.
        let name = format!("{base}-{restarts}");
        let result = run_worker(&name, &queue, &settings, processor.clone(), stop.clone()).await;
        if *stop.borrow() {
            break;
        }
        match result {
            Ok(()) => tracing::warn!(worker = %name, "inbox worker stopped; restarting"),
            Err(error) => {
                tracing::error!(worker = %name, %error, "inbox worker failed; restarting")
            }
        }
        restarts = restarts.saturating_add(1);
        let pause = Duration::from_secs(1u64 << restarts.min(5));
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stopped(stop.clone()) => break,
        }
    }
    let _ = sweeper.await;
    for task in drains {
        let _ = task.await;
    }
    for task in loops {
        let _ = task.await;
    }
    tracing::info!(worker = %base, "inbox worker stopped");
    Ok(())
}

async fn run_worker(
    name: &str,
    queue: &InboxQueue,
    settings: &WorkerSettings,
    processor: Arc<InboxProcessor>,
    stop: watch::Receiver<bool>,
) -> Result<(), WorkerError> {
    let stopped = async move {
        stopped(stop).await;
        Ok::<(), WorkerError>(())
    };
    match queue {
        InboxQueue::Sqlite(storage) => {
            WorkerBuilder::new(name)
                .backend(
                    storage
                        .clone()
                        .poll_with_strategy(Ticker::new(settings.poll_interval)),
                )
                .concurrency(settings.concurrency)
                .data(processor)
                .build(run_job)
                .run_until(stopped)
                .await
        }
        InboxQueue::Postgres(storage) => {
            WorkerBuilder::new(name)
                .backend(
                    storage
                        .clone()
                        .poll_with_strategy(Ticker::new(settings.poll_interval)),
                )
                .concurrency(settings.concurrency)
                .data(processor)
                .build(run_job)
                .run_until(stopped)
                .await
        }
    }
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
