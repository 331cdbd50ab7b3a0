//! Everything that carries one correlation id, in time order: what a request
//! (or a webhook delivery) set off, across tables and processes.

use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};

use crate::entities::{activity, inbox_event, lead, outbox_delivery, outbox_event};
use crate::error::Error;

/// Bounds one trace; a correlation id that touched more is a bulk job.
const MAX_ROWS: u64 = 1_000;

/// One correlated row, as stored; the API shows each through its wire type.
#[derive(Debug, Clone)]
pub enum TraceEntry {
    InboxEvent {
        at: DateTime<Utc>,
        event: InboxSummary,
    },
    Activity {
        at: DateTime<Utc>,
        activity: activity::Model,
    },
    OutboxEvent {
        at: DateTime<Utc>,
        event: outbox_event::Model,
    },
    Delivery {
        at: DateTime<Utc>,
        delivery: outbox_delivery::Model,
    },
}

impl TraceEntry {
    fn at(&self) -> DateTime<Utc> {
        match self {
            Self::InboxEvent { at, .. }
            | Self::Activity { at, .. }
            | Self::OutboxEvent { at, .. }
            | Self::Delivery { at, .. } => *at,
        }
    }
}

/// An inbox event without its body (the ops inbox API shows that).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InboxSummary {
    pub id: i64,
    pub source: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub state: String,
    pub deliveries: i32,
    pub attempts: i32,
    pub outcome: Option<String>,
    pub lead_id: Option<i64>,
    pub last_error: Option<String>,
    pub processed_at: Option<DateTime<Utc>>,
}

impl From<inbox_event::Model> for InboxSummary {
    fn from(m: inbox_event::Model) -> Self {
        Self {
            id: m.id,
            source: m.source,
            event_id: m.event_id,
            event_type: m.event_type,
            state: m.state,
            deliveries: m.deliveries,
            attempts: m.attempts,
            outcome: m.outcome,
            lead_id: m.lead_id,
            last_error: m.last_error,
            processed_at: m.processed_at,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Trace {
    pub correlation_id: String,
    /// The leads the correlated work touched, as they are now.
    pub leads: Vec<lead::Model>,
    pub entries: Vec<TraceEntry>,
}

pub async fn collect<C: ConnectionTrait>(conn: &C, correlation_id: &str) -> Result<Trace, Error> {
    let inbox = inbox_event::Entity::find()
        .filter(inbox_event::Column::CorrelationId.eq(correlation_id))
        .order_by_asc(inbox_event::Column::Id)
        .limit(MAX_ROWS)
        .all(conn)
        .await?;
    let activities = activity::Entity::find()
        .filter(activity::Column::CorrelationId.eq(correlation_id))
        .order_by_asc(activity::Column::Id)
        .limit(MAX_ROWS)
        .all(conn)
        .await?;
    let events = outbox_event::Entity::find()
        .filter(outbox_event::Column::CorrelationId.eq(correlation_id))
        .order_by_asc(outbox_event::Column::Id)
        .limit(MAX_ROWS)
        .all(conn)
        .await?;
    let event_ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    let deliveries = if event_ids.is_empty() {
        Vec::new()
    } else {
        outbox_delivery::Entity::find()
            .filter(outbox_delivery::Column::OutboxEventId.is_in(event_ids))
            .order_by_asc(outbox_delivery::Column::Id)
            .limit(MAX_ROWS)
            .all(conn)
            .await?
    };
    let mut lead_ids: Vec<i64> = activities.iter().map(|a| a.lead_id).collect();
    lead_ids.extend(inbox.iter().filter_map(|e| e.lead_id));
    lead_ids.extend(events.iter().filter_map(|e| e.lead_id));
    lead_ids.sort_unstable();
    lead_ids.dedup();
    let leads = if lead_ids.is_empty() {
        Vec::new()
    } else {
        lead::Entity::find()
            .filter(lead::Column::Id.is_in(lead_ids))
            .order_by_asc(lead::Column::Id)
            .all(conn)
            .await?
    };

    let mut entries: Vec<TraceEntry> = inbox
        .into_iter()
        .map(|e| TraceEntry::InboxEvent {
            at: e.received_at,
            event: e.into(),
        })
        .chain(activities.into_iter().map(|a| TraceEntry::Activity {
            at: a.created_at,
            activity: a,
        }))
        .chain(events.into_iter().map(|e| TraceEntry::OutboxEvent {
            at: e.created_at,
            event: e,
        }))
        .chain(deliveries.into_iter().map(|d| TraceEntry::Delivery {
            at: d.delivered_at.unwrap_or(d.updated_at),
            delivery: d,
        }))
        .collect();
    // Stable: rows written in one transaction keep their written order.
    entries.sort_by_key(TraceEntry::at);
    if leads.is_empty() && entries.is_empty() {
        return Err(Error::NotFound);
    }
    Ok(Trace {
        correlation_id: correlation_id.to_owned(),
        leads,
        entries,
    })
}
