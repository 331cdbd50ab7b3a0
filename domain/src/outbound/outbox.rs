//! The transactional outbox: events for downstream systems, written in the
//! same transaction as the change they describe, published later by a job.

use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, Set};

use crate::entities::outbox_event;

use crate::outbound::events::{self, Event};

pub const LEAD_CREATED: &str = events::LEAD_CREATED;
pub const LEAD_UPDATED: &str = events::LEAD_UPDATED;
pub const LEAD_STATUS_CHANGED: &str = events::LeadStatusChanged::TYPE;
pub const LEAD_ASSIGNED: &str = events::LeadAssigned::TYPE;
pub const LEAD_NOTE_ADDED: &str = events::LeadNoteAdded::TYPE;
pub const LEAD_CONVERTED: &str = events::LeadConverted::TYPE;
pub const LEAD_MERGED: &str = events::LeadMerged::TYPE;
pub const LEAD_UNMERGED: &str = events::LeadUnmerged::TYPE;
pub const CONTACT_CREATED: &str = events::ContactCreated::TYPE;
pub const CONTACT_UPDATED: &str = events::ContactUpdated::TYPE;
pub const COMPANY_CREATED: &str = events::CompanyCreated::TYPE;
pub const COMPANY_UPDATED: &str = events::CompanyUpdated::TYPE;
pub const DEAL_CREATED: &str = events::DealCreated::TYPE;
pub const DEAL_STAGE_CHANGED: &str = events::DealStageChanged::TYPE;
pub const TASK_CREATED: &str = events::TaskCreated::TYPE;
pub const TASK_COMPLETED: &str = events::TaskCompleted::TYPE;
pub const LEAD_ERASED: &str = events::LeadErased::TYPE;
pub const SUBSCRIPTION_DISABLED: &str = events::SubscriptionDisabled::TYPE;
pub const PING: &str = events::Ping::TYPE;

/// Events about leadpipe itself rather than the CRM's records: a
/// subscription receives them only when it names them (one that asks for
/// every event does not get them).
pub const OPERATIONAL_EVENT_TYPES: &[&str] = &[SUBSCRIPTION_DISABLED];

/// Every event type a subscription may ask for (`ping` reaches a
/// subscription whatever it asks for, and only when sent to it).
pub const EVENT_TYPES: &[&str] = &[
    LEAD_CREATED,
    LEAD_UPDATED,
    LEAD_STATUS_CHANGED,
    LEAD_ASSIGNED,
    LEAD_NOTE_ADDED,
    LEAD_CONVERTED,
    LEAD_MERGED,
    LEAD_UNMERGED,
    CONTACT_CREATED,
    CONTACT_UPDATED,
    COMPANY_CREATED,
    COMPANY_UPDATED,
    DEAL_CREATED,
    DEAL_STAGE_CHANGED,
    TASK_CREATED,
    TASK_COMPLETED,
    LEAD_ERASED,
    SUBSCRIPTION_DISABLED,
    PING,
];

pub const PENDING: &str = "pending";
/// Copied into one delivery per matching subscription.
pub const DISPATCHED: &str = "dispatched";

/// Writes a typed event: its type name comes with its payload type.
pub async fn enqueue_event<C: ConnectionTrait, E: Event>(
    conn: &C,
    lead_id: Option<i64>,
    payload: &E,
    correlation_id: Option<String>,
) -> Result<outbox_event::Model, crate::Error> {
    let payload = serde_json::to_value(payload).map_err(|e| DbErr::Json(e.to_string()))?;
    enqueue(conn, E::TYPE, lead_id, payload, correlation_id).await
}

/// A `ping` for one subscription only, delivered and recorded like any event.
pub async fn enqueue_ping<C: ConnectionTrait>(
    conn: &C,
    subscription_id: i64,
    correlation_id: Option<String>,
) -> Result<outbox_event::Model, crate::Error> {
    let payload = serde_json::to_value(events::Ping { subscription_id })
        .map_err(|e| DbErr::Json(e.to_string()))?;
    let mut event = new_event(PING, None, payload, correlation_id);
    event.target_subscription_id = Set(Some(subscription_id));
    Ok(event.insert(conn).await?)
}

pub async fn enqueue<C: ConnectionTrait>(
    conn: &C,
    event_type: &str,
    lead_id: Option<i64>,
    payload: serde_json::Value,
    correlation_id: Option<String>,
) -> Result<outbox_event::Model, crate::Error> {
    Ok(new_event(event_type, lead_id, payload, correlation_id)
        .insert(conn)
        .await?)
}

/// A new event's id: `evt_` and a time-ordered UUID.
pub fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::now_v7().simple())
}

/// An event row, for callers that insert many in one statement.
pub fn new_event(
    event_type: &str,
    lead_id: Option<i64>,
    payload: serde_json::Value,
    correlation_id: Option<String>,
) -> outbox_event::ActiveModel {
    outbox_event::ActiveModel {
        event_id: Set(new_event_id()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subscribable_type_has_a_schema() {
        let catalogue = events::catalogue();
        let names: Vec<&str> = catalogue.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, EVENT_TYPES);
        for event in events::catalogue() {
            assert_eq!(event.schema["type"], "object", "{}", event.name);
        }
    }
}
