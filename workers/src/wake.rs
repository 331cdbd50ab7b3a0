//! Wake-ups, so stored work is taken in milliseconds rather than at the
//! next poll. They come from the write itself, never from a caller that has
//! to remember them: polling stays as the fallback for a lost signal, and
//! finds what no write announces (a retry coming due, a lease running out).
//!
//! On SQLite (one process) every connection of the app's pool has commit
//! hooks ([`signal_sqlite_commits`]): a commit that changed a table holding
//! work bumps the signals, whoever wrote it. On PostgreSQL the writer says
//! so once its transaction committed ([`committed`]): this process's
//! signals are bumped, and [`announce`] sends `NOTIFY leadpipe_inbox` or
//! `leadpipe_leads` outside any transaction, coalesced, to the other
//! processes, which `LISTEN` ([`listen`]). Not a trigger in the writing
//! transaction: PostgreSQL commits the transactions that notify one at a
//! time, cluster-wide, and inserts at 32 clients fell from ~5,200 to ~345
//! a second with one (docs/performance.md, 2026-12-06). The signals are
//! `watch` channels: a bump while a worker is busy is not lost, and any
//! number of bumps while it is busy cost it one more pass.

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

/// The PostgreSQL channel of "leads were written and wait to be processed"
/// (and with them outbox events to deliver).
pub const LEADS_CHANNEL: &str = "leadpipe_leads";

/// The least time between two `NOTIFY leadpipe_leads` of one process: a
/// notification is a commit of its own; under intake at its most, one per
/// write would add hundreds a second. Spaced, at most 50 a second.
const LEAD_NOTICE_SPACING: Duration = Duration::from_millis(20);

/// What a committed write left to do, for [`committed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Inbox events stored or sent back to `received`.
    Inbox,
    /// Lead versions to process, with their outbox events.
    Leads,
}

/// The signals of one database. Keyed by the database, so that several apps
/// in one process (the tests run many) wake only their own workers.
struct Signals {
    /// Inbox work may be waiting (wakes the inbox drain).
    inbox: watch::Sender<u64>,
    /// Leads changed (wakes the lead drain).
    leads: watch::Sender<u64>,
    /// Outbox events were written (wakes the publisher).
    outbox: watch::Sender<u64>,
    /// PostgreSQL: this process committed inbox work ([`announce`] tells
    /// the others).
    inbox_to_announce: watch::Sender<u64>,
    /// PostgreSQL: this process committed lead work.
    leads_to_announce: watch::Sender<u64>,
    /// Whether this process's [`announce`] runs (`serve` starts it for its
    /// API and again for its workers: one is enough).
    announcing: std::sync::atomic::AtomicBool,
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
                inbox_to_announce: watch::channel(0).0,
                leads_to_announce: watch::channel(0).0,
                announcing: std::sync::atomic::AtomicBool::new(false),
            })
        })
        .clone()
}

fn bump(signal: &watch::Sender<u64>) {
    signal.send_modify(|n| *n = n.wrapping_add(1));
}

/// Called by a writer on PostgreSQL once its transaction committed `work`:
/// this process's workers start a pass, and [`announce`] tells the other
/// processes'. On SQLite the commit hooks did it already: nothing to do.
pub fn committed(db: &DatabaseConnection, work: Work) {
    if db.get_database_backend() != DatabaseBackend::Postgres {
        return;
    }
    let signals = signals(db);
    match work {
        Work::Inbox => {
            bump(&signals.inbox);
            bump(&signals.inbox_to_announce);
        }
        Work::Leads => {
            bump(&signals.leads);
            bump(&signals.outbox);
            bump(&signals.leads_to_announce);
        }
    }
}

/// For a process that runs no [`announce`] (a CLI import or reconcile, at
/// its end): tells the worker processes once that `work` was committed.
pub async fn announce_once(db: &DatabaseConnection, work: Work) {
    if db.get_database_backend() != DatabaseBackend::Postgres {
        return;
    }
    let channel = match work {
        Work::Inbox => CHANNEL,
        Work::Leads => LEADS_CHANNEL,
    };
    notify(db.get_postgres_connection_pool(), channel).await;
}

/// Sends `NOTIFY leadpipe_inbox` and `NOTIFY leadpipe_leads` after this
/// process committed such work ([`committed`]), until the process ends.
/// Coalesced: the writes made while one notification is on its way share
/// the next one.
pub async fn announce(db: DatabaseConnection) {
    if db.get_database_backend() != DatabaseBackend::Postgres {
        return;
    }
    let pool = db.get_postgres_connection_pool().clone();
    let signals = signals(&db);
    if signals.announcing.swap(true, Ordering::AcqRel) {
        return;
    }
    tokio::join!(
        notify_after(
            &pool,
            signals.inbox_to_announce.subscribe(),
            CHANNEL,
            Duration::ZERO
        ),
        notify_after(
            &pool,
            signals.leads_to_announce.subscribe(),
            LEADS_CHANNEL,
            LEAD_NOTICE_SPACING
        ),
    );
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

/// Called by a pass that wrote lead versions or outbox events in this
/// process (inbox events applied, leads processed): its lead drain and
/// publisher start a pass. Other processes are not told.
pub(crate) fn written_here(db: &DatabaseConnection) {
    let signals = signals(db);
    bump(&signals.leads);
    bump(&signals.outbox);
}

/// Called by an inbox pass that found events: more may be waiting, so this
/// process's drain starts another pass (other processes are not told).
pub(crate) fn more_inbox_work(db: &DatabaseConnection) {
    bump(&signals(db).inbox);
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

/// Listens on `leadpipe_inbox` and `leadpipe_leads` and wakes this
/// process's inbox, or lead and outbox workers, reconnecting after a pause
/// when the connection is lost, until `stop`.
pub(crate) async fn listen(db: DatabaseConnection, stop: watch::Receiver<bool>) {
    let pool = db.get_postgres_connection_pool().clone();
    let signals = signals(&db);
    loop {
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen_all([CHANNEL, LEADS_CHANNEL]).await {
                Ok(()) => loop {
                    tokio::select! {
                        received = listener.recv() => match received {
                            Ok(notice) => match notice.channel() {
                                LEADS_CHANNEL => {
                                    bump(&signals.leads);
                                    bump(&signals.outbox);
                                }
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
