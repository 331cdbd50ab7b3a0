//! Push wake-ups, so a stored event is processed, and a written lead
//! assigned, in milliseconds rather than at the next poll. Polling stays as
//! the fallback for a lost signal.
//!
//! In one process (SQLite runs `serve` and the workers together) the
//! receiver bumps a counter the inbox drain waits on, and a write that left
//! leads to process (intake, an import chunk, a reconcile page, a sales
//! edit) one the lead drain waits on. Across processes (on PostgreSQL,
//! `serve --no-workers` and `work`) the writing process also sends
//! `NOTIFY leadpipe_inbox` or `NOTIFY leadpipe_leads`, and every worker
//! process `LISTEN`s and bumps its own counter. The counters are `watch`
//! channels: a bump while a worker is busy is not lost, and any number of
//! bumps while it is busy cost it one more pass.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{DatabaseBackend, DatabaseConnection};
use tokio::sync::watch;

use crate::shutdown::stopped;

/// The PostgreSQL channel of "an inbox event was stored".
pub const CHANNEL: &str = "leadpipe_inbox";

/// The PostgreSQL channel of "leads were written and wait to be processed".
pub const LEADS_CHANNEL: &str = "leadpipe_leads";

/// The least time between two `NOTIFY leadpipe_leads` of one process. A
/// notification is a commit with a WAL flush of its own; under intake at its
/// most, one per round trip would add hundreds a second beside the leads'
/// own. Spaced, they cost at most 50 a second, and a lead waits at most this
/// long more than an unspaced wake-up (against half a poll interval).
const LEAD_NOTICE_SPACING: Duration = Duration::from_millis(20);

/// The signals of one database. Keyed by the database, so that several apps
/// in one process (the tests run many) wake only their own workers.
struct Signals {
    /// Inbox work may be waiting (wakes the inbox workers).
    inbox: watch::Sender<u64>,
    /// This process stored an event (wakes the notifier, for other processes).
    stored: watch::Sender<u64>,
    /// Leads changed (wakes the lead processors).
    leads: watch::Sender<u64>,
    /// This process wrote leads (wakes the notifier, for other processes).
    leads_written: watch::Sender<u64>,
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
                leads_written: watch::channel(0).0,
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

/// Called by the workers after a batch wrote leads in `db` (or the sweeper
/// found leads nothing took): this process's lead drain starts a pass.
pub fn leads_changed(db: &DatabaseConnection) {
    bump(&signals(db).leads);
}

/// Called after a write that left leads to process was committed in `db`
/// (intake, an import chunk, a reconcile page, a sales edit): wakes this
/// process's lead drain and, through [`announce`], other processes'.
pub fn leads_written(db: &DatabaseConnection) {
    let signals = signals(db);
    bump(&signals.leads);
    bump(&signals.leads_written);
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

/// Sends `NOTIFY leadpipe_inbox` after events were stored here and `NOTIFY
/// leadpipe_leads` after leads were written here, until the process ends.
/// Coalesced: the writes made while one notification is on its way share
/// the next one, so a burst costs a handful of round trips.
pub async fn announce(db: DatabaseConnection) {
    let pool = db.get_postgres_connection_pool().clone();
    let signals = signals(&db);
    tokio::join!(
        notify_after(&pool, signals.stored.subscribe(), CHANNEL, Duration::ZERO),
        notify_after(
            &pool,
            signals.leads_written.subscribe(),
            LEADS_CHANNEL,
            LEAD_NOTICE_SPACING
        ),
    );
}

/// For a process that runs no [`announce`] (a CLI import or reconcile, at
/// its end): tells other processes' lead drains once that leads were
/// written. On SQLite there is no other process's drain to tell.
pub async fn announce_leads_written(db: &DatabaseConnection) {
    if db.get_database_backend() != DatabaseBackend::Postgres {
        return;
    }
    notify(db.get_postgres_connection_pool(), LEADS_CHANNEL).await;
}

/// One `NOTIFY channel`; a lost one is found by the workers' poll.
async fn notify(pool: &sea_orm::sqlx::PgPool, channel: &'static str) {
    let sent = sea_orm::sqlx::query("SELECT pg_notify($1, '')")
        .bind(channel)
        .execute(pool)
        .await;
    if let Err(error) = sent {
        tracing::debug!(%error, channel, "wake-up not sent");
    }
}

/// `NOTIFY channel` after each bump of `signal`, at most one per `spacing`.
async fn notify_after(
    pool: &sea_orm::sqlx::PgPool,
    mut signal: watch::Receiver<u64>,
    channel: &'static str,
    spacing: Duration,
) {
    while signal.changed().await.is_ok() {
        signal.borrow_and_update();
        notify(pool, channel).await;
        if !spacing.is_zero() {
            tokio::time::sleep(spacing).await;
        }
    }
}

/// Listens on `leadpipe_inbox` and `leadpipe_leads` and wakes this
/// process's inbox or lead workers, reconnecting after a pause when the
/// connection is lost, until `stop`.
pub(crate) async fn listen(db: DatabaseConnection, stop: watch::Receiver<bool>) {
    let pool = db.get_postgres_connection_pool().clone();
    let signals = signals(&db);
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen_all([CHANNEL, LEADS_CHANNEL]).await {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(notice) if notice.channel() == LEADS_CHANNEL => bump(&signals.leads),
                            Ok(_) => bump(&signals.inbox),
                            Err(error) => {
                                tracing::warn!(%error, "wake-up listener failed; polling until it is back");
                                break;
                            }
                        },
                        () = stopped(stop.clone()) => return,
                    }
                },
                Err(error) => tracing::warn!(%error, "cannot LISTEN for wake-ups"),
            },
            Err(error) => tracing::warn!(%error, "cannot connect the wake-up listener"),
        }
        // Whatever was missed meanwhile is found by the next passes.
        bump(&signals.inbox);
        bump(&signals.leads);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(stop.clone()) => return,
        }
    }
}
