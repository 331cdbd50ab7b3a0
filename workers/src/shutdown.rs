//! The stop signal every background loop waits on. Its own module so the
//! loops need not name `runtime`, which starts them.

use tokio::sync::watch;

/// Resolves once shutdown was asked for (or its sender is gone).
pub(crate) async fn stopped(mut stop: watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}
