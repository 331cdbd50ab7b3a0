//! THE write path. Every door a lead comes through ends here, so a repeat from
//! any of them costs nothing: the database's unique key on
//! `(source, source_ref)` decides, never a select-then-insert.

use sea_orm::sea_query::{Alias, Expr, ExprTrait, Func, OnConflict, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, FromQueryResult,
    QueryFilter,
};
use serde::Serialize;

use crate::activity::{self, ActivityKind, NewActivity};
use crate::entities::lead::{self, Column};
use crate::error::Error;
use crate::outbox;
use crate::record::{LeadRecord, NewLead};

/// Which door a record came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Api,
    Webhook,
    Reconcile,
    Import,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Webhook => "webhook",
            Self::Reconcile => "reconcile",
            Self::Import => "import",
        }
    }
}

/// What an ingest did to the stored lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
    Stale,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Unchanged => "unchanged",
            Self::Stale => "stale",
        }
    }

    /// Whether downstream systems must hear about it.
    pub fn changed(self) -> bool {
        matches!(self, Self::Created | Self::Updated)
    }
}

#[derive(Debug, Clone, Default)]
pub struct IngestContext {
    pub correlation_id: Option<String>,
    pub author_id: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct Ingested {
    pub outcome: Outcome,
    pub lead: lead::Model,
}

/// Validates, normalises and upserts one record in its own transaction.
#[tracing::instrument(name = "ingest", skip_all, fields(source = %record.source, origin = origin.as_str(), outcome))]
pub async fn ingest(
    db: &DatabaseConnection,
    record: LeadRecord,
    origin: Origin,
    ctx: &IngestContext,
) -> Result<Ingested, Error> {
    let new = record.normalise()?;
    let txn = crate::db::begin_write(db).await?;
    let done = ingest_in(&txn, &new, origin, ctx).await?;
    txn.commit().await?;
    tracing::Span::current().record("outcome", done.outcome.as_str());
    Ok(done)
}

/// The upsert, its activity and its outbox event, on a caller's transaction.
pub async fn ingest_in<C: ConnectionTrait>(
    txn: &C,
    new: &NewLead,
    origin: Origin,
    ctx: &IngestContext,
) -> Result<Ingested, DbErr> {
    let (outcome, lead) = match upsert(txn, new).await? {
        // Inserts start at version 1; the update arm always bumps it.
        Some(lead) if lead.version == 1 => (Outcome::Created, lead),
        Some(lead) => (Outcome::Updated, lead),
        None => {
            let stored = lead::Entity::find()
                .filter(Column::Source.eq(&new.source))
                .filter(Column::SourceRef.eq(&new.source_ref))
                .one(txn)
                .await?
                .ok_or_else(|| DbErr::RecordNotFound("lead vanished during upsert".into()))?;
            let stale = matches!(
                (new.source_updated_at, stored.source_updated_at),
                (Some(incoming), Some(stored)) if incoming < stored
            );
            (
                if stale {
                    Outcome::Stale
                } else {
                    Outcome::Unchanged
                },
                stored,
            )
        }
    };

    let detail = match outcome {
        Outcome::Stale => Some(serde_json::json!({
            "record_source_updated_at": new.source_updated_at,
            "stored_source_updated_at": lead.source_updated_at,
        })),
        _ => Some(serde_json::json!({ "version": lead.version })),
    };
    activity::record(
        txn,
        NewActivity {
            lead_id: lead.id,
            kind: ActivityKind::Ingest,
            origin: Some(origin.as_str()),
            outcome: Some(outcome.as_str()),
            author_id: ctx.author_id,
            detail,
            correlation_id: ctx.correlation_id.clone(),
        },
    )
    .await?;
    if outcome.changed() {
        let event_type = if outcome == Outcome::Created {
            outbox::LEAD_CREATED
        } else {
            outbox::LEAD_UPDATED
        };
        let payload = serde_json::to_value(&lead).map_err(|e| DbErr::Json(e.to_string()))?;
        outbox::enqueue(
            txn,
            event_type,
            Some(lead.id),
            payload,
            ctx.correlation_id.clone(),
        )
        .await?;
    }
    metrics::counter!("leadpipe_ingest_total", "origin" => origin.as_str(), "outcome" => outcome.as_str())
        .increment(1);
    Ok(Ingested { outcome, lead })
}

/// `INSERT .. ON CONFLICT (source, source_ref) DO UPDATE .. WHERE changed and
/// not older`, returning the row only when it was written. Only sender-owned
/// columns appear in the update arm: `status` and `owner_id` are insert-only.
async fn upsert<C: ConnectionTrait>(txn: &C, new: &NewLead) -> Result<Option<lead::Model>, DbErr> {
    let now = crate::clock::now();
    let excluded = |col: Column| Expr::col((Alias::new("excluded"), col));
    let stored = |col: Column| Expr::col((lead::Entity, col));

    let content_changed = stored(Column::ContentHash).ne(excluded(Column::ContentHash));
    let not_older = stored(Column::SourceUpdatedAt)
        .is_null()
        .or(excluded(Column::SourceUpdatedAt).is_null())
        .or(excluded(Column::SourceUpdatedAt).gte(stored(Column::SourceUpdatedAt)));

    let mut insert = Query::insert();
    insert
        .into_table(lead::Entity)
        .columns([
            Column::Source,
            Column::SourceRef,
            Column::Email,
            Column::Phone,
            Column::Name,
            Column::Company,
            Column::Payload,
            Column::ContentHash,
            Column::SourceUpdatedAt,
            Column::Status,
            Column::Version,
            Column::CreatedAt,
            Column::UpdatedAt,
        ])
        .values([
            new.source.clone().into(),
            new.source_ref.clone().into(),
            new.email.clone().into(),
            new.phone.clone().into(),
            new.name.clone().into(),
            new.company.clone().into(),
            new.payload.clone().into(),
            new.content_hash().into(),
            new.source_updated_at.into(),
            "new".into(),
            1i64.into(),
            now.into(),
            now.into(),
        ])
        .map_err(|e| DbErr::Custom(e.to_string()))?
        .on_conflict(
            OnConflict::columns([Column::Source, Column::SourceRef])
                .update_columns([
                    Column::Email,
                    Column::Phone,
                    Column::Name,
                    Column::Company,
                    Column::Payload,
                    Column::ContentHash,
                    Column::UpdatedAt,
                ])
                .value(
                    Column::SourceUpdatedAt,
                    Func::coalesce([
                        excluded(Column::SourceUpdatedAt),
                        stored(Column::SourceUpdatedAt),
                    ]),
                )
                .value(Column::Version, stored(Column::Version).add(1))
                .action_and_where(content_changed.and(not_older))
                .to_owned(),
        )
        .returning_all();

    let stmt = txn.get_database_backend().build(&insert);
    lead::Model::find_by_statement(stmt).one(txn).await
}
