//! What differs between the two databases, asked for by what it does: each
//! operation here is PostgreSQL's way ([`super::postgres`]) or SQLite's
//! ([`super::sqlite`]), so the modules that write and read ask for the
//! operation and never branch on the backend themselves.

use sea_orm::sea_query::{Expr, ExprTrait, IntoIden, SelectStatement, UpdateStatement};
use sea_orm::{ConnectionTrait, DbBackend, Statement};

use super::{postgres, sqlite};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

/// How a wave of leads is upserted ([`crate::lead::ingest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeadUpsert {
    /// One statement per wave, its rows sent as one JSON array
    /// (`lead::pg_batch`): it skips buried keys itself, writes the timeline
    /// row and outbox event of every row it wrote, and can return only the
    /// keys of the rows (PostgreSQL).
    Complete,
    /// A multi-row upsert that returns whole rows and writes nothing else:
    /// the caller leaves buried keys out before, and writes timeline rows
    /// and outbox events (built from the whole rows) after (SQLite, which
    /// has no data-changing statement in `WITH`).
    RowsOnly,
}

impl Dialect {
    /// The dialect `conn` speaks.
    pub fn of<C: ConnectionTrait + ?Sized>(conn: &C) -> Self {
        match conn.get_database_backend() {
            DbBackend::Postgres => Self::Postgres,
            _ => Self::Sqlite,
        }
    }

    /// One writer at a time (SQLite): a second concurrent writer would only
    /// wait for the first, in SQLite's busy handler or in the write turn.
    pub fn has_one_writer(self) -> bool {
        self == Self::Sqlite
    }

    /// Whether one statement can change rows and read what they join to
    /// (a data-changing statement in `WITH`, PostgreSQL); on SQLite the
    /// change and the reads are separate statements.
    pub fn changes_rows_in_with(self) -> bool {
        self == Self::Postgres
    }

    /// How [`crate::lead::ingest`] upserts a wave of leads.
    pub fn lead_upsert(self) -> LeadUpsert {
        match self {
            Self::Postgres => LeadUpsert::Complete,
            Self::Sqlite => LeadUpsert::RowsOnly,
        }
    }

    /// Takes the lock `id` exclusively until the transaction ends: an
    /// advisory lock on PostgreSQL; nothing on SQLite, whose write
    /// transactions are already exclusive.
    pub async fn lock_exclusive<C: ConnectionTrait + ?Sized>(
        self,
        txn: &C,
        id: i64,
    ) -> Result<(), crate::Error> {
        match self {
            Self::Postgres => Ok(postgres::lock_exclusive(txn, id).await?),
            Self::Sqlite => Ok(()),
        }
    }

    /// Takes the locks `ids` shared until the transaction ends (PostgreSQL
    /// advisory locks; nothing on SQLite, which has one writer).
    pub async fn lock_shared<C: ConnectionTrait + ?Sized>(
        self,
        txn: &C,
        ids: Vec<i64>,
    ) -> Result<(), crate::Error> {
        match self {
            Self::Postgres => Ok(postgres::lock_shared(txn, ids).await?),
            Self::Sqlite => Ok(()),
        }
    }

    /// The look-up of the tombstones one of `hashes` names: one statement
    /// text whatever the number of hashes.
    pub fn find_tombstones(self, hashes: Vec<String>) -> Result<Statement, crate::Error> {
        match self {
            Self::Postgres => Ok(postgres::find_tombstones(hashes)),
            Self::Sqlite => Ok(sqlite::find_tombstones(hashes)?),
        }
    }

    /// The bucket number (seconds since the epoch / `width`) of the
    /// timestamp column `column`.
    pub fn epoch_bucket(self, column: &str, width: i64) -> Expr {
        Expr::cust(match self {
            Self::Postgres => postgres::epoch_bucket(column, width),
            Self::Sqlite => sqlite::epoch_bucket(column, width),
        })
    }

    /// The statement that makes the rest of a transaction plan without
    /// parallel workers (PostgreSQL); `None` where no plan is parallel.
    pub fn no_parallel_workers(self) -> Option<&'static str> {
        match self {
            Self::Postgres => Some(postgres::NO_PARALLEL_WORKERS),
            Self::Sqlite => None,
        }
    }

    /// The statement that keeps the rest of a transaction's scans in index
    /// order (PostgreSQL); `None` where there is nothing to turn off.
    pub fn scans_in_index_order(self) -> Option<&'static str> {
        match self {
            Self::Postgres => Some(postgres::SCANS_IN_INDEX_ORDER),
            Self::Sqlite => None,
        }
    }

    /// Locks a claim's candidate rows so that claims running at once never
    /// wait for nor share a row: `FOR UPDATE SKIP LOCKED` on PostgreSQL.
    /// Nothing on SQLite, where the claim runs in the write turn.
    pub fn lock_claim_candidates(self, candidates: &mut SelectStatement) {
        if self == Self::Postgres {
            postgres::skip_locked(candidates);
        }
    }

    /// Restricts `update` to the rows whose `id` the `candidates` query
    /// picks, with the candidates run once. A claim written as `UPDATE …
    /// WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` is not safe
    /// on PostgreSQL: the planner may run the subquery again for every row
    /// of a nested loop, and each run skips the rows the statement has
    /// already updated and locks the next ones, so a claim of ten took the
    /// whole backlog, ever more slowly (seen in `bench/run`: 1,917 events in
    /// a claim of 100, 110 s). `id = ANY(ARRAY(subquery))` is an init plan,
    /// run once, whose ids the update then looks up by index. SQLite runs an
    /// `IN` subquery once.
    pub fn update_of_candidates(
        self,
        update: &mut UpdateStatement,
        id: impl IntoIden,
        candidates: SelectStatement,
    ) {
        let id = Expr::col(id.into_iden());
        update.and_where(match self {
            Self::Postgres => postgres::id_among(id, candidates),
            Self::Sqlite => id.in_subquery(candidates),
        });
    }

    /// `column` such that no index serves a filter on it, leaving the
    /// planner the sort order's index: SQLite without statistics picks the
    /// filter's index and sorts every matching row. PostgreSQL plans with
    /// statistics: the column as it is.
    pub fn unindexed(self, column: Expr) -> Expr {
        match self {
            Self::Postgres => column,
            Self::Sqlite => sqlite::unindexed(column),
        }
    }
}
