//! Statement shapes shared by the writers.

use sea_orm::DbBackend;
use sea_orm::sea_query::{Expr, ExprTrait, IntoIden, SelectStatement, UpdateStatement};

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
