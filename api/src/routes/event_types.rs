//! `GET /api/event-types`: what subscriptions can receive, with schemas
//! generated from the payload types the outbox writes.

use actix_web::{HttpResponse, web};
use domain::outbound::events::{self, EventTypeInfo};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/event-types", web::get().to(list));
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(list))]
pub struct Api;

#[derive(Serialize, ToSchema)]
struct EventTypeList {
    data: Vec<EventTypeInfo>,
}

/// Every event type a subscription may name, with the JSON Schema of its `data`.
///
/// **Roles:** ops, admin (those who may read subscriptions).
///
/// A delivery's body is `{"type", "timestamp", "data"}`.
#[utoipa::path(
    get,
    path = "/api/event-types",
    operation_id = "list_event_types",
    tag = "subscriptions",
    responses((status = 200, description = "Every event type", body = EventTypeList)),
    security(("bearer" = [])),
)]
async fn list(_: Caller<OpsUp>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(EventTypeList {
        data: events::catalogue(),
    }))
}
