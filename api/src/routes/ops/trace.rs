//! `GET /api/ops/trace/{correlation_id}`: follow one request through the pipeline.

use actix_web::get;
use actix_web::{HttpResponse, web};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::trace::TraceOut;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(trace);
}

/// Everything that carries one correlation id, in time order.
///
/// The leads the correlated work touched (as they are now), and its timeline
/// entries, outbox events and their deliveries.
#[utoipa::path(
    operation_id = "trace",
    tag = "ops",
    params(("correlation_id" = String, Path, description = "An `X-Request-Id`")),
    responses(
        (status = 200, description = "The trace", body = TraceOut, example = json!(examples::trace())),
        (status = 404, description = "`/problems/not-found`: nothing carries this correlation id"),
    ),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/ops/trace/{correlation_id}")]
async fn trace(
    _: Caller<OpsUp>,
    state: web::Data<AppState>,
    correlation_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let correlation_id = correlation_id.into_inner();
    let trace = domain::ops::trace::collect(state.reads.db(), &correlation_id)
        .await
        .map_err(|e| match e {
            domain::Error::NotFound => {
                ApiError::NotFound(format!("nothing carries correlation id '{correlation_id}'"))
            }
            other => other.into(),
        })?;
    Ok(HttpResponse::Ok().json(TraceOut::from(trace)))
}
