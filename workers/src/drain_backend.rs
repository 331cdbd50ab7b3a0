//! The apalis backend of work that was just stored: an inbox event, a lead's
//! new version. Its tasks are not job rows pushed per item (a receipt would
//! cost a second write, and a burst a job per event): they are taken from
//! the tables themselves. The fetcher waits for a wake-up (`crate::wake`) or
//! its poll, then asks its [`Source`] for a task; the row stays the record
//! of the work and its retries, and apalis runs the tasks (concurrency,
//! graceful stop) as it runs the retry and sweep jobs of its storages.
//!
//! apalis asks for the next task only when the worker has room for it, so a
//! task that claims rows (an inbox batch) holds them only while it runs.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use apalis::prelude::{BackendBuilder, CustomBackend, Task};
use futures::sink::Drain;
use futures::stream::{BoxStream, StreamExt};
use tokio::sync::watch;

/// Where a drain worker's tasks come from.
pub(crate) trait Source: Clone + Send + Sync + 'static {
    type Task: Send + 'static;

    /// The next task, or `None` when nothing is ready (the fetcher then
    /// waits for a wake-up or the poll). An error is logged and counts as
    /// nothing ready.
    fn fetch(&self) -> impl Future<Output = Result<Option<Self::Task>, String>> + Send;

    /// Whether to look again at once after a task, without waiting: true
    /// where a task takes its share of the work (a claimed batch), false
    /// where one task drains what it finds and asks for another pass itself.
    fn again_after_task(&self) -> bool;
}

type Tasks<T> = BoxStream<'static, Result<Option<Task<T>>, Infallible>>;

/// The backend type of a drain worker over `S`.
pub(crate) type DrainBackend<S> = CustomBackend<
    <S as Source>::Task,
    Fetcher<S>,
    Tasks<<S as Source>::Task>,
    Drain<Task<<S as Source>::Task>>,
>;

/// What the fetcher needs: the source, its wake-up signal, the poll
/// interval, and the stop signal (after which nothing more is fetched).
#[derive(Clone)]
pub(crate) struct Fetcher<S> {
    source: S,
    signal: watch::Receiver<u64>,
    tick: Duration,
    stop: watch::Receiver<bool>,
}

/// A backend whose tasks `source` fetches when `signal` is bumped, every
/// `tick`, and (for a source that takes its share) again at once after each
/// task, until `stop`. Nothing can be pushed to it: the work is whatever its
/// tables hold, and what stores work wakes it through `crate::wake`.
pub(crate) fn backend<S: Source>(
    source: S,
    signal: watch::Receiver<u64>,
    tick: Duration,
    stop: watch::Receiver<bool>,
) -> DrainBackend<S> {
    let fetcher = Fetcher {
        source,
        signal,
        tick,
        stop,
    };
    let built = BackendBuilder::new()
        .database(fetcher)
        .fetcher(|fetcher: &mut Fetcher<S>, _: &(), _| tasks(fetcher.clone()))
        .sink(|_, _| futures::sink::drain())
        .build();
    match built {
        Ok(backend) => backend,
        // Only a missing part fails the build, and every part is set above.
        Err(error) => unreachable!("drain backend incomplete: {error}"),
    }
}

fn tasks<S: Source>(fetcher: Fetcher<S>) -> Tasks<S::Task> {
    futures::stream::unfold((fetcher, true), |(mut fetcher, mut look_now)| async move {
        loop {
            if *fetcher.stop.borrow() {
                // The worker is stopping: claim nothing it would not run.
                std::future::pending::<()>().await;
            }
            if !look_now
                && !crate::wake::next(&mut fetcher.signal, fetcher.tick, &fetcher.stop).await
            {
                continue;
            }
            // Seen before looking: a wake-up during the fetch means another look.
            fetcher.signal.borrow_and_update();
            match fetcher.source.fetch().await {
                Ok(Some(task)) => {
                    let again = fetcher.source.again_after_task();
                    return Some((Ok(Some(Task::new(task))), (fetcher, again)));
                }
                Ok(None) => look_now = false,
                Err(error) => {
                    tracing::warn!(%error, "looking for work failed; the next wake-up or poll will retry");
                    look_now = false;
                }
            }
        }
    })
    .boxed()
}
