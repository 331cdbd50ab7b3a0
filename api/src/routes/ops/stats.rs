//! `GET /api/ops/stats`: the pipeline per source, as JSON.

use actix_web::get;
use actix_web::{HttpResponse, web};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(stats);
}

/// The pipeline per source: inbox states, duplicate rates, backlogs.
///
/// Computed from the tables, so every node answers the same. Windows count
/// events first received in the window and all their deliveries; the
/// duplicate rate is duplicates / deliveries.
#[utoipa::path(
    operation_id = "ops_stats",
    tag = "ops",
    responses((status = 200, description = "Per-source stats", body = domain::ops::stats::Stats, example = json!(examples::stats()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/stats")]
async fn stats(_: Caller<OpsUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(domain::ops::stats::collect(state.reads.db()).await?))
}
