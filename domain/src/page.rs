//! Keyset pages, shared by leads (`lead::query`), contacts, companies, deals
//! and every other list: newest first by `(timestamp, id)`, opaque cursors
//! that continue strictly after the previous page's last row, and one limit
//! rule (`clamp_limit`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Select,
};
use serde::{Deserialize, Serialize};

use crate::error::Error;

pub const DEFAULT_LIMIT: u64 = 50;
pub const MAX_LIMIT: u64 = 200;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    #[default]
    UpdatedAt,
    CreatedAt,
}

#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    /// The page of rows fetched with `limit + 1`: the extra row only says
    /// that more follow, and the last kept row gives the next cursor.
    pub fn from_overfetch(mut rows: Vec<T>, limit: u64, cursor: impl FnOnce(&T) -> String) -> Self {
        let next_cursor = if rows.len() as u64 > limit {
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            rows.last().map(cursor)
        } else {
            None
        };
        Self {
            data: rows,
            next_cursor,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            next_cursor: self.next_cursor,
        }
    }
}

/// Where a list ordered by id, newest first, goes on: the page size and
/// the last id of the previous page (the ops lists; their cursor is that
/// id as text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdWindow {
    pub limit: u64,
    pub before: Option<i64>,
}

/// A page of `query` by `id`, newest first, after `window.before`;
/// `row_id` reads a row's id for the next cursor.
pub async fn fetch_by_id<E, C>(
    conn: &C,
    mut query: Select<E>,
    id: E::Column,
    window: IdWindow,
    row_id: impl FnOnce(&E::Model) -> i64,
) -> Result<Page<E::Model>, DbErr>
where
    E: EntityTrait,
    E::Model: Send + Sync,
    C: ConnectionTrait,
{
    if let Some(before) = window.before {
        query = query.filter(id.lt(before));
    }
    let rows = query
        .order_by_desc(id)
        .limit(window.limit.saturating_add(1))
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, window.limit, |row| {
        row_id(row).to_string()
    }))
}

pub fn clamp_limit(limit: Option<u64>) -> u64 {
    limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
}

pub(crate) fn encode<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(cursor: &str) -> Result<T, Error> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| Error::invalid("cursor", "is not a cursor this API returned"))
}

/// What a row contributes to its cursor.
pub trait Keyed {
    fn id(&self) -> i64;
    fn created_at(&self) -> DateTime<Utc>;
    fn updated_at(&self) -> DateTime<Utc>;
}

/// The columns a keyset page orders by.
pub struct KeyColumns<C> {
    pub id: C,
    pub created_at: C,
    pub updated_at: C,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Cursor {
    s: SortKey,
    t: DateTime<Utc>,
    i: i64,
}

/// Common filter of every CRM list.
#[derive(Debug, Clone, Default)]
pub struct Window {
    pub updated_since: Option<DateTime<Utc>>,
    pub sort: SortKey,
    pub limit: u64,
    pub cursor: Option<String>,
}

pub async fn fetch<E, C>(
    conn: &C,
    mut query: Select<E>,
    cols: KeyColumns<E::Column>,
    window: &Window,
) -> Result<Page<E::Model>, Error>
where
    E: EntityTrait,
    E::Model: Keyed + Send + Sync,
    C: ConnectionTrait,
{
    let sort_col = match window.sort {
        SortKey::UpdatedAt => cols.updated_at,
        SortKey::CreatedAt => cols.created_at,
    };
    if let Some(since) = window.updated_since {
        query = query.filter(cols.updated_at.gte(since));
    }
    if let Some(cursor) = window.cursor.as_deref() {
        let cursor: Cursor = decode(cursor)?;
        if cursor.s != window.sort {
            return Err(Error::invalid("cursor", "was made for another sort order"));
        }
        query = query.filter(
            Condition::any().add(sort_col.lt(cursor.t)).add(
                Condition::all()
                    .add(sort_col.eq(cursor.t))
                    .add(cols.id.lt(cursor.i)),
            ),
        );
    }
    let rows = query
        .order_by_desc(sort_col)
        .order_by_desc(cols.id)
        .limit(window.limit + 1)
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, window.limit, |last| {
        let t = match window.sort {
            SortKey::UpdatedAt => last.updated_at(),
            SortKey::CreatedAt => last.created_at(),
        };
        encode(&Cursor {
            s: window.sort,
            t,
            i: last.id(),
        })
    }))
}

macro_rules! keyed {
    ($($entity:ident),*) => {$(
        impl Keyed for crate::entities::$entity::Model {
            fn id(&self) -> i64 { self.id }
            fn created_at(&self) -> DateTime<Utc> { self.created_at }
            fn updated_at(&self) -> DateTime<Utc> { self.updated_at }
        }
    )*};
}
keyed!(contact, company, deal);

/// `%`, `_` and `\` in search text match themselves.
pub fn like_pattern(q: &str) -> String {
    let escaped = q
        .to_lowercase()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// `lower(col) LIKE pattern ESCAPE '\'`.
pub fn matches<C: sea_orm::sea_query::IntoColumnRef>(
    col: C,
    pattern: &str,
) -> sea_orm::sea_query::SimpleExpr {
    use sea_orm::sea_query::{Expr, ExprTrait, Func, LikeExpr};
    Expr::expr(Func::lower(Expr::col(col))).like(LikeExpr::new(pattern).escape('\\'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50%_A\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(clamp_limit(Some(0)), 1);
        assert_eq!(clamp_limit(Some(10_000)), MAX_LIMIT);
        assert_eq!(clamp_limit(None), DEFAULT_LIMIT);
    }
}
