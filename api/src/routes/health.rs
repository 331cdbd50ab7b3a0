//! Liveness and readiness probes.

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::error::ApiError;
use crate::startup::AppState;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz));
}

/// The process is up.
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// The process can serve: its database answers.
async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.db.ping().await.map_err(|err| {
        tracing::warn!(error = %err, "readiness check failed");
        ApiError::Unavailable
    })?;
    Ok(HttpResponse::Ok().json(json!({ "status": "ready", "database": "ok" })))
}
