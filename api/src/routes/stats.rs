//! `GET /api/ops/stats`: the pipeline per source, as JSON.

use actix_web::{HttpResponse, web};

use crate::auth::{Authenticated, OPS_AND_UP};
use crate::error::ApiError;
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/ops/stats", web::get().to(stats));
}

async fn stats(
    caller: Authenticated,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    Ok(HttpResponse::Ok().json(domain::stats::collect(&state.db).await?))
}
