//! What `/api/ops/lead-processing` takes and shows: failed lead processing.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use domain::entities::lead_processing_failure;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The processing of one lead that failed, as ops see it: ids, counts and
/// the error, nothing of the person.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = LeadProcessingFailure)]
pub struct FailureOut {
    pub lead_id: i64,
    /// The lead version that failed; a newer version starts afresh.
    pub version: i64,
    /// `failed` (retried at `next_attempt_at`) or `dead` (given up).
    #[schema(pattern = "^(failed|dead)$")]
    pub state: String,
    /// Attempts at this version.
    pub attempts: i32,
    /// The last error, or for `dead` why it was given up.
    pub last_error: String,
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the last attempt failed.
    pub updated_at: DateTime<Utc>,
}

impl From<lead_processing_failure::Model> for FailureOut {
    fn from(f: lead_processing_failure::Model) -> Self {
        Self {
            lead_id: f.lead_id,
            version: f.version,
            state: f.state,
            attempts: f.attempts,
            last_error: f.last_error,
            next_attempt_at: f.next_attempt_at,
            updated_at: f.updated_at,
        }
    }
}

#[derive(Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only failures in this state: `failed` or `dead`.
    #[param(pattern = "^(failed|dead)$")]
    pub state: Option<String>,
}

/// One lead (`lead_id`), or every lead in `state` up to `limit`.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LeadProcessingRetryIn)]
pub struct RetryIn {
    /// One lead whose processing is `failed` or `dead`; leave out the
    /// other fields.
    pub lead_id: Option<i64>,
    /// Bulk: `dead` (default) or `failed` (its retry brought forward).
    #[schema(pattern = "^(failed|dead)$")]
    pub state: Option<String>,
    /// Bulk: at most this many leads, lowest id first (1–1000, default 100).
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<u64>,
    /// Bulk: only count them.
    #[serde(default)]
    pub dry_run: bool,
}

/// What matched, and what processing the retried leads came to.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = LeadProcessingRetryOut)]
pub struct RetryOut {
    pub dry_run: bool,
    /// Leads with a failure in the state asked for (more than `limit` when
    /// a bulk retry left some: send it again).
    pub matched: u64,
    /// Leads processed again.
    pub retried: u64,
    /// The retried leads by outcome: `processed`, `failed` (the workers
    /// retry it later) or `dead`.
    pub results: BTreeMap<String, u64>,
}
