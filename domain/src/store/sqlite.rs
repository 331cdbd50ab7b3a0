//! SQL that only SQLite speaks. Callers reach it through
//! [`super::Dialect`], which pairs each piece with PostgreSQL's.

use sea_orm::sea_query::Expr;
use sea_orm::{ConnectionTrait, DbBackend, DbErr, Statement};

/// The tombstones one of `hashes` names (as `key_hash` or `folded_hash`).
/// SQLite has no array parameter: the hashes travel as one JSON array, so
/// the statement text is the same whatever their number (SQLite caches a
/// prepared statement per distinct text and connection).
pub(super) fn find_tombstones(hashes: Vec<String>) -> Result<Statement, DbErr> {
    let hashes = serde_json::to_string(&hashes).map_err(|e| DbErr::Json(e.to_string()))?;
    Ok(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "SELECT key_hash, folded_hash FROM lead_tombstone \
         WHERE key_hash IN (SELECT value FROM json_each(?)) \
         OR folded_hash IN (SELECT value FROM json_each(?))",
        [hashes.clone().into(), hashes.into()],
    ))
}

/// The bucket number (seconds since the epoch / `width`) of a timestamp
/// column. Stored as RFC 3339 text, which strftime reads (offset included).
pub(super) fn epoch_bucket(column: &str, width: i64) -> String {
    format!("CAST(strftime('%s', \"{column}\") AS INTEGER) / {width}")
}

/// `column` as an expression no index serves (a unary `+`). SQLite's
/// builder fills `?` with the expression.
pub(super) fn unindexed(column: Expr) -> Expr {
    Expr::cust_with_expr("+?", column)
}

/// Copies the database into the file at `path` (`VACUUM INTO`), which must
/// not exist or be empty.
pub async fn vacuum_into<C: ConnectionTrait + ?Sized>(
    conn: &C,
    path: &str,
) -> Result<(), crate::Error> {
    conn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "VACUUM INTO ?",
        [path.into()],
    ))
    .await?;
    Ok(())
}
