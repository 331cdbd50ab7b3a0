//! Transactions that write.

use sea_orm::sea_query::{Expr, ExprTrait, IntoIden, SelectStatement, UpdateStatement};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    SqliteTransactionMode, TransactionOptions, TransactionTrait,
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

/// Restricts `update` to the rows whose `id` the `candidates` query picks,
/// with the candidates run once. A claim written as `UPDATE … WHERE id IN
/// (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` is not safe on PostgreSQL:
/// the planner may run the subquery again for every row of a nested loop,
/// and each run skips the rows the statement has already updated and locks
/// the next ones, so a claim of ten took the whole backlog, ever more
/// slowly (seen in `bench/run`: 1,917 events in a claim of 100, 110 s).
/// `id = ANY(ARRAY(subquery))` is an init plan, run once, whose ids the
/// update then looks up by index. SQLite runs an `IN` subquery once.
pub fn update_of_candidates(
    update: &mut UpdateStatement,
    backend: DbBackend,
    id: impl IntoIden,
    candidates: SelectStatement,
) {
    let id = Expr::col(id.into_iden());
    update.and_where(match backend {
        DbBackend::Postgres => Expr::cust_with_exprs("$1 = ANY(ARRAY $2)", [id, candidates.into()]),
        _ => id.in_subquery(candidates),
    });
}

/// A write transaction ([`begin_write`]) whose claims, on PostgreSQL, walk
/// their candidates' index in order. A backlog grows faster than autovacuum
/// analyzes it: on statistics that still count a few ready events, the
/// planner took a bitmap scan of every ready event and a sort to pick the
/// oldest hundred (71 ms a claim at 30,000 ready, 2 s under load; 0.3 ms in
/// index order).
pub async fn begin_ordered_claim(db: &DatabaseConnection) -> Result<DatabaseTransaction, DbErr> {
    let txn = begin_write(db).await?;
    if db.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared("SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off")
            .await?;
    }
    Ok(txn)
}
