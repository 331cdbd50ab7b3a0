//! The events we send downstream, one payload type each. The outbox stores
//! what these types serialise to, and `GET /api/event-types` describes them
//! from the same types, so the published schema cannot drift from the wire.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use utoipa::openapi::{RefOr, Schema};

use crate::entities::lead;
use crate::lifecycle::deal_stage::DealStage;
use crate::lifecycle::lead_status::LeadStatus;
use crate::lifecycle::task::SubjectType;

/// A payload type and the event type it is sent as.
pub trait Event: Serialize + utoipa::ToSchema {
    const TYPE: &'static str;
    const DESCRIPTION: &'static str;
}

/// A lead's status moved (`lead_id`, `from`, `to`, and the lead's new `version`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadStatusChanged {
    pub lead_id: i64,
    pub from: LeadStatus,
    pub to: LeadStatus,
    pub reason: Option<String>,
    pub version: i64,
}

/// A lead's owner changed; `null` is no owner.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadAssigned {
    pub lead_id: i64,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub version: i64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadNoteAdded {
    pub lead_id: i64,
    pub activity_id: i64,
    pub text: String,
    /// `note`, or `call` for a call logged.
    pub kind: crate::lifecycle::note::NoteKind,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadConverted {
    pub lead_id: i64,
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub deal_id: Option<i64>,
    pub contact_created: bool,
    pub company_created: bool,
    pub version: i64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DealStageChanged {
    pub deal_id: i64,
    pub from: DealStage,
    pub to: DealStage,
    pub reason: Option<String>,
    pub lead_id: Option<i64>,
    pub version: i64,
}

/// Leads were merged into `survivor_id` (`merge_id`: `GET /api/merges/{id}`
/// has the merge's field provenance); the merged leads' keys now update
/// the survivor.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadMerged {
    pub merge_id: i64,
    pub survivor_id: i64,
    pub merged_ids: Vec<i64>,
    /// The survivor's version after the merge.
    pub version: i64,
}

/// A merge was undone: `merged_ids` are leads of their own again.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadUnmerged {
    pub merge_id: i64,
    pub survivor_id: i64,
    pub merged_ids: Vec<i64>,
    /// The survivor's version after the undo.
    pub version: i64,
}

/// A follow-up task was created. No title or description: they are free
/// text that may name a person; read the task by id for them.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskCreated {
    pub task_id: i64,
    pub subject_type: SubjectType,
    pub subject_id: i64,
    pub owner_id: i64,
    pub due_at: chrono::DateTime<chrono::Utc>,
    pub version: i64,
}

/// A follow-up task was completed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskCompleted {
    pub task_id: i64,
    pub subject_type: SubjectType,
    pub subject_id: i64,
    pub completed_by: Option<i64>,
    pub completed_at: chrono::DateTime<chrono::Utc>,
    pub version: i64,
}

/// The lead was erased: its id and the keyed hash of its natural key only,
/// so downstream systems erase their copy too.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LeadErased {
    pub lead_id: i64,
    /// HMAC-SHA256 of `(source, source_ref)`: the tombstone's key.
    pub key_hash: String,
    pub erased_at: chrono::DateTime<chrono::Utc>,
}

/// A contact was created (by hand or by a conversion). Ids only: read the
/// contact by id for its name and email, so an erasure leaves no copy in
/// the outbox.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ContactCreated {
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub version: i64,
}

/// A contact's fields changed: which ones, not their values.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ContactUpdated {
    pub contact_id: i64,
    /// Of `email`, `name`, `phone`, `company_id`.
    pub fields: Vec<String>,
    pub version: i64,
}

/// A company was created (by hand or by a conversion).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CompanyCreated {
    pub company_id: i64,
    pub version: i64,
}

/// A company's fields changed: which ones, not their values.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CompanyUpdated {
    pub company_id: i64,
    /// Of `name`, `domain`.
    pub fields: Vec<String>,
    pub version: i64,
}

/// A deal was created, `open` (by hand or by a conversion; `lead_id` then
/// names the lead). No name: it is free text; read the deal by id.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DealCreated {
    pub deal_id: i64,
    pub stage: DealStage,
    pub amount_cents: i64,
    pub currency: String,
    pub owner_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub company_id: Option<i64>,
    pub lead_id: Option<i64>,
    pub version: i64,
}

/// An operational event: a subscription's deliveries failed with no success
/// for `LEADPIPE_SUBSCRIPTION_DISABLE_AFTER`, so it was disabled (its
/// deliveries are held until it is enabled again). Sent only to the
/// subscriptions that list `subscription.disabled` by name. Not its URL: a
/// receiver's URL may carry its own secret (as Slack's do), and this goes
/// to other receivers; `GET /api/subscriptions/{id}` has it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SubscriptionDisabled {
    pub subscription_id: i64,
    pub reason: String,
    /// The first failure with no success after it.
    pub failing_since: chrono::DateTime<chrono::Utc>,
}

