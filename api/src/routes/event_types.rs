//! `GET /api/event-types`: what subscriptions can receive, with schemas
//! generated from the payload types the outbox writes.

use actix_web::HttpResponse;
use actix_web::get;
use domain::outbound::events::{self};

use crate::http::auth::{Caller, OpsUp};
use crate::http::error::ApiError;
use crate::openapi::examples;
use crate::routes::Routes;
use crate::wire::event_types::EventTypeList;

pub fn configure(cfg: &mut Routes<'_>) {
    cfg.service(list);
}

/// Every event type a subscription may name, with the JSON Schema of its `data`.
///
/// A delivery's body is `{"type", "timestamp", "data"}`.
#[utoipa::path(
    operation_id = "list_event_types",
    tag = "subscriptions",
    responses((status = 200, description = "Every event type", body = EventTypeList, example = json!(examples::event_types()))),
    security(("bearer" = ["ops", "admin"])),
)]
#[get("/api/event-types")]
async fn list(_: Caller<OpsUp>) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(EventTypeList {
        data: events::catalogue(),
    }))
}
