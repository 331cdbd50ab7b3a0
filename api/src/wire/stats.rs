//! What `/api/ops/stats/series` takes.

use domain::ops::series::SeriesWindow;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

#[derive(Serialize, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    /// `1h` (default: 60 one-minute buckets) or `24h` (96 buckets of 15 minutes).
    #[param(value_type = Option<SeriesWindow>)]
    pub window: Option<String>,
    /// Count one source only (default: every source).
    pub source: Option<String>,
}
