//! Pushing inbox jobs. A push is never inside the inbox transaction (sea-orm
//! does not expose its sqlx transaction), so a lost push is expected and the
//! sweeper covers it.

use std::time::SystemTime;

use apalis::prelude::{TaskBuilder, TaskSink};
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;
use chrono::{DateTime, Utc};
use sea_orm::{DatabaseBackend, DatabaseConnection};
use serde::{Deserialize, Serialize};

use crate::storage::StorageError;

/// Named explicitly: apalis defaults to the Rust type path, and a rename
/// would strand queued jobs.
pub const PROCESS_INBOX_EVENT: &str = "leadpipe.process-inbox-event";

/// The job: process one inbox event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInboxEvent {
    pub inbox_event_id: i64,
}

/// The inbox job queue, in the database the app already uses.
#[derive(Clone)]
pub enum InboxQueue {
    Sqlite(SqliteStorage<ProcessInboxEvent>),
    Postgres(PostgresStorage<ProcessInboxEvent>),
}

impl std::fmt::Debug for InboxQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Sqlite(_) => "InboxQueue::Sqlite",
            Self::Postgres(_) => "InboxQueue::Postgres",
        })
    }
}

#[derive(Debug, thiserror::Error)]
#[error("could not push the job for inbox event {id}: {cause}")]
pub struct PushError {
    pub id: i64,
    cause: String,
}

impl InboxQueue {
    /// Shares `db`'s pool, so jobs and data use the same connections.
    pub fn for_connection(db: &DatabaseConnection) -> Result<Self, StorageError> {
        match db.get_database_backend() {
            DatabaseBackend::Sqlite => Ok(Self::Sqlite(
                SqliteStorage::new(db.get_sqlite_connection_pool())
                    .with_config(apalis_sqlite::Config::default().queue(PROCESS_INBOX_EVENT)),
            )),
            DatabaseBackend::Postgres => Ok(Self::Postgres(
                PostgresStorage::new(db.get_postgres_connection_pool())
                    .with_config(apalis_postgres::Config::default().queue(PROCESS_INBOX_EVENT)),
            )),
            other => Err(StorageError::Unsupported(other)),
        }
    }

    /// Queues processing of event `id`, not before `not_before` (default: now).
    pub async fn push(&self, id: i64, not_before: Option<DateTime<Utc>>) -> Result<(), PushError> {
        let mut task = TaskBuilder::new(ProcessInboxEvent { inbox_event_id: id })
            // The inbox row decides about retries; a job that failed to
            // even claim its event is re-pushed by the sweeper.
            .max_attempts(1);
        if let Some(at) = not_before {
            task = task.run_at_timestamp(ceil_unix_secs(at));
        }
        let task = task.build();
        let failed = |cause: String| PushError { id, cause };
        match self {
            Self::Sqlite(storage) => storage
                .clone()
                .push_task(task)
                .await
                .map_err(|e| failed(e.to_string())),
            Self::Postgres(storage) => storage
                .clone()
                .push_task(task)
                .await
                .map_err(|e| failed(e.to_string())),
        }
    }
}

/// apalis schedules in whole seconds; rounding up keeps a job from running
/// before the event's `next_attempt_at` (its claim would then find it not due).
fn ceil_unix_secs(at: DateTime<Utc>) -> u64 {
    let secs = at.timestamp() + i64::from(at.timestamp_subsec_nanos() > 0);
    u64::try_from(secs).unwrap_or_else(|_| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn schedule_rounds_up_to_the_second() {
        let whole = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        assert_eq!(ceil_unix_secs(whole), 1_700_000_000);
        let later = Utc.timestamp_opt(1_700_000_000, 1).unwrap();
        assert_eq!(ceil_unix_secs(later), 1_700_000_001);
    }
}
