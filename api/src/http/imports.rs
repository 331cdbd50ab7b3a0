//! Imports running in this process, so a graceful stop waits for them
//! instead of leaving their runs `running` (and later `abandoned`).
//!
//! An import outlives the request that started it, so it runs on the main
//! runtime, not on the HTTP worker that took the upload (those stop with
//! the server), and on connections of its own that main runtime opened:
//! one an HTTP worker opened fails once that worker has stopped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use domain::store::Store;
use tokio::sync::watch;

/// Connections the imports of one process share: a batch in flight and a
/// heartbeat each, a few imports at once.
const IMPORT_CONNECTIONS: u32 = 4;

/// How long stopped imports get to commit their batch in flight and record
/// `interrupted`.
const STOP_WAIT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct ImportTasks {
    running: Arc<watch::Sender<usize>>,
    stop: Arc<watch::Sender<bool>>,
    runtime: tokio::runtime::Handle,
    db: Store,
}

/// Counts one running import until dropped (a panic included).
struct Running(Arc<watch::Sender<usize>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl ImportTasks {
    /// Spawns on the current runtime, on a pool of `db`'s database of its
    /// own: call it from the main one.
    pub fn on_current_runtime(db: &Store) -> Self {
        Self {
            running: Arc::new(watch::channel(0).0),
            stop: Arc::new(watch::channel(false).0),
            runtime: tokio::runtime::Handle::current(),
            db: crate::storage::lazy_pool_of_its_own(db, IMPORT_CONNECTIONS),
        }
    }

    /// Runs `import` with the imports' store, handing it a future that
    /// completes when the grace period of a stop has run out.
    pub fn spawn<F, Fut>(&self, import: F)
    where
        F: FnOnce(Store, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.running.send_modify(|n| *n += 1);
        let running = Running(self.running.clone());
        let mut stop = self.stop.subscribe();
        let stopped = Box::pin(async move {
            if stop.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        });
        let task = import(self.db.clone(), stopped);
        self.runtime.spawn(async move {
            let _running = running;
            task.await;
        });
    }

    /// Imports running now.
    pub fn running(&self) -> usize {
        *self.running.borrow()
    }

    /// Waits up to `grace` for the running imports to finish; then tells
    /// the rest to stop after their batch in flight (their runs end
    /// `interrupted`) and waits for that.
    pub async fn drain(&self, grace: Duration) {
        let running = self.running();
        if running == 0 {
            return;
        }
        tracing::info!(
            running,
            grace_secs = grace.as_secs(),
            "waiting for running imports to finish"
        );
        let mut count = self.running.subscribe();
        if tokio::time::timeout(grace, count.wait_for(|n| *n == 0))
            .await
            .is_ok()
        {
            tracing::info!("running imports finished");
            return;
        }
        tracing::warn!(
            running = self.running(),
            "grace period over: stopping imports after their current batch (they end interrupted)"
        );
        self.stop.send_replace(true);
        if tokio::time::timeout(STOP_WAIT, count.wait_for(|n| *n == 0))
            .await
            .is_err()
        {
            tracing::error!(
                running = self.running(),
                "imports did not stop in time; the sweeper will mark them abandoned"
            );
        }
    }
}
