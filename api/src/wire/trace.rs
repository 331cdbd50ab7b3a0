//! What `GET /api/ops/trace/{correlation_id}` shows.

use chrono::{DateTime, Utc};
use domain::ops::trace::{InboxSummary, Trace, TraceEntry};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::deliveries::{OutboxDeliveryOut, OutboxEventOut};
use crate::wire::leads::{ActivityOut, LeadOut};

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Trace)]
pub struct TraceOut {
    pub correlation_id: String,
    /// The leads the correlated work touched, as they are now.
    pub leads: Vec<LeadOut>,
    pub entries: Vec<TraceEntryOut>,
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[schema(as = TraceEntry)]
pub enum TraceEntryOut {
    InboxEvent {
        at: DateTime<Utc>,
        event: InboxSummary,
    },
    Activity {
        at: DateTime<Utc>,
        activity: ActivityOut,
    },
    OutboxEvent {
        at: DateTime<Utc>,
        event: OutboxEventOut,
    },
    Delivery {
        at: DateTime<Utc>,
        delivery: OutboxDeliveryOut,
    },
}

impl From<Trace> for TraceOut {
    fn from(t: Trace) -> Self {
        Self {
            correlation_id: t.correlation_id,
            leads: t.leads.into_iter().map(LeadOut::from).collect(),
            entries: t.entries.into_iter().map(TraceEntryOut::from).collect(),
        }
    }
}

impl From<TraceEntry> for TraceEntryOut {
    fn from(e: TraceEntry) -> Self {
        match e {
            TraceEntry::InboxEvent { at, event } => Self::InboxEvent { at, event },
            TraceEntry::Activity { at, activity } => Self::Activity {
                at,
                activity: activity.into(),
            },
            TraceEntry::OutboxEvent { at, event } => Self::OutboxEvent {
                at,
                event: event.into(),
            },
            TraceEntry::Delivery { at, delivery } => Self::Delivery {
                at,
                delivery: delivery.into(),
            },
        }
    }
}
