//! Wake-ups, so stored work is taken in milliseconds rather than at the
//! next poll. They come from the write itself, never from a caller that has
//! to remember them: polling stays as the fallback for a lost signal, and
//! finds what no write announces (a retry coming due, a lease running out).
//!
//! On PostgreSQL, triggers on the tables that hold work send `NOTIFY
//! leadpipe_inbox` (an event stored or sent back: `received`),
//! `leadpipe_leads` (a lead version left to process) and `leadpipe_outbox`
//! (outbox events written) in the writing transaction, so the notice is
//! delivered when the write commits, to every process; each worker process
//! `LISTEN`s and bumps its own signals ([`listen`]). On SQLite (one process)
//! every connection of the app's pool has commit hooks
//! ([`signal_sqlite_commits`]): a commit that changed one of those tables
//! bumps the signals. The signals are `watch` channels: a bump while a
//! worker is busy is not lost, and any number of bumps while it is busy
//! cost it one more pass.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use sea_orm::sqlx::SqliteConnection;
use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{DatabaseBackend, DatabaseConnection};
use tokio::sync::watch;

use crate::shutdown::stopped;

/// The PostgreSQL channel of "an inbox event waits to be processed".
pub const CHANNEL: &str = "leadpipe_inbox";

/// The PostgreSQL channel of "leads were written and wait to be processed".
pub const LEADS_CHANNEL: &str = "leadpipe_leads";

/// The PostgreSQL channel of "outbox events were written".
pub const OUTBOX_CHANNEL: &str = "leadpipe_outbox";

/// The signals of one database. Keyed by the database, so that several apps
/// in one process (the tests run many) wake only their own workers.
struct Signals {
    /// Inbox work may be waiting (wakes the inbox drain).
    inbox: watch::Sender<u64>,
    /// Leads changed (wakes the lead drain).
    leads: watch::Sender<u64>,
    /// Outbox events were written (wakes the publisher).
    outbox: watch::Sender<u64>,
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
            sqlite_key(options.get_filename())
        }
    };
    signals_of(key)
}

fn sqlite_key(file: &Path) -> String {
    format!("sqlite:{}", file.display())
}

fn signals_of(key: String) -> Arc<Signals> {
    let mut all = SIGNALS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.entry(key)
        .or_insert_with(|| {
            Arc::new(Signals {
                inbox: watch::channel(0).0,
                leads: watch::channel(0).0,
                outbox: watch::channel(0).0,
            })
        })
        .clone()
}

fn bump(signal: &watch::Sender<u64>) {
    signal.send_modify(|n| *n = n.wrapping_add(1));
}

/// Called by an inbox pass that found events: more may be waiting, so this
/// process's drain starts another pass (other processes are not told).
pub(crate) fn more_inbox_work(db: &DatabaseConnection) {
    bump(&signals(db).inbox);
}

/// Called by a lead pass that took leads: more may be waiting.
pub(crate) fn more_lead_work(db: &DatabaseConnection) {
    bump(&signals(db).leads);
}

pub(crate) fn inbox_work(db: &DatabaseConnection) -> watch::Receiver<u64> {
    signals(db).inbox.subscribe()
}

pub(crate) fn lead_work(db: &DatabaseConnection) -> watch::Receiver<u64> {
    signals(db).leads.subscribe()
}

pub(crate) fn outbox_work(db: &DatabaseConnection) -> watch::Receiver<u64> {
    signals(db).outbox.subscribe()
}

/// Waits for a bump of `signal` (if any), the next `tick`, or shutdown;
/// false on shutdown.
pub(crate) async fn next(
    signal: Option<&mut watch::Receiver<u64>>,
    tick: Duration,
    stop: &watch::Receiver<bool>,
) -> bool {
    let bumped = async {
        let changed = match signal {
            Some(signal) => signal.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = bumped => true,
        () = tokio::time::sleep(tick) => true,
        () = stopped(stop.clone()) => false,
    }
}

/// Which tables a SQLite transaction changed, as bits.
const INBOX: u8 = 1;
const LEADS: u8 = 2;
const OUTBOX: u8 = 4;

/// Installs hooks on a connection of the SQLite database `file`: its update
/// hook notes which tables that hold work a transaction changed, its commit
/// hook bumps their signals (the commit is this connection's: the writer
/// still holds SQLite's write lock, so a woken worker's claim, a write
/// itself, starts after it and sees the rows), its rollback hook forgets
/// them. Every writer of the process is covered, whatever function wrote.
pub async fn signal_sqlite_commits(
    conn: &mut SqliteConnection,
    file: &Path,
) -> Result<(), sea_orm::sqlx::Error> {
    let signals = signals_of(sqlite_key(file));
    let changed = Arc::new(AtomicU8::new(0));
    let mut handle = conn.lock_handle().await?;
    let noted = changed.clone();
    handle.set_update_hook(move |change| {
        let bit = match change.table {
            "inbox_event" => INBOX,
            "lead" => LEADS,
            "outbox_event" => OUTBOX,
            _ => return,
        };
        noted.fetch_or(bit, Ordering::Relaxed);
    });
    let committed = changed.clone();
    handle.set_commit_hook(move || {
        let bits = committed.swap(0, Ordering::Relaxed);
        if bits & INBOX != 0 {
            bump(&signals.inbox);
        }
        if bits & LEADS != 0 {
            bump(&signals.leads);
        }
        if bits & OUTBOX != 0 {
            bump(&signals.outbox);
        }
        // Never turns the commit into a rollback.
        true
    });
    handle.set_rollback_hook(move || changed.store(0, Ordering::Relaxed));
    Ok(())
}

/// Listens on `leadpipe_inbox`, `leadpipe_leads` and `leadpipe_outbox` and
/// wakes this process's inbox, lead or outbox workers, reconnecting after a pause when the
/// connection is lost, until `stop`.
pub(crate) async fn listen(db: DatabaseConnection, stop: watch::Receiver<bool>) {
    let pool = db.get_postgres_connection_pool().clone();
    let signals = signals(&db);
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener
                .listen_all([CHANNEL, LEADS_CHANNEL, OUTBOX_CHANNEL])
                .await
            {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(notice) => match notice.channel() {
                                LEADS_CHANNEL => bump(&signals.leads),
                                OUTBOX_CHANNEL => bump(&signals.outbox),
                                _ => bump(&signals.inbox),
                            },
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
        bump(&signals.outbox);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stopped(stop.clone()) => return,
        }
    }
}
