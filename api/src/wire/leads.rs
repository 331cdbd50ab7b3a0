//! What the API shows of a lead and its records. Each type is built field by
//! field from its row, so a column kept for internal use stays off the wire.

use crate::wire::versioned::Versioned;
use chrono::{DateTime, Utc};
use domain::entities::{activity, lead, lead_conversion, lead_erasure};
use domain::field_presence::Patch;
use domain::idempotency::Subject;
use domain::lead::ingest::Outcome;
use domain::lead::merge;
use domain::lifecycle::lead_status::LeadStatus;
use domain::outbound::events::LeadSnapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};

use crate::wire::about::About;
use crate::wire::about::about_nobody;

/// A lead as the API shows it: the same shape a `lead.created` event carries
/// (one definition, so the two cannot drift). In the OpenAPI document it
/// *is* the `Lead` schema (a `$ref`, not a one-element `allOf` that client
/// generators turn into a second copy of `Lead` and its inline models).
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeadOut {
    pub lead: LeadSnapshot<'static>,
}

impl About for LeadOut {
    fn subjects(&self) -> Vec<Subject> {
        vec![
            Subject::Lead(self.lead.id),
            Subject::Key {
                source: self.lead.source.to_string(),
                source_ref: self.lead.source_ref.to_string(),
            },
        ]
    }
}

impl From<&lead::Model> for LeadOut {
    fn from(m: &lead::Model) -> Self {
        Self {
            lead: LeadSnapshot::from(m).into_owned(),
        }
    }
}

impl From<lead::Model> for LeadOut {
    fn from(m: lead::Model) -> Self {
        Self {
            lead: LeadSnapshot::from(m),
        }
    }
}

impl utoipa::PartialSchema for LeadOut {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        <LeadSnapshot<'static> as utoipa::PartialSchema>::schema()
    }
}

impl ToSchema for LeadOut {
    fn name() -> std::borrow::Cow<'static, str> {
        <LeadSnapshot<'static> as ToSchema>::name()
    }

    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::Schema>)>) {
        <LeadSnapshot<'static> as ToSchema>::schemas(schemas);
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Activity)]
pub struct ActivityOut {
    pub id: i64,
    pub lead_id: i64,
    /// `ingest`, `note`, `status_changed`, `assigned`, `duplicate_hint` or `converted`.
    pub kind: String,
    /// `ingest`: the door — `api`, `webhook`, `reconcile` or `import`.
    pub origin: Option<String>,
    /// `ingest`: `created`, `updated`, `unchanged` or `stale`.
    pub outcome: Option<String>,
    /// The principal who did it, if a person did.
    pub author_id: Option<i64>,
    /// What changed, by kind: `{from, to, reason}`, `{text}`, `{from, to, by}`, ….
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
    pub correlation_id: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl About for ActivityOut {
    fn subjects(&self) -> Vec<Subject> {
        vec![Subject::Lead(self.lead_id)]
    }
}

impl From<activity::Model> for ActivityOut {
    fn from(m: activity::Model) -> Self {
        Self {
            id: m.id,
            lead_id: m.lead_id,
            kind: m.kind,
            origin: m.origin,
            outcome: m.outcome,
            author_id: m.author_id,
            detail: m.detail,
            correlation_id: m.correlation_id,
            created_at: m.created_at,
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = LeadConversion)]
pub struct LeadConversionOut {
    pub lead_id: i64,
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub deal_id: Option<i64>,
    pub converted_by: i64,
    pub correlation_id: Option<String>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
}

impl From<lead_conversion::Model> for LeadConversionOut {
    fn from(m: lead_conversion::Model) -> Self {
        Self {
            lead_id: m.lead_id,
            contact_id: m.contact_id,
            company_id: m.company_id,
            deal_id: m.deal_id,
            converted_by: m.converted_by,
            correlation_id: m.correlation_id,
            created_at: m.created_at,
        }
    }
}

/// The audit record of one erasure: ids, who, when, why and how many rows
/// each table lost. It holds no personal data.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Erasure)]
pub struct ErasureRecordOut {
    pub id: i64,
    /// The erased lead's id (the lead itself is gone).
    pub lead_id: i64,
    /// The tombstone's key: a keyed hash of `(source, source_ref)`.
    pub key_hash: String,
    /// The principal who erased it.
    pub erased_by: Option<i64>,
    pub reason: String,
    /// Rows removed or blanked, by table.
    #[schema(value_type = Object)]
    pub counts: serde_json::Value,
    #[schema(value_type = String, format = DateTime)]
    pub erased_at: DateTime<Utc>,
}

impl From<lead_erasure::Model> for ErasureRecordOut {
    fn from(m: lead_erasure::Model) -> Self {
        Self {
            id: m.id,
            lead_id: m.lead_id,
            key_hash: m.key_hash,
            erased_by: m.erased_by,
            reason: m.reason,
            counts: m.counts,
            erased_at: m.erased_at,
        }
    }
}

/// The lead after an intake upsert, and what the upsert did.
#[derive(Serialize, ToSchema)]
pub struct IngestOut {
    #[serde(flatten)]
    pub lead: LeadOut,
    /// `created` (`201`), `updated`, `unchanged` or `stale` (`200`).
    pub outcome: Outcome,
}

/// The answer for a natural key that was erased: nothing was written.
#[derive(Serialize, ToSchema)]
#[schema(as = IngestSuppressed)]
pub struct SuppressedOut {
    #[schema(schema_with = only_suppressed)]
    pub outcome: Outcome,
}

/// `outcome` of [`SuppressedOut`]: only ever `suppressed`, so no answer fits
/// both shapes of [`IngestOrSuppressed`].
fn only_suppressed() -> utoipa::openapi::Object {
    use utoipa::openapi::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some([Outcome::Suppressed.as_str()]))
        .description(Some("Always `suppressed`."))
        .build()
}

/// The `200` of an upsert: the lead and what the upsert did (`updated`,
/// `unchanged`, `stale`), or `{"outcome": "suppressed"}` alone for an erased
/// key.
// Describes the answer only: `ingest_reply` writes one of the two shapes.
#[derive(ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum IngestOrSuppressed {
    Ingested(Box<IngestOut>),
    Suppressed(SuppressedOut),
}

