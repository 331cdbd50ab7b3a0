//! Contacts, matched by normalised email. A contact without an address is
//! never matched: each such create makes a new one (callers use an
//! Idempotency-Key for those).

use crate::actor::Actor;
use crate::outbound::events::{ContactCreated, ContactUpdated};
use crate::outbound::outbox;
use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::json;
use validator::ValidateEmail;

use super::normalise;
use super::record::{self, Changed, Matched, Sets};
use super::timeline::{self, Subject};
use crate::entities::contact::{self, Column, Entity};
use crate::error::Error;
use crate::field_presence::Patch;
use crate::lead::record::normalise_phone;
use crate::page::{self, Page, Window};
use crate::precondition::IfMatch;

#[derive(Debug, Clone, Default)]
pub struct ContactInput {
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContact {
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company_id: Option<i64>,
}

fn valid_email(raw: Option<String>) -> Result<Option<String>, Error> {
    match raw.as_deref().and_then(normalise::email) {
        Some(e) if e.len() <= 320 && e.validate_email() => Ok(Some(e)),
        Some(_) => Err(Error::invalid("email", "must be an email address")),
        None => Ok(None),
    }
}

fn valid_phone(raw: Option<String>) -> Result<Option<String>, Error> {
    match super::clean(raw).map(|p| normalise_phone(&p)) {
        Some(p) if (5..=20).contains(&p.trim_start_matches('+').len()) => Ok(Some(p)),
        Some(_) => Err(Error::invalid("phone", "must contain 5 to 20 digits")),
        None => Ok(None),
    }
}

impl ContactInput {
    pub fn validate(self) -> Result<NewContact, Error> {
        let name = super::clean(self.name);
        super::check_len("name", name.as_deref(), 255)?;
        Ok(NewContact {
            email: valid_email(self.email)?,
            name,
            phone: valid_phone(self.phone)?,
            company_id: self.company_id,
        })
    }
}

async fn check_company<C: ConnectionTrait>(conn: &C, company_id: Option<i64>) -> Result<(), Error> {
    if let Some(id) = company_id
        && crate::entities::company::Entity::find_by_id(id)
            .one(conn)
            .await?
            .is_none()
    {
        return Err(Error::invalid("company_id", "no such company"));
    }
    Ok(())
}

/// Inserts the contact unless one with its email exists, which is returned
/// instead (unchanged): matching never overwrites what sales keeps.
pub async fn match_or_create<C: ConnectionTrait>(
    conn: &C,
    new: &NewContact,
    author: &Actor,
) -> Result<Matched<contact::Model>, Error> {
    check_company(conn, new.company_id).await?;
    let now = crate::clock::now();
    let mut insert = Query::insert();
    insert
        .into_table(Entity)
        .columns([
            Column::Email,
            Column::Name,
            Column::Phone,
            Column::CompanyId,
            Column::Version,
            Column::CreatedAt,
            Column::UpdatedAt,
        ])
        .values([
            new.email.clone().into(),
            new.name.clone().into(),
            new.phone.clone().into(),
            new.company_id.into(),
            1i64.into(),
            now.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(OnConflict::column(Column::Email).do_nothing().to_owned())
        .returning_all();
    let key = new.email.clone().into();
    let found = record::insert_or_find::<Entity, _>(conn, &insert, Column::Email, key).await?;
    if found.created {
        let created = &found.model;
        let detail = json!({ "company_id": created.company_id });
        timeline::record(
            conn,
            Subject::Contact,
            created.id,
            "created",
            detail,
            author,
        )
        .await?;
        let event = ContactCreated {
            contact_id: created.id,
            company_id: created.company_id,
            version: created.version,
        };
        outbox::enqueue_event(conn, None, &event, author.correlation_id.clone()).await?;
    }
    Ok(found)
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<contact::Model, Error> {
    record::find::<Entity, _>(conn, id).await
}

/// Fields to change; absent fields stay as they are, `null` clears one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactPatch {
    /// An email another contact has is `409`.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub email: Patch<String>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<String>)]
    pub phone: Patch<String>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub company_id: Patch<i64>,
}

pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: ContactPatch,
    if_match: &IfMatch,
    author: &Actor,
) -> Result<contact::Model, Error> {
    let email = patch.email.change().map(valid_email).transpose()?;
    let phone = patch.phone.change().map(valid_phone).transpose()?;
    let name = patch.name.change().map(super::clean);
    super::check_len("name", name.clone().flatten().as_deref(), 255)?;
    let company_id = patch.company_id.change();
    if let Some(company_id) = company_id {
        check_company(conn, company_id).await?;
    }
    let mut changed = Vec::new();
    let outcome = record::change::<Entity, _>(conn, id, if_match, |current| {
        let mut sets = Sets::new();
        sets.changed((Column::Email, "email"), email.as_ref(), &current.email)
            .changed((Column::Name, "name"), name.as_ref(), &current.name)
            .changed((Column::Phone, "phone"), phone.as_ref(), &current.phone)
            .changed(
                (Column::CompanyId, "company_id"),
                company_id.as_ref(),
                &current.company_id,
            );
        changed = sets.fields;
        Ok(sets.values)
    })
    .await
    .map_err(record::taken(
        "another contact already has this email address",
    ))?;
    let updated = match outcome {
        Changed::No(current) => return Ok(current),
        Changed::Yes { after, .. } => after,
    };
    // Field names only: the timeline carries no personal data it need not.
    timeline::record(
        conn,
        Subject::Contact,
        id,
        "updated",
        json!({ "fields": changed, "version": updated.version }),
        author,
    )
    .await?;
    let event = ContactUpdated {
        contact_id: id,
        fields: changed.iter().map(|f| (*f).to_owned()).collect(),
        version: updated.version,
    };
    outbox::enqueue_event(conn, None, &event, author.correlation_id.clone()).await?;
    Ok(updated)
}

#[derive(Debug, Clone, Default)]
pub struct ContactFilter {
    /// Case-insensitive text in name or email.
    pub q: Option<String>,
    pub email: Option<String>,
    pub company_id: Option<i64>,
}

pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &ContactFilter,
    window: &Window,
) -> Result<Page<contact::Model>, Error> {
    let mut query = Entity::find();
    if let Some(email) = filter.email.as_deref().and_then(normalise::email) {
        query = query.filter(Column::Email.eq(email));
    }
    if let Some(company_id) = filter.company_id {
        query = query.filter(Column::CompanyId.eq(company_id));
    }
    if let Some(q) = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        let pattern = page::like_pattern(q);
        query = query.filter(
            Condition::any()
                .add(page::matches(Column::Name, &pattern))
                .add(page::matches(Column::Email, &pattern)),
        );
    }
    record::list(conn, query, window).await
}
