//! The database handle every part of the process goes through: the pool,
//! and what belongs to that database rather than to the process — SQLite's
//! write turn, the tombstone key hasher, the wake-up signals and an erasure's
//! pending scrub. Built once at start-up ([`Store::new`]) and passed down;
//! several stores may live in one process (the tests run many apps), each
//! with its own turn and signals.
//!
//! Reads go to the pool (`Store` dereferences to it and is a
//! `ConnectionTrait`). On SQLite every writer takes the write turn without
//! being asked: a transaction from [`Store::begin_write`] holds it until it
//! ends, a statement run alone on the store holds it for that statement.
//!
//! What the two databases do differently is asked of [`Dialect`], whose
//! operations are SQLite's ([`sqlite`]) or PostgreSQL's ([`postgres`]).

mod dialect;
pub mod postgres;
mod scrub;
pub mod signals;
pub mod sqlite;
mod write;

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, ExecResult, QueryResult, Statement,
    StatementBuilder, TransactionTrait,
};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::natural_key::KeyHasher;
use crate::sealed::Keyring;

pub use dialect::{Dialect, LeadUpsert};
pub use signals::{Signals, Work};
pub use write::WriteTxn;

#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
    shared: Arc<Shared>,
    wake_ups: WakeUps,
    /// Statements run alone on the store each get a transaction of their
    /// own (see [`Store::behind_transaction_pooler`]).
    statement_transactions: bool,
}

/// Where the workers of a PostgreSQL store `LISTEN` for wake-ups.
#[derive(Clone, Debug, Default)]
pub enum WakeUps {
    /// On a connection of the store's own pool.
    #[default]
    OwnPool,
    /// On this pool of PostgreSQL itself: the store's pool goes through a
    /// transaction-mode pooler, where a `LISTEN` does not outlive its
    /// transaction.
    Direct(sea_orm::sqlx::PgPool),
    /// Nowhere: the workers find new work by polling alone.
    Polling,
}

struct Shared {
    /// On SQLite, this process's turn to write (see [`Store::begin_write`]).
    write_turn: Arc<Mutex<()>>,
    hasher: KeyHasher,
    signals: Arc<Signals>,
    /// The last scrub after an erasure could not finish: housekeeping runs
    /// it again ([`Store::scrub_if_pending`]).
    scrub_pending: AtomicBool,
}

impl Store {
    /// The store of `db`, hashing tombstone keys under `keyring`'s hashing
    /// keys and waking workers through `signals` (on SQLite the same
    /// signals the pool's commit hooks bump: [`signals::signal_sqlite_commits`]).
    pub fn new(db: DatabaseConnection, keyring: &Keyring, signals: Arc<Signals>) -> Self {
        Self {
            db,
            shared: Arc::new(Shared {
                write_turn: Arc::new(Mutex::new(())),
                hasher: KeyHasher::new(keyring),
                signals,
                scrub_pending: AtomicBool::new(false),
            }),
            wake_ups: WakeUps::default(),
            statement_transactions: false,
        }
    }

    /// The same store for a pool that goes through a transaction-mode
    /// pooler: a statement run alone on the store is sent inside a
    /// transaction of its own. sqlx prepares a statement, waits for the
    /// server to be ready, then binds it; between the two the pooler may
    /// hand the connection to another client, and the bind reaches a server
    /// that never saw the statement. Inside a transaction the pooler keeps
    /// the server connection.
    pub fn behind_transaction_pooler(self, wake_ups: WakeUps) -> Self {
        Self {
            wake_ups,
            statement_transactions: true,
            ..self
        }
    }

    /// Where its workers listen for wake-ups (PostgreSQL).
    pub fn wake_ups(&self) -> &WakeUps {
        &self.wake_ups
    }