impl About for IngestOut {
    fn subjects(&self) -> Vec<Subject> {
        self.lead.subjects()
    }
}

// Says nothing but `suppressed`.
about_nobody!(SuppressedOut);

impl Versioned for IngestOut {
    fn version(&self) -> i64 {
        self.lead.version()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use domain::lifecycle::lead_status::LeadStatus;
    use serde_json::json;

    use super::*;
    use crate::wire::check::assert_documented;

    #[test]
    fn a_lead_shows_its_documented_fields_and_no_internal_column() {
        let now = Utc::now();
        let row = lead::Model {
            id: 7,
            source: "web".into(),
            source_ref: "r-1".into(),
            email: Some("ada@example.com".into()),
            phone: Some("4471".into()),
            name: Some("Ada".into()),
            company: Some("Engines".into()),
            payload: json!({"utm": "x"}),
            content_hash: "internal-content-hash".into(),
            source_updated_at: Some(now),
            status: LeadStatus::New,
            owner_id: Some(3),
            version: 4,
            processed_version: 987_654_321,
            created_at: now,
            updated_at: now,
            merged_into_id: Some(876_543_219),
            assigned_at: None,
            first_response_at: None,
            response_due_at: None,
            response_breached_at: None,
        };
        assert_documented(
            &LeadOut::from(&row),
            &["internal-content-hash", "987654321", "876543219"],
        );
    }

    #[test]
    fn timeline_conversion_and_erasure_records_show_their_documented_fields() {
        let now = Utc::now();
        assert_documented(
            &ActivityOut::from(activity::Model {
                id: 1,
                lead_id: 7,
                kind: "note".into(),
                origin: Some("api".into()),
                outcome: Some("created".into()),
                author_id: Some(3),
                detail: Some(json!({"text": "hi"})),
                correlation_id: Some("c".into()),
                created_at: now,
            }),
            &[],
        );
        assert_documented(
            &LeadConversionOut::from(lead_conversion::Model {
                lead_id: 7,
                contact_id: 2,
                company_id: Some(5),
                deal_id: Some(6),
                converted_by: 3,
                correlation_id: Some("c".into()),
                created_at: now,
            }),
            &[],
        );
        assert_documented(
            &ErasureRecordOut::from(lead_erasure::Model {
                id: 1,
                lead_id: 7,
                key_hash: "k".into(),
                erased_by: Some(3),
                reason: "asked".into(),
                counts: json!({"lead": 1}),
                erased_at: now,
            }),
            &[],
        );
    }
}

/// One lead with what only its own page shows.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct LeadDetail {
    #[serde(flatten)]
    pub lead: LeadOut,
    /// Leads from other sources with the same email or phone (never merged
    /// by themselves), each with the request that merges it into this lead.
    pub possible_duplicates: Vec<DuplicateOut>,
    /// When it got its owner, when someone first acted on it, when that
    /// was due.
    pub speed_to_lead: crate::wire::teams::ClockOut,
    /// The leads merged into this one (the first 1,000), each still holding
    /// its sender's key: what the timeline's merge entries are about.
    pub merged_leads: Vec<MergedLeadOut>,
}

