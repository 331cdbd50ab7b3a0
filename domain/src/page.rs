//! Pages, the one mechanism of every list (HTTP, CLI and tests read them
//! alike): keyset pages of leads (`lead::query`), contacts, companies, deals
//! and the rest, newest first by `(timestamp, id)` ([`Window`]) or by id
//! ([`IdWindow`]); cursors that continue strictly after the previous page's
//! last row, made and read only here; one limit rule (`clamp_limit`); and
//! the page's shape and OpenAPI schema ([`Page`], [`Listed`]). The HTTP
//! side only hands the query parameters to [`Window::parse`] and
//! [`IdWindow::parse`].

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Select,
};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
use utoipa::openapi::{Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

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

impl SortKey {
    /// The `sort` a client gives: `updated_at` (also when absent) or
    /// `created_at`.
    pub fn parse(sort: Option<&str>) -> Result<Self, Error> {
        match sort {
            None | Some("updated_at") => Ok(Self::UpdatedAt),
            Some("created_at") => Ok(Self::CreatedAt),
            Some(_) => Err(Error::invalid(
                "sort",
                "must be 'updated_at' or 'created_at'",
            )),
        }
    }
}

/// A page of a list: its rows, and the cursor of the next page (`null` on
/// the last one).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

/// What a page of `Self` is called in the OpenAPI document, so each list
/// keeps its own schema name (`LeadPage`, `CompanyPage`, …) for clients.
pub trait Listed: ToSchema {
    const PAGE: &'static str;
    const PAGE_DESCRIPTION: &'static str;
}

impl<T: Listed> PartialSchema for Page<T> {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .description(Some(T::PAGE_DESCRIPTION))
            .property(
                "data",
                ArrayBuilder::new().items(RefOr::Ref(Ref::from_schema_name(T::name()))),
            )
            .required("data")
            .property(
                "next_cursor",
                ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null])),
            )
            .into()
    }
}

impl<T: Listed> ToSchema for Page<T> {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed(T::PAGE)
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
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

impl IdWindow {
    /// The page a client asks for: `limit` clamped to 1–200 (default 50),
    /// after `cursor` (the `next_cursor` of the previous page).
    pub fn parse(limit: Option<u64>, cursor: Option<&str>) -> Result<Self, Error> {
        let before = cursor
            .map(|c| c.parse::<i64>().map_err(|_| not_a_cursor()))
            .transpose()?;
        Ok(Self {
            limit: clamp_limit(limit),
            before,
        })
    }
}

/// A page of `query` by `id`, newest first, after `window.before`;
/// `row_id` reads a row's id for the next cursor.
pub async fn fetch_by_id<E, C>(
    conn: &C,
    mut query: Select<E>,
    id: E::Column,
    window: IdWindow,
    row_id: impl FnOnce(&E::Model) -> i64,
) -> Result<Page<E::Model>, crate::Error>
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

fn encode<T: Serialize>(value: &T) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

fn decode<T: for<'de> Deserialize<'de>>(cursor: &str) -> Result<T, Error> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(not_a_cursor)
}

fn not_a_cursor() -> Error {
    Error::invalid("cursor", "is not a cursor this API returned")
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

impl Window {
    /// The page a client asks for: `limit` clamped to 1–200 (default 50),
    /// after `cursor`, changed at or after `updated_since` (RFC 3339), in
    /// `sort` order ([`SortKey::parse`]).
    pub fn parse(
        limit: Option<u64>,
        cursor: Option<String>,
        updated_since: Option<&str>,
        sort: Option<&str>,
    ) -> Result<Self, Error> {
        let updated_since = updated_since
            .map(|t| {
                DateTime::parse_from_rfc3339(t)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| Error::invalid("updated_since", "must be an RFC 3339 timestamp"))
            })
            .transpose()?;
        Ok(Self {
            updated_since,
            sort: SortKey::parse(sort)?,
            limit: clamp_limit(limit),
            cursor,
        })
    }
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
        query = query.filter(after(cursor, window.sort, sort_col, cols.id)?);
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
        cursor_of(window.sort, t, last.id())
    }))
}

