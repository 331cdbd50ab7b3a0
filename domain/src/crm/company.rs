//! Companies, matched by normalised domain or, lacking one, normalised name.

use crate::actor::Actor;
use crate::outbound::events::{CompanyCreated, CompanyUpdated};
use crate::outbound::outbox;
use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::normalise;
pub use super::record::Matched;
use super::record::{self, Changed};
use super::timeline::{self, Subject};
use crate::entities::company::{self, Column, Entity};
use crate::error::Error;
use crate::field_presence::Patch;
use crate::page::{self, Page, Window};
use crate::precondition::IfMatch;

pub const MAX_NAME_LEN: usize = 255;

/// A company as a caller (or a lead) describes it.
#[derive(Debug, Clone, Default)]
pub struct CompanyInput {
    pub name: Option<String>,
    /// A domain or a website URL; reduced to its host.
    pub domain: Option<String>,
}

/// A validated company: a name, and the domain when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCompany {
    pub name: String,
    pub domain: Option<String>,
    pub match_key: String,
}

impl CompanyInput {
    pub fn validate(self) -> Result<NewCompany, Error> {
        let domain = match super::clean(self.domain) {
            Some(raw) => Some(normalise::domain(&raw).ok_or_else(|| {
                Error::invalid("domain", "must be a domain name or a website URL")
            })?),
            None => None,
        };
        let name = super::clean(self.name)
            .or_else(|| domain.clone())
            .ok_or_else(|| Error::invalid("name", "is required (or a domain)"))?;
        super::check_len("name", Some(&name), MAX_NAME_LEN)?;
        let match_key = normalise::company_match_key(domain.as_deref(), &name)
            .ok_or_else(|| Error::invalid("name", "is required (or a domain)"))?;
        Ok(NewCompany {
            name,
            domain,
            match_key,
        })
    }
}

/// `INSERT .. ON CONFLICT (match_key) DO NOTHING RETURNING *`, then the
/// existing row when the insert lost: concurrent callers converge on one company.
pub async fn match_or_create<C: ConnectionTrait>(
    conn: &C,
    new: &NewCompany,
    author: &Actor,
) -> Result<Matched<company::Model>, Error> {
    let now = crate::clock::now();
    let mut insert = Query::insert();
    insert
        .into_table(Entity)
        .columns([
            Column::Name,
            Column::Domain,
            Column::MatchKey,
            Column::Version,
            Column::CreatedAt,
            Column::UpdatedAt,
        ])
        .values([
            new.name.clone().into(),
            new.domain.clone().into(),
            new.match_key.clone().into(),
            1i64.into(),
            now.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(OnConflict::column(Column::MatchKey).do_nothing().to_owned())
        .returning_all();
    let key = new.match_key.clone().into();
    let found = record::insert_or_find::<Entity, _>(conn, &insert, Column::MatchKey, key).await?;
    if found.created {
        let created = &found.model;
        let detail = json!({ "name": created.name, "domain": created.domain });
        timeline::record(
            conn,
            Subject::Company,
            created.id,
            "created",
            detail,
            author,
        )
        .await?;
        let event = CompanyCreated {
            company_id: created.id,
            version: created.version,
        };
        outbox::enqueue_event(conn, None, &event, author.correlation_id.clone()).await?;
    }
    Ok(found)
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<company::Model, Error> {
    record::find::<Entity, _>(conn, id).await
}

/// Fields to change; absent fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompanyPatch {
    pub name: Option<String>,
    /// `null` clears it; a domain another company has is `409`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub domain: Patch<String>,
}

pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: CompanyPatch,
    if_match: &IfMatch,
    author: &Actor,
) -> Result<company::Model, Error> {
    let changed = record::change::<Entity, _>(conn, id, if_match, |current| {
        let next = CompanyInput {
            name: Some(patch.name.clone().unwrap_or_else(|| current.name.clone())),
            // Cleared, the company is matched by name.
            domain: match &patch.domain {
                Patch::Value(domain) => Some(domain.clone()),
                Patch::Null => None,
                Patch::Absent => current.domain.clone(),
            },
        }
        .validate()?;
        if next.name == current.name && next.domain == current.domain {
            return Ok(Vec::new());
        }
        Ok(vec![
            (Column::Name, next.name.into()),
            (Column::Domain, next.domain.into()),
            (Column::MatchKey, next.match_key.into()),
        ])
    })
    .await
    .map_err(record::taken(
        "another company already has this domain (or name)",
    ))?;
    let (current, updated) = match changed {
        Changed::No(current) => return Ok(current),
        Changed::Yes { before, after } => (before, after),
    };
    timeline::record(
        conn,
        Subject::Company,
        id,
        "updated",
        json!({
            "from": { "name": current.name, "domain": current.domain },
            "to": { "name": updated.name, "domain": updated.domain },
        }),
        author,
    )
    .await?;
    let fields = [
        ("name", current.name != updated.name),
        ("domain", current.domain != updated.domain),
    ];
    let event = CompanyUpdated {
        company_id: id,
        fields: fields
            .iter()
            .filter(|(_, changed)| *changed)
            .map(|(field, _)| (*field).to_owned())
            .collect(),
        version: updated.version,
    };
    outbox::enqueue_event(conn, None, &event, author.correlation_id.clone()).await?;
    Ok(updated)
}

#[derive(Debug, Clone, Default)]
pub struct CompanyFilter {
    /// Case-insensitive text in the name or domain.
    pub q: Option<String>,
    pub domain: Option<String>,
}

pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &CompanyFilter,
    window: &Window,
) -> Result<Page<company::Model>, Error> {
    let mut query = Entity::find();
    if let Some(domain) = filter.domain.as_deref() {
        let domain = normalise::domain(domain).unwrap_or_else(|| domain.to_lowercase());
        query = query.filter(Column::Domain.eq(domain));
    }
    if let Some(q) = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        let pattern = page::like_pattern(q);
        query = query.filter(
            Condition::any()
                .add(page::matches(Column::Name, &pattern))
                .add(page::matches(Column::Domain, &pattern)),
        );
    }
    record::list(conn, query, window).await
}