/// A lead merged into another: who it was and where it came from.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = MergedLeadSummary)]
pub struct MergedLeadOut {
    pub id: i64,
    pub source: String,
    pub source_ref: String,
    pub name: Option<String>,
    pub email: Option<String>,
}

impl From<lead::Model> for MergedLeadOut {
    fn from(lead: lead::Model) -> Self {
        Self {
            id: lead.id,
            source: lead.source,
            source_ref: lead.source_ref,
            name: lead.name,
            email: lead.email,
        }
    }
}

/// Which leads to merge into the one in the path, and which lead's value
/// to keep where the default rule is not wanted.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = MergeRequest)]
pub struct MergeIn {
    /// The leads merged away (1 to 50; not the survivor).
    pub lead_ids: Vec<i64>,
    /// Per field (`email`, `phone`, `name`, `company`, `status`,
    /// `owner_id`), the id of the lead whose value the survivor keeps.
    /// Unnamed sender fields take the most recently updated lead's value;
    /// unnamed `status` and `owner_id` stay the survivor's.
    #[serde(default)]
    pub fields: BTreeMap<String, i64>,
}

impl From<MergeIn> for merge::MergeRequest {
    fn from(input: MergeIn) -> Self {
        Self {
            lead_ids: input.lead_ids,
            fields: input.fields,
        }
    }
}

/// A possible duplicate of a lead, and how to merge it into that lead.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = DuplicateHint)]
pub struct DuplicateOut {
    pub lead_id: i64,
    /// `email` or `phone`: what the two leads share.
    pub reason: String,
    pub merge: MergeAction,
}

/// A request ready to send: `POST` `body` to `href` with an
/// `Idempotency-Key` (and the lead's `ETag` as `If-Match`).
#[derive(Serialize, Deserialize, ToSchema)]
pub struct MergeAction {
    pub method: String,
    pub href: String,
    pub body: MergeIn,
}

impl DuplicateOut {
    /// `hint`, a duplicate of lead `of`.
    pub fn of(of: i64, hint: domain::lead::processing::DuplicateHint) -> Self {
        Self {
            lead_id: hint.lead_id,
            merge: MergeAction {
                method: "POST".into(),
                href: format!("/api/leads/{of}/merge"),
                body: MergeIn {
                    lead_ids: vec![hint.lead_id],
                    fields: Default::default(),
                },
            },
            reason: hint.reason,
        }
    }
}

impl Versioned for LeadOut {
    fn version(&self) -> i64 {
        self.lead.version
    }
}

impl Versioned for LeadDetail {
    fn version(&self) -> i64 {
        self.lead.version()
    }
}

/// A move of the lead status machine.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LeadTransition)]
pub struct TransitionIn {
    /// The status to move to.
    pub to: LeadStatus,
    /// Why; required when moving to `lost` (at most 1000 characters).
    pub reason: Option<String>,
}

/// Human-owned fields of a lead; absent fields stay as they are.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeadPatch {
    /// An active `sales` principal's id, or `null` for no owner.
    #[serde(default, skip_serializing_if = "Patch::is_absent")]
    #[schema(value_type = Option<i64>)]
    pub owner_id: Patch<i64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = NoteIn)]
pub struct NoteIn {
    /// 1–10,000 characters.
    pub text: String,
    /// `note` (the default) or `call`: a call logged, with what was said.
    /// Either is a response to the lead (it stops its speed-to-lead clock).
    #[serde(default)]
    pub kind: domain::lead::sales::NoteKind,
}

#[derive(Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// Only leads in this status.
    #[param(value_type = Option<LeadStatus>)]
    pub status: Option<String>,
    /// A principal id, `me` or `none` (no owner).
    pub owner: Option<String>,
    /// Only leads from this source.
    pub source: Option<String>,
    /// Case-insensitive text in name, email or company.
    pub q: Option<String>,
}
