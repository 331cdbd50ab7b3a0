//! Imports running in this process, so a graceful stop waits for them
//! instead of leaving their runs `running` (and later `abandoned`).
//!
//! An import outlives the request that started it, so it runs on the main
//! runtime, not on the HTTP worker that took the upload (those stop with
//! the server).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long stopped imports get to commit their batch in flight and record
/// `interrupted`.
const STOP_WAIT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct ImportTasks {
    running: Arc<watch::Sender<usize>>,
    stop: Arc<watch::Sender<bool>>,
    runtime: tokio::runtime::Handle,
}

/// Counts one running import until dropped (a panic included).
struct Running(Arc<watch::Sender<usize>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl ImportTasks {
    /// Spawns on the current runtime: call it from the main one.
    pub fn on_current_runtime() -> Self {
        Self {
            running: Arc::new(watch::channel(0).0),
            stop: Arc::new(watch::channel(false).0),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Runs `import`, handing it a future that completes when the grace
    /// period of a stop has run out.
    pub fn spawn<F, Fut>(&self, import: F)
    where
        F: FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut,
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
        let task = import(stopped);
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
