//! `GET /api/ops/trace/{correlation_id}`: follow one request through the pipeline.

use actix_web::{HttpResponse, web};

use crate::auth::{Authenticated, OPS_AND_UP};
use crate::error::ApiError;
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/ops/trace/{correlation_id}", web::get().to(trace));
}

async fn trace(
    caller: Authenticated,
    state: web::Data<AppState>,
    correlation_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(OPS_AND_UP)?;
    let correlation_id = correlation_id.into_inner();
    let trace = domain::trace::collect(&state.db, &correlation_id)
        .await
        .map_err(|e| match e {
            domain::Error::NotFound => {
                ApiError::NotFound(format!("nothing carries correlation id '{correlation_id}'"))
            }
            other => other.into(),
        })?;
    Ok(HttpResponse::Ok().json(trace))
}
