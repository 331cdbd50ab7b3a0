//! `GET /api/ops/stats`: the pipeline per source, as JSON.

use actix_web::{HttpResponse, web};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/ops/stats", web::get().to(stats));
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(stats))]
pub struct Api;

/// The pipeline per source: inbox states, duplicate rates, backlogs.
///
/// **Roles:** ops, admin.
///
/// Computed from the tables, so every node answers the same. Windows count
/// events first received in the window and all their deliveries; the
/// duplicate rate is duplicates / deliveries.
#[utoipa::path(
    get,
    path = "/api/ops/stats",
    operation_id = "ops_stats",
    tag = "ops",
    responses((status = 200, description = "Per-source stats", body = domain::ops::stats::Stats)),
    security(("bearer" = [])),
)]
async fn stats(_: Caller<OpsUp>, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(domain::ops::stats::collect(state.reads.db()).await?))
}
