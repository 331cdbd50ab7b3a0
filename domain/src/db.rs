//! Transactions that write.

use sea_orm::{
    DatabaseConnection, DatabaseTransaction, DbErr, SqliteTransactionMode, TransactionOptions,
    TransactionTrait,
};

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
