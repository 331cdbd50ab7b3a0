//! One module per resource: its request/response types, handlers and routes.

use actix_web::web;

mod crm;
mod deliveries;
mod front;
mod health;
mod imports;
pub mod leads;
pub mod openapi;
pub mod ops_inbox;
mod reconcile;
mod sources;
mod stats;
mod subscriptions;
mod trace;
mod webhooks;

/// Every route; `/metrics` only when it is not on its own listener.
pub fn configure(cfg: &mut web::ServiceConfig, metrics: bool) {
    front::configure(cfg);
    health::configure(cfg);
    if metrics {
        crate::metrics::configure(cfg);
    }
    crm::configure(cfg);
    imports::configure(cfg);
    leads::configure(cfg);
    subscriptions::configure(cfg);
    deliveries::configure(cfg);
    stats::configure(cfg);
    trace::configure(cfg);
    sources::configure(cfg);
    webhooks::configure(cfg);
    ops_inbox::configure(cfg);
    reconcile::configure(cfg);
    openapi::configure(cfg);
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
        deliveries::Api::openapi(),
        stats::Api::openapi(),
        trace::Api::openapi(),
        sources::Api::openapi(),
        webhooks::Api::openapi(),
        ops_inbox::Api::openapi(),
        reconcile::Api::openapi(),
    ]
}
