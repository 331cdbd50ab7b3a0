//! Contacts, companies and deals: what a qualified lead converts into, and
//! what sales keeps working afterwards. Matching is done by the database's
//! unique keys (normalised email, company domain or name), never by a
//! select-then-insert.

pub mod company;
pub mod contact;
pub mod conversion;
pub mod deal;
pub mod normalise;
pub mod timeline;

use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::error::Error;

/// How many times a write re-reads and retries after losing a
/// compare-and-set on `version` to a concurrent writer (no If-Match given).
const CAS_ROUNDS: usize = 3;

/// Trims; `Some("")` becomes `None`.
fn clean(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn check_len(field: &str, value: Option<&str>, max: usize) -> Result<(), Error> {
    if value.is_some_and(|v| v.chars().count() > max) {
        return Err(Error::invalid(
            field,
            &format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// `UPDATE … SET version = version + 1, updated_at = now, <sets> WHERE id = ? AND
/// version = ?`: the compare-and-set every human write goes through.
async fn update_if_version<E, C>(
    conn: &C,
    id_col: E::Column,
    version_col: E::Column,
    updated_at_col: E::Column,
    id: i64,
    version: i64,
    sets: Vec<(E::Column, sea_orm::Value)>,
) -> Result<Option<E::Model>, Error>
where
    E: EntityTrait,
    C: ConnectionTrait,
{
    let mut update = E::update_many()
        .col_expr(version_col, Expr::col(version_col).add(1))
        .col_expr(updated_at_col, Expr::val(crate::clock::now()));
    for (col, value) in sets {
        update = update.col_expr(col, Expr::val(value));
    }
    let rows = update
        .filter(id_col.eq(id))
        .filter(version_col.eq(version))
        .exec_with_returning(conn)
        .await?;
    Ok(rows.into_iter().next())
}
