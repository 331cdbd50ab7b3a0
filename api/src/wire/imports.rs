//! What the API shows of an import run, field by field, so a column kept for
//! the importer's own use (its identity key) stays off the wire.

use chrono::{DateTime, Utc};
use domain::entities::import_run;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

// The run's own fields; `RunOut` adds its report's address.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ImportRun {
    pub id: i64,
    pub source: String,
    pub file_name: Option<String>,
    pub format: String,
    pub file_hash: String,
    #[schema(value_type = Object)]
    pub mapping: serde_json::Value,
    pub dry_run: bool,
    pub state: String,
    pub rows: i64,
    pub created: i64,
    pub updated: i64,
    pub unchanged: i64,
    pub stale: i64,
    /// Records whose natural key was erased (a tombstone): nothing written.
    pub suppressed: i64,
    pub rejected: i64,
    pub bytes_total: Option<i64>,
    pub bytes_read: i64,
    pub error: Option<String>,
    pub started_by: Option<i64>,
    #[schema(value_type = String, format = DateTime)]
    pub started_at: DateTime<Utc>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: DateTime<Utc>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<import_run::Model> for ImportRun {
    fn from(m: import_run::Model) -> Self {
        Self {
            id: m.id,
            source: m.source,
            file_name: m.file_name,
            format: m.format,
            file_hash: m.file_hash,
            mapping: m.mapping,
            dry_run: m.dry_run,
            state: m.state,
            rows: m.rows,
            created: m.created,
            updated: m.updated,
            unchanged: m.unchanged,
            stale: m.stale,
            suppressed: m.suppressed,
            rejected: m.rejected,
            bytes_total: m.bytes_total,
            bytes_read: m.bytes_read,
            error: m.error,
            started_by: m.started_by,
            started_at: m.started_at,
            updated_at: m.updated_at,
            finished_at: m.finished_at,
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
    fn a_run_shows_its_documented_fields_and_not_its_identity() {
        let now = Utc::now();
        let row = import_run::Model {
            id: 1,
            source: "web".into(),
            file_name: Some("leads.csv".into()),
            format: "csv".into(),
            file_hash: "hash".into(),
            identity: "internal-identity".into(),
            mapping: json!({}),
            dry_run: false,
            state: "done".into(),
            rows: 1,
            created: 1,
            updated: 0,
            unchanged: 0,
            stale: 0,
            suppressed: 0,
            rejected: 0,
            bytes_total: Some(10),
            bytes_read: 10,
            error: None,
            started_by: Some(3),
            started_at: now,
            updated_at: now,
            finished_at: Some(now),
        };
        assert_documented(&ImportRun::from(row), &["internal-identity"]);
    }
}

/// An import run and its counts.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ImportRunOut)]
pub struct RunOut {
    #[serde(flatten)]
    pub run: ImportRun,
    /// `GET` it for the per-row report (CSV).
    pub report_url: String,
}

impl From<import_run::Model> for RunOut {
    fn from(run: import_run::Model) -> Self {
        let report_url = format!("/api/imports/{}/report.csv", run.id);
        Self {
            run: run.into(),
            report_url,
        }
    }
}

#[derive(Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StartParams {
    /// The `source` of every imported lead.
    pub source: String,
    /// `source_ref=Column,email=Column,…` by header name (or NDJSON key);
    /// fields: `source_ref`, `email`, `phone`, `name`, `company`,
    /// `source_updated_at`. Unmapped fields are read from a column of their
    /// own name; other columns go to `payload`.
    pub map: Option<String>,
    /// Validate and count only; nothing is written.
    #[serde(default)]
    pub dry_run: bool,
    /// Kept on the run for the operator's benefit.
    pub file_name: Option<String>,
}
