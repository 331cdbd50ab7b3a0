//! Wake-up signals of one database, so stored work is taken in
//! milliseconds rather than at the workers' next poll. They come from the
//! write itself: on SQLite every pooled connection's commit hook
//! ([`signal_sqlite_commits`]); on PostgreSQL a [`super::WriteTxn`] that
//! noted what it enqueued, once it committed. The signals are `watch`
//! channels: a bump while a worker is busy is not lost, and any number of
//! bumps while it is busy cost it one more pass. Telling other processes
//! (`NOTIFY`) and listening to them is the workers' side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use sea_orm::DbBackend;
use sea_orm::sqlx::SqliteConnection;
use tokio::sync::watch;

/// What a committed write left to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Inbox events stored or sent back to `received`.
    Inbox,
    /// Lead versions to process, with their outbox events.
    Leads,
}

impl Work {
    pub(super) fn bit(self) -> u8 {
        match self {
            Self::Inbox => INBOX,
            Self::Leads => LEADS,
        }
    }
}

/// Which tables a transaction changed, as bits.
const INBOX: u8 = 1;
const LEADS: u8 = 2;
const OUTBOX: u8 = 4;

pub struct Signals {
    /// Inbox work may be waiting (wakes the inbox drain).
    inbox: watch::Sender<u64>,
    /// Leads changed (wakes the lead drain).
    leads: watch::Sender<u64>,
    /// Outbox events were written (wakes the publisher).
    outbox: watch::Sender<u64>,
    /// PostgreSQL: this process committed inbox work (the workers'
    /// announcer tells the other processes).
    inbox_to_announce: watch::Sender<u64>,
    /// PostgreSQL: this process committed lead work.
    leads_to_announce: watch::Sender<u64>,
    /// Whether this process's announcer runs (`serve` starts it for its
    /// API and again for its workers: one is enough).
    announcing: AtomicBool,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            inbox: watch::channel(0).0,
            leads: watch::channel(0).0,
            outbox: watch::channel(0).0,
            inbox_to_announce: watch::channel(0).0,
            leads_to_announce: watch::channel(0).0,
            announcing: AtomicBool::new(false),
        }
    }
}

fn bump(signal: &watch::Sender<u64>) {
    signal.send_modify(|n| *n = n.wrapping_add(1));
}

impl Signals {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A transaction on `backend` committed the work in `enqueued` (bits of
    /// [`Work`]): on PostgreSQL this process's workers start a pass and the
    /// announcer tells the other processes'. On SQLite the commit hooks did
    /// it already.
    pub(super) fn committed(&self, backend: DbBackend, enqueued: u8) {
        if backend != DbBackend::Postgres {
            return;
        }
        if enqueued & INBOX != 0 {
            bump(&self.inbox);
            bump(&self.inbox_to_announce);
        }
        if enqueued & LEADS != 0 {
            bump(&self.leads);
            bump(&self.outbox);
            bump(&self.leads_to_announce);
        }
    }

    /// A pass wrote lead versions or outbox events in this process (inbox
    /// events applied, leads processed): its lead drain and publisher start
    /// a pass. Other processes are not told.
    pub fn written_here(&self) {
        bump(&self.leads);
        bump(&self.outbox);
    }

    /// An inbox pass found events: more may be waiting, so this process's
    /// drain starts another pass (other processes are not told).
    pub fn more_inbox_work(&self) {
        bump(&self.inbox);
    }

    /// Another process announced inbox work, or the listener lost some.
    pub fn inbox_announced(&self) {
        bump(&self.inbox);
    }

    /// Another process announced lead work, or the listener lost some.
    pub fn leads_announced(&self) {
        bump(&self.leads);
        bump(&self.outbox);
    }

    pub fn inbox_work(&self) -> watch::Receiver<u64> {
        self.inbox.subscribe()
    }

    pub fn lead_work(&self) -> watch::Receiver<u64> {
        self.leads.subscribe()
    }

    pub fn outbox_work(&self) -> watch::Receiver<u64> {
        self.outbox.subscribe()
    }

    /// What this process committed for other processes to hear of: inbox
    /// work, then lead work.
    pub fn to_announce(&self) -> (watch::Receiver<u64>, watch::Receiver<u64>) {
        (
            self.inbox_to_announce.subscribe(),
            self.leads_to_announce.subscribe(),
        )
    }

    /// True for the first caller only: the one announcer of this process.
    pub fn claim_announcing(&self) -> bool {
        !self.announcing.swap(true, Ordering::AcqRel)
    }
}

/// Installs hooks on a SQLite connection: its update hook notes which
/// tables that hold work a transaction changed, its commit hook bumps their
/// `signals` (the commit is this connection's: the writer still holds
/// SQLite's write lock, so a woken worker's claim, a write itself, starts
/// after it and sees the rows), its rollback hook forgets them. Every
/// writer of the pool is covered, whatever function wrote.
pub async fn signal_sqlite_commits(
    conn: &mut SqliteConnection,
    signals: Arc<Signals>,
) -> Result<(), sea_orm::sqlx::Error> {
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
