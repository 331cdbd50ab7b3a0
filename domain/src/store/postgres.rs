//! SQL that only PostgreSQL speaks. Callers reach it through
//! [`super::Dialect`], which pairs each piece with SQLite's way of doing the
//! same thing (or of not needing it).

use sea_orm::sea_query::{Expr, LockBehavior, LockType, SelectStatement};
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

/// Takes the advisory lock `id` exclusively until the transaction ends.
pub(super) async fn lock_exclusive<C: ConnectionTrait + ?Sized>(
    txn: &C,
    id: i64,
) -> Result<(), DbErr> {
    txn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT pg_advisory_xact_lock($1)",
        [id.into()],
    ))
    .await?;
    Ok(())
}

/// Takes every advisory lock of `ids` shared until the transaction ends,
/// in one statement.
pub(super) async fn lock_shared<C: ConnectionTrait + ?Sized>(
    txn: &C,
    ids: Vec<i64>,
) -> Result<(), DbErr> {
    txn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT count(pg_advisory_xact_lock_shared(id)) FROM unnest($1::bigint[]) AS id",
        [ids.into()],
    ))
    .await?;
    Ok(())
}

/// The tombstones one of `hashes` names (as `key_hash` or `folded_hash`),
/// the hashes bound as one array.
pub(super) fn find_tombstones(hashes: Vec<String>) -> Statement {
    Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT key_hash, folded_hash FROM lead_tombstone \
         WHERE key_hash = ANY($1) OR folded_hash = ANY($1)",
        [hashes.into()],
    )
}

/// The bucket number (seconds since the epoch / `width`) of a timestamp
/// column.
pub(super) fn epoch_bucket(column: &str, width: i64) -> String {
    format!("CAST(FLOOR(EXTRACT(EPOCH FROM \"{column}\") / {width}) AS BIGINT)")
}

/// Plans the rest of the transaction without parallel workers.
pub(super) const NO_PARALLEL_WORKERS: &str = "SET LOCAL max_parallel_workers_per_gather = 0";

/// Keeps the rest of the transaction's scans in index order (see
/// [`super::Store::begin_ordered_claim`]).
pub(super) const SCANS_IN_INDEX_ORDER: &str =
    "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off";

/// A claim's candidates are locked, skipping rows another claim holds.
pub(super) fn skip_locked(candidates: &mut SelectStatement) {
    candidates.lock_with_behavior(LockType::Update, LockBehavior::SkipLocked);
}

/// `id` is one of the ids `candidates` picks, the candidates run once (an
/// init plan), see [`super::Dialect::update_of_candidates`].
pub(super) fn id_among(id: Expr, candidates: SelectStatement) -> Expr {
    Expr::cust_with_exprs("$1 = ANY(ARRAY $2)", [id, candidates.into()])
}

/// `NOTIFY channel`, outside any transaction.
pub async fn notify(
    pool: &sea_orm::sqlx::PgPool,
    channel: &str,
) -> Result<(), sea_orm::sqlx::Error> {
    // By the simple protocol, one message: no statement to prepare, which a
    // transaction-mode pooler could split from its bind. The channel is one
    // of ours, a plain identifier.
    debug_assert!(channel.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    sea_orm::sqlx::raw_sql(sea_orm::sqlx::AssertSqlSafe(format!("NOTIFY {channel}")))
        .execute(pool)
        .await?;
    Ok(())
}
