//! What erasure and the subject access export take and show.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::wire::crm::Contact;
use crate::wire::deliveries::{OutboxDeliveryOut, OutboxEventOut};
use crate::wire::inbox::InboxEventOut;
use crate::wire::leads::{ActivityOut, ErasureRecordOut, LeadConversionOut, LeadOut};
use crate::wire::reconcile::ReconcileRejectedOut;

#[derive(Serialize, Deserialize, IntoParams)]
pub struct EraseParams {
    /// Why the lead is erased (required, at most 1000 characters). Kept in
    /// the audit record: do not name the person.
    pub reason: Option<String>,
    /// Also blank the contact the lead was converted into (default false).
    #[serde(default)]
    pub include_contact: bool,
}

/// The audit record of an erasure.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ErasureResult)]
pub struct ErasureOut {
    pub erasure: ErasureRecordOut,
    /// True when the lead had already been erased by an earlier call.
    pub repeated: bool,
}

/// One row of an import that touched the lead.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ImportRowOut {
    pub run_id: i64,
    pub row_number: i64,
    pub line: i64,
    pub source_ref: Option<String>,
    pub outcome: String,
    pub reason: Option<String>,
}

/// Another lead with the same email or phone.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct DuplicateOut {
    pub other_lead_id: i64,
    pub reason: String,
    pub created_at: DateTime<Utc>,
}

/// Everything stored about one lead.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = SubjectExport)]
pub struct SubjectExportOut {
    pub lead: LeadOut,
    /// The lead's timeline, notes included, oldest first.
    pub timeline: Vec<ActivityOut>,
    /// Webhook events that became this lead, with headers and raw body.
    pub inbox_events: Vec<InboxEventOut>,
    /// Records pulled by reconcile for this lead's key that could not be
    /// mapped, with the record as the sender returned it.
    pub reconcile_rejected: Vec<ReconcileRejectedOut>,
    /// Events about this lead for downstream systems.
    pub outbox_events: Vec<OutboxEventOut>,
    /// Their deliveries to subscriptions.
    pub deliveries: Vec<OutboxDeliveryOut>,
    pub import_rows: Vec<ImportRowOut>,
    pub possible_duplicates: Vec<DuplicateOut>,
    pub conversion: Option<LeadConversionOut>,
    /// The contact the lead was converted into.
    pub contact: Option<Contact>,
    /// Follow-up tasks on the lead and on its contact.
    pub tasks: Vec<crate::wire::tasks::TaskOut>,
    /// The leads merged into this one (and into those), each exported the
    /// same way: the same person's data under their own keys. Their own
    /// `merged_leads` is empty.
    #[schema(no_recursion)]
    pub merged_leads: Vec<SubjectExportOut>,
    pub exported_at: DateTime<Utc>,
}

#[derive(Serialize, Deserialize, IntoParams)]
pub struct FormatParam {
    /// `csv` (default) or `ndjson`.
    #[param(pattern = "^(csv|ndjson)$")]
    pub format: Option<String>,
}
