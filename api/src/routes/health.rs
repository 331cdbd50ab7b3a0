//! Liveness and readiness probes.

use actix_web::get;
use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::state::AppState;
use crate::routes::Routes;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(healthz).service(readyz);
}

/// Liveness: the process is up.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    operation_id = "healthz",
    tag = "meta",
    responses((status = 200, description = "Up", body = Object, example = json!({"status": "ok"}))),
)]
#[get("/healthz")]
async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Readiness: the process can serve: its database answers, and its keys
/// open every stored secret.
///
/// **Roles:** anyone (no token).
#[utoipa::path(
    operation_id = "readyz",
    tag = "meta",
    responses(
        (status = 200, description = "Ready", body = Object, example = json!({"status": "ready", "database": "ok"})),
        (status = 503, description = "`/problems/unavailable`: the database does not answer within 2 s (`detail` names the host and port tried and why: connection refused, unknown host, authentication failed), or a stored secret does not open with the configured keys (the log names the key id; checked at most every 10 s)"),
    ),
)]
#[get("/readyz")]
async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    crate::storage::check_reachable(&state.db)
        .await
        .map_err(|err| {
            tracing::warn!(error = %err, "readiness check failed");
            ApiError::DatabaseUnreachable(err.to_string())
        })?;
    let keys = &state.http.keyring;
    let mismatch = state
        .key_health
        .mismatch(&state.db, keys)
        .await
        .map_err(|err| {
            tracing::warn!(error = %err, "readiness check failed");
            ApiError::Unavailable
        })?;
    if mismatch.is_some() {
        return Err(ApiError::KeysDoNotOpen);
    }
    Ok(HttpResponse::Ok().json(json!({ "status": "ready", "database": "ok" })))
}
