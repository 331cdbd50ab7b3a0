//! What the API shows of reconcile runs and rejected records, field by
//! field, so a column kept for the scheduler's own use stays off the wire.

use chrono::{DateTime, Utc};
use domain::entities::{reconcile_rejected, reconcile_run};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One reconcile run of a source: its range, its counts (committed page by
/// page, so a running run shows progress), its state and error.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ReconcileRun)]
pub struct ReconcileRunOut {
    pub id: i64,
    pub source: String,
    pub state: String,
    pub dry_run: bool,
    pub trigger: String,
    pub cursor_start: Option<String>,
    /// The cursor after the last fully processed page.
    pub cursor: Option<String>,
    pub pages: i64,
    pub fetched: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    /// Records whose natural key was erased (a tombstone): nothing written.
    pub suppressed: i64,
    pub rejected: i64,
    pub missed: i64,
    pub error: Option<String>,
    pub started_by: Option<i64>,
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub heartbeat_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<&reconcile_run::Model> for ReconcileRunOut {
    fn from(m: &reconcile_run::Model) -> Self {
        Self {
            id: m.id,
            source: m.source.clone(),
            state: m.state.clone(),
            dry_run: m.dry_run,
            trigger: m.trigger.clone(),
            cursor_start: m.cursor_start.clone(),
            cursor: m.cursor.clone(),
            pages: m.pages,
            fetched: m.fetched,
            created: m.created,
            updated: m.updated,
            unchanged: m.unchanged,
            stale: m.stale,
            suppressed: m.suppressed,
            rejected: m.rejected,
            missed: m.missed,
            error: m.error.clone(),
            started_by: m.started_by,
            started_at: m.started_at,
            heartbeat_at: m.heartbeat_at,
            finished_at: m.finished_at,
        }
    }
}

/// A record a reconcile page could not map to a lead, kept with its reason
/// so it can be re-applied once the mapping is fixed.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ReconcileRejected)]
pub struct ReconcileRejectedOut {
    pub id: i64,
    pub source: String,
    /// The run that rejected it last.
    pub run_id: i64,
    /// The record as the sender's pull API returned it.
    #[schema(value_type = Object)]
    pub record: serde_json::Value,
    /// Why it did not map (field names and pointers, never values).
    pub reason: String,
    /// `rejected`, or `resolved` once a retry applied it.
    pub state: String,
    pub retries: i32,
    /// The lead it became, once resolved.
    pub lead_id: Option<i64>,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: DateTime<Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub resolved_at: Option<DateTime<Utc>>,
}

impl From<reconcile_rejected::Model> for ReconcileRejectedOut {
    fn from(m: reconcile_rejected::Model) -> Self {
        Self {
            id: m.id,
            source: m.source,
            run_id: m.run_id,
            record: m.record,
            reason: m.reason,
            state: m.state,
            retries: m.retries,
            lead_id: m.lead_id,
            created_at: m.created_at,
            updated_at: m.updated_at,
            resolved_at: m.resolved_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;

    use super::*;
    use crate::wire::check::assert_documented;

    #[test]
    fn a_run_shows_its_documented_fields_and_not_its_tick() {
        let now = Utc::now();
        let row = reconcile_run::Model {
            id: 1,
            source: "crm".into(),
            state: "done".into(),
            dry_run: false,
            trigger: "cron".into(),
            tick_key: Some("internal-tick".into()),
            cursor_start: None,
            cursor: Some("c2".into()),
            pages: 1,
            fetched: 2,
            created: 1,
            updated: 1,
            unchanged: 0,
            stale: 0,
            suppressed: 0,
            rejected: 0,
            missed: 0,
            error: None,
            started_by: None,
            started_at: now,
            heartbeat_at: now,
            finished_at: Some(now),
        };
        assert_documented(&ReconcileRunOut::from(&row), &["internal-tick"]);
    }

    #[test]
    fn a_rejected_record_shows_its_documented_fields_and_not_its_hash() {
        let now = Utc::now();
        let row = reconcile_rejected::Model {
            id: 1,
            source: "crm".into(),
            run_id: 1,
            record: json!({"id": 5}),
            record_sha256: "internal-sha".into(),
            key_hash: Some("internal-key-hash".into()),
            reason: "no email".into(),
            state: "rejected".into(),
            retries: 0,
            lead_id: None,
            created_at: now,
            updated_at: now,
            resolved_at: None,
        };
        assert_documented(
            &ReconcileRejectedOut::from(row),
            &["internal-sha", "internal-key-hash"],
        );
    }
}

/// The optional body of a start.
#[derive(Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartIn {
    /// Fetch and compare only: what would be created or updated.
    #[serde(default)]
    pub dry_run: bool,
    /// Start from this cursor instead of the source's stored one.
    pub since: Option<String>,
    /// Start from the very beginning (no `since` on the first request).
    #[serde(default)]
    pub from_start: bool,
}

#[derive(Serialize, Deserialize, utoipa::IntoParams)]
pub struct Filter {
    /// Only runs of this source.
    pub source: Option<String>,
    /// `running`, `done` or `failed`.
    pub state: Option<String>,
}

// A run's counts and cursor: no record of the run is about a person.
crate::wire::about::about_nobody!(ReconcileRunOut);