/// The rows of a keyset page by `(sort_col, id)` that come strictly after
/// `cursor`'s row; a cursor made for another sort order is refused.
pub(crate) fn after<C: ColumnTrait>(
    cursor: &str,
    sort: SortKey,
    sort_col: C,
    id: C,
) -> Result<Condition, Error> {
    let cursor: Cursor = decode(cursor)?;
    if cursor.s != sort {
        return Err(Error::invalid("cursor", "was made for another sort order"));
    }
    Ok(Condition::any().add(sort_col.lt(cursor.t)).add(
        Condition::all()
            .add(sort_col.eq(cursor.t))
            .add(id.lt(cursor.i)),
    ))
}

/// The cursor of a keyset page whose last row has timestamp `t` in `sort`
/// order and id `id`.
pub(crate) fn cursor_of(sort: SortKey, t: DateTime<Utc>, id: i64) -> String {
    encode(&Cursor { s: sort, t, i: id })
}

/// The opaque cursor of a timeline (ordered by id alone): `{"i": id}`.
#[derive(Serialize, Deserialize)]
struct IdCursor {
    i: i64,
}

/// The last id of the previous timeline page, from its opaque cursor.
pub(crate) fn id_after(cursor: &str) -> Result<i64, Error> {
    decode::<IdCursor>(cursor).map(|c| c.i)
}

/// The opaque cursor of a timeline page whose last row has id `id`.
pub(crate) fn id_cursor_of(id: i64) -> String {
    encode(&IdCursor { i: id })
}

/// The opaque cursor of a list soonest due first (tasks): `{"d": due, "i": id}`.
#[derive(Serialize, Deserialize)]
struct DueCursor {
    d: DateTime<Utc>,
    i: i64,
}

/// The due time and id of the previous page's last task, from its cursor.
pub(crate) fn due_after(cursor: &str) -> Result<(DateTime<Utc>, i64), Error> {
    decode::<DueCursor>(cursor).map(|c| (c.d, c.i))
}

/// The cursor of a page, soonest due first, whose last row is due at `d`.
pub(crate) fn due_cursor_of(d: DateTime<Utc>, id: i64) -> String {
    encode(&DueCursor { d, i: id })
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
keyed!(contact, company, deal, task);

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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let t = crate::clock::now();
        let made = cursor_of(SortKey::CreatedAt, t, 42);
        let c: Cursor = decode(&made).unwrap();
        assert_eq!(
            c,
            Cursor {
                s: SortKey::CreatedAt,
                t,
                i: 42
            }
        );
        assert!(decode::<Cursor>("not-a-cursor").is_err());
        assert_eq!(id_after(&id_cursor_of(7)).unwrap(), 7);
        assert!(id_after("not-a-cursor").is_err());
    }

    #[test]
    fn a_client_s_page_parameters_are_parsed_here() {
        assert_eq!(
            IdWindow::parse(Some(0), Some("17")).unwrap(),
            IdWindow {
                limit: 1,
                before: Some(17)
            }
        );
        assert_eq!(
            IdWindow::parse(None, None).unwrap(),
            IdWindow {
                limit: DEFAULT_LIMIT,
                before: None
            }
        );
        assert!(IdWindow::parse(None, Some("x")).is_err());
        let window = Window::parse(
            Some(10_000),
            Some("c".into()),
            Some("2026-01-02T03:04:05+01:00"),
            Some("created_at"),
        )
        .unwrap();
        assert_eq!(window.limit, MAX_LIMIT);
        assert_eq!(window.sort, SortKey::CreatedAt);
        assert_eq!(window.cursor.as_deref(), Some("c"));
        assert_eq!(
            window.updated_since.unwrap().to_rfc3339(),
            "2026-01-02T02:04:05+00:00"
        );
        assert!(Window::parse(None, None, Some("yesterday"), None).is_err());
        assert!(Window::parse(None, None, None, Some("name")).is_err());
        assert_eq!(SortKey::parse(None).unwrap(), SortKey::UpdatedAt);
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50%_A\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(clamp_limit(Some(0)), 1);
        assert_eq!(clamp_limit(Some(10_000)), MAX_LIMIT);
        assert_eq!(clamp_limit(None), DEFAULT_LIMIT);
    }
}
