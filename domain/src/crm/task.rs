//! Follow-up tasks: something a rep owes a lead, a contact or a deal by a
//! due time (`open → done`, and back to `open` when reopened). Each change
//! writes the record's timeline in the same transaction, and creating or
//! completing one writes an outbox event in order with the lead's others.

use chrono::{DateTime, Datelike, Duration, FixedOffset, NaiveTime, Offset, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::record::{self, Changed, Sets};
use super::timeline;
use crate::actor::Actor;
use crate::auth::check_sales_owner;
use crate::entities::task::{self, Column, Entity};
use crate::entities::{contact, deal, lead_conversion};
use crate::error::Error;
use crate::ids::PrincipalId;
use crate::lead::activity::{self, ActivityKind, NewActivity};
use crate::lead::sales::find_lead_for_write;
use crate::outbound::events::{TaskCompleted, TaskCreated};
use crate::outbound::outbox;
use crate::page::{self, Page};
use crate::precondition::IfMatch;

pub use crate::lifecycle::task::{SubjectType, TaskStatus};

pub const MAX_TITLE_LEN: usize = 255;
pub const MAX_DESCRIPTION_LEN: usize = 10_000;

/// A new task, as the API takes it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TaskIn)]
pub struct NewTask {
    pub subject_type: SubjectType,
    pub subject_id: i64,
    /// What to do, e.g. "Call back about the quote" (1–255 characters).
    pub title: String,
    pub description: Option<String>,
    /// An active `sales` principal; defaults to a `sales` caller.
    pub owner_id: Option<i64>,
    /// When it is due (RFC 3339).
    pub due_at: DateTime<Utc>,
}

/// Fields to change; absent fields stay as they are. `status: "done"`
/// completes the task, `"open"` reopens it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskPatch {
    pub title: Option<String>,
    /// `null` clears it.
    #[serde(
        default,
        skip_serializing_if = "crate::field_presence::Patch::is_absent"
    )]
    #[schema(value_type = Option<String>)]
    pub description: crate::field_presence::Patch<String>,
    pub owner_id: Option<i64>,
    pub due_at: Option<DateTime<Utc>>,
    pub status: Option<TaskStatus>,
}

fn title(raw: &str) -> Result<String, Error> {
    let title = raw.trim();
    if title.is_empty() || title.chars().count() > MAX_TITLE_LEN {
        return Err(Error::invalid("title", "must be 1 to 255 characters"));
    }
    Ok(title.to_owned())
}

/// Years 1 to 9999: what RFC 3339 writes and both databases store (a year
/// before 1 reached PostgreSQL as an error, not as a refusal).
fn due(at: DateTime<Utc>) -> Result<DateTime<Utc>, Error> {
    if (1..=9999).contains(&at.year()) {
        Ok(at)
    } else {
        Err(Error::invalid("due_at", "must be in the years 1 to 9999"))
    }
}

fn description(raw: Option<String>) -> Result<Option<String>, Error> {
    let description = super::clean(raw);
    super::check_len("description", description.as_deref(), MAX_DESCRIPTION_LEN)?;
    Ok(description)
}

/// The lead a task's events travel with (so they keep the lead's order and
/// go with it on erasure), found and locked: a task on a lead being erased
/// waits for the erasure and then finds no lead.
async fn subject_lead<C: ConnectionTrait>(
    conn: &C,
    subject: SubjectType,
    subject_id: i64,
) -> Result<Option<i64>, Error> {
    let field = || Error::invalid("subject_id", &format!("no such {}", subject.as_str()));
    match subject {
        SubjectType::Lead => match find_lead_for_write(conn, subject_id).await {
            Ok(lead) => Ok(Some(lead.id)),
            Err(Error::NotFound) => Err(field()),
            Err(e) => Err(e),
        },
        SubjectType::Deal => {
            let deal = deal::Entity::find_by_id(subject_id)
                .one(conn)
                .await?
                .ok_or_else(field)?;
            Ok(deal.lead_id)
        }
        SubjectType::Contact => {
            contact::Entity::find_by_id(subject_id)
                .lock_exclusive()
                .one(conn)
                .await?
                .ok_or_else(field)?;
            let converted = lead_conversion::Entity::find()
                .filter(lead_conversion::Column::ContactId.eq(subject_id))
                .one(conn)
                .await?;
            Ok(converted.map(|c| c.lead_id))
        }
    }
}

