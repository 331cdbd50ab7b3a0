//! The end-to-end tests share one process, and a few things in it are
//! process-wide: the tombstone hashing keys the server installs when it
//! starts (`domain::lead::tombstone::install`), and the flag of a scrub
//! after an erasure that housekeeping retries (`domain::db`). A test that
//! changes or depends on one of those runs alone: its app holds the process
//! exclusively, every other app holds it shared while it lives.
//!
//! Shared holders never wait for a waiting exclusive one (a test may start
//! a second app while holding the first), so an exclusive holder waits for
//! a moment with no app alive. An app that holds the process exclusively
//! must be its test's only app.

use std::sync::{LazyLock, Mutex, PoisonError};

use tokio::sync::Notify;

struct Holders {
    shared: usize,
    exclusive: bool,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders {
    shared: 0,
    exclusive: false,
});
static RELEASED: LazyLock<Notify> = LazyLock::new(Notify::new);

/// The process, held shared or exclusively until dropped.
pub struct Hold {
    exclusive: bool,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut holders = HOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
        if self.exclusive {
            holders.exclusive = false;
        } else {
            holders.shared -= 1;
        }
        drop(holders);
        RELEASED.notify_waiters();
    }
}

async fn hold(exclusive: bool) -> Hold {
    loop {
        let released = RELEASED.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        {
            let mut holders = HOLDERS.lock().unwrap_or_else(PoisonError::into_inner);
            if exclusive && !holders.exclusive && holders.shared == 0 {
                holders.exclusive = true;
                return Hold { exclusive };
            }
            if !exclusive && !holders.exclusive {
                holders.shared += 1;
                return Hold { exclusive };
            }
        }
        released.await;
    }
}

/// Held by an ordinary test's app: it runs beside other ordinary tests.
pub async fn shared() -> Hold {
    hold(false).await
}

/// Held by the app of a test that must run alone.
pub async fn exclusive() -> Hold {
    hold(true).await
}
