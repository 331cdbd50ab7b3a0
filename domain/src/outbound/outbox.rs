//! The transactional outbox: events for downstream systems, written in the
//! same transaction as the change they describe, published later by a job.

use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, Set};

use crate::entities::outbox_event;

pub const LEAD_CREATED: &str = "lead.created";
pub const LEAD_UPDATED: &str = "lead.updated";
pub const LEAD_STATUS_CHANGED: &str = "lead.status_changed";
pub const LEAD_ASSIGNED: &str = "lead.assigned";
pub const LEAD_NOTE_ADDED: &str = "lead.note_added";
pub const LEAD_CONVERTED: &str = "lead.converted";
/// The lead was erased: payload `lead_id` and `key_hash` only, so
/// downstream systems erase their copy too.
pub const LEAD_ERASED: &str = "lead.erased";

/// Every event type a subscription may ask for.
pub const EVENT_TYPES: &[&str] = &[
    LEAD_CREATED,
    LEAD_UPDATED,
    LEAD_STATUS_CHANGED,
    LEAD_ASSIGNED,
    LEAD_NOTE_ADDED,
    LEAD_CONVERTED,
    LEAD_ERASED,
];

pub const PENDING: &str = "pending";
/// Copied into one delivery per matching subscription.
pub const DISPATCHED: &str = "dispatched";

pub async fn enqueue<C: ConnectionTrait>(
    conn: &C,
    event_type: &str,
    lead_id: Option<i64>,
    payload: serde_json::Value,
    correlation_id: Option<String>,
) -> Result<outbox_event::Model, DbErr> {
    new_event(event_type, lead_id, payload, correlation_id)
        .insert(conn)
        .await
}

/// An event row, for callers that insert many in one statement.
pub fn new_event(
    event_type: &str,
    lead_id: Option<i64>,
    payload: serde_json::Value,
    correlation_id: Option<String>,
) -> outbox_event::ActiveModel {
    outbox_event::ActiveModel {
        event_id: Set(format!("evt_{}", uuid::Uuid::now_v7().simple())),
        event_type: Set(event_type.to_owned()),
        lead_id: Set(lead_id),
        payload: Set(payload),
        correlation_id: Set(correlation_id),
        state: Set(PENDING.to_owned()),
        created_at: Set(crate::clock::now()),
        published_at: Set(None),
        ..Default::default()
    }
}
