//! What sales staff do to a lead: move its status, assign it, add notes.
//! These are the human-owned fields that no ingest ever touches. Each change
//! writes its timeline row and outbox event in the caller's transaction.

use crate::actor::Actor;
use crate::ids::PrincipalId;
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use serde_json::json;

use crate::auth::check_sales_owner;
use crate::clock;
use crate::entities::{activity as activity_entity, lead};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lead::speed_to_lead::clock as speed_clock;
use crate::lifecycle::lead_status::LeadStatus;
pub use crate::lifecycle::note::NoteKind;
use crate::outbound::{events, outbox};
use crate::precondition::IfMatch;
use crate::routing::waiting;

pub const MAX_NOTE_LEN: usize = 10_000;
pub const MAX_REASON_LEN: usize = 1_000;

pub async fn find_lead<C: ConnectionTrait>(conn: &C, id: i64) -> Result<lead::Model, Error> {
    lead::Entity::find_by_id(id)
        .one(conn)
        .await?
        .ok_or(Error::NotFound)
}

/// The lead, row-locked until the write's commit (PostgreSQL; SQLite has
/// one writer): an erasure that locked it first makes this wait and then
/// find nothing, so no write answers with (and stores for replay) a lead
/// that an erasure is removing. A merged lead takes no writes: they belong
/// to its survivor ([`Error::LeadMerged`]).
pub async fn find_lead_for_write<C: ConnectionTrait>(
    conn: &C,
    id: i64,
) -> Result<lead::Model, Error> {
    let lead = lead::Entity::find_by_id(id)
        .lock_exclusive()
        .one(conn)
        .await?
        .ok_or(Error::NotFound)?;
    match lead.merged_into_id {
        Some(survivor_id) => Err(Error::LeadMerged {
            lead_id: id,
            survivor_id,
        }),
        None => Ok(lead),
    }
}

/// Compare-and-set on `version`: the update applies only to the row we read.
async fn update_if_version<C: ConnectionTrait>(
    conn: &C,
    lead: &lead::Model,
    column: lead::Column,
    value: sea_orm::Value,
    clock_change: Vec<(lead::Column, sea_orm::sea_query::SimpleExpr)>,
) -> Result<Option<lead::Model>, Error> {
    let mut update = lead::Entity::update_many();
    for (column, expr) in clock_change {
        update = update.col_expr(column, expr);
    }
    let updated = update
        .col_expr(column, Expr::val(value))
        .col_expr(
            lead::Column::Version,
            Expr::col(lead::Column::Version).add(1),
        )
        // A human change needs no processing: keep a processed lead processed.
        .col_expr(
            lead::Column::ProcessedVersion,
            Expr::case(
                Expr::col(lead::Column::ProcessedVersion).eq(Expr::col(lead::Column::Version)),
                Expr::col(lead::Column::Version).add(1),
            )
            .finally(Expr::col(lead::Column::ProcessedVersion))
            .into(),
        )
        .col_expr(lead::Column::UpdatedAt, Expr::val(clock::now()))
        .filter(lead::Column::Id.eq(lead.id))
        .filter(lead::Column::Version.eq(lead.version))
        .exec_with_returning(conn)
        .await?;
    Ok(updated.into_iter().next())
}

