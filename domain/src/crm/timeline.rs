//! The timeline of contacts, companies and deals: one row per change, written
//! in the same transaction as the change (a lead's own timeline is `activity`).

use crate::actor::Actor;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};
use serde::{Deserialize, Serialize};

use crate::entities::crm_activity;
use crate::error::Error;
use crate::page::{self, Page};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Contact,
    Company,
    Deal,
}

impl Subject {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Contact => "contact",
            Self::Company => "company",
            Self::Deal => "deal",
        }
    }
}

pub async fn record<C: ConnectionTrait>(
    conn: &C,
    subject: Subject,
    subject_id: i64,
    kind: &str,
    detail: serde_json::Value,
    author: &Actor,
) -> Result<crm_activity::Model, Error> {
    Ok(crm_activity::ActiveModel {
        subject_type: Set(subject.as_str().to_owned()),
        subject_id: Set(subject_id),
        kind: Set(kind.to_owned()),
        author_id: Set(author.principal_id),
        detail: Set(Some(detail)),
        correlation_id: Set(author.correlation_id.clone()),
        created_at: Set(crate::clock::now()),
        ..Default::default()
    }
    .insert(conn)
    .await?)
}

/// A record's timeline, newest first.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    subject: Subject,
    subject_id: i64,
    limit: u64,
    cursor: Option<&str>,
) -> Result<Page<crm_activity::Model>, Error> {
    let mut query = crm_activity::Entity::find()
        .filter(crm_activity::Column::SubjectType.eq(subject.as_str()))
        .filter(crm_activity::Column::SubjectId.eq(subject_id));
    if let Some(cursor) = cursor {
        query = query.filter(crm_activity::Column::Id.lt(page::id_after(cursor)?));
    }
    let rows = query
        .order_by_desc(crm_activity::Column::Id)
        .limit(limit + 1)
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, limit, |last| {
        page::id_cursor_of(last.id)
    }))
}
