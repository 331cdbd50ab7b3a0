//! Converting a qualified lead into the records sales keeps working: a
//! company and a contact (linked to existing ones when they match), and a
//! deal when asked. Everything happens on the caller's transaction, so the
//! conversion is all or nothing; `lead_conversion`'s primary key on
//! `lead_id` makes a second conversion of the same lead impossible.

use crate::actor::Actor;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;

use crate::auth::{Principal, Role};
use crate::crm::company::{self, CompanyInput, Matched};
use crate::crm::contact::{self, ContactInput, ContactPatch};
use crate::crm::deal::{self, DealInput};
use crate::crm::normalise;
use crate::crm::timeline::{self, Subject};
use crate::entities::{company as company_entity, contact as contact_entity, deal as deal_entity};
use crate::entities::{lead, lead_conversion};
use crate::error::Error;
use crate::ids::{CompanyId, ContactId, LeadId, PrincipalId};
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lead::sales::find_lead_for_write;
use crate::lifecycle::lead_status::LeadStatus;
use crate::outbound::outbox;
use crate::precondition::IfMatch;

pub const LEAD_CONVERTED: &str = outbox::LEAD_CONVERTED;

/// What the caller asks for beyond the lead itself.
#[derive(Debug, Clone, Default)]
pub struct ConvertRequest {
    /// Create a deal: name, amount and currency required; owner defaults to
    /// the lead's owner, else the caller when a sales principal.
    pub deal: Option<DealInput>,
}

/// The records a conversion produced or linked.
#[derive(Debug, Clone)]
pub struct Converted {
    pub lead: lead::Model,
    pub contact: contact_entity::Model,
    pub contact_created: bool,
    pub company: Option<company_entity::Model>,
    pub company_created: bool,
    pub deal: Option<deal_entity::Model>,
}

pub async fn find_conversion<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
) -> Result<Option<lead_conversion::Model>, Error> {
    Ok(lead_conversion::Entity::find_by_id(lead_id)
        .one(conn)
        .await?)
}

/// Converts lead `lead_id`; see the module docs.
pub async fn convert<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    request: ConvertRequest,
    if_match: &IfMatch,
    caller: &Principal,
    actor: &Actor,
) -> Result<Converted, Error> {
    let author = actor.clone();
    let lead = move_to_converted(conn, lead_id, if_match).await?;

    let company = match company_of(&lead) {
        Some(input) => Some(company::match_or_create(conn, &input.validate()?, &author).await?),
        None => None,
    };
    let company_id = company.as_ref().map(|c| c.model.id);
    let contact = link_contact(conn, &lead, company_id, &author).await?;

    let deal = match request.deal {
        Some(mut input) => {
            if input.owner_id.is_none() {
                input.owner_id = lead
                    .owner_id
                    .or((caller.role == Role::Sales).then_some(caller.id))
                    .map(PrincipalId);
            }
            if input.owner_id.is_none() {
                return Err(Error::invalid(
                    "deal.owner_id",
                    "is required: the lead has no owner to inherit",
                ));
            }
            input.contact_id = Some(ContactId(contact.model.id));
            input.company_id = company_id.map(CompanyId);
            Some(
                deal::create(conn, input, Some(LeadId(lead.id)), &author)
                    .await
                    .map_err(prefix_fields("deal"))?,
            )
        }
        None => None,
    };
    let deal_id = deal.as_ref().map(|d| d.id);

    let stored = lead_conversion::ActiveModel {
        lead_id: Set(lead.id),
        contact_id: Set(contact.model.id),
        company_id: Set(company_id),
        deal_id: Set(deal_id),
        converted_by: Set(caller.id),
        correlation_id: Set(actor.correlation_id.clone()),
        created_at: Set(crate::clock::now()),
    };
    let inserted = lead_conversion::Entity::insert(stored)
        .on_conflict(
            OnConflict::column(lead_conversion::Column::LeadId)
                .do_nothing()
                .to_owned(),
        )
        .exec_without_returning(conn)
        .await?;
    if inserted == 0 {
        // Lost a race with another conversion: the caller's transaction rolls back.
        return Err(already_converted(conn, lead.id).await);
    }

    let ids = json!({
        "lead_id": lead.id, "contact_id": contact.model.id,
        "company_id": company_id, "deal_id": deal_id,
    });
    activity::record(
        conn,
        NewActivity {
            lead_id: lead.id,
            kind: ActivityKind::Converted,
            origin: None,
            outcome: None,
            author_id: actor.principal_id,
            detail: Some(json!({
                "from": LeadStatus::Qualified, "to": LeadStatus::Converted,
                "contact_id": contact.model.id, "company_id": company_id, "deal_id": deal_id,
            })),
            correlation_id: actor.correlation_id.clone(),
        },
    )
    .await?;
    let mut touched = vec![(Subject::Contact, contact.model.id)];
    touched.extend(company_id.map(|id| (Subject::Company, id)));
    touched.extend(deal_id.map(|id| (Subject::Deal, id)));
    for (subject, id) in touched {
        timeline::record(conn, subject, id, "lead_converted", ids.clone(), &author).await?;
    }
    let payload = crate::outbound::events::LeadConverted {
        lead_id: lead.id,
        contact_id: contact.model.id,
        company_id,
        deal_id,
        contact_created: contact.created,
        company_created: company.as_ref().is_some_and(|c| c.created),
        version: lead.version,
    };
    outbox::enqueue_event(conn, Some(lead.id), &payload, actor.correlation_id.clone()).await?;

    Ok(Converted {
        lead,
        contact_created: contact.created,
        contact: contact.model,
        company_created: company.as_ref().is_some_and(|c| c.created),
        company: company.map(|c| c.model),
        deal,
    })
}

