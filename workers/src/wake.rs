//! Push wake-ups, so a stored event is processed in milliseconds rather than
//! at the next poll. Polling stays as the fallback for a lost signal.
//!
//! In one process (SQLite runs `serve` and the workers together) the
//! receiver bumps a counter the inbox workers wait on. Across processes (on
//! PostgreSQL, `serve --no-workers` and `work`) the receiving process also
//! sends `NOTIFY leadpipe_inbox`, and every worker process `LISTEN`s and
//! bumps its own counter. The counters are `watch` channels: a bump while a
//! worker is busy is not lost, and any number of bumps while it is busy
//! cost it one more pass.

use std::sync::LazyLock;
use std::time::Duration;

use sea_orm::sqlx::postgres::{PgListener, PgPool};
use tokio::sync::watch;

use crate::shutdown::stopped;

/// The PostgreSQL channel of "an inbox event was stored".
pub const CHANNEL: &str = "leadpipe_inbox";

/// Inbox work may be waiting (wakes this process's inbox workers).
static INBOX: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);
/// This process stored an event (wakes the notifier, for other processes).
static STORED: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);
/// Leads changed (wakes this process's lead processors).
static LEADS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

fn bump(signal: &watch::Sender<u64>) {
    signal.send_modify(|n| *n = n.wrapping_add(1));
}

/// Called by the receiver after an event's row is committed.
pub fn event_stored() {
    bump(&INBOX);
    bump(&STORED);
}

/// Called after a batch wrote leads.
pub fn leads_changed() {
    bump(&LEADS);
}

pub(crate) fn inbox_work() -> watch::Receiver<u64> {
    INBOX.subscribe()
}

pub(crate) fn lead_work() -> watch::Receiver<u64> {
    LEADS.subscribe()
}

/// Waits for a bump of `signal`, the next `tick`, or shutdown; false on
/// shutdown.
pub(crate) async fn next(
    signal: &mut watch::Receiver<u64>,
    tick: Duration,
    stop: &watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        changed = signal.changed() => {
            if changed.is_err() {
                tokio::time::sleep(tick).await;
            }
            true
        }
        () = tokio::time::sleep(tick) => true,
        () = stopped(stop.clone()) => false,
    }
}

/// Sends `NOTIFY leadpipe_inbox` after events were stored here, until the
/// process ends. Coalesced: the stores made while one notification is on
/// its way share the next one, so a burst costs a handful of round trips.
pub async fn announce(pool: PgPool) {
    let mut stored = STORED.subscribe();
    while stored.changed().await.is_ok() {
        stored.borrow_and_update();
        let sent = sea_orm::sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(&pool)
            .await;
        if let Err(error) = sent {
            // The workers' poll finds the event anyway.
            tracing::debug!(%error, "inbox wake-up not sent");
        }
    }
}

/// Listens on `leadpipe_inbox` and wakes this process's inbox workers,
/// reconnecting after a pause when the connection is lost, until `stop`.
pub(crate) async fn listen(pool: PgPool, stop: watch::Receiver<bool>) {
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen(CHANNEL).await {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(_) => bump(&INBOX),
                            Err(error) => {
                                tracing::warn!(%error, "inbox wake-up listener failed; polling until it is back");
                                break;
                            }
                        },
                        () = stopped(stop.clone()) => return,
                    }
                },
                Err(error) => tracing::warn!(%error, "cannot LISTEN for inbox wake-ups"),
            },
            Err(error) => tracing::warn!(%error, "cannot connect the inbox wake-up listener"),
        }
        // Whatever was missed meanwhile is found by the next pass.
        bump(&INBOX);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(stop.clone()) => return,
        }
    }
}
