//! A lead's timeline. Every change to a lead, by a sender or a human, writes
//! one row here in the same transaction as the change.

use sea_orm::{ActiveModelTrait, ConnectionTrait, Set};

use crate::entities::activity;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActivityKind {
    Ingest,
    Note,
    /// A call logged (a note of its own kind).
    Call,
    StatusChanged,
    Assigned,
    /// Routing found everyone in the lead's pool away or at capacity.
    AwaitingOwner,
    DuplicateHint,
    Converted,
    TaskCreated,
    TaskUpdated,
    TaskCompleted,
    TaskReopened,
    /// Other leads were merged into this one.
    Merged,
    /// This lead was merged into another.
    MergedInto,
    /// A merge this lead took part in was undone.
    Unmerged,
}

impl ActivityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingest => "ingest",
            Self::Note => "note",
            Self::Call => "call",
            Self::StatusChanged => "status_changed",
            Self::Assigned => "assigned",
            Self::AwaitingOwner => "awaiting_owner",
            Self::DuplicateHint => "duplicate_hint",
            Self::Converted => "converted",
            Self::TaskCreated => "task_created",
            Self::TaskUpdated => "task_updated",
            Self::TaskCompleted => "task_completed",
            Self::TaskReopened => "task_reopened",
            Self::Merged => "merged",
            Self::MergedInto => "merged_into",
            Self::Unmerged => "unmerged",
        }
    }
}

#[derive(Debug, Clone)]
pub struct NewActivity {
    pub lead_id: i64,
    pub kind: ActivityKind,
    pub origin: Option<&'static str>,
    pub outcome: Option<&'static str>,
    pub author_id: Option<i64>,
    pub detail: Option<serde_json::Value>,
    pub correlation_id: Option<String>,
}

pub async fn record<C: ConnectionTrait>(
    conn: &C,
    new: NewActivity,
) -> Result<activity::Model, crate::Error> {
    Ok(new.into_active_model().insert(conn).await?)
}

impl NewActivity {
    /// For callers that insert many rows in one statement.
    pub fn into_active_model(self) -> activity::ActiveModel {
        let new = self;
        activity::ActiveModel {
            lead_id: Set(new.lead_id),
            kind: Set(new.kind.as_str().to_owned()),
            origin: Set(new.origin.map(str::to_owned)),
            outcome: Set(new.outcome.map(str::to_owned)),
            author_id: Set(new.author_id),
            detail: Set(new.detail),
            correlation_id: Set(new.correlation_id),
            created_at: Set(crate::clock::now()),
            ..Default::default()
        }
    }
}