/// Sent by `POST /api/subscriptions/{id}/test` to that subscription only.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Ping {
    pub subscription_id: i64,
}

// The lead as stored, for `lead.created` and `lead.updated`, for each line of
// the NDJSON bulk export, and (as `LeadOut`) for the API. Built field by field
// from the row, so a column kept for internal use never reaches the outside.
// Borrowed from a row (`From<&Model>`: the write path puts one in every
// outbox event and need not copy the payload for it) or owning its strings
// (`From<Model>`, `into_owned`); the JSON is the same.
// A plain comment: the `Lead` schema has no description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Lead)]
pub struct LeadSnapshot<'a> {
    pub id: i64,
    pub source: Cow<'a, str>,
    pub source_ref: Cow<'a, str>,
    pub email: Option<Cow<'a, str>>,
    pub phone: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub company: Option<Cow<'a, str>>,
    /// Anything else the sender sent (an object).
    #[schema(value_type = Object)]
    pub payload: Cow<'a, serde_json::Value>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub source_updated_at: Option<chrono::DateTime<chrono::Utc>>,
    pub status: LeadStatus,
    /// The owning `sales` principal, or `null`.
    pub owner_id: Option<i64>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: chrono::DateTime<chrono::Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

impl<'a> From<&'a lead::Model> for LeadSnapshot<'a> {
    fn from(m: &'a lead::Model) -> Self {
        Self {
            id: m.id,
            source: Cow::Borrowed(&m.source),
            source_ref: Cow::Borrowed(&m.source_ref),
            email: m.email.as_deref().map(Cow::Borrowed),
            phone: m.phone.as_deref().map(Cow::Borrowed),
            name: m.name.as_deref().map(Cow::Borrowed),
            company: m.company.as_deref().map(Cow::Borrowed),
            payload: Cow::Borrowed(&m.payload),
            source_updated_at: m.source_updated_at,
            status: m.status,
            owner_id: m.owner_id,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

impl From<lead::Model> for LeadSnapshot<'static> {
    fn from(m: lead::Model) -> Self {
        Self {
            id: m.id,
            source: Cow::Owned(m.source),
            source_ref: Cow::Owned(m.source_ref),
            email: m.email.map(Cow::Owned),
            phone: m.phone.map(Cow::Owned),
            name: m.name.map(Cow::Owned),
            company: m.company.map(Cow::Owned),
            payload: Cow::Owned(m.payload),
            source_updated_at: m.source_updated_at,
            status: m.status,
            owner_id: m.owner_id,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

impl LeadSnapshot<'_> {
    /// A copy that owns its strings and payload.
    pub fn into_owned(self) -> LeadSnapshot<'static> {
        let own = |text: Cow<'_, str>| Cow::Owned(text.into_owned());
        LeadSnapshot {
            id: self.id,
            source: own(self.source),
            source_ref: own(self.source_ref),
            email: self.email.map(own),
            phone: self.phone.map(own),
            name: self.name.map(own),
            company: self.company.map(own),
            payload: Cow::Owned(self.payload.into_owned()),
            source_updated_at: self.source_updated_at,
            status: self.status,
            owner_id: self.owner_id,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

pub const LEAD_CREATED: &str = "lead.created";
pub const LEAD_UPDATED: &str = "lead.updated";

macro_rules! event {
    ($ty:ty, $name:expr, $description:expr) => {
        impl Event for $ty {
            const TYPE: &'static str = $name;
            const DESCRIPTION: &'static str = $description;
        }
    };
}

event!(
    LeadStatusChanged,
    "lead.status_changed",
    "A lead's status moved."
);
event!(LeadAssigned, "lead.assigned", "A lead's owner changed.");
event!(
    LeadNoteAdded,
    "lead.note_added",
    "A note was added to a lead."
);
event!(
    LeadConverted,
    "lead.converted",
    "A qualified lead became a contact (and perhaps a company and a deal)."
);
event!(
    DealStageChanged,
    "deal.stage_changed",
    "A deal was won or lost."
);
event!(
    LeadMerged,
    "lead.merged",
    "Leads were merged into one; their keys now update the survivor."
);
event!(
    LeadUnmerged,
    "lead.unmerged",
    "A merge was undone; the merged leads are leads of their own again."
);
event!(TaskCreated, "task.created", "A follow-up task was created.");
event!(
    TaskCompleted,
    "task.completed",
    "A follow-up task was completed."
);
event!(
    LeadErased,
    "lead.erased",
    "A lead was erased; erase your copy (no personal data in the event)."
);
event!(ContactCreated, "contact.created", "A contact was created.");
event!(
    ContactUpdated,
    "contact.updated",
    "A contact's fields changed (which ones, not their values)."
);
event!(CompanyCreated, "company.created", "A company was created.");
event!(
    CompanyUpdated,
    "company.updated",
    "A company's fields changed (which ones, not their values)."
);
event!(DealCreated, "deal.created", "A deal was created, open.");
event!(
    SubscriptionDisabled,
    "subscription.disabled",
    "A subscription kept failing and was disabled (operational: sent only to subscriptions that name it)."
);
event!(
    Ping,
    "ping",
    "A test event, sent only by POST /api/subscriptions/{id}/test."
);

/// One event type as `GET /api/event-types` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = EventType)]
pub struct EventTypeInfo {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// JSON Schema of the event's `data`; `$ref`s point into its own `components`.
    #[schema(value_type = Object)]
    pub schema: serde_json::Value,
}

fn schema_of<T: utoipa::ToSchema>() -> serde_json::Value {
    let mut deps: Vec<(String, RefOr<Schema>)> = Vec::new();
    T::schemas(&mut deps);
    let mut root = serde_json::to_value(T::schema()).unwrap_or_default();
    if !deps.is_empty()
        && let Some(object) = root.as_object_mut()
    {
        let components: serde_json::Map<String, serde_json::Value> = deps
            .into_iter()
            .map(|(name, schema)| (name, serde_json::to_value(schema).unwrap_or_default()))
            .collect();
        // `$ref`s read `#/components/schemas/X`: resolvable within this document.
        object.insert(
            "components".into(),
            serde_json::json!({ "schemas": components }),
        );
    }
    root
}

fn info<T: Event>() -> EventTypeInfo {
    EventTypeInfo {
        name: Cow::Borrowed(T::TYPE),
        description: Cow::Borrowed(T::DESCRIPTION),
        schema: schema_of::<T>(),
    }
}

/// Every event type a subscription may name, with the schema of its `data`.
pub fn catalogue() -> Vec<EventTypeInfo> {
    let lead = |name, description| EventTypeInfo {
        name: Cow::Borrowed(name),
        description: Cow::Borrowed(description),
        schema: schema_of::<LeadSnapshot>(),
    };
    vec![
        lead(LEAD_CREATED, "A lead arrived for the first time."),
        lead(LEAD_UPDATED, "A lead's source sent changed fields."),
        info::<LeadStatusChanged>(),
        info::<LeadAssigned>(),
        info::<LeadNoteAdded>(),
        info::<LeadConverted>(),
        info::<LeadMerged>(),
        info::<LeadUnmerged>(),
        info::<ContactCreated>(),
        info::<ContactUpdated>(),
        info::<CompanyCreated>(),
        info::<CompanyUpdated>(),
        info::<DealCreated>(),
        info::<DealStageChanged>(),
        info::<TaskCreated>(),
        info::<TaskCompleted>(),
        info::<LeadErased>(),
        info::<SubscriptionDisabled>(),
        info::<Ping>(),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_borrowed_and_an_owned_snapshot_serialise_alike_as_the_lead_json() {
        let at = chrono::Utc.with_ymd_and_hms(2026, 12, 1, 2, 0, 0).unwrap();
        let row = lead::Model {
            id: 7,
            source: "web".into(),
            source_ref: "r-1".into(),
            email: Some("ada@example.com".into()),
            phone: None,
            name: Some("Ada".into()),
            company: None,
            // Keys in sorted order: the same with or without serde_json's `preserve_order`.
            payload: serde_json::json!({"n": [1, 2.5], "utm": "x"}),
            content_hash: "h".into(),
            source_updated_at: Some(at),
            status: LeadStatus::Contacted,
            owner_id: Some(3),
            version: 2,
            processed_version: 1,
            created_at: at,
            updated_at: at + chrono::TimeDelta::microseconds(5),
            merged_into_id: None,
            assigned_at: None,
            first_response_at: None,
            response_due_at: None,
            response_breached_at: None,
        };
        let borrowed = serde_json::to_string(&LeadSnapshot::from(&row)).unwrap();
        // The wire format of `lead.created`, the export and the API's `Lead`.
        assert_eq!(
            borrowed,
            r#"{"id":7,"source":"web","source_ref":"r-1","email":"ada@example.com","phone":null,"name":"Ada","company":null,"payload":{"n":[1,2.5],"utm":"x"},"source_updated_at":"2026-12-01T02:00:00Z","status":"contacted","owner_id":3,"version":2,"created_at":"2026-12-01T02:00:00Z","updated_at":"2026-12-01T02:00:00.000005Z"}"#
        );
        assert_eq!(
            serde_json::to_string(&LeadSnapshot::from(row.clone())).unwrap(),
            borrowed
        );
        assert_eq!(
            serde_json::to_string(&LeadSnapshot::from(&row).into_owned()).unwrap(),
            borrowed
        );
    }
}
