//! The stop signal every background loop waits on. Its own module so the
//! loops need not name `runtime`, which starts them.

use std::future::Future;

use tokio::sync::watch;

/// Runs `work` until shutdown is asked for. The loops hold no state outside
/// the database, so dropping one between passes loses nothing.
pub(crate) async fn until_stopped(work: impl Future<Output = ()>, stop: watch::Receiver<bool>) {
    tokio::select! {
        () = work => {}
        () = stopped(stop) => {}
    }
}

/// Resolves once shutdown was asked for (or its sender is gone).
pub(crate) async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}
