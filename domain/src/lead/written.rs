//! What the upsert returns of a row it wrote: every column but `payload`.
//! A written row's payload is the one its record carried, so the database
//! need not print every payload for us to parse again (on PostgreSQL that
//! was CPU on both sides for every lead); the caller puts it back
//! ([`WrittenRow::with_payload`]).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Query, ReturningClause};
use sea_orm::{FromQueryResult, Iterable};

use crate::entities::lead::{self, Column};
use crate::lifecycle::lead_status::LeadStatus;

/// The upsert's `RETURNING` clause: every column of `lead` but `payload`.
/// A column added to `lead` is returned with the rest, and
/// [`WrittenRow::with_payload`] stops compiling until it reads it.
pub(crate) fn returning() -> ReturningClause {
    Query::returning().columns(Column::iter().filter(|c| !matches!(c, Column::Payload)))
}

/// A row the upsert wrote, without its payload.
#[derive(FromQueryResult)]
pub(crate) struct WrittenRow {
    id: i64,
    source: String,
    source_ref: String,
    email: Option<String>,
    phone: Option<String>,
    name: Option<String>,
    company: Option<String>,
    content_hash: String,
    source_updated_at: Option<DateTime<Utc>>,
    status: LeadStatus,
    owner_id: Option<i64>,
    version: i64,
    processed_version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    merged_into_id: Option<i64>,
    assigned_at: Option<DateTime<Utc>>,
    first_response_at: Option<DateTime<Utc>>,
    response_due_at: Option<DateTime<Utc>>,
    response_breached_at: Option<DateTime<Utc>>,
}

impl WrittenRow {
    /// Its natural key, as the batch's records name theirs.
    pub(crate) fn key(&self) -> (&str, &str) {
        (self.source.as_str(), self.source_ref.as_str())
    }

    /// The stored row, given the payload of the record that wrote it.
    pub(crate) fn with_payload(self, payload: serde_json::Value) -> lead::Model {
        lead::Model {
            id: self.id,
            source: self.source,
            source_ref: self.source_ref,
            email: self.email,
            phone: self.phone,
            name: self.name,
            company: self.company,
            payload,
            content_hash: self.content_hash,
            source_updated_at: self.source_updated_at,
            status: self.status,
            owner_id: self.owner_id,
            version: self.version,
            processed_version: self.processed_version,
            created_at: self.created_at,
            updated_at: self.updated_at,
            merged_into_id: self.merged_into_id,
            assigned_at: self.assigned_at,
            first_response_at: self.first_response_at,
            response_due_at: self.response_due_at,
            response_breached_at: self.response_breached_at,
        }
    }
}

/// What the upsert returns to callers that only book outcomes
/// ([`super::ingest::ingest_counted_in`]): the key, the id, the version and
/// the sender's time — what an outcome and a timeline row are decided on.
/// Decoding the whole row was 14% of the server's CPU in a reconcile.
#[derive(Debug, Clone, FromQueryResult)]
pub(crate) struct StoredKey {
    pub(crate) id: i64,
    pub(crate) source: String,
    pub(crate) source_ref: String,
    pub(crate) version: i64,
    pub(crate) source_updated_at: Option<DateTime<Utc>>,
    /// A merged lead's key is an alias: its deliveries go on to this lead.
    pub(crate) merged_into_id: Option<i64>,
}

/// [`StoredKey`]'s columns, in its order.
pub(crate) const STORED_KEY_COLUMNS: [Column; 6] = [
    Column::Id,
    Column::Source,
    Column::SourceRef,
    Column::Version,
    Column::SourceUpdatedAt,
    Column::MergedIntoId,
];

impl StoredKey {
    pub(crate) fn key(&self) -> (&str, &str) {
        (self.source.as_str(), self.source_ref.as_str())
    }
}
