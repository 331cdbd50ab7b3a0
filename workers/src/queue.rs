//! Pushing jobs. A push is never inside the transaction that wrote the work
//! (sea-orm does not expose its sqlx transaction, and on SQLite the jobs
//! have a file of their own: [`crate::storage`]), so a lost push is expected
//! and the sweeper covers it.

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
pub const PROCESS_LEADS: &str = "leadpipe.process-leads";

/// The job: process one inbox event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInboxEvent {
    pub inbox_event_id: i64,
}

/// The job: drain the lead-processing backlog. One job covers every lead
/// ready when it runs, so a burst costs no job row per lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessLeads {
    pub cause: LeadJobCause,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeadJobCause {
    /// A failed lead's retry comes due.
    Retry,
    /// The sweeper found leads nothing took.
    Sweep,
}

#[derive(Debug, thiserror::Error)]
#[error("could not push the job for {what}: {cause}")]
pub struct PushError {
    what: String,
    cause: String,
}

/// A job queue in the database the app already uses, one per job type.
macro_rules! job_queue {
    ($(#[$doc:meta])* $queue:ident, $job:ty, $name:expr) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub enum $queue {
            Sqlite(SqliteStorage<$job>),
            Postgres(PostgresStorage<$job>),
        }

        impl std::fmt::Debug for $queue {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(match self {
                    Self::Sqlite(_) => concat!(stringify!($queue), "::Sqlite"),
                    Self::Postgres(_) => concat!(stringify!($queue), "::Postgres"),
                })
            }
        }

        impl $queue {
            /// The queue of `db`'s jobs: on PostgreSQL in `db`'s pool, on
            /// SQLite through the jobs file's one connection.
            pub fn for_connection(db: &DatabaseConnection) -> Result<Self, StorageError> {
                match db.get_database_backend() {
                    DatabaseBackend::Sqlite => Ok(Self::Sqlite(
                        SqliteStorage::new(&crate::storage::sqlite_job_pool(db))
                            .with_config(apalis_sqlite::Config::default().queue($name)),
                    )),
                    DatabaseBackend::Postgres => Ok(Self::Postgres(
                        PostgresStorage::new(db.get_postgres_connection_pool())
                            .with_config(apalis_postgres::Config::default().queue($name)),
                    )),
                    other => Err(StorageError::Unsupported(other)),
                }
            }

            /// Queues `job`, not before `not_before` (default: now). The
            /// rows it works on decide about retries, so the job runs once.
            async fn enqueue(
                &self,
                job: $job,
                not_before: Option<DateTime<Utc>>,
            ) -> Result<(), String> {
                let mut task = TaskBuilder::new(job).max_attempts(1);
                if let Some(at) = not_before {
                    task = task.run_at_timestamp(ceil_unix_secs(at));
                }
                let task = task.build();
                match self {
                    // The jobs file's one connection queues this behind
                    // apalis's own writes, not the busy handler.
                    Self::Sqlite(storage) => storage
                        .clone()
                        .push_task(task)
                        .await
                        .map_err(|e| e.to_string()),
                    Self::Postgres(storage) => storage
                        .clone()
                        .push_task(task)
                        .await
                        .map_err(|e| e.to_string()),
                }
            }
        }
    };
}

job_queue!(
    /// The inbox job queue.
    InboxQueue,
    ProcessInboxEvent,
    PROCESS_INBOX_EVENT
);
job_queue!(
    /// The lead-processing job queue.
    LeadQueue,
    ProcessLeads,
    PROCESS_LEADS
);

impl InboxQueue {
    /// Queues processing of event `id`, not before `not_before` (default: now).
    pub async fn push(&self, id: i64, not_before: Option<DateTime<Utc>>) -> Result<(), PushError> {
        // A job that failed to even claim its event is re-pushed by the sweeper.
        self.enqueue(ProcessInboxEvent { inbox_event_id: id }, not_before)
            .await
            .map_err(|cause| PushError {
                what: format!("inbox event {id}"),
                cause,
            })
    }
}

impl LeadQueue {
    /// Queues a drain of the lead backlog, not before `not_before`.
    pub async fn push(
        &self,
        cause: LeadJobCause,
        not_before: Option<DateTime<Utc>>,
    ) -> Result<(), PushError> {
        self.enqueue(ProcessLeads { cause }, not_before)
            .await
            .map_err(|cause| PushError {
                what: "lead processing".into(),
                cause,
            })
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
