//! The one apalis backend of every background worker: a task is not a job
//! row pushed per item, it is a pass over a table that holds the work (the
//! inbox, the lead backlog, the outbox, reconcile schedules, what retention
//! removes), which claims its batch when it runs. The row stays the record
//! of the work and its retries (`state`, `attempts`, lease,
//! `next_attempt_at`): a retry comes due, or a lease runs out, and the next
//! pass claims it like a new row. There is no second job store to push to,
//! and nothing to re-push. apalis runs the passes: concurrency, graceful
//! stop, tracing and the task metrics.
//!
//! The backend hands out a pass when its signal is bumped (`crate::wake`:
//! the write that stored the work, or a pass that found more) or at its
//! poll, and only when the worker has room for it; a worker may ask for a
//! least time between the starts of two passes (the lead drain's 20 ms), so
//! a stream of small writes shares passes. A pass that found work
//! bumps the signal again, so a backlog is drained by as many passes at once
//! as the worker allows. The claim is inside the task, not the fetch: a
//! stopping worker finishes the tasks it started and starts none, so no
//! claim is cut off half-way.

use std::convert::Infallible;
use std::time::Duration;

use apalis::prelude::{BackendBuilder, CustomBackend, RandomId, Task, TaskBuilder, TaskId};
use futures::sink::Drain;
use futures::stream::{BoxStream, StreamExt};
use tokio::sync::watch;

/// Never yields `Ok(None)`: `CustomBackend` takes that for the end of the
/// stream, and the worker would exit.
type Passes<T> = BoxStream<'static, Result<Option<Task<T>>, Infallible>>;

/// The backend type of a drain worker whose passes are `T`.
pub(crate) type DrainBackend<T> = CustomBackend<T, Fetcher<T>, Passes<T>, Drain<Task<T>>>;

/// What the fetcher needs: the pass it hands out, its wake-up signal (none
/// for work that only a clock makes due), the poll interval, and the stop
/// signal (after which it hands out nothing).
#[derive(Clone)]
pub(crate) struct Fetcher<T> {
    pass: T,
    signal: Option<watch::Receiver<u64>>,
    tick: Duration,
    /// The least time between the starts of two passes: a bump that comes
    /// sooner waits out the rest, so the writes made meanwhile share one
    /// pass (zero: at once). Passes that take longer are not slowed.
    gather: Duration,
    stop: watch::Receiver<bool>,
}

/// A backend that hands out `pass` at once, then whenever `signal` is
/// bumped and every `tick`, until `stop`. Nothing can be pushed to it: the
/// work is whatever its table holds, and what stores work wakes it.
pub(crate) fn backend<T: Clone + Send + Sync + 'static>(
    pass: T,
    signal: Option<watch::Receiver<u64>>,
    tick: Duration,
    gather: Duration,
    stop: watch::Receiver<bool>,
) -> DrainBackend<T> {
    let fetcher = Fetcher {
        pass,
        signal,
        tick,
        gather,
        stop,
    };
    let built = BackendBuilder::new()
        .database(fetcher)
        .fetcher(|fetcher: &mut Fetcher<T>, _: &(), _| passes(fetcher.clone()))
        .sink(|_, _| futures::sink::drain())
        .build();
    match built {
        Ok(backend) => backend,
        // Only a missing part fails the build, and every part is set above.
        Err(error) => unreachable!("drain backend incomplete: {error}"),
    }
}

fn passes<T: Clone + Send + Sync + 'static>(fetcher: Fetcher<T>) -> Passes<T> {
    let started = tokio::time::Instant::now();
    futures::stream::unfold(
        (fetcher, true, started),
        |(mut fetcher, first, last)| async move {
            let go_on = first
                || crate::wake::next(fetcher.signal.as_mut(), fetcher.tick, &fetcher.stop).await;
            if go_on && !first {
                tokio::select! {
                    () = tokio::time::sleep_until(last + fetcher.gather) => {}
                    () = crate::shutdown::stopped(fetcher.stop.clone()) => {}
                }
            }
            let handed_out = tokio::time::Instant::now();
            if !go_on || *fetcher.stop.borrow() {
                // The worker is stopping: start nothing it would not finish.
                std::future::pending::<()>().await;
            }
            // Seen before the pass runs: a bump during it means another pass.
            if let Some(signal) = fetcher.signal.as_mut() {
                signal.borrow_and_update();
            }
            let task = TaskBuilder::new(fetcher.pass.clone())
                .task_id(TaskId::from_string(RandomId::default().to_string()))
                .build();
            Some((Ok(Some(task)), (fetcher, false, handed_out)))
        },
    )
    .boxed()
}
