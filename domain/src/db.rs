//! Transactions that write.

use std::sync::atomic::{AtomicBool, Ordering};

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

/// Set when the last scrub after an erasure could not finish (a reader kept
/// SQLite's WAL busy, PostgreSQL refused the vacuum): housekeeping runs it
/// again ([`scrub_if_pending`]).
static SCRUB_PENDING: AtomicBool = AtomicBool::new(false);

/// Attempts at truncating SQLite's WAL after an erasure, and how long each
/// waits for readers before giving up.
const CHECKPOINT_ATTEMPTS: u32 = 5;
const CHECKPOINT_WAIT: &str = "PRAGMA busy_timeout = 200";

/// After an erasure has committed: gets the erased bytes off the disk as far
/// as the database allows. Deleted and overwritten rows are already zeroed
/// in the database file on SQLite (`secure_delete`, set on every
/// connection); their earlier page images stay in the WAL until a
/// checkpoint, so the WAL is checkpointed and truncated to nothing, here,
/// before the erasure answers. On PostgreSQL the deleted rows stay in the
/// table files as dead tuples until a vacuum makes their space reusable: the
/// `tables` are vacuumed in a task of their own (a vacuum of large tables,
/// or one waiting for autovacuum's lock, would hold the answer back), whose
/// handle is returned. A scrub that fails is logged and left to
/// housekeeping.
pub async fn scrub_after_erasure(
    db: &DatabaseConnection,
    tables: &'static [&'static str],
) -> Option<tokio::task::JoinHandle<()>> {
    match db.get_database_backend() {
        DbBackend::Sqlite => {
            scrub_sqlite(db).await;
            None
        }
        DbBackend::Postgres => {
            let db = db.clone();
            Some(tokio::spawn(async move { vacuum(&db, tables).await }))
        }
        _ => None,
    }
}

/// Runs a scrub that failed earlier in this process again (see
/// [`scrub_after_erasure`]); called by housekeeping. Does nothing when none
/// is pending.
pub async fn scrub_if_pending(db: &DatabaseConnection, tables: &'static [&'static str]) {
    if SCRUB_PENDING.swap(false, Ordering::AcqRel) {
        tracing::info!("retrying the scrub after an erasure");
        match db.get_database_backend() {
            DbBackend::Sqlite => scrub_sqlite(db).await,
            DbBackend::Postgres => vacuum(db, tables).await,
            _ => {}
        }
    }
}

async fn scrub_sqlite(db: &DatabaseConnection) {
    for attempt in 1..=CHECKPOINT_ATTEMPTS {
        match truncate_sqlite_wal(db).await {
            Ok(true) => return,
            Ok(false) => {
                tracing::debug!(attempt, "a reader kept the WAL from being truncated");
            }
            Err(error) => {
                tracing::warn!(%error, attempt, "checkpointing the WAL after an erasure failed");
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    SCRUB_PENDING.store(true, Ordering::Release);
    tracing::warn!(
        "the WAL could not be truncated after an erasure (readers kept it busy): \
         the erased rows' old page images stay in the -wal file until housekeeping retries"
    );
}

/// `PRAGMA wal_checkpoint(TRUNCATE)` on one connection, holding this
/// process's write turn: every frame is copied into the database file and
/// the `-wal` file is cut to zero bytes. `false` when a reader still in an
/// older snapshot kept it from finishing. The connection waits at most
/// 200 ms ([`CHECKPOINT_WAIT`]) for readers (not its usual busy timeout), so the
/// erasure's answer is not held for long.
async fn truncate_sqlite_wal(db: &DatabaseConnection) -> Result<bool, DbErr> {
    use sea_orm::sqlx;
    let failed = |e: sqlx::Error| DbErr::Custom(format!("WAL checkpoint: {e}"));
    let _turn = write_turn(db).await;
    let mut conn = db
        .get_sqlite_connection_pool()
        .acquire()
        .await
        .map_err(failed)?;
    // Closed when dropped, whatever happens (a cancelled request included):
    // never back in the pool with the short busy timeout set below.
    conn.close_on_drop();
    sqlx::query(CHECKPOINT_WAIT)
        .execute(&mut *conn)
        .await
        .map_err(failed)?;
    let (busy, _, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
        .fetch_one(&mut *conn)
        .await
        .map_err(failed)?;
    Ok(busy == 0)
}

/// `VACUUM` of `tables` on PostgreSQL, outside any transaction.
async fn vacuum(db: &DatabaseConnection, tables: &[&str]) {
    let list = tables
        .iter()
        .map(|table| format!("\"{table}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if let Err(error) = db.execute_unprepared(&format!("VACUUM {list}")).await {
        SCRUB_PENDING.store(true, Ordering::Release);
        tracing::warn!(%error, "vacuuming after an erasure failed; housekeeping retries");
    }
}
