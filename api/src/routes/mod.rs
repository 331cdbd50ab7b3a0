//! One module per resource: its request/response types, handlers and routes.

use actix_web::web;

mod crm;
mod front;
mod health;
mod imports;
pub mod leads;
pub mod ops;
mod sources;
mod subscriptions;
mod webhooks;

/// Every route; `/metrics` only when it is not on its own listener.
pub fn configure(cfg: &mut web::ServiceConfig, metrics: bool) {
    front::configure(cfg);
    health::configure(cfg);
    if metrics {
        crate::http::metrics::configure(cfg);
    }
    crm::configure(cfg);
    imports::configure(cfg);
    leads::configure(cfg);
    subscriptions::configure(cfg);
    ops::deliveries::configure(cfg);
    ops::stats::configure(cfg);
    ops::trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops::inbox::configure(cfg);
    ops::reconcile::configure(cfg);
    crate::openapi::configure(cfg);
}

/// Each module's part of the OpenAPI document (`GET /openapi.json`). A
/// route missing here, or a handler without `#[utoipa::path]`, fails the
/// `openapi` test.
pub fn openapi_parts() -> Vec<utoipa::openapi::OpenApi> {
    use utoipa::OpenApi;
    vec![
        front::Api::openapi(),
        health::Api::openapi(),
        crm::openapi(),
        imports::Api::openapi(),
        leads::Api::openapi(),
        subscriptions::Api::openapi(),
        ops::deliveries::Api::openapi(),
        ops::stats::Api::openapi(),
        ops::trace::Api::openapi(),
        sources::Api::openapi(),
        webhooks::Api::openapi(),
        ops::inbox::Api::openapi(),
        ops::reconcile::Api::openapi(),
    ]
}
