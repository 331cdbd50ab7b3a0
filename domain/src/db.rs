//! Transactions that write.

use sea_orm::sea_query::{
    Alias, CommonTableExpression, Expr, ExprTrait, IntoIden, Query, SelectStatement,
    UpdateStatement, WithClause,
};
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

/// Restricts `update` to the rows whose `id` the `candidates` query picks,
/// with the candidates in a materialized CTE named `name`, run once. A
/// claim written as `UPDATE … WHERE id IN (SELECT … LIMIT n FOR UPDATE
/// SKIP LOCKED)` is not safe on PostgreSQL: the planner may run the
/// subquery again for every row of a nested loop, and each run skips the
/// rows the statement has already updated and locks the next ones, so a
/// claim of ten took the whole backlog, ever more slowly (seen in
/// `bench/run`: 1,917 events in a claim of 100, 110 s).
pub fn update_of_candidates(
    update: &mut UpdateStatement,
    name: &str,
    id: impl IntoIden,
    candidates: SelectStatement,
) {
    let id = id.into_iden();
    let cte = CommonTableExpression::new()
        .query(candidates)
        .table_name(Alias::new(name))
        .materialized(true)
        .to_owned();
    let picked = Query::select()
        .column(id.clone())
        .from(Alias::new(name))
        .to_owned();
    update
        .and_where(Expr::col(id).in_subquery(picked))
        .with_cte(WithClause::new().cte(cte).to_owned());
}
