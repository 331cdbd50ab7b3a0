//! What `/api/ops/stats/series` takes.

use domain::ops::series::SeriesWindow;
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    /// `1h` (default: 60 one-minute buckets) or `24h` (96 buckets of 15 minutes).
    #[param(value_type = Option<SeriesWindow>)]
    pub window: Option<String>,
}
