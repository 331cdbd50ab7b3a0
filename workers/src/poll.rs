//! How an idle worker wakes up to look for jobs.
//!
//! apalis 1.0's `IntervalStrategy` replaces its elapsed timer without polling
//! the new one, so when the following fetch completes within the same poll
//! (an idle SQLite answers that fast) nothing is left to wake the worker: it
//! sleeps until its next heartbeat, 30 s later. This strategy polls the new
//! timer at once, which registers the wake-up for the next tick.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis::prelude::{PollSnapshot, PollStrategy};
use tokio::time::Sleep;

pub struct Ticker {
    every: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Ticker {
    pub fn new(every: Duration) -> Self {
        Self { every, sleep: None }
    }
}

impl Clone for Ticker {
    fn clone(&self) -> Self {
        Self::new(self.every)
    }
}

impl std::fmt::Debug for Ticker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticker")
            .field("every", &self.every)
            .finish()
    }
}

impl PollStrategy for Ticker {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        let every = self.every;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let mut next = Box::pin(tokio::time::sleep(every));
        // Pending, and now registered to wake this worker at the next tick.
        let _ = next.as_mut().poll(cx);
        self.sleep = Some(next);
        Poll::Ready(Some(()))
    }
}