async fn already_converted<C: ConnectionTrait>(conn: &C, lead_id: i64) -> Error {
    match find_conversion(conn, lead_id).await {
        Ok(Some(existing)) => Error::AlreadyConverted(Box::new(existing)),
        Ok(None) => Error::Conflict("the lead is being converted by another request".into()),
        Err(e) => e,
    }
}

/// The lead's status machine decides (`qualified → converted` only); the
/// move is a compare-and-set on `version`, as every sales write.
async fn move_to_converted<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    if_match: &IfMatch,
) -> Result<lead::Model, Error> {
    for _ in 0..3 {
        let lead = find_lead_for_write(conn, lead_id).await?;
        if find_conversion(conn, lead_id).await?.is_some() {
            return Err(already_converted(conn, lead_id).await);
        }
        let from = lead.status;
        from.transition(LeadStatus::Converted, None)?;
        if_match.check(lead.version)?;
        let updated = lead::Entity::update_many()
            .col_expr(
                lead::Column::Status,
                Expr::val(LeadStatus::Converted.as_str()),
            )
            .col_expr(
                lead::Column::Version,
                Expr::col(lead::Column::Version).add(1),
            )
            .col_expr(lead::Column::UpdatedAt, Expr::val(crate::clock::now()))
            .col_expr(
                lead::Column::FirstResponseAt,
                crate::lead::speed_to_lead::clock::response_expr(crate::clock::now()),
            )
            .filter(lead::Column::Id.eq(lead.id))
            .filter(lead::Column::Version.eq(lead.version))
            .exec_with_returning(conn)
            .await?;
        if let Some(updated) = updated.into_iter().next() {
            return Ok(updated);
        }
    }
    let current = find_lead_for_write(conn, lead_id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// The company a lead belongs to: by its email's domain (unless free mail),
/// named after the lead's `company` field, else the domain; or by name alone.
fn company_of(lead: &lead::Model) -> Option<CompanyInput> {
    let domain = lead
        .email
        .as_deref()
        .and_then(normalise::company_domain_of_email);
    if domain.is_none() && lead.company.is_none() {
        return None;
    }
    Some(CompanyInput {
        name: lead.company.clone(),
        domain,
    })
}

/// Finds the contact by email or creates it; an existing contact without a
/// company is linked to the lead's company.
async fn link_contact<C: ConnectionTrait>(
    conn: &C,
    lead: &lead::Model,
    company_id: Option<i64>,
    author: &Actor,
) -> Result<Matched<contact_entity::Model>, Error> {
    let input = ContactInput {
        email: lead.email.clone(),
        name: lead.name.clone(),
        phone: lead.phone.clone(),
        company_id,
    }
    .validate()?;
    let mut found = contact::match_or_create(conn, &input, author).await?;
    if !found.created && found.model.company_id.is_none() && company_id.is_some() {
        let patch = ContactPatch {
            company_id: Some(company_id).into(),
            ..Default::default()
        };
        found.model = contact::update(conn, found.model.id, patch, &IfMatch::Any, author).await?;
    }
    Ok(found)
}

/// Names a nested input's invalid fields as the client sent them (`deal.name`).
fn prefix_fields(prefix: &'static str) -> impl Fn(Error) -> Error {
    move |err| match err {
        Error::Invalid(fields) => Error::Invalid(
            fields
                .into_iter()
                .map(|mut f| {
                    f.field = format!("{prefix}.{}", f.field);
                    f
                })
                .collect(),
        ),
        other => other,
    }
}