/// One line on the timeline of the task's record.
async fn on_timeline<C: ConnectionTrait>(
    conn: &C,
    task: &task::Model,
    kind: ActivityKind,
    detail: serde_json::Value,
    author: &Actor,
) -> Result<(), Error> {
    match SubjectType::parse(&task.subject_type) {
        Some(SubjectType::Lead) => {
            activity::record(
                conn,
                NewActivity {
                    lead_id: task.subject_id,
                    kind,
                    origin: None,
                    outcome: None,
                    author_id: author.principal_id,
                    detail: Some(detail),
                    correlation_id: author.correlation_id.clone(),
                },
            )
            .await?;
        }
        Some(other) => {
            let subject = match other {
                SubjectType::Contact => timeline::Subject::Contact,
                _ => timeline::Subject::Deal,
            };
            timeline::record(
                conn,
                subject,
                task.subject_id,
                kind.as_str(),
                detail,
                author,
            )
            .await?;
        }
        None => {}
    }
    Ok(())
}

/// Creates an `open` task on a lead, contact or deal.
pub async fn create<C: ConnectionTrait>(
    conn: &C,
    new: NewTask,
    author: &Actor,
) -> Result<task::Model, Error> {
    let title = title(&new.title)?;
    let due_at = due(new.due_at)?;
    let description = description(new.description)?;
    let owner_id = new
        .owner_id
        .ok_or_else(|| Error::invalid("owner_id", "is required (an active sales principal)"))?;
    check_sales_owner(conn, PrincipalId(owner_id)).await?;
    let lead_id = subject_lead(conn, new.subject_type, new.subject_id).await?;
    let now = crate::clock::now();
    let created = task::ActiveModel {
        subject_type: Set(new.subject_type.as_str().to_owned()),
        subject_id: Set(new.subject_id),
        title: Set(title),
        description: Set(description),
        owner_id: Set(owner_id),
        due_at: Set(due_at),
        status: Set(TaskStatus::Open.as_str().to_owned()),
        completed_at: Set(None),
        completed_by: Set(None),
        created_by: Set(author.principal_id),
        version: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    let detail = json!({ "task_id": created.id, "title": created.title, "owner_id": owner_id, "due_at": created.due_at });
    on_timeline(conn, &created, ActivityKind::TaskCreated, detail, author).await?;
    let event = TaskCreated {
        task_id: created.id,
        subject_type: new.subject_type,
        subject_id: created.subject_id,
        owner_id,
        due_at: created.due_at,
        version: created.version,
    };
    outbox::enqueue_event(conn, lead_id, &event, author.correlation_id.clone()).await?;
    Ok(created)
}

pub async fn find<C: ConnectionTrait>(conn: &C, id: i64) -> Result<task::Model, Error> {
    record::find::<Entity, _>(conn, id).await
}

/// Changes a task; completing it (`status: done`) records who and when,
/// writes the timeline and the `task.completed` event.
pub async fn update<C: ConnectionTrait>(
    conn: &C,
    id: i64,
    patch: TaskPatch,
    if_match: &IfMatch,
    author: &Actor,
) -> Result<task::Model, Error> {
    let new_title = patch.title.as_deref().map(title).transpose()?;
    let new_due = patch.due_at.map(due).transpose()?;
    let new_description = match patch.description.change() {
        None => None,
        Some(value) => Some(description(value)?),
    };
    if let Some(owner_id) = patch.owner_id {
        check_sales_owner(conn, PrincipalId(owner_id)).await?;
    }
    let existing = find(conn, id).await?;
    let subject = SubjectType::parse(&existing.subject_type)
        .ok_or_else(|| Error::Conflict("the task's record is of an unknown kind".into()))?;
    // Locks the lead first, as every lead write does: no erasure can pass
    // between this read and the task's own write. A record erased while
    // this waited took its tasks with it.
    let lead_id = match subject_lead(conn, subject, existing.subject_id).await {
        Err(Error::Invalid(_)) => return Err(Error::NotFound),
        found => found?,
    };
    let now = crate::clock::now();
    let mut fields: Vec<&str> = Vec::new();
    let mut moved: Option<(TaskStatus, TaskStatus)> = None;
    let outcome = record::change::<Entity, _>(conn, id, if_match, |current| {
        let mut sets = Sets::new();
        sets.changed((Column::Title, "title"), new_title.as_ref(), &current.title)
            .changed(
                (Column::Description, "description"),
                new_description.as_ref(),
                &current.description,
            )
            .changed(
                (Column::OwnerId, "owner_id"),
                patch.owner_id.as_ref(),
                &current.owner_id,
            )
            .changed((Column::DueAt, "due_at"), new_due.as_ref(), &current.due_at);
        let from = TaskStatus::parse(&current.status).unwrap_or(TaskStatus::Open);
        moved = None;
        if let Some(to) = patch.status.filter(|to| *to != from) {
            moved = Some((from, to));
            let done = to == TaskStatus::Done;
            let completed_by = if done { author.principal_id } else { None };
            sets.values.push((Column::Status, to.as_str().into()));
            sets.values
                .push((Column::CompletedAt, done.then_some(now).into()));
            sets.values.push((Column::CompletedBy, completed_by.into()));
            sets.fields.push("status");
        }
        fields = sets.fields;
        Ok(sets.values)
    })
    .await?;
    let updated = match outcome {
        Changed::No(current) => return Ok(current),
        Changed::Yes { after, .. } => after,
    };
    let (kind, detail) = match moved {
        Some((_, TaskStatus::Done)) => (
            ActivityKind::TaskCompleted,
            json!({ "task_id": id, "title": updated.title }),
        ),
        Some((_, TaskStatus::Open)) => (
            ActivityKind::TaskReopened,
            json!({ "task_id": id, "title": updated.title }),
        ),
        None => (
            ActivityKind::TaskUpdated,
            json!({ "task_id": id, "fields": fields, "version": updated.version }),
        ),
    };
    on_timeline(conn, &updated, kind, detail, author).await?;
    if let Some((_, TaskStatus::Done)) = moved {
        // Completing a task on a lead is a response to it.
        if let Some(lead_id) = lead_id {
            crate::lead::speed_to_lead::clock::responded(conn, lead_id, now).await?;
        }
        let event = TaskCompleted {
            task_id: id,
            subject_type: subject,
            subject_id: updated.subject_id,
            completed_by: updated.completed_by,
            completed_at: updated.completed_at.unwrap_or(now),
            version: updated.version,
        };
        outbox::enqueue_event(conn, lead_id, &event, author.correlation_id.clone()).await?;
    }
    Ok(updated)
}

/// Which tasks by due time: `today` is the caller's calendar day in
/// `utc_offset`; `overdue` is open and past due; `upcoming` is due after
/// today. Each of them means open tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Today,
    Overdue,
    Upcoming,
}

