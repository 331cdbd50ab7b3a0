//! Transactions that write.

use sea_orm::{
    DatabaseConnection, DatabaseTransaction, DbBackend, DbErr, SqliteTransactionMode,
    TransactionOptions, TransactionTrait,
};
use tokio::sync::{Mutex, MutexGuard};

static SQLITE_WRITER: Mutex<()> = Mutex::const_new(());

/// On SQLite, this process's turn to write, for the writers that run all
/// the time under load (group commit, lead processing). SQLite has one
/// writer; a writer that finds the lock taken sleeps in SQLite's busy
/// handler in steps of up to 100 ms, which set intake's p99. Waiting here
/// instead is a fair queue that wakes the moment the turn is free. Hold it
/// across the whole transaction and never take it twice. `None` on
/// PostgreSQL, whose writers do not block each other.
pub async fn write_turn(db: &DatabaseConnection) -> Option<MutexGuard<'static, ()>> {
    match db.get_database_backend() {
        DbBackend::Sqlite => Some(SQLITE_WRITER.lock().await),
        _ => None,
    }
}

/// Begins a transaction that will write. On SQLite it takes the write lock up
/// front (`BEGIN IMMEDIATE`), so a read-then-write transaction waits for the
/// lock (busy timeout) instead of failing to upgrade when another writer got in
/// between; PostgreSQL ignores the mode.
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    db.begin_with_options(TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..Default::default()
    })
    .await
}

/// How a batch was written, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchPath {
    /// The whole batch in one go.
    Whole,
    /// The whole write failed; redone one savepoint per item.
    Split,
}

impl BatchPath {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Whole => "whole",
            Self::Split => "split",
        }
    }
}
