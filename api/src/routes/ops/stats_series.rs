//! `GET /api/ops/stats/series`: inbox traffic over the last hour or day.

use actix_web::get;
use actix_web::{HttpResponse, web};
use domain::ops::series::{self, SeriesWindow};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::stats::SeriesQuery;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(stats_series);
}

/// Inbox events received and processed, the duplicate rate, and what
/// reconcile found the webhooks missed, per bucket; of every source or one.
///
/// Buckets are aligned to the clock (whole minutes, quarter hours); the
/// last one is the current, still filling. Every bucket is present, with
/// zeros where nothing happened.
#[utoipa::path(
    operation_id = "ops_stats_series",
    tag = "ops",
    params(SeriesQuery),
    responses(
        (status = 200, description = "The series, oldest bucket first", body = series::Series, example = json!(examples::stats_series())),
        (status = 422, description = "`/problems/validation`: `window` is not `1h` or `24h`"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/stats/series")]
async fn stats_series(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    query: web::Query<SeriesQuery>,
) -> Result<HttpResponse, ApiError> {
    let window = query
        .window
        .as_deref()
        .map_or(Ok(SeriesWindow::Hour), str::parse)
        .map_err(|e: String| ApiError::invalid("window", e))?;
    Ok(HttpResponse::Ok()
        .json(series::series(state.reads.db(), window, query.source.as_deref()).await?))
}