/// Moves a lead along the status machine.
pub async fn transition<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    to: LeadStatus,
    reason: Option<String>,
    if_match: &IfMatch,
    actor: &Actor,
) -> Result<lead::Model, Error> {
    // A converted lead without its conversion record (contact, company,
    // deal) would be a sale nobody can follow up: only `conversion::convert`
    // moves a lead there.
    if to == LeadStatus::Converted {
        return Err(Error::invalid(
            "to",
            "a lead becomes 'converted' only through POST /api/leads/{id}/convert, which records its contact, company and deal",
        ));
    }
    let reason = reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_LEN)
    {
        return Err(Error::invalid("reason", "must be at most 1000 characters"));
    }
    // Without If-Match a concurrent change just means: read again and decide again.
    for _ in 0..3 {
        let lead = find_lead_for_write(conn, lead_id).await?;
        if_match.check(lead.version)?;
        let from = lead.status;
        from.transition(to, reason.as_deref())?;
        let Some(updated) =
            // A status move is a response: it stops the lead's clock.
            update_if_version(
                conn,
                &lead,
                lead::Column::Status,
                to.as_str().into(),
                vec![(
                    lead::Column::FirstResponseAt,
                    speed_clock::response_expr(clock::now()),
                )],
            )
            .await?
        else {
            continue;
        };
        let detail = json!({ "from": from, "to": to, "reason": reason });
        activity::record(
            conn,
            NewActivity {
                lead_id,
                kind: ActivityKind::StatusChanged,
                origin: None,
                outcome: None,
                author_id: actor.principal_id,
                detail: Some(detail.clone()),
                correlation_id: actor.correlation_id.clone(),
            },
        )
        .await?;
        let payload = events::LeadStatusChanged {
            lead_id,
            from,
            to,
            reason: reason.clone(),
            version: updated.version,
        };
        outbox::enqueue_event(conn, Some(lead_id), &payload, actor.correlation_id.clone()).await?;
        if lead.owner_id.is_some() && from.is_open() && !to.is_open() {
            // Its owner has room for one more.
            waiting::requeue(conn).await?;
        }
        return Ok(updated);
    }
    let current = find_lead_for_write(conn, lead_id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// Sets (or clears) a lead's owner; only active `sales` principals may own leads.
pub async fn assign<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    owner_id: Option<PrincipalId>,
    if_match: &IfMatch,
    actor: &Actor,
) -> Result<lead::Model, Error> {
    if let Some(owner_id) = owner_id {
        check_sales_owner(conn, owner_id).await?;
    }
    let owner_id = owner_id.map(i64::from);
    for _ in 0..3 {
        let lead = find_lead_for_write(conn, lead_id).await?;
        if_match.check(lead.version)?;
        if lead.owner_id == owner_id {
            return Ok(lead);
        }
        // A new owner of a lead nobody answered yet gets the clock afresh;
        // a due time already passed stays on record as a breach.
        let clock_change = if lead.first_response_at.is_none() {
            let now = clock::now();
            let due = speed_clock::due_for(conn, owner_id, now).await?;
            speed_clock::handed_over(&lead, owner_id.map(|_| now), due, now)
        } else {
            Vec::new()
        };
        let Some(updated) = update_if_version(
            conn,
            &lead,
            lead::Column::OwnerId,
            owner_id.into(),
            clock_change,
        )
        .await?
        else {
            continue;
        };
        let detail = json!({ "from": lead.owner_id, "to": owner_id });
        activity::record(
            conn,
            NewActivity {
                lead_id,
                kind: ActivityKind::Assigned,
                origin: None,
                outcome: None,
                author_id: actor.principal_id,
                detail: Some(detail),
                correlation_id: actor.correlation_id.clone(),
            },
        )
        .await?;
        let payload = events::LeadAssigned {
            lead_id,
            from: lead.owner_id,
            to: owner_id,
            version: updated.version,
        };
        outbox::enqueue_event(conn, Some(lead_id), &payload, actor.correlation_id.clone()).await?;
        if lead.owner_id.is_some() && lead.status.is_open() {
            // Its former owner has room for one more.
            waiting::requeue(conn).await?;
        }
        return Ok(updated);
    }
    let current = find_lead_for_write(conn, lead_id).await?;
    Err(Error::PreconditionFailed {
        current: current.version,
    })
}

/// Adds a note (or a call logged) to a lead's timeline.
pub async fn add_note<C: ConnectionTrait>(
    conn: &C,
    lead_id: i64,
    text: &str,
    kind: NoteKind,
    actor: &Actor,
) -> Result<activity_entity::Model, Error> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > MAX_NOTE_LEN {
        return Err(Error::invalid("text", "must be 1 to 10000 characters"));
    }
    find_lead_for_write(conn, lead_id).await?;
    speed_clock::responded(conn, lead_id, clock::now()).await?;
    let note = activity::record(
        conn,
        NewActivity {
            lead_id,
            kind: match kind {
                NoteKind::Note => ActivityKind::Note,
                NoteKind::Call => ActivityKind::Call,
            },
            origin: None,
            outcome: None,
            author_id: actor.principal_id,
            detail: Some(json!({ "text": text })),
            correlation_id: actor.correlation_id.clone(),
        },
    )
    .await?;
    let payload = events::LeadNoteAdded {
        lead_id,
        activity_id: note.id,
        text: text.to_owned(),
        kind,
    };
    outbox::enqueue_event(conn, Some(lead_id), &payload, actor.correlation_id.clone()).await?;
    Ok(note)
}
