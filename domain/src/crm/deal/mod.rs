//! Deals: a stage (`open → won | lost`), an amount in minor units and an ISO
//! 4217 currency, an owner (an active sales principal), and links to a
//! contact and a company.

use crate::actor::Actor;
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::record::{self, Changed, Sets};
use super::timeline::{self, Subject};
use crate::auth::check_sales_owner;
use crate::entities::deal::{self, Column, Entity};
use crate::entities::{company, contact};
use crate::error::Error;
use crate::field_presence::Patch;
use crate::outbound::events::{DealCreated, DealStageChanged};
use crate::outbound::outbox;
use crate::page::{self, Page, Window};
use crate::precondition::IfMatch;

pub use crate::lifecycle::deal_stage::{DealStage, IllegalStageMove};

use crate::ids::{CompanyId, ContactId, LeadId, PrincipalId};

pub const DEAL_STAGE_CHANGED: &str = outbox::DEAL_STAGE_CHANGED;
pub const MAX_REASON_LEN: usize = 1000;

#[derive(Debug, Clone, Default)]
pub struct DealInput {
    pub name: Option<String>,
    pub amount_cents: Option<i64>,
    pub currency: Option<String>,
    pub owner_id: Option<PrincipalId>,
    pub contact_id: Option<ContactId>,
    pub company_id: Option<CompanyId>,
}

/// Three upper-case letters (ISO 4217 form; `eur` is accepted as `EUR`).
pub fn currency(raw: &str) -> Result<String, Error> {
    let c = raw.trim().to_ascii_uppercase();
    if c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(c)
    } else {
        Err(Error::invalid(
            "currency",
            "must be an ISO 4217 code such as EUR or USD",
        ))
    }
}

fn amount(cents: i64) -> Result<i64, Error> {
    if cents < 0 {
        return Err(Error::invalid(
            "amount_cents",
            "must be zero or more (minor units, e.g. cents)",
        ));
    }
    Ok(cents)
}

fn name(raw: Option<String>) -> Result<String, Error> {
    let name = super::clean(raw).ok_or_else(|| Error::invalid("name", "is required"))?;
    super::check_len("name", Some(&name), 255)?;
    Ok(name)
}

async fn check_links<C: ConnectionTrait>(
    conn: &C,
    contact_id: Option<ContactId>,
    company_id: Option<CompanyId>,
) -> Result<(), Error> {
    if let Some(ContactId(id)) = contact_id
        && contact::Entity::find_by_id(id).one(conn).await?.is_none()
    {
        return Err(Error::invalid("contact_id", "no such contact"));
    }
    if let Some(CompanyId(id)) = company_id
        && company::Entity::find_by_id(id).one(conn).await?.is_none()
    {
        return Err(Error::invalid("company_id", "no such company"));
    }
    Ok(())
}

/// Creates an `open` deal. `lead_id` is set by conversions.
pub async fn create<C: ConnectionTrait>(
    conn: &C,
    input: DealInput,
    lead_id: Option<LeadId>,
    author: &Actor,
) -> Result<deal::Model, Error> {
    let name = name(input.name)?;
    let amount_cents = amount(
        input
            .amount_cents
            .ok_or_else(|| Error::invalid("amount_cents", "is required"))?,
    )?;
    let currency = currency(
        input
            .currency
            .as_deref()
            .ok_or_else(|| Error::invalid("currency", "is required"))?,
    )?;
    if let Some(owner_id) = input.owner_id {
        check_sales_owner(conn, owner_id).await?;
    }
    check_links(conn, input.contact_id, input.company_id).await?;
    let now = crate::clock::now();
    let created = deal::ActiveModel {
        name: Set(name),
        stage: Set(DealStage::Open),
        amount_cents: Set(amount_cents),
        currency: Set(currency),
        owner_id: Set(input.owner_id.map(i64::from)),
        contact_id: Set(input.contact_id.map(i64::from)),
        company_id: Set(input.company_id.map(i64::from)),
        lead_id: Set(lead_id.map(i64::from)),
        lost_reason: Set(None),
        closed_at: Set(None),
        version: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    timeline::record(
        conn,
        Subject::Deal,
        created.id,
        "created",
        json!({
            "amount_cents": created.amount_cents, "currency": created.currency,
            "owner_id": created.owner_id, "contact_id": created.contact_id,
            "company_id": created.company_id, "lead_id": created.lead_id,
        }),
        author,
    )
    .await?;
    let event = DealCreated {
        deal_id: created.id,
        stage: created.stage,
        amount_cents: created.amount_cents,
        currency: created.currency.clone(),
        owner_id: created.owner_id,
        contact_id: created.contact_id,
        company_id: created.company_id,
        lead_id: created.lead_id,
        version: created.version,
    };
    // On the lead's stream when a conversion made it: after its lead's events.
    outbox::enqueue_event(conn, created.lead_id, &event, author.correlation_id.clone()).await?;
    Ok(created)
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<deal::Model, Error> {
    record::find::<Entity, _>(conn, id).await
}

/// Moves a deal to `won` or `lost`.
pub async fn transition<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    to: DealStage,
    reason: Option<String>,
    if_match: &IfMatch,
    author: &Actor,
) -> Result<deal::Model, Error> {
    let reason = super::clean(reason);
    super::check_len("reason", reason.as_deref(), MAX_REASON_LEN)?;
    let outcome = record::change::<Entity, _>(conn, id, if_match, |current| {
        current.stage.check_move(to)?;
        let lost_reason = if to == DealStage::Lost {
            reason.clone()
        } else {
            None
        };
        Ok(vec![
            (Column::Stage, to.as_str().into()),
            (Column::ClosedAt, Some(crate::clock::now()).into()),
            (Column::LostReason, lost_reason.into()),
        ])
    })
    .await?;
    // A move always sets its three columns, so it always writes.
    let (from, updated) = match outcome {
        Changed::No(current) => return Ok(current),
        Changed::Yes { before, after } => (before.stage, after),
    };
    let detail = json!({ "from": from, "to": to, "reason": reason });
    timeline::record(conn, Subject::Deal, id, "stage_changed", detail, author).await?;
    let payload = DealStageChanged {
        deal_id: id,
        from,
        to,
        reason: reason.clone(),
        lead_id: updated.lead_id,
        version: updated.version,
    };
    outbox::enqueue_event(
        conn,
        updated.lead_id,
        &payload,
        author.correlation_id.clone(),
    )
    .await?;
    Ok(updated)
}

/// Fields to change; absent fields stay as they are, `null` clears a link.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DealPatch {
    pub name: Option<String>,
    pub amount_cents: Option<i64>,
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub owner_id: Patch<PrincipalId>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub contact_id: Patch<ContactId>,
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub company_id: Patch<CompanyId>,
}

pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: DealPatch,
    if_match: &IfMatch,
    author: &Actor,
) -> Result<deal::Model, Error> {
    let new_name = patch.name.map(|n| name(Some(n))).transpose()?;
    let new_amount = patch.amount_cents.map(amount).transpose()?;
    let new_currency = patch.currency.as_deref().map(currency).transpose()?;
    let (owner_id, contact_id, company_id) = (
        patch.owner_id.change(),
        patch.contact_id.change(),
        patch.company_id.change(),
    );
    if let Some(Some(owner_id)) = owner_id {
        check_sales_owner(conn, owner_id).await?;
    }
    check_links(conn, contact_id.flatten(), company_id.flatten()).await?;
    // As stored, to compare with the current row.
    let new_owner = owner_id.map(|o| o.map(i64::from));
    let new_contact = contact_id.map(|c| c.map(i64::from));
    let new_company = company_id.map(|c| c.map(i64::from));
    let mut fields: Vec<&str> = Vec::new();
    let outcome = record::change::<Entity, _>(conn, id, if_match, |current| {
        let mut sets = Sets::new();
        sets.changed((Column::Name, "name"), new_name.as_ref(), &current.name)
            .changed(
                (Column::AmountCents, "amount_cents"),
                new_amount.as_ref(),
                &current.amount_cents,
            )
            .changed(
                (Column::Currency, "currency"),
                new_currency.as_ref(),
                &current.currency,
            )
            .changed(
                (Column::OwnerId, "owner_id"),
                new_owner.as_ref(),
                &current.owner_id,
            )
            .changed(
                (Column::ContactId, "contact_id"),
                new_contact.as_ref(),
                &current.contact_id,
            )
            .changed(
                (Column::CompanyId, "company_id"),
                new_company.as_ref(),
                &current.company_id,
            );
        fields = sets.fields;
        Ok(sets.values)
    })
    .await?;
    let updated = match outcome {
        Changed::No(current) => return Ok(current),
        Changed::Yes { after, .. } => after,
    };
    timeline::record(
        conn,
        Subject::Deal,
        id,
        "updated",
        json!({ "fields": fields, "version": updated.version }),
        author,
    )
    .await?;
    Ok(updated)
}

#[derive(Debug, Clone, Default)]
pub struct DealFilter {
    pub stage: Option<DealStage>,
    pub owner_id: Option<PrincipalId>,
    pub contact_id: Option<ContactId>,
    pub company_id: Option<CompanyId>,
    /// Case-insensitive text in the name.
    pub q: Option<String>,
}

pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &DealFilter,
    window: &Window,
) -> Result<Page<deal::Model>, Error> {
    let mut query = Entity::find();
    if let Some(stage) = filter.stage {
        query = query.filter(Column::Stage.eq(stage.as_str()));
    }
    if let Some(id) = filter.owner_id {
        query = query.filter(Column::OwnerId.eq(id));
    }
    if let Some(id) = filter.contact_id {
        query = query.filter(Column::ContactId.eq(id));
    }
    if let Some(id) = filter.company_id {
        query = query.filter(Column::CompanyId.eq(id));
    }
    if let Some(q) = filter.q.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        query = query.filter(page::matches(Column::Name, &page::like_pattern(q)));
    }
    record::list(conn, query, window).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn currencies_are_three_letters() {
        assert_eq!(currency(" eur ").unwrap(), "EUR");
        assert!(currency("EURO").is_err());
        assert!(currency("E1R").is_err());
    }
}
