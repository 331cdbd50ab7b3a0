//! Companies, matched by normalised domain or, lacking one, normalised name.

use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, QueryFilter,
    SqlErr,
};
use serde_json::json;

use super::normalise;
use super::timeline::{self, Author, Subject};
use crate::entities::company::{self, Column, Entity};
use crate::error::Error;
use crate::page::{self, KeyColumns, Page, Window};
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

/// A record found by its match key, or created.
#[derive(Debug, Clone)]
pub struct Matched<T> {
    pub model: T,
    pub created: bool,
}

/// `INSERT .. ON CONFLICT (match_key) DO NOTHING RETURNING *`, then the
/// existing row when the insert lost: concurrent callers converge on one company.
pub async fn match_or_create<C: ConnectionTrait>(
    conn: &C,
    new: &NewCompany,
    author: &Author,
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
    let stmt = conn.get_database_backend().build(&insert);
    if let Some(created) = company::Model::find_by_statement(stmt).one(conn).await? {
        timeline::record(
            conn,
            Subject::Company,
            created.id,
            "created",
            json!({ "name": created.name, "domain": created.domain }),
            author,
        )
        .await?;
        return Ok(Matched {
            model: created,
            created: true,
        });
    }
    let existing = Entity::find()
        .filter(Column::MatchKey.eq(new.match_key.as_str()))
        .one(conn)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("company vanished during upsert".into()))?;
    Ok(Matched {
        model: existing,
        created: false,
    })
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<company::Model, Error> {
    Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// A change to a company: fields left `None` stay as they are.
#[derive(Debug, Clone, Default)]
pub struct CompanyPatch {
    pub name: Option<String>,
    /// `Some(None)` clears the domain (the company is then matched by name).
    pub domain: Option<Option<String>>,
}

pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: CompanyPatch,
    if_match: &IfMatch,
    author: &Author,
) -> Result<company::Model, Error> {
    for _ in 0..super::CAS_ROUNDS {
        let current = find(conn, id).await?;
        if_match.check(current.version)?;
        let next = CompanyInput {
            name: Some(patch.name.clone().unwrap_or_else(|| current.name.clone())),
            domain: match &patch.domain {
                Some(domain) => domain.clone(),
                None => current.domain.clone(),
            },
        }
        .validate()?;
        if next.name == current.name && next.domain == current.domain {
            return Ok(current);
        }
        let sets = vec![
            (Column::Name, next.name.clone().into()),
            (Column::Domain, next.domain.clone().into()),
            (Column::MatchKey, next.match_key.clone().into()),
        ];
        let updated = super::update_if_version::<Entity, _>(
            conn,
            Column::Id,
            Column::Version,
            Column::UpdatedAt,
            id,
            current.version,
            sets,
        )
        .await
        .map_err(|e| match e {
            Error::Db(db) if matches!(db.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
                Error::Conflict("another company already has this domain (or name)".into())
            }
            other => other,
        })?;
        let Some(updated) = updated else { continue };
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
        return Ok(updated);
    }
    let current = find(conn, id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
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
    page::fetch(
        conn,
        query,
        KeyColumns {
            id: Column::Id,
            created_at: Column::CreatedAt,
            updated_at: Column::UpdatedAt,
        },
        window,
    )
    .await
}