    /// The same store on another pool of the same database (a group
    /// committer's own connections): one write turn, one set of signals.
    pub fn with_pool(&self, db: DatabaseConnection) -> Self {
        Self {
            db,
            shared: self.shared.clone(),
            wake_ups: self.wake_ups.clone(),
            statement_transactions: self.statement_transactions,
        }
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Closes the pool (for every clone of this store).
    pub async fn close(self) -> Result<(), crate::Error> {
        Ok(self.db.close().await?)
    }

    pub fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    pub fn dialect(&self) -> Dialect {
        Dialect::of(&self.db)
    }

    /// The pool's own sqlx pool on PostgreSQL (for `LISTEN`, `NOTIFY` and
    /// pools of its own); `None` on SQLite.
    pub fn postgres_pool(&self) -> Option<&sea_orm::sqlx::PgPool> {
        (self.backend() == DbBackend::Postgres).then(|| self.db.get_postgres_connection_pool())
    }

    /// Hashes natural keys for tombstones and erasure.
    pub fn hasher(&self) -> &KeyHasher {
        &self.shared.hasher
    }

    pub fn signals(&self) -> &Arc<Signals> {
        &self.shared.signals
    }

    /// Begins a transaction that will write, holding SQLite's write turn
    /// until it ends. SQLite has one writer; a writer that finds the lock
    /// taken sleeps in SQLite's busy handler in steps of up to 100 ms, which
    /// set intake's p99. Waiting for the turn instead is a fair queue that
    /// wakes the moment the turn is free. The transaction takes SQLite's
    /// lock up front (`BEGIN IMMEDIATE`), so a read-then-write transaction
    /// never fails to upgrade. PostgreSQL's writers do not block each other:
    /// no turn there.
    pub async fn begin_write(&self) -> Result<WriteTxn, crate::Error> {
        Ok(WriteTxn::begin(self, false).await?)
    }

    /// Holds SQLite's write turn without writing (`None` on PostgreSQL):
    /// every writer of this store waits until it is dropped. For tests
    /// that hold the writers back.
    pub async fn write_turn(&self) -> Option<OwnedMutexGuard<()>> {
        match self.backend() {
            DbBackend::Sqlite => Some(self.shared.write_turn.clone().lock_owned().await),
            _ => None,
        }
    }

    /// A statement run alone on the pool (outside a [`WriteTxn`]) stored
    /// `work`: the workers are woken as a transaction's commit wakes them.
    pub fn enqueued(&self, work: Work) {
        self.shared.signals.committed(self.backend(), work.bit());
    }

    /// A write transaction ([`Store::begin_write`]) whose claims, on
    /// PostgreSQL, walk their candidates' index in order. A backlog grows
    /// faster than autovacuum analyzes it: on statistics that still count a
    /// few ready events, the planner took a bitmap scan of every ready event
    /// and a sort to pick the oldest hundred (71 ms a claim at 30,000 ready,
    /// 2 s under load; 0.3 ms in index order).
    pub async fn begin_ordered_claim(&self) -> Result<WriteTxn, crate::Error> {
        Ok(WriteTxn::begin(self, true).await?)
    }
}

impl Deref for Store {
    type Target = DatabaseConnection;

    fn deref(&self) -> &DatabaseConnection {
        &self.db
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

/// `stmt` written in `conn`'s SQL (its placeholders and quoting), for
/// where sea-orm takes a finished statement (`find_by_statement`).
pub fn statement<C: ConnectionTrait + ?Sized, S: StatementBuilder>(
    conn: &C,
    stmt: &S,
) -> Statement {
    conn.get_database_backend().build(stmt)
}

/// How long a statement outside a transaction waits for SQLite's write
/// turn: as long as SQLite's own busy timeout would have let it wait.
const AUTOCOMMIT_TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Store {
    /// A statement that runs alone on the pool and may write takes SQLite's
    /// write turn too, so a single `INSERT` or `UPDATE` queues with the
    /// transactions instead of sleeping in SQLite's busy handler. Bounded:
    /// a task that writes through the pool while it holds a transaction of
    /// its own fails as SQLite's busy timeout would have failed it.
    async fn autocommit_turn(&self, sql: &str) -> Result<Option<OwnedMutexGuard<()>>, DbErr> {
        if self.backend() != DbBackend::Sqlite || reads_only(sql) {
            return Ok(None);
        }
        tokio::time::timeout(
            AUTOCOMMIT_TURN_WAIT,
            self.shared.write_turn.clone().lock_owned(),
        )
        .await
        .map(Some)
        .map_err(|_| DbErr::Custom("timed out waiting for SQLite's write turn".into()))
    }
}

/// Whether a statement only reads: it starts with `SELECT` (`PRAGMA`s
/// that change settings take no write lock either).
fn reads_only(sql: &str) -> bool {
    let head = sql.trim_start().get(..6).unwrap_or("");
    head.eq_ignore_ascii_case("select") || head.eq_ignore_ascii_case("pragma")
}

/// Statements on the pool, outside any transaction: reads, and the
/// single-statement writes ([`Store::autocommit_turn`]).
#[async_trait::async_trait]
impl ConnectionTrait for Store {
    fn get_database_backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        let _turn = self.autocommit_turn(&stmt.sql).await?;
        if self.statement_transactions {
            let txn = self.db.begin().await?;
            let done = txn.execute_raw(stmt).await?;
            txn.commit().await?;
            return Ok(done);
        }
        self.db.execute_raw(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        let _turn = self.autocommit_turn(sql).await?;
        self.db.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        let _turn = self.autocommit_turn(&stmt.sql).await?;
        if self.statement_transactions {
            let txn = self.db.begin().await?;
            let row = txn.query_one_raw(stmt).await?;
            txn.commit().await?;
            return Ok(row);
        }
        self.db.query_one_raw(stmt).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        let _turn = self.autocommit_turn(&stmt.sql).await?;
        if self.statement_transactions {
            let txn = self.db.begin().await?;
            let rows = txn.query_all_raw(stmt).await?;
            txn.commit().await?;
            return Ok(rows);
        }
        self.db.query_all_raw(stmt).await
    }
}

#[cfg(test)]
mod tests {
    use super::reads_only;

    #[test]
    fn reads_take_no_turn_and_writes_do() {
        for read in ["SELECT 1", "  select * from lead", "PRAGMA foreign_keys"] {
            assert!(reads_only(read), "{read}");
        }
        for write in [
            "INSERT INTO lead VALUES (1)",
            "UPDATE \"lead\" SET x = 1",
            "DELETE FROM lead",
            "WITH t AS (SELECT 1) INSERT INTO x SELECT * FROM t",
            "VACUUM",
            "",
        ] {
            assert!(!reads_only(write), "{write}");
        }
    }
}
