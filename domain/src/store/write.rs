//! A transaction that writes, holding SQLite's write turn until it ends,
//! and waking the workers of what it enqueued once it committed.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use sea_orm::{
    ConnectionTrait, DatabaseTransaction, DbBackend, DbErr, ExecResult, QueryResult,
    SqliteTransactionMode, Statement, TransactionOptions, TransactionTrait,
};
use tokio::sync::OwnedMutexGuard;

use super::{Signals, Store, Work};

pub struct WriteTxn {
    txn: DatabaseTransaction,
    /// Released after the commit or rollback (dropped last).
    _turn: Option<OwnedMutexGuard<()>>,
    signals: Arc<Signals>,
    /// The [`Work`] this transaction stored, as bits ([`WriteTxn::enqueued`]).
    enqueued: AtomicU8,
}

impl WriteTxn {
    pub(super) async fn begin(store: &Store, ordered_claim: bool) -> Result<Self, DbErr> {
        let turn = match store.backend() {
            DbBackend::Sqlite => Some(store.shared.write_turn.clone().lock_owned().await),
            _ => None,
        };
        let txn = store
            .db
            .begin_with_options(TransactionOptions {
                sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
                ..Default::default()
            })
            .await?;
        if let Some(in_index_order) = store
            .dialect()
            .scans_in_index_order()
            .filter(|_| ordered_claim)
        {
            txn.execute_unprepared(in_index_order).await?;
        }
        Ok(Self {
            txn,
            _turn: turn,
            signals: store.signals().clone(),
            enqueued: AtomicU8::new(0),
        })
    }

    /// Notes that this transaction stored `work` for the workers: once it
    /// committed, they are woken ([`Signals::committed`]).
    pub fn enqueued(&self, work: Work) {
        self.enqueued.fetch_or(work.bit(), Ordering::Relaxed);
    }

    /// Commits, then wakes the workers of what was enqueued.
    pub async fn commit(self) -> Result<(), crate::Error> {
        let backend = self.txn.get_database_backend();
        let enqueued = self.enqueued.load(Ordering::Relaxed);
        self.txn.commit().await?;
        self.signals.committed(backend, enqueued);
        Ok(())
    }

    pub async fn rollback(self) -> Result<(), crate::Error> {
        Ok(self.txn.rollback().await?)
    }
}

impl Deref for WriteTxn {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.txn
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for WriteTxn {
    fn get_database_backend(&self) -> DbBackend {
        self.txn.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.txn.execute_raw(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.txn.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.txn.query_one_raw(stmt).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.txn.query_all_raw(stmt).await
    }
}
