//! What `/api/ops/reconcile/rejected` takes and shows (the records themselves are
//! `wire::reconcile::ReconcileRejectedOut`).

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// Only records of this source.
    pub source: Option<String>,
    /// `rejected` (waiting for a retry) or `resolved`.
    pub state: Option<String>,
}

/// Which rejected records to retry: one source's, or all.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReconcileRejectedRetryIn)]
pub struct RetryIn {
    pub source: Option<String>,
}

/// What a retry came to.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ReconcileRejectedRetryOut)]
pub struct RetryOut {
    pub retried: u64,
    /// Applied now, each once, and marked `resolved`.
    pub resolved: u64,
    /// Still do not map; their reason is updated.
    pub still_rejected: u64,
}
