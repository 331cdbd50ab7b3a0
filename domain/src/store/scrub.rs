//! Getting an erasure's bytes off the disk after it committed.

use std::sync::atomic::Ordering;

use sea_orm::{ConnectionTrait, DbBackend, DbErr};

use super::Store;

/// Attempts at truncating SQLite's WAL after an erasure, and how long each
/// waits for readers before giving up.
const CHECKPOINT_ATTEMPTS: u32 = 5;
const CHECKPOINT_WAIT: &str = "PRAGMA busy_timeout = 200";

impl Store {
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
        &self,
        tables: &'static [&'static str],
    ) -> Option<tokio::task::JoinHandle<()>> {
        match self.backend() {
            DbBackend::Sqlite => {
                scrub_sqlite(self).await;
                None
            }
            DbBackend::Postgres => {
                let store = self.clone();
                Some(tokio::spawn(async move { vacuum(&store, tables).await }))
            }
            _ => None,
        }
    }

    /// Runs a scrub that failed earlier in this process again (see
    /// [`Store::scrub_after_erasure`]); called by housekeeping. Does nothing when none
    /// is pending.
    pub async fn scrub_if_pending(&self, tables: &'static [&'static str]) {
        if self.shared.scrub_pending.swap(false, Ordering::AcqRel) {
            tracing::info!("retrying the scrub after an erasure");
            match self.backend() {
                DbBackend::Sqlite => scrub_sqlite(self).await,
                DbBackend::Postgres => vacuum(self, tables).await,
                _ => {}
            }
        }
    }
}

async fn scrub_sqlite(store: &Store) {
    for attempt in 1..=CHECKPOINT_ATTEMPTS {
        match truncate_sqlite_wal(store).await {
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
    store.shared.scrub_pending.store(true, Ordering::Release);
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
async fn truncate_sqlite_wal(store: &Store) -> Result<bool, DbErr> {
    use sea_orm::sqlx;
    let failed = |e: sqlx::Error| DbErr::Custom(format!("WAL checkpoint: {e}"));
    let _turn = store.shared.write_turn.lock().await;
    let mut conn = store
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
async fn vacuum(store: &Store, tables: &[&str]) {
    let list = tables
        .iter()
        .map(|table| format!("\"{table}\""))
        .collect::<Vec<_>>()
        .join(", ");
    if let Err(error) = store.execute_unprepared(&format!("VACUUM {list}")).await {
        store.shared.scrub_pending.store(true, Ordering::Release);
        tracing::warn!(%error, "vacuuming after an erasure failed; housekeeping retries");
    }
}
