//! A merged lead's natural key is an alias of the lead it was merged into.
//! The upsert never writes a merged row (its conflict arm skips it), so a
//! delivery of such a key reaches the stored row untouched and comes here:
//! the same stale and unchanged rules on the alias's own record, then the
//! survivor takes the fields the record carries. The old lead is never
//! recreated, whichever door the key came through.

use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};
use serde_json::json;

use crate::actor::Actor;
use crate::clock;
use crate::entities::lead::{self, Column};
use crate::error::Error;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lead::outcome::{Origin, Outcome};
use crate::lead::record::NewLead;
use crate::outbound::events::LeadSnapshot;
use crate::outbound::outbox;

/// How many merges deep a chain may be followed (a survivor merged into
/// another lead in turn); a longer one is a bug, not data.
const MAX_CHAIN: usize = 64;

/// The lead `lead` was merged into, following later merges to the end,
/// row-locked; `lead` itself when it was not merged.
pub async fn survivor_of<C: ConnectionTrait>(
    txn: &C,
    lead: lead::Model,
) -> Result<lead::Model, Error> {
    let mut current = lead;
    for _ in 0..MAX_CHAIN {
        let Some(next) = current.merged_into_id else {
            return Ok(current);
        };
        current = lead::Entity::find_by_id(next)
            .lock_exclusive()
            .one(txn)
            .await?
            .ok_or_else(|| DbErr::RecordNotFound(format!("lead {next}, a merge's survivor")))?;
    }
    Err(DbErr::Custom(format!(
        "lead {} is at the end of a merge chain longer than {MAX_CHAIN}",
        current.id
    ))
    .into())
}

/// Applies `new` (from `origin`, by `actor`), whose key is the merged lead
/// `alias_id`'s, to its survivor; its outcome and the survivor as it is
/// now. Writes the survivor's timeline row and, when it changed, its
/// `lead.updated`.
pub(crate) async fn deliver<C: ConnectionTrait>(
    txn: &C,
    new: &NewLead,
    origin: Origin,
    actor: &Actor,
    alias_id: i64,
) -> Result<(Outcome, lead::Model), Error> {
    let alias = lead::Entity::find_by_id(alias_id)
        .lock_exclusive()
        .one(txn)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("merged lead vanished during upsert".into()))?;
    let stale = matches!(
        (new.source_updated_at, alias.source_updated_at),
        (Some(incoming), Some(stored)) if incoming < stored
    );
    let content_hash = new.content_hash();
    let outcome = if stale {
        Outcome::Stale
    } else if alias.content_hash == content_hash {
        Outcome::Unchanged
    } else {
        Outcome::Updated
    };
    let survivor = survivor_of(txn, alias.clone()).await?;
    let now = clock::now();
    let survivor = if outcome == Outcome::Updated {
        // The alias keeps its sender's latest record: what an undo gives back.
        lead::Entity::update_many()
            .col_expr(Column::Email, Expr::val(new.email.clone()))
            .col_expr(Column::Phone, Expr::val(new.phone.clone()))
            .col_expr(Column::Name, Expr::val(new.name.clone()))
            .col_expr(Column::Company, Expr::val(new.company.clone()))
            .col_expr(Column::Payload, Expr::val(new.payload.clone()))
            .col_expr(Column::ContentHash, Expr::val(content_hash))
            .col_expr(
                Column::SourceUpdatedAt,
                Expr::val(new.source_updated_at.or(alias.source_updated_at)),
            )
            .col_expr(Column::UpdatedAt, Expr::val(now))
            .filter(Column::Id.eq(alias.id))
            .exec(txn)
            .await?;
        // The survivor takes what this sender changed, and only that: a
        // field it leaves out or sends again as before keeps the survivor's
        // value (a person's choice at the merge, or another sender's newer
        // one).
        let mut update = lead::Entity::update_many();
        for (column, value, before) in [
            (Column::Email, &new.email, &alias.email),
            (Column::Phone, &new.phone, &alias.phone),
            (Column::Name, &new.name, &alias.name),
            (Column::Company, &new.company, &alias.company),
        ] {
            if let Some(value) = value.as_ref().filter(|v| Some(*v) != before.as_ref()) {
                update = update.col_expr(column, Expr::val(value.clone()));
            }
        }
        update
            .col_expr(Column::Version, Expr::col(Column::Version).add(1))
            .col_expr(Column::UpdatedAt, Expr::val(now))
            .filter(Column::Id.eq(survivor.id))
            .exec_with_returning(txn)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| DbErr::RecordNotFound("survivor vanished during upsert".into()))?
    } else {
        survivor
    };
    let detail = match outcome {
        Outcome::Stale => json!({
            "via_lead_id": alias.id,
            "record_source_updated_at": new.source_updated_at,
            "stored_source_updated_at": alias.source_updated_at,
        }),
        _ => json!({ "via_lead_id": alias.id, "version": survivor.version }),
    };
    activity::record(
        txn,
        NewActivity {
            lead_id: survivor.id,
            kind: ActivityKind::Ingest,
            origin: Some(origin.as_str()),
            outcome: Some(outcome.as_str()),
            author_id: actor.principal_id,
            detail: Some(detail),
            correlation_id: actor.correlation_id.clone(),
        },
    )
    .await?;
    if outcome == Outcome::Updated {
        let payload = serde_json::to_value(LeadSnapshot::from(&survivor))
            .map_err(|e| DbErr::Json(e.to_string()))?;
        outbox::enqueue(
            txn,
            outbox::LEAD_UPDATED,
            Some(survivor.id),
            payload,
            actor.correlation_id.clone(),
        )
        .await?;
    }
    Ok((outcome, survivor))
}
