//! Reading leads and timelines: filters and opaque keyset cursors.
//!
//! Pages are ordered newest first by `(timestamp, id)` and continue strictly
//! after the last row of the previous page, so rows inserted between pages
//! never shift a page: each row that existed is visited exactly once.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait, Func};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use crate::entities::{activity, lead};
use crate::error::Error;
use crate::lifecycle::lead_status::LeadStatus;
use crate::page::{self, Page, SortKey, like_pattern};
use crate::store::Dialect;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerFilter {
    Id(i64),
    Unassigned,
}

#[derive(Debug, Clone, Default)]
pub struct LeadFilter {
    pub status: Option<LeadStatus>,
    pub owner: Option<OwnerFilter>,
    pub source: Option<String>,
    pub q: Option<String>,
    pub updated_since: Option<DateTime<Utc>>,
    pub sort: SortKey,
}

/// How a page query may pick its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// One page for a person: the planner chooses (a selective filter's
    /// index may beat the order index).
    Page,
    /// Every page in turn (an export): always walk the `(timestamp, id)`
    /// index, so each page costs the same and the whole walk is linear.
    Scan,
}

pub async fn list_leads<C: ConnectionTrait>(
    conn: &C,
    filter: &LeadFilter,
    limit: u64,
    cursor: Option<&str>,
) -> Result<Page<lead::Model>, Error> {
    list_leads_by(conn, filter, limit, cursor, Access::Page).await
}

pub async fn list_leads_by<C: ConnectionTrait>(
    conn: &C,
    filter: &LeadFilter,
    limit: u64,
    cursor: Option<&str>,
    access: Access,
) -> Result<Page<lead::Model>, Error> {
    let sort_col = match filter.sort {
        SortKey::UpdatedAt => lead::Column::UpdatedAt,
        SortKey::CreatedAt => lead::Column::CreatedAt,
    };
    // A scan walks the sort order's index: SQLite without statistics would
    // pick the filter's index (for `source`, the unique key) and sort every
    // matching row for each page, so the filtered columns are kept off
    // their indexes there.
    let scan = (access == Access::Scan).then(|| Dialect::of(conn));
    let column = |col: lead::Column| {
        let column = Expr::col((lead::Entity, col));
        match scan {
            Some(dialect) => dialect.unindexed(column),
            None => column,
        }
    };
    // Merged leads live on in their survivor: their rows only hold keys.
    let mut query = lead::Entity::find().filter(lead::Column::MergedIntoId.is_null());
    if let Some(status) = filter.status {
        query = query.filter(column(lead::Column::Status).eq(status.as_str()));
    }
    match filter.owner {
        Some(OwnerFilter::Id(id)) => query = query.filter(column(lead::Column::OwnerId).eq(id)),
        Some(OwnerFilter::Unassigned) => {
            query = query.filter(column(lead::Column::OwnerId).is_null())
        }
        None => {}
    }
    if let Some(source) = &filter.source {
        query = query.filter(column(lead::Column::Source).eq(source.as_str()));
    }
    if let Some(since) = filter.updated_since {
        query = query.filter(lead::Column::UpdatedAt.gte(since));
    }
    if let Some(q) = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        let pattern = like_pattern(q);
        let matches = |col: lead::Column| {
            Expr::expr(Func::lower(Expr::col(col)))
                .like(sea_orm::sea_query::LikeExpr::new(pattern.clone()).escape('\\'))
        };
        query = query.filter(
            Condition::any()
                .add(matches(lead::Column::Name))
                .add(matches(lead::Column::Email))
                .add(matches(lead::Column::Company)),
        );
    }
    if let Some(cursor) = cursor {
        query = query.filter(page::after(
            cursor,
            filter.sort,
            sort_col,
            lead::Column::Id,
        )?);
    }
    let rows = query
        .order_by_desc(sort_col)
        .order_by_desc(lead::Column::Id)
        .limit(limit + 1)
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, limit, |last| {
        let t = match filter.sort {
            SortKey::UpdatedAt => last.updated_at,
            SortKey::CreatedAt => last.created_at,
        };
        page::cursor_of(filter.sort, t, last.id)
    }))
}

/// A lead's timeline, newest first.
pub async fn list_activities<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    limit: u64,
    cursor: Option<&str>,
) -> Result<Page<activity::Model>, Error> {
    let mut query = activity::Entity::find().filter(activity::Column::LeadId.eq(lead_id));
    if let Some(cursor) = cursor {
        query = query.filter(activity::Column::Id.lt(page::id_after(cursor)?));
    }
    let rows = query
        .order_by_desc(activity::Column::Id)
        .limit(limit + 1)
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, limit, |last| {
        page::id_cursor_of(last.id)
    }))
}
