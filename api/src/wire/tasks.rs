//! What `/api/tasks` takes and shows.

use chrono::{DateTime, Utc};
use domain::entities::task;
use domain::idempotency::Subject;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The body of `POST /api/tasks` and of `PATCH /api/tasks/{id}`: the
/// domain's own.
pub use domain::crm::task::{NewTask as TaskIn, SubjectType, TaskPatch, TaskStatus};

use crate::wire::about::About;

/// A follow-up task.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Task)]
pub struct TaskOut {
    pub id: i64,
    pub subject_type: SubjectType,
    pub subject_id: i64,
    pub title: String,
    pub description: Option<String>,
    /// The `sales` principal who owns it.
    pub owner_id: i64,
    pub due_at: DateTime<Utc>,
    pub status: TaskStatus,
    pub completed_at: Option<DateTime<Utc>>,
    pub completed_by: Option<i64>,
    pub created_by: Option<i64>,
    /// Goes up with every change; the `ETag` is `"{version}"`.
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<task::Model> for TaskOut {
    fn from(m: task::Model) -> Self {
        Self {
            id: m.id,
            // Written only from these enums; a row they cannot read is not
            // one this code wrote.
            subject_type: SubjectType::parse(&m.subject_type).unwrap_or(SubjectType::Lead),
            subject_id: m.subject_id,
            title: m.title,
            description: m.description,
            owner_id: m.owner_id,
            due_at: m.due_at,
            status: TaskStatus::parse(&m.status).unwrap_or(TaskStatus::Open),
            completed_at: m.completed_at,
            completed_by: m.completed_by,
            created_by: m.created_by,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

crate::wire::versioned::versioned!(TaskOut);

/// A task's title is about its lead or contact: a stored answer goes with
/// them on erasure (a deal outlives its lead's erasure, and so do its tasks).
impl About for TaskOut {
    fn subjects(&self) -> Vec<Subject> {
        match self.subject_type {
            SubjectType::Lead => vec![Subject::Lead(self.subject_id)],
            SubjectType::Contact => vec![Subject::Contact(self.subject_id)],
            SubjectType::Deal => Vec::new(),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// A principal id or `me`.
    pub owner: Option<String>,
    /// `today`, `overdue` or `upcoming` (open tasks only).
    pub due: Option<String>,
    /// `open` or `done`.
    #[param(value_type = Option<TaskStatus>)]
    pub status: Option<String>,
    /// Where the caller's day starts for `due=today`, e.g. `+01:00` or
    /// `-05:00` (default `+00:00`).
    pub utc_offset: Option<String>,
    /// Only the tasks of this lead.
    pub lead_id: Option<i64>,
    /// Only the tasks of this contact.
    pub contact_id: Option<i64>,
    /// Only the tasks of this deal.
    pub deal_id: Option<i64>,
}
