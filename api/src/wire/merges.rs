//! What `POST /api/leads/{id}/merge`, `GET /api/merges/{id}` and
//! `POST /api/merges/{id}/undo` take and show.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use domain::entities::lead_merge;
use domain::idempotency::Subject;
use domain::lead::merge::{self, Provenance};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::about::About;
use crate::wire::leads::LeadOut;
pub use crate::wire::leads::MergeIn;
use crate::wire::versioned::Versioned;

/// An undo takes no body (an empty object is accepted).
#[derive(Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UndoRequest)]
pub struct UndoIn {}

/// A merge: who merged what into which lead, when, and where each kept
/// value came from.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Merge)]
pub struct MergeRecordOut {
    pub id: i64,
    pub survivor_id: i64,
    pub merged_ids: Vec<i64>,
    pub merged_by: Option<i64>,
    pub merged_at: DateTime<Utc>,
    /// Per field, the lead and source its value came from and by which rule
    /// (empty once the survivor was erased).
    pub fields: BTreeMap<String, Provenance>,
    pub undone_at: Option<DateTime<Utc>>,
    pub undone_by: Option<i64>,
}

impl From<lead_merge::Model> for MergeRecordOut {
    fn from(m: lead_merge::Model) -> Self {
        let merged_ids = merge::merged_ids(&m);
        Self {
            id: m.id,
            survivor_id: m.survivor_id,
            merged_ids,
            merged_by: m.merged_by,
            merged_at: m.merged_at,
            fields: serde_json::from_value(m.fields).unwrap_or_default(),
            undone_at: m.undone_at,
            undone_by: m.undone_by,
        }
    }
}

impl About for MergeRecordOut {
    fn subjects(&self) -> Vec<Subject> {
        std::iter::once(self.survivor_id)
            .chain(self.merged_ids.iter().copied())
            .map(Subject::Lead)
            .collect()
    }
}

/// A merge and the survivor after it.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = MergeResult)]
pub struct MergeOut {
    pub merge: MergeRecordOut,
    pub lead: LeadOut,
}

impl Versioned for MergeOut {
    fn version(&self) -> i64 {
        self.lead.version()
    }
}

impl About for MergeOut {
    fn subjects(&self) -> Vec<Subject> {
        let mut subjects = self.merge.subjects();
        subjects.extend(self.lead.subjects());
        subjects
    }
}

/// An undone merge, the survivor after it and the leads given back.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = UndoResult)]
pub struct UndoOut {
    pub merge: MergeRecordOut,
    pub lead: LeadOut,
    pub restored: Vec<LeadOut>,
}

impl Versioned for UndoOut {
    fn version(&self) -> i64 {
        self.lead.version()
    }
}

impl About for UndoOut {
    fn subjects(&self) -> Vec<Subject> {
        let mut subjects = self.merge.subjects();
        subjects.extend(self.lead.subjects());
        subjects.extend(self.restored.iter().flat_map(About::subjects));
        subjects
    }
}

/// Where a merged lead went (the body of its `308`).
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = MergedLead)]
pub struct MergedOut {
    pub lead_id: i64,
    /// The lead it was merged into; `Location` points at it.
    pub survivor_id: i64,
}