impl std::str::FromStr for Due {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "today" => Ok(Self::Today),
            "overdue" => Ok(Self::Overdue),
            "upcoming" => Ok(Self::Upcoming),
            _ => Err("must be 'today', 'overdue' or 'upcoming'"),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    pub owner_id: Option<i64>,
    pub status: Option<TaskStatus>,
    pub due: Option<Due>,
    /// Where the caller's day starts and ends, for `due = today`.
    pub utc_offset: Option<FixedOffset>,
    pub subject: Option<(SubjectType, i64)>,
}

/// The start of the day after `now`'s day, at `offset`.
fn end_of_day(now: DateTime<Utc>, offset: FixedOffset) -> DateTime<Utc> {
    let local = now.with_timezone(&offset).date_naive() + Duration::days(1);
    let midnight = local.and_time(NaiveTime::MIN);
    (midnight - Duration::seconds(i64::from(offset.local_minus_utc()))).and_utc()
}

/// Tasks by due time, soonest first (then by id); the cursor continues
/// after the previous page's last task.
pub async fn list<C: ConnectionTrait>(
    conn: &C,
    filter: &TaskFilter,
    limit: u64,
    cursor: Option<&str>,
) -> Result<Page<task::Model>, Error> {
    let mut query = Entity::find();
    if let Some(owner) = filter.owner_id {
        query = query.filter(Column::OwnerId.eq(owner));
    }
    if let Some((subject, id)) = filter.subject {
        query = query
            .filter(Column::SubjectType.eq(subject.as_str()))
            .filter(Column::SubjectId.eq(id));
    }
    let status = match filter.due {
        Some(_) => Some(TaskStatus::Open),
        None => filter.status,
    };
    if filter.due.is_some() && filter.status == Some(TaskStatus::Done) {
        return Err(Error::invalid(
            "status",
            "due lists open tasks; leave status out or ask for open",
        ));
    }
    if let Some(status) = status {
        query = query.filter(Column::Status.eq(status.as_str()));
    }
    let now = crate::clock::now();
    let offset = filter.utc_offset.unwrap_or_else(|| Utc.fix());
    let tomorrow = end_of_day(now, offset);
    match filter.due {
        Some(Due::Today) => {
            let today = tomorrow - Duration::days(1);
            query = query
                .filter(Column::DueAt.gte(today))
                .filter(Column::DueAt.lt(tomorrow));
        }
        Some(Due::Overdue) => query = query.filter(Column::DueAt.lt(now)),
        Some(Due::Upcoming) => query = query.filter(Column::DueAt.gte(tomorrow)),
        None => {}
    }
    if let Some(cursor) = cursor {
        let (due_at, id) = page::due_after(cursor)?;
        query = query.filter(
            Condition::any().add(Column::DueAt.gt(due_at)).add(
                Condition::all()
                    .add(Column::DueAt.eq(due_at))
                    .add(Column::Id.gt(id)),
            ),
        );
    }
    let rows = query
        .order_by_asc(Column::DueAt)
        .order_by_asc(Column::Id)
        .limit(limit + 1)
        .all(conn)
        .await?;
    Ok(Page::from_overfetch(rows, limit, |last| {
        page::due_cursor_of(last.due_at, last.id)
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_day_ends_at_the_callers_midnight() {
        let now = Utc.with_ymd_and_hms(2026, 12, 6, 23, 30, 0).unwrap();
        let utc = FixedOffset::east_opt(0).unwrap();
        assert_eq!(
            end_of_day(now, utc),
            Utc.with_ymd_and_hms(2026, 12, 7, 0, 0, 0).unwrap()
        );
        // 23:30 UTC is already 00:30 on the 7th in Berlin (+01:00).
        let berlin = FixedOffset::east_opt(3600).unwrap();
        assert_eq!(
            end_of_day(now, berlin),
            Utc.with_ymd_and_hms(2026, 12, 7, 23, 0, 0).unwrap()
        );
        // and still the 6th in New York (-05:00), whose day ends at 05:00 UTC.
        let new_york = FixedOffset::west_opt(5 * 3600).unwrap();
        assert_eq!(
            end_of_day(now, new_york),
            Utc.with_ymd_and_hms(2026, 12, 7, 5, 0, 0).unwrap()
        );
    }

    #[test]
    fn due_times_stay_in_the_years_both_databases_store() {
        assert!(due(Utc.with_ymd_and_hms(0, 12, 31, 0, 0, 0).unwrap()).is_err());
        assert!(due(Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap()).is_err());
        assert!(due(Utc.with_ymd_and_hms(2026, 12, 24, 9, 0, 0).unwrap()).is_ok());
    }

    #[test]
    fn titles_are_trimmed_and_bounded() {
        assert_eq!(title("  Call back ").unwrap(), "Call back");
        assert!(title("   ").is_err());
        assert!(title(&"x".repeat(256)).is_err());
    }
}
