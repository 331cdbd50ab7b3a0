//! Push wake-ups, so a stored event is processed in milliseconds rather than
//! at the next poll. Polling stays as the fallback for a lost signal.
//!
//! In one process (SQLite runs `serve` and the workers together) the
//! receiver bumps a counter the inbox drain waits on. Across processes (on
//! PostgreSQL, `serve --no-workers` and `work`) the receiving process also
//! sends `NOTIFY leadpipe_inbox`, and every worker process `LISTEN`s and
//! bumps its own counter. The counters are `watch` channels: a bump while a
//! worker is busy is not lost, and any number of bumps while it is busy
//! cost it one more pass.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{DatabaseBackend, DatabaseConnection};
use tokio::sync::watch;

use crate::shutdown::stopped;

/// The PostgreSQL channel of "an inbox event was stored".
pub const CHANNEL: &str = "leadpipe_inbox";

/// The signals of one database. Keyed by the database, so that several apps
/// in one process (the tests run many) wake only their own workers.
struct Signals {
    /// Inbox work may be waiting (wakes the inbox workers).
    inbox: watch::Sender<u64>,
    /// This process stored an event (wakes the notifier, for other processes).
    stored: watch::Sender<u64>,
    /// Leads changed (wakes the lead processors).
    leads: watch::Sender<u64>,
}

static SIGNALS: LazyLock<Mutex<HashMap<String, Arc<Signals>>>> = LazyLock::new(Mutex::default);

fn signals(db: &DatabaseConnection) -> Arc<Signals> {
    let key = match db.get_database_backend() {
        DatabaseBackend::Postgres => {
            let options = db.get_postgres_connection_pool().connect_options();
            format!(
                "postgres://{}:{}/{}",
                options.get_host(),
                options.get_port(),
                options.get_database().unwrap_or_default()
            )
        }
        _ => {
            let options = db.get_sqlite_connection_pool().connect_options();
            format!("sqlite:{}", options.get_filename().display())
        }
    };
    let mut all = SIGNALS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.entry(key)
        .or_insert_with(|| {
            Arc::new(Signals {
                inbox: watch::channel(0).0,
                stored: watch::channel(0).0,
                leads: watch::channel(0).0,
            })
        })
        .clone()
}

fn bump(signal: &watch::Sender<u64>) {
    signal.send_modify(|n| *n = n.wrapping_add(1));
}

/// Called by the receiver after an event's row is committed in `db`.
pub fn event_stored(db: &DatabaseConnection) {
    let signals = signals(db);
    bump(&signals.inbox);
    bump(&signals.stored);
}

/// Called by an inbox pass that found events: more may be waiting, so this
/// process's drain starts another pass (other processes are not told).
pub(crate) fn more_inbox_work(db: &DatabaseConnection) {
    bump(&signals(db).inbox);
}

/// Called after a batch wrote leads in `db`.
pub fn leads_changed(db: &DatabaseConnection) {
    bump(&signals(db).leads);
}

pub(crate) fn inbox_work(db: &DatabaseConnection) -> watch::Receiver<u64> {
    signals(db).inbox.subscribe()
}

pub(crate) fn lead_work(db: &DatabaseConnection) -> watch::Receiver<u64> {
    signals(db).leads.subscribe()
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
pub async fn announce(db: DatabaseConnection) {
    let pool = db.get_postgres_connection_pool().clone();
    let mut stored = signals(&db).stored.subscribe();
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
pub(crate) async fn listen(db: DatabaseConnection, stop: watch::Receiver<bool>) {
    let pool = db.get_postgres_connection_pool().clone();
    let inbox = signals(&db);
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen(CHANNEL).await {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(_) => bump(&inbox.inbox),
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
        bump(&inbox.inbox);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(stop.clone()) => return,
        }
    }
}
